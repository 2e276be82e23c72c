#!/bin/sh
# mk/man.sh BUILD OUTDIR — write npupool.1 and npupool.7 into OUTDIR (make man: docs/man/).
#   npupool.1 = mk/npupool.1.in with @COMMANDS@ replaced by BUILD/tests/mangen (mk/mangen.c: the
#               command tables of tools/cli.h);
#   npupool.7 = mk/npupool.7.in with @ENVIRONMENT@ replaced by the option table of shim/options.c
#               (BUILD/tests/unit/test_shim_options --markdown, the README's table), as .TP items.
# Deterministic (no date, no version): tests/cases/docs_man.sh compares docs/man/ with a new run.
set -eu
build=$1
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/npupool-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
"$build/tests/mangen" >"$tmp/commands"
# "| `NAME` | `DEFAULT` | MEANING |" -> .TP / .B NAME / MEANING (default DEFAULT); `x` -> bold.
"$build/tests/unit/test_shim_options" --markdown | awk -F' [|] ' '
    NR <= 2 { next }
    {
        name = $1; sub(/^[|] /, "", name); gsub(/`/, "", name)
        dflt = $2; gsub(/`/, "", dflt)
        text = $3; sub(/ [|]$/, "", text)
        gsub(/\\/, "\\e", text); gsub(/-/, "\\-", text)
        while (match(text, /`[^`]*`/)) {
            text = substr(text, 1, RSTART - 1) "\\fB" substr(text, RSTART + 1, RLENGTH - 2) "\\fR" \
                   substr(text, RSTART + RLENGTH)
        }
        gsub(/-/, "\\-", dflt)
        print ".TP"
        print ".B " name
        print text (dflt == "(unset)" ? " (unset by default)" : " (default: " dflt ")")
    }' >"$tmp/environment"
fill() { # TEMPLATE MARK FILE
    awk -v mark="$2" -v file="$3" '$0 == mark { while ((getline l < file) > 0) print l; next } { print }' "$1"
}
mkdir -p "$out"
fill "$root/mk/npupool.1.in" @COMMANDS@ "$tmp/commands" >"$out/npupool.1"
fill "$root/mk/npupool.7.in" @ENVIRONMENT@ "$tmp/environment" >"$out/npupool.7"
