# variants: plain asan
# A program that only dlopen()s the runtime and looks functions up by name (handle, RTLD_DEFAULT,
# dlvsym) is served by the pool: the runtime sees one allocation per device, and
# aclrtMallocAlign32 only for the request made with no context (the runtime answers it); the
# device and context calls it looks up by name are npupool's hooks, passed through (each reaches
# the runtime once per call), and its blocks follow them to the right device.
. "$ROOT/tests/lib.sh"
for mode in handle default vsym; do
    run_plain dlsym_lookup "$mode" || fail "dlsym_lookup $mode fails without the shim"
    [ "$(stat device_allocs)" -eq 405 ] || fail "$mode: expected 405 runtime allocations without the shim"
    run_preloaded dlsym_lookup "$mode" || fail "dlsym_lookup $mode fails in front of the vmm pool"
    pool_only "$mode"
    NPUPOOL_VMM=0 run_preloaded dlsym_lookup "$mode" || fail "dlsym_lookup $mode fails in front of the shim"
    [ "$(stat device_allocs)" -eq 2 ] || fail "$mode: expected 2 runtime allocations (a pool per device), got $(stat device_allocs)"
    # once: the request made with no context, which the runtime answers (107002)
    [ "$(stat aclrtMallocAlign32)" -eq 1 ] || fail "$mode: aclrtMallocAlign32 reached the runtime $(stat aclrtMallocAlign32) times"
    [ "$(stat aclrtSetDevice)" -eq 3 ] || fail "$mode: aclrtSetDevice must pass through"
    for c in aclrtCreateContext aclrtSetCurrentContext aclrtDestroyContext aclrtGetCurrentContext; do
        want=1; [ "$c" = aclrtSetCurrentContext ] && want=2
        [ "$(stat $c)" -eq $want ] || fail "$mode: $c reached the runtime $(stat $c) times, want $want"
    done
done
exit 0
