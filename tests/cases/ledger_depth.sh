# variants: plain asan
# A stack deeper than NPUPOOL_BACKTRACE_DEPTH keeps exactly that many frames, from the process's
# first allocation on: deep_leak leaks twice from the bottom of a 60-level recursion, and the exit
# report's one site has `depth` frames, leak_at_bottom and then descend.  The first capture is the
# one that learns how many of npupool's own frames to walk past (ledger/ledger_stack.c): a walk
# that stopped short there would give the site fewer frames.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
for depth in 1 4 16 40; do
    rm -f "$TMPDIR_CASE"/deep-*.json
    NPUPOOL_BACKTRACE_DEPTH=$depth NPUPOOL_REPORT="$TMPDIR_CASE/deep-%p-%n.json" \
        run_preloaded deep_leak 60 >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" \
        || { cat "$TMPDIR_CASE/err"; fail "deep_leak failed in front of the shim (depth $depth)"; }
    files=$(reports 'deep-*.json')
    [ "$(echo "$files" | grep -c .)" -eq 1 ] || fail "expected one exit report, found: $files"
    jq -e --argjson d "$depth" '
        (.leaks | length) == 1 and .leaks[0].count == 2 and
        (.leaks[0].frames | length) == $d and
        .leaks[0].frames[0].function == "leak_at_bottom" and
        ([.leaks[0].frames[1:][] | .function == "descend"] | all)' $files >/dev/null \
        || { jq -c '.leaks[] | {count, n: (.frames | length), f: [.frames[].function]}' $files;
             fail "depth $depth: the site is not $depth frames of leak_at_bottom < descend"; }
done
exit 0
