# variants: plain asan
# Two devices, aclrtGetMemInfo telling the truth, aclrtResetDevice dropping and rebuilding a pool.
. "$ROOT/tests/lib.sh"
run_plain devices || fail "devices fails without the shim"
run_preloaded devices || fail "devices fails in front of the shim"
# device 0: one reservation; device 1: one before and one after its reset
[ "$(stat device_allocs)" -eq 3 ] || fail "expected 3 runtime allocations (pools), got $(stat device_allocs)"
exit 0
