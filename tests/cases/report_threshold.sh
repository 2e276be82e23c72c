# variants: plain
# Pool use crossing 85% and 95%: one stderr line each and a `threshold` report each, written at
# the crossing (the program frees everything right after: the report must still show the pool as
# it was).  Growing for 0.3 s gives no rate ("not known yet": a rate over a burst predicts
# nothing); growing for 15 s (180 ms a step, slow variant) gives a rate and a time to OOM.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
run() { # $1 = tick in ms, $2 = what the rate must be: unknown | known
    rm -f "$TMPDIR_CASE"/th-*.json
    NPUPOOL_POOL_BYTES=64M NPUPOOL_REPORT="$TMPDIR_CASE/th-%n.json" run_preloaded threshold "$1" \
        2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "threshold $1 failed"; }
    cat "$TMPDIR_CASE/err"
    if [ "$2" = unknown ]; then rate='growth rate not known yet'; else rate='growing .* over .* s, OOM in ~'; fi
    [ "$(grep -c "crossed the warning threshold (85%).*$rate" "$TMPDIR_CASE/err")" -eq 1 ] \
        || fail "expected one warning line ($2 rate)"
    [ "$(grep -c "crossed the critical threshold (95%).*$rate" "$TMPDIR_CASE/err")" -eq 1 ] \
        || fail "expected one critical line ($2 rate)"
    files=$(grep -l '"trigger":[[:space:]]*"threshold"' $(reports 'th-*.json'))
    [ "$(echo "$files" | grep -c .)" -eq 2 ] || fail "expected 2 threshold reports: $files"
    check_reports $files --trigger threshold || fail "invalid threshold reports"
    for level in warning critical; do
        f=$(grep -l "\"level\":[[:space:]]*\"$level\"" $files)
        [ -n "$f" ] || fail "no $level report"
        # the pool as it was at the crossing, not after the frees
        jq -e '.threshold.usage_ratio >= .threshold.threshold_ratio
               and .devices[0].pool.allocated_bytes == .threshold.allocated_bytes' "$f" >/dev/null \
            || { jq '.threshold, .devices[0].pool' "$f"; fail "$level report: not the state at the crossing"; }
        if [ "$2" = unknown ]; then
            jq -e '.threshold.growth_bytes_per_s == null and .threshold.predicted_oom_s == null
                   and .threshold.rate_window_s < 10' "$f" >/dev/null \
                || { jq .threshold "$f"; fail "$level report: a rate from a window too short"; }
        else
            jq -e '.threshold.growth_bytes_per_s > 0 and (.threshold.predicted_oom_s | type == "number")
                   and .threshold.rate_window_s >= 10' "$f" >/dev/null \
                || { jq .threshold "$f"; fail "$level report: no growth rate or prediction"; }
        fi
    done
}
run 5 unknown
run 200 known
exit 0
