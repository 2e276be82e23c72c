# variants: plain asan
# A program that only dlopen()s the runtime and looks functions up by name (handle, RTLD_DEFAULT,
# dlvsym) is served by the pool: the runtime sees one allocation, never aclrtMallocAlign32.
. "$ROOT/tests/lib.sh"
for mode in handle default vsym; do
    run_plain dlsym_lookup "$mode" || fail "dlsym_lookup $mode fails without the shim"
    [ "$(stat device_allocs)" -eq 400 ] || fail "$mode: expected 400 runtime allocations without the shim"
    run_preloaded dlsym_lookup "$mode" || fail "dlsym_lookup $mode fails in front of the vmm pool"
    pool_only "$mode"
    NPUPOOL_VMM=0 run_preloaded dlsym_lookup "$mode" || fail "dlsym_lookup $mode fails in front of the shim"
    [ "$(stat device_allocs)" -eq 1 ] || fail "$mode: expected 1 runtime allocation, got $(stat device_allocs)"
    [ "$(stat aclrtMallocAlign32)" -eq 0 ] || fail "$mode: aclrtMallocAlign32 reached the runtime"
    [ "$(stat aclrtSetDevice)" -eq 1 ] || fail "$mode: aclrtSetDevice must pass through"
done
exit 0
