/* shim/shim.h — what the shim's files share with each other (not exported).
 *
 * Owns: the per-device state table and the start-up entry point.  Device state lives in a fixed
 * array (NPUPOOL_MAX_DEVICES, base/vocab.h); a device's pool pointer is published atomically once
 * created and is cleared (the pool retired, never freed while a racing thread might use it) by
 * aclrtResetDevice or aclFinalize.  State fields are guarded by one lock, shim_devices_lock, which
 * is never held across a runtime call or a report (see device.c).  Events of devices outside the
 * table (unknown, -1) are counted in shim_unknown_device_counters.
 * Counters: the two every pool allocation and free moves (allocs, frees) are kept per thread
 * (tstate.h) and summed when read (device_counters); the others are rare and stay shared atomics
 * in the device's `counters`.  Readers of a device's counters use device_counters, never
 * `counters` directly.
 * Lock order: the one table in fork.c.
 */
#ifndef NPUPOOL_SHIM_H
#define NPUPOOL_SHIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "tstate.h"
#include "vocab.h"
#include "wire.h"

typedef struct shim_device {
    pool_t *pool;             /* atomically published; NULL until first allocation */
    uintptr_t reservation;    /* address the runtime gave for the pool (vmm: its range) */
    size_t reservation_bytes; /* bytes the pool may hold (block: its block; vmm: its target) */
    int vmm;                  /* 1: the pool is on the virtual-memory API */
    int gave_back_said;       /* 1 once the first give-back was logged (atomic) */
    int reserve_failed; /* 1: the runtime refused every reservation size; no retry until reset */
    int creating;       /* 1 while one thread reserves this device's pool (lock released) */
    uintptr_t range_lo; /* the pool's address range [lo, lo+len) (atomics; written before */
    size_t range_len;   /* the pool is published, 0 when there is none): frees find it */
    wire_counters_t counters; /* events on this device (base/wire.h), atomics; allocs and frees
                                 are per thread (device_counters sums them) */
} shim_device_t;

extern shim_device_t shim_devices[NPUPOOL_MAX_DEVICES];
extern pthread_mutex_t shim_devices_lock;            /* pool creation, reset, finalize */
extern wire_counters_t shim_unknown_device_counters; /* events whose device is unknown */

/* The counters of `device` (a vocab_device() id; -1 = the unknown-device counters). */
static inline wire_counters_t *shim_counters_of(int device)
{
    return vocab_device_known(device) ? &shim_devices[device].counters
                                      : &shim_unknown_device_counters;
}

/* A pool allocation (or a free: `is_free`) of `device` (known), counted in this thread's record
 * (in the shared atomics when it has none). */
static inline void shim_count_pool(int device, int is_free)
{
    tstate_t *t = tstate_self();
    if (__builtin_expect(t != NULL, 1))
        tstate_add(is_free ? &t->frees[device] : &t->allocs[device], 1);
    else if (is_free)
        wire_counter_add(&shim_devices[device].counters, frees, 1);
    else
        wire_counter_add(&shim_devices[device].counters, allocs, 1);
}

/* The counters of `device` (a vocab_device() id; -1 = unknown) as of now: the shared ones and
 * the per-thread ones summed (exact once the threads are done, whether they exited or not). */
void device_counters(int device, wire_counters_t *out);

/* Initialise npupool at the first intercepted call (idempotent, thread-safe): options, ledger,
 * reports, trace, fork handlers.  Nothing of npupool runs before it (init.c).  Once done, one
 * acquire load. */
extern int shim_ready; /* 1 once shim_ensure_init has nothing left to do (atomic) */
void shim_init_slow(void);
static inline void shim_ensure_init(void)
{
    if (__builtin_expect(!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE), 0)) shim_init_slow();
}

/* Pools are pinned while used (pin.h): every device_pool_pin* that returns a pool must be
 * followed by device_pool_unpin() once the caller no longer touches it, before it calls anything
 * that may pin (observe_*, reports).  A thread holds one pin at a time.  A pinned pool is never
 * destroyed, even when a reset retires it meanwhile. */
/* Pool of `device`, pinned, creating it (one real reservation) if this is the first use.  NULL
 * (nothing pinned) when the device cannot have a pool (reservation refused or disabled).
 * pre: vocab_device_known(device). */
pool_t *device_pool_pin_or_create(int device);
/* Pool of `device`, pinned, if it exists (no creation); NULL = none, nothing pinned. */
pool_t *device_pool_pin(int device);
/* The pool that contains addr, pinned, and its device in *device; NULL (and -1) when none. */
pool_t *device_pool_pin_by_address(uintptr_t addr, int *device);
/* The ledger's resolver (ledger_set_resolver): the tag of the live pool block at addr.  Uses
 * the pool this thread has pinned if it holds addr (a report's), else pins one for the call;
 * 0 when the thread holds another pool's pin (it is never replaced). */
int device_resolve_tag(uintptr_t addr, uint32_t *tag);
/* Let go of the pool this thread pinned. */
void device_pool_unpin(void);
/* Whether the device has a pool now (the pointer is only compared, never dereferenced). */
pool_t *device_pool_peek(int device);
/* The runtime has reset the device (its memory is gone): forget the device's pool; a vmm
 * pool's address range is released.  Waits for a pool being built.  Takes shim_devices_lock;
 * the caller holds no npupool lock. */
void device_pool_drop(int device);
/* aclFinalize: forget the device's pool and give its memory back to the runtime (block: free
 * the block; vmm: unmap and free every chunk, release the range).  The caller holds no npupool
 * lock. */
void device_pool_release(int device);
/* The runtime refused `call` (a request that does not go to the pool) on `device`: give back up
 * to `bytes` (rounded up to chunks) of the pool's chunks that hold no live block.  Returns the
 * bytes given back (0: nothing to give, a block pool, no pool); the caller then retries once.
 * Counted per device, logged once at info.  The caller holds no npupool lock. */
size_t device_give_back(int device, size_t bytes, const char *call);

/* Fork (fork.c's table): the devices' lock, then every pool's lock. */
void device_fork_prepare(void);
void device_fork_parent(void);
void device_fork_child(void);
void device_fork_prepare_pools(void);
void device_fork_parent_pools(void);
void device_fork_child_pools(void);

/* fork.c: register the fork handlers (once, at initialisation). */
void fork_register(void);

/* crash.c: with a ledger file, the fatal-signal line (once, at initialisation, after the ledger). */
void crash_install(void);

#endif
