# variants: plain asan tsan
# The runtime is found wherever the host found it: a program that dlopen()s libascendcl.so by
# absolute path, RTLD_LOCAL, with no LD_LIBRARY_PATH (ctypes, torch_npu), with and without a
# DT_SONAME in the runtime, is served by the pool: the runtime sees none of the program's 200
# allocations, only the pool's chunks (its virtual-memory calls were found too).
. "$ROOT/tests/lib.sh"
unset LD_LIBRARY_PATH
for rt in "$ABS_BUILD/fakeacl/libascendcl.so" "$ABS_BUILD/fakeacl-nosoname/libascendcl.so"; do
    mkdir -p "$TMPDIR_CASE/rt" && cp "$rt" "$TMPDIR_CASE/rt/libascendcl.so"
    FAKEACL_HBM_BYTES=4G run_preloaded dlopen_abs "$TMPDIR_CASE/rt/libascendcl.so" 200 \
        >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "dlopen_abs failed with $rt"; }
    # the vmm pool: no aclrtMalloc reaches the runtime, its chunks are physical allocations
    [ "$(stat device_allocs)" = 0 ] || fail "$rt: the runtime served $(stat device_allocs) allocations (pool bypassed)"
    [ "$(stat physical_allocs)" -ge 1 ] || fail "$rt: no physical allocation: the pool's virtual-memory calls were not found"
    [ "$(stat aclrtMalloc)" = 0 ] || fail "$rt: aclrtMalloc reached the runtime $(stat aclrtMalloc) times"
done
exit 0
