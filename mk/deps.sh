#!/bin/sh
# mk/deps.sh — make sure the Debian packages the build needs are installed.
# As root: one `apt-get update`, then `apt-get install -y` of what is missing.
# Otherwise: print the exact command and fail, so the build stops with a clear message.
set -eu
PKGS="gcc g++ make libc6-dev binutils libunwind-dev libcjson-dev libcmocka-dev libdw-dev libelf-dev librsvg2-bin valgrind jq python3 python3-jsonschema"
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "npupool build: installing missing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing
    exit 0
fi
echo "npupool build: missing Debian packages:$missing" >&2
echo "npupool build: run:  sudo apt-get update && sudo apt-get install -y$missing" >&2
exit 1
