#!/bin/bash
# examples/demo.sh — `make demo`: the sample service twice on the fake runtime, first alone, then
# with LD_PRELOAD=libnpupool.so, and what changed; then npupool's own report of the second run;
# then a Python service (examples/python/) whose leak the report names by its Python line.
set -eu
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT="$BUILD/demo"
rm -rf "$OUT"; mkdir -p "$OUT"
export LD_LIBRARY_PATH="$BUILD/fakeacl"
REQUESTS=${DEMO_REQUESTS:-3000}
counter() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

echo "== 1. the service alone, on the fake runtime (64 GiB device)"
FAKEACL_STATS="$OUT/stats-plain" "$BUILD/examples/serving_demo" "$REQUESTS" | tee "$OUT/plain.txt"

echo
echo "== 2. the same, unmodified, with LD_PRELOAD=$BUILD/libnpupool.so"
FAKEACL_STATS="$OUT/stats-pool" NPUPOOL_LOG=info NPUPOOL_REPORT="$OUT/report-%n.json" \
    LD_PRELOAD="$ROOT/$BUILD/libnpupool.so" "$BUILD/examples/serving_demo" "$REQUESTS" 2>"$OUT/npupool.log" | tee "$OUT/pool.txt"
grep -E 'pool of|refused|leak' "$OUT/npupool.log" || true

echo
echo "== 3. what reached the runtime (the \"driver\")"
printf '%-38s %12s %12s\n' "" "alone" "with npupool"
for k in device_allocs device_frees peak_dev0; do
    printf '%-38s %12s %12s\n' "$k" "$(counter $k "$OUT/stats-plain")" "$(counter $k "$OUT/stats-pool")"
done

# The service calls aclFinalize with its session leak still live: npupool writes a `finalize`
# report then (pool still there), and an `exit` report at exit.
final="$OUT/report-1.json"
if [ -f "$final" ] && [ -x "$BUILD/npupool" ]; then
    echo
    echo "== 4. npupool's report at aclFinalize ($final; every report: ls $OUT)"
    "$BUILD/npupool" summary "$final"
    echo
    echo "   full stacks:    $BUILD/npupool leaks $final"
    echo "   pool picture:   $BUILD/npupool map $final -o $OUT/map.svg"
    "$BUILD/npupool" map "$final" -o "$OUT/map.svg" >/dev/null && echo "   (written: $OUT/map.svg)"
fi

# A Python service (examples/python/: ctypes.CDLL releases the GIL around each call, as a
# torch_npu operator does): its leak named by its Python line, in observe mode (the runtime
# serves every allocation) and in pool mode.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
if [ -n "$PY" ] && [ -x "$BUILD/npupool" ]; then
    echo
    echo "== 5. a Python service ($PY examples/python/serve.py), NPUPOOL_MODE=observe and pool"
    for mode in observe pool; do
        FAKEACL_STATS="$OUT/stats-py-$mode" NPUPOOL_MODE=$mode NPUPOOL_REPORT="$OUT/py-$mode-%n.json" \
            LD_PRELOAD="$ROOT/$BUILD/libnpupool.so" "$PY" examples/python/serve.py 2000
    done
    printf '%-38s %12s %12s\n' "" "observe" "pool"
    printf '%-38s %12s %12s\n' device_allocs "$(counter device_allocs "$OUT/stats-py-observe")" \
        "$(counter device_allocs "$OUT/stats-py-pool")"
    echo
    echo "   npupool summary $OUT/py-observe-1.json (the report at aclFinalize):"
    "$BUILD/npupool" summary "$OUT/py-observe-1.json" | sed -n '/top leak sites/,$p'
    echo
    echo "   the same leak in pool mode: $BUILD/npupool leaks $OUT/py-pool-1.json"
    "$BUILD/npupool" leaks "$OUT/py-pool-1.json" | sed -n '3p'
fi
