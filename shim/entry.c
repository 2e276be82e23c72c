/* shim/entry.c — the ACL entry points npupool defines in front of libascendcl.so.
 *
 * Owns: the runtime's contract as the application sees it.
 *   - size 0 or NULL out-pointer -> 100000; aclrtFree(NULL) -> 100000.
 *   - the bytes that belong to a block: ALIGN_UP(size,32)+32 for aclrtMalloc / Cached / WithCfg,
 *     ALIGN_UP(size,32) for Align32 ("granted"); addresses 64-byte aligned (the pool's POOL_ALIGN).
 *   - a request the pool cannot serve: NPUPOOL_FALLBACK=1 asks the runtime, otherwise 207001
 *     (the only code torch_npu retries on).
 *   - aclrtFree never synchronises; aclrtFreeWithDevSync synchronises, then frees.
 *   - misuse (double free, interior pointer of a pool block) -> 207002, one `npupool:` line, a
 *     counter, and the pool unchanged; pointers npupool never handed out go to the runtime, whose
 *     answer is returned unchanged.
 * Order that matters: a block is forgotten by the ledger BEFORE it returns to the pool, so that
 * another thread cannot be handed the same address while the old record still exists.
 * Requests the pool does not serve (other policies: P2P, 1 GiB pages, DDR/read-only flags; a cfg
 * naming another device; device ids outside 0..NPUPOOL_MAX_DEVICES-1) pass through and are
 * recorded (under device -1).
 * Give-back: when the runtime answers 207001 to a request that does not go to the pool (a
 * pass-through, a fallback, an application's aclrtMallocPhysical or aclrtReserveMemAddress), the
 * device's pool gives free chunks back (device_give_back) and the call is retried once.
 * NPUPOOL_MODE=observe: every request goes to the runtime with the application's own arguments
 * and its answer is returned unchanged; successful ones are recorded (origin "observed") and
 * their frees forwarded; a refusal with 207001 gets the `oom` report (kind "runtime"); no pool
 * exists, aclrtGetMemInfo is the runtime's.  The thresholds then
 * measure the bytes a device's live observed allocations hold against its total HBM (asked once
 * per device, at its first observed allocation, with no npupool lock held).
 * The device of a request: the calling thread's current device, known from the device and
 * context calls hooked here (aclrtSetDevice, aclrtCreateContext, aclrtSetCurrentContext,
 * aclrtDestroyContext, aclrtResetDevice, aclFinalize: forwarded unchanged, then current.h learns
 * the thread's device from the runtime), else asked of the runtime (current.h).
 * The pool fast path (a known device, a pool, a block): no runtime call, no lock of npupool's own
 * besides the pool's and one ledger shard's, the counts in the thread's own record (tstate.h),
 * one clock read (observe_pool_alloc), the pin without a fence where membarrier exists (pin.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>

#include "clock.h"
#include "current.h"
#include "foreign.h"
#include "log.h"
#include "observe.h"
#include "options.h"
#include "real.h"
#include "report.h"
#include "shim.h"

#define EXPORT __attribute__((visibility("default")))

/* The real entry point behind `e`, called with the application's own arguments. */
static aclError forward_alloc(enum vocab_entry e, void **dev_ptr, size_t size,
                              aclrtMemMallocPolicy policy, aclrtMallocConfig *cfg)
{
    switch (e) {
    case VOCAB_MALLOC:
        if (REAL(aclrtMalloc)) return REAL(aclrtMalloc)(dev_ptr, size, policy);
        break;
    case VOCAB_MALLOC_ALIGN32:
        if (REAL(aclrtMallocAlign32)) return REAL(aclrtMallocAlign32)(dev_ptr, size, policy);
        break;
    case VOCAB_MALLOC_CACHED:
        if (REAL(aclrtMallocCached)) return REAL(aclrtMallocCached)(dev_ptr, size, policy);
        break;
    case VOCAB_MALLOC_WITH_CFG:
        if (REAL(aclrtMallocWithCfg)) return REAL(aclrtMallocWithCfg)(dev_ptr, size, policy, cfg);
        break;
    default: break;
    }
    log_error("%s: the real runtime does not provide it (is libascendcl.so loaded?)",
              vocab_entry_name(e));
    return ACL_ERROR_UNINITIALIZE;
}

