#!/bin/sh
# bench/bench_knobs.sh — where the small-block design trades one figure for another (issue 13):
# the pool built again with one of its compile-time knobs changed (pool/slab.h), each variant in
# a build directory of its own ($BUILD/knobs/NAME), and for every variant and the shipped build
# the same figures of the same run:
#   - bench_peers' fragmentation section: the smallest arena that runs a trace / its peak live
#     bytes (median of the seeds) and the waste per block, on the tensor, mixed (about 11 live
#     blocks per size class) and rmm traces, and on a dense trace written here (20,000 live
#     blocks of 512 B - 64 KiB, log-uniform, 40,000 replacements: hundreds per class), which
#     bench_peers replays as its trace file (BENCH_PEERS_TRACE);
#   - bench_pool's pair: median and untimed mean at 1,000 and 100,000 live.
# Best fit's figures on the same traces are printed once, for reference.
#
# Knobs: SLAB_STEP_LOG2, the size classes per power of two (less rounding waste per block, but
# the live blocks spread over more classes, each with a partly used page); SLAB_PAGE_MIN_LIVE,
# the live blocks a class needs before it gets a slab page (below it its blocks go to the large
# heap: no page pinned for a few blocks, but those pairs take the lock); SLAB_PAGE_GROW, a new
# page's slots as a fraction of the class's live blocks (smaller pages empty sooner).
#
# Usage: sh bench/bench_knobs.sh BUILD [PAIRS [SCALE]]
#   BUILD  the plain build directory whose bench_peers and bench_pool are the shipped row
#   PAIRS  bench_pool's timed pairs (default 100000)     SCALE  bench_peers' scale (default 1)
#   BENCH_KNOBS_ONLY="name ..." builds and runs only those variants (the smoke test: one).
#   MAKE (default make) builds the variants; `make bench` runs this last.
# Output: a table, then one `BENCH_KNOBS variant=...` line per row.
set -eu
BUILD=${1:?usage: bench_knobs.sh BUILD [PAIRS [SCALE]]}
PAIRS=${2:-100000}
SCALE=${3:-1}
MAKE=${MAKE:-make}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

# name|cflags|what it changes (shipped: 8 classes per power of two, pages at 8 live, live / 4)
VARIANTS='step2|-DSLAB_STEP_LOG2=2u|4 size classes per power of two (waste < 25 %)
step4|-DSLAB_STEP_LOG2=4u|16 size classes per power of two (waste < 6.25 %)
minlive1|-DSLAB_PAGE_MIN_LIVE=1u|a class gets a page at its first live block
minlive32|-DSLAB_PAGE_MIN_LIVE=32u|a class gets a page at 32 live blocks
grow16|-DSLAB_PAGE_GROW=16u|new pages of class live / 16 slots (smaller)'

chosen() { # is variant $1 asked for?
    [ -z "${BENCH_KNOBS_ONLY:-}" ] && return 0
    for w in $BENCH_KNOBS_ONLY; do [ "$w" = "$1" ] && return 0; done
    return 1
}

# The dense trace, in npupool's trace format (docs/trace.md).  Deterministic: Park and Miller's
# generator (exact in awk's doubles), made-up pointers that are never reused.
mkdir -p "$BUILD/knobs"
DENSE="$BUILD/knobs/dense.trace"
awk -v live=20000 -v reps=40000 -v lo=512 -v hi=65536 'BEGIN {
    x = 12345; la = log(lo); lb = log(hi); t = 1000000000; next_ptr = 4096
    print "# npupool-trace/1 generator=bench_knobs dense"
    print "thread,time_ns,action,pointer,size,device"
    for (i = 0; i < live + reps; i++) {
        k = i
        if (i >= live) {
            x = (16807 * x) % 2147483647; k = x % live
            printf "1,%d,free,0x%x,,0\n", t++, ptr[k]
        }
        x = (16807 * x) % 2147483647
        size = int(exp(la + x / 2147483647 * (lb - la)))
        ptr[k] = next_ptr; next_ptr += 256
        printf "1,%d,alloc,0x%x,%d,0\n", t++, ptr[k], size
    }
}' >"$DENSE"

# One build directory's fragmentation runs (bench_peers section C on its traces, then on the
# dense one): their output into FRAG and DENSE_FRAG, for figures() to read.
run_frag() { # $1 = bench directory
    FRAG=$(BENCH_PEERS_SECTIONS=C "$1/bench_peers" "$SCALE") || return 1
    DENSE_FRAG=$(BENCH_PEERS_SECTIONS=C BENCH_PEERS_TRACE="$DENSE" BENCH_PEERS_TRACE_NAME=dense \
        "$1/bench_peers" "$SCALE") || return 1
}

