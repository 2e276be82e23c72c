/* shim/device.c — per-device state: lazy pool creation, lookup by address, give-back,
 * retirement and release.
 *
 * Owns: shim_devices[] and the pools' backing on the runtime.  A pool is created at the first
 * allocation on its device, sized NPUPOOL_POOL_BYTES, or NPUPOOL_RATIO of the free HBM the
 * runtime reports:
 *   vmm    (NPUPOOL_VMM=1 and the runtime has the virtual-memory API: its seven calls resolve
 *          and aclrtMemGetAllocationGranularity answers) an address range of POOL_VMM_VA_RATIO
 *          (4) times the target (halved down to 1x while the runtime refuses), with the target
 *          mapped at once in chunks of NPUPOOL_CHUNK_BYTES (pool_grow: as much as the runtime
 *          gives).  The pool's backing (vmm_phys_alloc, vmm_phys_free, vmm_map, vmm_unmap) is
 *          the runtime's aclrtMallocPhysical / aclrtFreePhysical / aclrtMapMem / aclrtUnmapMem,
 *          called by pool/ on its slow paths with no npupool lock held.
 *          Why the range is 4x the target: VA costs nothing, and a stitch maps a fresh stretch
 *          while the chunks it unmaps leave holes behind.  Measured (bench_frag, the seed
 *          scenario, 3 seeds): the smallest pool that runs it is 1.004-1.005x the live peak
 *          with a range of 2x or 4x, 1.09-1.16x with 1x (nothing to stitch into); at 4x no
 *          request was refused for want of an unmapped stretch.  4x leaves room for longer
 *          runs, at no cost.
 *   block  otherwise, or when that fails: ONE runtime allocation in 2 MiB units.  When the
 *          runtime refuses, the size backs off by 1/8 per step down to RESERVE_MIN_BYTES; if
 *          every step is refused the device runs without a pool (every request takes the
 *          fallback path) until aclrtResetDevice.
 * Give-back: when the runtime refuses a request that does not go to the pool, the shim asks
 * device_give_back for the pool's free chunks (vmm only) and retries the call once (entry.c).
 * Lookup by address: each device's pool range (range_lo, range_len in shim_devices[]: stored
 * before the pool is published, range_len zeroed when it is retired) names the one pool to pin and
 * ask (pool_contains), so a free pins no other device's pool.
 * Counters: device_counters adds the per-thread counts (tstate.h: allocs, frees) to the device's
 * shared ones; every reader of a device's counters goes through it.
 * Retirement: every user of a pool pins it (pin.h: device_pool_pin*, device_pool_unpin) for
 * as long as it touches it; a retired pool is unpublished, then its metadata (and, at
 * aclFinalize, its backing) is released once no thread holds a pin on it.  So a thread that
 * loaded the pool pointer just before a reset, or is inside a vmm slow path's runtime calls,
 * never touches freed metadata, however long it takes.
 *
 * Locking: shim_devices_lock guards the state fields of every device and is NEVER held across a
 * runtime call or a report: a device being built is marked `creating` and other threads wait on
 * shim_devices_cond.  So npupool's locks never nest with the runtime's, whatever order the
 * fork handlers were registered in (torch_npu dlopen()s the runtime after npupool is loaded).
 * Users pin the pool pointer and need no lock; a retirer waits for pins with no lock held.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fmt.h"
#include "clock.h"
#include "current.h"
#include "log.h"
#include "options.h"
#include "pin.h"
#include "real.h"
#include "shim.h"

#define HUGE_PAGE (2u << 20)
#define RESERVE_MIN_BYTES ((size_t)64 << 20)

shim_device_t shim_devices[NPUPOOL_MAX_DEVICES];
wire_counters_t shim_unknown_device_counters;
pthread_mutex_t shim_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t shim_devices_cond = PTHREAD_COND_INITIALIZER; /* a `creating` flag cleared */

static int highest_device = -1; /* highest device index that ever had a pool */

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
    void *base;   /* what the runtime returned (block: the block; vmm: the address range) */
    size_t bytes; /* bytes the pool manages (vmm: the address range) */
    size_t limit; /* bytes the pool may hold (block: bytes; vmm: the physical target) */
    int vmm;      /* 1: a virtual-memory pool */
} reservation_t;

/* ---- the virtual-memory backing (pool_backing_t over the runtime) ------------------------- */