/* Ordinary device HBM, which is what the pool holds. */
static int policy_is_poolable(aclrtMemMallocPolicy policy)
{
    unsigned p = (unsigned)policy;
    unsigned kind = p & 0xffu, flags = p & ~0xffu;
    if (kind != ACL_MEM_MALLOC_HUGE_FIRST && kind != ACL_MEM_MALLOC_HUGE_ONLY &&
        kind != ACL_MEM_MALLOC_NORMAL_ONLY)
        return 0;
    return (flags & ~(unsigned)ACL_MEM_TYPE_HIGH_BAND_WIDTH) == 0;
}

/* 1 when cfg asks for a device other than `device`. */
static int cfg_names_other_device(const aclrtMallocConfig *cfg, int device)
{
    if (!cfg || !cfg->attrs) return 0;
    for (size_t i = 0; i < cfg->numAttrs; i++)
        if (cfg->attrs[i].attr == ACL_RT_MEM_ATTR_DEVICE_ID &&
            (int64_t)cfg->attrs[i].value.deviceId != device)
            return 1;
    return 0;
}

/* The runtime refused `call` with rc on `device`: 1 when the pool gave chunks back, so that the
 * caller retries once (counted as a rescue when the retry succeeds: rescued()). */
static int give_back_for(aclError rc, int device, size_t bytes, const char *call)
{
    return rc == ACL_ERROR_RT_MEMORY_ALLOCATION && device_give_back(device, bytes, call) > 0;
}

static aclError rescued(aclError rc, int device)
{
    if (rc == ACL_SUCCESS) wire_counter_add(shim_counters_of(device), give_back_rescues, 1);
    return rc;
}

static aclError record_forwarded(enum vocab_entry e, void **dev_ptr, size_t size, size_t granted,
                                 aclrtMemMallocPolicy policy, aclrtMallocConfig *cfg, int device,
                                 enum vocab_origin origin, uint32_t stack)
{
    aclError rc = forward_alloc(e, dev_ptr, size, policy, cfg);
    wire_counters_t *c = shim_counters_of(device);
    wire_counter_add(c, real_allocs, 1);
    if (give_back_for(rc, device, granted, vocab_entry_name(e))) {
        rc = rescued(forward_alloc(e, dev_ptr, size, policy, cfg), device);
        wire_counter_add(c, real_allocs, 1);
    }
    if (rc != ACL_SUCCESS) return rc;
    foreign_rec_t rec = {.device = device, .origin = origin, .granted = granted};
    if (foreign_add((uintptr_t)*dev_ptr, &rec) != 0)
        log_warn("%s: no host memory to track %p; its free will be forwarded untracked",
                 vocab_entry_name(e), *dev_ptr);
    if (origin == VOCAB_FROM_FALLBACK) {
        wire_counter_add(c, fallback_allocs, 1);
        wire_counter_add(c, fallback_bytes, granted);
    } else if (origin == VOCAB_FROM_PASSTHROUGH) {
        wire_counter_add(c, passthrough_allocs, 1);
    }
    observe_alloc((uintptr_t)*dev_ptr, device, size, granted, e, origin, stack);
    return rc;
}

/* Observe mode's threshold figures per device: its total HBM (0 = not asked yet or unknown) and
 * the granted bytes of its live observed allocations.  Atomics, no lock. */
static size_t observed_total[NPUPOOL_MAX_DEVICES];
static size_t observed_live[NPUPOOL_MAX_DEVICES];

/* Observe mode: forward, record, and tell the thresholds.  No npupool lock held. */
static aclError observe_only(enum vocab_entry e, void **dev_ptr, size_t size, size_t granted,
                             aclrtMemMallocPolicy policy, aclrtMallocConfig *cfg, int device,
                             uint32_t stack)
{
    int known = vocab_device_known(device);
    if (known && !__atomic_load_n(&observed_total[device], __ATOMIC_RELAXED) &&
        REAL(aclrtGetMemInfo)) {
        size_t free_b = 0, total_b = 0;
        if (REAL(aclrtGetMemInfo)(ACL_HBM_MEM, &free_b, &total_b) == ACL_SUCCESS)
            __atomic_store_n(&observed_total[device], total_b, __ATOMIC_RELAXED);
    }
    aclError rc = record_forwarded(e, dev_ptr, size, granted, policy, cfg, device,
                                   VOCAB_FROM_OBSERVED, stack);
    if (rc == ACL_ERROR_RT_MEMORY_ALLOCATION) { /* the runtime's own OOM: its post-mortem */
        wire_counter_add(shim_counters_of(device), ooms, 1);
        observe_oom(e, device, size, granted, NULL, stack);
    }
    if (rc == ACL_SUCCESS && known) {
        size_t live = __atomic_add_fetch(&observed_live[device], granted, __ATOMIC_RELAXED);
        observe_usage(device, live, __atomic_load_n(&observed_total[device], __ATOMIC_RELAXED));
    }
    return rc;
}

