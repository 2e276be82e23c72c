# tests/programs/python/python_case_lib.sh — helpers for the Python case scripts
# (tests/cases/python_*.sh; sourced after tests/lib.sh and tests/programs/report_case_lib.sh).
#
# python_list      the interpreters to test, one path a line: Debian's /usr/bin/python3, and in
#                  the plain variant the newest pyenv build of each of 3.9..3.13 found under
#                  $PYENV_ROOT/versions (none is required: a missing one is named by python_missing)
# python_missing   the versions 3.9..3.13 with no interpreter here (for the skip note)
# python_version PY   "3.11" (major.minor)
# run_python PY ARGS...   tests/programs/python/py_leaks.py ARGS in front of npupool (sanitizer
#                  runtime first in the asan/tsan variants), in $TMPDIR_CASE, with the fake runtime
#                  and pyhelper found; stdout and stderr as the caller redirects them
# python_case_start   the common start of a case that runs Python in front of npupool: skip
#                  unless the ledger, python3-jsonschema and an interpreter are there; sets PYS
#                  (python_list), PY1 (the first of them), T (the case's directory); no
#                  suppressions file from the caller's environment
# python_sites FILE   the SITE lines a Python test program printed (py_leaks.py) as
#                  check_report.py --pysite arguments
# PYDIR            the Python test programs; NP the npupool command
PYDIR="$ROOT/tests/programs/python"
NP="$ABS_BUILD/npupool"
PYENV_VERSIONS="${PYENV_ROOT:-/root/.pyenv}/versions"
export PYHELPER="$PROGS/libpyhelper.so"
# Python's own allocations are not npupool's: LeakSanitizer would report the interpreter's.
[ "$VARIANT" = asan ] && export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"

python_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }

python_list() {
    [ -x /usr/bin/python3 ] && echo /usr/bin/python3
    [ "$VARIANT" = plain ] || return 0
    local m d best
    for m in 9 10 11 12 13; do
        best=
        for d in "$PYENV_VERSIONS"/3."$m".*; do
            [ -x "$d/bin/python3" ] || continue
            case "$(basename "$d")" in *[!0-9.]*) continue ;; esac # no 3.13t, no -dev
            best=$d
        done
        [ -n "$best" ] && echo "$best/bin/python3"
    done
}

python_missing() {
    local m have
    have=$(for p in $(python_list); do python_version "$p"; done)
    for m in 9 10 11 12 13; do
        echo "$have" | grep -qx "3.$m" || printf '3.%s ' "$m"
    done
}

python_case_start() {
    need_ledger
    need_jsonschema
    PYS=$(python_list)
    [ -n "$PYS" ] || skip "no CPython interpreter here (Debian's python3 is expected)"
    PY1=$(echo "$PYS" | head -1)
    T=$TMPDIR_CASE
    unset NPUPOOL_SUPPRESS
}

python_sites() {
    awk '$1 == "SITE" { printf "--pysite %s:%s:%s:%s:%s\n", $2, $3, $4, $5, $6 }' "$1"
}

run_python() {
    local py=$1; shift
    rm -f "$STATS"
    (cd "$TMPDIR_CASE" && LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$py" "$PYDIR/py_leaks.py" "$@")
}
