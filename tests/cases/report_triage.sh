# variants: plain asan
# Leak triage in the preload.  After aclFinalize wrote its report, the exit report does not repeat
# the same leaks (nothing allocated since: no exit report at all, even with NPUPOOL_REPORT set).
# NPUPOOL_SUPPRESS: leaks whose stack matches a pattern are marked "suppressed"; when every leak
# is suppressed no exit report is written (as without leaks); a bad line is named once on stderr.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
NPUPOOL_REPORT="$TMPDIR_CASE/rf-%n.json" run_preloaded reset_finalize || fail "reset_finalize failed"
all=$(reports 'rf-*.json')
grep -l '"trigger":[[:space:]]*"exit"' $all && fail "an exit report repeats the finalize report"
[ "$(echo "$all" | grep -c .)" -eq 2 ] || fail "expected the reset and finalize reports only: $all"
# suppressions
cd "$TMPDIR_CASE"
printf '# all three planted sites\nfunction:leak_small_static\nleak_big_global\nfunction:leak_cached_*\n' >all.supp
NPUPOOL_SUPPRESS="$TMPDIR_CASE/all.supp" run_preloaded leaks 1 >/dev/null 2>"$TMPDIR_CASE/err" || fail "leaks failed"
cat "$TMPDIR_CASE/err"
ls "$TMPDIR_CASE"/npupool-report-*.json 2>/dev/null && fail "every leak is suppressed, yet an exit report was written"
printf 'leak_big_global\nfunction:[oops\n' >one.supp
NPUPOOL_SUPPRESS="$TMPDIR_CASE/one.supp" NPUPOOL_REPORT="$TMPDIR_CASE/s-%n.json" run_preloaded leaks 1 \
    >/dev/null 2>"$TMPDIR_CASE/err" || fail "leaks failed"
cat "$TMPDIR_CASE/err"
grep -q 'NPUPOOL_SUPPRESS: .*one.supp:2' "$TMPDIR_CASE/err" || fail "the bad line is not named"
rep=$(reports 's-*.json')
check_reports $rep --trigger exit || fail "invalid exit report"
jq -e '[.leaks[] | {f: .frames[0].function, s: .suppressed}] | sort_by(.f) ==
       [{f: "leak_big_global", s: true}, {f: "leak_cached_static", s: false}, {f: "leak_small_static", s: false}]' \
    "$rep" >/dev/null || { jq '[.leaks[] | {f: .frames[0].function, s: .suppressed}]' "$rep"; fail "suppressed flags"; }
exit 0
