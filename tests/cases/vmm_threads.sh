# variants: plain asan tsan
# 8 threads allocate and free (every block tagged by its owner and checked before its free)
# while another thread of the process takes physical memory until refused and gives part of it
# back, again and again: the pool gives chunks back and grows back; at the end aclrtGetMemInfo
# reports what it reported at the start (no block, chunk or page lost) and the fake's own
# checker finds its tables consistent.
. "$ROOT/tests/lib.sh"
rounds=10; [ "$VARIANT" = plain ] || rounds=3
run_preloaded vmm_threads $rounds >"$TMPDIR_CASE/out" 2>"$TMPDIR_CASE/err" \
    || { grep -v 'threshold\|refused with' "$TMPDIR_CASE/err" | tail -20; fail "vmm_threads failed"; }
cat "$TMPDIR_CASE/out"
[ "$(stat physical_frees)" -eq "$(stat physical_allocs)" ] || fail "physical memory left behind"
[ "$(stat unmaps)" -eq "$(stat maps)" ] || fail "mappings left behind"
[ "$(stat unmaps)" -gt 0 ] || fail "the pool gave nothing back"
exit 0
