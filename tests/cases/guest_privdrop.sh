# variants: plain asan tsan
# A program that calls ACL (npupool's reporter thread runs) and then drops its privileges
# (setresgid/setresuid, which glibc applies to every thread with a signal) goes on allocating.
. "$ROOT/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to drop privileges"
cd /tmp
FAKEACL_HBM_BYTES=4G FAKEACL_STATS= timeout 60 env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" NPUPOOL_REPORT_INTERVAL=1 \
    "$PROGS/guest" privdrop || fail "privdrop failed (status $?)"
exit 0