/* An observed allocation was freed (or its device reset: granted = every byte). */
static void observed_gone(int device, size_t granted)
{
    if (!vocab_device_known(device)) return;
    size_t live = __atomic_load_n(&observed_live[device], __ATOMIC_RELAXED), left;
    do {
        left = live > granted ? live - granted : 0;
    } while (!__atomic_compare_exchange_n(&observed_live[device], &live, left, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    observe_usage(device, left, __atomic_load_n(&observed_total[device], __ATOMIC_RELAXED));
}

/* The threshold monitor's figures of a pool call (pool.h, pool_thread_mirror_writes): read
 * only when the call changed the pool's allocated bytes, since a call that crosses a level is
 * always one of those; used = capacity = 0 otherwise (no figures for the monitor). */
typedef struct usage_watch {
    int watched;    /* a threshold is watched */
    uint64_t moved; /* this thread's mirror writes before the call */
} usage_watch_t;

static inline usage_watch_t usage_watch_begin(void)
{
    usage_watch_t w = {report_usage_watched(), 0};
    if (w.watched) w.moved = pool_thread_mirror_writes();
    return w;
}

/* pre: the pool is pinned */
static inline void usage_watch_end(usage_watch_t w, pool_t *pool, size_t *used, size_t *capacity)
{
    *used = *capacity = 0;
    if (!w.watched || pool_thread_mirror_writes() == w.moved) return;
    *used = pool_allocated_bytes(pool);
    *capacity = pool_capacity(pool);
}

static aclError shim_alloc(enum vocab_entry e, void **dev_ptr, size_t size,
                           aclrtMemMallocPolicy policy, aclrtMallocConfig *cfg)
{
    shim_ensure_init();
    if (npupool_config.disable) return forward_alloc(e, dev_ptr, size, policy, cfg);
    if (!dev_ptr || size == 0) {
        log_warn("%s(devPtr=%p, size=%zu): %s; returning %d", vocab_entry_name(e), (void *)dev_ptr,
                 size, dev_ptr ? "size is 0" : "devPtr is NULL", ACL_ERROR_INVALID_PARAM);
        return ACL_ERROR_INVALID_PARAM;
    }
    int32_t device = -1;
    if (current_device(&device) != ACL_SUCCESS)
        return forward_alloc(e, dev_ptr, size, policy, cfg); /* the runtime gives its own error */
    uint32_t stack = observe_capture_stack();                /* before any lock */
    size_t granted = e == VOCAB_MALLOC_ALIGN32 ? ACL_ALIGN32_SIZE(size) : ACL_PADDED_SIZE(size);
    if (size > SIZE_MAX / 2) granted = SIZE_MAX / 2; /* cannot be served; keeps the sums sane */
    if (npupool_config.mode == NPUPOOL_MODE_OBSERVE)
        return observe_only(e, dev_ptr, size, granted, policy, cfg, vocab_device(device), stack);
    if (!vocab_device_known(device) || !policy_is_poolable(policy) ||
        (e == VOCAB_MALLOC_WITH_CFG && cfg_names_other_device(cfg, device)))
        return record_forwarded(e, dev_ptr, size, granted, policy, cfg, vocab_device(device),
                                VOCAB_FROM_PASSTHROUGH, stack);

    shim_device_t *d = &shim_devices[device];
    pool_t *pool = device_pool_pin_or_create(device);
    uintptr_t addr = 0;
    uint32_t *tag = NULL;
    uint64_t now = 0;
    pool_refusal_t why; /* written by every refusal (pool.h), read only after one */
    /* (requested <= granted for the pool: a size near SIZE_MAX was capped above) */
    usage_watch_t watch = usage_watch_begin();
    int prc =
        pool ? pool_alloc_tagged(pool, size < granted ? size : granted, granted, &addr, &why, &tag)
             : POOL_ENOMEM;
    size_t used = 0, capacity = 0;
    if (pool) {
        if (prc == POOL_OK) {        /* the record's handle into the block's tag, while pinned */
            now = clock_coarse_ns(); /* the one clock read of a pool allocation */
            uint32_t handle = observe_pool_record(addr, device, size, granted, e, stack, now);
            __atomic_store_n(tag, handle, __ATOMIC_RELAXED); /* a report may read it (pool.h) */
        }
        usage_watch_end(watch, pool, &used, &capacity);
        device_pool_unpin(); /* before observe_*: a report pins pools itself */
    }
    if (prc == POOL_OK) {
        *dev_ptr = (void *)addr;
        shim_count_pool(device, 0);
        observe_pool_alloc(addr, device, size, used, capacity, now);
        return ACL_SUCCESS;
    }
    aclError rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (npupool_config.fallback) {
        rc = record_forwarded(e, dev_ptr, size, granted, policy, cfg, device, VOCAB_FROM_FALLBACK,
                              stack);
        if (rc == ACL_SUCCESS) {
            log_debug("%s(%zu) on device %d served by the runtime: the pool had no block",
                      vocab_entry_name(e), size, device);
            return rc;
        }
        if (rc != ACL_ERROR_RT_MEMORY_ALLOCATION) return rc;
    }
    wire_counter_add(&d->counters, ooms, 1);
    observe_oom(e, device, size, granted, pool ? &why : NULL, stack);
    return ACL_ERROR_RT_MEMORY_ALLOCATION;
}

EXPORT aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return shim_alloc(VOCAB_MALLOC, devPtr, size, policy, NULL);
}

EXPORT aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return shim_alloc(VOCAB_MALLOC_ALIGN32, devPtr, size, policy, NULL);
}

