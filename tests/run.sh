#!/bin/bash
# tests/run.sh — the test driver behind `make test`.
#
# Usage: tests/run.sh BUILD_DIR [BUILD_DIR...]   (a dir named */asan or */tsan is that variant)
#   For each build directory (variant = plain | asan | tsan):
#   1. every cmocka unit binary $BUILD/tests/unit/test_* (TAP output; each "ok"/"not ok" counts);
#      unit binaries run in every variant;
#   2. every case script tests/cases/*.sh whose "# variants:" header line names the variant
#      (no header = plain only).  A case runs as `bash CASE` with BUILD, VARIANT, ROOT exported,
#      exit 0 = pass, 77 = skip, anything else = fail.  Output goes to $BUILD/test-logs/.
# Ends with one line "N passed, M failed, K skipped"; exits 1 if anything failed or nothing ran.
# TEST_FILTER="a b": only the unit binaries and cases whose path contains one of the words.
# EMU="qemu-aarch64 -L SYSROOT": runs the unit binaries (and, through tests/lib.sh, the cases'
# programs) with that command in front (make test-aarch64).
# A unit binary or case still running after TEST_TIMEOUT seconds (300) is killed with exit 124;
# before that, where gdb is installed, its log gets a backtrace of every thread of every process
# it started (a hang that happens once in a hundred runs is then diagnosable from one CI log).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
pass=0; fail=0; skip=0
failed_names=()
CASE_TIMEOUT=${TEST_TIMEOUT:-300}
FILTER=${TEST_FILTER:-}
EMU=${EMU:-}
export EMU

descendants() { # $1 = pid: the pids of its children, grandchildren, ... (from /proc)
    local kid
    for kid in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        echo "$kid"; descendants "$kid"
    done
}

dump_threads() { # $1 = pid: a backtrace of every thread of it and of every process under it
    local p exe
    command -v gdb >/dev/null || { echo "(no gdb here: no backtraces)"; return; }
    for p in "$1" $(descendants "$1"); do
        exe=$(readlink /proc/"$p"/exe 2>/dev/null) || continue
        case "$exe" in */bash|*/sh|*/dash|*/sleep|*/timeout) continue;; esac
        echo "== backtraces of pid $p ($exe), hung at the time limit"
        timeout 60 gdb -p "$p" -batch -nx -ex "set pagination off" -ex "thread apply all bt" 2>&1 \
            | grep -E '^(Thread|#)'
    done
}

# run_watched LOG CMD...: CMD with its output in LOG; its exit status, or 124 when it ran past
# CASE_TIMEOUT (then LOG ends with the backtraces, and CMD and its processes are killed).
run_watched() {
    local log=$1 pid wd rc
    shift
    "$@" >"$log" 2>&1 &
    pid=$!
    (
        sleep "$CASE_TIMEOUT" &
        wait $!
        echo timeout >"$log.timed-out" # before the kill: the waiter reads it when woken
        echo "== run.sh: still running after ${CASE_TIMEOUT} s" >>"$log"
        dump_threads "$pid" >>"$log" 2>&1
        kill -KILL $(descendants "$pid") "$pid" 2>/dev/null
    ) &
    wd=$!
    { wait "$pid"; } 2>/dev/null; rc=$? # no "Killed" line from bash
    if [ -e "$log.timed-out" ]; then
        wait "$wd"; rm -f "$log.timed-out"; return 124
    fi
    local sleeper
    sleeper=$(descendants "$wd")
    kill "$wd" 2>/dev/null # the watchdog first: once its sleep ends it would go on
    kill $sleeper 2>/dev/null
    wait "$wd" 2>/dev/null
    return "$rc"
}

shown_lines() { # $1 = exit status, $2 = lines of a failure's log to show: all backtraces after a timeout
    if [ "$1" -eq 124 ]; then echo 600; else echo "$2"; fi
}

wanted() { # $1 = path: no filter, or it contains one of the filter's words
    local w
    [ -z "$FILTER" ] && return 0
    for w in $FILTER; do [[ "$1" == *"$w"* ]] && return 0; done
    return 1
}

run_unit() { # $1 = binary, $2 = variant
    local bin=$1 variant=$2 name log out rc okc notok skipc
    name="$variant:unit:$(basename "$bin")"
    log="$BUILD/test-logs/unit-$(basename "$bin").log"
    CMOCKA_MESSAGE_OUTPUT=TAP run_watched "$log" $EMU "$bin"; rc=$?
    # cmocka writes a skipped test as "not ok N # SKIP name": a skip, not a failure
    skipc=$(grep -cE '^(not )?ok [0-9]+ # SKIP' "$log")
    okc=$(grep -E '^ok [0-9]+' "$log" | grep -cv ' # SKIP')
    notok=$(grep -E '^not ok [0-9]+' "$log" | grep -cv ' # SKIP')
    if [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then notok=1; fi
    pass=$((pass + okc)); fail=$((fail + notok)); skip=$((skip + skipc))
    if [ "$notok" -gt 0 ]; then
        failed_names+=("$name")
        echo "FAIL $name ($okc ok, $notok not ok, exit $rc)"; sed 's/^/    /' "$log" | tail -"$(shown_lines "$rc" 40)"
    else
        echo "ok   $name ($okc tests$([ "$skipc" -gt 0 ] && echo ", $skipc skipped: $(grep -E ' # SKIP' "$log" | sed 's/.*# SKIP *//' | paste -sd' ')"))"
    fi
}

run_case() { # $1 = script, $2 = variant
    local script=$1 variant=$2 name log rc want
    want=$(sed -n 's/^# variants:[[:space:]]*//p' "$script" | head -1)
    [ -z "$want" ] && want=plain
    case " $want " in *" $variant "*) ;; *) return;; esac
    name="$variant:$(basename "$script" .sh)"
    log="$BUILD/test-logs/$(basename "$script" .sh).log"
    BUILD="$BUILD" VARIANT="$variant" ROOT="$ROOT" run_watched "$log" bash "$script"; rc=$?
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); echo "ok   $name"
    elif [ "$rc" -eq 77 ]; then skip=$((skip + 1)); echo "skip $name: $(tail -1 "$log")"
    else fail=$((fail + 1)); failed_names+=("$name"); echo "FAIL $name (exit $rc)"; sed 's/^/    /' "$log" | tail -"$(shown_lines "$rc" 60)"
    fi
}

for BUILD in "$@"; do # every argument must be a build directory (not a case name: TEST_FILTER)
    [ -d "$BUILD/obj" ] || { echo "tests/run.sh: '$BUILD' is not a build directory (cases are chosen with TEST_FILTER=\"word ...\")" >&2; exit 2; }
done
for BUILD in "$@"; do
    case "$BUILD" in */asan) variant=asan;; */tsan) variant=tsan;; *) variant=plain;; esac
    export BUILD
    mkdir -p "$BUILD/test-logs"
    echo "== $variant build ($BUILD)"
    for bin in "$BUILD"/tests/unit/test_*; do
        [ -x "$bin" ] || continue
        wanted "$bin" || continue
        run_unit "$bin" "$variant"
    done
    for script in tests/cases/*.sh; do
        [ -f "$script" ] || continue
        wanted "$script" || continue
        run_case "$script" "$variant"
    done
done

if [ "${#failed_names[@]}" -gt 0 ]; then
    echo "failed: ${failed_names[*]}"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
