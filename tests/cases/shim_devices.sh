# variants: plain asan
# Two devices, aclrtGetMemInfo telling the truth, aclrtResetDevice dropping and rebuilding a pool.
. "$ROOT/tests/lib.sh"
run_plain devices || fail "devices fails without the shim"
NPUPOOL_VMM=0 run_preloaded devices || fail "devices fails in front of the shim"
# device 0: one reservation; device 1: one before and one after its reset
[ "$(stat device_allocs)" -eq 3 ] || fail "expected 3 runtime allocations (pools), got $(stat device_allocs)"
# the same with virtual-memory pools: device 1's chunks went with the reset, its range is released
run_preloaded devices || fail "devices fails in front of the vmm pools"
pool_only "vmm pools"
[ "$(stat aclrtReserveMemAddress)" -eq 3 ] && [ "$(stat aclrtReleaseMemAddress)" -eq 3 ] \
    || fail "vmm: $(stat aclrtReserveMemAddress) ranges reserved, $(stat aclrtReleaseMemAddress) released"

no_emu "3000 resets, each mapping a 51 GiB reservation: qemu-user's memory grows with each (24 GiB, then the OOM killer)"
# 3000 resets in a tight loop: one pool each, and host memory stays bounded (retired pools' metadata
# is given back after a grace period): within 32 MiB of the same loop without the shim.
base=$(run_plain reset_loop | sed -n 's/^maxrss_kb //p') || fail "reset_loop fails without the shim"
with=$(NPUPOOL_VMM=0 run_preloaded reset_loop | sed -n 's/^maxrss_kb //p') || fail "reset_loop fails in front of the shim"
[ "$(stat device_allocs)" -eq 3000 ] || fail "expected 3000 pools, got $(stat device_allocs)"
echo "peak RSS: $base KiB alone, $with KiB with npupool"
[ "$VARIANT" != plain ] || [ "$with" -le $((base + 32768)) ] || fail "host memory grows with resets: $with KiB vs $base KiB"
exit 0
