# variants: plain
# Loading npupool must not change how the program unwinds: a C++ program that throws and catches
# (while allocating device memory, so stacks are captured) binds _Unwind_RaiseException to
# libgcc_s, never to libunwind, although npupool has loaded libunwind (privately, RTLD_LOCAL).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
LD_DEBUG=bindings,files LD_DEBUG_OUTPUT="$TMPDIR_CASE/ld" run_preloaded cxx_throw >"$TMPDIR_CASE/out" 2>&1 \
    || { cat "$TMPDIR_CASE/out"; fail "cxx_throw failed in front of the shim"; }
cat "$TMPDIR_CASE/out"
cat "$TMPDIR_CASE"/ld.* >"$TMPDIR_CASE/ld"
grep -q 'file=libunwind.so.8' "$TMPDIR_CASE/ld" || fail "npupool did not load libunwind (backtraces off?)"
grep "libstdc++.so.6 \[0\] to .*: normal symbol \`_Unwind_RaiseException'" "$TMPDIR_CASE/ld" >"$TMPDIR_CASE/raise"
[ -s "$TMPDIR_CASE/raise" ] || fail "no binding of _Unwind_RaiseException from libstdc++ seen"
cat "$TMPDIR_CASE/raise"
grep -q 'libgcc_s.so.1' "$TMPDIR_CASE/raise" || fail "libstdc++'s _Unwind_RaiseException does not bind to libgcc_s"
grep -q 'libunwind' "$TMPDIR_CASE/raise" && fail "libstdc++'s _Unwind_RaiseException binds to libunwind"
# nothing outside libunwind itself binds to it
grep 'binding file' "$TMPDIR_CASE/ld" | grep ' to [^ ]*libunwind' | grep -v 'binding file [^ ]*libunwind' \
    && fail "a symbol of the program or its libraries binds to libunwind"
exit 0
