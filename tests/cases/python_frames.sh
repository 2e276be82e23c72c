# variants: plain asan tsan
# Python frames in stacks.  A Python program reaches the fake runtime through ctypes; for every
# CPython 3.9..3.13 found (Debian's python3 in every variant, the pyenv builds in the plain one):
#   - two functions in two files that leak give exactly two sites, each named by its file,
#     function (qualified name from 3.11) and line, with exact counts and bytes; the busy
#     balanced function is not listed; with ctypes.PyDLL (the GIL held: "gil_held") and with
#     ctypes.CDLL on the main thread (the GIL released: "gil_released");
#   - `npupool leaks` and `summary` name the sites "kv_cache.py:13 cache_kv";
#   - a Python thread that released the GIL (CDLL) keeps native frames ("not_visible"), one that
#     holds it (PyDLL) shows its Python frames; a C thread has "no_thread_state" and its frame;
#   - C calling back into Python: the native frame sits between the two Python frames;
#   - an exception being handled and one pending in C are unchanged by allocations.
# Also: a C program's report has no Python field at all; NPUPOOL_PYTHON_FRAMES=0 gives native
# frames only; Python 3.8 (unsupported) says so and keeps native frames.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
. "$ROOT/tests/programs/python/python_case_lib.sh"
python_case_start
[ -f "$PYHELPER" ] || fail "$PYHELPER is not built"

for py in $PYS; do
    v=$(python_version "$py")
    echo "== $py ($v)"
    for dll in pydll cdll; do
        word=gil_held; [ $dll = cdll ] && word=gil_released
        for scale in 1 2; do
            rm -f "$T"/r-*.json
            NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" leaks $dll $scale >"$T/out" 2>"$T/err" ||
                { cat "$T/err"; fail "$v $dll: leaks failed"; }
            cat "$T/err"
            [ "$(grep -c '^SITE' "$T/out")" -eq 2 ] || fail "$v $dll: the program printed no sites"
            # shellcheck disable=SC2046
            check_reports "$T/r-1.json" --trigger exit --only $(python_sites "$T/out") \
                --python-frames $word || fail "$v $dll scale $scale: exit report"
        done
        jq -e --arg v "$v" '.ledger.python.version | startswith($v + ".")' "$T/r-1.json" >/dev/null ||
            fail "$v: ledger.python.version"
        # the sites named by their Python line in the tools
        "$NP" leaks "$T/r-1.json" >"$T/leaks" || fail "$v: npupool leaks"
        grep -q '^#[12] kv_cache.py:13 cache_kv: 6.0 MiB in 6 allocations' "$T/leaks" || { cat "$T/leaks"; fail "$v: leaks label"; }
        qual=Adapters.load_adapter
        case $v in 3.9 | 3.10) qual=load_adapter ;; esac
        grep -q "^#[12] adapters.py:17 $qual: 3.0 MiB in 4 allocations" "$T/leaks" || { cat "$T/leaks"; fail "$v: leaks label 2"; }
        "$NP" summary "$T/r-1.json" | grep -q "kv_cache.py:13 cache_kv < scenario_leaks" || fail "$v: summary label"
    done

    # threads: a Python thread without the GIL, one with it, a C thread
    for dll in cdll pydll; do
        rm -f "$T"/r-*.json
        NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" threads $dll >"$T/out" 2>"$T/err" ||
            { cat "$T/err"; fail "$v $dll: threads failed"; }
        r="$T/r-1.json"
        check_reports "$r" || fail "$v $dll: threads report"
        jq -e '[.leaks[] | select(.python_frames == "no_thread_state")] | length == 1 and
               .[0].count == 1 and .[0].frames[0].function == "thread_body" and
               all(.[0].frames[]; .python != true)' "$r" >/dev/null || fail "$v: the C thread's leak"
        if [ $dll = cdll ]; then
            # (native stacks of one Python line may differ in the eval loop's return address)
            jq -e '[.leaks[] | select(.python_frames == "not_visible")] | length >= 1 and
                   (map(.count) | add) == 2 and all(.[].frames[]; .python != true) and
                   all(.[]; any(.frames[]; .function == "ffi_call"))' "$r" >/dev/null ||
                fail "$v: a thread that released the GIL must keep its native frames only"
            "$NP" leaks "$r" | grep -q "no Python frames: the thread had released the GIL" || fail "$v: leaks says why"
        else
            # shellcheck disable=SC2046
            check_reports "$r" $(python_sites "$T/out") --python-frames gil_held || fail "$v: a thread holding the GIL"
        fi
    done

    # C calling back into Python: cache_kv, on_call, (ctypes glue), pyhelper_call, ..., scenario_callback
    for dll in cdll pydll; do
        rm -f "$T"/r-*.json
        NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" callback $dll >"$T/out" 2>"$T/err" ||
            { cat "$T/err"; fail "$v $dll: callback failed"; }
        # shellcheck disable=SC2046
        check_reports "$T/r-1.json" --only $(python_sites "$T/out") || fail "$v $dll: callback report"
        jq -e '.leaks[0].frames | map(.function // "") as $f |
               ($f | index("cache_kv")) as $a | ($f | map(endswith("on_call")) | index(true)) as $b |
               ($f | index("pyhelper_call")) as $c | ($f | index("scenario_callback")) as $d |
               $a != null and $b != null and $c != null and $d != null and
               $a < $b and $b < $c and $c < $d' "$T/r-1.json" >/dev/null ||
            { jq -c '[.leaks[0].frames[].function]' "$T/r-1.json"; fail "$v $dll: Python frames not where the eval loop was"; }
    done

    # exceptions
    run_python "$py" errors pydll >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "$v: errors"; }
    grep -q "ERRORS ok" "$T/out" || fail "$v: errors scenario did not finish"

    # names: UTF-8 of every str kind (latin-1, UCS-2, UCS-4), an undecodable file name byte
    rm -rf "$T/names" "$T"/r-*.json
    mkdir -p "$T/names"
    for f in "kv_😀.py" "kv_$(printf '\377').py"; do
        cat >"$T/names/$f" <<'PY'
