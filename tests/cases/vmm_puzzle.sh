# variants: plain asan
# The seeds' OOM puzzle on the virtual-memory pool: 4 GiB free in 1 GiB holes, 2 GiB asked with
# fallback off: served, by remapping the holes' chunks into a fresh range (the block pool refuses
# it: report_oom.sh).  Below the chunk size fragmentation remains: 64 MiB chunks, holes that
# straddle every chunk edge, 100 MiB asked: refused, and the oom report says so.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
NPUPOOL_POOL_BYTES=8G NPUPOOL_FALLBACK=0 NPUPOOL_REPORT="$TMPDIR_CASE/p-%n.json" \
    run_preloaded oom_puzzle served >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "the puzzle was not served"; }
grep -q '^SERVED$' "$TMPDIR_CASE/out" || fail "the puzzle was not served"
[ "$(stat device_allocs)" -eq 0 ] || fail "device blocks reached the runtime"
[ "$(stat unmaps)" -ge 1025 ] || fail "expected the 2 GiB to be stitched from >= 1025 remapped chunks, $(stat unmaps) unmaps"
[ "$(stat maps)" -eq $(( $(stat physical_allocs) + $(stat unmaps) )) ] || fail "maps: $(stat maps)"
grep -l '"trigger":[[:space:]]*"oom"' "$TMPDIR_CASE"/p-*.json && fail "an oom report was written"
ex=$(grep -l '"trigger":[[:space:]]*"exit"' "$TMPDIR_CASE"/p-*.json)
check_reports "$ex" --trigger exit || fail "the exit report is invalid"
jq -e '.devices[0].backing == "vmm" and .devices[0].vmm.stitches == 1 and .devices[0].vmm.chunks_unmapped >= 1025
       and .devices[0].counters.ooms == 0 and .devices[0].pool.allocated_bytes == 0' "$ex" >/dev/null \
    || { jq '.devices[0].vmm, .devices[0].counters' "$ex"; fail "the exit report does not show the stitch"; }

NPUPOOL_POOL_BYTES=1G NPUPOOL_CHUNK_BYTES=64M NPUPOOL_FALLBACK=0 NPUPOOL_REPORT="$TMPDIR_CASE/c-%n.json" \
    run_preloaded chunk_frag >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "chunk_frag failed"; }
cat "$TMPDIR_CASE/err"
grep -q '^REFUSED 207001$' "$TMPDIR_CASE/out" || fail "100 MiB was not refused with 207001"
grep -q 'refused with 207001: fragmentation: .*whole 64.0 MiB chunks that could be remapped into one range (the rest lies in pieces smaller than a chunk' \
    "$TMPDIR_CASE/err" || fail "the stderr line does not say why"
oom=$(grep -l '"trigger":[[:space:]]*"oom"' "$TMPDIR_CASE"/c-*.json)
[ "$(echo "$oom" | grep -c .)" -eq 1 ] || fail "expected one oom report, found: $oom"
check_reports "$oom" --trigger oom || fail "the oom report is invalid"
jq -e '.oom.kind == "fragmentation" and (.oom.reason | contains("pieces smaller than a chunk"))
       and .oom.frames[0].function == "ask_for_100_mib"
       and .devices[0].backing == "vmm" and .devices[0].vmm.chunk_bytes == 67108864
       and .devices[0].vmm.limit_bytes == 1073741824 and .devices[0].vmm.mapped_bytes == 1073741824
       and .devices[0].vmm.whole_chunk_free_bytes == 0
       and .devices[0].pool.reserved_bytes == .devices[0].vmm.mapped_bytes
       and .devices[0].pool.free_bytes == .oom.free_bytes' "$oom" >/dev/null \
    || { jq '.oom, .devices[0].backing, .devices[0].vmm' "$oom"; fail "the oom report does not explain the refusal"; }
exit 0
