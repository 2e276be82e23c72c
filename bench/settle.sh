#!/bin/sh
# bench/settle.sh — `make bench` runs this before each benchmark program: it waits until the
# 1-minute load average is below a threshold (1 on up to 4 CPUs, CPUs / 4 on more), at most
# BENCH_SETTLE_MAX seconds (default 240; 0 = no wait), and prints the load the next figures start
# at.  BENCH_SETTLE_LOAD sets another threshold.
#
# Why: the figures are quoted "at load below 1" (README, docs/bench.md), and the benchmarks
# themselves raise the load: bench_peers' threads rows run 64 threads, bench_shim's 8, and the
# 1-minute average takes about a minute and a half to fall from 4.7 to 1 afterwards, so without
# the wait the program after them started "at load 4.7" (docs/bench-run.txt of 8c059d6).
# Usage: sh bench/settle.sh [STAMP]
#   STAMP  a file that says a wait of this run already ran out (the machine stays busy with
#          other work): then this wait lasts 30 s at most, so that a busy machine costs one long
#          wait per `make bench`, not one per program.  A wait that runs out creates it.
# Where /proc/loadavg is missing (not Linux), nothing is waited for.
max=${BENCH_SETTLE_MAX:-240}
case $max in '' | *[!0-9]*) max=240 ;; esac
stamp=${1:-}
if [ -n "$stamp" ] && [ -e "$stamp" ] && [ "$max" -gt 30 ]; then max=30; fi
[ -r /proc/loadavg ] || exit 0
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
case $cpus in '' | *[!0-9]*) cpus=1 ;; esac
limit=${BENCH_SETTLE_LOAD:-$((cpus > 4 ? cpus / 4 : 1))}
case $limit in '' | *[!0-9.]*) limit=1 ;; esac
load() { cut -d ' ' -f 1 /proc/loadavg; }
step=5
waited=0
while [ "$waited" -lt "$max" ] && ! awk -v l="$(load)" -v m="$limit" 'BEGIN { exit !(l < m) }'; do
    sleep $step
    waited=$((waited + step))
done
note=
if ! awk -v l="$(load)" -v m="$limit" 'BEGIN { exit !(l < m) }'; then
    note="; still at or above $limit: the figures below are taken on a busy machine"
    [ -n "$stamp" ] && : >"$stamp"
fi
echo "settle: load average $(load) after a wait of ${waited} s (limit ${max} s)$note"
