# variants: plain asan tsan
# Threads allocate (capturing stacks) while another thread dlopen()s and dlclose()s a library whose
# constructor and destructor allocate too (so they unwind with the loader lock held): no deadlock.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
rounds=300
[ "$VARIANT" = plain ] || rounds=100
NPUPOOL_BACKTRACE_DEPTH=32 run_preloaded dlopen_stress "$PROGS/libledger_ctor.so" $rounds \
    || fail "dlopen_stress failed (exit $?)"
exit 0
