# variants: plain asan
# torch_npu's expandable segments beside the pool (tests/programs/expandable.c): a program that
# grows a segment of physical memory until the runtime refuses gets at least 95% of what it gets
# alone, minus what the pool holds live; aclrtGetMemInfo tells it so beforehand; the pool gives
# its free chunks back (said once at info, counted in the report).  The block pool of
# NPUPOOL_VMM=0 keeps its 80%, which is why the virtual-memory pool exists.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_jsonschema
val() { sed -n "s/^$1 //p" "$2"; }
GiB=$((1 << 30))
run_plain expandable >"$TMPDIR_CASE/alone" || fail "expandable fails alone"
alone=$(val obtained "$TMPDIR_CASE/alone"); alone_free=$(val reported_free "$TMPDIR_CASE/alone")
for live in 0 $((4 * GiB)); do
    NPUPOOL_LOG=info NPUPOOL_REPORT="$TMPDIR_CASE/r-$live-%n.json" NPUPOOL_REPORT_INTERVAL=0 \
        run_preloaded expandable $live >"$TMPDIR_CASE/with" 2>"$TMPDIR_CASE/err" \
        || { cat "$TMPDIR_CASE/err"; fail "expandable fails beside the pool (live $live)"; }
    got=$(val obtained "$TMPDIR_CASE/with"); said=$(val reported_free "$TMPDIR_CASE/with")
    echo "live $live: alone $alone, beside the pool $got (aclrtGetMemInfo said $said free)"
    [ "$got" -ge $(( (alone - live) / 100 * 95 )) ] || fail "live $live: got $got of $alone alone"
    [ "$got" -ge $(( said / 100 * 95 )) ] || fail "live $live: aclrtGetMemInfo promised $said, got $got"
    [ "$(grep -c 'npupool gave back .* of the pool.s free chunks' "$TMPDIR_CASE/err")" -eq 1 ] \
        || fail "live $live: the give-back was not said exactly once"
    [ "$(stat device_allocs)" -eq 0 ] || fail "live $live: device blocks reached the runtime"
done
[ "$said" -le "$alone_free" ] || fail "aclrtGetMemInfo reports more than the device has"
# a report of the pool after the give-backs: written by a signal is not possible here, so look
# at the fake: the chunks the pool gave back were unmapped and freed
[ "$(stat unmaps)" -gt 1000 ] && [ "$(stat physical_frees)" -ge "$(stat unmaps)" ] || fail "no chunk was given back"
# a refused aclrtReserveMemAddress (the fake's second: the first is the pool's own range) is
# answered by a give-back and one retry as well
FAKEACL_FAIL_RESERVE_NTH=2 NPUPOOL_LOG=info run_preloaded expandable >"$TMPDIR_CASE/resv" 2>"$TMPDIR_CASE/err" \
    || { cat "$TMPDIR_CASE/err"; fail "a refused reservation was not retried"; }
[ "$(stat injected_failures)" -eq 1 ] || fail "the reservation was not refused"
grep -q 'the runtime refused aclrtReserveMemAddress; npupool gave back 2.0 MiB' "$TMPDIR_CASE/err" \
    || fail "the reservation's give-back was not said: $(grep 'gave back' "$TMPDIR_CASE/err")"
NPUPOOL_VMM=0 run_preloaded expandable >"$TMPDIR_CASE/block" || fail "expandable fails beside a block pool"
echo "block pool: the segment got $(val obtained "$TMPDIR_CASE/block")"
[ "$(val obtained "$TMPDIR_CASE/block")" -lt $((alone / 2)) ] || fail "the block pool should keep its 80%"
exit 0
