# variants: plain
# Host memory used up (RLIMIT_AS) before new threads make their first ACL call: without npupool
# the program lives and sees ordinary answers; in front of npupool too — no abort in the
# unwinder's lazily allocated thread-local data, every call answered, one line saying that stacks
# are missing.  (Plain build only: the sanitizers reserve terabytes of address space.)
. "$ROOT/tests/lib.sh"
cd "$TMPDIR_CASE"
FAKEACL_HBM_BYTES=4G timeout 120 env LD_PRELOAD= "$PROGS/guest" hostmem >"$TMPDIR_CASE/out0" 2>&1 \
    || { cat "$TMPDIR_CASE/out0"; skip "the program does not survive this limit even alone"; }
cat "$TMPDIR_CASE/out0"
FAKEACL_HBM_BYTES=4G timeout 120 env LD_PRELOAD="$SHIM" "$PROGS/guest" hostmem >"$TMPDIR_CASE/out1" 2>"$TMPDIR_CASE/err1"
rc=$?
cat "$TMPDIR_CASE/out1" "$TMPDIR_CASE/err1"
[ "$rc" -eq 0 ] || fail "under the preload the program died (status $rc)"
grep -q '800 calls answered' "$TMPDIR_CASE/out1" || fail "not every call was answered"
[ "$(grep -c 'no host memory for the unwinder' "$TMPDIR_CASE/err1")" -le 1 ] || fail "said more than once"
exit 0
