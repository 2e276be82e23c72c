# variants: plain asan tsan
# Parked forgets (ledger.h: ledger_release_tagged_later): with 60,000 blocks live in one thread
# the shim parks the ledger's forget of every pool block it frees.  Interval reports written by
# the reporter thread while the program frees (each completes the parked forgets first, racing
# with the program's own parking) are valid, and the exit report counts no freed block: its leaks
# are exactly the blocks the program left allocated, in number and in bytes.  (An interval
# report's figures are not checked: a report walks the ledger shard by shard while the program
# runs, so a pair in flight may be counted twice or not at all, parked or not.)
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
NPUPOOL_POOL_BYTES=1G NPUPOOL_REPORT_INTERVAL=0.5 NPUPOOL_REPORT="$TMPDIR_CASE/p-%n.json" \
    run_preloaded many_live 60000 100000 1 >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" \
    || { cat "$TMPDIR_CASE/err"; fail "many_live failed in front of the shim"; }
read -r tag blocks bytes <"$TMPDIR_CASE/out"
[ "$tag" = LIVE ] && [ "$blocks" -eq 30000 ] || fail "many_live printed: $(cat "$TMPDIR_CASE/out")"
files=$(reports 'p-*.json')
exit_report=$(grep -l '"trigger":[[:space:]]*"exit"' $files)
[ "$(echo "$exit_report" | grep -c .)" -eq 1 ] || fail "expected one exit report, found: $exit_report"
intervals=$(grep -l '"trigger":[[:space:]]*"interval"' $files)
[ -n "$intervals" ] || fail "no interval report was written while the program ran"
# (the first three interval reports: under TSan the program runs long enough for hundreds)
check_reports $exit_report $(echo "$intervals" | head -3) || fail "invalid reports"
got=$(jq -r '"\([.leaks[].count] | add) \([.leaks[].bytes] | add)"' "$exit_report")
[ "$got" = "$blocks $bytes" ] || fail "the exit report counts $got (blocks bytes), the program left $blocks $bytes"
exit 0
