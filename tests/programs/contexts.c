/* tests/programs/contexts.c — devices and contexts switched across threads: every allocation must
 * land on the device the thread's runtime state names (the fake runtime's fakeacl_owner says where
 * a block lies), with and without npupool in front.  Modes (argv[1]):
 *   switch   one thread: aclrtSetDevice 0 -> 1 -> 0; aclrtCreateContext on device 1 (binds it);
 *            the default context of device 0 bound again; a thread that never set a device (the
 *            runtime's 107002 comes back); a thread of device 0 binding a context made on device
 *            1; that context destroyed while bound there (107002 again, no stale device); a
 *            device reset on another thread (the others keep their device); then THREADS
 *            threads switching devices and contexts at random, each allocation checked.
 *   below    a context bound below ACL (fakeacl_bind_context, as rtCtxSetCurrent would be): a
 *            thread that made no observed call is asked every time, so its allocations follow;
 *            argv[2] = "observed" first calls aclrtSetDevice(0), then binds device 1 below ACL:
 *            its allocations follow the binding only when npupool asks the runtime every time
 *            (NPUPOOL_DEVICE_CACHE=0, or without npupool), which the case script checks.
 *   counts   THREADS threads, each PAIRS allocations and frees on devices 0 and 1 (alternating),
 *            then exit; prints "allocs0 N frees0 N allocs1 N frees1 N" for the script to compare
 *            with the report's counters.
 *   fork     a thread on device 1 forks; the child allocates on device 1 and, after
 *            aclrtSetDevice(0), on device 0.
 * The fake's controls are looked up with dlsym (they exist only in the fake).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "check.h"

#define THREADS 8
#define ROUNDS 2000
#define PAIRS 5000

static int (*owner_of)(const void *p, size_t len);
static int (*bind_below)(void *context);

/* Allocate on the calling thread's device and check where the block lies: `want` (>= 0), or
 * the runtime's error `want_rc` when want < 0. */
static int alloc_on(int want, aclError want_rc, const char *what)
{
    void *p = NULL;
    aclError rc = aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
    if (want < 0) {
        if (rc != want_rc) {
            fprintf(stderr, "%s: aclrtMalloc answered %d, want %d\n", what, rc, want_rc);
            return 1;
        }
        return 0;
    }
    if (rc != ACL_SUCCESS) {
        fprintf(stderr, "%s: aclrtMalloc failed (%d)\n", what, rc);
        return 1;
    }
    int got = owner_of(p, 4096);
    aclrtFree(p);
    if (got != want) {
        fprintf(stderr, "%s: block on device %d, want %d\n", what, got, want);
        return 1;
    }
    return 0;
}

static int failures; /* atomic */

