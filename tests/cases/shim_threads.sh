# variants: plain asan tsan
# 8 and 16 threads allocate, stamp, verify and free through every entry point concurrently; then
# 8 threads hand blocks to each other (most frees from another thread than the allocating one),
# and the finalize report must hold no live allocation: every free found its record, whichever
# thread's ledger shards held it.  Then two threads free the same block at the same moment, 3,000
# times: each time one free succeeds and the other gets 207002, and at the end the ledger holds
# nothing and the device counted 3,000 invalid frees.
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
NPUPOOL_REPORT="$TMPDIR_CASE/race-%p-%n.json" run_preloaded threads 2 race \
    >"$TMPDIR_CASE/race.out" 2>"$TMPDIR_CASE/race.err" \
    || fail "threads 2 race failed: $(cat "$TMPDIR_CASE/race.out")"
fin=$(ls "$TMPDIR_CASE"/race-*.json 2>/dev/null | head -1)
[ -n "$fin" ] || fail "threads 2 race: no finalize report"
jq -e '.trigger == "finalize" and .ledger.live_allocations == 0 and
       ([.devices[].counters.invalid_frees // 0] | add) == 3000' "$fin" >/dev/null \
    || fail "threads 2 race: $(jq -c '[.ledger.live_allocations, [.devices[].counters]]' "$fin")"
grep -q 'returning 207002' "$TMPDIR_CASE/race.err" || fail "threads 2 race: no line for the refused frees"
exit 0