EXPORT aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return shim_alloc(VOCAB_MALLOC_CACHED, devPtr, size, policy, NULL);
}

EXPORT aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy,
                                   aclrtMallocConfig *cfg)
{
    return shim_alloc(VOCAB_MALLOC_WITH_CFG, devPtr, size, policy, cfg);
}

static aclError forward_free(void *dev_ptr, int sync)
{
    if (sync && REAL(aclrtFreeWithDevSync)) return REAL(aclrtFreeWithDevSync)(dev_ptr);
    if (sync && REAL(aclrtSynchronizeDevice)) REAL(aclrtSynchronizeDevice)();
    if (REAL(aclrtFree)) return REAL(aclrtFree)(dev_ptr);
    log_error("aclrtFree: the real runtime does not provide it (is libascendcl.so loaded?)");
    return ACL_ERROR_UNINITIALIZE;
}

/* pool_free_tagged's callback: the block's free goes to the trace before another thread can be
 * handed the address, and the forget of its record (its tag names it) is parked (observe.c).
 * Under the pool lock (a large block, or a slot the fast path did not take) only the trace line
 * is written and the forget is parked once the lock is let go (deferred_tag): forgetting touches
 * a record allocated long ago, whose cache miss would lengthen the lock hold that every thread's
 * large blocks wait for (bench_shim, 8 threads, 512 B..1 MiB: 5.4x the one-thread cost per pair
 * with the record forgotten under the lock).  A parked record is a different one from any new
 * allocation's at the same address (tagged records are forgotten by handle, never by address),
 * and every reader of the ledger completes the parked forgets first, so nothing is lost or
 * confused.  With NPUPOOL_TRACE on, the trace line under the lock may be the one that fills its
 * buffer, which is then written out there. */
typedef struct forget_ctx {
    uintptr_t addr;
    int device;
    uint32_t deferred_tag; /* the record to forget after pool_free_tagged returns, 0 = none */
} forget_ctx_t;

static void forget_tagged(void *ctx, uint32_t tag, int locked)
{
    forget_ctx_t *fc = ctx;
    if (!locked)
        observe_pool_forget(tag, fc->addr, fc->device);
    else
        fc->deferred_tag = observe_pool_freed(tag, fc->addr, fc->device);
}

