# variants: plain
# End to end: a plain ACL program (tests/fixtures/tool_prog.c) in front of the shim on the fake
# runtime with NPUPOOL_TRACE and NPUPOOL_REPORT set.  The replay of its trace reproduces the
# program's own peak; every subcommand reads the report the shim wrote; `leaks` names the two
# planted sites with exact counts and bytes; `symbolize` of a report written without symbols
# recovers the function names.  Skips (77) while the shim does not write traces/reports yet.
. "$ROOT/tests/lib.sh"
unset NPUPOOL_SUPPRESS # `leaks` would read it
NP="$ROOT/$BUILD/npupool"
[ -f "$SHIM" ] && [ -f "$BUILD/fakeacl/libascendcl.so" ] || skip "shim or fake runtime not built"
cd "$ROOT"
prog="$TMPDIR_CASE/tool_prog"
${CC:-cc} -g -O1 -fno-omit-frame-pointer -Iinclude tests/fixtures/tool_prog.c -o "$prog" \
    -L"$BUILD/fakeacl" -lascendcl -Wl,-rpath,"$ROOT/$BUILD/fakeacl" || fail "cannot build tool_prog"
run() { # report path, extra env...
    env NPUPOOL_TRACE="$TMPDIR_CASE/t-%p.trace" NPUPOOL_REPORT="$1" "${@:2}" LD_PRELOAD="$SHIM" "$prog"
}
out=$(run "$TMPDIR_CASE/r.json" NPUPOOL_POOL_BYTES=1G) || fail "tool_prog failed under the shim"
peak=$(echo "$out" | sed -n 's/.*peak_requested=\([0-9]*\).*/\1/p')
leaked=$(echo "$out" | sed -n 's/.*leaked_bytes=\([0-9]*\).*/\1/p')
trace=$(ls "$TMPDIR_CASE"/t-*.trace 2>/dev/null | head -1)
[ -n "$trace" ] || skip "the shim does not record NPUPOOL_TRACE yet (shim/trace.h not wired)"
rout=$("$NP" replay "$trace" --pool-bytes 1G --no-timing) || fail "replay of the recorded trace"
echo "$rout"
echo "$rout" | grep -q "peak requested .*($peak bytes" || fail "replay peak differs from the program's own $peak"
echo "$rout" | grep -q "refused 0)" || fail "refusals in replay"
echo "$rout" | grep -q "6 allocations never freed" || fail "expected the 6 planted allocations (4 + 2) live at the end"
rep=$(ls "$TMPDIR_CASE"/r.json 2>/dev/null)
[ -n "$rep" ] || skip "the shim does not write NPUPOOL_REPORT yet"
"$NP" summary "$rep" >"$TMPDIR_CASE/sum" || fail "summary of the shim's report"
cat "$TMPDIR_CASE/sum"
"$NP" leaks "$rep" >"$TMPDIR_CASE/leaks" || fail "leaks"
grep -q "leak_static_cache (tool_prog.c:[0-9]*): 4.0 MiB in 4 allocations" "$TMPDIR_CASE/leaks" || { cat "$TMPDIR_CASE/leaks"; fail "static leak site"; }
grep -q "leak_exported_table (tool_prog.c:[0-9]*): 6.0 MiB in 2 allocations" "$TMPDIR_CASE/leaks" || { cat "$TMPDIR_CASE/leaks"; fail "exported leak site"; }
[ "$(jq '[.leaks[].bytes] | add' "$rep")" = "$leaked" ] || fail "report leak bytes differ from the program's $leaked"
"$NP" flame "$rep" | grep -q '^.*main;leak_static_cache 4194304$' || fail "flame"
"$NP" map "$rep" -o "$TMPDIR_CASE/m.svg" && rsvg-convert -o "$TMPDIR_CASE/m.png" "$TMPDIR_CASE/m.svg" || fail "map"
"$NP" diff "$rep" "$rep" >/dev/null || fail "diff"
# symbolize: a report without names gets them back from module + offset
run "$TMPDIR_CASE/nosym.json" NPUPOOL_POOL_BYTES=1G NPUPOOL_REPORT_SYMBOLS=0 >/dev/null || fail "second run"
jq -e '[.leaks[].frames[].function | select(. != null)] | length == 0' "$TMPDIR_CASE/nosym.json" >/dev/null \
    || skip "NPUPOOL_REPORT_SYMBOLS=0 not honoured by this shim"
"$NP" symbolize "$TMPDIR_CASE/nosym.json" -o "$TMPDIR_CASE/sym.json" 2>"$TMPDIR_CASE/sym.err" || fail "symbolize"
cat "$TMPDIR_CASE/sym.err"
"$NP" leaks "$TMPDIR_CASE/sym.json" | grep -q "leak_static_cache (tool_prog.c:" || fail "symbolize did not recover the static function and its line"
exit 0
