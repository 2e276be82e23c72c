# variants: plain
# The benchmarks run, briefly: `make test` builds them, and this runs each with a small load so
# that one that crashes or stops printing its summary is caught here rather than at the next
# `make bench` (bench_frag once overflowed its summary array and died at its very end).  Figures
# are not checked: performance targets belong to `make bench`, never to timed tests.
. "$ROOT/tests/lib.sh"
no_emu "the benchmarks are timed on the host's own CPU only"
B="$ROOT/$BUILD/bench"
cd "$TMPDIR_CASE"
run_bench() { # $1 = what its output must contain, then the command; the output stays in $out
    local want=$1 rc
    shift
    out=$("$@" 2>&1); rc=$?
    [ "$rc" -eq 0 ] || { echo "$out" | tail -20; fail "$(basename "$1") exited with status $rc"; }
    echo "$out" | grep -q -- "$want" || { echo "$out" | tail -20; fail "$(basename "$1"): no '$want' in its output"; }
}
run_bench 'BENCH_POOL live=100000' "$B/bench_pool" 2000
run_bench 'BENCH_FRAG_VA seed=3' "$B/bench_frag" 100
run_bench 'ledger file with' "$B/bench_ledger" 2000
echo "$out" | grep -Eq 'BENCH_LEDGER walk_fit start_ns=[0-9.]+ per_frame_ns=[0-9.]+|not measured: libunwind' ||
    fail "bench_ledger: no line for the stack walk by depth"
run_bench 'npupool / bestfit (medians)' "$B/bench_peers" 0.01
# BENCH_PEERS_ONLY: the peers named and no other, npupool's paths with their p90 and p99
only=$(BENCH_PEERS_ONLY=o1heap BENCH_PEERS_SECTIONS=B "$B/bench_peers" 0.01 2>&1) ||
    fail "bench_peers with BENCH_PEERS_ONLY=o1heap failed"
echo "$only" | grep -q 'kind=latency live=1000 .*alloc=o1heap' || fail "BENCH_PEERS_ONLY=o1heap: no o1heap row"
echo "$only" | grep -q 'kind=latency live=1000 .*alloc=npupool' || fail "BENCH_PEERS_ONLY=o1heap: no npupool row"
if echo "$only" | grep -Eq 'kind=latency .*alloc=(tlsf|bestfit|glibc)'; then
    fail "BENCH_PEERS_ONLY=o1heap ran a peer it did not name"
fi
echo "$only" | grep -Eq 'kind=np_path live=1000 path=cache share=[0-9.]+ median_ns=[0-9.]+ p90_ns=[0-9.]+ p99_ns=[0-9.]+ p999_ns=' ||
    fail "bench_peers: the path lines lack p90 / p99"
bad=$(BENCH_PEERS_ONLY=o1heap,nosuch "$B/bench_peers" 0.01 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "BENCH_PEERS_ONLY naming no peer: exit status $rc, not 2"
echo "$bad" | grep -q "names no peer 'nosuch'" || fail "BENCH_PEERS_ONLY naming no peer: no clear line ($bad)"
run_bench 'goal: throughput per thread' "$B/bench_shim" --quick
# one variant of the slab knobs (built in $BUILD/knobs/grow16), small runs
run_bench 'BENCH_KNOBS variant=grow16 tensor=' env BENCH_KNOBS_ONLY=grow16 \
    sh "$ROOT/bench/bench_knobs.sh" "$ABS_BUILD" 2000 0.01
