# tests/lib.sh — helpers for the case scripts in tests/cases/ (sourced, not run).
#
# Provides: run_preloaded PROG ARGS... (runs $BUILD/tests/programs/PROG in front of the shim, with
# the sanitizer runtime first in LD_PRELOAD in asan/tsan builds), run_plain PROG ARGS... (same
# program, no shim), stat NAME (a counter of the fake runtime from the last run), pool_only LABEL
# (the last run's runtime allocations were all chunks of virtual-memory pools, each mapped
# once), fail MSG, skip MSG.  The fake's counters land in $STATS, written at exit by FAKEACL_STATS.  A case runs in
# its own temporary directory ($TMPDIR_CASE); PROGS and SHIM are absolute paths.
# Under an emulator (EMU set by tests/run.sh: make test-aarch64) programs run as `$EMU PROG`, and
# LD_PRELOAD reaches the emulated program only (QEMU_SET_ENV), not the emulator itself; launch
# PRELOAD PROG ARGS... does that for any program (exported: also in `bash -c` under timeout);
# no_emu REASON skips a case, or the rest of one, that cannot run there.
set -u
: "${BUILD:=build}" "${VARIANT:=plain}" "${ROOT:=$(pwd)}"
case "$BUILD" in /*) ABS_BUILD=$BUILD ;; *) ABS_BUILD="$ROOT/$BUILD" ;; esac
PROGS="$ABS_BUILD/tests/programs"
SHIM="$ABS_BUILD/libnpupool.so"
TMPDIR_CASE=$(mktemp -d "${TMPDIR:-/tmp}/npupool-case.XXXXXX")
trap 'rm -rf "$TMPDIR_CASE"' EXIT
STATS="$TMPDIR_CASE/stats"
export FAKEACL_STATS="$STATS"
export LD_LIBRARY_PATH="$ABS_BUILD/fakeacl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

case "$VARIANT" in
    asan) SANRT="$(${CC:-cc} -print-file-name=libasan.so)"
          export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
          export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" ;;
    tsan) SANRT="$(${CC:-cc} -print-file-name=libtsan.so)"
          export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}" ;;
    *)    SANRT="" ;;
esac

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "$*"; exit 77; }

EMU=${EMU:-}
no_emu() { [ -z "$EMU" ] || skip "not under an emulator ($EMU): $*"; }

launch() { # $1 = LD_PRELOAD for the program ("" = none), then the program and its arguments
    local pre=$1; shift
    if [ -z "$EMU" ]; then
        LD_PRELOAD="$pre" "$@"
    elif [ -n "$pre" ]; then
        QEMU_SET_ENV="LD_PRELOAD=$pre" $EMU "$@"
    else
        $EMU "$@"
    fi
}

export -f launch # for a program run under timeout: timeout N bash -c 'launch "$@"' launch PRE PROG

run_preloaded() {
    local prog=$1; shift
    rm -f "$STATS"
    # in the case's directory: reports a run leaves land there, not in the work tree
    (cd "$TMPDIR_CASE" && launch "${SANRT:+$SANRT }$SHIM" "$PROGS/$prog" "$@")
}

run_plain() {
    local prog=$1; shift
    rm -f "$STATS"
    (cd "$TMPDIR_CASE" && launch "${SANRT}" "$PROGS/$prog" "$@")
}

pool_only() {
    local pa
    pa=$(stat physical_allocs)
    [ "$(stat device_allocs)" -eq 0 ] || fail "$1: $(stat device_allocs) device blocks reached the runtime"
    [ "$pa" -gt 0 ] || fail "$1: no pool chunk was allocated"
    [ "$(stat maps)" -eq "$pa" ] || fail "$1: $(stat maps) maps for $pa pool chunks"
}

stat() {
    local v
    v=$(awk -v k="$1" '$1 == k { print $2 }' "$STATS" 2>/dev/null)
    [ -n "$v" ] || fail "counter $1 missing from $STATS"
    echo "$v"
}
