# variants: plain asan
# `npupool export`: the PyTorch memory snapshot loads with Python's pickle and holds what the
# trace says (entries per action and device, addresses and sizes, segments that the blocks tile,
# the report's stacks on exactly the live blocks it lists, fallback allocations as their own
# segments, an RMM failure as "oom"); the Perfetto file is JSON whose counter tracks never go
# back in time and whose figures are replay's (peak allocated, peak reserved, refusals, the
# final fragmentation), sampling keeps the peak, and a report is an instant at the trace's end.
# In the plain build also end to end: a program under the shim, its trace and exit report, the
# snapshot's live blocks named by the program's own functions.  Skips (77) without python3.
. "$ROOT/tests/lib.sh"
NP="$ROOT/$BUILD/npupool"
[ -x "$NP" ] || fail "$NP not built"
PY=$(command -v /usr/bin/python3 python3 | head -1)
[ -n "$PY" ] || skip "no python3 to read the files back"
cd "$ROOT"
F=tests/fixtures
T=$TMPDIR_CASE
expect2() { # PATTERN ARGS...: exit 2 with one line matching PATTERN
    local pat=$1 rc=0; shift
    "$NP" "$@" >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" -eq 2 ] || { cat "$T/err"; fail "npupool $*: exit $rc, expected 2"; }
    grep -qE -- "$pat" "$T/err" || { cat "$T/err"; fail "npupool $*: message does not match '$pat'"; }
    [ "$(wc -l <"$T/err")" -eq 1 ] || { cat "$T/err"; fail "npupool $*: not one line"; }
}

# ---- memory_viz snapshot of the hand-made trace and its exit report --------------------------
"$NP" export $F/traces/export.trace --report $F/report_export.json --memory-viz "$T/e.pickle" \
    >"$T/out" || fail "export --memory-viz"
cat "$T/out"
grep -q "19 trace entries, 3 segments, 5 blocks live at the end (2 with a stack from" "$T/out" \
    || fail "export summary line"
"$PY" - "$T/e.pickle" $F/traces/export.trace $F/report_export.json <<'EOF' || fail "snapshot contents"
import json, pickle, sys
from collections import Counter
snap = pickle.load(open(sys.argv[1], "rb"))
report = json.load(open(sys.argv[3]))
assert set(snap) == {"segments", "device_traces"}, snap.keys()
# The trace, read independently: events per device, live at the end.
events, live = {}, {}
for line in open(sys.argv[2]):
    if line.startswith("#") or line.startswith("thread"):
        continue
    tid, t, action, ptr, size, dev = line.strip().split(",")
    dev, ptr = int(dev), int(ptr, 16)
    if action == "alloc":
        live[(dev, ptr)] = int(size)
    n = live[(dev, ptr)]
    if action == "free":
        del live[(dev, ptr)]
    events.setdefault(dev, []).append((action, ptr, int(t), n))
