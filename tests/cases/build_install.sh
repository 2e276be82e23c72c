# variants: plain
# `make install DESTDIR=... PREFIX=/usr/local` puts the command, the library, the two manual pages
# and the documentation where the README says, and nothing else; the installed command names its
# version and the installed library, and the installed library works in front of a program;
# `make uninstall` takes it all back.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
cd "$ROOT"
dest="$TMPDIR_CASE/dest"

make --no-print-directory BUILD="$BUILD" DESTDIR="$dest" PREFIX=/usr/local install >"$TMPDIR_CASE/log" 2>&1 ||
    { cat "$TMPDIR_CASE/log"; fail "make install failed"; }
p="$dest/usr/local"
(cd "$dest" && find . -type f | sort) >"$TMPDIR_CASE/files"
cat >"$TMPDIR_CASE/want" <<'LIST'
./usr/local/bin/npupool
./usr/local/lib/libnpupool.so
./usr/local/share/doc/npupool/LICENSE
./usr/local/share/doc/npupool/README.md
./usr/local/share/doc/npupool/architecture.md
./usr/local/share/doc/npupool/metrics.md
./usr/local/share/doc/npupool/report-schema.json
./usr/local/share/doc/npupool/report.md
./usr/local/share/doc/npupool/tools.md
./usr/local/share/doc/npupool/trace.md
./usr/local/share/man/man1/npupool.1
./usr/local/share/man/man7/npupool.7
LIST
diff -u "$TMPDIR_CASE/want" "$TMPDIR_CASE/files" || fail "make install wrote other files"
[ -x "$p/bin/npupool" ] && [ -x "$p/lib/libnpupool.so" ] || fail "the command or the library is not executable"
cmp -s "$p/lib/libnpupool.so" "$SHIM" || fail "the installed library is not the built one"

# The installed command: its version, and the installed library next to it (../lib).
"$p/bin/npupool" --version >"$TMPDIR_CASE/v1" || fail "npupool --version failed"
"$p/bin/npupool" version >"$TMPDIR_CASE/v2" || fail "npupool version failed"
cat "$TMPDIR_CASE/v1"
cmp -s "$TMPDIR_CASE/v1" "$TMPDIR_CASE/v2" || fail "--version and version differ"
version=$("$ABS_BUILD/npupool" version | sed -n '1s/^npupool //p')
[ "$(sed -n 1p "$TMPDIR_CASE/v1")" = "npupool $version" ] || fail "first line is not 'npupool $version'"
grep -qx "command: $(realpath "$p/bin/npupool") (build id $(build_id "$p/bin/npupool"))" "$TMPDIR_CASE/v1" ||
    fail "the command line does not name the installed command and its build id"
grep -qx "library: $(realpath "$p/lib/libnpupool.so") (version $version, build id $(build_id "$SHIM"))" "$TMPDIR_CASE/v1" ||
    fail "the library line does not name the installed library, its version and build id"
# A command without a library next to it says so.
cp "$p/bin/npupool" "$TMPDIR_CASE/lonely"
"$TMPDIR_CASE/lonely" --version | grep -qx "library: none found next to the command (../lib, ../lib64)" ||
    fail "a command alone does not say that no library is there"

# The installed library in front of a program, and the installed command reading its report.
(cd "$TMPDIR_CASE" && NPUPOOL_REPORT="$TMPDIR_CASE/inst-%n.json" LD_PRELOAD="${SANRT:+$SANRT }$p/lib/libnpupool.so" \
    "$PROGS/leaks" >/dev/null 2>"$TMPDIR_CASE/err") || { cat "$TMPDIR_CASE/err"; fail "leaks failed under the installed library"; }
f=$(reports 'inst-*.json' | head -1)
[ -n "$f" ] || fail "no report from the installed library"
[ "$(jq -r .npupool.library "$f")" = "$(realpath "$p/lib/libnpupool.so")" ] || fail "the report does not name the installed library"
"$p/bin/npupool" summary "$f" | grep -q "leak_small_static" || fail "the installed command cannot read the report"
# The manual pages are manual pages.
head -5 "$p/share/man/man1/npupool.1" | grep -q '^\.TH NPUPOOL 1 ' || fail "npupool.1 has no .TH line"
head -5 "$p/share/man/man7/npupool.7" | grep -q '^\.TH NPUPOOL 7 ' || fail "npupool.7 has no .TH line"

make --no-print-directory BUILD="$BUILD" DESTDIR="$dest" PREFIX=/usr/local uninstall >"$TMPDIR_CASE/log" 2>&1 ||
    { cat "$TMPDIR_CASE/log"; fail "make uninstall failed"; }
left=$(cd "$dest" && find . -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
exit 0
