# variants: plain asan tsan
# Threads that allocate once and exit (2000, 8 at a time: the unwinder's per-thread state comes
# and goes), and exit() from the main thread while 4 threads keep allocating (npupool's exit
# report runs in the destructors meanwhile): no hang, no crash, five times over.
. "$ROOT/tests/lib.sh"
cd "$TMPDIR_CASE"
FAKEACL_HBM_BYTES=4G timeout 120 env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/guest" threadexit \
    || fail "threadexit failed (status $?)"
# LeakSanitizer's exit-time scan cannot read the dynamic TLS of a dlopen()ed library (libunwind)
# while threads still run ("Tracer caught signal 11 ... DTLS"; it happens without npupool's code
# on the stack): in the ASan build the exit race runs with leak detection off.
[ "$VARIANT" = asan ] && export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
for i in 1 2 3 4 5; do
    NPUPOOL_REPORT="$TMPDIR_CASE/e-%n.json" FAKEACL_HBM_BYTES=4G timeout 60 \
        env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/guest" exitrace
    rc=$?
    [ "$rc" -eq 124 ] && fail "exit() while threads allocate hung (round $i)"
    [ "$rc" -eq 0 ] || fail "exit() while threads allocate: status $rc (round $i)"
done
exit 0
