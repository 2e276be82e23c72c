# variants: plain asan
# `npupool symbolize` on a report whose frames carry only module + offset + build id (as written
# with NPUPOOL_REPORT_SYMBOLS=0, or on a machine without debug info): a `static` function of an
# executable linked without -rdynamic gets its name and file:line back; a wrong build id or a
# missing module leaves the frame alone and is counted; --path-map finds a moved binary.
. "$ROOT/tests/lib.sh"
unset NPUPOOL_SUPPRESS # `leaks` would read it
NP="$ROOT/$BUILD/npupool"
cd "$ROOT"
command -v readelf >/dev/null && command -v nm >/dev/null || skip "binutils not installed"
prog="$TMPDIR_CASE/tool_prog"
${CC:-cc} -g -O1 -Iinclude -c tests/fixtures/tool_prog.c -o "$TMPDIR_CASE/tool_prog.o" || fail "compile"
${CC:-cc} -o "$prog" "$TMPDIR_CASE/tool_prog.o" -Wl,--unresolved-symbols=ignore-all || fail "link"
off=$(nm "$prog" | awk '$3 == "leak_static_cache" { print $1 }')
[ -n "$off" ] || fail "no symbol leak_static_cache"
moff=$(nm "$prog" | awk '$3 == "main" { print $1 }')
bid=$(readelf -n "$prog" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$bid" ] || skip "toolchain writes no build id"
mk() { # OUT MODULE BUILD_ID
    cat >"$1" <<JSON
{"schema":"npupool-report/1","trigger":"exit","process":{"pid":1,"exe":"$prog"},
 "devices":[],
 "leaks":[{"device":0,"count":4,"bytes":4194304,"stack_id":1,"frames":[
   {"function":null,"module":"$2","offset":$((0x$off + 4)),"file":null,"line":null,"build_id":$3},
   {"function":null,"module":"$2","offset":$((0x$moff + 8)),"file":null,"line":null,"build_id":$3}]}]}
JSON
}
mk "$TMPDIR_CASE/r.json" "$prog" "\"$bid\""
"$NP" symbolize "$TMPDIR_CASE/r.json" -o "$TMPDIR_CASE/s.json" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "symbolize"; }
grep -q '2 frames: 2 resolved' "$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "summary line"; }
[ "$(jq -r '.leaks[0].frames[0].function' "$TMPDIR_CASE/s.json")" = leak_static_cache ] || fail "static function not named"
jq -r '.leaks[0].frames[0].file' "$TMPDIR_CASE/s.json" | grep -q 'tool_prog.c$' || fail "no source file"
line=$(jq -r '.leaks[0].frames[0].line' "$TMPDIR_CASE/s.json")
want=$(grep -n 'static __attribute__((noinline)) void \*leak_static_cache' tests/fixtures/tool_prog.c | cut -d: -f1)
[ "$line" = "$want" ] || fail "line $line, expected $want"
[ "$(jq -r '.leaks[0].frames[1].function' "$TMPDIR_CASE/s.json")" = main ] || fail "main not named"
"$NP" leaks "$TMPDIR_CASE/s.json" | grep -q "#1 leak_static_cache (tool_prog.c:$want)" || fail "leaks on the symbolized report"
# in place, atomically; idempotent
cp "$TMPDIR_CASE/r.json" "$TMPDIR_CASE/inplace.json"
"$NP" symbolize "$TMPDIR_CASE/inplace.json" --in-place 2>/dev/null || fail "--in-place"
"$NP" symbolize "$TMPDIR_CASE/inplace.json" --missing-only -o "$TMPDIR_CASE/again.json" 2>"$TMPDIR_CASE/err" || fail "again"
grep -q '2 already named' "$TMPDIR_CASE/err" || fail "--missing-only"
cmp -s <(jq -S . "$TMPDIR_CASE/inplace.json") <(jq -S . "$TMPDIR_CASE/s.json") || fail "--in-place result differs from -o"
# wrong build id: nothing changes
mk "$TMPDIR_CASE/bad.json" "$prog" '"00112233445566778899aabbccddeeff00112233"'
"$NP" symbolize "$TMPDIR_CASE/bad.json" -o "$TMPDIR_CASE/bad-out.json" 2>"$TMPDIR_CASE/err" || fail "symbolize bad id"
grep -q '2 build id differs' "$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "build id mismatch not counted"; }
[ "$(jq -r '.leaks[0].frames[0].function' "$TMPDIR_CASE/bad-out.json")" = null ] || fail "a mismatched frame was changed"
# the binary moved: --path-map
mkdir -p "$TMPDIR_CASE/moved" && cp "$prog" "$TMPDIR_CASE/moved/tool_prog"
mk "$TMPDIR_CASE/m.json" "/build/host/bin/tool_prog" "\"$bid\""
"$NP" symbolize "$TMPDIR_CASE/m.json" 2>"$TMPDIR_CASE/err" >/dev/null || fail "symbolize missing module"
grep -q '2 module not found' "$TMPDIR_CASE/err" || fail "missing module not counted"
"$NP" symbolize "$TMPDIR_CASE/m.json" --path-map "/build/host/bin=$TMPDIR_CASE/moved" 2>/dev/null \
    | jq -e '.leaks[0].frames[0].function == "leak_static_cache"' >/dev/null || fail "--path-map"
exit 0
