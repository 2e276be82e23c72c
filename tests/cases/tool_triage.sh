# variants: plain asan
# Leak triage: `leaks --since` lists exactly the growth since a baseline (stacks matched by
# frames, build id before path); --ignore / --suppress / $NPUPOOL_SUPPRESS leave out the stacks
# with a matching frame and count them exactly; several reports (ranks) are listed per rank with
# the ranks that hold each site, and `summary` of several reports has one row per rank and the
# totals.  Figures are checked against jq sums over the fixtures (tests/fixtures/ranks/).
. "$ROOT/tests/lib.sh"
NP="$ROOT/$BUILD/npupool"
[ -x "$NP" ] || fail "$NP not built"
cd "$ROOT"
unset NPUPOOL_SUPPRESS
R=tests/fixtures/ranks
T=$TMPDIR_CASE
mib() { jq -n "$1 / 1048576"; }

# ---- --since ---------------------------------------------------------------------------------
out=$("$NP" leaks $R/r1_later.json --since $R/r1_early.json) || fail "leaks --since: exit $?"
echo "$out"
echo "$out" | head -1 | grep -q "2 of 2 sites, +4 allocations, +20.0 MiB" || fail "since header"
echo "$out" | grep -q "kv_cache_grow (kv.c:33): +16.0 MiB in +2 allocations" || fail "kv growth"
echo "$out" | grep -q "(now 24.0 MiB in 3, was 8.0 MiB in 1)" || fail "kv now/was"
echo "$out" | grep -q "staging_buffer (io.c:19): +4.0 MiB in +2 allocations" || fail "new site"
echo "$out" | grep -q "+2 allocations (new)" || fail "new stack"
echo "$out" | grep -qE "alloc_weights|model_scratch" && fail "unchanged stacks listed"
# the growth equals the byte sums of the two reports (nothing shrank between them)
want=$(jq -s '([.[1].leaks[].bytes] | add) - ([.[0].leaks[].bytes] | add)' $R/r1_early.json $R/r1_later.json)
[ "$(mib "$want")" = 20 ] || fail "fixture growth is $want"
rc=0; "$NP" leaks $R/r1_later.json --since $R/r1_early.json --fail-on-leak >/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "--since --fail-on-leak: exit $rc, expected 1"
"$NP" leaks $R/r1.json --since $R/r1.json --fail-on-leak >"$T/self" || fail "a report since itself fails"
grep -q "0 of 0 sites" "$T/self" || fail "a report since itself lists something"
# as diff sees it: the planted slow leak of report_old -> report_new, and nothing else
"$NP" leaks tests/fixtures/report_new.json --since tests/fixtures/report_old.json >"$T/d" || fail "since old"
grep -q "1 of 1 sites, +60 allocations, +60.0 MiB" "$T/d" || { cat "$T/d"; fail "slow leak growth"; }
# frames match by build id: another path for the same build matches, another build does not
jq '(.leaks[].frames[] | select(.module == "/opt/app/bin/trainer")).module = "/srv/other/trainer"' \
    $R/r1_early.json >"$T/moved.json"
"$NP" leaks $R/r1_later.json --since "$T/moved.json" | head -1 | grep -q "2 of 2 sites, +4 allocations" \
    || fail "a moved binary with the same build id does not match"
jq '(.leaks[].frames[] | select(.module == "/opt/app/bin/trainer")).build_id = "0123"' \
    $R/r1_early.json >"$T/rebuilt.json"
"$NP" leaks $R/r1_later.json --since "$T/rebuilt.json" | grep -q "alloc_weights" \
    || fail "another build of the binary must not match"