# The figures of one allocator in the last run_frag's output (and, for npupool, the build
# directory's bench_pool pair), as "key=value ..." on one line; $2 = npupool, or bestfit for the
# reference (every bench_peers run has it: the shipped build's serves).
figures() { # $1 = bench directory, $2 = allocator
    pair=
    [ "$2" = npupool ] && { pair=$("$1/bench_pool" "$PAIRS") || return 1; }
    {
        printf '%s\n' "$FRAG" | grep "^BENCH_PEERS kind=frag .*alloc=$2 "
        printf '%s\n' "$DENSE_FRAG" | grep "^BENCH_PEERS kind=frag trace=dense .*alloc=$2 "
        printf '%s\n' "$pair" | grep '^BENCH_POOL .*alloc=npupool ' || true
    } | awk '
        function val(k,   i, kv) {
            for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
            return ""
        }
        function median(list,   n, a, i, j, t) {
            n = split(list, a, " ")
            for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j] + 0 < a[j-1] + 0; j--) {
                t = a[j]; a[j] = a[j-1]; a[j-1] = t
            }
            return a[int((n + 1) / 2)]
        }
        $1 == "BENCH_PEERS" {
            t = val("trace"); ratio[t] = ratio[t] " " val("min_over_peak")
            waste[t] = waste[t] " " val("waste_per_block")
        }
        $1 == "BENCH_POOL" {
            l = val("live"); med[l] = val("median_ns"); mean[l] = val("mean_ns")
        }
        END {
            printf "tensor=%.3f mixed=%.3f mixed_waste=%.0f dense=%.3f dense_waste=%.0f",
                median(ratio["tensor"]), median(ratio["mixed"]), median(waste["mixed"]),
                median(ratio["dense"]), median(waste["dense"])
            printf " rmm=%.3f median_1k=%s mean_1k=%s median_100k=%s mean_100k=%s\n",
                median(ratio["rmm"]), med["1000"], mean["1000"], med["100000"], mean["100000"]
        }'
}

LINES=
row() { # $1 = name, $2 = what, $3 = figures
    printf '%s\n' "$3" | awk -v name="$1" -v what="$2" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        pair = f["median_1k"] == "" ? "-" : sprintf("%.0f / %.1f", f["median_1k"], f["mean_1k"])
        big = f["median_100k"] == "" ? "-" : sprintf("%.0f / %.1f", f["median_100k"], f["mean_100k"])
        printf "%-10s %-48s %6s %6s %6s B %6s %6s B %6s %13s %13s\n", name, what, f["tensor"],
               f["mixed"], f["mixed_waste"], f["dense"], f["dense_waste"], f["rmm"], pair, big
    }'
    LINES="${LINES}BENCH_KNOBS variant=$1 $3
"
}

echo "where the small-block design trades one figure for another: the pool rebuilt with one knob"
echo "of pool/slab.h changed at a time; smallest arena / peak live (median of the seeds) and the"
echo "waste per block as in bench_peers section C (scale $SCALE; dense: $DENSE, hundreds of live"
echo "blocks per size class); pair median / untimed mean in ns as in bench_pool ($PAIRS timed"
echo "pairs); the shipped build, and best fit for reference, measured the same way in this run"
printf '%-10s %-48s %6s %6s %8s %6s %8s %6s %13s %13s\n' variant "what it changes" tensor \
    mixed waste dense waste rmm "1,000 live" "100,000 live"
run_frag "$BUILD/bench" || { echo "bench_knobs: $BUILD/bench did not run" >&2; exit 1; }
reference=$(figures "$BUILD/bench" bestfit) || exit 1
row bestfit "best fit (bench/peers/peer_bestfit.c), reference" "$reference"
shipped=$(figures "$BUILD/bench" npupool) || exit 1
row shipped "8 classes per power of two, pages at 8 live" "$shipped"
while IFS='|' read -r name flags what; do
    chosen "$name" || continue
    dir="$BUILD/knobs/$name"
    mkdir -p "$dir"
    if ! $MAKE --no-print-directory BUILD="$dir" EXTRA_CFLAGS="$flags" \
        "$dir/bench/bench_peers" "$dir/bench/bench_pool" >"$dir/build.log" 2>&1; then
        tail -20 "$dir/build.log" >&2
        echo "bench_knobs: the $name variant ($flags) did not build; log: $dir/build.log" >&2
        exit 1
    fi
    run_frag "$dir/bench" || {
        echo "bench_knobs: the $name variant did not run" >&2
        exit 1
    }
    got=$(figures "$dir/bench" npupool) || {
        echo "bench_knobs: the $name variant did not run" >&2
        exit 1
    }
    row "$name" "$what" "$got"
done <<EOF
$VARIANTS
EOF
echo
printf '%s' "$LINES"
