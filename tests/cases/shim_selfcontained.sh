# variants: plain asan tsan
# libnpupool.so brings nothing into its host but itself: at load time it needs the C library only
# (libpthread, libdl: older glibc; never libm, cJSON, libunwind or libdw, which it dlopen()s
# privately when it needs them).  A host with a cJSON of its own, exported, keeps it, and npupool
# still writes a correct report; a host where libcjson.so.1 cannot be loaded still runs, and gets
# one line instead of a report.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger

needed=$(readelf -d "$SHIM" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "NEEDED: $needed"
for lib in $needed; do
    case $VARIANT:$lib in
    *:libc.so.* | *:libpthread.so.* | *:libdl.so.* | *:ld-linux*) ;;
    asan:libasan.so.* | asan:libubsan.so.* | tsan:libtsan.so.*) ;; # the sanitizer builds' runtime
    *) fail "libnpupool.so needs $lib at load time" ;;
    esac
done
undef=$(nm -D --undefined-only "$SHIM" | awk '{print $NF}' | grep -E '^(cJSON_|unw_|_U|dwfl_|elf_)' || true)
[ -z "$undef" ] || fail "libnpupool.so references: $undef"

# A host program that defines and exports its own cJSON_* (sentinels counting their calls).
export NPUPOOL_REPORT="$TMPDIR_CASE/host-%n.json"
out=$(run_preloaded cjson_host 2>"$TMPDIR_CASE/err") || { cat "$TMPDIR_CASE/err"; fail "cjson_host failed: $out"; }
cat "$TMPDIR_CASE/err"
echo "$out"
echo "$out" | grep -qx "host cJSON intact: 2 calls" || fail "the host's cJSON was disturbed"
first=$(reports 'host-*.json' | head -1)
[ -n "$first" ] || fail "no report written"
check_reports "$first" --trigger finalize || fail "the finalize report is not right"
jq -e '.leaks[0].bytes == 1048576 and .leaks[0].count == 1' "$first" >/dev/null ||
    fail "the report does not show the host's leak"

# libcjson.so.1 that cannot be loaded (found first on the library path, not an ELF file): the
# program runs as without npupool and one line says why there is no report.
mkdir "$TMPDIR_CASE/badlib"
echo "not a library" >"$TMPDIR_CASE/badlib/libcjson.so.1"
export NPUPOOL_REPORT="$TMPDIR_CASE/none-%n.json"
LD_LIBRARY_PATH="$TMPDIR_CASE/badlib:$LD_LIBRARY_PATH" run_preloaded leaks >/dev/null 2>"$TMPDIR_CASE/err" ||
    { cat "$TMPDIR_CASE/err"; fail "leaks failed without cJSON"; }
cat "$TMPDIR_CASE/err"
[ "$(grep -c '^npupool\[[0-9]*\]: no reports: cannot load libcjson.so.1' "$TMPDIR_CASE/err")" -eq 1 ] ||
    fail "expected one line saying why there are no reports"
[ -z "$(reports 'none-*.json')" ] || fail "a report was written without cJSON"
exit 0
