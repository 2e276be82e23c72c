# variants: plain asan
# The seeds' OOM puzzle on a block pool (NPUPOOL_VMM=0; a virtual-memory pool serves it:
# vmm_puzzle.sh): 1 GiB blocks fill an 8 GiB pool, every other one is freed, 2 GiB is refused
# with 207001 (fallback off) and the oom report explains why: fragmentation, 4 GiB free but no
# block larger than 1 GiB, with the refused call's site and figures that agree with the pool.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
NPUPOOL_VMM=0 NPUPOOL_POOL_BYTES=8G NPUPOOL_FALLBACK=0 NPUPOOL_REPORT="$TMPDIR_CASE/oom-%n.json" \
    run_preloaded oom_puzzle >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "oom_puzzle failed"; }
cat "$TMPDIR_CASE/out" "$TMPDIR_CASE/err"
grep -q '^REFUSED 207001$' "$TMPDIR_CASE/out" || fail "2 GiB was not refused with 207001"
oom=$(grep -l '"trigger":[[:space:]]*"oom"' "$TMPDIR_CASE"/oom-*.json)
[ "$(echo "$oom" | grep -c .)" -eq 1 ] || fail "expected one oom report, found: $oom"
check_reports "$oom" --trigger oom || fail "the oom report is invalid"
jq -e '.oom.requested_bytes == 2147483648 and .oom.entry_point == "aclrtMalloc"
       and .oom.kind == "fragmentation"
       and .oom.reason == "fragmentation: 4.0 GiB free, but the largest block a 2.0 GiB request can be given is 1.0 GiB"
       and .oom.frames[0].function == "ask_for_two_gib" and .oom.frames[1].function == "main"
       and .oom.free_bytes >= 4 * 1073741824 - 1024 and .oom.largest_free_bytes < 2147483648
       and .devices[0].pool.free_bytes == .oom.free_bytes
       and .devices[0].pool.largest_free_bytes == .oom.largest_free_bytes
       and .devices[0].pool.fragmentation > 0.7
       and ([.devices[0].free_map[][1]] | max) == .oom.largest_free_bytes' "$oom" >/dev/null \
    || { jq '.oom, .devices[0].pool' "$oom"; fail "the oom report does not explain the refusal"; }
exit 0
