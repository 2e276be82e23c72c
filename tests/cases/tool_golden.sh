# variants: plain asan
# Golden outputs of every subcommand of `npupool` on the hand-made reports in tests/fixtures/
# (the ranks of a job in tests/fixtures/ranks/) and on the shipped traces.  (`export` writes
# files for other viewers: tests/cases/tool_export.sh reads them back.)  UPDATE_GOLDEN=1 rewrites tests/golden/ (review the diff!).
. "$ROOT/tests/lib.sh"
NP="$ROOT/$BUILD/npupool"
[ -x "$NP" ] || fail "$NP not built"
cd "$ROOT"
F=tests/fixtures
R=tests/fixtures/ranks
unset NPUPOOL_SUPPRESS
check() { # NAME ARGS...: run npupool ARGS, compare stdout with tests/golden/NAME
    local name=$1; shift
    local out="$TMPDIR_CASE/$name" rc=0
    "$NP" "$@" >"$out" 2>"$out.err" || rc=$?
    [ "$rc" -le 1 ] || { cat "$out.err"; fail "npupool $* exited $rc"; }
    if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then cp "$out" "tests/golden/$name"; return; fi
    diff -u "tests/golden/$name" "$out" || fail "npupool $* differs from tests/golden/$name"
}
check help.txt help
check summary_basic.txt summary $F/report_basic.json
check summary_oom.txt summary $F/report_oom.json
check summary_oom_two.txt summary $F/report_oom.json $F/report_basic.json
check summary_two_devices.txt summary $F/report_two_devices.json --top 3
check leaks_basic.txt leaks $F/report_basic.json
check leaks_filtered.txt leaks $F/report_two_devices.json --top 2 --min-bytes 100K --device 0
check leaks_since.txt leaks $R/r1_later.json --since $R/r1_early.json
check leaks_suppress.txt leaks $R/r0.json --suppress $F/weights.supp --ignore 'slow_*'
check leaks_ranks.txt leaks $R/r0.json $R/r1.json $R/r2.json $R/r3.json
check summary_ranks.txt summary $R/r0.json $R/r1_early.json $R/r1.json $R/r2.json $R/r3.json --top 3
check diff_slow_leak.txt diff $F/report_old.json $F/report_new.json --stacks
check diff_reverse.txt diff $F/report_new.json $F/report_old.json
check flame_basic.txt flame $F/report_basic.json
check flame_count.txt flame $F/report_two_devices.json --by count --with-device
check map_basic.svg map $F/report_basic.json -o -
check map_two_devices.svg map $F/report_two_devices.json --by site -o -
check replay_minpool.txt replay $F/traces/minpool.trace --backing block --rounding none --min-pool --no-timing
check replay_training.txt replay traces/training.trace --backing block --no-timing --min-pool --resolution 1M
check replay_training_vmm.txt replay traces/training.trace --no-timing --min-pool --verify 20
check replay_rmm_small.txt replay traces/rmm_random_small.csv --backing block --pool-bytes 64M --fallback 0 --no-timing
check replay_rmm_small_vmm.txt replay traces/rmm_random_small.csv --pool-bytes 64M --fallback 0 --no-timing
exit 0
