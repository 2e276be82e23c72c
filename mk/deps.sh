#!/bin/sh
# mk/deps.sh MODE — is everything MODE needs here?  MODE: build (what `make` compiles and links
# against), test (what `make test` adds: cmocka, a C++ compiler and the tools the test cases run),
# bench (what `make bench` can use but does without: the third-party allocators bench_peers
# dlopen()s, probed by loading them).
#
# Each piece is found by asking the compiler (a header it must include, a library it must link)
# or by looking up a command, never by asking a package manager: any distribution, any prefix,
# any user.  The compiler is $CC ($CXX for C++) with $EXTRA_CFLAGS and $EXTRA_LDFLAGS, as the
# build uses them, so headers and libraries in other places are found the way the build finds
# them.  DEPS_ARCH=arm64 (make cross-aarch64) names the Debian packages of that architecture.
#
# When something is missing:
#   - as root on Debian/Ubuntu (apt-get), the Debian packages are installed (one apt-get update
#     first) and the probes run again;
#   - otherwise one message names each missing piece with its Debian and its openEuler
#     (EulerOS, CentOS, Fedora) package, the two install commands, and the script exits 1.
# Optional pieces (OPTIONAL: promtool, for tests/cases/report_metrics.sh; every piece of the bench
# mode) are installed the same way as root on Debian, but a missing one, or an install that
# fails, only costs a note naming its packages: the case that uses it skips that check, the
# benchmark skips that allocator, and the script exits 0.
# Tests: MK_DEPS_BREAK="piece ..." makes those pieces' probes fail for real (the compiler is asked
# for a header that cannot exist); MK_DEPS_NO_INSTALL=1 never installs.
# Package names: Debian's checked against bookworm; the openEuler ones follow its (Fedora's)
# naming, checked against Fedora/RHEL lists, not on an openEuler machine.
set -eu
MODE=${1:-build}
CC=${CC:-cc}
CXX=${CXX:-c++}
AR=${AR:-ar}
ARCH=${DEPS_ARCH:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/npupool-deps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

OPTIONAL=""
case $MODE in
build) PIECES="cc libunwind cjson elfutils binutils" ;;
test) PIECES="cmocka cxx python3 jsonschema pydev jq rsvg valgrind" OPTIONAL="promtool" ;;
emu) PIECES="qemu" ;;
bench) PIECES="" OPTIONAL="mimalloc jemalloc tcmalloc" ;;
*) echo "mk/deps.sh: unknown mode '$MODE' (build, test, emu or bench)" >&2; exit 2 ;;
esac

# piece -> what it is | Debian packages | openEuler packages
about() {
    case $1 in
    cc) echo "a C compiler and the C library headers ($CC)|gcc libc6-dev|gcc glibc-devel" ;;
    libunwind) echo "libunwind headers (libunwind.h)|libunwind-dev|libunwind-devel" ;;
    cjson) echo "cJSON (cjson/cJSON.h, -lcjson)|libcjson-dev|cjson-devel" ;;
    elfutils) echo "elfutils libdw and libelf (elfutils/libdwfl.h, -ldw -lelf)|libdw-dev libelf-dev|elfutils-devel elfutils-libelf-devel" ;;
    binutils) echo "binutils ($AR, nm, readelf)|binutils|binutils" ;;
    cmocka) echo "cmocka (cmocka.h, -lcmocka)|libcmocka-dev|libcmocka-devel" ;;
    cxx) echo "a C++ compiler ($CXX)|g++|gcc-c++" ;;
    python3) echo "python3|python3|python3" ;;
    jsonschema) echo "python3's jsonschema module|python3-jsonschema|python3-jsonschema" ;;
    pydev) echo "python3's C headers (Python.h; tests/cases/python_layout.sh)|python3-dev|python3-devel" ;;
    jq) echo "jq|jq|jq" ;;
    rsvg) echo "rsvg-convert|librsvg2-bin|librsvg2-tools" ;;
    valgrind) echo "valgrind|valgrind|valgrind" ;;
    promtool) echo "promtool (checks the NPUPOOL_METRICS file)|prometheus|golang-github-prometheus" ;;
    qemu) echo "qemu-aarch64 (user-mode emulation)|qemu-user|qemu-user" ;;
    mimalloc) echo "mimalloc (libmimalloc.so.2, for bench_peers)|libmimalloc2.0|mimalloc" ;;
    jemalloc) echo "jemalloc (libjemalloc.so.2, for bench_peers)|libjemalloc2|jemalloc" ;;
    tcmalloc) echo "tcmalloc (libtcmalloc_minimal.so.4, for bench_peers)|libtcmalloc-minimal4|gperftools-libs" ;;
    esac
}

