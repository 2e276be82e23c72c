#!/bin/bash
# variants: plain asan tsan
# tests/cases/fakeacl_abi.sh — the fake runtime's link-level contract and its FAKEACL_STATS file.
#
# Checks, on $BUILD/fakeacl/libascendcl.so:
#   - soname libascendcl.so, no symbol versioning (no version script);
#   - it exports, as global default-visibility functions, exactly the acl* entry points declared in
#     include/acl/acl.h, plus fakeacl_* test control, and no fa_* internals;
#   - it never calls its own exported functions through the PLT (an LD_PRELOAD interposer would
#     count such a call as a second call by the application);
#   - FAKEACL_STATS=dir/s.%p gives a file of `name value` lines a shell can read, for a program run
#     from the shell (the unit test binary in --probe mode).
set -eu
: "${BUILD:?}" "${ROOT:?}"
lib="$BUILD/fakeacl/libascendcl.so"
probe="$BUILD/tests/unit/test_fakeacl"
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$lib" ] || fail "$lib not built"
command -v readelf >/dev/null && command -v objdump >/dev/null || { echo "binutils missing"; exit 77; }

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libascendcl.so ] || fail "soname is '$soname'"
readelf -d "$lib" | grep -q VERDEF && fail "the library defines symbol versions"

want=$(grep -oE '^aclError (acl[A-Za-z0-9]+)\(' "$ROOT/include/acl/acl.h" | sed -E 's/^aclError (acl[A-Za-z0-9]+)\(/\1/' | sort -u)
[ "$(echo "$want" | wc -l)" -ge 25 ] || fail "could not read the prototypes of acl.h"
# readelf --dyn-syms: Num Value Size Type Bind Vis Ndx Name
exported=$(readelf -W --dyn-syms "$lib" | awk '$7 != "UND" && $4 == "FUNC" && $5 == "GLOBAL" && $6 == "DEFAULT" {print $8}')
got=$(echo "$exported" | grep -E '^acl' | sort -u)
if [ "$got" != "$want" ]; then
    diff <(echo "$want") <(echo "$got") || true
    fail "exported acl* functions differ from include/acl/acl.h (< header, > library)"
fi
echo "$exported" | grep -q '^fakeacl_count$' || fail "fakeacl_count is not exported"
if readelf -W --dyn-syms "$lib" | awk '$7 != "UND" {print $8}' | grep -qE '^fa_'; then
    fail "internal fa_* symbols are exported"
fi
self_calls=$(objdump -d "$lib" | grep -E '(call|jmp)[^<]*<(acl|fakeacl_)[A-Za-z0-9_]*@plt>' || true)
[ -z "$self_calls" ] || { echo "$self_calls"; fail "the library calls its own exports through the PLT"; }

[ -x "$probe" ] || fail "$probe not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FAKEACL_STATS="$tmp/s.%p" FAKEACL_HBM_BYTES=1G "$probe" --probe >"$tmp/out" 2>"$tmp/err" &
pid=$!
wait "$pid" || fail "probe exited with $?"
stats="$tmp/s.$pid"
[ -f "$stats" ] || { ls -l "$tmp"; fail "no stats file $stats"; }
bad=$(grep -vcE '^[A-Za-z0-9_]+ [0-9]+$' "$stats" || true)
[ "$bad" = 0 ] || fail "$bad malformed lines in $stats"
val() { awk -v k="$1" '$1 == k {print $2}' "$stats"; }
[ "$(val aclrtMalloc)" = 6 ] || fail "aclrtMalloc = $(val aclrtMalloc), want 6"
[ "$(val device_allocs)" = 6 ] || fail "device_allocs = $(val device_allocs), want 6"
[ "$(val budget_dev0)" = 1073741824 ] || fail "budget_dev0 = $(val budget_dev0)"
[ "$(val aclrtFree)" = 0 ] || fail "aclrtFree = $(val aclrtFree)"
[ ! -s "$tmp/err" ] || { cat "$tmp/err"; fail "the probe wrote to stderr"; }
grep -q fakeacl "$tmp/out" && fail "the fake wrote to stdout"
echo "fakeacl ABI and stats file ok ($(echo "$want" | wc -l) entry points)"
