# variants: plain
# mk/deps.sh finds what the build needs by asking the compiler, and says what is missing with the
# Debian and the openEuler package of each piece.  MK_DEPS_BREAK makes chosen probes fail for real
# (the compiler is asked for a header that cannot exist); MK_DEPS_NO_INSTALL keeps a root run from
# installing anything.
. "$ROOT/tests/lib.sh"
cd "$ROOT"
export MK_DEPS_NO_INSTALL=1

# Everything here: both modes pass.
sh mk/deps.sh build || fail "mk/deps.sh build fails on this machine"
sh mk/deps.sh test || fail "mk/deps.sh test fails on this machine"

expect_missing() { # MODE BREAK DEBIAN OPENEULER
    local out rc
    out=$(MK_DEPS_BREAK="$2" sh mk/deps.sh "$1" 2>&1) && fail "mode $1 with $2 missing exited 0"
    echo "$out"
    [ "$(echo "$out" | grep -c '^npupool build: ')" -eq "$(echo "$out" | wc -l)" ] ||
        fail "every line of the message starts 'npupool build: '"
    echo "$out" | grep -q "sudo apt-get install -y .*$3" || fail "no apt-get command naming $3"
    echo "$out" | grep -q "sudo dnf install -y .*$4" || fail "no dnf command naming $4"
    case $2 in
    *" "*) ;; # several pieces: one line each
    *) echo "$out" | grep -q -- "- .*Debian $3, openEuler $4\$" || fail "no line pairing $3 with $4" ;;
    esac
}
expect_missing build cjson libcjson-dev cjson-devel
expect_missing build libunwind libunwind-dev libunwind-devel
expect_missing build elfutils "libdw-dev libelf-dev" "elfutils-devel elfutils-libelf-devel"
expect_missing test cmocka libcmocka-dev libcmocka-devel
expect_missing test "jq rsvg" "jq librsvg2-bin" "jq librsvg2-tools"
expect_missing test jsonschema python3-jsonschema python3-jsonschema
# An optional piece (promtool) missing: a note naming its packages, and no failure.
out=$(MK_DEPS_BREAK=promtool sh mk/deps.sh test 2>&1) || fail "mode test failed for a missing optional piece: $out"
echo "$out"
echo "$out" | grep -q "^npupool build: optional, not found: promtool .*Debian prometheus, openEuler golang-github-prometheus" ||
    fail "no note for the missing optional promtool"
# The cross build's message names the arm64 packages.
out=$(DEPS_ARCH=arm64 MK_DEPS_BREAK=cjson sh mk/deps.sh build 2>&1) && fail "cross probe passed"
echo "$out" | grep -q "apt-get install -y libcjson-dev:arm64" || fail "no arm64 package: $out"

# `make` needs no test tool: breaking every test-only piece leaves the build mode content.
MK_DEPS_BREAK="cmocka cxx python3 jsonschema jq rsvg valgrind" sh mk/deps.sh build ||
    fail "the build mode probed a test-only piece"

# The bench mode's pieces are optional: missing, they are named with their packages, and the
# script still exits 0 (bench_peers skips them).
out=$(MK_DEPS_BREAK="mimalloc jemalloc tcmalloc" sh mk/deps.sh bench 2>&1) ||
    fail "the bench mode failed over optional pieces: $out"
echo "$out"
echo "$out" | grep -q "sudo apt-get install -y libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4" ||
    fail "the bench mode did not name the Debian packages"
echo "$out" | grep -q "skips them" || fail "the bench mode did not say that bench_peers skips them"

# make stops before compiling anything, with the message as its output.
out=$(MK_DEPS_BREAK=cjson make --no-print-directory BUILD="$TMPDIR_CASE/b" all 2>&1) &&
    fail "make built without cJSON"
echo "$out"
echo "$out" | grep -q "cjson-devel" || fail "make did not print the message"
[ -d "$TMPDIR_CASE/b/obj" ] && fail "make compiled something before the probe failed"
exit 0
