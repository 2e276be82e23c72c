# variants: plain asan tsan
# The ledger file's life: a clean exit with nothing live removes it (no line); an exit with
# leaks keeps it and says where in one line, and `recover` reads it as `exited`; an existing
# file is never overwritten (the next free name PATH.1 is taken); a hung process is read while it
# runs (`running`, exact sites) and again after kill -9 (`gone`); a fork child writes its own file
# (%p) with only what it allocated (2 blocks, without stacks: a child captures none), never the
# parent's; without %p a child keeps no file and the parent's file holds only the parent's
# allocations.  Every recovered report names this build's npupool and the fake runtime, a fork
# child's too (its file is made after the runtime was learnt).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
postmortem_case_start
export NPUPOOL_REPORT="$TMPDIR_CASE/r-%p-%n.json"
sites_of() { # FILE: --site arguments of the program's SITE lines
    while read -r tag fn count bytes line src; do
        [ "$tag" = SITE ] && echo "--site $fn:$count:$bytes:$line:$src"
    done <"$1"
}
# 1. clean exit: nothing live, nothing left, nothing said
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/e-%p.ledger" run_preloaded postmortem clean >out 2>err \
    || { cat err; fail "clean: status $?"; }
! ls e-*.ledger >/dev/null 2>&1 || fail "clean: the ledger file was not removed"
grep -q "ledger" err && { cat err; fail "clean: a line about the ledger file"; }
# 2. exit with leaks: kept, one line, recovered as exited
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/e-%p.ledger" run_preloaded postmortem exit >out 2>err \
    || { cat err; fail "exit: status $?"; }
file=$(ls e-*.ledger) || fail "exit: no ledger file kept"
[ "$(grep -c "the ledger file $TMPDIR_CASE/$file keeps 6 live allocations of this process: npupool recover" err)" -eq 1 ] \
    || { cat err; fail "exit: no one line naming the file"; }
"$NP" recover "$file" -o rec.json 2>/dev/null || fail "exit: recover"
# shellcheck disable=SC2046
check_reports rec.json --trigger recovered --only $(sites_of out) || fail "exit: recovered report"
jq -e '.recovered.process == "exited"' rec.json >/dev/null || fail "exit: not 'exited'"
identity_is rec.json || fail "exit: the recovered npupool/runtime sections"
# 3. an existing file is kept; the next name is taken
echo "not mine" >fixed.ledger
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/fixed.ledger" run_preloaded postmortem exit >out 2>err \
    || fail "fixed: status $?"
[ "$(cat fixed.ledger)" = "not mine" ] || fail "an existing file was overwritten"
[ -f fixed.ledger.1 ] || fail "no fixed.ledger.1"
grep -q "fixed.ledger.1 keeps" err || fail "the line does not name fixed.ledger.1"
# 4. a hung process, read while it runs, then after kill -9
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/h-%p.ledger" run_preloaded postmortem hang >out 2>err &
for _ in $(seq 200); do grep -q READY out 2>/dev/null && break; sleep 0.1; done
grep -q READY out || fail "hang: never ready"
file=$(ls h-*.ledger) || fail "hang: no ledger file"
pid=${file#h-}
pid=${pid%.ledger}
"$NP" recover "$file" -o rec.json 2>rerr || { cat rerr; fail "hang: recover"; }
grep -q "pid $pid running" rerr || { cat rerr; fail "hang: not 'running'"; }
# shellcheck disable=SC2046
check_reports rec.json --trigger recovered --only $(sites_of out) || fail "hang: recovered report"
identity_is rec.json || fail "hang: the npupool/runtime sections of a running process's file"
kill -9 "$pid"
wait
"$NP" recover "$file" -o rec.json 2>rerr || fail "hang: recover after kill"
grep -q "pid $pid gone" rerr || { cat rerr; fail "hang: not 'gone' after kill -9"; }
# 5. fork with %p: the child's own file holds only the child's leak
rm -f f-*.ledger
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/f-%p.ledger" run_preloaded postmortem fork >out 2>err
[ $? -eq 137 ] || { cat err; fail "fork: the parent should have died of SIGKILL"; }
read -r _ child _ < <(grep '^CHILD' out)
[ -n "$child" ] || fail "fork: no CHILD line"
[ "$(ls f-*.ledger | wc -l)" -eq 2 ] || fail "fork: expected two ledger files: $(ls f-*.ledger)"
"$NP" recover "f-$child.ledger" -o child.json 2>/dev/null || fail "fork: recover the child's file"
# (a fork child captures no stacks: ledger_stack_fork_gate_child; its allocations are stack 0)
check_reports child.json --trigger recovered || fail "fork: the child's file"
jq -e '[.leaks[] | [.count, .bytes, .stack_id]] == [[2, 1554, 0]]' child.json >/dev/null \
    || fail "fork: the child's file holds $(jq -c '[.leaks[] | [.count, .bytes, .stack_id]]' child.json)"
jq -e '.recovered.fork_child and .recovered.process == "exited"' child.json >/dev/null \
    || fail "fork: child facts $(jq -c .recovered child.json)"
identity_is child.json || fail "fork: the child's file names another npupool or runtime"
parent=$(ls f-*.ledger | grep -v "f-$child.ledger")
"$NP" recover "$parent" -o parent.json 2>/dev/null || fail "fork: recover the parent's file"
# shellcheck disable=SC2046
check_reports parent.json --trigger recovered --only $(sites_of out) || fail "fork: the parent's file"
# 6. fork without %p: the child keeps no file; the parent's file is the parent's alone
rm -f g.ledger*
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/g.ledger" run_preloaded postmortem fork >out 2>err
[ "$(ls g.ledger* | wc -l)" -eq 1 ] || fail "fork without %p: $(ls g.ledger*)"
"$NP" recover g.ledger -o parent.json 2>/dev/null || fail "fork without %p: recover"
# shellcheck disable=SC2046
check_reports parent.json --trigger recovered --only $(sites_of out) || fail "fork without %p: the parent's file"
exit 0
