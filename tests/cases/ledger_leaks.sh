# variants: plain asan
# Planted leaks: the exit report names exactly the three leaking sites (two `static` functions in
# an executable linked without -rdynamic, one global), with exact counts, bytes and source lines,
# and nothing else (the busy temporary allocations are all freed).  Counts scale with the run.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
for scale in 1 3; do
    rm -f "$TMPDIR_CASE"/leaks-*.json
    NPUPOOL_REPORT="$TMPDIR_CASE/leaks-%p-%n.json" run_preloaded leaks "$scale" >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" \
        || { cat "$TMPDIR_CASE/err"; fail "leaks $scale failed in front of the shim"; }
    cat "$TMPDIR_CASE/err"
    files=$(reports 'leaks-*.json')
    [ "$(echo "$files" | grep -c .)" -eq 1 ] || fail "expected one exit report, found: $files"
    sites=()
    while read -r tag fn count bytes line file; do
        [ "$tag" = SITE ] && sites+=(--site "$fn:$count:$bytes:$line:$file")
    done <"$TMPDIR_CASE/out"
    [ "${#sites[@]}" -eq 6 ] || fail "the program printed $(( ${#sites[@]} / 2 )) SITE lines, expected 3"
    check_reports $files --trigger exit --only "${sites[@]}" || fail "exit report (scale $scale) is wrong"
    # the entry points and the frame below the leaking function are right too
    jq -e '[.leaks[] | select(.frames[0].function == "leak_big_global")][0].entry_point == "aclrtMallocAlign32"' \
        $files >/dev/null || fail "leak_big_global is not attributed to aclrtMallocAlign32"
    jq -e '[.leaks[] | select(.frames[0].function == "leak_cached_static")][0].frames[1].function == "main"' \
        $files >/dev/null || fail "the caller of leak_cached_static is not main"
done
# Without NPUPOOL_REPORT and without leaks nothing is written; with leaks the default name is used.
( cd "$TMPDIR_CASE" && LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/leaks" >/dev/null 2>&1 ) \
    || fail "leaks failed without NPUPOOL_REPORT"
ls "$TMPDIR_CASE"/npupool-report-*-1.json >/dev/null 2>&1 || fail "no default-named exit report in the working directory"
( cd "$TMPDIR_CASE" && LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/basic" >/dev/null 2>&1 ) \
    || fail "basic failed"
[ "$(ls "$TMPDIR_CASE"/npupool-report-*.json | wc -l)" -eq 1 ] || fail "a program without leaks wrote an exit report"
exit 0
