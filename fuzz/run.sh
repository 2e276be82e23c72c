#!/bin/bash
# fuzz/run.sh BUILD_DIR SECONDS — run each libFuzzer target for SECONDS, seeded with the repo's
# fixtures and traces and with the hostile inputs of fuzz/seeds/ (NUL and random bytes, nesting
# past cJSON's limit, integers at and past 2^64 - 1, numbers in strings, ...; ledger files of a
# killed C or Python process, cut at the end of their chunks).  Crashing inputs land in
# BUILD_DIR/artifacts/; copy each one to tests/fixtures/fuzz/ (report_*, trace_*, suppress_* or
# ledger_*) so tests/cases/tool_errors.sh keeps replaying it (suppress_*: replayed as a
# --suppress file; ledger_*: by tests/cases/tool_recover_errors.sh).
set -u
dir=$1 secs=$2
mkdir -p "$dir/corpus/report" "$dir/corpus/trace" "$dir/corpus/suppress" "$dir/corpus/ledger" \
    "$dir/artifacts"
cp fuzz/seeds/ledger/* "$dir/corpus/ledger/" 2>/dev/null
cp fuzz/seeds/suppress/* tests/fixtures/*.supp "$dir/corpus/suppress/" 2>/dev/null
cp tests/fixtures/report_*.json tests/fixtures/bad/*.json fuzz/seeds/report/* "$dir/corpus/report/" 2>/dev/null
for f in traces/*.trace traces/*.csv tests/fixtures/traces/* tests/fixtures/bad/*.trace tests/fixtures/bad/*.csv \
    fuzz/seeds/trace/*; do
    [ -f "$f" ] && head -c 4096 "$f" >"$dir/corpus/trace/$(basename "$f")"
done
rc=0
for t in report trace suppress ledger; do
    echo "== fuzz_$t for ${secs}s"
    max=65536
    [ "$t" = ledger ] && max=131072 # a small process's ledger file is ~75 KB
    "$dir/fuzz_$t" -max_total_time="$secs" -max_len=$max -artifact_prefix="$dir/artifacts/${t}_" \
        "$dir/corpus/$t" || rc=1
done
ls "$dir/artifacts"
exit $rc
