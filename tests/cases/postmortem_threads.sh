# variants: plain asan tsan
# SIGKILL while 8 threads allocate and free: the recovered report still names the planted sites
# exactly; the only other site is the threads' churn_site, with at most what the threads can hold
# at once (8 x 4 blocks); at most one slot per thread was caught mid-write (torn <= 8); the report
# is schema-valid and consistent (per-device figures = the sum of the leaks) and names this
# build's npupool and the fake runtime.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
postmortem_case_start
for round in 1 2 3; do
    rm -f t-*.ledger rec.json
    NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/t-%p.ledger" run_preloaded postmortem threads >out 2>err
    rc=$?
    [ "$rc" -eq 137 ] || { cat err; fail "the program should have died of SIGKILL (137), status $rc"; }
    file=$(ls t-*.ledger) || fail "no ledger file"
    "$NP" recover "$file" -o rec.json 2>rerr || { cat rerr; fail "recover failed"; }
    cat rerr
    sites=()
    while read -r tag a b c d e; do
        [ "$tag" = SITE ] && sites+=(--site "$a:$b:$c:$d:$e")
        [ "$tag" = CHURN ] && threads=$a && per=$b
    done <out
    check_reports rec.json --trigger recovered "${sites[@]}" || fail "recovered report (round $round)"
    identity_is rec.json || fail "the recovered npupool/runtime sections (round $round)"
    max=$((threads * per))
    jq -e --argjson max "$max" --argjson threads "$threads" '
        ([.leaks[] | select(.frames[0].function | IN("leak_small_static", "leak_big_global",
                                                      "leak_cached_static", "churn_site") | not)]
         | length == 0)
        and ([.leaks[] | select(.frames[0].function == "churn_site") | .count] | add // 0) <= $max
        and .recovered.torn <= $threads and .recovered.process == "gone"' rec.json >/dev/null \
        || fail "round $round: other sites, more than $max churn blocks or more than $threads torn: $(jq -c '[.recovered.torn, [.leaks[] | [.frames[0].function, .count]]]' rec.json)"
done
exit 0
