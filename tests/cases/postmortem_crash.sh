# variants: plain asan tsan
# Fatal signals with the ledger in a file: a program that segfaults and one that abort()s from an
# uncaught C++ exception die with the exit status they have without npupool; in the plain build
# (no sanitizer runtime owns the fault signals there) npupool's one line names the pid, the signal
# and the file, and the recovered report says the process died of that signal.  In every build
# `npupool recover` finds the planted leaks, and names this build's npupool and the fake runtime.
# An application's own handler is never replaced: a program whose SIGSEGV handler is installed
# first keeps it (no line).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
postmortem_case_start
ulimit -c 0
crash() { # NAME SIGNAL PROG ARGS...: compare with the run without npupool, then recover
    local name=$1 sig=$2 want rc file pid; shift 2
    rm -f c-*.ledger rec.json
    (LD_PRELOAD="$SANRT" "$PROGS/$1" "${@:2}" >/dev/null 2>&1)
    want=$?
    NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/c-%p.ledger" run_preloaded "$@" >out 2>err
    rc=$?
    cat err
    [ "$rc" -eq "$want" ] || fail "$name: status $rc, without npupool $want"
    # (a sanitizer runtime that owns the signal ends the process its own way: equal is enough)
    [ "$VARIANT" != plain ] || [ "$rc" -ge 128 ] || fail "$name: did not die of a signal (status $rc)"
    file=$(ls c-*.ledger) || fail "$name: no ledger file"
    pid=${file#c-}
    pid=${pid%.ledger}
    if [ "$VARIANT" = plain ]; then
        grep -Fqx "npupool[$pid]: pid $pid died of $sig; its ledger is in $TMPDIR_CASE/$file; npupool recover $TMPDIR_CASE/$file" err \
            || fail "$name: no line naming the ledger file"
    fi
    "$NP" recover "$file" -o rec.json 2>rerr || { cat rerr; fail "$name: recover failed"; }
    cat rerr
    sites=()
    while read -r tag fn count bytes line src; do
        [ "$tag" = SITE ] && sites+=(--site "$fn:$count:$bytes:$line:$src")
    done <out
    check_reports rec.json --trigger recovered --only "${sites[@]}" || fail "$name: recovered report"
    identity_is rec.json || fail "$name: the recovered npupool/runtime sections"
    if [ "$VARIANT" = plain ]; then
        jq -e --arg sig "$sig" '.recovered.process == "died" and .recovered.death_signal == $sig
            and .recovered.death_time != null' rec.json >/dev/null \
            || fail "$name: recovered facts: $(jq -c .recovered rec.json)"
    fi
}
crash segfault SIGSEGV postmortem segv
crash abort SIGABRT cxx_abort
# a handler the program installs, before npupool starts or after, is the one that runs (status
# and output as without npupool; in the plain build that is the program's handler: OWN, 3)
for when in before after; do
    (LD_PRELOAD="$SANRT" "$PROGS/postmortem" "own-$when" >want.out 2>/dev/null)
    want=$?
    NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/h-%p.ledger" run_preloaded postmortem "own-$when" >out 2>err
    rc=$?
    [ "$rc" -eq "$want" ] && cmp -s out want.out || fail "own-$when: status $rc / $want, output differs"
    [ "$VARIANT" != plain ] || { [ "$rc" -eq 3 ] && grep -q '^OWN$' out; } \
        || fail "own-$when: the program's handler did not run (status $rc)"
    grep -q "died of" err && fail "own-$when: npupool's line instead of the program's handler"
done
exit 0
