# variants: plain
# Trouble costs one stderr line each and nothing else: a report path that cannot be created, a
# full disk (/dev/full), a directory; invalid option values (default kept, program unaffected).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
for bad in /nonexistent-npupool-dir/r.json /dev/full "$TMPDIR_CASE"; do
    NPUPOOL_REPORT="$bad" run_preloaded leaks >/dev/null 2>"$TMPDIR_CASE/err" || fail "leaks failed with NPUPOOL_REPORT=$bad"
    cat "$TMPDIR_CASE/err"
    [ "$(grep -c '^npupool\[[0-9]*\]: ' "$TMPDIR_CASE/err")" -eq 1 ] || fail "NPUPOOL_REPORT=$bad: expected exactly one npupool line"
    grep -q "cannot write the exit report to $bad" "$TMPDIR_CASE/err" || fail "NPUPOOL_REPORT=$bad: the line does not say what failed"
    grep -v '^npupool\[[0-9]*\]: ' "$TMPDIR_CASE/err" | grep -q . && fail "other stderr output"
done
[ -c /dev/full ] || fail "/dev/full is no longer a character device"
ls "$TMPDIR_CASE" | grep -q '\.tmp\.' && fail "a temporary report file was left behind"
NPUPOOL_REPORT_INTERVAL=soon NPUPOOL_BACKTRACE_DEPTH=-3 NPUPOOL_REPORT_SIGNAL=SIGBOGUS NPUPOOL_REPORT_FREE_MAP=lots \
    NPUPOOL_REPORT="$TMPDIR_CASE/opt-%n.json" run_preloaded leaks >/dev/null 2>"$TMPDIR_CASE/err" \
    || fail "leaks failed with invalid option values"
cat "$TMPDIR_CASE/err"
for opt in NPUPOOL_REPORT_INTERVAL NPUPOOL_BACKTRACE_DEPTH NPUPOOL_REPORT_SIGNAL NPUPOOL_REPORT_FREE_MAP; do
    [ "$(grep -c "^npupool\[[0-9]*\]: .*$opt" "$TMPDIR_CASE/err")" -eq 1 ] || fail "expected exactly one line about $opt"
done
# and, at the default level, one line saying where the report went
grep -qx "npupool\[[0-9]*\]: exit report written to $TMPDIR_CASE/opt-1.json (3 sites)" "$TMPDIR_CASE/err" ||
    fail "no line saying where the report was written"
[ "$(grep -c '^npupool\[[0-9]*\]: ' "$TMPDIR_CASE/err")" -eq 5 ] || fail "expected exactly 5 npupool lines"
f=$(reports 'opt-*.json')
[ -n "$f" ] || fail "no report with invalid option values (defaults should apply)"
jq -e '.config.NPUPOOL_BACKTRACE_DEPTH == "16" and .config.NPUPOOL_REPORT_INTERVAL == "0"
       and (.leaks[0].frames | length) > 0' $f >/dev/null || fail "defaults were not kept"
exit 0
