# variants: plain asan tsan
# Reports taken while a Python program runs (SIGUSR2, three phases): the balanced function holds
# its 4 blocks in every report and shows no growth after the first; cache_kv's leak shows +2 in
# the report after it and no growth in the next.  In pool mode and in observe mode.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
. "$ROOT/tests/programs/python/python_case_lib.sh"
python_case_start
py=$PY1
growth() { # report, function, file -> "count growth_count growth_bytes" of that Python site
    jq -r --arg f "$2" --arg file "$3" '[.leaks[] | select([.frames[] | select(.python)][0] |
          .function == $f and .file == $file)] |
          if length == 1 then "\(.[0].count) \(.[0].growth.count) \(.[0].growth.bytes)" else "none" end' "$1"
}
for mode in pool observe; do
    rm -f "$T"/r-*.json
    NPUPOOL_MODE=$mode NPUPOOL_REPORT="$T/r-%n.json" run_python "$py" intervals cdll "$T" >"$T/out" 2>"$T/err" ||
        { cat "$T/err"; fail "$mode: intervals failed"; }
    read -r _ bname _ _ _ bfile < <(grep '^SITE balanced' "$T/out")
    read -r _ kname _ _ _ kfile < <(grep '^SITE cache_kv' "$T/out")
    check_reports "$T/r-1.json" "$T/r-2.json" "$T/r-3.json" --trigger signal || fail "$mode: reports"
    [ "$(growth "$T/r-1.json" "$bname" "$bfile")" = "4 4 16384" ] || fail "$mode: balanced in report 1: $(growth "$T/r-1.json" "$bname" "$bfile")"
    [ "$(growth "$T/r-2.json" "$bname" "$bfile")" = "4 0 0" ] || fail "$mode: balanced grew in report 2"
    [ "$(growth "$T/r-3.json" "$bname" "$bfile")" = "4 0 0" ] || fail "$mode: balanced grew in report 3"
    [ "$(growth "$T/r-1.json" "$kname" "$kfile")" = none ] || fail "$mode: cache_kv before it ran"
    [ "$(growth "$T/r-2.json" "$kname" "$kfile")" = "2 2 2097152" ] || fail "$mode: cache_kv in report 2"
    [ "$(growth "$T/r-3.json" "$kname" "$kfile")" = "2 0 0" ] || fail "$mode: cache_kv in report 3"
    "$NP" diff "$T/r-2.json" "$T/r-3.json" >"$T/diff" || fail "$mode: diff"
    grep -q "^grew (0 stacks)" "$T/diff" || { cat "$T/diff"; fail "$mode: diff of reports 2 and 3 shows growth"; }
    "$NP" diff "$T/r-1.json" "$T/r-2.json" | grep -q "+2.0 MiB .* kv_cache.py:13 cache_kv" || fail "$mode: diff names the leak"
done
exit 0
