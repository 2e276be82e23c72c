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
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
pass=0; fail=0; skip=0
failed_names=()
CASE_TIMEOUT=${TEST_TIMEOUT:-300}
FILTER=${TEST_FILTER:-}
EMU=${EMU:-}
export EMU

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
    CMOCKA_MESSAGE_OUTPUT=TAP timeout "$CASE_TIMEOUT" $EMU "$bin" >"$log" 2>&1; rc=$?
    # cmocka writes a skipped test as "not ok N # SKIP name": a skip, not a failure
    skipc=$(grep -cE '^(not )?ok [0-9]+ # SKIP' "$log")
    okc=$(grep -E '^ok [0-9]+' "$log" | grep -cv ' # SKIP')
    notok=$(grep -E '^not ok [0-9]+' "$log" | grep -cv ' # SKIP')
    if [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then notok=1; fi
    pass=$((pass + okc)); fail=$((fail + notok)); skip=$((skip + skipc))
    if [ "$notok" -gt 0 ]; then
        failed_names+=("$name")
        echo "FAIL $name ($okc ok, $notok not ok, exit $rc)"; sed 's/^/    /' "$log" | tail -40
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
    BUILD="$BUILD" VARIANT="$variant" ROOT="$ROOT" timeout "$CASE_TIMEOUT" bash "$script" >"$log" 2>&1; rc=$?
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); echo "ok   $name"
    elif [ "$rc" -eq 77 ]; then skip=$((skip + 1)); echo "skip $name: $(tail -1 "$log")"
    else fail=$((fail + 1)); failed_names+=("$name"); echo "FAIL $name (exit $rc)"; sed 's/^/    /' "$log" | tail -60
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
