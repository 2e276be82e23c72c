# variants: plain asan tsan
# The ledger file never harms the process.  With a file-size limit (ulimit -f: growing a file
# past it raises SIGXFSZ, whose default action kills) and on a full file system (a tmpfs of
# 128 KiB, when this machine lets the test mount one: fallocate fails with ENOSPC), the program
# runs to its normal end with its normal status; one line says the ledger continues in memory;
# the file left behind says it is incomplete and `npupool recover` still reads it (and the
# npupool and runtime that wrote it: the header comes first).  Below the
# size of a header, no file is made at all (one line).  (Reports go to a directory that does not
# exist, so they fail with a line: the report writer does not guard against RLIMIT_FSIZE.)
. "$ROOT/tests/lib.sh"
. "$ROOT/tests/programs/report_case_lib.sh"
need_ledger
unset NPUPOOL_SUPPRESS
NP="$ABS_BUILD/npupool"
cd "$TMPDIR_CASE"
# `postmortem exit 500`: 3,000 leaked blocks, so that the records outgrow 128 KiB (one thread
# records in one shard of the ledger, so the file grows with the number of live blocks only)
small() { # DIR LABEL: run `postmortem exit 500` with its ledger file in DIR, in this shell's limits
    local dir=$1 label=$2 rc
    rm -f "$dir"/s-*.ledger
    NPUPOOL_REPORT="$TMPDIR_CASE/none/r.json" NPUPOOL_LEDGER_FILE="$dir/s-%p.ledger" run_preloaded postmortem exit 500 \
        >out 2>err
    rc=$?
    cat err
    [ "$rc" -eq 0 ] || fail "$label: the program ended with status $rc"
    [ "$(grep -c 'continuing in memory' err)" -eq 1 ] || fail "$label: expected one 'continuing in memory' line"
    file=$(ls "$dir"/s-*.ledger) || fail "$label: no ledger file left"
    "$NP" recover "$file" -o rec.json 2>rerr || { cat rerr; fail "$label: recover failed"; }
    cat rerr
    jq -e '.recovered.incomplete == true and .recovered.process == "exited"' rec.json >/dev/null \
        || fail "$label: recovered facts: $(jq -c .recovered rec.json)"
    identity_is rec.json || fail "$label: the recovered npupool/runtime sections"
}
# 1. a file-size limit of 48 KiB (bash counts ulimit -f in KiB): the header and a few chunks fit
( ulimit -f 48 && small "$TMPDIR_CASE" "ulimit -f 48" ) || exit 1
# 2. 4 KiB: not even the header fits: no file, one line, the program runs as without npupool
(
    ulimit -f 4
    NPUPOOL_REPORT="$TMPDIR_CASE/none/r.json" NPUPOOL_LEDGER_FILE="$TMPDIR_CASE/n-%p.ledger" \
        run_preloaded postmortem exit >out 2>err
    rc=$?
    cat err
    [ "$rc" -eq 0 ] || fail "ulimit -f 4: status $rc"
    grep -q "cannot make the ledger file .*file-size limit" err || fail "ulimit -f 4: no line"
    ! ls "$TMPDIR_CASE"/n-*.ledger >/dev/null 2>&1 || fail "ulimit -f 4: a file was left"
) || exit 1
# 3. a full file system: a 128 KiB tmpfs in a private mount namespace
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
    mkdir -p "$TMPDIR_CASE/tiny"
    export -f small fail run_preloaded identity_is build_id
    export PROGS SHIM SANRT TMPDIR_CASE NP STATS ABS_BUILD
    unshare -m bash -c 'mount -t tmpfs -o size=128k npupool-tiny "$TMPDIR_CASE/tiny" &&
        small "$TMPDIR_CASE/tiny" "tmpfs of 128 KiB" && cp "$TMPDIR_CASE"/tiny/s-*.ledger "$TMPDIR_CASE/"' \
        || fail "the tmpfs run failed"
else
    echo "no tmpfs of 128 KiB: needs root and unshare -m (the ulimit -f runs cover SIGXFSZ only)"
fi
exit 0
