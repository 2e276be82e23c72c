/* examples/serving_demo.c — a small "inference service" written against plain ACL.
 *
 * What `make demo` runs in front of npupool.  It knows nothing of npupool: it links
 * libascendcl.so, loads model weights with aclrtMalloc, and serves requests of dynamic shape
 * ([batch, seq, hidden] activations, batch 1-32, seq 128-2048, as in the seeds' serving scenario),
 * looking up aclrtMallocAlign32 by name the way torch_npu does.  It has one deliberate bug: a
 * per-session state buffer that is never freed (cache_session_state), a slow leak of the kind a
 * long-running service accumulates.  It prints what its own allocation calls cost.
 *
 * Usage: serving_demo [requests]   (default 3000)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"

#define HIDDEN 4096
#define LAYERS 24
#define LIVE_SESSIONS 4

typedef aclError (*malloc_fn)(void **, size_t, aclrtMemMallocPolicy);

static malloc_fn device_malloc; /* aclrtMallocAlign32, found by name like torch_npu */
static double call_ns[1 << 16]; /* duration of each allocation call, for the percentiles */
static size_t ncalls;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *timed_alloc(size_t bytes)
{
    void *p = NULL;
    double t0 = now_ns();
    aclError rc = device_malloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
    double t1 = now_ns();
    if (ncalls < sizeof call_ns / sizeof call_ns[0]) call_ns[ncalls++] = t1 - t0;
    if (rc != ACL_SUCCESS) {
        fprintf(stderr, "serving_demo: allocation of %zu bytes failed with %d\n", bytes, rc);
        exit(1);
    }
    return p;
}

static void timed_free(void *p)
{
    double t0 = now_ns();
    aclError rc = aclrtFree(p);
    double t1 = now_ns();
    if (ncalls < sizeof call_ns / sizeof call_ns[0]) call_ns[ncalls++] = t1 - t0;
    if (rc != ACL_SUCCESS) fprintf(stderr, "serving_demo: free failed with %d\n", rc);
}

/* The bug: every 50th request opens a session whose state is never released. */
static __attribute__((noinline)) void *cache_session_state(int request)
{
    void *state = timed_alloc((size_t)(request % 7 + 1) << 20);
    memset(state, 0, 4096);
    return state; /* the caller drops it */
}

static void *load_weight(size_t bytes)
{
    void *p = NULL;
    if (aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_ONLY) != ACL_SUCCESS) {
        fprintf(stderr, "serving_demo: cannot load weights\n");
        exit(1);
    }
    memset(p, 1, 4096);
    return p;
}

static void serve_request(uint64_t *rng)
{
    static const int batches[] = {1, 2, 4, 8, 16, 32};
    static const int seqs[] = {128, 256, 512, 1024, 2048};
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    int batch = batches[*rng % 6], seq = seqs[(*rng >> 8) % 5];
    size_t act = (size_t)batch * (size_t)seq * HIDDEN * 2; /* fp16 activations */
    void *x = timed_alloc(act);
    void *scratch[6];
    for (int l = 0; l < 6; l++) { /* a few layers' temporaries, freed in reverse */
        scratch[l] = timed_alloc(act / (size_t)(l + 1) + 512 * (size_t)l);
        ((char *)scratch[l])[0] = (char)l;
    }
    for (int l = 5; l >= 0; l--) timed_free(scratch[l]);
    ((char *)x)[act - 1] = 1;
    timed_free(x);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int requests = argc > 1 ? atoi(argv[1]) : 3000;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        fprintf(stderr, "serving_demo: no device\n");
        return 1;
    }
    void *runtime = dlopen("libascendcl.so", RTLD_NOW | RTLD_NOLOAD);
    device_malloc = runtime ? (malloc_fn)dlsym(runtime, "aclrtMallocAlign32") : NULL;
    if (!device_malloc) device_malloc = aclrtMalloc;

    void *weights[LAYERS * 2];
    for (int i = 0; i < LAYERS * 2; i++) weights[i] = load_weight((size_t)HIDDEN * HIDDEN * 2);

    uint64_t rng = 0x2545f4914f6cdd1dull;
    double t0 = now_ns();
    for (int r = 1; r <= requests; r++) {
        serve_request(&rng);
        if (r % 50 == 0) (void)cache_session_state(r);
    }
    double elapsed_ms = (now_ns() - t0) / 1e6;

    size_t free_b = 0, total_b = 0;
    aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total_b);
    qsort(call_ns, ncalls, sizeof call_ns[0], cmp_double);
    double sum = 0;
    for (size_t i = 0; i < ncalls; i++) sum += call_ns[i];
    printf("serving_demo: %d requests in %.0f ms; %zu allocation/free calls, %.1f ms in them "
           "(median %.0f ns, p99 %.0f ns, max %.0f ns); device free %.1f of %.1f GiB\n",
           requests, elapsed_ms, ncalls, sum / 1e6, call_ns[ncalls / 2], call_ns[ncalls * 99 / 100],
           call_ns[ncalls - 1], (double)free_b / (1 << 30), (double)total_b / (1 << 30));

    for (int i = 0; i < LAYERS * 2; i++) aclrtFree(weights[i]);
    aclFinalize();
    return 0;
}
