# variants: plain
# One formatting style: every C/C++ file of the tree is clean under the repository's .clang-format
# (clang-format 14: another major version formats differently, so the check is skipped there).
. "$ROOT/tests/lib.sh"
command -v clang-format >/dev/null || skip "clang-format is not installed"
clang-format --version | grep -q 'version 14\.' || skip "clang-format is not version 14: $(clang-format --version)"
cd "$ROOT"
files=$(git ls-files '*.c' '*.h' '*.cc' 2>/dev/null || find . -name '*.[ch]' -o -name '*.cc')
[ -n "$files" ] || fail "no source files found"
out=$(echo "$files" | xargs clang-format --dry-run -Werror 2>&1) || {
    echo "$out" | head -40
    fail "files are not formatted: run 'make format'"
}
exit 0
