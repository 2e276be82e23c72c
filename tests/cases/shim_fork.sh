# variants: plain asan tsan
# fork() while 4 threads allocate: no child deadlocks (timeout) or fails — with the runtime
# linked normally, and dlopen()ed after start-up (its fork handlers registered after npupool's).
. "$ROOT/tests/lib.sh"
export FAKEACL_STATS="$TMPDIR_CASE/stats-%p"
cd "$TMPDIR_CASE"
timeout 120 env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/fork_threads"
rc=$?
[ "$rc" -eq 124 ] && fail "fork_threads hung (deadlock after fork?)"
[ "$rc" -eq 0 ] || fail "fork_threads failed with status $rc"
timeout 120 env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/fork_dlopen"
rc=$?
[ "$rc" -eq 124 ] && fail "fork_dlopen hung (lock order between fork handlers?)"
[ "$rc" -eq 0 ] || fail "fork_dlopen failed with status $rc"
exit 0