import ctypes
import sys


class 缓存:
    def café_kv(self, acl):
        line = sys._getframe().f_lineno + 1
        p = ctypes.c_void_p(); rc = acl.aclrtMalloc(ctypes.byref(p), 4096, 0)
        return line


leak_function = 缓存.café_kv


def leak(acl):
    return 缓存().café_kv(acl)
PY
    done
    NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" names pydll "$T/names" >"$T/out" 2>"$T/err" ||
        { cat "$T/err"; fail "$v: names failed"; }
    check_reports "$T/r-1.json" || fail "$v: names report"
    "$PY" - "$T/out" "$T/r-1.json" <<'PY' || fail "$v: non-ASCII names"
import json, sys
want = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
doc = json.load(open(sys.argv[2], encoding="utf-8"))
got = [next(f for f in l["frames"] if f.get("python")) for l in doc["leaks"]]
got = sorted((f["function"], f["file"], f["line"]) for f in got)
want = sorted((w["function"], w["file"], w["line"]) for w in want)
if len(want) != 2 or got != want:
    sys.exit(f"expected {want}, got {got}")
PY
done

py=$PY1
# NPUPOOL_PYTHON_FRAMES=0: native frames only, no Python field
rm -f "$T"/r-*.json
NPUPOOL_PYTHON_FRAMES=0 NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" leaks pydll 1 >/dev/null 2>"$T/err" || fail "PYTHON_FRAMES=0"
check_reports "$T/r-1.json" || fail "PYTHON_FRAMES=0 report"
jq -e '.ledger.python == null and (.leaks | length) == 1 and all(.leaks[]; has("python_frames") | not) and
       all(.leaks[].frames[]; .python != true)' "$T/r-1.json" >/dev/null ||
    fail "NPUPOOL_PYTHON_FRAMES=0 still shows Python frames (the two leaks must merge into one native site)"

# A C program: no interpreter, no Python field, stacks as before
rm -f "$T"/r-*.json
NPUPOOL_REPORT="$T/r-%n.json" run_preloaded leaks >/dev/null 2>&1 || fail "leaks (C) failed"
jq -e '.ledger.python == null and all(.leaks[]; has("python_frames") | not)' "$T/r-1.json" >/dev/null ||
    fail "a C program's report mentions Python"

# An interpreter npupool does not read: said once, native frames, marked
if [ "$VARIANT" = plain ]; then
    old=$(ls -d "$PYENV_VERSIONS"/3.8.* 2>/dev/null | tail -1)
    if [ -n "$old" ]; then
        rm -f "$T"/r-*.json
        NPUPOOL_REPORT="$T/r-%n.json" run_python "$old/bin/python3" leaks pydll 1 >/dev/null 2>"$T/err" || fail "3.8 run"
        grep -qE "^npupool\[[0-9]+\]: Python 3\.8\.[0-9]+: npupool cannot read this interpreter's frames" "$T/err" || fail "no line for 3.8"
        jq -e '.ledger.python.frames_read == false and all(.leaks[]; .python_frames == "unsupported")' "$T/r-1.json" >/dev/null ||
            fail "3.8 report"
    fi
fi
missing=$(python_missing)
[ -z "$missing" ] || echo "note: no interpreter here for Python $missing(not tested)"
exit 0
