/* tests/unit/test_fakeacl.c — cmocka test of the fake runtime (build/fakeacl/libascendcl.so).
 *
 * Owns: the checks that the fake keeps the ACL contract the shim's tests rely on: error codes,
 * HBM charging per entry point and policy, budget exhaustion, reset, GetMemInfo, data through
 * device pointers and VMM mappings, fault injection, counters, the FAKEACL_STATS file, threads,
 * fork, and the FAKEACL_* environment (through `--probe`: the binary re-executes itself with a
 * chosen environment and prints what it sees).  Every test ends with fakeacl_check() == 0 and every
 * device reset to empty (teardown).  Assertions stay on the main thread; workers report back.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "../fakeacl/fakeacl_ctl.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define SENTINEL ((void *)0x5e5e5e5e)
#define REPEAT_INITIALIZE 100002
#define REPEAT_FINALIZE 100037

static size_t g_budget0; /* budget of every device at start (restored by teardown) */

/* ---- helpers ---------------------------------------------------------------------------------- */
typedef aclError (*malloc_fn)(void **, size_t, aclrtMemMallocPolicy);

static aclError with_cfg_null(void **p, size_t n, aclrtMemMallocPolicy pol)
{
    return aclrtMallocWithCfg(p, n, pol, NULL);
}

static const struct entry {
    const char *name; /* counter name */
    malloc_fn fn;     /* the entry point (WithCfg with cfg = NULL) */
    int padded;       /* 1: ALIGN_UP(size,32)+32 belongs to the block; 0: ALIGN_UP(size,32) */
} entries[] = {
    {"aclrtMalloc", aclrtMalloc, 1},
    {"aclrtMallocCached", aclrtMallocCached, 1},
    {"aclrtMallocAlign32", aclrtMallocAlign32, 0},
    {"aclrtMallocWithCfg", with_cfg_null, 1},
};
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))

static int is_unmapped(const void *p)
{
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
    return msync((void *)page, 4096, MS_ASYNC) != 0 && errno == ENOMEM;
}

static int setup(void **state)
{
    (void)state;
    fakeacl_fail_nth_alloc(0);
    fakeacl_fail_nth_physical(0);
    fakeacl_fail_nth_map(0);
    fakeacl_fail_above(0);
    return aclrtSetDevice(0) == ACL_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fakeacl_fail_nth_alloc(0);
    fakeacl_fail_nth_physical(0);
    fakeacl_fail_nth_map(0);
    fakeacl_fail_above(0);
    assert_int_equal(fakeacl_check(), 0);
    for (int d = 0; d < fakeacl_device_count(); d++) {
        assert_int_equal(aclrtResetDevice(d), ACL_SUCCESS);
        assert_int_equal(fakeacl_charged(d), 0);
        assert_int_equal(fakeacl_live(d), 0);
        assert_int_equal(fakeacl_set_budget(d, g_budget0), 0);
    }
    assert_int_equal(fakeacl_check(), 0);
    return 0;
}

/* ---- devices, threads, lifetime ------------------------------------------------------------------ */
struct nodev_result {
    aclError get, malloc_, cfg_null, cfg_dev1, free_other, meminfo, memcpy_, memset_, sync,
        freesync;
    aclError set1, get_after;
    int32_t dev_after;
    void *p;       /* freed by the thread: proves aclrtFree needs no current device */
    void *cfg_ptr; /* allocated on device 1 through the DEVICE_ID attribute */
};

static void *nodev_thread(void *arg)
{
    struct nodev_result *r = arg;
    int32_t dev = -1;
    void *p = SENTINEL;
    size_t f, t;
    char buf[16] = {0};
    r->get = aclrtGetDevice(&dev);
    r->malloc_ = aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST);
    r->cfg_null = aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, NULL);
    aclrtMallocAttribute a = {.attr = ACL_RT_MEM_ATTR_DEVICE_ID, .value.deviceId = 1};
    aclrtMallocConfig cfg = {&a, 1};
    r->cfg_dev1 = aclrtMallocWithCfg(&r->cfg_ptr, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg);
    r->meminfo = aclrtGetMemInfo(ACL_HBM_MEM, &f, &t);
    r->memcpy_ = aclrtMemcpy(buf, sizeof(buf), "abc", 3, ACL_MEMCPY_HOST_TO_HOST);
    r->memset_ = aclrtMemset(buf, sizeof(buf), 0, 4);
    r->sync = aclrtSynchronizeDevice();
    r->freesync = aclrtFreeWithDevSync(r->p);
    r->free_other = aclrtFree(r->p);
    r->set1 = aclrtSetDevice(1);
    r->get_after = aclrtGetDevice(&r->dev_after);
    return NULL;
}

