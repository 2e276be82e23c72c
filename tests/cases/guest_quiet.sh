# variants: plain asan tsan
# A process that inherits the preload and never calls ACL is not touched: the same threads,
# descriptors and signal dispositions as without npupool, no line on stderr (not even for a bad
# or unknown NPUPOOL_* variable: those are read at the first ACL call), no file written (reports,
# trace, metrics file, ledger file; in pool and in observe mode).  And the
# commands jobs start under the preload work as without it: setpriv dropping privileges (it
# aborted when npupool's thread started in the constructor) and unshare -U (refused in a
# multi-threaded process).
. "$ROOT/tests/lib.sh"
cd "$TMPDIR_CASE"
alone=$(LD_PRELOAD="$SANRT" "$PROGS/guest" quiet 2>"$TMPDIR_CASE/err0") || fail "guest quiet failed alone"
with=$(LD_PRELOAD="${SANRT:+$SANRT }$SHIM" NPUPOOL_LOG=debug NPUPOOL_RATO=1 NPUPOOL_REPORT_INTERVAL=1 \
       NPUPOOL_REPORT="$TMPDIR_CASE/q-%n.json" NPUPOOL_TRACE="$TMPDIR_CASE/q.trace" \
       NPUPOOL_METRICS="$TMPDIR_CASE/q.prom" NPUPOOL_METRICS_INTERVAL=1 \
       NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/q-%p.ledger" NPUPOOL_SUPPRESS="$TMPDIR_CASE/none.supp" \
       "$PROGS/guest" quiet 2>"$TMPDIR_CASE/err1") || fail "guest quiet failed under the preload"
echo "alone: $alone"
echo "with:  $with"
[ "$alone" = "$with" ] || fail "the process changed under the preload: '$alone' vs '$with'"
[ ! -s "$TMPDIR_CASE/err1" ] || { cat "$TMPDIR_CASE/err1"; fail "npupool wrote to the stderr of a process that never called ACL"; }
ls "$TMPDIR_CASE"/q-* "$TMPDIR_CASE"/q.trace "$TMPDIR_CASE"/q.prom* "$TMPDIR_CASE"/npupool-report-* 2>/dev/null &&
    fail "npupool wrote a file"
# observe mode too
with=$(LD_PRELOAD="${SANRT:+$SANRT }$SHIM" NPUPOOL_MODE=observe NPUPOOL_REPORT="$TMPDIR_CASE/o-%n.json" \
       "$PROGS/guest" quiet 2>"$TMPDIR_CASE/err2") || fail "guest quiet failed in observe mode"
[ "$alone" = "$with" ] && [ ! -s "$TMPDIR_CASE/err2" ] || fail "observe mode changed the process: '$with'"
ls "$TMPDIR_CASE"/o-* 2>/dev/null && fail "npupool wrote a file in observe mode"
[ "$VARIANT" = plain ] || exit 0 # the commands below are not built with the sanitizers
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    if setpriv --reuid=65534 --regid=65534 --clear-groups true; then
        LD_PRELOAD="$SHIM" setpriv --reuid=65534 --regid=65534 --clear-groups true \
            || fail "setpriv fails under the preload (status $?)"
    fi
fi
if command -v unshare >/dev/null && unshare -U true 2>/dev/null; then
    LD_PRELOAD="$SHIM" unshare -U true || fail "unshare -U fails under the preload (status $?)"
fi
exit 0