static aclError shim_free(void *dev_ptr, int sync)
{
    const char *name = sync ? "aclrtFreeWithDevSync" : "aclrtFree";
    shim_ensure_init();
    if (npupool_config.disable) return forward_free(dev_ptr, sync);
    if (!dev_ptr) {
        log_warn("%s(NULL): returning %d", name, ACL_ERROR_INVALID_PARAM);
        return ACL_ERROR_INVALID_PARAM;
    }
    uintptr_t addr = (uintptr_t)dev_ptr;
    int device = -1;
    pool_t *pool = device_pool_pin_by_address(addr, &device);
    if (pool) {
        shim_device_t *d = &shim_devices[device];
        if (sync && REAL(aclrtSynchronizeDevice)) REAL(aclrtSynchronizeDevice)();
        size_t granted = 0;
        usage_watch_t watch = usage_watch_begin();
        forget_ctx_t fc = {addr, device, 0}; /* the record goes before the block can be reused */
        int frc = pool_free_tagged(pool, addr, &granted, forget_tagged, &fc);
        if (fc.deferred_tag) observe_pool_forget_deferred(fc.deferred_tag, addr);
        size_t used, capacity;
        usage_watch_end(watch, pool, &used, &capacity);
        device_pool_unpin();
        if (frc == POOL_OK) {
            shim_count_pool(device, 1);
            observe_usage(device, used, capacity);
            return ACL_SUCCESS;
        }
        wire_counter_add(&d->counters, invalid_frees, 1);
        log_warn("%s(%p): not the start of a live block in device %d's pool (double free or "
                 "interior pointer); nothing freed, returning %d",
                 name, dev_ptr, device, ACL_ERROR_RT_MEMORY_FREE);
        return ACL_ERROR_RT_MEMORY_FREE;
    }
    foreign_rec_t rec;
    if (foreign_take(addr, &rec)) {
        wire_counters_t *c = shim_counters_of(rec.device);
        observe_forget(addr, rec.device, 1);
        aclError rc = forward_free(dev_ptr, sync);
        wire_counter_add(c, real_frees, 1);
        if (rc != ACL_SUCCESS) {
            foreign_add(addr, &rec); /* the runtime kept it: so do we */
            log_warn("%s(%p): the runtime refused to free its own allocation (%d)", name, dev_ptr,
                     rc);
            return rc;
        }
        if (rec.origin == VOCAB_FROM_FALLBACK) {
            wire_counter_add(c, fallback_frees, 1);
            wire_gauge_sub(&c->fallback_bytes, rec.granted);
        } else if (rec.origin == VOCAB_FROM_OBSERVED) {
            observed_gone(rec.device, rec.granted);
        }
        return rc;
    }
    aclError rc = forward_free(dev_ptr, sync);
    wire_counter_add(&shim_unknown_device_counters, forwarded_frees, 1);
    if (rc != ACL_SUCCESS) {
        wire_counter_add(&shim_unknown_device_counters, invalid_frees, 1);
        log_warn("%s(%p): pointer unknown to npupool; the runtime refused it too (%d)", name,
                 dev_ptr, rc);
    }
    return rc;
}

EXPORT aclError aclrtFree(void *devPtr) { return shim_free(devPtr, 0); }
EXPORT aclError aclrtFreeWithDevSync(void *devPtr) { return shim_free(devPtr, 1); }

static int attr_is_device_hbm(aclrtMemAttr attr)
{
    switch (attr) {
    case ACL_HBM_MEM:
    case ACL_HBM_MEM_HUGE:
    case ACL_HBM_MEM_NORMAL:
    case ACL_HBM_MEM_HUGE1G:
    case ACL_MEM_NORMAL:
    case ACL_MEM_HUGE:
    case ACL_MEM_HUGE1G: return 1;
    default: return 0;
    }
}

