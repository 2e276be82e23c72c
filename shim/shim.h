/* shim/shim.h — what the shim's files share with each other (not exported).
 *
 * Owns: the per-device state table and the start-up entry point.  Device state lives in a fixed
 * array (SHIM_MAX_DEVICES); a device's pool pointer is published atomically once created and is
 * cleared (the pool retired, never freed while a racing thread might use it) by aclrtResetDevice
 * or aclFinalize.  Pool creation, reset and finalize are rare and serialised by one lock,
 * shim_devices_lock (one lock, not one per device, so fork handlers take few locks).
 * Lock order: shim_devices_lock, then a pool's own lock, then the foreign map lock.
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
enum shim_entry { SHIM_MALLOC, SHIM_MALLOC_ALIGN32, SHIM_MALLOC_CACHED, SHIM_MALLOC_WITH_CFG,
                  SHIM_ENTRY_COUNT };
const char *shim_entry_name(enum shim_entry e);

typedef struct shim_device {
    pool_t *pool;               /* atomically published; NULL until first allocation */
    uintptr_t reservation;      /* address the runtime gave for the pool */
    size_t reservation_bytes;   /* bytes managed by the pool */
    int reserve_failed;         /* 1: the runtime refused every reservation size; no retry until reset */
    shim_counters_t counters;   /* events on this device */
} shim_device_t;

extern shim_device_t shim_devices[SHIM_MAX_DEVICES];
extern pthread_mutex_t shim_devices_lock; /* pool creation, reset, finalize */
extern shim_counters_t shim_unknown_device_counters; /* events whose device is unknown */

void shim_ensure_init(void);
/* Register the device fork handlers (once); call before the first runtime call made under
 * shim_devices_lock. */
void shim_register_device_atfork(void);

/* Pool of `device`, creating it (one real reservation) if this is the first use.  NULL when the
 * device cannot have a pool (reservation refused or disabled).  pre: 0 <= device < MAX. */
pool_t *device_pool_get_or_create(int device);
/* Pool of `device` if it exists (no creation). */
pool_t *device_pool_peek(int device);
/* Device whose pool contains addr, or -1. Lock-free. */
int device_of_pool_address(uintptr_t addr);
/* Forget the device's pool (after the runtime released its memory). Caller holds shim_devices_lock. */
void device_pool_retire_locked(shim_device_t *d);

void device_atfork_prepare(void);
void device_atfork_parent(void);
void device_atfork_child(void);

#endif
