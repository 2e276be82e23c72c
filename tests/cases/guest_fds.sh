# variants: plain asan tsan
# A program that closes every descriptor above 2 (daemons, ssh, test runners), and one that
# dup2()s its own pipe over 3..63, after npupool started: its pipe and file hold only its own
# bytes, nothing hangs, and npupool's reports (a signal, the exit) and trace are still written:
# npupool keeps no descriptor (the reporter wakes on a futex, the trace and reports are opened for
# each write, the ledger file is opened by path to grow and closed at once, libunwind's validation
# pipe is replaced by a descriptor-free check).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
cd "$TMPDIR_CASE"
for how in close dup2; do
    rm -f "$TMPDIR_CASE"/f-*
    NPUPOOL_REPORT="$TMPDIR_CASE/f-%n.json" NPUPOOL_TRACE="$TMPDIR_CASE/f.trace" FAKEACL_HBM_BYTES=4G \
        NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/f-%p.ledger" \
        timeout 60 env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/guest" fds "$how" \
        >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err"
    rc=$?
    cat "$TMPDIR_CASE/err"
    [ "$rc" -eq 124 ] && fail "fds $how hung"
    [ "$rc" -eq 0 ] || fail "fds $how: the program saw foreign bytes or failed (status $rc)"
    files=$(ls "$TMPDIR_CASE"/f-*.json 2>/dev/null)
    [ "$(echo "$files" | grep -c .)" -ge 2 ] || fail "fds $how: expected a signal and an exit report: $files"
    for f in $files; do jq -e .schema "$f" >/dev/null || fail "fds $how: $f is not a report"; done
    grep -l '"trigger":[[:space:]]*"signal"' $files >/dev/null || fail "fds $how: no signal report"
    [ "$(grep -c ',alloc,' "$TMPDIR_CASE/f.trace")" -ge 65 ] || fail "fds $how: the trace lost lines"
done
exit 0
