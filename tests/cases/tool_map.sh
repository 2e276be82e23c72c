# variants: plain
# `npupool map` renders: the SVG converts with rsvg-convert into a PNG of the declared size,
# has one bar of 4 rows per pool, the largest free block outlined, the figures written on it;
# --html is one self-contained page (no external resource) with the same picture inline.
. "$ROOT/tests/lib.sh"
NP="$ROOT/$BUILD/npupool"
command -v rsvg-convert >/dev/null || skip "rsvg-convert not installed (librsvg2-bin)"
cd "$ROOT"
png_dims() { # PNG -> "W H" from the IHDR chunk, after checking the signature
    local sig
    sig=$(od -An -tx1 -N8 "$1" | tr -d ' \n')
    [ "$sig" = 89504e470d0a1a0a ] || fail "$1 is not a PNG"
    [ "$(dd if="$1" bs=1 skip=12 count=4 2>/dev/null)" = IHDR ] || fail "$1 has no IHDR"
    echo "$(( $(od -An -tu1 -j16 -N4 "$1" | awk '{print ($1*16777216)+($2*65536)+($3*256)+$4}') )) \
$(( $(od -An -tu1 -j20 -N4 "$1" | awk '{print ($1*16777216)+($2*65536)+($3*256)+$4}') ))"
}
for rep in report_basic report_oom report_two_devices; do
    svg="$TMPDIR_CASE/$rep.svg" png="$TMPDIR_CASE/$rep.png"
    "$NP" map "tests/fixtures/$rep.json" -o "$svg" || fail "map $rep"
    rsvg-convert -o "$png" "$svg" || fail "rsvg-convert $rep.svg"
    w=$(sed -n 's/^<svg[^>]* width="\([0-9]*\)".*/\1/p' "$svg"); h=$(sed -n 's/^<svg[^>]* height="\([0-9]*\)".*/\1/p' "$svg")
    read -r pw ph < <(png_dims "$png")
    [ "$pw" = "$w" ] && [ "$ph" = "$h" ] || fail "$rep: PNG is ${pw}x$ph, SVG says ${w}x$h"
    [ "$(wc -c <"$png")" -gt 10000 ] || fail "$rep: PNG suspiciously small"
    pools=$(jq '[.devices[] | select(.pool != null)] | length' "tests/fixtures/$rep.json")
    [ "$(grep -c '<g class="device"' "$svg")" -eq "$(jq '.devices | length' "tests/fixtures/$rep.json")" ] || fail "$rep: device groups"
    [ "$(grep -c 'stroke="#555" stroke-width="0.5"/>' "$svg")" -ge $((pools * 4)) ] || fail "$rep: expected 4 rows per pool"
    [ "$(grep -c 'class="largest"' "$svg")" -ge "$pools" ] || fail "$rep: largest free block not outlined"
    frag=$(jq -r '.devices[0].pool.fragmentation * 1000 | round / 10' "tests/fixtures/$rep.json")
    grep -q "fragmentation ${frag}%" "$svg" || grep -q "fragmentation ${frag}.0%" "$svg" || fail "$rep: fragmentation $frag% not written"
done
# the oom puzzle: 4 free blocks of 1 GiB between live ones -> 4 free runs in the first rows
n=$(grep -c 'class="free"' "$TMPDIR_CASE/report_oom.svg")
[ "$n" -eq 4 ] || fail "oom map: expected 4 free bands, got $n"
grep -q 'largest free block 1.0 GiB, fragmentation 75.0%' "$TMPDIR_CASE/report_oom.svg" || fail "oom map figures"
# live_map colouring: by class there are green (1-16 MiB) cells, by site the top site's colour
grep -q 'fill="#59a14f"' "$TMPDIR_CASE/report_two_devices.svg" || fail "class colours missing"
"$NP" map tests/fixtures/report_two_devices.json --by site -o "$TMPDIR_CASE/site.svg" || fail "map --by site"
grep -q '>alloc_kv_cache (kv.c:12) &lt; main<' "$TMPDIR_CASE/site.svg" || fail "site legend missing"
# html
"$NP" map tests/fixtures/report_basic.json --html -o "$TMPDIR_CASE/map.html" || fail "map --html"
grep -q '^<!DOCTYPE html>' "$TMPDIR_CASE/map.html" || fail "not html"
grep -q '<svg xmlns=' "$TMPDIR_CASE/map.html" || fail "svg not inline"
grep -Eq '<(script|link|img)[ >]|src=|url\(' "$TMPDIR_CASE/map.html" && fail "html refers to external resources"
sed -n '/<svg/,/<\/svg>/p' "$TMPDIR_CASE/map.html" >"$TMPDIR_CASE/from_html.svg"
rsvg-convert -o "$TMPDIR_CASE/html.png" "$TMPDIR_CASE/from_html.svg" || fail "svg inside the html does not render"
"$NP" map tests/fixtures/report_basic.json -o "$TMPDIR_CASE/auto.html" && grep -q '^<!DOCTYPE html>' "$TMPDIR_CASE/auto.html" || fail ".html extension"
exit 0