# ---- --ignore, --suppress, NPUPOOL_SUPPRESS ------------------------------------------------------
R0=$R/r0.json
total=$(jq '[.leaks[].bytes] | add' $R0)
count=$(jq '[.leaks[].count] | add' $R0)
check_hidden() { # WANT_STACKS WANT_BYTES ARGS...: suppressed counts, and listed + hidden = total
    local ws=$1 wb=$2; shift 2
    "$NP" leaks $R0 "$@" >"$T/s" || fail "leaks $*: exit $?"
    grep -q "^suppressed: $ws stacks\?, " "$T/s" || { cat "$T/s"; fail "leaks $*: not $ws stacks suppressed"; }
    grep -q "^suppressed: $ws stacks\?, $wb in" "$T/s" || { cat "$T/s"; fail "leaks $*: not $wb suppressed"; }
    local listed hidden
    listed=$(sed -n '1s/.* sites, \([0-9]*\) allocations, .*/\1/p' "$T/s")
    hidden=$(sed -n 's/^suppressed: .* in \([0-9]*\) allocations\? (.*/\1/p' "$T/s")
    [ $((listed + hidden)) -eq "$count" ] || fail "leaks $*: $listed listed + $hidden suppressed != $count"
    echo "leaks $*: $listed allocations listed, $hidden ($wb) suppressed"
}
check_hidden 1 "256.0 MiB" --ignore alloc_weights
check_hidden 1 "256.0 MiB" --ignore train_step                # any frame of the stack
check_hidden 1 "16.0 MiB" --ignore 'module:libkv.so'          # module by file name
check_hidden 1 "16.0 MiB" --ignore libkv.so                   # no prefix: function or module
check_hidden 1 "16.0 MiB" --ignore 'module:/opt/app/lib/libkv*'  # module by path
check_hidden 2 "16.0 MiB" --ignore 'module:/opt/app/lib/*'    # kv and scratch (4 KiB)
check_hidden 3 "272.0 MiB" --ignore main                       # every stack has main
"$NP" leaks $R0 --ignore 'function:libkv.so' | grep -q "^suppressed: nothing (1 pattern)" \
    || fail "function: must not match a module"
"$NP" leaks $R0 --ignore 'module:kv_cache_grow' | grep -q "^suppressed: nothing" \
    || fail "module: must not match a function"
"$NP" leaks $R0 --ignore 'alloc_weight' | grep -q "^suppressed: nothing" \
    || fail "a glob matches the whole name, not a part"
[ "$(jq '[.leaks[] | select(.frames[0].function == "alloc_weights") | .bytes] | add' $R0)" = 268435456 ] \
    || fail "fixture weights bytes"
[ "$total" = $((268435456 + 16777216 + 4096)) ] || fail "fixture total $total"
# the file: per-pattern lines naming file:line; $NPUPOOL_SUPPRESS is read when --suppress is not given
"$NP" leaks $R0 --suppress tests/fixtures/weights.supp >"$T/f" || fail "--suppress"
grep -q "^suppressed: 2 stacks, 256.0 MiB in 5 allocations (2 of 2 patterns matched)" "$T/f" || { cat "$T/f"; fail "file counts"; }
grep -q "  by tests/fixtures/weights.supp:3 'function:alloc_weights': 1 stack, 256.0 MiB in 4 allocations" "$T/f" || fail "per-pattern line"
grep -q "  by tests/fixtures/weights.supp:6 'module:/opt/app/lib/libmodel\*.so': 1 stack, 4.0 KiB in 1 allocation" "$T/f" || fail "per-pattern line 2"
NPUPOOL_SUPPRESS=tests/fixtures/weights.supp "$NP" leaks $R0 >"$T/e" || fail "NPUPOOL_SUPPRESS"
cmp -s "$T/f" "$T/e" || fail "NPUPOOL_SUPPRESS differs from --suppress"
printf 'kv_cache_grow\n' >"$T/kv.supp"
NPUPOOL_SUPPRESS=tests/fixtures/weights.supp "$NP" leaks $R0 --suppress "$T/kv.supp" | \
    grep -q "^suppressed: 1 stack, 16.0 MiB in 2 allocations" || fail "--suppress must replace \$NPUPOOL_SUPPRESS"
NPUPOOL_SUPPRESS= "$NP" leaks $R0 | grep -q "^suppressed" && fail "an empty NPUPOOL_SUPPRESS adds patterns"
NPUPOOL_SUPPRESS=tests/fixtures/weights.supp "$NP" leaks $R0 --ignore 'kv_*' | \
    grep -q "^suppressed: 3 stacks, 272.0 MiB in 7 allocations (3 of 3 patterns matched)" || fail "--ignore adds to the file"
