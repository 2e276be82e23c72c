# variants: plain asan
# aclrtResetDevice with live allocations writes a `reset` report naming them; aclFinalize with
# live allocations writes a `finalize` report.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
NPUPOOL_REPORT="$TMPDIR_CASE/rf-%n.json" run_preloaded reset_finalize || fail "reset_finalize failed"
all=$(reports 'rf-*.json')
check_reports $all || fail "invalid reports"
reset=$(grep -l '"trigger":[[:space:]]*"reset"' $all)
fin=$(grep -l '"trigger":[[:space:]]*"finalize"' $all)
[ "$(echo "$reset" | grep -c .)" -eq 1 ] || fail "expected one reset report: $reset"
[ "$(echo "$fin" | grep -c .)" -eq 1 ] || fail "expected one finalize report: $fin"
jq -e '.trigger_device == 1 and ([.leaks[] | select(.device == 1)] | length == 1 and .[0].count == 5
       and .[0].frames[0].function == "leak_on_device")' "$reset" >/dev/null || fail "the reset report is wrong"
jq -e '[.leaks[] | select(.device == 0)] | length == 1 and .[0].count == 4' "$fin" >/dev/null \
    || fail "the finalize report does not list device 0's 4 live blocks"
jq -e '[.leaks[] | select(.device == 1)] | length == 0' "$fin" >/dev/null \
    || fail "device 1's blocks are still listed after its reset"
exit 0
