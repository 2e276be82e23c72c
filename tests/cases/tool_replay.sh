# variants: plain asan
# Replay: the shipped traces are exactly what their generator writes; --min-pool on the
# hand-built trace gives the known answer (5120); fallback and refusal figures; RMM CSV input;
# --check runs the pool checker after every event with no violation; a trace read through a pipe
# (in pieces, lines split between them) gives the figures of the file; the first-fit baseline.
. "$ROOT/tests/lib.sh"
NP="$ROOT/$BUILD/npupool"
GEN="$ROOT/$BUILD/traces/gen"
cd "$ROOT"
# shipped traces == generator output (the recipe is the `traces` target of tools/tools.mk)
"$GEN" serving  --events 12000 --seed 1 -o "$TMPDIR_CASE/serving.trace"
"$GEN" training --events 12000 --seed 1 -o "$TMPDIR_CASE/training.trace"
"$GEN" service  --events 12000 --seed 1 -o "$TMPDIR_CASE/service.trace"
"$GEN" random   --events 12000 --seed 1 --max-mib 16 -o "$TMPDIR_CASE/rmm_random.trace"
"$GEN" random   --events 2000  --seed 2 --max-mib 4 --format rmm -o "$TMPDIR_CASE/rmm_random_small.csv"
for f in serving.trace training.trace service.trace rmm_random.trace rmm_random_small.csv; do
    cmp -s "$TMPDIR_CASE/$f" "traces/$f" || fail "traces/$f differs from the generator's output (make traces)"
done
B="--backing block"
out=$("$NP" replay tests/fixtures/traces/minpool.trace $B --rounding none --min-pool --no-timing) || fail "replay minpool"
echo "$out" | grep -q 'device 0: 5.0 KiB (5120 bytes); live peak 4.0 KiB (4096 bytes)' || { echo "$out"; fail "min pool is not 5120"; }
out=$("$NP" replay tests/fixtures/traces/minpool.trace $B --rounding none --pool-bytes 5056 --fallback 0 --fail-on-refusal --no-timing)
[ $? -eq 1 ] || fail "--fail-on-refusal must exit 1 at 5056 bytes"
echo "$out" | grep -q 'refused 1 = 2.0 KiB' || { echo "$out"; fail "refusal at 5056 bytes"; }
"$NP" replay tests/fixtures/traces/minpool.trace $B --rounding none --pool-bytes 5120 --fallback 0 --fail-on-refusal >/dev/null \
    || fail "5120 bytes must run without refusal"
# the virtual-memory pool holds whole chunks: 2 MiB at least, and it says so
out=$("$NP" replay tests/fixtures/traces/minpool.trace --rounding none --min-pool --no-timing) || fail "replay minpool (vmm)"
echo "$out" | grep -q 'device 0: 2.0 MiB (2097152 bytes)' || { echo "$out"; fail "vmm min pool is not one chunk"; }
"$NP" replay tests/fixtures/traces/minpool.trace --rounding none --pool-bytes 1M --no-timing 2>&1 | grep -q 'cannot create' \
    || fail "a vmm pool below one chunk must be refused"
"$NP" replay tests/fixtures/traces/minpool.trace --chunk-bytes 3M --no-timing 2>&1 | grep -q 'not a power of two' \
    || fail "--chunk-bytes 3M must be refused"
out=$("$NP" replay tests/fixtures/traces/minpool.trace $B --rounding none --pool-bytes 4K --fallback 1 --no-timing)
echo "$out" | grep -q 'peak reserved    6.0 KiB' || { echo "$out"; fail "fallback peak reserved"; }
# every shipped trace, both backings: checker after every event, nothing refused in a default
# (51.2 GiB) pool; and in a pool just above the trace's own minimum, where the vmm pool stitches
for f in traces/*.trace traces/*.csv; do
    for b in block vmm; do
        out=$("$NP" replay "$f" --backing $b --check --no-timing) || fail "replay $f --check ($b)"
        echo "$out" | grep -q 'invariant checks: 0 violations' || fail "$f: invariant violations ($b)"
        echo "$out" | grep -q 'refused 0)' || fail "$f: refusals in a 51.2 GiB pool ($b)"
    done
    m=$("$NP" replay "$f" --min-pool --verify 0 --no-timing | sed -n 's/^  device 0: .* (\([0-9]*\) bytes); live.*/\1/p')
    [ -n "$m" ] || fail "$f: no minimum pool"
    out=$("$NP" replay "$f" --pool-bytes "$m" --fallback 0 --check --no-timing) || fail "replay $f at its minimum"
    echo "$out" | grep -q 'invariant checks: 0 violations' || fail "$f: invariant violations at $m bytes"
    echo "$out" | grep -q 'refused 0)' || { echo "$out"; fail "$f: refusals at its own minimum"; }
