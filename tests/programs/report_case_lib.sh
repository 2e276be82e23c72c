# tests/programs/report_case_lib.sh — helpers for the ledger/report case scripts (sourced after
# tests/lib.sh; not a case itself).
#
# need_ledger      skip unless libnpupool.so is built (the ledger and the report writer are
#                  always linked into it: shim/shim.mk)
# need_jsonschema  skip unless python3-jsonschema is installed
# check_reports ARGS...   tests/programs/check_report.py with the schema of this tree
# reports PATTERN  the report files matching a glob in $TMPDIR_CASE, oldest first
# build_id FILE    the GNU build id of an ELF file, as readelf -n prints it
# postmortem_case_start   the start of a post-mortem case: skips without the ledger or
#                  python3-jsonschema, unsets NPUPOOL_SUPPRESS, sets NP to this build's
#                  `npupool` and enters $TMPDIR_CASE
# identity_is REPORT   the report names this build's npupool (`npupool version`, libnpupool.so's
#                  path and build id) and the fake runtime (its libascendcl.so's path and build
#                  id) in its "npupool" and "runtime" sections; a diff on stderr when not
# Debian's interpreter first: mk/deps.sh installs python3-jsonschema for it, and a python3 earlier
# on PATH (pyenv, a venv) may not see Debian's packages.
if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=python3; fi

need_ledger() {
    [ -f "$SHIM" ] || skip "$SHIM is not built"
}

need_jsonschema() {
    "$PY" -c 'import jsonschema' 2>/dev/null || skip "python3-jsonschema is not installed (for $PY)"
}

postmortem_case_start() {
    need_ledger
    need_jsonschema
    unset NPUPOOL_SUPPRESS
    NP="$ABS_BUILD/npupool"
    cd "$TMPDIR_CASE" || fail "cannot enter $TMPDIR_CASE"
}

check_reports() {
    "$PY" "$ROOT/tests/programs/check_report.py" --schema "$ROOT/docs/report-schema.json" "$@"
}

reports() {
    ls -1tr "$TMPDIR_CASE"/$1 2>/dev/null
}

build_id() {
    readelf -n "$1" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p'
}

identity_is() {
    local version runtime="$ABS_BUILD/fakeacl/libascendcl.so" want got
    version=$("$ABS_BUILD/npupool" version | sed -n '1s/^npupool //p')
    [ -n "$version" ] || { echo "npupool version printed no version" >&2; return 1; }
    want=$(printf '%s\n' "$version" "$(build_id "$SHIM")" "$(realpath "$SHIM")" \
        "$(realpath "$runtime")" "$(build_id "$runtime")")
    got=$(jq -r '.npupool.version, .npupool.build_id, .npupool.library, .runtime.library,
                 .runtime.build_id' "$1") || return 1
    [ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got") >&2; return 1; }
}
