# variants: plain asan tsan
# aclrtResetDevice racing with 64 threads that allocate and free, and with signal reports: the
# figures stay consistent in every report and every line (no wrapped counter: "pool use
# 33554944027.3 %" before), allocated <= reserved everywhere, no hang, no crash.
. "$ROOT/tests/lib.sh"
cd "$TMPDIR_CASE"
NPUPOOL_POOL_BYTES=512M NPUPOOL_REPORT="$TMPDIR_CASE/r-%n.json" FAKEACL_HBM_BYTES=2G timeout 120 \
    env LD_PRELOAD="${SANRT:+$SANRT }$SHIM" "$PROGS/guest" resetrace >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err"
rc=$?
tail -5 "$TMPDIR_CASE/err"
[ "$rc" -eq 124 ] && fail "resetrace hung"
[ "$rc" -eq 0 ] || fail "resetrace failed (status $rc)"
if awk '{ for (i = 1; i < NF; i++) if ($i == "use" && $(i - 1) == "pool" && $(i + 1) + 0 > 100) { print; bad = 1 } }
        END { exit !bad }' "$TMPDIR_CASE/err"; then
    fail "a usage figure above 100%"
fi
n=0
for f in "$TMPDIR_CASE"/r-*.json; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    jq -e '([.devices[] | select(.pool != null) | .pool.allocated_bytes <= .pool.reserved_bytes] | all)
           and ((.threshold // null) == null or (.threshold.allocated_bytes <= .threshold.reserved_bytes))
           and ([.devices[].counters.fallback_bytes // 0 | . < 1e15] | all)' "$f" >/dev/null \
        || { jq '.trigger, .threshold, [.devices[] | .pool, .counters]' "$f"; fail "$f: inconsistent figures"; }
done
[ "$n" -ge 1 ] || fail "no report was written"
echo "$n reports consistent"
exit 0
