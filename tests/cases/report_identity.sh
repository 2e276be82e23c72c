# variants: plain asan
# Every report says which npupool wrote it (version, build id and path of libnpupool.so) and which
# runtime library served the process (path and build id of the object defining the real
# aclrtMalloc): the same facts `npupool version` and `readelf -n` give.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema

NPUPOOL_REPORT="$TMPDIR_CASE/r-%n.json" run_preloaded leaks >/dev/null 2>&1 || fail "leaks failed"
f=$(reports 'r-*.json' | head -1)
[ -n "$f" ] || fail "no report"
check_reports "$f" || fail "the report does not validate"
version=$("$ABS_BUILD/npupool" version | sed -n '1s/^npupool //p')
[ -n "$version" ] || fail "npupool version printed no version"
runtime="$ABS_BUILD/fakeacl/libascendcl.so"
jq -r '.npupool.version, .npupool.build_id, .npupool.library, .runtime.library, .runtime.build_id' "$f" >"$TMPDIR_CASE/got"
printf '%s\n' "$version" "$(build_id "$SHIM")" "$(realpath "$SHIM")" "$(realpath "$runtime")" \
    "$(build_id "$runtime")" >"$TMPDIR_CASE/want"
diff "$TMPDIR_CASE/want" "$TMPDIR_CASE/got" || fail "the report's npupool/runtime sections differ from the files"
grep -qx '[0-9a-f]\{40\}' <(sed -n 2p "$TMPDIR_CASE/want") || fail "libnpupool.so has no sha1 build id"
exit 0