EXPORT aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)
{
    shim_ensure_init();
    if (!REAL(aclrtGetMemInfo)) return ACL_ERROR_UNINITIALIZE;
    aclError rc = REAL(aclrtGetMemInfo)(attr, free, total);
    if (rc != ACL_SUCCESS || npupool_config.disable || !attr_is_device_hbm(attr) ||
        npupool_config.mode == NPUPOOL_MODE_OBSERVE) /* no pool: the runtime's figures */
        return rc;
    int32_t device = -1;
    if (current_device(&device) != ACL_SUCCESS || !vocab_device_known(device)) return rc;
    pool_t *pool = device_pool_pin(device);
    if (!pool) return rc;
    /* The application may still allocate what the runtime has free plus what the pool has free. */
    pool_stats_t st;
    pool_get_stats(pool, &st);
    device_pool_unpin();
    size_t sum = *free + st.free_bytes;
    *free = sum > *total ? *total : sum;
    return rc;
}

/* What a device or context call returned, once the calling thread learned its device from the
 * runtime again (current.h); `everywhere`: the call may have ended contexts other threads are
 * bound to (a reset, a destroyed context, aclFinalize), so every thread confirms its device. */
static aclError device_call_done(aclError rc, int everywhere)
{
    if (npupool_config.disable) return rc;
    if (everywhere) current_invalidate_all();
    current_observed();
    return rc;
}

EXPORT aclError aclrtResetDevice(int32_t deviceId)
{
    shim_ensure_init();
    if (!REAL(aclrtResetDevice)) return ACL_ERROR_UNINITIALIZE;
    if (npupool_config.disable) return REAL(aclrtResetDevice)(deviceId);
    if (!vocab_device_known(deviceId)) return device_call_done(REAL(aclrtResetDevice)(deviceId), 1);
    observe_before_reset(deviceId); /* a report while the pool and its records still exist */
    aclError rc = device_call_done(REAL(aclrtResetDevice)(deviceId), 1);
    if (rc == ACL_SUCCESS) {
        /* The runtime released every allocation of the device, the pool's reservation included. */
        device_pool_drop(deviceId);
        size_t dropped = foreign_drop_device(deviceId);
        wire_counters_t *c = &shim_devices[deviceId].counters;
        __atomic_store_n(&c->fallback_bytes, 0, __ATOMIC_RELAXED);
        if (npupool_config.mode == NPUPOOL_MODE_OBSERVE) observed_gone(deviceId, SIZE_MAX);
        observe_after_reset(deviceId);
        log_info("device %d reset: pool dropped, %zu forwarded allocations forgotten", deviceId,
                 dropped);
    }
    return rc;
}

EXPORT aclError aclFinalize(void)
{
    shim_ensure_init();
    if (!REAL(aclFinalize)) return ACL_ERROR_UNINITIALIZE;
    if (npupool_config.disable) return REAL(aclFinalize)();
    observe_before_finalize();
    /* Give reservations back while the runtime still works.  Blocks still live now are leaks: they
     * have just been reported and stay in the ledger, so the exit report lists them too. */
    for (int dev = 0; dev < NPUPOOL_MAX_DEVICES; dev++)
        if (device_pool_peek(dev)) device_pool_release(dev);
    return device_call_done(REAL(aclFinalize)(), 1);
}

/* Device and context calls: forwarded unchanged (the application's arguments, the runtime's
 * answer), then the calling thread learns its device from the runtime (current.h).  Destroying a
 * context also unbinds it from other threads: they confirm theirs. */
EXPORT aclError aclrtSetDevice(int32_t deviceId)
{
    shim_ensure_init();
    if (!REAL(aclrtSetDevice)) return ACL_ERROR_UNINITIALIZE;
    return device_call_done(REAL(aclrtSetDevice)(deviceId), 0);
}

EXPORT aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)
{
    shim_ensure_init();
    if (!REAL(aclrtCreateContext)) return ACL_ERROR_UNINITIALIZE;
    return device_call_done(REAL(aclrtCreateContext)(context, deviceId), 0);
}

EXPORT aclError aclrtSetCurrentContext(aclrtContext context)
{
    shim_ensure_init();
    if (!REAL(aclrtSetCurrentContext)) return ACL_ERROR_UNINITIALIZE;
    return device_call_done(REAL(aclrtSetCurrentContext)(context), 0);
}

EXPORT aclError aclrtDestroyContext(aclrtContext context)
{
    shim_ensure_init();
    if (!REAL(aclrtDestroyContext)) return ACL_ERROR_UNINITIALIZE;
    return device_call_done(REAL(aclrtDestroyContext)(context), 1);
}