# The Debian packages of a piece for DEPS_ARCH (cross compilers, libraries of that architecture).
debian_pkgs() {
    pkgs=$(about "$1" | cut -d'|' -f2)
    [ -n "$ARCH" ] || { echo "$pkgs"; return; }
    case $1 in
    cc) echo "gcc-aarch64-linux-gnu libc6-dev-$ARCH-cross" ;;
    cxx) echo "g++-aarch64-linux-gnu" ;;
    binutils) echo "binutils binutils-aarch64-linux-gnu" ;;
    libunwind | cjson | elfutils | cmocka) for p in $pkgs; do printf '%s:%s ' "$p" "$ARCH"; done ;;
    *) echo "$pkgs" ;;
    esac
}

broken() { case " ${MK_DEPS_BREAK:-} " in *" $1 "*) return 0 ;; esac; return 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# compile PIECE "HEADER..." "LIBS": a program including the headers, linked with the libraries.
compile() {
    : >"$tmp/p.c"
    broken "$1" && echo "#include <npupool-deps-break/$1.h>" >>"$tmp/p.c"
    for h in $2; do echo "#include <$h>" >>"$tmp/p.c"; done
    echo 'int main(void) { return 0; }' >>"$tmp/p.c"
    # shellcheck disable=SC2086 # flags are word lists
    $CC ${EXTRA_CFLAGS:-} -o "$tmp/p" "$tmp/p.c" ${EXTRA_LDFLAGS:-} $3 >"$tmp/log" 2>&1
}

# loadable PIECE SONAME: a program can dlopen() the library as bench_peers does (with the static
# TLS room bench_peers asks glibc for: jemalloc's initial-exec TLS does not fit the default).
loadable() {
    broken "$1" && return 1
    printf '#include <dlfcn.h>\nint main(void) { return !dlopen("%s", RTLD_NOW | RTLD_LOCAL); }\n' \
        "$2" >"$tmp/p.c"
    # shellcheck disable=SC2086 # flags are word lists
    $CC ${EXTRA_CFLAGS:-} -o "$tmp/p" "$tmp/p.c" ${EXTRA_LDFLAGS:-} -ldl >"$tmp/log" 2>&1 &&
        GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 "$tmp/p"
}

probe() {
    case $1 in
    cc) compile cc "stdio.h" "" ;;
    libunwind) compile libunwind "libunwind.h" "" ;;
    cjson) compile cjson "cjson/cJSON.h" "-lcjson" ;;
    elfutils) compile elfutils "elfutils/libdwfl.h" "-ldw -lelf" ;;
    cmocka) compile cmocka "stdarg.h stddef.h stdint.h setjmp.h cmocka.h" "-lcmocka" ;;
    cxx)
        broken cxx && return 1
        echo 'int main() { return 0; }' | $CXX -x c++ -o "$tmp/p" - >"$tmp/log" 2>&1
        ;;
    binutils) ! broken binutils && have "$AR" && have nm && have readelf ;;
    jsonschema) # for the interpreter the cases use (tests/programs/report_case_lib.sh)
        py=python3
        [ -x /usr/bin/python3 ] && py=/usr/bin/python3
        ! broken jsonschema && "$py" -c 'import jsonschema' 2>/dev/null
        ;;
    pydev) # the headers of the interpreter the cases use, with its internal ones
        py=python3
        [ -x /usr/bin/python3 ] && py=/usr/bin/python3
        inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null) &&
            ! broken pydev && [ -f "$inc/Python.h" ] && [ -d "$inc/internal" ]
        ;;
    rsvg) ! broken rsvg && have rsvg-convert ;;
    qemu) ! broken qemu && { have qemu-aarch64 || have qemu-aarch64-static; } ;;
    mimalloc) loadable mimalloc libmimalloc.so.2 ;;
    jemalloc) loadable jemalloc libjemalloc.so.2 ;;
    tcmalloc) loadable tcmalloc libtcmalloc_minimal.so.4 ;;
    *) ! broken "$1" && have "$1" ;;
    esac
}

