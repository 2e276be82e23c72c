# variants: plain asan tsan
# Signals.  NPUPOOL_REPORT_SIGNAL naming a fault signal (8 = SIGFPE, or SEGV by name) is refused
# with one line and the default kept: the program that raises SIGFPE dies of it with the status it
# has without npupool (it looped writing reports).  A storm of 200 report signals while 4
# threads allocate: no hang, no crash, reports written (coalesced).
. "$ROOT/tests/lib.sh"
cd "$TMPDIR_CASE"
LD_PRELOAD="$SANRT" FAKEACL_HBM_BYTES=4G timeout 30 "$PROGS/guest" raise 8 >/dev/null 2>&1
want=$?
for v in 8 SIGFPE SEGV; do
    LD_PRELOAD="${SANRT:+$SANRT }$SHIM" NPUPOOL_REPORT_SIGNAL=$v FAKEACL_HBM_BYTES=4G timeout 30 \
        "$PROGS/guest" raise 8 >/dev/null 2>"$TMPDIR_CASE/err"
    rc=$?
    cat "$TMPDIR_CASE/err"
    [ "$rc" -eq 124 ] && fail "NPUPOOL_REPORT_SIGNAL=$v: the program hung"
    [ "$rc" -eq "$want" ] || fail "NPUPOOL_REPORT_SIGNAL=$v: status $rc, without npupool $want"
    grep -q "NPUPOOL_REPORT_SIGNAL=\"$v\" is not valid (a fault" "$TMPDIR_CASE/err" || fail "no clear line for $v"
done
NPUPOOL_REPORT="$TMPDIR_CASE/s-%n.json" FAKEACL_HBM_BYTES=4G timeout 120 \
    env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/guest" storm || fail "signal storm failed (status $?)"
[ "$(grep -l '"trigger":[[:space:]]*"signal"' "$TMPDIR_CASE"/s-*.json | wc -l)" -ge 1 ] || fail "no signal report"
exit 0
