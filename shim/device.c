/* shim/device.c — per-device state: lazy pool creation, lookup by address, retirement.
 *
 * Owns: shim_devices[].  A pool is created at the first allocation on its device with ONE real
 * reservation of NPUPOOL_POOL_BYTES, or NPUPOOL_RATIO of the free HBM the runtime reports, in
 * 2 MiB units.  When the runtime refuses, the size backs off by 1/8 per step down to
 * RESERVE_MIN_BYTES; if every step is refused the device runs without a pool (every request
 * takes the fallback path) until aclrtResetDevice.  A retired pool's host metadata is destroyed
 * only RETIRE_GRACE_NS after its retirement (at a later retirement), so a thread that loaded the
 * pool pointer just before a reset never touches freed metadata; at most RETIRE_KEEP_MAX are kept
 * (a program resetting in a tight loop), so host memory stays bounded.
 *
 * Locking: shim_devices_lock guards the state fields of every device and is NEVER held across a
 * runtime call or a report: a device being built is marked `creating` and other threads wait on
 * shim_devices_cond.  So npupool's locks never nest with the runtime's, whatever order the
 * fork handlers were registered in (torch_npu dlopen()s the runtime after npupool is loaded).
 * Readers load the pool pointer with acquire semantics and need no lock.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fmt.h"
#include "clock.h"
#include "log.h"
#include "options.h"
#include "real.h"
#include "shim.h"

#define HUGE_PAGE (2u << 20)
#define RESERVE_MIN_BYTES ((size_t)64 << 20)
#define RETIRE_GRACE_NS (200ull * 1000 * 1000) /* a pool operation takes microseconds */
#define RETIRE_KEEP_MAX 32                     /* retired pools kept at most, whatever their age */

shim_device_t shim_devices[NPUPOOL_MAX_DEVICES];
wire_counters_t shim_unknown_device_counters;
pthread_mutex_t shim_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t shim_devices_cond = PTHREAD_COND_INITIALIZER; /* a `creating` flag cleared */

static int highest_device = -1; /* highest device index that ever had a pool */

typedef struct retired_pool {
    struct retired_pool *next; /* older retirements */
    pool_t *pool;              /* metadata of a pool whose memory the runtime took back */
    uint64_t retired_ns;       /* CLOCK_MONOTONIC time of the retirement */
} retired_pool_t;
static retired_pool_t *retired_pools; /* newest first; guarded by shim_devices_lock */

/* pre: shim_devices_lock held.  Destroys retired pools older than the grace period, and all
 * but the newest RETIRE_KEEP_MAX - 1. */
static void reap_retired_locked(uint64_t now)
{
    retired_pool_t **link = &retired_pools;
    int kept = 0;
    while (*link) {
        retired_pool_t *r = *link;
        if (now - r->retired_ns > RETIRE_GRACE_NS || kept >= RETIRE_KEEP_MAX - 1) {
            *link = r->next;
            pool_destroy(r->pool);
            free(r);
        } else {
            link = &r->next;
            kept++;
        }
    }
}

static size_t reservation_target(int device)
{
    if (npupool_config.pool_bytes) return npupool_config.pool_bytes & ~(size_t)(HUGE_PAGE - 1);
    size_t free_b = 0, total_b = 0;
    aclError rc = REAL(aclrtGetMemInfo) ? REAL(aclrtGetMemInfo)(ACL_HBM_MEM, &free_b, &total_b)
                                        : ACL_ERROR_UNINITIALIZE;
    if (rc != ACL_SUCCESS) {
        log_warn("device %d: aclrtGetMemInfo failed (%d); cannot size the pool", device, rc);
        return 0;
    }
    return (size_t)((double)free_b * npupool_config.ratio) & ~(size_t)(HUGE_PAGE - 1);
}

typedef struct reservation {
    void *base;   /* what the runtime returned */
    size_t bytes; /* bytes the pool manages */
} reservation_t;

/* Runtime calls only; no npupool lock held.  0 on success. */
static int reserve(shim_device_t *d, int device, reservation_t *out)
{
    size_t target = reservation_target(device), size = target;
    size_t floor = target < RESERVE_MIN_BYTES ? target : RESERVE_MIN_BYTES;
    void *base = NULL;
    aclError rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (!REAL(aclrtMalloc)) return -1;
    while (size >= HUGE_PAGE && size >= floor) {
        /* Ask for size-32 so that the runtime's +32 padding lands exactly on a 2 MiB boundary. */
        rc = REAL(aclrtMalloc)(&base, size - 32, ACL_MEM_MALLOC_HUGE_FIRST);
        wire_counter_add(&d->counters, real_allocs, 1);
        if (rc == ACL_SUCCESS) break;
        wire_counter_add(&d->counters, reservation_failures, 1);
        if (rc != ACL_ERROR_RT_MEMORY_ALLOCATION) break;
        size = (size - size / 8) & ~(size_t)(HUGE_PAGE - 1);
    }
    if (rc != ACL_SUCCESS) {
        log_warn("device %d: the runtime refused every pool reservation (last code %d); "
                 "this device runs without a pool until aclrtResetDevice",
                 device, rc);
        return -1;
    }
    out->base = base;
    out->bytes = size - 32;
    return 0;
}

