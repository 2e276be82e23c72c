# variants: plain
# Options: effective values at NPUPOOL_LOG=info, one warning per bad value (default kept),
# NPUPOOL_POOL_BYTES, and NPUPOOL_DISABLE=1 as pure pass-through.
. "$ROOT/tests/lib.sh"
NPUPOOL_VMM=0 NPUPOOL_LOG=info NPUPOOL_POOL_BYTES=256M run_preloaded basic 2>"$TMPDIR_CASE/info" || fail "basic fails with options"
grep -q 'option NPUPOOL_RATIO=0.8' "$TMPDIR_CASE/info" || fail "effective options not printed"
grep -q 'option NPUPOOL_POOL_BYTES=268435456' "$TMPDIR_CASE/info" || fail "NPUPOOL_POOL_BYTES not effective"
grep -q 'pool of 256.0 MiB reserved' "$TMPDIR_CASE/info" || fail "pool size not 256 MiB"
NPUPOOL_LOG=info NPUPOOL_POOL_BYTES=256M NPUPOOL_CHUNK_BYTES=5M run_preloaded basic 2>"$TMPDIR_CASE/vinfo" || fail "basic fails with vmm options"
grep -q 'pool on the virtual-memory API: 256.0 MiB of 256.0 MiB mapped in 8.0 MiB chunks, address range of 1.0 GiB' "$TMPDIR_CASE/vinfo" \
    || fail "vmm pool not as asked: $(grep virtual "$TMPDIR_CASE/vinfo")"
[ "$(stat physical_allocs)" -eq 32 ] || fail "expected 32 chunks of 8 MiB, got $(stat physical_allocs)"
FAKEACL_VMM=0 NPUPOOL_LOG=info run_preloaded basic 2>"$TMPDIR_CASE/old" || fail "basic fails on a runtime without the API"
grep -q 'granularity query answered 207000.*the pool is one block' "$TMPDIR_CASE/old" || fail "no block fallback said"
[ "$(stat device_allocs)" -eq 1 ] || fail "without the API: expected the one block, got $(stat device_allocs)"

NPUPOOL_RATIO=abc NPUPOOL_FALLBACK=maybe NPUPOOL_LOG=loud run_preloaded basic 2>"$TMPDIR_CASE/bad" || fail "bad values broke the run"
for v in NPUPOOL_RATIO NPUPOOL_FALLBACK NPUPOOL_LOG; do
    [ "$(grep -c "^npupool\[[0-9]*\]: $v=" "$TMPDIR_CASE/bad")" -eq 1 ] || fail "expected one warning for $v"
done
pool_only "defaults kept after bad values"

run_plain basic; plain=$(stat device_allocs)
NPUPOOL_DISABLE=1 run_preloaded basic 2>"$TMPDIR_CASE/dis" || fail "basic fails with NPUPOOL_DISABLE=1"
[ "$(stat device_allocs)" -eq "$plain" ] || fail "NPUPOOL_DISABLE=1 is not pass-through"
exit 0
