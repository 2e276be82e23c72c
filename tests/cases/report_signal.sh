# variants: plain asan tsan
# SIGUSR2 reports while 4 (and 8) threads allocate: each signal yields one report, written by the
# reporter thread while the threads go on (no stall, no error), every report valid.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
for t in 4 8; do
    rm -f "$TMPDIR_CASE"/sig-*.json
    NPUPOOL_REPORT="$TMPDIR_CASE/sig-%p-%n.json" run_preloaded signal_threads $t 5 "$TMPDIR_CASE" \
        || fail "signal_threads $t failed"
    n=$(reports 'sig-*.json' | wc -l)
    [ "$n" -ge 5 ] || fail "expected at least 5 reports, found $n"
    for f in $(reports 'sig-*.json'); do
        jq -e '.trigger == "signal" or .trigger == "exit"' "$f" >/dev/null || fail "$f: unexpected trigger"
    done
    check_reports $(reports 'sig-*.json') || fail "invalid signal reports"
done
# NPUPOOL_REPORT_SIGNAL=0: SIGUSR2 keeps its default action (the process dies of it).
NPUPOOL_REPORT_SIGNAL=0 NPUPOOL_REPORT="$TMPDIR_CASE/off-%n.json" run_preloaded signal_threads 1 1 "$TMPDIR_CASE/none" \
    >/dev/null 2>&1
rc=$?
[ $rc -eq $((128 + 12)) ] || fail "with NPUPOOL_REPORT_SIGNAL=0 SIGUSR2 should kill the program (exit $rc)"
exit 0
