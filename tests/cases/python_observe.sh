# variants: plain asan tsan
# NPUPOOL_MODE=observe in front of a Python program: the same leak report as pool mode (sites by
# Python line, counts, bytes), while the runtime sees every allocation and free (the fake's
# counters equal the program's calls; pool mode shows only the pool's chunks), no pool exists,
# aclrtGetMemInfo is the runtime's own answer, the trace has every call, the thresholds fire
# against the device's total HBM, and the runtime's own refusal gets an oom report naming the
# Python line.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
. "$ROOT/tests/programs/python/python_case_lib.sh"
python_case_start
py=$PY1
sites() { # the leak sites of a report, comparable across modes
    jq -c '[.leaks[] | {count, bytes, granted_bytes, python_frames,
            py: [.frames[] | select(.python) | [.function, .file, .line]]}] | sort' "$1"
}

# pool mode
NPUPOOL_REPORT="$T/pool-%n.json" run_python "$py" leaks cdll 2 >"$T/out.pool" 2>"$T/err" || { cat "$T/err"; fail "pool run"; }
[ "$(stat device_allocs)" -eq 0 ] && [ "$(stat physical_allocs)" -ge 1 ] \
    || fail "pool mode: $(stat device_allocs) runtime allocations, $(stat physical_allocs) physical: expected only the pool's chunks"
# observe mode
NPUPOOL_MODE=observe NPUPOOL_TRACE="$T/trace-%p" NPUPOOL_REPORT="$T/obs-%n.json" \
    run_python "$py" leaks cdll 2 >"$T/out.obs" 2>"$T/err" || { cat "$T/err"; fail "observe run"; }
cat "$T/err"
read -r _ allocs frees < <(grep '^CALLS' "$T/out.obs")
[ "$(stat aclrtMalloc)" -eq "$allocs" ] && [ "$(stat device_allocs)" -eq "$allocs" ] ||
    fail "observe: the runtime saw $(stat device_allocs) allocations, the program made $allocs"
[ "$(stat aclrtFree)" -eq "$frees" ] && [ "$(stat device_frees)" -eq "$frees" ] ||
    fail "observe: the runtime saw $(stat device_frees) frees, the program made $frees"
# the runtime's own free memory: total - what the live leaks are charged
read -r _ free total < <(grep '^MEMINFO' "$T/out.obs")
[ "$free" -eq $((total - $(stat charged_dev0))) ] || fail "observe: aclrtGetMemInfo free $free is not the runtime's"
read -r _ pfree _ < <(grep '^MEMINFO' "$T/out.pool")
[ "$pfree" -gt "$free" ] || fail "pool mode should add the pool's free bytes to aclrtGetMemInfo"

# the same report, the pool and the mode aside
check_reports "$T/obs-1.json" --trigger exit || fail "observe report"
[ "$(sites "$T/pool-1.json")" = "$(sites "$T/obs-1.json")" ] ||
    { sites "$T/pool-1.json"; sites "$T/obs-1.json"; fail "observe and pool mode list different leaks"; }
[ "$(jq '.leaks | length' "$T/obs-1.json")" -eq 2 ] || fail "observe: expected the two leak sites"
jq -e '.config.NPUPOOL_MODE == "observe" and ([.devices[] | select(.device == 0)][0].pool == null) and
       all(.leaks[]; .origins.observed == .count and .origins.pool == 0)' "$T/obs-1.json" >/dev/null ||
    fail "observe report: mode, pool or origins"
jq -e 'all(.leaks[]; .origins.pool == .count and .origins.observed == 0)' "$T/pool-1.json" >/dev/null ||
    fail "pool report: origins"
# the trace has every call
tr=$(ls "$T"/trace-*)
[ "$(grep -c ',alloc,' "$tr")" -eq "$allocs" ] && [ "$(grep -c ',free,' "$tr")" -eq "$frees" ] ||
    fail "observe: trace lines"

# thresholds against the device's HBM: 64 MiB device, warning at 5 % (3.2 MiB)
rm -f "$T"/thr-*.json
FAKEACL_HBM_BYTES=64M NPUPOOL_MODE=observe NPUPOOL_WARN_RATIO=0.05 NPUPOOL_CRITICAL_RATIO=0.9 \
    NPUPOOL_REPORT="$T/thr-%n.json" run_python "$py" leaks pydll 1 >/dev/null 2>"$T/err" || { cat "$T/err"; fail "threshold run"; }
grep -q "crossed the warning threshold" "$T/err" || fail "observe: no threshold line"
thr=$(for f in "$T"/thr-*.json; do jq -e '.trigger == "threshold"' "$f" >/dev/null && echo "$f"; done | head -1)
[ -n "$thr" ] || fail "observe: no threshold report"
check_reports "$thr" || fail "threshold report"
jq -e '.threshold.reserved_bytes == 67108864 and .threshold.level == "warning" and
       .threshold.allocated_bytes >= 3355443' "$thr" >/dev/null || fail "observe threshold figures"

# the runtime refuses (a 4 MiB device; the fake charges 2 MiB units): an oom report of kind runtime
rm -f "$T"/oom-*.json
FAKEACL_HBM_BYTES=4M NPUPOOL_MODE=observe NPUPOOL_REPORT="$T/oom-%n.json" \
    run_python "$py" leaks pydll 1 >/dev/null 2>"$T/err" && fail "observe: 6 MiB fit in a 4 MiB device"
grep -q "refused with 207001: runtime: the runtime refused" "$T/err" || { cat "$T/err"; fail "observe: no refusal line"; }
oom=$(for f in "$T"/oom-*.json; do jq -e '.trigger == "oom"' "$f" >/dev/null && echo "$f"; done | head -1)
[ -n "$oom" ] || fail "observe: no oom report"
check_reports "$oom" || fail "observe oom report"
jq -e '.oom.kind == "runtime" and .oom.python_frames == "gil_held" and
       ([.oom.frames[] | select(.python)][0] | .function == "cache_kv" and .line == 13) and
       all(.leaks[]; .origins.observed == .count)' "$oom" >/dev/null ||
    fail "observe: the oom report does not name the refused Python line"
exit 0
