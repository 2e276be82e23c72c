# variants: plain
# npupool's facts about each CPython version (ledger/ledger_py_layout.h) against the headers of
# every interpreter found (a probe compiled against them compares every offset, size and bit),
# and npupool's line-table decoder against each interpreter's own co_lines() / findlinestarts()
# for every instruction of ~1,400 standard-library code objects.  An interpreter without its
# headers is compared on lines only.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
. "$ROOT/tests/programs/python/python_case_lib.sh"
PYS=$(python_list)
[ -n "$PYS" ] || skip "no CPython interpreter here (Debian's python3 is expected)"
CHECK="$PROGS/py_lines_check"
[ -x "$CHECK" ] || fail "$CHECK is not built"
T=$TMPDIR_CASE
headers=0
for py in $PYS; do
    v=$(python_version "$py")
    inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    if [ -f "$inc/Python.h" ] && [ -d "$inc/internal" ]; then
        ${CC:-cc} -I"$inc" -I"$inc/internal" -I"$ROOT/ledger" -o "$T/layout" \
            "$ROOT/tests/programs/python/py_layout_check.c" || fail "$v: the layout probe does not compile"
        "$T/layout" || fail "$v: npupool's layout differs from the headers"
        headers=$((headers + 1))
    else
        echo "note: $py has no headers in $inc (layout not compared)"
    fi
    "$py" "$ROOT/tests/programs/python/py_lines.py" >"$T/lines" || fail "$v: py_lines.py"
    "$CHECK" <"$T/lines" || fail "$v: line numbers differ"
done
[ "$headers" -gt 0 ] || fail "no interpreter with headers: install python3-dev (mk/deps.sh does)"
missing=$(python_missing)
[ -z "$missing" ] || echo "note: no interpreter here for Python $missing(not tested)"
exit 0
