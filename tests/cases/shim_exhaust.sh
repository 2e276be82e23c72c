# variants: plain asan
# Exhaustion with and without fallback on a 512 MiB device: the last answer is 207001 in every
# mode, nothing is lost (the same amount can be allocated again), fallback adds the runtime's
# remaining memory, and a refused reservation backs off instead of failing (NPUPOOL_VMM=0); the
# virtual-memory pool fills its chunks exactly and grows back when its first chunks are refused.
. "$ROOT/tests/lib.sh"
export FAKEACL_HBM_BYTES=512M FAKEACL_DEVICES=1
blk=$((8 << 20))
got() { sed -n 's/^granted \([0-9]*\) blocks.*/\1/p' "$1"; }

run_plain exhaust $blk >"$TMPDIR_CASE/plain" || fail "exhaust fails without the shim"
# the virtual-memory pool: 409.6 MiB rounded down to 2 MiB chunks
NPUPOOL_FALLBACK=0 run_preloaded exhaust $blk >"$TMPDIR_CASE/vnofb" 2>"$TMPDIR_CASE/vnofb.err" || fail "vmm: exhaust fails with fallback off"
grep -q 'refused with 207001: exhausted' "$TMPDIR_CASE/vnofb.err" || fail "vmm: no clear refusal line: $(cat "$TMPDIR_CASE/vnofb.err")"
pool_only "vmm, fallback off"
[ "$(got "$TMPDIR_CASE/vnofb")" -eq $(( (408 << 20) / (blk + 64) * blk )) ] || fail "vmm: fallback off should fill the pool exactly"
NPUPOOL_FALLBACK=1 run_preloaded exhaust $blk >"$TMPDIR_CASE/vfb" 2>/dev/null || fail "vmm: exhaust fails with fallback on"
[ "$(got "$TMPDIR_CASE/vfb")" -ge "$(got "$TMPDIR_CASE/plain")" ] || fail "vmm: fallback on should reach what the runtime alone gives"
FAKEACL_FAIL_PHYSICAL_NTH=1 NPUPOOL_FALLBACK=0 run_preloaded exhaust $blk >"$TMPDIR_CASE/vinj" || fail "vmm: a refused first chunk broke the run"
[ "$(stat injected_failures)" -eq 1 ] || fail "vmm: the injected failure did not happen"
[ "$(got "$TMPDIR_CASE/vinj")" -eq "$(got "$TMPDIR_CASE/vnofb")" ] || fail "vmm: the pool did not grow back after a refused chunk"
export NPUPOOL_VMM=0
NPUPOOL_FALLBACK=0 run_preloaded exhaust $blk >"$TMPDIR_CASE/nofb" 2>"$TMPDIR_CASE/nofb.err" || fail "exhaust fails with fallback off"
grep -q 'refused with 207001: exhausted' "$TMPDIR_CASE/nofb.err" || fail "no clear refusal line: $(cat "$TMPDIR_CASE/nofb.err")"
[ "$(stat device_allocs)" -eq 1 ] || fail "fallback off: the runtime saw $(stat device_allocs) allocations, expected 1"
NPUPOOL_FALLBACK=1 run_preloaded exhaust $blk >"$TMPDIR_CASE/fb" 2>/dev/null || fail "exhaust fails with fallback on"
p=$(got "$TMPDIR_CASE/plain"); n=$(got "$TMPDIR_CASE/nofb"); f=$(got "$TMPDIR_CASE/fb")
echo "plain=$p fallback0=$n fallback1=$f"
pool=$(( (512 << 20) * 8 / 10 / (2 << 20) * (2 << 20) - 32 ))
[ "$n" -eq $(( pool / (blk + 64) * blk )) ] || fail "fallback off should fill the pool exactly: $n"
[ "$f" -gt "$n" ] || fail "fallback on should add the runtime's remaining memory ($f <= $n)"
[ "$f" -ge "$p" ] || fail "fallback on should reach at least what the runtime alone gives ($f < $p)"

# the first reservation attempt is refused (injected): the shim retries and still serves
FAKEACL_FAIL_NTH=1 NPUPOOL_FALLBACK=0 run_preloaded exhaust $blk >"$TMPDIR_CASE/inj" || fail "injected refusal broke the run"
[ "$(stat injected_failures)" -eq 1 ] || fail "the injected failure did not happen"
[ "$(got "$TMPDIR_CASE/inj")" -gt 0 ] || fail "no pool after one refused reservation"
# every reservation above 100 MiB is refused: the pool backs off to what the runtime grants
FAKEACL_FAIL_ABOVE=100M NPUPOOL_FALLBACK=0 run_preloaded exhaust $blk >"$TMPDIR_CASE/cap" || fail "capped reservation broke the run"
g=$(got "$TMPDIR_CASE/cap")
[ "$g" -ge $((64 << 20)) ] && [ "$g" -le $((100 << 20)) ] || fail "backed-off pool served $g bytes"
exit 0
