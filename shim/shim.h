/* shim/shim.h — what the shim's files share with each other (not exported).
 *
 * Owns: the per-device state table and the start-up entry point.  Device state lives in a fixed
 * array (NPUPOOL_MAX_DEVICES, base/vocab.h); a device's pool pointer is published atomically once
 * created and is cleared (the pool retired, never freed while a racing thread might use it) by
 * aclrtResetDevice or aclFinalize.  State fields are guarded by one lock, shim_devices_lock, which
 * is never held across a runtime call or a report (see device.c).  Events of devices outside the
 * table (unknown, -1) are counted in shim_unknown_device_counters.
 * Lock order: the one table in fork.c.
 */
#ifndef NPUPOOL_SHIM_H
#define NPUPOOL_SHIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "vocab.h"
#include "wire.h"

typedef struct shim_device {
    pool_t *pool;             /* atomically published; NULL until first allocation */
    uintptr_t reservation;    /* address the runtime gave for the pool */
    size_t reservation_bytes; /* bytes managed by the pool */
    int reserve_failed; /* 1: the runtime refused every reservation size; no retry until reset */
    int creating;       /* 1 while one thread reserves this device's pool (lock released) */
    wire_counters_t counters; /* events on this device (base/wire.h), atomics */
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

/* Initialise npupool at the first intercepted call (idempotent, thread-safe): options, ledger,
 * reports, trace, fork handlers.  Nothing of npupool runs before it (init.c). */
void shim_ensure_init(void);

/* Pool of `device`, creating it (one real reservation) if this is the first use.  NULL when the
 * device cannot have a pool (reservation refused or disabled).  pre: vocab_device_known(device). */
pool_t *device_pool_get_or_create(int device);
/* Pool of `device` if it exists (no creation). */
pool_t *device_pool_peek(int device);
/* Device whose pool contains addr, or -1. Lock-free. */
int device_of_pool_address(uintptr_t addr);
/* Forget the device's pool (the runtime released or is about to release its memory); waits for
 * a pool being built.  Returns the reservation's address, 0 if the device had no pool.  Takes
 * shim_devices_lock; the caller holds no npupool lock. */
uintptr_t device_pool_retire(int device);

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