static void fail_if(int bad)
{
    if (bad) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

/* ---- switch -------------------------------------------------------------------------------- */

static void *never_set(void *arg)
{
    (void)arg;
    fail_if(alloc_on(-1, ACL_ERROR_RT_CONTEXT_NULL, "a thread that never set a device"));
    fail_if(alloc_on(-1, ACL_ERROR_RT_CONTEXT_NULL, "the same thread again"));
    return NULL;
}

typedef struct bound {
    aclrtContext ctx;      /* a context of device 1 */
    pthread_barrier_t bar; /* the main thread destroys ctx between two waits */
} bound_t;

static void *device0_binds_ctx1(void *arg)
{
    bound_t *b = arg;
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    fail_if(alloc_on(0, 0, "a thread of device 0"));
    CHECK_EQ(aclrtSetCurrentContext(b->ctx), ACL_SUCCESS);
    fail_if(alloc_on(1, 0, "a thread of device 0 bound to a context of device 1"));
    pthread_barrier_wait(&b->bar);
    pthread_barrier_wait(&b->bar); /* ctx destroyed now */
    fail_if(alloc_on(-1, ACL_ERROR_RT_CONTEXT_NULL, "a thread whose context was destroyed"));
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    fail_if(alloc_on(0, 0, "the same thread after aclrtSetDevice(0)"));
    pthread_barrier_wait(&b->bar);
    pthread_barrier_wait(&b->bar); /* device 1 reset by the main thread */
    fail_if(alloc_on(0, 0, "a thread of device 0 after device 1's reset"));
    return NULL;
}

static void *device1_idle(void *arg)
{
    pthread_barrier_t *bar = arg;
    CHECK_EQ(aclrtSetDevice(1), ACL_SUCCESS);
    fail_if(alloc_on(1, 0, "a thread of device 1"));
    for (int i = 0; i < 4; i++) pthread_barrier_wait(bar); /* the fourth: device 1 was reset */
    fail_if(alloc_on(1, 0, "a thread of device 1 after another thread reset it"));
    return NULL;
}

/* Random switches: aclrtSetDevice, a shared context per device, this thread's own context. */
static aclrtContext shared_ctx[2];

static void *switcher(void *arg)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    aclrtContext own[2] = {NULL, NULL};
    int dev = 0;
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    for (int r = 0; r < ROUNDS && !__atomic_load_n(&failures, __ATOMIC_RELAXED); r++) {
        check_rand(&rng);
        int d = (int)(rng >> 8) & 1;
        switch ((rng >> 16) % 5) {
        case 0: CHECK_EQ(aclrtSetDevice(d), ACL_SUCCESS); break;
        case 1: CHECK_EQ(aclrtSetCurrentContext(shared_ctx[d]), ACL_SUCCESS); break;
        case 2:
            if (own[d])
                CHECK_EQ(aclrtSetCurrentContext(own[d]), ACL_SUCCESS);
            else
                CHECK_EQ(aclrtCreateContext(&own[d], d), ACL_SUCCESS);
            break;
        default: d = dev; break; /* no switch: allocate on the same device again */
        }
        dev = d;
        fail_if(alloc_on(dev, 0, "a switching thread"));
    }
    for (int d = 0; d < 2; d++)
        if (own[d]) CHECK_EQ(aclrtDestroyContext(own[d]), ACL_SUCCESS);
    return NULL;
}

static int mode_switch(void)
{
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    fail_if(alloc_on(0, 0, "device 0"));
    CHECK_EQ(aclrtSetDevice(1), ACL_SUCCESS);
    fail_if(alloc_on(1, 0, "device 1"));
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    fail_if(alloc_on(0, 0, "device 0 again"));
    aclrtContext def0 = NULL, c1 = NULL;
    CHECK_EQ(aclrtGetCurrentContext(&def0), ACL_SUCCESS);
    CHECK_EQ(aclrtCreateContext(&c1, 1), ACL_SUCCESS); /* binds c1: device 1 */
    fail_if(alloc_on(1, 0, "a context created on device 1"));
    CHECK_EQ(aclrtSetCurrentContext(def0), ACL_SUCCESS);
    fail_if(alloc_on(0, 0, "device 0's default context bound again"));
    CHECK_EQ(aclrtSetCurrentContext(c1), ACL_SUCCESS);
    fail_if(alloc_on(1, 0, "the context of device 1 bound again"));
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);

    pthread_t t0, t1, t2;
    CHECK_EQ(pthread_create(&t0, NULL, never_set, NULL), 0);
    pthread_join(t0, NULL);

    bound_t b = {.ctx = c1};
    pthread_barrier_init(&b.bar, NULL, 3);
    CHECK_EQ(pthread_create(&t1, NULL, device0_binds_ctx1, &b), 0);
    CHECK_EQ(pthread_create(&t2, NULL, device1_idle, &b.bar), 0);
    pthread_barrier_wait(&b.bar);
    CHECK_EQ(aclrtDestroyContext(c1), ACL_SUCCESS);
    pthread_barrier_wait(&b.bar);
    pthread_barrier_wait(&b.bar);
    CHECK_EQ(aclrtResetDevice(1), ACL_SUCCESS); /* the main thread is on device 0 */
    fail_if(alloc_on(0, 0, "the thread that reset device 1, on device 0"));
    pthread_barrier_wait(&b.bar);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_barrier_destroy(&b.bar);

    CHECK_EQ(aclrtCreateContext(&shared_ctx[1], 1), ACL_SUCCESS);
    CHECK_EQ(aclrtCreateContext(&shared_ctx[0], 0), ACL_SUCCESS);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, switcher, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    CHECK_EQ(aclrtDestroyContext(shared_ctx[0]), ACL_SUCCESS);
    CHECK_EQ(aclrtDestroyContext(shared_ctx[1]), ACL_SUCCESS);
    return 0;
}

