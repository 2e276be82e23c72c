# variants: plain asan tsan
# 8 and 16 threads allocate, stamp, verify and free through every entry point concurrently.
. "$ROOT/tests/lib.sh"
for n in 8 16; do
    run_preloaded threads "$n" || fail "threads $n failed in front of the vmm pool"
    pool_only "threads $n"
    NPUPOOL_VMM=0 run_preloaded threads "$n" || fail "threads $n failed in front of the shim"
    [ "$(stat device_allocs)" -eq 1 ] || fail "threads $n: expected 1 runtime allocation, got $(stat device_allocs)"
done
exit 0
