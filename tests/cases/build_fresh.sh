# variants: plain
# A fresh copy of the tree builds as a user who is not root, with the build dependencies only:
#   - the copy holds the tree's files and nothing built (no build/, no .git: the version comes
#     from the VERSION file);
#   - it runs as uid 65534 (nobody) when the test runs as root, else as the user running it;
#   - PATH holds a compiler, binutils, make and the shell utilities, nothing else (no python3,
#     jq, valgrind, rsvg-convert, C++ compiler), and the test-only libraries' probes are made to
#     fail (MK_DEPS_BREAK): `make` must build the library and the command anyway, and `make
#     tests` must stop at once, naming cmocka's Debian and openEuler packages.
# The library built there then works in front of a test program.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
cd "$ROOT"
command -v git >/dev/null || skip "git is needed to list the tree's files"
chmod 755 "$TMPDIR_CASE"
src="$TMPDIR_CASE/src"
mkdir "$src"
git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - 2>/dev/null | tar -xf - -C "$src" ||
    fail "cannot copy the tree"
[ -f "$src/Makefile" ] && [ ! -e "$src/build" ] || fail "the copy is not a clean tree"

# The commands the build may use, alone on PATH.
bin="$TMPDIR_CASE/bin"
mkdir "$bin"
cc_path=$(command -v "${CC:-cc}")
for tool in sh bash make ar as ld nm readelf ranlib awk sed grep cut tr sort uniq head tail wc cat \
    mkdir rm mv cp ln touch chmod dirname basename mktemp id env find xargs printf echo test true \
    expr sleep date uname; do
    t=$(command -v "$tool") && ln -s "$t" "$bin/$tool"
done
ln -s "$cc_path" "$bin/cc"
for t in python3 jq valgrind rsvg-convert g++ c++; do
    [ -e "$bin/$t" ] && fail "$t must not be on the restricted PATH"
done
TEST_ONLY="cmocka cxx python3 jsonschema jq rsvg valgrind"

if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is needed to build as another user"
    chown -R 65534:65534 "$src"
    as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
    who="uid 65534"
else
    as_user() { "$@"; }
    who="uid $(id -u)"
fi
echo "building as $who with PATH=$bin"
as_user env -i PATH="$bin" HOME="$src" MK_DEPS_BREAK="$TEST_ONLY" MK_DEPS_NO_INSTALL=1 \
    make -C "$src" -j2 >"$TMPDIR_CASE/make.log" 2>&1 || { tail -30 "$TMPDIR_CASE/make.log"; fail "make failed as $who"; }
for f in build/libnpupool.so build/npupool build/fakeacl/libascendcl.so; do
    [ -f "$src/$f" ] || fail "make did not build $f"
done
[ -e "$src/build/tests" ] || [ -e "$src/build/obj/tests/unit" ] && fail "make built test programs"
[ "$(command stat -c %u "$src/build/libnpupool.so")" = "$(as_user id -u)" ] || fail "not built by $who"
"$src/build/npupool" --version | head -1 | grep -qx "npupool $(cat VERSION)" ||
    fail "the copy's version is not the VERSION file's: $("$src/build/npupool" --version | head -1)"

out=$(as_user env -i PATH="$bin" HOME="$src" MK_DEPS_BREAK="$TEST_ONLY" MK_DEPS_NO_INSTALL=1 \
    make -C "$src" tests 2>&1) && fail "make tests went on without cmocka"
echo "$out" | grep -q "libcmocka-dev" && echo "$out" | grep -q "libcmocka-devel" ||
    fail "make tests did not name cmocka's packages: $out"
[ -e "$src/build/obj/tests/unit" ] || [ -e "$src/build/obj/tests/programs" ] &&
    fail "make tests compiled a test before the probe failed"

# The library built in the copy, in front of a test program of this build.
(cd "$TMPDIR_CASE" && NPUPOOL_REPORT="$TMPDIR_CASE/fresh-%n.json" LD_PRELOAD="${SANRT:+$SANRT }$src/build/libnpupool.so" \
    "$PROGS/leaks" >/dev/null 2>&1) || fail "leaks failed in front of the fresh library"
[ -n "$(reports 'fresh-*.json')" ] || fail "the fresh library wrote no report"
exit 0
