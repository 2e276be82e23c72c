/* shim/shim.h — what the shim's files share with each other (not exported).
 *
 * Owns: the per-device state table and the start-up entry point.  Device state lives in a fixed
 * array (SHIM_MAX_DEVICES); a device's pool pointer is published atomically once created and is
 * cleared (the pool retired, never freed while a racing thread might use it) by aclrtResetDevice
 * or aclFinalize.  State fields are guarded by one lock, shim_devices_lock, which is never held
 * across a runtime call or a report (see device.c).
 * Lock order (fork handlers take them in this order): shim_devices_lock, the report writer's,
 * every pool's, the ledger's, the trace recorder's, the foreign map's.
 */
#ifndef NPUPOOL_SHIM_H
#define NPUPOOL_SHIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "shim_counters.h"

#define SHIM_MAX_DEVICES 64

/* The allocating entry points, for logs, counters and the ledger. */
enum shim_entry {
    SHIM_MALLOC,
    SHIM_MALLOC_ALIGN32,
    SHIM_MALLOC_CACHED,
    SHIM_MALLOC_WITH_CFG,
    SHIM_ENTRY_COUNT
};
const char *shim_entry_name(enum shim_entry e);

typedef struct shim_device {
    pool_t *pool;             /* atomically published; NULL until first allocation */
    uintptr_t reservation;    /* address the runtime gave for the pool */
    size_t reservation_bytes; /* bytes managed by the pool */
    int reserve_failed; /* 1: the runtime refused every reservation size; no retry until reset */
    int creating;       /* 1 while one thread reserves this device's pool (lock released) */
    shim_counters_t counters; /* events on this device */
} shim_device_t;

extern shim_device_t shim_devices[SHIM_MAX_DEVICES];
extern pthread_mutex_t shim_devices_lock;            /* pool creation, reset, finalize */
extern shim_counters_t shim_unknown_device_counters; /* events whose device is unknown */

void shim_ensure_init(void);

/* Pool of `device`, creating it (one real reservation) if this is the first use.  NULL when the
 * device cannot have a pool (reservation refused or disabled).  pre: 0 <= device < MAX. */
pool_t *device_pool_get_or_create(int device);
/* Pool of `device` if it exists (no creation). */
pool_t *device_pool_peek(int device);
/* Device whose pool contains addr, or -1. Lock-free. */
int device_of_pool_address(uintptr_t addr);
/* Forget the device's pool (the runtime released or is about to release its memory); waits for
 * a pool being built.  Returns the reservation's address, 0 if the device had no pool.  Takes
 * shim_devices_lock; the caller holds no npupool lock. */
uintptr_t device_pool_retire(int device);

void device_atfork_prepare(void);       /* shim_devices_lock */
void device_atfork_prepare_pools(void); /* every pool's lock */
void device_atfork_parent_pools(void);
void device_atfork_child_pools(void);
void device_atfork_parent(void);
void device_atfork_child(void);

#endif
