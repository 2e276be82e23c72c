# variants: plain
# Pool use crossing 85% and 95%: one stderr line each (with growth rate and predicted time to OOM)
# and a `threshold` report each.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
NPUPOOL_POOL_BYTES=64M NPUPOOL_REPORT="$TMPDIR_CASE/th-%n.json" run_preloaded threshold 2>"$TMPDIR_CASE/err" \
    || { cat "$TMPDIR_CASE/err"; fail "threshold failed"; }
cat "$TMPDIR_CASE/err"
[ "$(grep -c 'crossed the warning threshold (85%).*growing .*OOM in' "$TMPDIR_CASE/err")" -eq 1 ] \
    || fail "expected one warning line"
[ "$(grep -c 'crossed the critical threshold (95%).*growing .*OOM in' "$TMPDIR_CASE/err")" -eq 1 ] \
    || fail "expected one critical line"
files=$(grep -l '"trigger":[[:space:]]*"threshold"' $(reports 'th-*.json'))
[ "$(echo "$files" | grep -c .)" -eq 2 ] || fail "expected 2 threshold reports: $files"
check_reports $files --trigger threshold || fail "invalid threshold reports"
for level in warning critical; do
    f=$(grep -l "\"level\":[[:space:]]*\"$level\"" $files)
    [ -n "$f" ] || fail "no $level report"
    jq -e '.threshold.growth_bytes_per_s > 0 and (.threshold.predicted_oom_s | type == "number")
           and .threshold.usage_ratio >= .threshold.threshold_ratio' "$f" >/dev/null \
        || { jq .threshold "$f"; fail "$level report: no growth rate or prediction"; }
done
exit 0
