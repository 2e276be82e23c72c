# variants: plain asan tsan
# The device of an allocation follows the thread's device and contexts (tests/programs/contexts.c):
# switches across threads, a thread that never set a device, a context of device 1 bound on a thread
# of device 0, a context destroyed while bound, a reset on another thread, a fork child; with block
# and vmm pools, with npupool's per-thread device cache (NPUPOOL_DEVICE_CACHE) on and off.  The
# cache asks the runtime only after the calls it sees, not per allocation.  A binding made below ACL
# is followed when the thread made no observed call, and by NPUPOOL_DEVICE_CACHE=0 (the documented
# limit: after an observed call it is not seen).  Per-thread counters summed in the exit report equal
# the program's own counts after its threads exited.
. "$ROOT/tests/lib.sh"
# A small pool: a virtual-memory pool is mapped whole when it is made (a 51 GiB default pool is
# 26,214 mappings, a minute each under TSan), and device 1's pool is made twice here.
export NPUPOOL_POOL_BYTES=256M
run_plain contexts switch || fail "contexts switch fails without the shim"
for vmm in 1 0; do
    for cache in 1 0; do
        NPUPOOL_VMM=$vmm NPUPOOL_DEVICE_CACHE=$cache run_preloaded contexts switch \
            || fail "contexts switch fails in front of the shim (vmm $vmm, device cache $cache)"
    done
done

# the runtime is asked after each device call, not on each allocation
NPUPOOL_VMM=0 run_preloaded threads 8 || fail "threads 8 fails in front of the shim"
asked=$(stat aclrtGetDevice)
[ "$asked" -le 64 ] || fail "the runtime was asked for the device $asked times by 8 threads"
NPUPOOL_VMM=0 NPUPOOL_DEVICE_CACHE=0 run_preloaded threads 8 || fail "threads 8 fails with the cache off"
[ "$(stat aclrtGetDevice)" -ge 8000 ] || fail "NPUPOOL_DEVICE_CACHE=0 asked only $(stat aclrtGetDevice) times"

# bindings below ACL
[ "$(run_plain contexts below)" = "landed 1" ] || fail "below: the fake does not bind"
[ "$(run_preloaded contexts below)" = "landed 1" ] \
    || fail "below: a thread with no observed call must be asked on every allocation"
[ "$(NPUPOOL_DEVICE_CACHE=0 run_preloaded contexts below observed)" = "landed 1" ] \
    || fail "below observed: NPUPOOL_DEVICE_CACHE=0 must follow a binding below ACL"
[ "$(run_preloaded contexts below observed)" = "landed 0" ] \
    || fail "below observed: the documented limit changed (update docs/architecture.md)"

# per-thread counters, summed after the threads exited
want=$(NPUPOOL_REPORT="$TMPDIR_CASE/r.json" run_preloaded contexts counts) || fail "contexts counts fails"
got=$(jq -r '[.devices[] | select(.device == 0 or .device == 1)] | sort_by(.device)
             | "allocs0 \(.[0].counters.allocs) frees0 \(.[0].counters.frees) allocs1 \(.[1].counters.allocs) frees1 \(.[1].counters.frees)"' \
      "$TMPDIR_CASE/r.json") || fail "no exit report"
[ "$got" = "$want" ] || fail "the report's counters ($got) differ from the program's ($want)"

# Not under TSan: fork of a threaded program is unsupported there (see shim_fork.sh).
[ "$VARIANT" = tsan ] && exit 0
run_preloaded contexts fork || fail "contexts fork fails in front of the shim"
exit 0
