#!/bin/sh
# bench/settle.sh — `make bench` runs this before each benchmark program: it waits until the
# 1-minute load average is below 1 (at most BENCH_SETTLE_MAX seconds, default 240; 0 = no wait)
# and prints the load the next figures start at.
#
# Why: the figures are quoted "at load below 1" (README, docs/bench.md), and the benchmarks
# themselves raise the load: bench_peers' threads rows run 64 threads, bench_shim's 8, and the
# 1-minute average takes about a minute and a half to fall from 4.7 to 1 afterwards, so without
# the wait the program after them started "at load 4.7" (docs/bench-run.txt of 8c059d6).
# Where /proc/loadavg is missing (not Linux), nothing is waited for.
max=${BENCH_SETTLE_MAX:-240}
case $max in '' | *[!0-9]*) max=240 ;; esac
step=5
load() { cut -d ' ' -f 1 /proc/loadavg 2>/dev/null; }
[ -r /proc/loadavg ] || exit 0
waited=0
while [ "$waited" -lt "$max" ] && ! awk -v l="$(load)" 'BEGIN { exit !(l < 1) }'; do
    sleep $step
    waited=$((waited + step))
done
echo "settle: load average $(load) after a wait of ${waited} s (limit ${max} s)"