/* No npupool lock held.  Returns the new pool or NULL (then nothing is reserved). */
static pool_t *build_pool(shim_device_t *d, int device, reservation_t *res)
{
    if (reserve(d, device, res) != 0) return NULL;
    pool_t *pool = pool_create((uintptr_t)res->base, res->bytes);
    if (!pool) {
        if (REAL(aclrtFree)) REAL(aclrtFree)(res->base);
        wire_counter_add(&d->counters, real_frees, 1);
        log_error("device %d: no host memory for pool metadata; running without a pool", device);
        return NULL;
    }
    char human[32];
    fmt_bytes(human, res->bytes + 32);
    log_info("device %d: pool of %s reserved at %p", device, human, res->base);
    return pool;
}

pool_t *device_pool_peek(int device)
{
    return __atomic_load_n(&shim_devices[device].pool, __ATOMIC_ACQUIRE);
}

pool_t *device_pool_get_or_create(int device)
{
    shim_device_t *d = &shim_devices[device];
    pool_t *pool = __atomic_load_n(&d->pool, __ATOMIC_ACQUIRE);
    if (pool) return pool;
    if (npupool_config.mode == NPUPOOL_MODE_OBSERVE) return NULL; /* observe: never a pool */
    real_resolve_all(); /* no loader lock may be needed while others wait for us: see real.h */
    pthread_mutex_lock(&shim_devices_lock);
    while (d->creating) pthread_cond_wait(&shim_devices_cond, &shim_devices_lock);
    pool = d->pool;
    if (!pool && !d->reserve_failed) {
        d->creating = 1;
        pthread_mutex_unlock(&shim_devices_lock);
        reservation_t res = {0};
        pool = build_pool(d, device, &res);
        pthread_mutex_lock(&shim_devices_lock);
        d->creating = 0;
        if (pool) {
            d->reservation = (uintptr_t)res.base;
            d->reservation_bytes = res.bytes;
            wire_counter_add(&d->counters, pool_reservations, 1);
            __atomic_store_n(&d->pool, pool, __ATOMIC_RELEASE);
            if (device > __atomic_load_n(&highest_device, __ATOMIC_RELAXED))
                __atomic_store_n(&highest_device, device, __ATOMIC_RELEASE);
        } else {
            d->reserve_failed = 1;
        }
        pthread_cond_broadcast(&shim_devices_cond);
    }
    pthread_mutex_unlock(&shim_devices_lock);
    return pool;
}

int device_of_pool_address(uintptr_t addr)
{
    int hi = __atomic_load_n(&highest_device, __ATOMIC_ACQUIRE);
    for (int dev = 0; dev <= hi; dev++) {
        pool_t *pool = device_pool_peek(dev);
        if (pool && pool_contains(pool, addr)) return dev;
    }
    return -1;
}

uintptr_t device_pool_retire(int device)
{
    shim_device_t *d = &shim_devices[device];
    pthread_mutex_lock(&shim_devices_lock);
    while (d->creating) pthread_cond_wait(&shim_devices_cond, &shim_devices_lock);
    pool_t *pool = d->pool;
    uintptr_t base = d->reservation;
    d->reserve_failed = 0;
    if (pool) {
        __atomic_store_n(&d->pool, NULL, __ATOMIC_RELEASE);
        d->reservation = 0;
        d->reservation_bytes = 0;
        uint64_t now = clock_mono_ns();
        reap_retired_locked(now);
        retired_pool_t *node = malloc(sizeof *node);
        if (node) { /* else the metadata leaks; it is never touched again either way */
            node->pool = pool;
            node->retired_ns = now;
            node->next = retired_pools;
            retired_pools = node;
        }
    }
    pthread_mutex_unlock(&shim_devices_lock);
    return pool ? base : 0;
}

/* Fork: the order is fork.c's table. */
void device_fork_prepare(void) { pthread_mutex_lock(&shim_devices_lock); }

void device_fork_prepare_pools(void)
{
    for (int i = 0; i < NPUPOOL_MAX_DEVICES; i++) {
        pool_t *pool = shim_devices[i].pool;
        if (pool) pool_lock(pool);
    }
}

void device_fork_parent_pools(void)
{
    for (int i = NPUPOOL_MAX_DEVICES - 1; i >= 0; i--) {
        pool_t *pool = shim_devices[i].pool;
        if (pool) pool_unlock(pool);
    }
}

void device_fork_child_pools(void) { device_fork_parent_pools(); }

void device_fork_parent(void) { pthread_mutex_unlock(&shim_devices_lock); }

void device_fork_child(void)
{
    /* A pool another parent thread was building does not exist in the child: build afresh. */
    for (int i = 0; i < NPUPOOL_MAX_DEVICES; i++) shim_devices[i].creating = 0;
    pthread_cond_init(&shim_devices_cond, NULL);
    pthread_mutex_unlock(&shim_devices_lock);
}
