# variants: plain asan tsan
# A post-mortem after SIGKILL: a program with planted leaks in named functions kills itself with
# SIGKILL (no exit hook, no report, no line can run).  `npupool recover` on its ledger file
# (NPUPOOL_LEDGER_FILE) names exactly those sites with exact counts, bytes and source lines, and
# nothing that was freed (the busy temporary allocations); the report is schema-valid and
# consistent, says the process is gone, and nothing was torn; its `npupool` section is the
# version, path and build id of the libnpupool.so that wrote the file (`npupool version`, readelf),
# its `runtime` section the fake libascendcl.so and its build id.  Counts scale with the run.
# With the binary moved away (another machine), frames stay unnamed, and --root DIR finds it
# under DIR.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
postmortem_case_start
for scale in 1 3; do
    rm -f k-*.ledger npupool-report-*.json rec.json
    NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/k-%p.ledger" run_preloaded postmortem kill "$scale" \
        >out 2>err
    rc=$?
    cat err
    [ "$rc" -eq 137 ] || fail "the program should have died of SIGKILL (137), status $rc"
    grep -q "died of" err && fail "a line about a death npupool cannot see"
    ls npupool-report-*.json >/dev/null 2>&1 && fail "a report was written by a killed process"
    file=$(ls k-*.ledger)
    [ "$(echo "$file" | grep -c .)" -eq 1 ] || fail "expected one ledger file, found: $file"
    pid=${file#k-}
    pid=${pid%.ledger}
    "$NP" recover "$file" -o rec.json 2>rerr || { cat rerr; fail "recover failed"; }
    cat rerr
    grep -q "^npupool recover: pid $pid gone: $((6 * scale)) live allocations" rerr \
        || fail "recover's summary line"
    sites=()
    while read -r tag fn count bytes line src; do
        [ "$tag" = SITE ] && sites+=(--site "$fn:$count:$bytes:$line:$src")
    done <out
    [ "${#sites[@]}" -eq 6 ] || fail "the program printed $(( ${#sites[@]} / 2 )) SITE lines, expected 3"
    check_reports rec.json --trigger recovered --only "${sites[@]}" || fail "recovered report (scale $scale)"
    identity_is rec.json || fail "the recovered npupool/runtime sections (scale $scale)"
    jq -e '.recovered.process == "gone" and .recovered.torn == 0 and .recovered.death_signal == null
           and .recovered.incomplete == false' rec.json >/dev/null || fail "recovered facts: $(jq -c .recovered rec.json)"
    jq -e '[.leaks[] | select(.frames[0].function == "leak_big_global")][0].entry_point == "aclrtMallocAlign32"' \
        rec.json >/dev/null || fail "leak_big_global is not attributed to aclrtMallocAlign32"
    jq -e '[.leaks[] | select(.frames[0].function == "leak_cached_static")][0].frames[1].function == "main"' \
        rec.json >/dev/null || fail "the caller of leak_cached_static is not main"
    jq -e '.devices[0].pool.reserved_bytes > 0 and .devices[0].counters.allocs > 0' rec.json >/dev/null \
        || fail "no pool figures or counters for device 0"
    # the other tools read it like any report
    "$NP" leaks rec.json | grep -q "leak_big_global" || fail "npupool leaks on the recovered report"
    "$NP" summary rec.json | grep -q "recovered" || fail "npupool summary on the recovered report"
done
# from another machine: the binary is not where the file says; --root DIR finds it under DIR
mkdir -p bin && cp "$PROGS/postmortem" bin/postmortem
rm -f k-*.ledger
(LD_PRELOAD="${SANRT:+$SANRT }$SHIM" NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/k-%p.ledger" ./bin/postmortem kill \
    >out 2>/dev/null)
mkdir -p "root$TMPDIR_CASE/bin" && mv bin/postmortem "root$TMPDIR_CASE/bin/"
file=$(ls k-*.ledger) || fail "no ledger file (moved binary)"
"$NP" recover "$file" -o moved.json 2>rerr || fail "recover without the binary"
grep -q "module not found" rerr || { cat rerr; fail "the moved binary was found without --root"; }
jq -e '[.leaks[].frames[0].function] | index("leak_small_static") == null' moved.json >/dev/null \
    || fail "a frame of the moved binary was named without it"
"$NP" recover "$file" --root "$TMPDIR_CASE/root" -o rooted.json 2>rerr || fail "recover --root"
sites=()
while read -r tag fn count bytes line src; do
    [ "$tag" = SITE ] && sites+=(--site "$fn:$count:$bytes:$line:$src")
done <out
check_reports rooted.json --trigger recovered --only "${sites[@]}" || fail "recover --root: the sites"
exit 0