/* Virtual-memory calls: forwarded untouched, recorded for the ledger. */
EXPORT aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                                    const aclrtPhysicalMemProp *prop, uint64_t flags)
{
    shim_ensure_init();
    if (!REAL(aclrtMallocPhysical)) return ACL_ERROR_UNINITIALIZE;
    uint32_t stack = npupool_config.disable ? 0 : observe_capture_stack();
    aclError rc = REAL(aclrtMallocPhysical)(handle, size, prop, flags);
    int device = prop && prop->location.id <= INT32_MAX ? (int)prop->location.id : -1;
    if (!npupool_config.disable && give_back_for(rc, device, size, "aclrtMallocPhysical"))
        rc = rescued(REAL(aclrtMallocPhysical)(handle, size, prop, flags), device);
    if (rc == ACL_SUCCESS && !npupool_config.disable && handle) {
        observe_alloc((uintptr_t)*handle, vocab_device(device), size, size, VOCAB_MALLOC_PHYSICAL,
                      VOCAB_FROM_PASSTHROUGH, stack);
    }
    return rc;
}

EXPORT aclError aclrtFreePhysical(aclrtDrvMemHandle handle)
{
    shim_ensure_init();
    if (!REAL(aclrtFreePhysical)) return ACL_ERROR_UNINITIALIZE;
    if (npupool_config.disable || !handle) return REAL(aclrtFreePhysical)(handle);
    observe_forget((uintptr_t)handle, -1, 0);
    return REAL(aclrtFreePhysical)(handle);
}

EXPORT aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                            uint64_t flags)
{
    shim_ensure_init();
    if (!REAL(aclrtMapMem)) return ACL_ERROR_UNINITIALIZE;
    uint32_t stack = npupool_config.disable ? 0 : observe_capture_stack();
    aclError rc = REAL(aclrtMapMem)(virPtr, size, offset, handle, flags);
    if (rc == ACL_SUCCESS && !npupool_config.disable) {
        int32_t device = -1;
        current_device(&device);
        observe_alloc((uintptr_t)virPtr, vocab_device(device), size, size, VOCAB_MAP_MEM,
                      VOCAB_FROM_PASSTHROUGH, stack);
    }
    return rc;
}

EXPORT aclError aclrtUnmapMem(void *virPtr)
{
    shim_ensure_init();
    if (!REAL(aclrtUnmapMem)) return ACL_ERROR_UNINITIALIZE;
    if (npupool_config.disable || !virPtr) return REAL(aclrtUnmapMem)(virPtr);
    observe_forget((uintptr_t)virPtr, -1, 0);
    return REAL(aclrtUnmapMem)(virPtr);
}

/* An application's own address range: forwarded; a refusal is answered by a give-back of one
 * chunk of the current device's pool (a reservation takes physical memory only for its page
 * tables) and one retry, unless the range is larger than the device's memory (then the refusal
 * cannot be for want of physical memory). */
EXPORT aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment,
                                       void *expectPtr, uint64_t flags)
{
    shim_ensure_init();
    if (!REAL(aclrtReserveMemAddress)) return ACL_ERROR_UNINITIALIZE;
    aclError rc = REAL(aclrtReserveMemAddress)(virPtr, size, alignment, expectPtr, flags);
    int32_t device = -1;
    size_t free_b = 0, total_b = 0;
    if (rc == ACL_ERROR_RT_MEMORY_ALLOCATION && !npupool_config.disable &&
        current_device(&device) == ACL_SUCCESS && REAL(aclrtGetMemInfo) &&
        REAL(aclrtGetMemInfo)(ACL_HBM_MEM, &free_b, &total_b) == ACL_SUCCESS && size <= total_b &&
        give_back_for(rc, device, 1, "aclrtReserveMemAddress"))
        rc = rescued(REAL(aclrtReserveMemAddress)(virPtr, size, alignment, expectPtr, flags),
                     device);
    return rc;
}

/* Hidden aliases (see real.h): the shim's own addresses for dlsym substitution. */
#define DEFINE_ALIAS(name) extern __typeof__(name) shim_##name __attribute__((alias(#name)));
SHIM_HOOKS(DEFINE_ALIAS)
#undef DEFINE_ALIAS