done
# the service trace leaks: its live bytes at the end are the planted 1 MiB buffers
n=$(grep -c ',alloc,.*,1048576,0$' traces/service.trace)
"$NP" replay traces/service.trace --no-timing | grep -q "allocations never freed" || fail "service leak not seen"
# a larger pool can do worse: on serving.trace the block pool's bisection finds a size (12.6 GiB)
# that serves while some larger sizes refuse; the figure printed serves at every size checked
# above it (and the vmm pool, which stitches, is monotone there)
out=$("$NP" replay traces/serving.trace --backing block --min-pool --no-timing) || fail "replay serving --min-pool"
echo "$out" | grep -qE 'not monotone: [0-9.]+ GiB \([0-9]+ bytes\) serves, but [0-9]+ of [0-9]+ larger sizes checked refuse' \
    || { echo "$out"; fail "the block pool's non-monotone minimum was not reported"; }
safe=$(echo "$out" | sed -n 's/^  device 0: .* (\([0-9]*\) bytes); live.*/\1/p')
first=$(echo "$out" | sed -n 's/.*refuse a request ([^=]*= \([0-9]*\) bytes .*/\1/p')
bisected=$(echo "$out" | sed -n 's/.*not monotone: [0-9.]* GiB (\([0-9]*\) bytes) serves.*/\1/p')
[ -n "$safe" ] && [ -n "$bisected" ] && [ -n "$first" ] || fail "figures missing from the report"
[ "$bisected" -lt "$first" ] && [ "$first" -lt "$safe" ] \
    || fail "expected bisection ($bisected) < first refusing size ($first) < safe figure ($safe)"
"$NP" replay traces/serving.trace --backing block --pool-bytes "$safe" --fallback 0 --fail-on-refusal >/dev/null \
    || fail "the safe figure refuses"
"$NP" replay traces/serving.trace --backing block --pool-bytes "$bisected" --fallback 0 --fail-on-refusal >/dev/null \
    || fail "the bisection's figure must serve"
"$NP" replay traces/serving.trace --backing block --pool-bytes "$first" --fallback 0 --fail-on-refusal >/dev/null
[ $? -eq 1 ] || fail "the first refusing size ($first) must refuse"
out=$("$NP" replay traces/serving.trace --min-pool --no-timing) || fail "replay serving --min-pool (vmm)"
echo "$out" | grep -q 'every one of 125 larger sizes up to 22.7 GiB serves too' || { echo "$out"; fail "vmm: not monotone"; }
# ratio and device size
"$NP" replay traces/serving.trace --ratio 0.5 --device-bytes 16G --no-timing | grep -q '8.0 GiB (8589934592 bytes) per device' \
    || fail "--ratio of --device-bytes"
# RMM log from stdin
"$NP" replay - <traces/rmm_random_small.csv --no-timing | grep -q '(RMM log): ' || fail "RMM csv on stdin"
[ "$n" -gt 0 ] || fail "service trace has no leak allocations"
# through a pipe: the same figures as from the file (all but the line naming the input)
cmp -s <("$NP" replay traces/serving.trace --no-timing --min-pool | tail -n +2) \
    <(cat traces/serving.trace | "$NP" replay - --no-timing --min-pool | tail -n +2) || fail "replay of a piped trace differs"
# the seed's first fit is always in the build
"$NP" replay tests/fixtures/traces/minpool.trace --allocator firstfit --rounding none --min-pool --no-timing \
    | grep -q '^allocator    firstfit' || fail "--allocator firstfit"
exit 0