/* ---- below --------------------------------------------------------------------------------- */

typedef struct below_arg {
    aclrtContext ctx1; /* a context of device 1 */
    int observed;      /* 1: aclrtSetDevice(0) first */
    int landed;        /* where the allocation after the binding lay */
} below_arg_t;

static void *below_thread(void *arg)
{
    below_arg_t *a = arg;
    if (a->observed) {
        CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
        fail_if(alloc_on(0, 0, "device 0 before the binding below ACL"));
    }
    CHECK_EQ(bind_below(a->ctx1), ACL_SUCCESS);
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    a->landed = p ? owner_of(p, 4096) : -1;
    if (p) aclrtFree(p);
    return NULL;
}

static int mode_below(int observed)
{
    below_arg_t a = {.observed = observed};
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    CHECK_EQ(aclrtCreateContext(&a.ctx1, 1), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, below_thread, &a), 0);
    pthread_join(t, NULL);
    printf("landed %d\n", a.landed);
    CHECK_EQ(aclrtDestroyContext(a.ctx1), ACL_SUCCESS);
    return 0;
}

/* ---- counts -------------------------------------------------------------------------------- */

static void *counter(void *arg)
{
    (void)arg;
    for (int i = 0; i < PAIRS; i++) {
        int d = i & 1;
        CHECK_EQ(aclrtSetDevice(d), ACL_SUCCESS);
        void *p = NULL;
        if (aclrtMalloc(&p, 512 + (size_t)i % 4096, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
            fail_if(1);
            continue;
        }
        CHECK_EQ(aclrtFree(p), ACL_SUCCESS);
    }
    return NULL;
}

static int mode_counts(void)
{
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK_EQ(pthread_create(&th[i], NULL, counter, NULL), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL); /* every thread has exited */
    void *kept = NULL;                                           /* one live block, main's */
    CHECK_EQ(aclrtMalloc(&kept, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    int per = THREADS * PAIRS / 2;
    printf("allocs0 %d frees0 %d allocs1 %d frees1 %d\n", per + 1, per, per, per);
    return 0;
}

/* ---- fork ---------------------------------------------------------------------------------- */

static void *forker(void *arg)
{
    (void)arg;
    CHECK_EQ(aclrtSetDevice(1), ACL_SUCCESS);
    fail_if(alloc_on(1, 0, "the parent thread on device 1"));
    pid_t pid = fork();
    if (pid == 0) {
        int bad = alloc_on(1, 0, "the fork child, device 1");
        bad |= aclrtSetDevice(0) != ACL_SUCCESS;
        bad |= alloc_on(0, 0, "the fork child, device 0");
        _exit(bad);
    }
    int st = 1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    fail_if(!WIFEXITED(st) || WEXITSTATUS(st) != 0);
    fail_if(alloc_on(1, 0, "the parent thread after the fork"));
    return NULL;
}

static int mode_fork(void)
{
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    fail_if(alloc_on(0, 0, "the main thread"));
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, forker, NULL), 0);
    pthread_join(t, NULL);
    fail_if(alloc_on(0, 0, "the main thread after the fork"));
    return 0;
}

int main(int argc, char **argv)
{
    owner_of = (int (*)(const void *, size_t))dlsym(RTLD_DEFAULT, "fakeacl_owner");
    bind_below = (int (*)(void *))dlsym(RTLD_DEFAULT, "fakeacl_bind_context");
    if (!owner_of || !bind_below) {
        fprintf(stderr, "contexts: needs the fake runtime (fakeacl_owner, fakeacl_bind_context)\n");
        return 2;
    }
    const char *mode = argc > 1 ? argv[1] : "switch";
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    if (strcmp(mode, "switch") == 0)
        mode_switch();
    else if (strcmp(mode, "below") == 0)
        mode_below(argc > 2 && strcmp(argv[2], "observed") == 0);
    else if (strcmp(mode, "counts") == 0)
        mode_counts();
    else if (strcmp(mode, "fork") == 0)
        mode_fork();
    else {
        fprintf(stderr, "contexts: unknown mode %s\n", mode);
        return 2;
    }
    CHECK_EQ(failures, 0);
    CHECK_DONE();
}
