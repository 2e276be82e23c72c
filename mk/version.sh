#!/bin/sh
# mk/version.sh OUT — write npupool's version as a C header (#define NPUPOOL_VERSION "...") to OUT,
# only when it differs from what OUT holds (so an unchanged version rebuilds nothing).
#   in a git checkout of this tree: `git describe --tags` when a tag describes the commit ("v"
#     dropped), else VERSION + "-g" + the abbreviated commit; "-dirty" when files are modified;
#   elsewhere (a release tarball, a copied tree): the VERSION file;
#   neither: "unknown".
set -eu
out=$1
root=$(cd "$(dirname "$0")/.." && pwd -P)
base=$(cat "$root/VERSION" 2>/dev/null || echo unknown)
v=$base
if top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null) && [ "$(cd "$top" && pwd -P)" = "$root" ]; then
    if d=$(git -C "$root" describe --tags --dirty 2>/dev/null); then
        v=${d#v}
    elif d=$(git -C "$root" describe --always --dirty --abbrev=12 2>/dev/null); then
        v="$base-g$d"
    fi
fi
line="#define NPUPOOL_VERSION \"$v\""
if [ -f "$out" ] && [ "$(cat "$out")" = "$line" ]; then exit 0; fi
mkdir -p "$(dirname "$out")"
echo "$line" >"$out.tmp"
mv "$out.tmp" "$out"