static aclrtPhysicalMemProp vmm_prop(int device)
{
    return (aclrtPhysicalMemProp){
        .handleType = ACL_MEM_HANDLE_TYPE_NONE,
        .allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED,
        .memAttr = ACL_HBM_MEM_HUGE,
        .location = {.id = (uint32_t)device, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
}

static int vmm_phys_alloc(void *ctx, size_t bytes, uint64_t *handle)
{
    int device = (int)(uintptr_t)ctx; /* the backing's ctx is the device id */
    aclrtPhysicalMemProp prop = vmm_prop(device);
    aclrtDrvMemHandle h = NULL;
    aclError rc = REAL(aclrtMallocPhysical)(&h, bytes, &prop, 0);
    wire_counter_add(&shim_devices[device].counters, real_allocs, 1);
    if (rc != ACL_SUCCESS) return rc;
    *handle = (uint64_t)(uintptr_t)h;
    return 0;
}

static void vmm_phys_free(void *ctx, uint64_t handle)
{
    int device = (int)(uintptr_t)ctx; /* the backing's ctx is the device id */
    aclError rc = REAL(aclrtFreePhysical)((aclrtDrvMemHandle)(uintptr_t)handle);
    wire_counter_add(&shim_devices[device].counters, real_frees, 1);
    if (rc != ACL_SUCCESS)
        log_warn("device %d: the runtime refused to free a pool chunk's physical memory (%d)",
                 device, rc);
}

static int vmm_map(void *ctx, uintptr_t va, size_t bytes, uint64_t handle)
{
    int device = (int)(uintptr_t)ctx; /* the backing's ctx is the device id */
    aclError rc = REAL(aclrtMapMem)((void *)va, bytes, 0, (aclrtDrvMemHandle)(uintptr_t)handle, 0);
    if (rc != ACL_SUCCESS)
        log_debug("device %d: aclrtMapMem of a pool chunk at %p refused (%d)", device, (void *)va,
                  rc);
    return rc;
}

static int vmm_unmap(void *ctx, uintptr_t va)
{
    int device = (int)(uintptr_t)ctx; /* the backing's ctx is the device id */
    aclError rc = REAL(aclrtUnmapMem)((void *)va);
    if (rc != ACL_SUCCESS)
        log_warn("device %d: the runtime refused to unmap a pool chunk at %p (%d)", device,
                 (void *)va, rc);
    return rc;
}

/* The chunk size for this runtime: NPUPOOL_CHUNK_BYTES rounded up to a power of two and to at
 * least the granularity (a power of two).  0 when the runtime has no usable API. */
static size_t vmm_chunk(int device)
{
    if (!REAL(aclrtReserveMemAddress) || !REAL(aclrtReleaseMemAddress) ||
        !REAL(aclrtMallocPhysical) || !REAL(aclrtFreePhysical) || !REAL(aclrtMapMem) ||
        !REAL(aclrtUnmapMem) || !REAL(aclrtMemGetAllocationGranularity)) {
        log_info("device %d: the runtime has no virtual-memory API; the pool is one block", device);
        return 0;
    }
    aclrtPhysicalMemProp prop = vmm_prop(device);
    size_t gran = 0;
    aclError rc =
        REAL(aclrtMemGetAllocationGranularity)(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran);
    if (rc != ACL_SUCCESS || gran == 0 || (gran & (gran - 1)) || gran > ((size_t)1 << 30)) {
        log_info("device %d: the runtime's virtual-memory API is not usable (granularity query "
                 "answered %d, granularity %zu); the pool is one block",
                 device, rc, gran);
        return 0;
    }
    size_t chunk = gran;
    while (chunk < npupool_config.chunk_bytes) chunk <<= 1;
    return chunk;
}

/* Runtime calls only; no npupool lock held.  The pool, or NULL (nothing kept). */
static pool_t *build_vmm_pool(int device, size_t chunk, reservation_t *out)
{
    size_t target = reservation_target(device) & ~(chunk - 1);
    if (target == 0) return NULL;
    void *va = NULL;
    size_t vbytes = 0;
    aclError rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    for (size_t ratio = POOL_VMM_VA_RATIO; ratio >= 1 && rc != ACL_SUCCESS; ratio /= 2) {
        if (target > SIZE_MAX / ratio) continue;
        vbytes = target * ratio;
        rc = REAL(aclrtReserveMemAddress)(&va, vbytes, chunk, NULL, 0);
    }
    if (rc != ACL_SUCCESS) {
        log_info("device %d: the runtime refused an address range for the pool (%d); the pool "
                 "is one block",
                 device, rc);
        return NULL;
    }
    pool_backing_t ops = {.ctx = (void *)(uintptr_t)device,
                          .phys_alloc = vmm_phys_alloc,
                          .phys_free = vmm_phys_free,
                          .map = vmm_map,
                          .unmap = vmm_unmap};
    pool_t *pool = pool_create_vmm((uintptr_t)va, vbytes, chunk, target, &ops);
    if (!pool) {
        REAL(aclrtReleaseMemAddress)(va);
        log_error("device %d: no host memory for pool metadata; trying one block", device);
        return NULL;
    }
    size_t mapped = pool_grow(pool, target);
    char h_mapped[FMT_BYTES_LEN], h_target[FMT_BYTES_LEN], h_chunk[FMT_BYTES_LEN],
        h_va[FMT_BYTES_LEN];
    log_info("device %d: pool on the virtual-memory API: %s of %s mapped in %s chunks, address "
             "range of %s at %p",
             device, fmt_bytes(h_mapped, mapped), fmt_bytes(h_target, target),
             fmt_bytes(h_chunk, chunk), fmt_bytes(h_va, vbytes), va);
    out->base = va;
    out->bytes = vbytes;
    out->limit = target;
    out->vmm = 1;
    return pool;
}

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
    out->limit = size - 32;
    out->vmm = 0;
    return 0;
}

/* No npupool lock held.  Returns the new pool or NULL (then nothing is reserved). */
static pool_t *build_pool(shim_device_t *d, int device, reservation_t *res)
{
    size_t chunk = npupool_config.vmm ? vmm_chunk(device) : 0;
    if (chunk) {
        pool_t *pool = build_vmm_pool(device, chunk, res);
        if (pool) return pool;
    }
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

pool_t *device_pool_pin(int device) { return pin_load((void **)&shim_devices[device].pool); }

void device_pool_unpin(void) { pin_release(); }

pool_t *device_pool_pin_or_create(int device)
{
    shim_device_t *d = &shim_devices[device];
    pool_t *pool = device_pool_pin(device);
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
            d->reservation_bytes = res.limit;
            d->vmm = res.vmm;
            __atomic_store_n(&d->range_lo, (uintptr_t)res.base, __ATOMIC_RELAXED);
            __atomic_store_n(&d->range_len, res.bytes, __ATOMIC_RELAXED); /* before the pool */
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
    /* (a reset may have retired it already: then there is no pool now, as after the reset) */
    return pool ? device_pool_pin(device) : NULL;
}

/* The device whose pool range holds addr is found from shim_devices[] (static memory, plain
 * loads), and only its pool is pinned, then asked (pool_contains) to confirm.  Whoever frees an
 * address got it from an allocation that pinned the pool, whose range was stored before the pool
 * was published, so the range it reads is never older than that pool. */
pool_t *device_pool_pin_by_address(uintptr_t addr, int *device)
{
    int hi = __atomic_load_n(&highest_device, __ATOMIC_ACQUIRE);
    for (int dev = 0; dev <= hi; dev++) {
        const shim_device_t *d = &shim_devices[dev];
        if (addr - __atomic_load_n(&d->range_lo, __ATOMIC_RELAXED) >=
            __atomic_load_n(&d->range_len, __ATOMIC_RELAXED))
            continue;
        pool_t *pool = device_pool_pin(dev);
        if (pool && pool_contains(pool, addr)) {
            *device = dev;
            return pool;
        }
    }
    pin_release();
    *device = -1;
    return NULL;
}

int device_resolve_tag(uintptr_t addr, uint32_t *tag)
{
    pool_t *held = pin_current(); /* the shim pins nothing but pools */
    if (held) return pool_block_tag(held, addr, tag) == POOL_OK; /* (another pool's: NOTOWNED) */
    int device;
    pool_t *pool = device_pool_pin_by_address(addr, &device);
    if (!pool) return 0;
    int ok = pool_block_tag(pool, addr, tag) == POOL_OK;
    device_pool_unpin();
    return ok;
}

void device_counters(int device, wire_counters_t *out)
{
    const wire_counters_t *c = shim_counters_of(device);
#define COUNTER_COPY(field, meaning) out->field = wire_counter_get(c, field);
    WIRE_COUNTERS(COUNTER_COPY)
#undef COUNTER_COPY
    if (!vocab_device_known(device)) return;
    uint64_t allocs, frees;
    tstate_sum(device, &allocs, &frees);
    out->allocs += allocs;
    out->frees += frees;
}

/* Unpublish the device's pool and wait until no thread holds it; the caller then owns it.
 * *vmm (if non-NULL) says whether it was a virtual-memory pool. */
static pool_t *retire(int device, uintptr_t *base_out, int *vmm)
{
    shim_device_t *d = &shim_devices[device];
    pthread_mutex_lock(&shim_devices_lock);
    while (d->creating) pthread_cond_wait(&shim_devices_cond, &shim_devices_lock);
    pool_t *pool = d->pool;
    uintptr_t base = d->reservation;
    d->reserve_failed = 0;
    if (vmm) *vmm = d->vmm;
    if (pool) {
        __atomic_store_n(&d->pool, NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&d->range_len, 0, __ATOMIC_RELAXED);
        d->reservation = 0;
        d->reservation_bytes = 0;
        d->vmm = 0;
    }
    pthread_mutex_unlock(&shim_devices_lock);
    if (pool) pin_wait_unheld(pool); /* no npupool lock held */
    *base_out = pool ? base : 0;
    return pool;
}

void device_pool_drop(int device)
{
    uintptr_t base;
    int vmm;
    pool_t *pool = retire(device, &base, &vmm);
    if (!pool) return;
    pool_destroy(pool); /* its memory went with the reset */
    if (!vmm) return;
    /* The reset released the chunks; the address range may have gone with them (CANN) or not
     * (the fake keeps reservations): give it back, an error only means it is gone already. */
    aclError rc = REAL(aclrtReleaseMemAddress) ? REAL(aclrtReleaseMemAddress)((void *)base)
                                               : ACL_ERROR_UNINITIALIZE;
    if (rc != ACL_SUCCESS)
        log_debug("device %d reset: its pool's address range was already released (%d)", device,
                  rc);
}

void device_pool_release(int device)
{
    uintptr_t base;
    int vmm;
    pool_t *pool = retire(device, &base, &vmm);
    if (!pool) return;
    shim_device_t *d = &shim_devices[device];
    aclError rc;
    if (vmm) {
        int failed = pool_release_backing(pool); /* no npupool lock held from here */
        rc = REAL(aclrtReleaseMemAddress) ? REAL(aclrtReleaseMemAddress)((void *)base)
                                          : ACL_ERROR_UNINITIALIZE;
        if (failed) rc = rc ? rc : ACL_ERROR_RT_INTERNAL_ERROR;
    } else {
        rc = REAL(aclrtFree) ? REAL(aclrtFree)((void *)base) : ACL_ERROR_UNINITIALIZE;
        wire_counter_add(&d->counters, real_frees, 1);
    }
    pool_destroy(pool);
    if (rc != ACL_SUCCESS)
        log_warn("aclFinalize: returning device %d's pool memory failed (%d)", device, rc);
}

size_t device_give_back(int device, size_t bytes, const char *call)
{
    if (!vocab_device_known(device)) return 0;
    pool_t *pool = device_pool_pin(device);
    if (!pool) return 0;
    size_t given = pool_give_back(pool, bytes);
    device_pool_unpin();
    if (!given) return 0;
    shim_device_t *d = &shim_devices[device];
    wire_counter_add(&d->counters, give_backs, 1);
    wire_counter_add(&d->counters, given_back_bytes, given);
    if (!__atomic_exchange_n(&d->gave_back_said, 1, __ATOMIC_RELAXED)) {
        char h[FMT_BYTES_LEN];
        log_info("device %d: the runtime refused %s; npupool gave back %s of the pool's free "
                 "chunks and retried it (said once; every give-back is counted in the reports' "
                 "give_backs)",
                 device, call, fmt_bytes(h, given));
    }
    return given;
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
    pin_fork_child();
    current_invalidate_all(); /* the child's threads confirm their devices with the runtime */
    pthread_cond_init(&shim_devices_cond, NULL);
    pthread_mutex_unlock(&shim_devices_lock);
}
