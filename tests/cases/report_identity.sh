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
identity_is "$f" || fail "the report's npupool/runtime sections differ from the files"
grep -qx '[0-9a-f]\{40\}' <(build_id "$SHIM") || fail "libnpupool.so has no sha1 build id"
exit 0
