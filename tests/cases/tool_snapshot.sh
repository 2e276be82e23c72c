# variants: plain
# traces/snapshot2trace.py on a hand-made PyTorch memory snapshot (tests/fixtures/snapshots/,
# the documented shape; no real snapshot is shipped): the trace it writes is what the events
# say (a block allocated before the ring began is allocated at time 0, one live only in the
# segments too), PyTorch's reserved peak is worked out from the segments back through the
# segment events, the pickled snapshot gives the same trace as the JSON one, a pickle that
# names a class is refused without running it, and --compare replays the trace three ways.
. "$ROOT/tests/lib.sh"
command -v python3 >/dev/null || skip "python3 is not installed"
CONV="$ROOT/traces/snapshot2trace.py"
FIX="$ROOT/tests/fixtures/snapshots/handmade.json"
NP="$ROOT/$BUILD/npupool"
python3 "$CONV" "$FIX" -o "$TMPDIR_CASE/j.trace" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "conversion failed"; }
grep -q '2 allocations from before the trace' "$TMPDIR_CASE/err" || fail "early allocations not found: $(cat "$TMPDIR_CASE/err")"
head -1 "$TMPDIR_CASE/j.trace" | grep -q 'pytorch_reserved_peak=44040192 expandable=0' || fail "reserved peak is not 20+2+20 MiB"
sed -n 3,4p "$TMPDIR_CASE/j.trace" | tr '\n' ' ' | grep -q '^1,0,alloc,0x7f0000000000,4194304,0 1,0,alloc,0x7f0001400000,512,0 $' \
    || fail "early allocations are not first"
[ "$(grep -c ',alloc,' "$TMPDIR_CASE/j.trace")" -eq 10 ] && [ "$(grep -c ',free,' "$TMPDIR_CASE/j.trace")" -eq 9 ] \
    || fail "expected 10 allocs and 9 frees"
out=$("$NP" replay "$TMPDIR_CASE/j.trace" --rounding none --no-timing) || fail "replay of the converted trace"
echo "$out" | grep -q 'peak requested   26.0 MiB    (27263488 bytes' || { echo "$out"; fail "live peak is not 26 MiB + 512 B"; }
echo "$out" | grep -q '1 allocations never freed' || { echo "$out"; fail "the block live at the snapshot is not live at the end"; }
python3 -c 'import json,pickle,sys; pickle.dump(json.load(open(sys.argv[1])), open(sys.argv[2], "wb"))' "$FIX" "$TMPDIR_CASE/s.pickle"
python3 "$CONV" "$TMPDIR_CASE/s.pickle" -o "$TMPDIR_CASE/p.trace" 2>/dev/null || fail "pickle conversion failed"
cmp <(tail -n +2 "$TMPDIR_CASE/j.trace") <(tail -n +2 "$TMPDIR_CASE/p.trace") || fail "pickle and JSON give different traces"
python3 -c 'import os,pickle,sys
class E:
    def __reduce__(self): return (os.system, ("touch " + sys.argv[2],))
pickle.dump({"device_traces": [E()]}, open(sys.argv[1], "wb"))' "$TMPDIR_CASE/evil.pickle" "$TMPDIR_CASE/pwned"
python3 "$CONV" "$TMPDIR_CASE/evil.pickle" -o "$TMPDIR_CASE/x.trace" 2>"$TMPDIR_CASE/err"; rc=$?
[ "$rc" -eq 2 ] || fail "a pickle naming a class must exit 2, got $rc"
[ ! -e "$TMPDIR_CASE/pwned" ] || fail "the hostile pickle ran"
grep -q 'only plain data is read' "$TMPDIR_CASE/err" || fail "no clear refusal: $(cat "$TMPDIR_CASE/err")"
echo '{"segments": []}' >"$TMPDIR_CASE/bad.json"
python3 "$CONV" "$TMPDIR_CASE/bad.json" 2>"$TMPDIR_CASE/err"; [ $? -eq 2 ] && grep -q 'not a memory snapshot' "$TMPDIR_CASE/err" \
    || fail "a JSON without device_traces must be refused"
line=$(python3 "$CONV" "$FIX" -o "$TMPDIR_CASE/c.trace" --compare "$NP" 2>/dev/null) || fail "--compare failed"
echo "$line"
echo "$line" | grep -Eq '^live_peak=27263488 pytorch_reserved=44040192 \(1.6154x\) npupool_vmm=[0-9]+ .* npupool_block=[0-9]+ .* firstfit=[0-9]+' \
    || fail "--compare line"
exit 0
