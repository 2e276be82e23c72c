# variants: plain asan tsan
# The ledger file's module map follows dlopen/dlclose: a library loaded after npupool started
# leaks, is unloaded, and another is loaded (usually at the same address) and leaks too; after
# SIGKILL, `recover` names each leak in its own library (the stacks made before the second load
# keep the first library; an in-process report could only see the second), and names this
# build's npupool and the fake runtime (identity_is).  And the module-map
# refresh, which enters the loader, never deadlocks with threads allocating while another thread
# dlopen()s and dlclose()s a library that allocates from its constructor (dlopen_stress).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
postmortem_case_start
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/d-%p.ledger" run_preloaded postmortem dlopen \
    "$PROGS/libpostmortem_a.so" "$PROGS/libpostmortem_b.so" >out 2>err
[ $? -eq 137 ] || { cat err; fail "the program should have died of SIGKILL"; }
cat out
"$NP" recover d-*.ledger -o rec.json 2>rerr || { cat rerr; fail "recover failed"; }
cat rerr
sites=()
while read -r tag fn count bytes line src; do
    [ "$tag" = SITE ] && sites+=(--site "$fn:$count:$bytes:$line:$src")
done <out
[ "${#sites[@]}" -eq 10 ] || fail "expected 5 SITE lines"
check_reports rec.json --trigger recovered --only "${sites[@]}" || fail "recovered report"
identity_is rec.json || fail "the recovered npupool/runtime sections"
jq -e '([.leaks[] | select(.frames[0].function == "leak_in_a")][0].frames[0].module | endswith("/libpostmortem_a.so"))
   and ([.leaks[] | select(.frames[0].function == "leak_in_b")][0].frames[0].module | endswith("/libpostmortem_b.so"))' \
    rec.json >/dev/null || fail "a leak attributed to the wrong library"
rounds=200
[ "$VARIANT" = plain ] || rounds=60
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/s-%p.ledger" NPUPOOL_BACKTRACE_DEPTH=32 \
    run_preloaded dlopen_stress "$PROGS/libledger_ctor.so" $rounds || fail "dlopen_stress failed (exit $?)"
! ls s-*.ledger >/dev/null 2>&1 || fail "nothing was live at exit, yet the ledger file stayed"
exit 0