base = int(report["devices"][0]["pool"]["base"], 16)
reserved = report["devices"][0]["pool"]["reserved_bytes"]
outside = lambda dev, p: dev == 0 and not base <= p < base + reserved
traces = snap["device_traces"]
assert len(traces) == 2, len(traces)
for dev, evs in events.items():
    got = Counter(e["action"] for e in traces[dev])
    allocs = sum(a == "alloc" for a, _, _, _ in evs)
    frees = sum(a == "free" for a, _, _, _ in evs)
    out_allocs = sum(a == "alloc" and outside(dev, p) for a, p, _, _ in evs)
    out_frees = sum(a == "free" and outside(dev, p) for a, p, _, _ in evs)
    want = Counter({"alloc": allocs, "free_requested": frees, "free_completed": frees,
                    "segment_alloc": 1 + out_allocs})
    if out_frees:
        want["segment_free"] = out_frees
    assert got == want, (dev, got, want)
    # entries follow the trace: addresses, sizes, times (us), in order
    seq = [e for e in traces[dev] if e["action"] in ("alloc", "free_completed")]
    assert [(e["action"], e["addr"], e["size"], e["time_us"]) for e in seq] == \
        [("alloc" if a == "alloc" else "free_completed", p, n, t // 1000)
         for a, p, t, n in evs], dev
    for e in traces[dev]:
        assert e["stream"] == 0 and isinstance(e["frames"], list)
    assert traces[dev][0]["action"] == "segment_alloc"
# Segments: the report's pool for device 0, the span of the trace's addresses for device 1,
# one per live fallback allocation; blocks tile each segment; active blocks = live allocations.
segs = snap["segments"]
assert len(segs) == 3, len(segs)
pool = [s for s in segs if s["device"] == 0 and s["address"] == base]
assert len(pool) == 1 and pool[0]["total_size"] == reserved, pool
dev1 = [s for s in segs if s["device"] == 1]
assert len(dev1) == 1 and dev1[0]["address"] == 0x200000000000 and dev1[0]["total_size"] == 12288
active = {}
for s in segs:
    assert sum(b["size"] for b in s["blocks"]) == s["total_size"], s["address"]
    at = s["address"]
    for b in s["blocks"]:
        assert b["address"] == at
        at += b["size"]
        if b["state"] == "active_allocated":
            active[(s["device"], b["address"])] = b
        else:
            assert b["state"] == "inactive" and b["frames"] == []
    assert s["allocated_size"] == sum(b["requested_size"] for b in s["blocks"]
                                      if b["state"] == "active_allocated")
assert {k: b["size"] for k, b in active.items()} == live, (active.keys(), live)
# Stacks: exactly the live blocks the report's live_map names a site for.
names = {k: [f["name"] for f in b["frames"]] for k, b in active.items() if b["frames"]}
assert names == {(0, base): ["load_weights", "main"],
                 (0, base + 0x110080): ["kv_cache_init", "serve", "main"]}, names
kv = active[(0, base + 0x110080)]["frames"][0]
assert kv == {"filename": "/src/app/kv.c", "line": 14, "name": "kv_cache_init"}, kv
alloc_frames = {e["addr"]: len(e["frames"]) for e in traces[0] if e["action"] == "alloc"}
assert alloc_frames[base] == 2 and alloc_frames[base + 0x110080] == 3
assert alloc_frames[base + 0x100040] == 0
print("snapshot ok:", len(segs), "segments,", sum(len(t) for t in traces), "entries")
EOF

# without a report: one segment per device spanning the trace's addresses, no stacks
"$NP" export $F/traces/export.trace --memory-viz "$T/n.pickle" >/dev/null || fail "export without report"
"$PY" - "$T/n.pickle" <<'EOF' || fail "snapshot without report"
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
segs = sorted((x["device"], x["address"], x["total_size"]) for x in s["segments"])
assert segs == [(0, 0x100000000000, 0x7f0000400000 + 1000000 - 0x100000000000),
                (1, 0x200000000000, 12288)], segs
assert all(b["frames"] == [] for x in s["segments"] for b in x["blocks"])
assert not any(e["action"] == "segment_free" for t in s["device_traces"] for e in t)
EOF

# an RMM log's "allocate failure" is an "oom" entry; '-' writes the pickle to stdout
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,4096,0\n1,10:00:00.000250,allocate failure,0x0,1048576,0\n1,10:00:01.5,free,0x1000,4096,0\n' >"$T/fail.csv"
"$NP" export "$T/fail.csv" --memory-viz - >"$T/f.pickle" || fail "export of an RMM log to stdout"
"$PY" - "$T/f.pickle" <<'EOF' || fail "oom entry"
import pickle, sys
t = pickle.load(open(sys.argv[1], "rb"))["device_traces"][0]
assert [e["action"] for e in t] == ["segment_alloc", "alloc", "oom", "free_requested",
                                    "free_completed"], [e["action"] for e in t]
oom = t[2]
assert oom["size"] == 1048576 and oom["device_free"] == 0 and "addr" not in oom, oom
assert [e["time_us"] for e in t] == [36000000001, 36000000001, 36000000250, 36001500000, 36001500000]
EOF

# ---- Perfetto: figures of the replay -----------------------------------------------------------
check_perfetto() { # JSON TRACE REPLAY-ARGS...: counters and instants agree with `npupool replay`
    local json=$1 trace=$2; shift 2
    "$NP" replay "$trace" --no-timing "$@" >"$T/replay.txt" || fail "replay $trace"
    "$PY" - "$json" "$T/replay.txt" <<'EOF' || fail "perfetto file of $trace ($*)"
import json, re, sys
from collections import defaultdict
doc = json.load(open(sys.argv[1]))
rep = open(sys.argv[2]).read()
ev = doc["traceEvents"]
assert doc["displayTimeUnit"] == "ns" and isinstance(ev, list)
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
tracks = defaultdict(list)
for e in ev:
    assert e["ph"] in ("M", "C", "i"), e
    if e["ph"] == "C":
        assert set(e["args"]) == ({"percent"} if e["name"] == "fragmentation" else {"bytes"}), e
        tracks[(e["pid"], e["name"])].append((e["ts"], list(e["args"].values())[0]))
for key, pts in tracks.items():
    ts = [t for t, _ in pts]
    assert ts == sorted(ts), ("timestamps go back", key)
    assert all(t >= 0 for t in ts)
devices = re.findall(r"^device (\S+)$", rep, re.M)
assert len(devices) == len(names), (devices, names)
for i, dev in enumerate(devices):
    pid = 1000 + i
    assert names[pid].startswith(f"device {dev} "), names[pid]
    block = rep.split(f"\ndevice {dev}\n")[1].split("\ndevice ")[0]
    peak_alloc = int(re.search(r"peak allocated .*\((\d+) bytes", block).group(1))
    pool = int(re.search(r"allocator .*\((\d+) bytes\) per device", rep).group(1))
    fb = re.search(r"peak reserved .*\(pool \+ (.*) peak fallback\)", block).group(1)
    refused = int(re.search(r"refused (\d+)", block).group(1))
    final = float(re.search(r"fragmentation +final ([\d.]+)%", block).group(1))
    alloc = [v for _, v in tracks[(pid, "allocated")]]
    res = [v for _, v in tracks[(pid, "reserved")]]
    frag = [v for _, v in tracks[(pid, "fragmentation")]]
    assert max(alloc) == peak_alloc, (dev, max(alloc), peak_alloc)
    assert min(res) == pool, (min(res), pool)
    if fb == "0 B":
        assert max(res) == pool
    else:
        assert max(res) > pool
    assert round(frag[-1], 1) == final, (frag[-1], final)
    inst = [e for e in ev if e["ph"] == "i" and e["pid"] == pid and e["name"] == "refused"]
    assert len(inst) == refused, (len(inst), refused)
    for e in inst:
        assert e["args"]["requested"] > 0 and e["args"]["largest_free"] <= e["args"]["free"]
print("perfetto ok:", len(ev), "events,", len(tracks), "counter tracks")
EOF
}
"$NP" export $F/traces/export.trace --report $F/report_export.json --perfetto "$T/e.json" >"$T/out" \
    || fail "export --perfetto"
grep -q "replay through a 64.0 MiB pool per device" "$T/out" || fail "the report's pool size is the default"
check_perfetto "$T/e.json" $F/traces/export.trace --pool-bytes 64M
"$PY" - "$T/e.json" <<'EOF' || fail "report instant"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
rep = [e for e in ev if e["ph"] == "i" and e["name"].startswith("report")]
last = max(e["ts"] for e in ev if e["ph"] == "C")
assert len(rep) == 1 and rep[0]["s"] == "g" and rep[0]["ts"] == last == 11.0, rep
assert rep[0]["args"]["trigger"] == "exit" and rep[0]["args"]["pid"] == 6161
EOF
# refusals: an RMM log through a small pool with no fallback
"$NP" export traces/rmm_random_small.csv --perfetto "$T/r.json" --pool-bytes 64M --fallback 0 \
    >/dev/null || fail "export rmm"
check_perfetto "$T/r.json" traces/rmm_random_small.csv --pool-bytes 64M --fallback 0
# fallback on: reserved grows past the pool
"$NP" export traces/serving.trace --perfetto "$T/s.json" --pool-bytes 4G >/dev/null || fail "export serving"
check_perfetto "$T/s.json" traces/serving.trace --pool-bytes 4G
# sampling: at most N points a track, the peak kept
"$NP" export traces/training.trace --perfetto "$T/w.json" --pool-bytes 8G --max-samples 100 >/dev/null \
    || fail "export sampled"
check_perfetto "$T/w.json" traces/training.trace --pool-bytes 8G
"$PY" -c "
import json, sys, collections
c = collections.Counter((e['pid'], e['name']) for e in json.load(open('$T/w.json'))['traceEvents'] if e['ph'] == 'C')
assert max(c.values()) <= 100, c
" || fail "--max-samples 100 not kept"

# ---- bad usage and input -----------------------------------------------------------------------
expect2 "export: give --memory-viz FILE or --perfetto FILE" export $F/traces/export.trace
expect2 "report_basic.json: a report of process 4242, the trace is of process 6161" \
    export $F/traces/export.trace --report $F/report_basic.json --perfetto "$T/x.json"
expect2 "badsize.trace:4: bad size" export $F/bad/badsize.trace --perfetto "$T/x.json"
expect2 "/nonexistent-dir/x.pickle: cannot write" export $F/traces/export.trace --memory-viz /nonexistent-dir/x.pickle
expect2 "only one of the files" export $F/traces/export.trace --memory-viz - --perfetto -

# ---- end to end: a program under the shim -------------------------------------------------------
[ "$VARIANT" = plain ] || exit 0
[ -f "$SHIM" ] && [ -f "$BUILD/fakeacl/libascendcl.so" ] || skip "shim or fake runtime not built"
prog="$T/tool_prog"
${CC:-cc} -g -O1 -fno-omit-frame-pointer -Iinclude $F/tool_prog.c -o "$prog" \
    -L"$BUILD/fakeacl" -lascendcl -Wl,-rpath,"$ROOT/$BUILD/fakeacl" || fail "cannot build tool_prog"
# the program calls aclFinalize: its finalize report (1) has the pool and the leaks; there is no
# exit report (nothing was allocated after the finalize report: it would only repeat it)
env NPUPOOL_TRACE="$T/p.trace" NPUPOOL_REPORT="$T/p-%n.json" NPUPOOL_POOL_BYTES=1G LD_PRELOAD="$SHIM" \
    "$prog" >/dev/null || fail "tool_prog under the shim"
[ -f "$T/p.trace" ] && [ -f "$T/p-1.json" ] || skip "the shim wrote no trace or reports"
[ ! -f "$T/p-2.json" ] || fail "an exit report repeats the finalize report"
jq -e '.trigger == "finalize" and .devices[0].pool != null' "$T/p-1.json" >/dev/null \
    || skip "the shim's first report is not a finalize report with a pool"
"$NP" export "$T/p.trace" --report "$T/p-1.json" --memory-viz "$T/p.pickle" \
    --perfetto "$T/p.perf.json" >"$T/out" || fail "export of the shim's trace"
cat "$T/out"
grep -q "6 blocks live at the end (6 with a stack from $T/p-1.json)" "$T/out" || fail "stacks report"
"$PY" - "$T/p.pickle" "$T/p-1.json" <<'EOF' || fail "the program's leaks in the snapshot"
import json, pickle, sys
from collections import Counter
snap = pickle.load(open(sys.argv[1], "rb"))
report = json.load(open(sys.argv[2]))
live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
named = Counter(b["frames"][0]["name"] for b in live if b["frames"])
assert named["leak_static_cache"] == 4 and named["leak_exported_table"] == 2, named
assert len(live) == sum(l["count"] for l in report["leaks"]), (len(live), report["leaks"])
pool = report["devices"][0]["pool"]
seg = [s for s in snap["segments"] if s["address"] == int(pool["base"], 16)]
assert len(seg) == 1 and seg[0]["total_size"] == pool["reserved_bytes"], seg
EOF
check_perfetto "$T/p.perf.json" "$T/p.trace" --pool-bytes "$(jq '.devices[0].pool.reserved_bytes' "$T/p-1.json")"
"$PY" - "$T/p.perf.json" <<'EOF' || fail "one report instant, at the end"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
rep = sorted((e["ts"], e["name"]) for e in ev if e["ph"] == "i")
assert [n for _, n in rep] == ["report finalize"], rep
assert rep[0][0] == max(e["ts"] for e in ev if e["ph"] == "C"), rep
EOF
exit 0
