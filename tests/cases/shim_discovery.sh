# variants: plain asan tsan
# The runtime is found wherever the host found it: a program that dlopen()s libascendcl.so by
# absolute path, RTLD_LOCAL, with no LD_LIBRARY_PATH (ctypes, torch_npu), with and without a
# DT_SONAME in the runtime, is served by the pool: the runtime sees one allocation (the pool's
# reservation) for 200 of the program's.
. "$ROOT/tests/lib.sh"
unset LD_LIBRARY_PATH
for rt in "$ABS_BUILD/fakeacl/libascendcl.so" "$ABS_BUILD/fakeacl-nosoname/libascendcl.so"; do
    mkdir -p "$TMPDIR_CASE/rt" && cp "$rt" "$TMPDIR_CASE/rt/libascendcl.so"
    FAKEACL_HBM_BYTES=4G run_preloaded dlopen_abs "$TMPDIR_CASE/rt/libascendcl.so" 200 \
        >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "dlopen_abs failed with $rt"; }
    [ "$(stat device_allocs)" = 1 ] || fail "$rt: the runtime served $(stat device_allocs) allocations (pool bypassed)"
    [ "$(stat aclrtMalloc)" = 1 ] || fail "$rt: aclrtMalloc reached the runtime $(stat aclrtMalloc) times"
done
exit 0
