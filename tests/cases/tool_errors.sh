# variants: plain asan
# Bad usage and bad input: exit 2 and one clear message naming the file and the line or JSON
# path, never a crash.  Hostile input (/dev/zero, /dev/urandom, endless valid-looking text) exits
# 2 within 2 s in bounded memory (issue 8, item 8).  Also replays the fuzzers' regression inputs
# (tests/fixtures/fuzz/) and the suppressions seeds.
. "$ROOT/tests/lib.sh"
unset NPUPOOL_SUPPRESS # `leaks` would read it
NP="$ROOT/$BUILD/npupool"
[ -x "$NP" ] || fail "$NP not built"
cd "$ROOT"
B=tests/fixtures/bad
expect2() { # PATTERN ARGS...: exit 2, exactly one stderr line matching PATTERN, no stdout junk
    local pat=$1; shift
    local rc=0
    "$NP" "$@" >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" || rc=$?
    [ "$rc" -eq 2 ] || { cat "$TMPDIR_CASE/err"; fail "npupool $*: exit $rc, expected 2"; }
    grep -qE -- "$pat" "$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "npupool $*: message does not match '$pat'"; }
    [ "$(wc -l <"$TMPDIR_CASE/err")" -le 2 ] || { cat "$TMPDIR_CASE/err"; fail "npupool $*: more than one message"; }
}
# reports: file + line:column for syntax, file + JSON path for the rest
expect2 "$B/truncated.json:[0-9]+:[0-9]+: truncated JSON" summary $B/truncated.json
expect2 "$B/syntax.json:4:3: invalid JSON" leaks $B/syntax.json
expect2 "$B/notjson.txt:1:1: not a report: expected a JSON object \\('\\{'\\), found 't'" flame $B/notjson.txt
expect2 "$B/schema2.json: at \\\$\\.schema: report of schema 'npupool-report/2'" summary $B/schema2.json
expect2 "$B/wrongtype.json: at \\\$\\.devices\\[0\\]\\.pool\\.free_bytes: expected an unsigned integer" map $B/wrongtype.json -o "$TMPDIR_CASE/x.svg"
expect2 "$B/badline.json: at \\\$\\.leaks\\[2\\]\\.frames\\[1\\]\\.line" symbolize $B/badline.json
expect2 "$B/nodevices.json: at \\\$\\.devices: missing" diff tests/fixtures/report_old.json $B/nodevices.json
expect2 "/nonexistent.json: cannot open" summary /nonexistent.json
expect2 "tests/fixtures: (read error|cannot)" summary tests/fixtures
# traces: file + line
expect2 "$B/badsize.trace:4: bad size" replay $B/badsize.trace
expect2 "$B/doublealloc.trace:4: pointer 0x1000 allocated again" replay $B/doublealloc.trace
expect2 "$B/badaction.csv:3: bad Action" replay $B/badaction.csv --min-pool
expect2 "report_basic.json:1: not a trace" replay tests/fixtures/report_basic.json
# usage
expect2 "no command 'frobnicate'" frobnicate
expect2 "no command 'sumary'; did you mean 'summary'\\?" sumary tests/fixtures/report_basic.json
expect2 "leaks: unknown option '--mni-bytes'; did you mean '--min-bytes'\\?" leaks --mni-bytes 1 tests/fixtures/report_basic.json
expect2 "missing REPORT" summary
expect2 "missing NEW" diff tests/fixtures/report_old.json
expect2 "unknown option '--bogus'" leaks --bogus tests/fixtures/report_basic.json
expect2 "--top: 'x' is not" summary --top x tests/fixtures/report_basic.json
expect2 "--by: 'size' is not" flame --by size tests/fixtures/report_basic.json
expect2 "missing -o FILE" map tests/fixtures/report_basic.json
expect2 "--ratio: '1.5' is not" replay --ratio 1.5 traces/serving.trace
expect2 "--fallback: '2' is not" replay --fallback 2 traces/serving.trace
expect2 "not both" replay --ratio 0.5 --pool-bytes 1G traces/serving.trace
expect2 "needs a value" replay traces/serving.trace --pool-bytes
expect2 "cannot create a pool" replay traces/serving.trace --pool-bytes 1
expect2 "cannot write" map tests/fixtures/report_basic.json -o /nonexistent-dir/map.svg
# exact integers: a request of 2^64 - 1 bytes is read and printed exactly (issue 8, item 5)
out=$("$NP" summary tests/fixtures/report_oom_sizemax.json) || fail "summary of a SIZE_MAX oom report"
echo "$out" | grep -q '^OOM: 16.0 EiB (18446744073709551615 bytes) requested' || { echo "$out"; fail "SIZE_MAX request not exact"; }
"$NP" symbolize tests/fixtures/report_oom_sizemax.json 2>/dev/null | grep -q '"requested_bytes":.18446744073709551615,' \
    || fail "symbolize does not write 2^64 - 1 back exactly"
