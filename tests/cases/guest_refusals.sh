# variants: plain asan
# Refusals are never lost.  A job fills its pool (refused: exhausted), frees every other block and
# asks for twice the size of a hole (refused: fragmentation), twice from the same call site: the
# first refusal of each reason gets its own oom report at once (no 1 s gap), the repeat is
# counted, and the exit report lists all three with the last one (not reported) and its stack.
# A request of SIZE_MAX - 31 bytes: its oom report carries the exact integer and the command
# reads it back exactly.
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
need_jsonschema
cd "$TMPDIR_CASE"
# A block pool (NPUPOOL_VMM=0): a vmm pool stitches the holes and serves the large request
# (tests/cases/vmm_puzzle.sh covers that).
NPUPOOL_VMM=0 NPUPOOL_FALLBACK=0 NPUPOOL_POOL_BYTES=1G NPUPOOL_REPORT="$TMPDIR_CASE/r-%n.json" FAKEACL_HBM_BYTES=4G \
    run_preloaded guest refusals >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "refusals failed"; }
cat "$TMPDIR_CASE/out" "$TMPDIR_CASE/err"
files=$(reports 'r-*.json')
check_reports $files || fail "invalid reports"
oom=$(grep -l '"trigger":[[:space:]]*"oom"' $files)
[ "$(echo "$oom" | grep -c .)" -eq 2 ] || fail "expected 2 oom reports (exhausted, fragmentation): $oom"
jq -s -e '[.[] | .oom.kind] | sort == ["exhausted", "fragmentation"]' $oom >/dev/null || fail "oom kinds"
exitr=$(grep -l '"trigger":[[:space:]]*"exit"' $files)
jq -e '.refusals.total == 3 and .refusals.reported == 2 and .refusals.suppressed == 1
       and .refusals.last.kind == "fragmentation" and .refusals.last.reported == false
       and .refusals.last.frames[0].function == "ask"' "$exitr" >/dev/null \
    || { jq .refusals "$exitr"; fail "the exit report does not keep the last refusal"; }
rm -f "$TMPDIR_CASE"/r-*.json
NPUPOOL_FALLBACK=0 NPUPOOL_REPORT="$TMPDIR_CASE/s-%n.json" FAKEACL_HBM_BYTES=4G \
    run_preloaded guest sizemax >/dev/null 2>"$TMPDIR_CASE/err" || { cat "$TMPDIR_CASE/err"; fail "sizemax failed"; }
oom=$(grep -l '"trigger":[[:space:]]*"oom"' $(reports 's-*.json'))
grep -q '"requested_bytes":[[:space:]]*18446744073709551584[,}]' "$oom" || fail "requested_bytes is not exact"
"$ABS_BUILD/npupool" summary "$oom" >"$TMPDIR_CASE/sum" || fail "npupool summary cannot read the oom report"
grep -q '18446744073709551584 bytes' "$TMPDIR_CASE/sum" || { cat "$TMPDIR_CASE/sum"; fail "summary does not show the exact request"; }
exit 0
