/* tests/fakeacl/fa_device.c — devices, contexts, threads and the runtime's lifetime: aclInit /
 * aclFinalize, aclrtSetDevice / GetDevice / ResetDevice / GetDeviceCount / SynchronizeDevice,
 * aclrtCreateContext / DestroyContext / SetCurrentContext / GetCurrentContext.
 *
 * Owns: the contexts and the per-thread current context (thread-local, NULL = none; a new thread
 * has none, as with CANN, so device-memory calls there return 107002 until it sets one).  The
 * thread's current device is its context's device.  As CANN does it:
 *   - aclrtSetDevice(d) binds d's default context (one per device, made by the first SetDevice;
 *     it cannot be destroyed);
 *   - aclrtCreateContext(&c, d) makes a context on d and binds it to the calling thread (CANN's
 *     rtCtxCreateEx "creates a context and associates it with the calling thread"); any thread
 *     may then bind it with aclrtSetCurrentContext, whose device becomes that thread's device;
 *   - aclrtDestroyContext(c): only created contexts (a default one, an unknown or destroyed
 *     handle -> 107002, NULL -> 100000); every thread bound to c has no context afterwards
 *     (107002: CANN does not document what a thread whose context is destroyed has; the fake
 *     takes the strict reading);
 *   - aclrtSetCurrentContext(NULL) -> 100000, a destroyed or unknown handle -> 107002;
 *     aclrtGetCurrentContext -> 107002 when the thread has none.
 * Contexts live in a fixed table (FA_MAX_CONTEXTS created contexts per process; more -> 207001,
 * CANN also limits them through its streams) and are never reused, so a stale handle is always
 * recognised; no malloc, so fork children are safe (see fa_table.c).
 *
 * Lifetime, as CANN's acl does it: aclInit twice -> 100002 (ACL_ERROR_REPEAT_INITIALIZE);
 * aclFinalize when not initialized (twice, or before any aclInit) -> 100037
 * (ACL_ERROR_REPEAT_FINALIZE).  The config path is not read.  Runtime calls do not require
 * aclInit (a guess that keeps test programs simple), and aclFinalize does not release device
 * memory: that is aclrtResetDevice's job (and the process exit's).
 *
 * aclrtResetDevice(d) releases every block and physical handle of d (charged bytes return to the
 * budget; mappings of its handles become PROT_NONE reserved space again) and unbinds the calling
 * thread's context if it is on d; other threads keep theirs (d stays current there) and may
 * allocate again, and contexts created on d stay usable (CANN asks for them to be destroyed
 * first).
 * Locking: fa_g.lock around the shared state and context creation; a context's state is an
 * atomic; the current context is thread-local.
 */
#include "fa_internal.h"

#define FA_MAX_CONTEXTS 4096 /* created contexts per process */

enum { CTX_UNUSED = 0, CTX_ALIVE = 1, CTX_DESTROYED = 2 };

struct fa_ctx {
    int dev;   /* its device; written before the handle is handed out */
    int state; /* CTX_* (atomic) */
};

static struct fa_ctx fa_default_ctx[FA_MAX_DEVICES]; /* default contexts: dev = index, alive */
static struct fa_ctx fa_ctxs[FA_MAX_CONTEXTS];       /* created contexts, in creation order */
static int fa_nctx;                                  /* fa_ctxs used (under fa_g.lock) */
static __thread struct fa_ctx *fa_cur_ctx;           /* this thread's context, NULL = none */

/* The context a handle names (default or created, alive or destroyed), or NULL. */
static struct fa_ctx *ctx_of(aclrtContext h)
{
    struct fa_ctx *c = h;
    if (c >= fa_default_ctx && c < fa_default_ctx + FA_MAX_DEVICES) return c;
    if (c >= fa_ctxs && c < fa_ctxs + FA_MAX_CONTEXTS &&
        ((uintptr_t)c - (uintptr_t)fa_ctxs) % sizeof *c == 0 &&
        __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != CTX_UNUSED)
        return c;
    return NULL;
}

static int ctx_alive(const struct fa_ctx *c)
{
    return c && __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == CTX_ALIVE;
}

int fa_current_device(void)
{
    const struct fa_ctx *c = fa_cur_ctx; /* dev is stored atomically: a reused context slot */
    return ctx_alive(c) ? __atomic_load_n(&c->dev, __ATOMIC_RELAXED) : -1;
}

int fa_device_valid(int32_t dev)
{
    /* fa_g.ndev is written once, in fa_init, before any caller can get here */
    return dev >= 0 && dev < fa_g.ndev;
}

