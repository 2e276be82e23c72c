# variants: plain
# The shim under valgrind memcheck: no invalid reads/writes, no uninitialised use, no leaks of
# npupool's own making, in front of a single-threaded and a threaded program.
. "$ROOT/tests/lib.sh"
command -v valgrind >/dev/null || skip "valgrind not installed"
no_emu "valgrind runs programs of its own architecture only"
export FAKEACL_HBM_BYTES=2G
for prog in basic "threads 4"; do
    set -- $prog
    (cd "$TMPDIR_CASE"; LD_PRELOAD="$SHIM" valgrind -q --suppressions="$ROOT/tests/valgrind.supp" --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
        "$PROGS/$1" ${2:-} 2>"$TMPDIR_CASE/vg") || { grep -v '^npupool\[[0-9]*\]:' "$TMPDIR_CASE/vg" | head -60; fail "valgrind found errors in $prog"; }
done
exit 0
