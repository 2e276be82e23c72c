# variants: plain asan tsan
# A Python program's whole life, for every CPython 3.9..3.13 found: allocations at start-up (a
# sitecustomize.py, through ctypes.CDLL and PyDLL), in an atexit handler, in __del__ run by the
# collection of the interpreter's finalization (CDLL: "not_running", native frames only; PyDLL:
# the GIL held, its frame), from a daemon thread still allocating when the interpreter stops it,
# and inside a sub-interpreter (_xxsubinterpreters, _interpreters on 3.13; from 3.12 its own
# frames, before that the main interpreter's frames that entered it).  The program must exit normally and every
# report must be valid; each planted site says what it could see.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
. "$ROOT/tests/programs/python/python_case_lib.sh"
python_case_start
mkdir -p "$T/site"
cat >"$T/site/sitecustomize.py" <<'PY'
import ctypes
import sys


def startup_leak(lib):
    lib.aclInit(None)
    lib.aclrtSetDevice(0)
    p = ctypes.c_void_p()
    lib.aclrtMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20), 0)  # line 9


startup_leak(ctypes.CDLL("libascendcl.so"))
startup_leak(ctypes.PyDLL("libascendcl.so"))
PY
MIB=1048576
site() { # report, jq condition on a 1 MiB leak -> how many such leaks
    jq --argjson mib $MIB "[.leaks[] | select(.bytes == \$mib) | select($2)] | length" "$1"
}
first_py='([.frames[] | select(.python)][0] // {})'
for py in $PYS; do
    v=$(python_version "$py")
    minor=${v#3.}
    echo "== $py ($v)"
    # start-up
    rm -f "$T"/r-*.json
    PYTHONPATH="$T/site" NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" errors pydll >"$T/out" 2>"$T/err" ||
        { cat "$T/err"; fail "$v: start-up run"; }
    check_reports "$T/r-1.json" || fail "$v: start-up report"
    [ "$(site "$T/r-1.json" ".python_frames == \"gil_held\" and $first_py.function == \"startup_leak\" and $first_py.line == 9")" -eq 1 ] ||
        fail "$v: the start-up allocation with the GIL held"
    [ "$(site "$T/r-1.json" "(.python_frames == \"gil_released\" and $first_py.line == 9) or
                              (.python_frames == \"not_running\" and $first_py == {})")" -eq 1 ] ||
        fail "$v: the start-up allocation that released the GIL"
    # atexit, finalization, a daemon thread, a sub-interpreter
    rm -f "$T"/r-*.json
    NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" lifecycle cdll >"$T/out" 2>"$T/err" ||
        { cat "$T/err"; fail "$v: lifecycle run"; }
    cat "$T/err"
    check_reports "$T/r-1.json" || fail "$v: lifecycle report"
    grep -q '"phase": "finalize", "dll": "pydll"' "$T/out" || fail "$v: __del__ did not run while finalizing"
    [ "$(site "$T/r-1.json" ".python_frames == \"gil_released\" and $first_py.function == \"at_exit\"")" -eq 1 ] ||
        fail "$v: the atexit allocation"
    [ "$(site "$T/r-1.json" ".python_frames == \"not_running\" and $first_py == {}")" -eq 1 ] ||
        fail "$v: the allocation while finalizing, GIL released"
    [ "$(site "$T/r-1.json" ".python_frames == \"gil_held\" and ($first_py.function | endswith(\"__del__\"))")" -eq 1 ] ||
        fail "$v: the allocation while finalizing, GIL held"
    if grep -q '"phase": "subinterpreter"' "$T/out"; then
        if [ "$minor" -ge 12 ]; then
            [ "$(site "$T/r-1.json" ".python_frames == \"gil_held\" and $first_py.function == \"sub_leak\" and $first_py.line == 9")" -eq 1 ] ||
                fail "$v: the sub-interpreter's own frames"
        else
            [ "$(site "$T/r-1.json" "$first_py.function == \"scenario_lifecycle\"")" -eq 1 ] ||
                fail "$v: the sub-interpreter's allocation under the main interpreter's frames"
        fi
    else
        echo "note: $v has no sub-interpreter module (sub-interpreter not tested)"
    fi
done
exit 0
