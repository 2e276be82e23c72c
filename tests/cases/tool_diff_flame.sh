# variants: plain asan
# `diff` finds the planted growth (the slow leak of report_old -> report_new) and ranks it first,
# lists the shrinking site apart, and --fail-on-growth gates on it; a report diffed with itself
# shows nothing.  `flame` output parses as folded stacks and adds up to the report's totals.
. "$ROOT/tests/lib.sh"
NP="$ROOT/$BUILD/npupool"
cd "$ROOT"
F=tests/fixtures
out=$("$NP" diff $F/report_old.json $F/report_new.json) || fail "diff exit $?"
first=$(echo "$out" | sed -n '/^grew/,/^$/p' | sed -n 3p)
echo "$first" | grep -q 'slow_leak (service.c:40)' || fail "slow_leak is not the first growing site: $first"
echo "$first" | grep -qE '\+60\.0 MiB +\+60 ' || fail "planted growth is +60 allocations / +60 MiB: $first"
echo "$out" | sed -n '/^shrank/,$p' | grep -q 'warmup_scratch' || fail "shrinking site not listed apart"
echo "$out" | sed -n '/^grew/,/^shrank/p' | grep -q 'request_buffer' && fail "the balanced site must not be listed as growth"
echo "$out" | grep -q 'rate: +60.0 MiB per hour' || fail "growth rate"
rc=0; "$NP" diff $F/report_old.json $F/report_new.json --fail-on-growth 59M >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "--fail-on-growth 59M: exit $rc, expected 1"
"$NP" diff $F/report_old.json $F/report_new.json --fail-on-growth 61M >/dev/null || fail "--fail-on-growth 61M must pass"
"$NP" diff $F/report_new.json $F/report_new.json --fail-on-growth 0 >"$TMPDIR_CASE/same" || fail "self diff reports growth"
grep -q 'net 0 B' "$TMPDIR_CASE/same" || fail "self diff net"
# the reports' own growth fields agree with the diff
jq -e '[.leaks[] | select(.growth.bytes > 0)] | length == 1 and .[0].growth.bytes == 62914560' $F/report_new.json >/dev/null \
    || fail "fixture growth fields"

for rep in report_basic report_two_devices report_oom report_new; do
    for by in bytes count; do
        "$NP" flame $F/$rep.json --by $by >"$TMPDIR_CASE/folded" || fail "flame $rep"
        bad=$(grep -cvE '^[^ ;][^;]*(;[^;]+)* [0-9]+$' "$TMPDIR_CASE/folded")
        [ "$bad" -eq 0 ] || fail "flame $rep --by $by: $bad lines do not parse"
        sum=$(awk '{ s += $NF } END { printf "%.0f", s }' "$TMPDIR_CASE/folded")
        key=$([ $by = bytes ] && echo bytes || echo count)
        want=$(jq "[.leaks[].$key] | add // 0" $F/$rep.json)
        [ "$sum" = "$want" ] || fail "flame $rep --by $by adds up to $sum, report says $want"
        # outermost frame first: every stack of these fixtures starts at main
        grep -qv '^main' "$TMPDIR_CASE/folded" && fail "flame $rep: a stack does not start at main"
    done
done
exit 0
