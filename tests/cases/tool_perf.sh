# variants: plain
# Large inputs (issue 4): a report with 1,000,000 live allocations (10,000 stacks of 16 frames,
# a full 4,096-entry free map) is summarised in under 2 s; a 10,000,000-event trace is replayed
# in under 10 s.  Both are made here, at test time (not shipped).  The limits are checked on CPU
# time (user + system): wall time on a shared 2-core machine measures the neighbours too.
. "$ROOT/tests/lib.sh"
NP="$ROOT/$BUILD/npupool"
cd "$ROOT"
rep="$TMPDIR_CASE/big.json"
awk 'BEGIN {
    printf "{\"schema\":\"npupool-report/1\",\"trigger\":\"signal\",\"process\":{\"pid\":1,\"exe\":\"/bin/big\",\"uptime_s\":1},\n";
    res = 64 * 1073741824; live = 0; nfree = 4096; fsz = 1048576;
    printf "\"devices\":[{\"device\":0,\"pool\":{\"reserved_bytes\":%.0f,\"allocated_bytes\":%.0f,", res, 1000000 * 4096;
    printf "\"free_bytes\":%.0f,\"largest_free_bytes\":%.0f,\"fragmentation\":0,\"overhead_bytes\":0},\n", res - 1000000 * 4096, res - 1000000 * 4096 - (nfree - 1) * fsz;
    printf "\"free_map\":[";
    for (i = 0; i < nfree - 1; i++) printf "%s[%.0f,%d]", (i ? "," : ""), 1000000 * 4096 + i * 2 * fsz, fsz;
    printf ",[%.0f,%.0f]],\"free_map_omitted\":0}],\n", 1000000 * 4096 + (nfree - 1) * 2 * fsz, res - 1000000 * 4096 - (nfree - 1) * 2 * fsz;
    printf "\"leaks\":[\n";
    for (s = 0; s < 10000; s++) {
        printf "%s{\"device\":0,\"count\":100,\"bytes\":409600,\"granted_bytes\":409600,\"oldest_age_s\":%d,\"stack_id\":%d,\"growth\":{\"count\":1,\"bytes\":4096},\"frames\":[", (s ? ",\n" : ""), s % 977, s + 1;
        for (f = 0; f < 16; f++)
            printf "%s{\"function\":\"fn_%d_%d\",\"module\":\"/usr/lib/libbig.so\",\"offset\":%d,\"file\":\"/src/big/file%d.c\",\"line\":%d,\"build_id\":\"0123456789abcdef0123456789abcdef01234567\"}", (f ? "," : ""), s, f, 4096 + s * 64 + f, f, 10 + f;
        printf "]}";
    }
    printf "]}\n";
}' >"$rep"
jq -e '[.leaks[].count] | add == 1000000' "$rep" >/dev/null || fail "generated report is not 1,000,000 allocations"
TIMEFORMAT='%R %U %S'
timed() { # OUT ARGS...: run npupool ARGS > OUT; sets wall_ms and cpu_ms
    local t
    { t=$( { time "$NP" "${@:2}" >"$1" 2>"$1.err"; } 2>&1 ); } || { cat "$1.err"; fail "npupool ${*:2}"; }
    read -r w u s <<<"$t"
    wall_ms=$(awk -v w="$w" 'BEGIN { printf "%d", w * 1000 }')
    cpu_ms=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%d", (u + s) * 1000 }')
}
timed "$TMPDIR_CASE/summary" summary "$rep"
echo "summary of a 1,000,000-allocation report ($(wc -c <"$rep") bytes): $cpu_ms ms CPU, $wall_ms ms wall"
grep -q '1000000 live allocations' "$TMPDIR_CASE/summary" || fail "summary totals"
[ "$cpu_ms" -lt 2000 ] || fail "summary took $cpu_ms ms of CPU (limit 2000)"
for cmd in "leaks --top 5" "flame" "map -o $TMPDIR_CASE/big.svg"; do
    # shellcheck disable=SC2086
    timed "$TMPDIR_CASE/other" $cmd "$rep"
    echo "$cmd: $cpu_ms ms CPU, $wall_ms ms wall"
done

tr="$TMPDIR_CASE/big.trace"
"$ROOT/$BUILD/traces/gen" random --events 10000000 --seed 3 --max-mib 16 -o "$tr" || fail "gen"
timed "$TMPDIR_CASE/replay" replay "$tr"
echo "replay of $(grep -o '[0-9]* events' "$TMPDIR_CASE/replay" | head -1) ($(wc -c <"$tr") bytes): $cpu_ms ms CPU, $wall_ms ms wall"
cat "$TMPDIR_CASE/replay"
[ "$cpu_ms" -lt 10000 ] || fail "replay took $cpu_ms ms of CPU (limit 10000)"
exit 0