aclError aclInit(const char *configPath)
{
    (void)configPath;
    fa_init();
    fa_count(FA_C_aclInit);
    fa_lock();
    int was = fa_g.initialized;
    fa_g.initialized = 1;
    fa_unlock();
    return was ? FA_ERROR_REPEAT_INITIALIZE : ACL_SUCCESS;
}

aclError aclFinalize(void)
{
    fa_init();
    fa_count(FA_C_aclFinalize);
    fa_lock();
    int was = fa_g.initialized;
    fa_g.initialized = 0;
    fa_unlock();
    return was ? ACL_SUCCESS : FA_ERROR_REPEAT_FINALIZE;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    fa_init();
    fa_count(FA_C_aclrtSetDevice);
    if (!fa_device_valid(deviceId)) return ACL_ERROR_RT_INVALID_DEVICEID;
    struct fa_ctx *c = &fa_default_ctx[deviceId];
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != CTX_ALIVE) { /* the first SetDevice */
        fa_lock();
        __atomic_store_n(&c->dev, deviceId, __ATOMIC_RELAXED);
        __atomic_store_n(&c->state, CTX_ALIVE, __ATOMIC_RELEASE);
        fa_unlock();
    }
    fa_cur_ctx = c;
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    fa_init();
    fa_count(FA_C_aclrtGetDevice);
    if (deviceId == NULL) return ACL_ERROR_INVALID_PARAM;
    int dev = fa_current_device();
    if (dev < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    *deviceId = dev;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    fa_init();
    fa_count(FA_C_aclrtGetDeviceCount);
    if (count == NULL) return ACL_ERROR_INVALID_PARAM;
    *count = (uint32_t)fa_g.ndev;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    fa_init();
    fa_count(FA_C_aclrtResetDevice);
    if (!fa_device_valid(deviceId)) return ACL_ERROR_RT_INVALID_DEVICEID;
    fa_lock();
    fa_release_device_blocks_locked(deviceId);
    fa_release_device_handles_locked(deviceId);
    fa_unlock();
    if (fa_current_device() == deviceId) fa_cur_ctx = NULL;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void)
{
    fa_init();
    fa_count(FA_C_aclrtSynchronizeDevice);
    if (fa_current_device() < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    fa_count(FA_C_sync);
    return ACL_SUCCESS;
}

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)
{
    fa_init();
    fa_count(FA_C_aclrtCreateContext);
    if (context == NULL) return ACL_ERROR_INVALID_PARAM;
    if (!fa_device_valid(deviceId)) return ACL_ERROR_RT_INVALID_DEVICEID;
    fa_lock();
    struct fa_ctx *c = fa_nctx < FA_MAX_CONTEXTS ? &fa_ctxs[fa_nctx++] : NULL;
    if (c) {
        __atomic_store_n(&c->dev, deviceId, __ATOMIC_RELAXED);
        __atomic_store_n(&c->state, CTX_ALIVE, __ATOMIC_RELEASE);
    }
    fa_unlock();
    if (!c) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    fa_cur_ctx = c;
    *context = c;
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context)
{
    fa_init();
    fa_count(FA_C_aclrtDestroyContext);
    if (context == NULL) return ACL_ERROR_INVALID_PARAM;
    struct fa_ctx *c = ctx_of(context);
    if (c == NULL || (c >= fa_default_ctx && c < fa_default_ctx + FA_MAX_DEVICES))
        return ACL_ERROR_RT_CONTEXT_NULL; /* unknown, or a default context */
    int alive = CTX_ALIVE;
    if (!__atomic_compare_exchange_n(&c->state, &alive, CTX_DESTROYED, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return ACL_ERROR_RT_CONTEXT_NULL; /* destroyed already */
    if (fa_cur_ctx == c) fa_cur_ctx = NULL;
    return ACL_SUCCESS;
}

aclError fa_bind_context(aclrtContext context)
{
    if (context == NULL) return ACL_ERROR_INVALID_PARAM;
    struct fa_ctx *c = ctx_of(context);
    if (!ctx_alive(c)) return ACL_ERROR_RT_CONTEXT_NULL;
    fa_cur_ctx = c;
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context)
{
    fa_init();
    fa_count(FA_C_aclrtSetCurrentContext);
    return fa_bind_context(context);
}

aclError aclrtGetCurrentContext(aclrtContext *context)
{
    fa_init();
    fa_count(FA_C_aclrtGetCurrentContext);
    if (context == NULL) return ACL_ERROR_INVALID_PARAM;
    if (!ctx_alive(fa_cur_ctx)) return ACL_ERROR_RT_CONTEXT_NULL;
    *context = fa_cur_ctx;
    return ACL_SUCCESS;
}
