# variants: plain asan
# `npupool recover` on files that are not whole ledger files: cut at the header, inside a chunk,
# one byte before the end of the chunks; a chunk header with one bit flipped; another format;
# the other byte order; nothing, zeros, random bytes, a report, a directory, no file.  Each exits 2
# with one message naming the file (and the offset), never crashes; --salvage writes the report
# of what comes before the damage (exit 1).  A record slot with a bit flipped is torn, not
# damage (exit 0).  -o onto a FIFO writes into it.  Also replays the fuzzer's seeds and
# regression inputs (tests/fixtures/fuzz/ledger_*).
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
command -v python3 >/dev/null || skip "python3 is not installed"
unset NPUPOOL_SUPPRESS
NP="$ABS_BUILD/npupool"
cd "$TMPDIR_CASE"
NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/good.ledger" run_preloaded postmortem kill \
    >/dev/null 2>&1
[ -f good.ledger ] || fail "no ledger file to damage"
"$NP" recover good.ledger -o good.json 2>/dev/null || fail "the undamaged file is refused"
# -o onto something that is not a regular file writes into it (a rename would replace it)
mkfifo fifo
cat fifo >fifo.out &
"$NP" recover good.ledger -o fifo 2>/dev/null || fail "recover -o FIFO"
wait
[ -p fifo ] && cmp -s fifo.out good.json || fail "recover -o FIFO did not write into the FIFO"
# where things are: the header's size and chunk_end, the second chunk, a committed record slot
read -r hsize end slot < <(python3 - <<'PY'
import struct
b = open("good.ledger", "rb").read()
hsize = struct.unpack_from("<Q", b, 8)[0]
end = struct.unpack_from("<Q", b, 15984)[0]  # offsetof(lfmt_header_t, chunk_end)
off, slot = hsize, 0
while off < end and not slot:
    magic, kind = struct.unpack_from("<IH", b, off)
    size = struct.unpack_from("<Q", b, off + 8)[0]
    if kind == 2:
        for s in range(off + 64, off + size, 64):
            if struct.unpack_from("<Q", b, s + 56)[0] > 1:
                slot = s
                break
    off += size
print(hsize, end, slot)
PY
)
[ "$slot" -gt 0 ] || fail "no committed slot found"
refuse() { # LABEL FILE WORDS: exit 2, one message naming the file and containing WORDS
    local label=$1 file=$2 words=$3 rc
    "$NP" recover "$file" -o out.json >/dev/null 2>err
    rc=$?
    [ "$rc" -eq 2 ] || { cat err; fail "$label: exit $rc, expected 2"; }
    [ "$(wc -l <err)" -eq 1 ] && grep -q "$file" err && grep -q "$words" err \
        || { cat err; fail "$label: not one message naming $file with '$words'"; }
}
for cut in 0 3 100 $((hsize - 1)); do
    head -c "$cut" good.ledger >cut.ledger
    refuse "cut at $cut" cut.ledger "ledger file\|truncated"
done
for cut in "$hsize" $((hsize + 1000)) $(((hsize + end) / 2)) $((end - 1)); do
    head -c "$cut" good.ledger >cut.ledger
    refuse "cut at $cut" cut.ledger "truncated: $cut bytes, its chunks end at $end"
    "$NP" recover cut.ledger --salvage -o salvaged.json 2>err
    [ $? -eq 1 ] || { cat err; fail "--salvage on a file cut at $cut: expected exit 1"; }
    jq -e '.trigger == "recovered" and (.recovered.damaged | test("truncated"))' salvaged.json >/dev/null \
        || fail "--salvage at $cut: no report saying where"
done
head -c "$end" good.ledger >trimmed.ledger # the reserved zeros after the chunks hold nothing
"$NP" recover trimmed.ledger -o out.json 2>/dev/null || fail "a file cut after its chunks is refused"
patch() { # OUT OFFSET BYTE(decimal xor)
    python3 -c "
import sys
b = bytearray(open('good.ledger', 'rb').read())
b[$2] ^= $3
open('$1', 'wb').write(b)"
}
patch flipped.ledger $((hsize + 9)) 1
refuse "a bit of a chunk header" flipped.ledger "offset $hsize: a chunk header's check word differs"
"$NP" recover flipped.ledger --salvage -o salvaged.json 2>/dev/null
[ $? -eq 1 ] || fail "--salvage on a damaged chunk header"
patch format.ledger 79 3
refuse "the previous format" format.ledger "format \"npupool-ledger/1\": this npupool reads npupool-ledger/2"
python3 -c "
b = bytearray(open('good.ledger', 'rb').read()); b[0:4] = b[0:4][::-1]; open('swapped.ledger', 'wb').write(b)"
refuse "the other byte order" swapped.ledger "other byte order"
patch torn.ledger $((slot + 8)) 4
"$NP" recover torn.ledger -o torn.json 2>err || { cat err; fail "a flipped slot is not just torn"; }
jq -e '.recovered.torn_records == 1 and .ledger.live_allocations == 5' torn.json >/dev/null \
    || fail "a flipped slot: $(jq -c '[.recovered.torn_records, .ledger.live_allocations]' torn.json)"
: >empty.ledger
refuse "empty" empty.ledger "not an npupool ledger file (0 bytes)"
head -c 100000 /dev/urandom >random.ledger
refuse "random bytes" random.ledger "not an npupool ledger file"
refuse "a report" "$ROOT/tests/fixtures/report_basic.json" "not an npupool ledger file"
start=$(date +%s%N)
refuse "/dev/zero" /dev/zero "not an npupool ledger file"
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 2000 ] || fail "/dev/zero took more than 2 s"
"$NP" recover "$TMPDIR_CASE" >/dev/null 2>err
[ $? -eq 2 ] || fail "a directory"
"$NP" recover "$TMPDIR_CASE/none.ledger" >/dev/null 2>err
[ $? -eq 2 ] && grep -q "none.ledger: cannot open" err || fail "a missing file"
"$NP" recover >/dev/null 2>err
[ $? -eq 2 ] || fail "no operand"
for f in "$ROOT"/fuzz/seeds/ledger/* "$ROOT"/tests/fixtures/fuzz/ledger_*; do
    [ -f "$f" ] || continue
    "$NP" recover "$f" -o out.json 2>/dev/null
    rc=$?
    [ "$rc" -le 2 ] || fail "$f: exit $rc"
done
exit 0
