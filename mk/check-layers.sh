#!/bin/sh
# mk/check-layers.sh BUILD — prove that dependencies between the layers point one way, from the
# built objects' symbol tables (nm): every undefined symbol of an object of layer L that some
# other layer defines must be defined by a layer L may use.  Weak references count too.
#   base    -> (nothing)
#   pool    -> base
#   ledger  -> base
#   report  -> ledger pool base
#   shim    -> report ledger pool base
#   tools   -> pool base
# Only the objects of the sources present now are read (a stale object of a removed file is not).
# The shim's exported interposers of libc's and the runtime's own names (dlsym, dlvsym, acl*) are
# not a layer's symbols: a call to dlsym means libc's.
# Prints one line per violation and exits 1 when there is any; "layers ok (N objects)" otherwise.
set -eu
BUILD=${1:-build}
OBJ=$BUILD/obj
allowed() {
    case $1 in
    base) echo "" ;;
    pool) echo "base" ;;
    ledger) echo "base" ;;
    report) echo "ledger pool base" ;;
    shim) echo "report ledger pool base" ;;
    tools) echo "pool base" ;;
    esac
}
LAYERS="base pool ledger report shim tools"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
objects() { # the objects of layer $1's current sources
    for c in "$1"/*.c; do
        o="$OBJ/$1/$(basename "$c" .c).o"
        [ -f "$o" ] || { echo "check-layers: $o is not built (run make)" >&2; exit 1; }
        echo "$o"
    done
}
# bench/ is no layer: nothing may use it (its objects are built in the plain build only).
for o in "$OBJ"/bench/*.o; do
    [ -f "$o" ] && nm --defined-only -g "$o" | awk 'NF == 3 && $3 != "main" { print $3, "bench" }' >>"$tmp/defs"
done
for l in $LAYERS; do
    for o in $(objects "$l"); do
        n=$((n + 1))
        nm --defined-only -g "$o" |
            awk -v l="$l" 'NF == 3 && $3 !~ /^(dlsym|dlvsym|acl.*)$/ { print $3, l }' >>"$tmp/defs"
    done
done
sort -u "$tmp/defs" >"$tmp/defs.sorted"
bad=0
for l in $LAYERS; do
    ok=" $l $(allowed "$l") "
    for o in $(objects "$l"); do
        nm -u "$o" | awk '{ print $NF }' | sort -u >"$tmp/undef"
        join "$tmp/undef" "$tmp/defs.sorted" >"$tmp/uses" || true
        while read -r sym owner; do
            case "$ok" in
            *" $owner "*) ;;
            *) echo "check-layers: $o ($l) uses $sym, defined in $owner/: $l may use only:$(allowed "$l")"; bad=1 ;;
            esac
        done <"$tmp/uses"
    done
done
[ "$bad" -eq 0 ] || exit 1
echo "layers ok ($n objects)"
