# variants: plain
# The preload library exports only the hooks, dlsym/dlvsym and npupool_* names, and does not
# depend on any libascendcl.so (it finds the real runtime at run time).
. "$ROOT/tests/lib.sh"
readelf -d "$SHIM" | grep NEEDED | grep -q ascendcl && fail "libnpupool.so links a libascendcl"
bad=$(nm -D --defined-only "$SHIM" | awk '{print $3}' | grep -vE '^(acl|dlsym$|dlvsym$|npupool_)' | grep -v '^$')
[ -z "$bad" ] || fail "unexpected exported symbols: $bad"
for s in aclrtMalloc aclrtMallocAlign32 aclrtMallocCached aclrtMallocWithCfg aclrtFree aclrtFreeWithDevSync \
         aclrtGetMemInfo aclrtResetDevice aclFinalize dlsym dlvsym; do
    nm -D --defined-only "$SHIM" | awk '{print $3}' | grep -qx "$s" || fail "$s not exported"
done
exit 0