sed 's/"requested_bytes": 18446744073709551615/"requested_bytes": 18446744073709551616/' tests/fixtures/report_oom_sizemax.json >"$TMPDIR_CASE/over.json"
expect2 "over.json: at \\\$\\.oom\\.requested_bytes: expected an unsigned integer \\(at most 18446744073709551615\\), found 18446744073709551616" summary "$TMPDIR_CASE/over.json"
sed 's/"requested_bytes": 18446744073709551615/"requested_bytes": 1.8446744073709552e+19/' tests/fixtures/report_oom_sizemax.json >"$TMPDIR_CASE/float.json"
expect2 "float.json: at \\\$\\.oom\\.requested_bytes: expected an unsigned integer" summary "$TMPDIR_CASE/float.json"
# hostile input: exit 2 with one message within 2 s; in the plain build also under a 1 GiB
# address-space limit (the sanitizers reserve more than that up front)
hostile() { # ARGS... (stdin as given): exit 2, one line, < 2 s
    local rc=0 t0 ms
    t0=$(date +%s%N)
    if [ "$VARIANT" = plain ]; then
        (ulimit -v 1048576; exec timeout 10 "$NP" "$@") >/dev/null 2>"$TMPDIR_CASE/err" || rc=$?
    else
        timeout 10 "$NP" "$@" >/dev/null 2>"$TMPDIR_CASE/err" || rc=$?
    fi
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$rc" -eq 2 ] || { cat "$TMPDIR_CASE/err"; fail "npupool $*: exit $rc, expected 2"; }
    [ "$ms" -lt 2000 ] || fail "npupool $*: took $ms ms"
    [ "$(wc -l <"$TMPDIR_CASE/err")" -eq 1 ] || { cat "$TMPDIR_CASE/err"; fail "npupool $*: not one message"; }
    echo "npupool $*: exit 2 in $ms ms: $(cat "$TMPDIR_CASE/err")"
}
for src in /dev/zero /dev/urandom; do
    for cmd in summary leaks flame symbolize; do hostile $cmd $src; done
    hostile diff tests/fixtures/report_old.json $src
    hostile map $src -o "$TMPDIR_CASE/x.svg"
    hostile replay $src
    hostile summary - <$src
    hostile replay - <$src
done
hostile leaks tests/fixtures/report_basic.json --suppress /dev/zero
hostile leaks tests/fixtures/report_basic.json --suppress /dev/urandom
yes '# comment' | hostile leaks tests/fixtures/report_basic.json --suppress /dev/stdin
grep -q 'larger than 1048576 bytes: not a suppressions file' "$TMPDIR_CASE/err" || fail "suppressions bound"
yes '{' | hostile summary -
yes '{"a":1}' | hostile summary -
yes '[' | hostile leaks -
{ printf '# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n'; yes '# a comment'; } |
    NPUPOOL_INPUT_MAX=1M hostile replay -
grep -q 'larger than 1.0 MiB, the input limit (NPUPOOL_INPUT_MAX raises it)' "$TMPDIR_CASE/err" || fail "input limit message"
head -c 100000 /dev/zero | tr '\0' ' ' >"$TMPDIR_CASE/blank.json"
NPUPOOL_INPUT_MAX=64K expect2 "blank.json: larger than 64.0 KiB, the input limit" summary "$TMPDIR_CASE/blank.json"
NPUPOOL_INPUT_MAX=64K expect2 "blank.json: larger than 64.0 KiB, the input limit" replay "$TMPDIR_CASE/blank.json"
# every help text works and exits 0
for c in summary leaks diff flame map symbolize replay export; do
    "$NP" "$c" --help | grep -q "^usage: npupool $c" || fail "$c --help"
    "$NP" help "$c" | grep -q "^usage: npupool $c" || fail "help $c"
done
# fuzzer regression inputs and hostile seeds: any exit but a crash (0 or 2)
for f in tests/fixtures/fuzz/* fuzz/seeds/report/* fuzz/seeds/trace/*; do
    [ -f "$f" ] || continue
    case "$f" in *.trace|*.csv|*trace*) args=(replay "$f" --pool-bytes 1G --no-timing);; *) args=(summary "$f");; esac
    rc=0; "$NP" "${args[@]}" >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || fail "npupool ${args[*]}: exit $rc"
done
for f in tests/fixtures/fuzz/suppress_* fuzz/seeds/suppress/*; do
    [ -f "$f" ] || continue
    rc=0; "$NP" leaks tests/fixtures/report_basic.json --suppress "$f" >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || fail "npupool leaks --suppress $f: exit $rc"
done
exit 0
