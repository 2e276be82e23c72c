# variants: plain asan tsan
# 8 and 16 threads allocate, stamp, verify and free through every entry point concurrently; then
# 8 threads hand blocks to each other (most frees from another thread than the allocating one),
# and the finalize report must hold no live allocation: every free found its record, whichever
# thread's ledger shards held it.
. "$ROOT/tests/lib.sh"
for n in 8 16; do
    run_preloaded threads "$n" || fail "threads $n failed in front of the vmm pool"
    pool_only "threads $n"
    NPUPOOL_VMM=0 run_preloaded threads "$n" || fail "threads $n failed in front of the shim"
    [ "$(stat device_allocs)" -eq 1 ] || fail "threads $n: expected 1 runtime allocation, got $(stat device_allocs)"
done
NPUPOOL_REPORT="$TMPDIR_CASE/handoff-%p-%n.json" run_preloaded threads 8 handoff \
    || fail "threads 8 handoff failed"
fin=$(ls "$TMPDIR_CASE"/handoff-*.json 2>/dev/null | head -1)
[ -n "$fin" ] || fail "threads 8 handoff: no finalize report"
jq -e '.trigger == "finalize" and .ledger.live_allocations == 0 and (.leaks | length) == 0' "$fin" \
    >/dev/null || fail "threads 8 handoff: records left: $(jq -c '.ledger.live_allocations' "$fin")"
exit 0