# with --fail-on-leak: only what is left counts
"$NP" leaks $R0 --ignore main --fail-on-leak >/dev/null || fail "all suppressed must pass --fail-on-leak"
# bad files: one line naming the line, exit 2
printf '# ok\nfine\nbad[\n' >"$T/bad.supp"
rc=0; "$NP" leaks $R0 --suppress "$T/bad.supp" >"$T/o" 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && [ ! -s "$T/o" ] && [ "$(wc -l <"$T/err")" -eq 1 ] || { cat "$T/err"; fail "bad file: exit $rc"; }
grep -q "^npupool: $T/bad.supp:3: bad pattern 'bad\[': '\[' without its '\]'" "$T/err" || { cat "$T/err"; fail "bad line message"; }
rc=0; NPUPOOL_SUPPRESS=/nonexistent.supp "$NP" leaks $R0 >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "/nonexistent.supp: cannot open" "$T/err" || fail "missing NPUPOOL_SUPPRESS file: exit $rc"

# ---- several ranks ---------------------------------------------------------------------------
"$NP" leaks $R/r0.json $R/r1.json $R/r2.json $R/r3.json >"$T/l" || fail "leaks of 4 ranks"
cat "$T/l"
n=$(jq -s '[.[].leaks[].count] | add' $R/r[0-3].json)
grep -q "live allocations in 4 reports of 4 ranks: 4 of 4 sites, $n allocations" "$T/l" || fail "ranks header"
grep -q "alloc_weights (model.c:57): 1.0 GiB in 16 allocations, 1 stack, in 4 of 4 ranks" "$T/l" \
    || fail "weights in every rank (rank 3's binary lives at another path)"
grep -q "every rank: 256.0 MiB in 4 allocations" "$T/l" || fail "every rank line"
grep -q "slow_leak (service.c:40): 5.0 MiB in 5 allocations, 1 stack, in 1 of 4 ranks" "$T/l" || fail "one-rank site"
grep -q "per rank: rank 2 5.0 MiB in 5; none in rank 0, rank 1, rank 3" "$T/l" || fail "per-rank line"
grep -q "per rank: rank 0 16.0 MiB in 2, rank 1 24.0 MiB in 3, rank 2 16.0 MiB in 2, rank 3 32.0 MiB in 4" "$T/l" \
    || fail "kv per rank"
grep -q "model_scratch (scratch.c:12): 8.0 KiB in 2 allocations, 1 stack, in 2 of 4 ranks" "$T/l" \
    || fail "a symbolized and an unsymbolized frame of one site match"
for r in 0 1 2 3; do
    c=$(jq '[.leaks[].count] | add' $R/r$r.json)
    grep -qE "^ +$r +500$r +$c " "$T/l" || fail "rank $r row"
done
rc=0; "$NP" leaks $R/r[0-3].json --fail-on-leak >/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "ranks --fail-on-leak: exit $rc"
"$NP" leaks $R/r[0-3].json --suppress tests/fixtures/weights.supp | \
    grep -q "^suppressed: 2 stacks, 1.0 GiB in 18 allocations" || fail "suppression across ranks (stacks merged first)"
# summary: a row per rank, the totals, a note for a rank in two reports
"$NP" summary $R/r0.json $R/r1_early.json $R/r1.json $R/r2.json $R/r3.json >"$T/m" || fail "summary of ranks"
cat "$T/m"
[ "$(grep -cE '^ +[0-3] +[0-3] +500[0-3] ' "$T/m")" -eq 5 ] || fail "one row per report and device"
alloc=$(jq -s '[.[].devices[].pool.allocated_bytes] | add' $R/r0.json $R/r1_early.json $R/r1.json $R/r2.json $R/r3.json)
grep -qE "^total +5.0 GiB +$(jq -n "$alloc / 1073741824 * 10 | round / 10")" "$T/m" || fail "total allocated ($alloc)"
grep -q "note: rank 1 is in 2 reports (snapshots of one process)" "$T/m" || fail "duplicate rank note"
grep -q "alloc_weights (model.c:57) < train_step" "$T/m" || fail "top site across ranks"
grep -qE "^ +1.2 GiB +20 +4/4 " "$T/m" || fail "ranks column"
# one report: the output of before (the goldens check it byte for byte)
"$NP" summary $R/r0.json | head -1 | grep -q "^npupool report $R/r0.json" || fail "single summary"
exit 0
