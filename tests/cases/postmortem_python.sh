# variants: plain asan tsan
# The ledger file of a Python program holds its Python frames: for every CPython 3.9..3.13 found
# (python_case_lib.sh), `npupool recover` on the file of a program that exits with leaks, and of
# one killed with SIGKILL right after a report, gives the leaks of the in-memory report (the exit
# report, the signal report): the same sites by stack, with the same counts, bytes, granted bytes,
# entry points and origins, the same frames (Python frames by function, file and line; native
# ones by module, offset, address and build id) and the same "python_frames" word; and
# `npupool leaks` prints the same site labels ("kv_cache.py:13 cache_kv", not two native sites
# merged into one).  A thread that released the GIL (not_visible) and a C thread
# (no_thread_state) keep their words too.  The recovered report is schema-valid, names the
# planted sites by their Python lines, and names this build's npupool and the fake runtime.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
. "$ROOT/tests/programs/python/python_case_lib.sh"
python_case_start
[ -f "$PYHELPER" ] || fail "$PYHELPER is not built"
cd "$T"

# same_leaks LIVE RECOVERED: the leaks of both, by (device, stack), are equal
same_leaks() {
    "$PY" - "$1" "$2" <<'PY'
import json, sys

def leaks(path):
    doc = json.load(open(path, encoding="utf-8"))
    out = {}
    for l in doc["leaks"]:
        frames = [("py", f["function"], f["file"], f["line"]) if f.get("python") else
                  ("native", f["module"], f["offset"], f["address"], f["build_id"])
                  for f in l["frames"]]
        out[(l["device"], l["stack_id"])] = (l["count"], l["bytes"], l["granted_bytes"],
                                             l["entry_point"], l["origins"],
                                             l.get("python_frames"), frames)
    return out

live, rec = leaks(sys.argv[1]), leaks(sys.argv[2])
if live != rec:
    for k in sorted(set(live) | set(rec)):
        if live.get(k) != rec.get(k):
            print(f"site {k}:\n  live      {live.get(k)}\n  recovered {rec.get(k)}")
    sys.exit("the recovered leaks differ from the in-memory report's")
PY
}

# labels FILE: the site lines of `npupool leaks FILE` (label, bytes, count, stacks)
labels() { "$NP" leaks "$1" | grep '^#' | sort; }

# recovered NAME LIVE WORD...: recover the one ledger file, compare with LIVE
recovered() {
    local name=$1 live=$2 file
    shift 2
    file=$(ls l-*.ledger) || fail "$name: no ledger file"
    [ "$(echo "$file" | wc -l)" -eq 1 ] || fail "$name: more than one ledger file: $file"
    "$NP" recover "$file" -o rec.json 2>rerr || { cat rerr; fail "$name: recover failed"; }
    cat rerr
    same_leaks "$live" rec.json || fail "$name: recovered leaks"
    diff <(labels "$live") <(labels rec.json) || fail "$name: npupool leaks labels differ"
    # shellcheck disable=SC2046
    check_reports rec.json --trigger recovered "$@" || fail "$name: recovered report"
    identity_is rec.json || fail "$name: the recovered npupool/runtime sections"
    jq -e '.recovered.python_frames_lost == 0 and .recovered.torn == 0' rec.json >/dev/null ||
        fail "$name: recovered facts $(jq -c .recovered rec.json)"
}

for py in $PYS; do
    v=$(python_version "$py")
    echo "== $py ($v)"
    # 1. exit with leaks: the ledger file stays next to the exit report
    for dll in cdll pydll; do
        word=gil_held; [ $dll = cdll ] && word=gil_released
        rm -f l-*.ledger r-*.json
        NPUPOOL_LEDGER_FILE="$T/l-%p.ledger" NPUPOOL_REPORT="$T/r-%n.json" \
            run_python "$py" leaks $dll 2 >out 2>err || { cat err; fail "$v $dll: leaks failed"; }
        [ "$(grep -c '^SITE' out)" -eq 2 ] || fail "$v $dll: the program printed no sites"
        # shellcheck disable=SC2046
        recovered "$v exit $dll" r-1.json --only $(python_sites out) --python-frames $word
        jq -e '.recovered.process == "exited" and .recovered.python_frames > 0' rec.json >/dev/null ||
            fail "$v $dll: $(jq -c .recovered rec.json)"
        grep -q "^#[12] kv_cache.py:13 cache_kv: 6.0 MiB in 6 allocations" <("$NP" leaks rec.json) ||
            fail "$v $dll: the recovered kv_cache site"
    done
    # 2. SIGKILL after a signal report: nothing but the file sees the end
    rm -f l-*.ledger r-*.json
    NPUPOOL_LEDGER_FILE="$T/l-%p.ledger" NPUPOOL_REPORT="$T/r-%n.json" \
        run_python "$py" leaks pydll 1 kill "$T" >out 2>err
    rc=$?
    [ "$rc" -eq 137 ] || { cat err; fail "$v: the program should have died of SIGKILL, status $rc"; }
    jq -e '.trigger == "signal"' r-1.json >/dev/null || fail "$v: no signal report before the kill"
    # shellcheck disable=SC2046
    recovered "$v kill" r-1.json --only $(python_sites out) --python-frames gil_held
    jq -e '.recovered.process == "gone"' rec.json >/dev/null || fail "$v kill: not 'gone'"
    # 3. threads: a Python thread without the GIL, a C thread (their words, native frames only)
    rm -f l-*.ledger r-*.json
    NPUPOOL_LEDGER_FILE="$T/l-%p.ledger" NPUPOOL_REPORT="$T/r-%n.json" \
        run_python "$py" threads cdll >out 2>err || { cat err; fail "$v: threads failed"; }
    recovered "$v threads" r-1.json
    jq -e '[.leaks[].python_frames] | index("not_visible") != null and
           index("no_thread_state") != null' rec.json >/dev/null ||
        fail "$v threads: $(jq -c '[.leaks[].python_frames]' rec.json)"
done
exit 0
