# variants: plain
# The manual pages in docs/man/ are what `make man` writes from the command tables and the option
# table (so they say what the parser and the library accept), and roff reads them without a
# warning.
. "$ROOT/tests/lib.sh"
cd "$ROOT"
[ -x "$BUILD/tests/mangen" ] || fail "$BUILD/tests/mangen is not built"
sh mk/man.sh "$BUILD" "$TMPDIR_CASE/man" || fail "mk/man.sh failed"
for page in npupool.1 npupool.7; do
    diff -u "docs/man/$page" "$TMPDIR_CASE/man/$page" || fail "docs/man/$page is stale: run 'make man'"
done
# every command and every variable is in its page
for cmd in $("$BUILD/npupool" help | sed -n 's/^  \([a-z]*\).*/\1/p' | grep -v '^help$'); do
    grep -qx ".SS $cmd" docs/man/npupool.1 || fail "npupool.1 has no section for $cmd"
done
for var in $(sed -n 's/^| `\(NPUPOOL_[A-Z_]*\)`.*/\1/p' README.md); do
    grep -qx ".B $var" docs/man/npupool.7 || fail "npupool.7 does not describe $var"
done
if command -v groff >/dev/null; then
    for page in npupool.1 npupool.7; do
        out=$(groff -man -Tutf8 -ww -z "docs/man/$page" 2>&1)
        [ -z "$out" ] || fail "groff warns about $page: $out"
    done
fi
exit 0