static void test_devices_and_threads(void **state)
{
    (void)state;
    int n = fakeacl_device_count();
    assert_true(n >= 2);
    uint32_t cnt = 0;
    assert_int_equal(aclrtGetDeviceCount(&cnt), ACL_SUCCESS);
    assert_int_equal(cnt, (uint32_t)n);
    assert_int_equal(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtSetDevice(n), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtResetDevice(n), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtResetDevice(-5), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    int32_t dev = -1;
    assert_int_equal(aclrtGetDevice(&dev), ACL_SUCCESS);
    assert_int_equal(dev, 0); /* a bad SetDevice left the current device alone */

    struct nodev_result r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(aclrtMalloc(&r.p, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, nodev_thread, &r), 0);
    pthread_join(th, NULL);
    assert_int_equal(r.get, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.malloc_, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.cfg_null, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.cfg_dev1, ACL_SUCCESS);
    assert_int_equal(r.meminfo, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.memcpy_, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.memset_, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.sync, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.freesync, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(r.free_other, ACL_SUCCESS);
    assert_int_equal(r.set1, ACL_SUCCESS);
    assert_int_equal(r.get_after, ACL_SUCCESS);
    assert_int_equal(r.dev_after, 1);
    assert_int_equal(fakeacl_owner(r.cfg_ptr, 64), 1);
    /* the other thread's SetDevice(1) did not move this thread */
    assert_int_equal(aclrtGetDevice(&dev), ACL_SUCCESS);
    assert_int_equal(dev, 0);
    assert_int_equal(aclrtFree(r.cfg_ptr), ACL_SUCCESS);
    assert_int_equal(fakeacl_live(1), 0);
}

/* A context created on another thread, bound here: this thread's device becomes its device. */
struct ctx_result {
    aclrtContext ctx;           /* made on the main thread, on device 1 */
    aclError set, get, malloc_; /* what this thread saw */
    int32_t dev;                /* its device after binding */
    void *p;                    /* allocated on it */
    aclError after_destroy;     /* aclrtGetDevice once main destroyed ctx */
    pthread_barrier_t *bar;     /* main destroys ctx between the two waits */
};

static void *ctx_thread(void *arg)
{
    struct ctx_result *r = arg;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS); /* a thread of device 0 */
    r->set = aclrtSetCurrentContext(r->ctx);
    r->get = aclrtGetDevice(&r->dev);
    r->malloc_ = aclrtMalloc(&r->p, 64, ACL_MEM_MALLOC_HUGE_FIRST);
    pthread_barrier_wait(r->bar);
    pthread_barrier_wait(r->bar);
    int32_t d = -1;
    r->after_destroy = aclrtGetDevice(&d);
    return NULL;
}

static void test_contexts(void **state)
{
    (void)state;
    aclrtContext def0 = NULL, def1 = NULL, c1 = NULL, c0 = NULL, cur = NULL;
    int32_t dev = -1;
    assert_int_equal(aclrtGetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetCurrentContext(&def0), ACL_SUCCESS); /* setup: SetDevice(0) */
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(aclrtGetCurrentContext(&def1), ACL_SUCCESS);
    assert_true(def0 != def1);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    assert_ptr_equal(cur, def0); /* one default context per device */

    /* creation binds the new context: device 1 now */
    assert_int_equal(aclrtCreateContext(NULL, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtCreateContext(&c1, fakeacl_device_count()),
                     ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtCreateContext(&c1, 1), ACL_SUCCESS);
    assert_int_equal(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    assert_ptr_equal(cur, c1);
    assert_int_equal(aclrtGetDevice(&dev), ACL_SUCCESS);
    assert_int_equal(dev, 1);
    void *p = NULL;
    assert_int_equal(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(fakeacl_owner(p, 64), 1);
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);

    /* switching contexts switches devices; a default context can be bound again */
    assert_int_equal(aclrtCreateContext(&c0, 0), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&dev), ACL_SUCCESS);
    assert_int_equal(dev, 0);
    assert_int_equal(aclrtSetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtSetCurrentContext((aclrtContext)&dev), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtSetCurrentContext(c1), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&dev), ACL_SUCCESS);
    assert_int_equal(dev, 1);
    assert_int_equal(aclrtSetCurrentContext(def0), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&dev), ACL_SUCCESS);
    assert_int_equal(dev, 0);

    /* another thread of device 0 binds c1: its allocations go to device 1 */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    struct ctx_result r = {.ctx = c1, .bar = &bar};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, ctx_thread, &r), 0);
    pthread_barrier_wait(&bar);
    /* destroying c1 leaves the threads bound to it without a context */
    assert_int_equal(aclrtDestroyContext(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyContext(def0), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtDestroyContext(c1), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyContext(c1), ACL_ERROR_RT_CONTEXT_NULL);
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    assert_int_equal(r.set, ACL_SUCCESS);
    assert_int_equal(r.get, ACL_SUCCESS);
    assert_int_equal(r.dev, 1);
    assert_int_equal(r.malloc_, ACL_SUCCESS);
    assert_int_equal(fakeacl_owner(r.p, 64), 1);
    assert_int_equal(aclrtFree(r.p), ACL_SUCCESS);
    assert_int_equal(r.after_destroy, ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtSetCurrentContext(c1), ACL_ERROR_RT_CONTEXT_NULL);

    /* destroying the calling thread's own context */
    assert_int_equal(aclrtSetCurrentContext(c0), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyContext(c0), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
}

static void test_init_finalize(void **state)
{
    (void)state;
    aclError first = aclInit(NULL);
    assert_true(first == ACL_SUCCESS || first == REPEAT_INITIALIZE);
    assert_int_equal(aclInit("/nonexistent.json"), REPEAT_INITIALIZE);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    assert_int_equal(aclFinalize(), REPEAT_FINALIZE);
    /* the runtime keeps working after aclFinalize, and can be initialized again */
    void *p = NULL;
    assert_int_equal(aclrtMalloc(&p, 10, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_int_equal(aclInit(NULL), REPEAT_INITIALIZE);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);
}

/* ---- allocation parameters and charging ------------------------------------------------------------ */
static void test_param_errors(void **state)
{
    (void)state;
    size_t before = fakeacl_charged(0);
    for (size_t i = 0; i < NENTRIES; i++) {
        void *p = SENTINEL;
        uint64_t calls = fakeacl_count(entries[i].name);
        assert_int_equal(entries[i].fn(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST),
                         ACL_ERROR_INVALID_PARAM);
        assert_int_equal(entries[i].fn(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
        assert_int_equal(entries[i].fn(&p, 64, (aclrtMemMallocPolicy)8), ACL_ERROR_INVALID_PARAM);
        assert_int_equal(entries[i].fn(&p, 64, (aclrtMemMallocPolicy)0xff),
                         ACL_ERROR_INVALID_PARAM);
        assert_int_equal(entries[i].fn(&p, 64, (aclrtMemMallocPolicy)(0x1000 | 9)),
                         ACL_ERROR_INVALID_PARAM);
        assert_ptr_equal(p, SENTINEL);
        assert_int_equal(fakeacl_count(entries[i].name), calls + 5);
    }
    void *p = SENTINEL;
    aclrtMallocConfig bad = {NULL, 1};
    assert_int_equal(aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, &bad),
                     ACL_ERROR_INVALID_PARAM);
    aclrtMallocAttribute a = {.attr = (aclrtMallocAttrType)7};
    aclrtMallocConfig unknown = {&a, 1};
    assert_int_equal(aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, &unknown),
                     ACL_ERROR_INVALID_PARAM);
    a.attr = ACL_RT_MEM_ATTR_DEVICE_ID;
    a.value.deviceId = (uint32_t)fakeacl_device_count();
    assert_int_equal(aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, &unknown),
                     ACL_ERROR_RT_INVALID_DEVICEID);
    assert_ptr_equal(p, SENTINEL);
    /* an absurd size is out of memory, not a crash */
    assert_int_equal(aclrtMalloc(&p, SIZE_MAX, ACL_MEM_MALLOC_HUGE_FIRST),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(aclrtMallocAlign32(&p, SIZE_MAX - 40, ACL_MEM_MALLOC_HUGE1G_ONLY),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(p, SENTINEL);
    assert_int_equal(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFreeWithDevSync(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(fakeacl_charged(0), before);
}

static void test_charging_rules(void **state)
{
    (void)state;
    static const struct {
        int entry;       /* index into entries[] */
        size_t size;     /* bytes requested */
        unsigned policy; /* aclrtMemMallocPolicy value, flags included */
        size_t charge;   /* bytes the budget must lose */
    } cases[] = {
        {0, 1, ACL_MEM_MALLOC_HUGE_FIRST, 4 * KiB},
        {0, 4064, ACL_MEM_MALLOC_HUGE_FIRST, 4 * KiB},
        {0, 4065, ACL_MEM_MALLOC_HUGE_FIRST, 8 * KiB},
        {0, MiB - 32, ACL_MEM_MALLOC_HUGE_FIRST, MiB},
        {0, MiB - 31, ACL_MEM_MALLOC_HUGE_FIRST, 2 * MiB},
        {0, MiB, ACL_MEM_MALLOC_HUGE_FIRST_P2P, 2 * MiB},
        {0, 3 * MiB, ACL_MEM_MALLOC_HUGE_FIRST, 4 * MiB},
        {2, MiB, ACL_MEM_MALLOC_HUGE_FIRST, MiB},
        {2, MiB + 1, ACL_MEM_MALLOC_HUGE_FIRST_P2P, 2 * MiB},
        {2, 31, ACL_MEM_MALLOC_NORMAL_ONLY, 4 * KiB},
        {2, 4097, ACL_MEM_MALLOC_NORMAL_ONLY, 8 * KiB},
        {1, 1, ACL_MEM_MALLOC_HUGE_ONLY, 2 * MiB},
        {1, 2 * MiB - 32, ACL_MEM_MALLOC_HUGE_ONLY, 2 * MiB},
        {0, 2 * MiB - 31, ACL_MEM_MALLOC_HUGE_ONLY_P2P, 4 * MiB},
        {3, 5000, ACL_MEM_MALLOC_NORMAL_ONLY, 8 * KiB},
        {3, 4064, ACL_MEM_MALLOC_NORMAL_ONLY_P2P, 4 * KiB},
        {0, 1, ACL_MEM_MALLOC_HUGE1G_ONLY, GiB},
        {2, GiB, ACL_MEM_MALLOC_HUGE1G_ONLY_P2P, GiB},
        {2, GiB + 1, ACL_MEM_MALLOC_HUGE1G_ONLY, 2 * GiB},
        {0, 1, ACL_MEM_MALLOC_HUGE_ONLY | ACL_MEM_TYPE_HIGH_BAND_WIDTH, 2 * MiB},
        {1, 16, ACL_MEM_MALLOC_HUGE_FIRST | ACL_MEM_ACCESS_USER_SPACE_READONLY, 4 * KiB},
        {0, 16, ACL_MEM_MALLOC_NORMAL_ONLY | ACL_MEM_TYPE_LOW_BAND_WIDTH, 4 * KiB},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct entry *e = &entries[cases[i].entry];
        size_t before = fakeacl_charged(0), f0, t0, f1, t1;
        uint64_t allocs = fakeacl_count("device_allocs"), bytes = fakeacl_count("bytes_charged");
        assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &f0, &t0), ACL_SUCCESS);
        void *p = NULL;
        aclError rc = e->fn(&p, cases[i].size, (aclrtMemMallocPolicy)cases[i].policy);
        if (rc != ACL_SUCCESS)
            fail_msg("case %zu: %s(%zu, %#x) -> %d", i, e->name, cases[i].size, cases[i].policy,
                     rc);
        size_t block = e->padded ? ACL_PADDED_SIZE(cases[i].size) : ACL_ALIGN32_SIZE(cases[i].size);
        if (fakeacl_charged(0) - before != cases[i].charge)
            fail_msg("case %zu: %s(%zu, %#x) charged %zu, want %zu", i, e->name, cases[i].size,
                     cases[i].policy, fakeacl_charged(0) - before, cases[i].charge);
        assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &f1, &t1), ACL_SUCCESS);
        assert_int_equal(t1, t0);
        assert_int_equal(f0 - f1, cases[i].charge);
        assert_int_equal(fakeacl_count("device_allocs"), allocs + 1);
        assert_int_equal(fakeacl_count("bytes_charged"), bytes + cases[i].charge);
        assert_int_equal((uintptr_t)p % 64, 0);
        /* the whole block belongs to it (readable and writable), and no byte more */
        assert_int_equal(fakeacl_owner(p, block), 0);
        assert_int_equal(fakeacl_owner(p, block + 1), -1);
        ((volatile char *)p)[0] = 1;
        ((volatile char *)p)[block - 1] = 2;
        assert_int_equal(aclrtFree(p), ACL_SUCCESS);
        assert_int_equal(fakeacl_charged(0), before);
    }
}

static void test_budget_exhaustion(void **state)
{
    (void)state;
    fakeacl_reset_counts(); /* peaks restart from the current charge (0) */
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(fakeacl_set_budget(1, 10 * MiB), 0);
    size_t f, t;
    void *a = NULL, *b = NULL, *c = SENTINEL, *d = NULL;
    assert_int_equal(aclrtMalloc(&a, 4 * MiB - 32, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&b, 4 * MiB - 32, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t), ACL_SUCCESS);
    assert_int_equal(f, 2 * MiB);
    assert_int_equal(t, 10 * MiB);
    uint64_t fails = fakeacl_count("alloc_failures"), allocs = fakeacl_count("device_allocs");
    uint64_t inj = fakeacl_count("injected_failures");
    assert_int_equal(aclrtMalloc(&c, 4 * MiB - 32, ACL_MEM_MALLOC_HUGE_ONLY),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(c, SENTINEL);
    assert_int_equal(fakeacl_count("alloc_failures"), fails + 1);
    assert_int_equal(fakeacl_count("injected_failures"),
                     inj); /* the budget refused it, not a fault */
    assert_int_equal(fakeacl_count("device_allocs"), allocs);
    /* exactly the rest fits; then nothing does */
    assert_int_equal(aclrtMallocAlign32(&d, 2 * MiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t), ACL_SUCCESS);
    assert_int_equal(f, 0);
    assert_int_equal(aclrtMalloc(&c, 1, ACL_MEM_MALLOC_NORMAL_ONLY),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    aclrtPhysicalMemProp prop = {.location = {.id = 1, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    aclrtDrvMemHandle h = SENTINEL;
    assert_int_equal(aclrtMallocPhysical(&h, 2 * MiB, &prop, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(h, SENTINEL);
    assert_ptr_equal(c, SENTINEL);
    /* device 0 is not affected */
    void *e = NULL;
    assert_int_equal(aclrtMallocWithCfg(&e, 4 * MiB, ACL_MEM_MALLOC_HUGE_ONLY,
                                        &(aclrtMallocConfig){&(aclrtMallocAttribute){
                                                                 .attr = ACL_RT_MEM_ATTR_DEVICE_ID,
                                                                 .value.deviceId = 0},
                                                             1}),
                     ACL_SUCCESS);
    assert_int_equal(fakeacl_owner(e, 1), 0);
    assert_int_equal(fakeacl_set_budget(1, 9 * MiB), -1); /* below what is charged */
    assert_int_equal(fakeacl_set_budget(1, 0), -1);
    assert_int_equal(fakeacl_set_budget(7777, 10 * MiB), -1);
    /* freeing gives the budget back */
    assert_int_equal(aclrtFree(b), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&c, 4 * MiB - 32, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(1), 10 * MiB);
    assert_int_equal(fakeacl_count("peak_dev1"), 10 * MiB);
    assert_int_equal(aclrtFree(a), ACL_SUCCESS);
    assert_int_equal(aclrtFree(c), ACL_SUCCESS);
    assert_int_equal(aclrtFree(d), ACL_SUCCESS);
    assert_int_equal(aclrtFree(e), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(1), 0);
}

static void test_huge_reservation_is_free(void **state)
{
    (void)state;
    if (fakeacl_budget(0) < 52 * GiB) skip();
    void *p = NULL;
    /* 51 GiB of private writable memory on a machine with less RAM: only MAP_NORESERVE makes this work */
    assert_int_equal(aclrtMalloc(&p, 51 * GiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(0), 51 * GiB + 2 * MiB);
    char *c = p;
    c[0] = 'a';
    c[51 * GiB - 1] = 'z';
    c[25 * GiB] = 'm';
    assert_int_equal(c[0] + c[51 * GiB - 1] + c[25 * GiB], 'a' + 'z' + 'm');
    void *q = SENTINEL;
    assert_int_equal(aclrtMalloc(&q, 13 * GiB, ACL_MEM_MALLOC_HUGE_FIRST),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);
    assert_true(is_unmapped(c + 25 * GiB));
}

/* ---- data, copies, frees ----------------------------------------------------------------------------- */
static void test_data_and_copies(void **state)
{
    (void)state;
    const size_t n = 3 * MiB;
    unsigned char *host = malloc(n), *back = malloc(n);
    assert_non_null(host);
    assert_non_null(back);
    for (size_t i = 0; i < n; i++) host[i] = (unsigned char)(i * 131 + 7);
    void *d1 = NULL, *d2 = NULL;
    assert_int_equal(aclrtMalloc(&d1, n, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMallocAlign32(&d2, n, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpy(d1, n, host, n, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    assert_int_equal(aclrtMemset(d1, n, 0x1AB, 4096), ACL_SUCCESS); /* value is taken as a byte */
    assert_int_equal(aclrtMemcpy(d2, n, d1, n, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpy(back, n, d2, n, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    for (size_t i = 0; i < 4096; i++) assert_int_equal(back[i], 0xAB);
    assert_memory_equal(back + 4096, host + 4096, n - 4096);
    /* the pointer is plain memory too */
    ((unsigned char *)d1)[n - 1] = 0x5A;
    assert_int_equal(aclrtMemcpy(back, 1, (char *)d1 + n - 1, 1, ACL_MEMCPY_DEFAULT), ACL_SUCCESS);
    assert_int_equal(back[0], 0x5A);
    assert_int_equal(aclrtMemcpy(back, 16, host, 16, ACL_MEMCPY_HOST_TO_HOST), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpy(back, 0, host, 0, ACL_MEMCPY_HOST_TO_HOST), ACL_SUCCESS);
    /* bounds and arguments */
    uint64_t calls = fakeacl_count("aclrtMemcpy");
    back[0] = 0x11;
    assert_int_equal(aclrtMemcpy(back, 15, host, 16, ACL_MEMCPY_HOST_TO_HOST),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(NULL, 16, host, 16, ACL_MEMCPY_HOST_TO_DEVICE),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(back, 16, NULL, 16, ACL_MEMCPY_DEVICE_TO_HOST),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(back, 16, host, 16, (aclrtMemcpyKind)5), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemcpy(back, 16, host, 16, (aclrtMemcpyKind)-1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(back[0], 0x11);
    assert_int_equal(fakeacl_count("aclrtMemcpy"), calls + 5);
    assert_int_equal(aclrtMemset(d1, 10, 0, 11), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemset(NULL, 10, 0, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(((unsigned char *)d1)[0], 0xAB);
    assert_int_equal(aclrtFree(d1), ACL_SUCCESS);
    assert_int_equal(aclrtFree(d2), ACL_SUCCESS);
    free(host);
    free(back);
}

static void test_free_errors(void **state)
{
    (void)state;
    void *p = NULL;
    int on_stack = 0;
    assert_int_equal(aclrtMalloc(&p, 10000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    memset(p, 0x77, 10000);
    size_t charged = fakeacl_charged(0);
    uint64_t frees = fakeacl_count("device_frees");
    assert_int_equal(aclrtFree((char *)p + 64), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFree((char *)p + 1), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFree(&on_stack), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFreeWithDevSync((char *)p + 4096), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFreeHost(p),
                     ACL_ERROR_RT_MEMORY_FREE); /* device memory is not host memory */
    assert_int_equal(fakeacl_charged(0), charged);
    assert_int_equal(fakeacl_count("device_frees"), frees);
    assert_int_equal(((unsigned char *)p)[9999], 0x77); /* still mapped and intact */
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);
    assert_true(is_unmapped(p));
    assert_int_equal(aclrtFree(p), ACL_ERROR_RT_MEMORY_FREE); /* double free */
    assert_int_equal(fakeacl_count("device_frees"), frees + 1);
}

static void test_free_with_dev_sync(void **state)
{
    (void)state;
    void *a = NULL, *b = NULL;
    assert_int_equal(aclrtMalloc(&a, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&b, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    uint64_t sync = fakeacl_count("sync"), sd = fakeacl_count("aclrtSynchronizeDevice");
    uint64_t fr = fakeacl_count("aclrtFree"), fs = fakeacl_count("aclrtFreeWithDevSync");
    assert_int_equal(aclrtFree(a), ACL_SUCCESS);
    assert_int_equal(fakeacl_count("sync"), sync); /* aclrtFree does not synchronize */
    assert_int_equal(aclrtFreeWithDevSync(b), ACL_SUCCESS);
    assert_int_equal(fakeacl_count("sync"), sync + 1);
    assert_int_equal(fakeacl_count("aclrtSynchronizeDevice"), sd);
    assert_int_equal(fakeacl_count("aclrtFree"), fr + 1);
    assert_int_equal(fakeacl_count("aclrtFreeWithDevSync"), fs + 1);
    assert_int_equal(aclrtSynchronizeDevice(), ACL_SUCCESS);
    assert_int_equal(fakeacl_count("sync"), sync + 2);
    assert_int_equal(fakeacl_count("aclrtSynchronizeDevice"), sd + 1);
    assert_int_equal(fakeacl_live(0), 0);
}

static void test_malloc_with_cfg(void **state)
{
    (void)state;
    void *p = NULL, *q = NULL;
    aclrtMallocAttribute attrs[3] = {
        {.attr = ACL_RT_MEM_ATTR_MODULE_ID, .value.moduleId = 33},
        {.attr = ACL_RT_MEM_ATTR_DEVICE_ID, .value.deviceId = 1},
        {.attr = ACL_RT_MEM_ATTR_VA_FLAG, .value.vaFlag = 1},
    };
    aclrtMallocConfig cfg = {attrs, 3};
    assert_int_equal(aclrtMallocWithCfg(&p, 3 * MiB, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(1), 4 * MiB);
    assert_int_equal(fakeacl_charged(0), 0);
    assert_int_equal(fakeacl_owner(p, ACL_PADDED_SIZE(3 * MiB)), 1);
    aclrtMallocConfig empty = {NULL, 0};
    assert_int_equal(aclrtMallocWithCfg(&q, 64, ACL_MEM_MALLOC_HUGE_FIRST, &empty), ACL_SUCCESS);
    assert_int_equal(fakeacl_owner(q, 96),
                     0); /* ALIGN_UP(64,32)+32: WithCfg pads like aclrtMalloc */
    assert_int_equal(fakeacl_owner(q, 97), -1);
    int32_t dev = -1;
    assert_int_equal(aclrtGetDevice(&dev), ACL_SUCCESS);
    assert_int_equal(dev, 0); /* the attribute did not change the current device */
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);
    assert_int_equal(aclrtFree(q), ACL_SUCCESS);
}

/* ---- reset ----------------------------------------------------------------------------------------------- */
static void test_reset_device(void **state)
{
    (void)state;
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    void *a = NULL, *b = NULL, *c = NULL, *keep = NULL, *resv = NULL;
    assert_int_equal(aclrtMalloc(&a, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMallocAlign32(&b, 5 * MiB, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    assert_int_equal(aclrtMallocCached(&c, 1, ACL_MEM_MALLOC_HUGE1G_ONLY), ACL_SUCCESS);
    aclrtMallocAttribute at = {.attr = ACL_RT_MEM_ATTR_DEVICE_ID, .value.deviceId = 0};
    aclrtMallocConfig cfg = {&at, 1};
    assert_int_equal(aclrtMallocWithCfg(&keep, 4096, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_SUCCESS);
    memset(keep, 0x3C, 4096);
    aclrtPhysicalMemProp prop = {.location = {.id = 1, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    aclrtDrvMemHandle h = NULL;
    assert_int_equal(aclrtMallocPhysical(&h, 2 * MiB, &prop, 0), ACL_SUCCESS);
    assert_int_equal(aclrtReserveMemAddress(&resv, 4 * MiB, 0, NULL, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(resv, 2 * MiB, 0, h, 0), ACL_SUCCESS);
    memset(resv, 1, 2 * MiB);
    assert_int_equal(fakeacl_live(1), 4);
    assert_int_equal(fakeacl_charged(1), 4 * KiB + 6 * MiB + GiB + 2 * MiB);
    uint64_t released = fakeacl_count("reset_released");

    assert_int_equal(aclrtResetDevice(1), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(1), 0);
    assert_int_equal(fakeacl_live(1), 0);
    assert_int_equal(fakeacl_count("reset_released"), released + 4);
    int32_t dev = -1;
    assert_int_equal(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    assert_true(is_unmapped(a));
    assert_true(is_unmapped(b));
    assert_true(is_unmapped(c));
    assert_int_equal(aclrtFree(a), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtUnmapMem(resv), ACL_ERROR_RT_MEMORY_FREE);  /* the mapping went with it */
    assert_int_equal(aclrtFreePhysical(h), ACL_ERROR_RT_MEMORY_FREE); /* and the handle */
    assert_false(is_unmapped(resv));                                  /* the reservation stays */
    assert_int_equal(fakeacl_check(), 0);
    assert_int_equal(aclrtReleaseMemAddress(resv), ACL_SUCCESS);
    /* device 0 kept its block */
    assert_int_equal(((unsigned char *)keep)[4095], 0x3C);
    assert_int_equal(fakeacl_live(0), 1);
    /* device 1 can be used again */
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(aclrtMalloc(&a, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(1), 4 * KiB);
    assert_int_equal(aclrtFree(a), ACL_SUCCESS);
    assert_int_equal(aclrtFree(keep), ACL_SUCCESS);
}

/* ---- memory information -------------------------------------------------------------------------------- */
static void test_mem_info(void **state)
{
    (void)state;
    size_t f = 1, t = 1;
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &t), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &f, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetMemInfo((aclrtMemAttr)18, &f, &t), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetMemInfo((aclrtMemAttr)-1, &f, &t), ACL_ERROR_INVALID_PARAM);
    void *p = NULL;
    assert_int_equal(aclrtMalloc(&p, 3 * MiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    static const aclrtMemAttr hbm[] = {ACL_HBM_MEM,
                                       ACL_HBM_MEM_HUGE,
                                       ACL_HBM_MEM_NORMAL,
                                       ACL_HBM_MEM_P2P_HUGE,
                                       ACL_HBM_MEM_P2P_NORMAL,
                                       ACL_HBM_MEM_HUGE1G,
                                       ACL_HBM_MEM_P2P_HUGE1G,
                                       ACL_MEM_NORMAL,
                                       ACL_MEM_HUGE,
                                       ACL_MEM_HUGE1G,
                                       ACL_MEM_P2P_NORMAL,
                                       ACL_MEM_P2P_HUGE,
                                       ACL_MEM_P2P_HUGE1G};
    for (size_t i = 0; i < sizeof(hbm) / sizeof(hbm[0]); i++) {
        assert_int_equal(aclrtGetMemInfo(hbm[i], &f, &t), ACL_SUCCESS);
        assert_int_equal(t, fakeacl_budget(0));
        assert_int_equal(f, fakeacl_budget(0) - 4 * MiB);
    }
    static const aclrtMemAttr ddr[] = {ACL_DDR_MEM, ACL_DDR_MEM_HUGE, ACL_DDR_MEM_NORMAL,
                                       ACL_DDR_MEM_P2P_HUGE, ACL_DDR_MEM_P2P_NORMAL};
    for (size_t i = 0; i < sizeof(ddr) / sizeof(ddr[0]); i++) {
        f = t = 1;
        assert_int_equal(aclrtGetMemInfo(ddr[i], &f, &t), ACL_SUCCESS);
        assert_int_equal(f, 0);
        assert_int_equal(t, 0);
    }
    /* another device reports its own budget */
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(fakeacl_set_budget(1, 100 * MiB), 0);
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t), ACL_SUCCESS);
    assert_int_equal(t, 100 * MiB);
    assert_int_equal(f, 100 * MiB);
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);
}

/* ---- host memory ------------------------------------------------------------------------------------------ */
static void test_host_memory(void **state)
{
    (void)state;
    void *p = SENTINEL;
    assert_int_equal(aclrtMallocHost(NULL, 64), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocHost(&p, 0), ACL_ERROR_INVALID_PARAM);
    assert_ptr_equal(p, SENTINEL);
    size_t charged = fakeacl_charged(0);
    assert_int_equal(aclrtMallocHost(&p, MiB + 3), ACL_SUCCESS);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 0xEE, MiB + 3);
    assert_int_equal(fakeacl_charged(0), charged);
    assert_int_equal(fakeacl_owner(p, 1), -1);
    assert_int_equal(aclrtFree(p), ACL_ERROR_RT_MEMORY_FREE); /* host memory is not device memory */
    assert_int_equal(aclrtFreeHost((char *)p + 64), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFreeHost(&charged), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFreeHost(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(((unsigned char *)p)[MiB + 2], 0xEE);
    uint64_t frees = fakeacl_count("host_frees");
    assert_int_equal(aclrtFreeHost(p), ACL_SUCCESS);
    assert_int_equal(aclrtFreeHost(p), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(fakeacl_count("host_frees"), frees + 1);
}

/* ---- virtual memory ---------------------------------------------------------------------------------------- */
static void fill(void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 8)
        *(uint64_t *)((char *)p + i) = (uint64_t)(i + seed) * 0x9E3779B97F4A7C15ull;
}

static int filled(const void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 8)
        if (*(const uint64_t *)((const char *)p + i) !=
            (uint64_t)(i + seed) * 0x9E3779B97F4A7C15ull)
            return 0;
    return 1;
}

static void test_vmm(void **state)
{
    (void)state;
    aclrtPhysicalMemProp prop = {.handleType = ACL_MEM_HANDLE_TYPE_NONE,
                                 .allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED,
                                 .memAttr = ACL_HBM_MEM_HUGE,
                                 .location = {.id = 1, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    size_t g = 0;
    assert_int_equal(
        aclrtMemGetAllocationGranularity(NULL, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, NULL),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemGetAllocationGranularity(&prop, (aclrtMemGranularityOptions)2, &g),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g),
        ACL_SUCCESS);
    assert_int_equal(g, 2 * MiB);

    /* reservations: aligned, not charged */
    void *r = SENTINEL, *big = NULL;
    assert_int_equal(aclrtReserveMemAddress(NULL, MiB, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress(&r, 0, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress(&r, MiB, 3 * 4096, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_ptr_equal(r, SENTINEL);
    assert_int_equal(aclrtReserveMemAddress(&r, 16 * MiB, 0, NULL, 0), ACL_SUCCESS);
    assert_int_equal((uintptr_t)r % (2 * MiB), 0);
    assert_int_equal(aclrtReserveMemAddress(&big, 64 * GiB, 64 * MiB, NULL, 1), ACL_SUCCESS);
    assert_int_equal((uintptr_t)big % (64 * MiB), 0);
    assert_int_equal(fakeacl_charged(1), 0);
    assert_int_equal(aclrtReleaseMemAddress(big), ACL_SUCCESS);
    void *again = NULL;
    assert_int_equal(aclrtReserveMemAddress(&again, 64 * MiB, 0, big, 0), ACL_SUCCESS);
    assert_ptr_equal(again, big); /* expectPtr honoured when the range is free */
    assert_int_equal(aclrtReleaseMemAddress(again), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(again), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtReleaseMemAddress(NULL), ACL_ERROR_INVALID_PARAM);

    /* physical memory: charged to location.id in 2 MiB units */
    aclrtDrvMemHandle h1 = NULL, h2 = NULL, hx = SENTINEL;
    assert_int_equal(aclrtMallocPhysical(NULL, 2 * MiB, &prop, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&hx, 2 * MiB, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&hx, 0, &prop, 0), ACL_ERROR_INVALID_PARAM);
    aclrtPhysicalMemProp hostprop = prop;
    hostprop.location.type = ACL_MEM_LOCATION_TYPE_HOST;
    assert_int_equal(aclrtMallocPhysical(&hx, 2 * MiB, &hostprop, 0), ACL_ERROR_INVALID_PARAM);
    aclrtPhysicalMemProp badprop = prop;
    badprop.location.id = 99;
    assert_int_equal(aclrtMallocPhysical(&hx, 2 * MiB, &badprop, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_ptr_equal(hx, SENTINEL);
    uint64_t pa = fakeacl_count("physical_allocs");
    /* granularity: sizes must be multiples of it */
    assert_int_equal(aclrtMallocPhysical(&hx, 3 * MiB, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(aclrtMallocPhysical(&hx, 4096, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
    void *rx = SENTINEL;
    assert_int_equal(aclrtReserveMemAddress(&rx, 3 * MiB, 0, NULL, 0), ACL_ERROR_RT_PARAM_INVALID);
    assert_ptr_equal(rx, SENTINEL);
    assert_ptr_equal(hx, SENTINEL);
    assert_int_equal(fakeacl_count("physical_allocs"), pa);
    assert_int_equal(aclrtMallocPhysical(&h1, 2 * MiB, &prop, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMallocPhysical(&h2, 4 * MiB, &prop, 0), ACL_SUCCESS);
    assert_int_equal(fakeacl_count("physical_allocs"), pa + 2);
    assert_int_equal(fakeacl_charged(1), 6 * MiB);
    assert_int_equal(fakeacl_charged(0), 0);

    /* map h1 twice: both views show the same physical memory */
    char *v = r;
    assert_int_equal(aclrtMapMem(v + 2 * MiB, 2 * MiB, 0, h1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(v + 8 * MiB, 2 * MiB, 0, h1, 0), ACL_SUCCESS);
    fill(v + 2 * MiB, 2 * MiB, 1);
    assert_true(filled(v + 8 * MiB, 2 * MiB, 1));
    assert_int_equal(fakeacl_owner(v + 2 * MiB + 100, 1000), 1);
    assert_int_equal(fakeacl_owner(v + 4 * MiB, 1), -1);

    /* mapping errors */
    void *blk = NULL;
    assert_int_equal(aclrtMalloc(&blk, MiB, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(NULL, 2 * MiB, 0, h1, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(v, 0, 0, h1, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(v, 2 * MiB, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(v + 100, 4096, 0, h1, 0),
                     ACL_ERROR_RT_PARAM_INVALID);                                   /* unaligned */
    assert_int_equal(aclrtMapMem(v, 4096, 100, h1, 0), ACL_ERROR_RT_PARAM_INVALID); /* unaligned */
    assert_int_equal(aclrtMapMem(v + MiB, 2 * MiB, 0, h1, 0), /* page but not 2 MiB aligned */
                     ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(aclrtMapMem(v, MiB, 0, h1, 0), ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(aclrtMapMem(v, 2 * MiB, MiB, h2, 0), ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(aclrtMapMem(v, 4 * MiB, 0, h1, 0),
                     ACL_ERROR_RT_PARAM_INVALID); /* beyond handle */
    assert_int_equal(aclrtMapMem(v, 2 * MiB, 2 * MiB, h1, 0),
                     ACL_ERROR_RT_PARAM_INVALID); /* beyond handle */
    assert_int_equal(aclrtMapMem(v + 14 * MiB, 4 * MiB, 0, h2, 0),
                     ACL_ERROR_RT_PARAM_INVALID); /* past reservation */
    assert_int_equal(aclrtMapMem(v + 2 * MiB, 2 * MiB, 0, h2, 0),
                     ACL_ERROR_RT_PARAM_INVALID); /* over a mapping */
    assert_int_equal(aclrtMapMem(v, 4 * MiB, 0, h2, 0),
                     ACL_ERROR_RT_PARAM_INVALID); /* overlaps one */
    assert_int_equal(aclrtMapMem(blk, 2 * MiB, 0, h1, 0),
                     ACL_ERROR_RT_PARAM_INVALID); /* no reservation */
    assert_int_equal(aclrtMapMem(v, 2 * MiB, 0, (aclrtDrvMemHandle)0x1234, 0),
                     ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(aclrtFree(blk), ACL_SUCCESS);
    assert_int_equal(aclrtFree(v + 2 * MiB),
                     ACL_ERROR_RT_MEMORY_FREE); /* a mapping is not a block */
    assert_int_equal(aclrtFreePhysical(h1), ACL_ERROR_RT_PARAM_INVALID); /* still mapped */
    assert_int_equal(aclrtReleaseMemAddress(r), ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(aclrtReleaseMemAddress(v + 2 * MiB), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFreePhysical((aclrtDrvMemHandle)0x1234), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFreePhysical(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtUnmapMem(v + 4 * MiB), ACL_ERROR_RT_MEMORY_FREE); /* not mapped */
    assert_int_equal(aclrtUnmapMem(v + 3 * MiB), ACL_ERROR_RT_MEMORY_FREE); /* inside one */
    assert_int_equal(aclrtUnmapMem(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(fakeacl_check(), 0);

    /* unmap one view, the other keeps the data; remap elsewhere, data is still in the handle */
    assert_int_equal(aclrtUnmapMem(v + 2 * MiB), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(v + 2 * MiB), ACL_ERROR_RT_MEMORY_FREE);
    assert_false(is_unmapped(v + 2 * MiB)); /* reserved again, not returned to the system */
    assert_true(filled(v + 8 * MiB, 2 * MiB, 1));
    assert_int_equal(aclrtUnmapMem(v + 8 * MiB), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(v, 2 * MiB, 0, h1, 0), ACL_SUCCESS);
    assert_true(filled(v, 2 * MiB, 1));

    /* physical memory counts in aclrtGetMemInfo like device blocks */
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    size_t fr = 0, tot = 0;
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &fr, &tot), ACL_SUCCESS);
    assert_int_equal(tot - fr, 6 * MiB);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);

    /* injected faults: a map that fails maps nothing; a physical allocation that fails takes
     * nothing */
    uint64_t mf = fakeacl_count("map_failures");
    fakeacl_fail_nth_map(1);
    assert_int_equal(aclrtMapMem(v + 4 * MiB, 4 * MiB, 0, h2, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(fakeacl_count("map_failures"), mf + 1);
    assert_int_equal(aclrtUnmapMem(v + 4 * MiB), ACL_ERROR_RT_MEMORY_FREE);
    fakeacl_fail_nth_physical(2);
    assert_int_equal(aclrtMallocPhysical(&hx, 2 * MiB, &prop, 0), ACL_SUCCESS);
    aclrtDrvMemHandle hy = SENTINEL;
    assert_int_equal(aclrtMallocPhysical(&hy, 2 * MiB, &prop, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(hy, SENTINEL);
    assert_int_equal(fakeacl_charged(1), 8 * MiB);
    assert_int_equal(aclrtFreePhysical(hx), ACL_SUCCESS);
    assert_int_equal(fakeacl_check(), 0);

    /* offsets into a handle */
    assert_int_equal(aclrtMapMem(v + 4 * MiB, 4 * MiB, 0, h2, 0), ACL_SUCCESS);
    fill(v + 4 * MiB, 4 * MiB, 7);
    assert_int_equal(aclrtMapMem(v + 12 * MiB, 2 * MiB, 2 * MiB, h2, 0), ACL_SUCCESS);
    assert_true(filled(v + 12 * MiB, 2 * MiB, 7 + 2 * MiB));
    assert_int_equal(fakeacl_count("maps") >= 5, 1);
    assert_int_equal(fakeacl_check(), 0);

    assert_int_equal(aclrtUnmapMem(v), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(v + 4 * MiB), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(v + 12 * MiB), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h1), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h1), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtFreePhysical(h2), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(1), 0);
    assert_int_equal(aclrtReleaseMemAddress(r), ACL_SUCCESS);
    assert_true(is_unmapped(r));
}

/* Tens of thousands of 2 MiB chunks (what a pool of 40 GiB on the virtual-memory API holds):
 * no file descriptor per handle, every call stays cheap, reset releases them all. */
static void test_vmm_many_chunks(void **state)
{
    (void)state;
    enum { N = 20000 };
    aclrtPhysicalMemProp prop = {.location = {.id = 0, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    aclrtDrvMemHandle *h = calloc(N, sizeof *h);
    assert_non_null(h);
    void *r = NULL;
    assert_int_equal(aclrtReserveMemAddress(&r, (size_t)N * 4 * MiB, 0, NULL, 0), ACL_SUCCESS);
    int fd_before = dup(0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(aclrtMallocPhysical(&h[i], 2 * MiB, &prop, 0), ACL_SUCCESS);
        /* every other granule, so that no two mappings are neighbours */
        assert_int_equal(aclrtMapMem((char *)r + (size_t)i * 4 * MiB, 2 * MiB, 0, h[i], 0),
                         ACL_SUCCESS);
    }
    int fd_after = dup(0);
    assert_true(fd_after - fd_before <= 2); /* at most the device's physical-memory file */
    close(fd_before);
    close(fd_after);
    assert_int_equal(fakeacl_charged(0), (size_t)N * 2 * MiB);
    assert_int_equal(fakeacl_check(), 0);
    ((char *)r)[(size_t)(N - 1) * 4 * MiB] = 42; /* the last one is memory */
    for (int i = 0; i < N / 2; i++) {
        assert_int_equal(aclrtUnmapMem((char *)r + (size_t)i * 4 * MiB), ACL_SUCCESS);
        assert_int_equal(aclrtFreePhysical(h[i]), ACL_SUCCESS);
    }
    assert_int_equal(fakeacl_check(), 0);
    /* the rest goes with the device */
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
    assert_int_equal(fakeacl_charged(0), 0);
    assert_int_equal(aclrtUnmapMem((char *)r + (size_t)(N - 1) * 4 * MiB),
                     ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(fakeacl_check(), 0);
    assert_int_equal(aclrtReleaseMemAddress(r), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    free(h);
}

/* ---- fault injection ----------------------------------------------------------------------------------------- */
static void test_fail_nth(void **state)
{
    (void)state;
    void *p[4] = {NULL, NULL, NULL, NULL};
    uint64_t inj = fakeacl_count("injected_failures");
    fakeacl_fail_nth_alloc(3);
    assert_int_equal(aclrtMalloc(&p[0], 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMallocAlign32(&p[1], 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    p[2] = SENTINEL;
    assert_int_equal(aclrtMallocCached(&p[2], 64, ACL_MEM_MALLOC_HUGE_FIRST),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(p[2], SENTINEL);
    assert_int_equal(aclrtMalloc(&p[2], 64, ACL_MEM_MALLOC_HUGE_FIRST),
                     ACL_SUCCESS); /* once only */
    assert_int_equal(fakeacl_count("injected_failures"), inj + 1);

    /* calls refused by their own checks, and host memory, do not count */
    fakeacl_fail_nth_alloc(2);
    void *h = NULL, *x = SENTINEL;
    assert_int_equal(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMalloc(&x, 64, (aclrtMemMallocPolicy)99), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocHost(&h, 64), ACL_SUCCESS);
    assert_int_equal(aclrtMallocWithCfg(&p[3], 64, ACL_MEM_MALLOC_HUGE_FIRST, NULL), ACL_SUCCESS);
    aclrtPhysicalMemProp prop = {.location = {.id = 0, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    aclrtDrvMemHandle ph = SENTINEL;
    assert_int_equal(aclrtMallocPhysical(&ph, 2 * MiB, &prop, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(ph, SENTINEL);
    assert_int_equal(fakeacl_count("injected_failures"), inj + 2);
    assert_int_equal(aclrtFreeHost(h), ACL_SUCCESS);

    /* 0 turns it off */
    fakeacl_fail_nth_alloc(1);
    fakeacl_fail_nth_alloc(0);
    assert_int_equal(aclrtMallocPhysical(&ph, 2 * MiB, &prop, 0), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(ph), ACL_SUCCESS);
    for (int i = 0; i < 4; i++) assert_int_equal(aclrtFree(p[i]), ACL_SUCCESS);
}

static void test_fail_above(void **state)
{
    (void)state;
    void *a = NULL, *b = SENTINEL, *c = NULL;
    uint64_t inj = fakeacl_count("injected_failures"), fails = fakeacl_count("alloc_failures");
    fakeacl_fail_above(MiB);
    assert_int_equal(aclrtMalloc(&a, MiB - 32, ACL_MEM_MALLOC_HUGE_FIRST),
                     ACL_SUCCESS); /* block = 1 MiB */
    assert_int_equal(aclrtMalloc(&b, MiB - 31, ACL_MEM_MALLOC_HUGE_FIRST),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(b, SENTINEL);
    assert_int_equal(aclrtMallocAlign32(&c, MiB, ACL_MEM_MALLOC_HUGE_FIRST),
                     ACL_SUCCESS); /* block = 1 MiB */
    aclrtPhysicalMemProp prop = {.location = {.id = 0, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    aclrtDrvMemHandle ph = SENTINEL;
    assert_int_equal(aclrtMallocPhysical(&ph, 2 * MiB, &prop, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(fakeacl_count("injected_failures"), inj + 2);
    assert_int_equal(fakeacl_count("alloc_failures"), fails + 2);
    fakeacl_fail_above(0);
    assert_int_equal(aclrtMalloc(&b, MiB - 31, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtFree(a), ACL_SUCCESS);
    assert_int_equal(aclrtFree(b), ACL_SUCCESS);
    assert_int_equal(aclrtFree(c), ACL_SUCCESS);
}

/* ---- counters and the stats file ---------------------------------------------------------------------------------- */
static const char *const entry_names[] = {"aclInit",
                                          "aclFinalize",
                                          "aclrtSetDevice",
                                          "aclrtResetDevice",
                                          "aclrtGetDevice",
                                          "aclrtGetDeviceCount",
                                          "aclrtSynchronizeDevice",
                                          "aclrtCreateContext",
                                          "aclrtDestroyContext",
                                          "aclrtSetCurrentContext",
                                          "aclrtGetCurrentContext",
                                          "aclrtMalloc",
                                          "aclrtMallocAlign32",
                                          "aclrtMallocCached",
                                          "aclrtMallocWithCfg",
                                          "aclrtFree",
                                          "aclrtFreeWithDevSync",
                                          "aclrtMallocHost",
                                          "aclrtFreeHost",
                                          "aclrtMemcpy",
                                          "aclrtMemset",
                                          "aclrtGetMemInfo",
                                          "aclrtReserveMemAddress",
                                          "aclrtReleaseMemAddress",
                                          "aclrtMallocPhysical",
                                          "aclrtFreePhysical",
                                          "aclrtMapMem",
                                          "aclrtUnmapMem",
                                          "aclrtMemGetAllocationGranularity"};
#define NENTRY_NAMES (sizeof(entry_names) / sizeof(entry_names[0]))

/* Value of `name` in a `name value` file, or -1. */
static long long stats_value(const char *path, const char *name)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL) return -1;
    char key[128];
    long long v, found = -1;
    while (fscanf(fp, "%127s %lld", key, &v) == 2)
        if (strcmp(key, name) == 0) found = v;
    fclose(fp);
    return found;
}

static int stats_lines(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL) return -1;
    int n = 0, ch;
    while ((ch = fgetc(fp)) != EOF) n += ch == '\n';
    fclose(fp);
    return n;
}

static void test_counters_and_stats(void **state)
{
    (void)state;
    fakeacl_reset_counts();
    for (size_t i = 0; i < NENTRY_NAMES; i++) assert_int_equal(fakeacl_count(entry_names[i]), 0);
    void *p[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(aclrtMalloc(&p[i], 1000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtFree(p[0]), ACL_SUCCESS);
    assert_int_equal(aclrtFree(p[1]), ACL_SUCCESS);
    assert_int_equal(aclrtFree(p[1]), ACL_ERROR_RT_MEMORY_FREE);
    assert_int_equal(aclrtSynchronizeDevice(), ACL_SUCCESS);
    size_t f, t;
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t), ACL_SUCCESS);
    assert_int_equal(fakeacl_count("aclrtMalloc"), 3);
    assert_int_equal(fakeacl_count("aclrtFree"), 3);
    assert_int_equal(fakeacl_count("device_allocs"), 3);
    assert_int_equal(fakeacl_count("device_frees"), 2);
    assert_int_equal(fakeacl_count("bytes_charged"), 3 * 4096);
    assert_int_equal(fakeacl_count("sync"), 1);
    assert_int_equal(fakeacl_count("aclrtGetMemInfo"), 1);
    assert_int_equal(fakeacl_count("aclrtMallocAlign32"), 0);
    assert_int_equal(fakeacl_count("charged_dev0"), 4096);
    assert_int_equal(fakeacl_count("live_dev0"), 1);
    assert_int_equal(fakeacl_count("peak_dev0"), 3 * 4096);
    assert_int_equal(fakeacl_count("budget_dev1"), fakeacl_budget(1));
    assert_int_equal(fakeacl_count("no_such_counter"), UINT64_MAX);
    assert_int_equal(fakeacl_count("charged_dev"), UINT64_MAX);
    assert_int_equal(fakeacl_count("charged_dev999"), UINT64_MAX);
    assert_int_equal(fakeacl_count("charged_dev0x"), UINT64_MAX);
    assert_int_equal(fakeacl_count(NULL), UINT64_MAX);

    char dir[] = "/tmp/fakeacl-stats-XXXXXX", path[256], want[300];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/s.%%p.txt", dir);
    snprintf(want, sizeof(want), "%s/s.%ld.txt", dir, (long)getpid());
    assert_int_equal(fakeacl_write_stats(path), 0);
    assert_int_equal(stats_value(want, "aclrtMalloc"), 3);
    assert_int_equal(stats_value(want, "device_allocs"), 3);
    assert_int_equal(stats_value(want, "device_frees"), 2);
    assert_int_equal(stats_value(want, "sync"), 1);
    assert_int_equal(stats_value(want, "charged_dev0"), 4096);
    assert_int_equal(stats_value(want, "aclrtMemGetAllocationGranularity"), 0);
    assert_int_equal(stats_lines(want), 29 + 14 + 4 * fakeacl_device_count());
    snprintf(path, sizeof(path), "%s/no-such-dir/s.txt", dir);
    assert_int_equal(fakeacl_write_stats(path), -1);
    unlink(want);
    assert_int_equal(rmdir(dir), 0); /* no temporary file left behind */
    assert_int_equal(aclrtFree(p[2]), ACL_SUCCESS);
    fakeacl_reset_counts();
    assert_int_equal(fakeacl_count("peak_dev0"), 0);
}

/* ---- threads -------------------------------------------------------------------------------------------------- */
#define NTHREADS 8
#ifdef __SANITIZE_THREAD__
#define NOPS 600 /* under TSan every mmap/munmap also maps and clears shadow: ~1 ms each */
#else
#define NOPS 3000
#endif
#define NLIVE 48

struct worker {
    int id;          /* 0..NTHREADS-1, device = id % 2 */
    int errors;      /* unexpected return codes */
    int corrupt;     /* blocks whose tags changed */
    uint64_t allocs; /* successful allocations */
};

static volatile int g_stop;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned seed = 1234u + (unsigned)w->id * 7919u;
    struct {
        unsigned char *p;
        size_t n;
        unsigned char tag;
    } live[NLIVE];
    int nlive = 0;
    if (aclrtSetDevice(w->id % 2) != ACL_SUCCESS) w->errors++;
    for (int op = 0; op < NOPS; op++) {
        int do_alloc = nlive == 0 || (nlive < NLIVE && rand_r(&seed) % 100 < 55);
        if (do_alloc) {
            size_t n = 1 + (size_t)rand_r(&seed) % (256 * 1024);
            void *p = NULL;
            const struct entry *e = &entries[rand_r(&seed) % NENTRIES];
            /* policies 0..5: HUGE1G blocks would charge 1 GiB each and exhaust the budget */
            if (e->fn(&p, n, (aclrtMemMallocPolicy)(rand_r(&seed) % 6)) != ACL_SUCCESS) {
                w->errors++;
                continue;
            }
            unsigned char tag = (unsigned char)rand_r(&seed);
            ((unsigned char *)p)[0] = tag;
            ((unsigned char *)p)[n - 1] = tag;
            ((unsigned char *)p)[n / 2] = tag;
            live[nlive].p = p;
            live[nlive].n = n;
            live[nlive].tag = tag;
            nlive++;
            w->allocs++;
        } else {
            int i = rand_r(&seed) % nlive;
            unsigned char *p = live[i].p;
            size_t n = live[i].n;
            if (p[0] != live[i].tag || p[n - 1] != live[i].tag || p[n / 2] != live[i].tag)
                w->corrupt++;
            aclError rc = (op & 1) ? aclrtFree(p) : aclrtFreeWithDevSync(p);
            if (rc != ACL_SUCCESS) w->errors++;
            live[i] = live[--nlive];
        }
    }
    while (nlive > 0)
        if (aclrtFree(live[--nlive].p) != ACL_SUCCESS) w->errors++;
    return NULL;
}

static void *checker_main(void *arg)
{
    int *bad = arg;
    aclrtSetDevice(1);
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        size_t f, t;
        *bad += fakeacl_check() != 0;
        *bad += aclrtGetMemInfo(ACL_HBM_MEM, &f, &t) != ACL_SUCCESS || f > t;
        *bad += fakeacl_owner(&f, 1) != -1;
        usleep(200); /* leave the lock to the workers most of the time */
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t th[NTHREADS], ck;
    struct worker w[NTHREADS];
    int checker_bad = 0;
    uint64_t allocs0 = fakeacl_count("device_allocs"), frees0 = fakeacl_count("device_frees");
    __atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
    assert_int_equal(pthread_create(&ck, NULL, checker_main, &checker_bad), 0);
    for (int i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    uint64_t total = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].errors, 0);
        assert_int_equal(w[i].corrupt, 0);
        total += w[i].allocs;
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_join(ck, NULL);
    assert_int_equal(checker_bad, 0);
    assert_true(total > NTHREADS * NOPS / 3);
    assert_int_equal(fakeacl_count("device_allocs") - allocs0, total);
    assert_int_equal(fakeacl_count("device_frees") - frees0, total);
    assert_int_equal(fakeacl_charged(0), 0);
    assert_int_equal(fakeacl_charged(1), 0);
}

/* ---- fork ------------------------------------------------------------------------------------------------------ */
static void *churn_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    aclrtSetDevice((int)((uintptr_t)arg % 2));
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        void *p = NULL;
        if (aclrtMalloc(&p, 1 + (size_t)rand_r(&seed) % 65536, ACL_MEM_MALLOC_HUGE_FIRST) ==
            ACL_SUCCESS)
            aclrtFree(p);
    }
    return NULL;
}

static void test_fork_while_allocating(void **state)
{
    (void)state;
    void *p = NULL;
    assert_int_equal(aclrtMalloc(&p, 8192, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    memset(p, 0x42, 8192);
    pthread_t th[4];
    __atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
    for (uintptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churn_main, (void *)(i + 1)), 0);
    for (int k = 0; k < 20; k++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(20); /* a deadlock shows up as SIGALRM, not a hang */
            int bad = 0;
            bad += ((unsigned char *)p)[8191] != 0x42; /* the child has its copy of the block */
            void *q = NULL;
            bad += aclrtMalloc(&q, 4096, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS;
            bad += aclrtFree(q) != ACL_SUCCESS;
            bad += fakeacl_check() != 0;
            bad += aclrtFree(p) != ACL_SUCCESS; /* the child's copy of the table knows p */
            _exit(bad == 0 ? 0 : 1);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("fork child %d: status %#x", k, st);
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_int_equal(((unsigned char *)p)[0], 0x42);
    assert_int_equal(aclrtFree(p), ACL_SUCCESS); /* the parent still owns its p */
}

/* Device memory is one process's own: after fork, neither side sees the other's writes through a
 * mapping of a physical handle, and the child freeing an inherited handle leaves the parent's
 * pages alone (fa_vmm.c). */
static void test_fork_vmm_private(void **state)
{
    (void)state;
    aclrtPhysicalMemProp prop = {.location = {.id = 0, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    aclrtDrvMemHandle h = NULL;
    void *r = NULL;
    assert_int_equal(aclrtMallocPhysical(&h, 4 * MiB, &prop, 0), ACL_SUCCESS);
    assert_int_equal(aclrtReserveMemAddress(&r, 4 * MiB, 0, NULL, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(r, 4 * MiB, 0, h, 0), ACL_SUCCESS);
    unsigned char *b = r;
    memset(b, 0x11, 4 * MiB);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        int bad = 0;
        bad += b[0] != 0x11 || b[3 * MiB] != 0x11; /* the child sees what was there */
        memset(b, 0x22, MiB);                      /* its own writes stay its own */
        bad += b[MiB - 1] != 0x22;
        bad += aclrtUnmapMem(r) != ACL_SUCCESS;
        bad += aclrtFreePhysical(h) != ACL_SUCCESS; /* must not punch the parent's pages */
        aclrtDrvMemHandle mine = NULL;              /* a handle of the child's own */
        bad += aclrtMallocPhysical(&mine, 2 * MiB, &prop, 0) != ACL_SUCCESS;
        bad += aclrtMapMem(r, 2 * MiB, 0, mine, 0) != ACL_SUCCESS;
        if (bad == 0) {
            memset(b, 0x33, 2 * MiB);
            bad += b[2 * MiB - 1] != 0x33;
            bad += aclrtUnmapMem(r) != ACL_SUCCESS;
        }
        bad += aclrtFreePhysical(mine) != ACL_SUCCESS;
        bad += fakeacl_check() != 0;
        _exit(bad == 0 ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("fork child: status %#x", st);
    assert_int_equal(b[0], 0x11);       /* not the child's 0x22 */
    assert_int_equal(b[3 * MiB], 0x11); /* not punched out by the child's free */
    assert_int_equal(fakeacl_check(), 0);
    assert_int_equal(aclrtUnmapMem(r), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(r), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
}

/* ---- environment, through a re-executed probe -------------------------------------------------------------------- */
static int probe_main(void)
{
    printf("fin0 %d\n", aclFinalize());
    printf("init1 %d\n", aclInit(NULL));
    printf("init2 %d\n", aclInit(NULL));
    printf("fin1 %d\n", aclFinalize());
    printf("devices %d\n", fakeacl_device_count());
    printf("budget %zu\n", fakeacl_budget(0));
    printf("set %d\n", aclrtSetDevice(0));
    for (int i = 0; i < 5; i++) {
        void *p = NULL;
        printf("rc%d %d\n", i, aclrtMalloc(&p, 1000, ACL_MEM_MALLOC_HUGE_FIRST));
    }
    void *p = NULL;
    printf("big %d\n", aclrtMalloc(&p, MiB, ACL_MEM_MALLOC_HUGE_FIRST));
    /* the virtual-memory calls, each undone */
    aclrtPhysicalMemProp prop = {.location = {.id = 0, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    size_t g = 0;
    printf("gran %d\n", aclrtMemGetAllocationGranularity(&prop, 0, &g));
    aclrtDrvMemHandle h = NULL;
    aclError prc = aclrtMallocPhysical(&h, 2 * MiB, &prop, 0);
    printf("phys %d\n", prc);
    void *r = NULL;
    aclError rrc = aclrtReserveMemAddress(&r, 4 * MiB, 0, NULL, 0);
    printf("resv %d\n", rrc);
    aclError mrc = prc == 0 && rrc == 0 ? aclrtMapMem(r, 2 * MiB, 0, h, 0) : -1;
    printf("map %d\n", mrc);
    if (mrc == 0) aclrtUnmapMem(r);
    if (rrc == 0) aclrtReleaseMemAddress(r);
    if (prc == 0) aclrtFreePhysical(h);
    fflush(stdout);
    return 0; /* exit() runs the fake's destructor, which writes FAKEACL_STATS */
}

static const char *const fakeacl_vars[] = {"FAKEACL_DEVICES",
                                           "FAKEACL_HBM_BYTES",
                                           "FAKEACL_FAIL_NTH",
                                           "FAKEACL_FAIL_ABOVE",
                                           "FAKEACL_FAIL_PHYSICAL_NTH",
                                           "FAKEACL_FAIL_MAP_NTH",
                                           "FAKEACL_FAIL_RESERVE_NTH",
                                           "FAKEACL_VMM",
                                           "FAKEACL_STATS"};

struct probe {
    char out[4096]; /* probe's stdout */
    char err[4096]; /* probe's stderr */
    pid_t pid;      /* the probe's pid */
    int status;     /* waitpid status */
};

static void read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while ((r = read(fd, buf + n, cap - 1 - n)) > 0) n += (size_t)r;
    buf[n] = '\0';
    close(fd);
}

/* Runs this binary with --probe and the FAKEACL_* variables given as "NAME=VALUE" (NULL-ended). */
static void run_probe(struct probe *pr, const char *const *env)
{
    int o[2], e[2];
    assert_int_equal(pipe(o), 0);
    assert_int_equal(pipe(e), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(o[0]);
        close(e[0]);
        for (size_t i = 0; i < sizeof(fakeacl_vars) / sizeof(fakeacl_vars[0]); i++)
            unsetenv(fakeacl_vars[i]);
        for (; env != NULL && *env != NULL; env++) putenv((char *)*env);
        execl("/proc/self/exe", "test_fakeacl", "--probe", (char *)NULL);
        _exit(127);
    }
    close(o[1]);
    close(e[1]);
    read_all(o[0], pr->out, sizeof(pr->out));
    read_all(e[0], pr->err, sizeof(pr->err));
    pr->pid = pid;
    assert_int_equal(waitpid(pid, &pr->status, 0), pid);
    assert_true(WIFEXITED(pr->status) && WEXITSTATUS(pr->status) == 0);
}

static long long probe_value(const struct probe *pr, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "%s ", key);
    for (const char *s = pr->out; s != NULL && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
        if (strncmp(s, pat, strlen(pat)) == 0) return atoll(s + strlen(pat));
    fail_msg("probe printed no \"%s\":\n%s", key, pr->out);
    return -1;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *s = text; (s = strstr(s, needle)) != NULL; s += strlen(needle)) n++;
    return n;
}

static void test_env_defaults_and_lifetime(void **state)
{
    (void)state;
    struct probe pr;
    run_probe(&pr, NULL);
    assert_int_equal(probe_value(&pr, "fin0"), REPEAT_FINALIZE); /* finalize before init */
    assert_int_equal(probe_value(&pr, "init1"), 0);
    assert_int_equal(probe_value(&pr, "init2"), REPEAT_INITIALIZE);
    assert_int_equal(probe_value(&pr, "fin1"), 0);
    assert_int_equal(probe_value(&pr, "devices"), 2);
    assert_int_equal(probe_value(&pr, "budget"), 64LL << 30);
    for (int i = 0; i < 5; i++) {
        char k[8];
        snprintf(k, sizeof(k), "rc%d", i);
        assert_int_equal(probe_value(&pr, k), 0);
    }
    assert_int_equal(probe_value(&pr, "big"), 0);
    assert_string_equal(pr.err, ""); /* nothing on stderr for normal error returns */
}

static void test_env_values(void **state)
{
    (void)state;
    static const struct {
        const char *hbm;  /* FAKEACL_HBM_BYTES */
        long long budget; /* expected budget */
    } sizes[] = {
        {"FAKEACL_HBM_BYTES=16M", 16LL << 20},        {"FAKEACL_HBM_BYTES=1G", 1LL << 30},
        {"FAKEACL_HBM_BYTES=512k", 512LL << 10},      {"FAKEACL_HBM_BYTES=2TiB", 2LL << 40},
        {"FAKEACL_HBM_BYTES=123456789", 123456789LL}, {"FAKEACL_HBM_BYTES=3gb", 3LL << 30}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct probe pr;
        const char *env[] = {"FAKEACL_DEVICES=3", sizes[i].hbm, NULL};
        run_probe(&pr, env);
        assert_int_equal(probe_value(&pr, "devices"), 3);
        assert_int_equal(probe_value(&pr, "budget"), sizes[i].budget);
        assert_string_equal(pr.err, "");
    }
    /* a tiny budget: 16 KiB holds four 1000-byte blocks (4 KiB each), not a fifth */
    struct probe pr;
    const char *tiny[] = {"FAKEACL_HBM_BYTES=16K", NULL};
    run_probe(&pr, tiny);
    assert_int_equal(probe_value(&pr, "rc3"), 0);
    assert_int_equal(probe_value(&pr, "rc4"), ACL_ERROR_RT_MEMORY_ALLOCATION);
    /* zero devices: nothing can be made current */
    const char *none[] = {"FAKEACL_DEVICES=0", NULL};
    run_probe(&pr, none);
    assert_int_equal(probe_value(&pr, "devices"), 0);
    assert_int_equal(probe_value(&pr, "set"), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(probe_value(&pr, "rc0"), ACL_ERROR_RT_CONTEXT_NULL);
}

static void test_env_bad_values(void **state)
{
    (void)state;
    static const char *const bad[][3] = {
        {"FAKEACL_DEVICES=abc", "FAKEACL_HBM_BYTES=12Q", NULL},
        {"FAKEACL_DEVICES=65", "FAKEACL_HBM_BYTES=0", NULL},
        {"FAKEACL_DEVICES=-1", "FAKEACL_HBM_BYTES=99999999999T", NULL},
        {"FAKEACL_DEVICES=", "FAKEACL_HBM_BYTES=1.5G", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct probe pr;
        run_probe(&pr, (const char *const *)bad[i]);
        assert_int_equal(probe_value(&pr, "devices"), 2);
        assert_int_equal(probe_value(&pr, "budget"), 64LL << 30);
        assert_int_equal(count_lines_with(pr.err, "fakeacl: "),
                         2); /* one warning per bad variable */
        assert_non_null(strstr(pr.err, "FAKEACL_DEVICES"));
        assert_non_null(strstr(pr.err, "FAKEACL_HBM_BYTES"));
        assert_null(strstr(pr.out, "fakeacl")); /* never on stdout */
    }
    struct probe pr;
    const char *env[] = {"FAKEACL_FAIL_NTH=x", "FAKEACL_FAIL_ABOVE=-3", NULL};
    run_probe(&pr, env);
    assert_int_equal(count_lines_with(pr.err, "fakeacl: "), 2);
    assert_int_equal(probe_value(&pr, "rc0"), 0);
    assert_int_equal(probe_value(&pr, "big"), 0);
}

static void test_env_faults(void **state)
{
    (void)state;
    struct probe pr;
    const char *nth[] = {"FAKEACL_FAIL_NTH=2", NULL};
    run_probe(&pr, nth);
    assert_int_equal(probe_value(&pr, "rc0"), 0);
    assert_int_equal(probe_value(&pr, "rc1"), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(probe_value(&pr, "rc2"), 0);
    assert_int_equal(probe_value(&pr, "big"), 0);
    const char *above[] = {"FAKEACL_FAIL_ABOVE=512K", NULL};
    run_probe(&pr, above);
    assert_int_equal(probe_value(&pr, "rc4"), 0);
    assert_int_equal(probe_value(&pr, "big"), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(probe_value(&pr, "phys"), ACL_ERROR_RT_MEMORY_ALLOCATION); /* 2 MiB > 512K */
    /* the virtual-memory faults */
    const char *vmm_ok[] = {NULL};
    run_probe(&pr, vmm_ok);
    assert_int_equal(probe_value(&pr, "gran"), 0);
    assert_int_equal(probe_value(&pr, "phys"), 0);
    assert_int_equal(probe_value(&pr, "map"), 0);
    const char *phys[] = {"FAKEACL_FAIL_PHYSICAL_NTH=1", NULL};
    run_probe(&pr, phys);
    assert_int_equal(probe_value(&pr, "rc0"), 0); /* device blocks are not counted */
    assert_int_equal(probe_value(&pr, "phys"), ACL_ERROR_RT_MEMORY_ALLOCATION);
    const char *resv[] = {"FAKEACL_FAIL_RESERVE_NTH=1", NULL};
    run_probe(&pr, resv);
    assert_int_equal(probe_value(&pr, "resv"), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(probe_value(&pr, "phys"), 0);
    const char *map[] = {"FAKEACL_FAIL_MAP_NTH=1", NULL};
    run_probe(&pr, map);
    assert_int_equal(probe_value(&pr, "phys"), 0);
    assert_int_equal(probe_value(&pr, "map"), ACL_ERROR_RT_MEMORY_ALLOCATION);
    /* an older runtime: every virtual-memory call says "feature not supported" */
    const char *novmm[] = {"FAKEACL_VMM=0", NULL};
    run_probe(&pr, novmm);
    assert_int_equal(probe_value(&pr, "rc0"), 0);
    assert_int_equal(probe_value(&pr, "gran"), 207000);
    assert_int_equal(probe_value(&pr, "phys"), 207000);
    assert_int_equal(probe_value(&pr, "resv"), 207000);
    assert_string_equal(pr.err, "");
    const char *badvmm[] = {"FAKEACL_VMM=2", "FAKEACL_FAIL_MAP_NTH=x", NULL};
    run_probe(&pr, badvmm);
    assert_int_equal(count_lines_with(pr.err, "fakeacl: "), 2);
    assert_int_equal(probe_value(&pr, "gran"), 0);
    assert_int_equal(probe_value(&pr, "map"), 0);
}

static void test_env_stats_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/fakeacl-probe-XXXXXX", var[300], path[300];
    assert_non_null(mkdtemp(dir));
    snprintf(var, sizeof(var), "FAKEACL_STATS=%s/stats.%%p", dir);
    struct probe pr;
    const char *env[] = {var, "FAKEACL_FAIL_NTH=3", NULL};
    run_probe(&pr, env);
    snprintf(path, sizeof(path), "%s/stats.%ld", dir, (long)pr.pid);
    assert_int_equal(stats_value(path, "aclrtMalloc"), 6);
    assert_int_equal(stats_value(path, "device_allocs"), 5);
    assert_int_equal(stats_value(path, "alloc_failures"), 1);
    assert_int_equal(stats_value(path, "injected_failures"), 1);
    assert_int_equal(stats_value(path, "aclrtSetDevice"), 1);
    assert_int_equal(stats_value(path, "aclInit"), 2);
    assert_int_equal(stats_value(path, "sync"), 0);
    assert_int_equal(stats_value(path, "live_dev0"), 5);
    assert_int_equal(stats_value(path, "charged_dev0"), 4 * 4096 + 2 * MiB);
    assert_int_equal(stats_value(path, "budget_dev1"), 64LL << 30);
    assert_int_equal(stats_lines(path), 29 + 14 + 4 * 2);
    assert_string_equal(pr.err, "");
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0); /* the file was renamed into place, no temporary left */

    const char *unwritable[] = {"FAKEACL_STATS=/nonexistent-dir/stats", NULL};
    run_probe(&pr, unwritable);
    assert_non_null(strstr(pr.err, "fakeacl: cannot write stats"));
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) return probe_main();
    g_budget0 = fakeacl_budget(0);
    signal(SIGPIPE, SIG_IGN);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_devices_and_threads),
        T(test_contexts),
        T(test_init_finalize),
        T(test_param_errors),
        T(test_charging_rules),
        T(test_budget_exhaustion),
        T(test_huge_reservation_is_free),
        T(test_data_and_copies),
        T(test_free_errors),
        T(test_free_with_dev_sync),
        T(test_malloc_with_cfg),
        T(test_reset_device),
        T(test_mem_info),
        T(test_host_memory),
        T(test_vmm),
        T(test_vmm_many_chunks),
        T(test_fail_nth),
        T(test_fail_above),
        T(test_counters_and_stats),
        T(test_threads),
        T(test_fork_while_allocating),
        T(test_fork_vmm_private),
        T(test_env_defaults_and_lifetime),
        T(test_env_values),
        T(test_env_bad_values),
        T(test_env_faults),
        T(test_env_stats_file),
    };
#undef T
    return cmocka_run_group_tests_name("fakeacl", tests, NULL, NULL);
}