missing_pieces() { # $1: the pieces (default: the required ones)
    out=""
    for p in ${1-$PIECES}; do
        if ! probe "$p"; then
            out="$out $p"
            [ "$p" = cc ] && break # nothing else can be probed without a compiler
        fi
    done
    echo "$out"
}

missing=$(missing_pieces)
absent=$(missing_pieces "$OPTIONAL") # optional pieces not found

# A note per optional piece still absent, and how to add them (never an error).
note_absent() {
    absent=$(missing_pieces "$OPTIONAL")
    [ -n "$absent" ] || return 0
    case $MODE in
    bench) who="npupool bench" skip="bench_peers skips them (\"skipped: not installed\")" ;;
    *) who="npupool build" skip="the tests that use them skip that check and say so" ;;
    esac
    adeb="" arpm=""
    for p in $absent; do
        echo "$who: optional, not found: $(about "$p" | cut -d'|' -f1): Debian $(debian_pkgs "$p"), openEuler $(about "$p" | cut -d'|' -f3)"
        adeb="$adeb $(debian_pkgs "$p")"
        arpm="$arpm $(about "$p" | cut -d'|' -f3)"
    done
    echo "$who: $skip; to include them:"
    echo "$who:   Debian/Ubuntu: sudo apt-get install -y $(echo $adeb)"
    echo "$who:   openEuler/EulerOS/CentOS: sudo dnf install -y $(echo $arpm)"
}
if [ -z "$missing" ] && [ -z "$absent" ]; then exit 0; fi

# The Debian and openEuler packages of $missing (and $absent: installed too, never demanded), one
# space between words.
packages() {
    deb=""
    rpm=""
    for p in $missing $absent; do
        deb="$deb $(debian_pkgs "$p")"
        rpm="$rpm $(about "$p" | cut -d'|' -f3)"
    done
    deb=$(echo $deb)
    rpm=$(echo $rpm)
}
packages

# As root on Debian: install, probe again; a second round for what only a compiler installed in
# the first could probe (a cross build starts without its compiler).
if [ "$(id -u)" = 0 ] && [ -z "${MK_DEPS_NO_INSTALL:-}" ] && have apt-get && have dpkg; then
    export DEBIAN_FRONTEND=noninteractive
    if [ -n "$ARCH" ] && ! dpkg --print-foreign-architectures | grep -qx "$ARCH"; then
        dpkg --add-architecture "$ARCH"
    fi
    apt-get update -qq || [ -z "$missing" ]
    for round in 1 2; do
        echo "npupool build: installing missing Debian packages: $deb"
        if [ -n "$missing" ]; then
            # shellcheck disable=SC2086
            apt-get install -y -qq --no-install-recommends $deb
        else # optional pieces only: a failed install leaves them out
            # shellcheck disable=SC2086
            apt-get install -y -qq --no-install-recommends $deb ||
                echo "npupool build: installing the optional packages failed; going on without them"
        fi
        missing=$(missing_pieces)
        [ -z "$missing" ] && { note_absent; exit 0; }
        absent=""
        packages
    done
fi

[ -z "$missing" ] && { note_absent; exit 0; }
absent=""
packages

case $MODE in
build) what="\`make\`" ;;
test) what="\`make test\`" ;;
emu) what="\`make test-aarch64\`" ;;
esac
{
    echo "npupool build: $what needs what was not found here:"
    for p in $missing; do
        echo "npupool build:   - $(about "$p" | cut -d'|' -f1): Debian $(debian_pkgs "$p" | sed 's/ *$//'), openEuler $(about "$p" | cut -d'|' -f3)"
    done
    echo "npupool build: Debian/Ubuntu:           sudo apt-get install -y $deb"
    if [ -n "$ARCH" ]; then
        echo "npupool build:   (first: sudo dpkg --add-architecture $ARCH && sudo apt-get update)"
        echo "npupool build: openEuler/EulerOS/CentOS: no cross packages; build natively on an aarch64 host"
    else
        echo "npupool build: openEuler/EulerOS/CentOS: sudo dnf install -y $rpm"
    fi
    echo "npupool build: (probed with CC=$CC; for headers or libraries elsewhere give EXTRA_CFLAGS=-I... EXTRA_LDFLAGS=-L...)"
} >&2
exit 1
