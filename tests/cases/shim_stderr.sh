# variants: plain asan
# Every line npupool writes to stderr starts "npupool[PID]: ", then "rank N: " when the job's rank
# is known (RANK, else LOCAL_RANK), so the ranks of one job can be told apart in one log; at the
# default level a report written costs one line saying where it went (NPUPOOL_LOG=error: none).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
unset RANK LOCAL_RANK

run_leaks() { # extra environment...; stderr into $TMPDIR_CASE/err; prints the report's pid
    rm -f "$TMPDIR_CASE"/r-*.json
    (
        [ $# -eq 0 ] || export "$@"
        NPUPOOL_REPORT="$TMPDIR_CASE/r-%p.json" NPUPOOL_REPORT_FREE_MAP=lots run_preloaded leaks
    ) >/dev/null 2>"$TMPDIR_CASE/err" || fail "leaks failed ($*)"
    cat "$TMPDIR_CASE/err" >&2
    local f
    f=$(reports 'r-*.json')
    [ -n "$f" ] || fail "no report ($*)"
    basename "$f" .json | sed 's/^r-//'
}

pid=$(run_leaks)
[ "$(wc -l <"$TMPDIR_CASE/err")" -eq 2 ] || fail "expected 2 lines (a bad value, the report)"
[ "$(grep -c "^npupool\[$pid\]: " "$TMPDIR_CASE/err")" -eq 2 ] || fail "lines do not start npupool[$pid]: "
grep -q "rank" "$TMPDIR_CASE/err" && fail "a rank without RANK or LOCAL_RANK"
grep -qx "npupool\[$pid\]: exit report written to $TMPDIR_CASE/r-$pid.json (3 sites)" "$TMPDIR_CASE/err" ||
    fail "no line saying where the report went"

pid=$(run_leaks RANK=3 LOCAL_RANK=1)
[ "$(grep -c "^npupool\[$pid\]: rank 3: " "$TMPDIR_CASE/err")" -eq 2 ] || fail "RANK=3: lines do not say rank 3"
pid=$(run_leaks LOCAL_RANK=7)
[ "$(grep -c "^npupool\[$pid\]: rank 7: " "$TMPDIR_CASE/err")" -eq 2 ] || fail "LOCAL_RANK=7: lines do not say rank 7"

# NPUPOOL_LOG=info also names the npupool that runs: version, library, build id.
pid=$(run_leaks NPUPOOL_LOG=info)
version=$(launch "" "$ABS_BUILD/npupool" version | sed -n '1s/^npupool //p')
bid=$(build_id "$SHIM")
grep -qxF "npupool[$pid]: npupool $version, $SHIM (build id $bid)" "$TMPDIR_CASE/err" ||
    fail "NPUPOOL_LOG=info does not name version $version, $SHIM and build id $bid"

run_leaks NPUPOOL_LOG=error >/dev/null
[ -s "$TMPDIR_CASE/err" ] && fail "NPUPOOL_LOG=error still printed: $(cat "$TMPDIR_CASE/err")"
exit 0
