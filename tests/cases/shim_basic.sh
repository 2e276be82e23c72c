# variants: plain asan
# Every allocating entry point, the padding/alignment contract, error codes and misuse, with and
# without the shim: same results; with it, one real allocation (the reservation) instead of ~600
# (NPUPOOL_VMM=0), or only the pool's chunks, each mapped once (the virtual-memory pool).
. "$ROOT/tests/lib.sh"
run_plain basic || fail "basic fails without the shim"
plain_allocs=$(stat device_allocs); plain_sync=$(stat sync)
[ "$plain_allocs" -ge 601 ] || fail "expected >= 601 runtime allocations without the shim, got $plain_allocs"

run_preloaded basic 2>"$TMPDIR_CASE/vmm" || { cat "$TMPDIR_CASE/vmm"; fail "basic fails in front of the vmm pool"; }
pool_only "vmm pool"
[ "$(stat aclrtMallocAlign32)" -eq 0 ] || fail "vmm: aclrtMallocAlign32 reached the runtime"
[ "$(stat reset_released)" -eq "$(stat physical_allocs)" ] || fail "vmm: the reset did not take every chunk"
[ "$(grep -c "^npupool\[[0-9]*\]: " "$TMPDIR_CASE/vmm")" -eq 10 ] || fail "vmm: expected the same 10 npupool lines"
NPUPOOL_VMM=0 run_preloaded basic 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "basic fails in front of the shim"; }
cat "$TMPDIR_CASE/err"
allocs=$(stat device_allocs)
[ "$allocs" -eq 1 ] || fail "expected exactly 1 runtime allocation (the pool) with the shim, got $allocs"
[ "$(stat aclrtMallocAlign32)" -eq 0 ] || fail "aclrtMallocAlign32 reached the runtime"
[ "$(stat sync)" -eq "$plain_sync" ] || fail "synchronisations differ: $(stat sync) with the shim, $plain_sync without"
n=$(grep -c 'double free or interior pointer' "$TMPDIR_CASE/err")
[ "$n" -eq 2 ] || fail "expected 2 misuse lines (interior pointer, double free), got $n"
n=$(grep -c 'pointer unknown to npupool' "$TMPDIR_CASE/err")
[ "$n" -eq 1 ] || fail "expected 1 line for the never-allocated pointer, got $n"
grep -v '^npupool\[[0-9]*\]: ' "$TMPDIR_CASE/err" | grep -q . && fail "unexpected stderr lines"
[ "$(grep -c "^npupool\[[0-9]*\]: " "$TMPDIR_CASE/err")" -eq 10 ] || fail "expected 10 npupool lines (7 bad arguments, 3 misuses)"
exit 0
