# variants: plain
# Periodic reports of a slow leak: every interval report shows slow_leak_site growing, and the
# growths add up to its final count; the busy but balanced site never grows.  (A 1 GiB pool: the
# first allocation maps the pool, 51.2 GiB by default, which under load can outlast the first
# 0.3 s interval.)
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
NPUPOOL_POOL_BYTES=1G NPUPOOL_REPORT_INTERVAL=0.3 NPUPOOL_REPORT="$TMPDIR_CASE/int-%n.json" run_preloaded slow_leak 1.7 \
    || fail "slow_leak failed"
files=$(grep -l '"trigger":[[:space:]]*"interval"' $(reports 'int-*.json'))
n=$(echo "$files" | grep -c .)
[ "$n" -ge 3 ] || fail "expected at least 3 interval reports, found $n"
check_reports $files --trigger interval || fail "invalid interval reports"
total=0
for f in $(ls -1 $files | sort -t- -k2 -n); do
    g=$(jq '[.leaks[] | select(.frames[0].function == "slow_leak_site")][0].growth.count' "$f")
    c=$(jq '[.leaks[] | select(.frames[0].function == "slow_leak_site")][0].count' "$f")
    [ "$g" != null ] && [ "$g" -ge 5 ] || fail "$f: slow_leak_site grew by $g (expected >= 5 per 0.3 s)"
    total=$((total + g))
    [ "$total" -eq "$c" ] || fail "$f: growths add up to $total, the count is $c"
    jq -e '[.leaks[] | select(.frames[0].function == "balanced_site")] | all(.count <= 1 and .growth.count <= 1)' \
        "$f" >/dev/null || fail "$f: the balanced site shows growth"
done
exit 0
