/* bench/bench_pool.c — cost of one free+malloc pair in steady state, side by side in one run:
 *   npupool   pool/ (size-class slab pages for <= 512 KiB, TLSF large heap + address map above,
 *             one mutex), 64 GiB made-up range
 *   glibc     malloc/free, kept in its main arena (mallopt: mmap threshold 32 MiB = its maximum,
 *             trim threshold INT_MAX, one arena); sizes here never exceed 1 MiB
 *   firstfit  the seed document's first-fit pool (tools/firstfit.c), 64 GiB
 * Scenarios (from issue 2): 1,000 live blocks with sizes log-uniform 512 B..1 MiB, and 100,000
 * live blocks with sizes log-uniform 512 B..256 KiB.  All allocators see the same sequence:
 * fill `live` slots, run untimed warm-up pairs, then time each pair "free slot i; malloc a new
 * size into slot i" with i uniform.
 * The victim's address is read from the benchmark's slot array before the timer starts: at
 * 100,000 live that array is 800 KB and the random read misses the L2 cache; inside the
 * timed region (which lfence serialises) it added ~10 ns to every allocator's median that is
 * not the allocator's work.  The store of the new address hits the line just read.
 * Timing: rdtsc (lfence before, rdtscp+lfence after) on x86-64, converted with a tick rate
 * calibrated against CLOCK_MONOTONIC over 200 ms; elsewhere clock_gettime(CLOCK_MONOTONIC).
 * The median of 200,000 empty timed intervals is the timer overhead, subtracted from every
 * sample (clamped at 0); the counter's resolution (smallest step seen) is printed, since
 * virtual machines may advance it in coarse steps.  The same pairs are then replayed without
 * per-pair timers and the wall time / pairs is printed as `mean` (exact, but includes the
 * tail).  Reports median, p99, p99.9, max and mean in ns, the ratios the issue sets targets
 * for, and BENCH_POOL lines for scripts.
 * The pool runs twice: on a block (npupool) and on the virtual-memory backing (npupool-vmm: a
 * 64 GiB limit fully mapped in 2 MiB chunks of a 256 GiB range, over a simulated backing): the
 * steady-state pair never reaches the backing, so the two must cost the same.
 * Then the vmm pool's slow paths, each timed whole (median of REPEAT runs), over the simulated
 * backing (the pool's own work: planning, committing; the backing calls cost nothing) and over
 * the fake runtime (build/fakeacl/libascendcl.so, dlopen()ed: a memfd range per chunk, one
 * mmap per map, so each call costs a system call, as a driver call would, at host speed):
 *   stitch      the seeds' puzzle in an 8 GiB pool: 2 GiB asked while 4 GiB is free in 1 GiB
 *               holes: 1,025 chunks unmapped and mapped again into a fresh range;
 *   give-back   1 GiB of free chunks unmapped and freed (512 calls of each);
 *   map         51.2 GiB (80% of the fake's 64 GiB) mapped at pool creation, per chunk size.
 * Usage: bench_pool [timed_pairs] (default 200000; first-fit gets a tenth, its scan grows with
 * its never-merged free list, and it would otherwise run for minutes).
 */
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "firstfit.h"
#include "pool.h"
#include "splitmix.h"

/* ---- timer ----------------------------------------------------------------------------- */
#if defined(__x86_64__)
static inline uint64_t t_begin(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t t_end(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    return ((uint64_t)hi << 32) | lo;
}
#define TIMER_NAME "rdtsc"
#else
static inline uint64_t t_begin(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define t_end t_begin
#define TIMER_NAME "clock_gettime"
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double g_ns_per_tick = 1.0; /* from calibrate() */
static double g_overhead_ticks;    /* median empty interval */
static double g_resolution_ticks;  /* smallest observed counter step */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void calibrate(void)
{
    double w0 = now_ns();
    uint64_t c0 = t_begin();
    while (now_ns() - w0 < 200e6) {
    }
    double w1 = now_ns();
    uint64_t c1 = t_end();
    g_ns_per_tick = (w1 - w0) / (double)(c1 - c0);
    enum { N = 200000 };
    uint64_t *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) {
        uint64_t a = t_begin();
        uint64_t b = t_end();
        v[i] = b - a;
    }
    qsort(v, N, sizeof *v, cmp_u64);
    g_overhead_ticks = (double)v[N / 2];
    free(v);
    /* Resolution: the smallest non-zero step between two reads (virtual machines may advance
     * the counter in coarse steps). */
    uint64_t step = UINT64_MAX;
    for (int i = 0; i < 20000; i++) {
        uint64_t a = t_begin(), b;
        while ((b = t_begin()) == a) {
        }
        if (b - a < step) step = b - a;
    }
    g_resolution_ticks = (double)step;
}

/* ---- allocators under test ------------------------------------------------------------- */
typedef struct alloc_ops {
    const char *name;                                   /* column label */
    void *(*create)(void);                              /* fresh instance */
    void (*destroy)(void *ctx);                         /* release it */
    int (*alloc)(void *ctx, size_t size, uintptr_t *a); /* 0 on success */
    void (*free)(void *ctx, uintptr_t a);               /* release one block */
} alloc_ops_t;

#define POOL_BASE ((uintptr_t)0x100000000000ull)
#define POOL_RANGE ((size_t)64 << 30)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* ---- the simulated backing: every call succeeds and costs a counter ------------------------ */
static pool_sim_t g_sim_state;
static pool_backing_t g_sim;

static pool_t *vmm_pool(uintptr_t base, size_t limit, size_t chunk, const pool_backing_t *b)
{
    pool_t *p = pool_create_vmm(base, limit * POOL_VMM_VA_RATIO, chunk, limit, b);
    if (p && pool_grow(p, limit) != limit) {
        pool_destroy(p);
        return NULL;
    }
    return p;
}

static void *np_create(void) { return pool_create(POOL_BASE, POOL_RANGE); }
static void *nv_create(void)
{
    g_sim = pool_sim_backing(&g_sim_state);
    return vmm_pool(POOL_BASE, POOL_RANGE, 2 * MiB, &g_sim);
}
static void np_destroy(void *c) { pool_destroy(c); }
static int np_alloc(void *c, size_t size, uintptr_t *a)
{
    return pool_alloc(c, size, size, a, NULL);
}
static void np_free(void *c, uintptr_t a) { pool_free(c, a, NULL, NULL); }

static int g_dummy;
static void *gl_create(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, 64 << 20);
    mallopt(M_ARENA_MAX, 1);
    return &g_dummy;
}
static void gl_destroy(void *c) { (void)c; }
static int gl_alloc(void *c, size_t size, uintptr_t *a)
{
    (void)c;
    void *p = malloc(size);
    *a = (uintptr_t)p;
    return p ? 0 : -1;
}
static void gl_free(void *c, uintptr_t a)
{
    (void)c;
    free((void *)a);
}

static void *ff_create_ctx(void) { return firstfit_create(POOL_RANGE); }
static void ff_destroy_ctx(void *c) { firstfit_destroy(c); }
static int ff_alloc_ctx(void *c, size_t size, uintptr_t *a)
{
    size_t off;
    int rc = firstfit_alloc(c, size, &off);
    *a = off;
    return rc;
}
static void ff_free_ctx(void *c, uintptr_t a) { firstfit_free(c, a); }

static const alloc_ops_t g_ops[] = {
    {"npupool", np_create, np_destroy, np_alloc, np_free},
    {"npupool-vmm", nv_create, np_destroy, np_alloc, np_free},
    {"glibc", gl_create, gl_destroy, gl_alloc, gl_free},
    {"firstfit", ff_create_ctx, ff_destroy_ctx, ff_alloc_ctx, ff_free_ctx},
};
#define NOPS (sizeof g_ops / sizeof g_ops[0])

static const char *human(size_t b, char *buf, size_t len);

/* ---- the fake runtime as a backing (dlopen()ed: bench links no runtime) --------------------- */
typedef int (*fa_reserve_fn)(void **, size_t, size_t, void *, uint64_t);
typedef int (*fa_release_fn)(void *);
typedef int (*fa_malloc_phys_fn)(void **, size_t, const void *, uint64_t);
typedef int (*fa_free_phys_fn)(void *);
typedef int (*fa_map_fn)(void *, size_t, size_t, void *, uint64_t);
typedef int (*fa_unmap_fn)(void *);
static struct fake {
    fa_reserve_fn reserve;         /* aclrtReserveMemAddress */
    fa_release_fn release;         /* aclrtReleaseMemAddress */
    fa_malloc_phys_fn malloc_phys; /* aclrtMallocPhysical */
    fa_free_phys_fn free_phys;     /* aclrtFreePhysical */
    fa_map_fn map;                 /* aclrtMapMem */
    fa_unmap_fn unmap;             /* aclrtUnmapMem */
} g_fake;

/* aclrtPhysicalMemProp of include/acl/acl.h (32 bytes): HBM huge pages on device 0. */
static const struct {
    int handle_type;  /* ACL_MEM_HANDLE_TYPE_NONE */
    int alloc_type;   /* ACL_MEM_ALLOCATION_TYPE_PINNED */
    int attr;         /* ACL_HBM_MEM_HUGE */
    uint32_t id;      /* device 0 */
    uint32_t type;    /* ACL_MEM_LOCATION_TYPE_DEVICE */
    uint64_t reserve; /* 0 */
} g_prop = {0, 0, 4, 0, 1, 0};

static int fk_phys_alloc(void *c, size_t b, uint64_t *h)
{
    (void)c;
    void *x = NULL;
    int rc = g_fake.malloc_phys(&x, b, &g_prop, 0);
    *h = (uint64_t)(uintptr_t)x;
    return rc;
}
static void fk_phys_free(void *c, uint64_t h)
{
    (void)c;
    g_fake.free_phys((void *)(uintptr_t)h);
}
static int fk_map(void *c, uintptr_t va, size_t b, uint64_t h)
{
    (void)c;
    return g_fake.map((void *)va, b, 0, (void *)(uintptr_t)h, 0);
}
static int fk_unmap(void *c, uintptr_t va)
{
    (void)c;
    return g_fake.unmap((void *)va);
}
static const pool_backing_t g_fk = {NULL, fk_phys_alloc, fk_phys_free, fk_map, fk_unmap};

static int fake_open(const char *argv0)
{
    char path[4096];
    const char *slash = strrchr(argv0, '/');
    snprintf(path, sizeof path, "%.*s/../fakeacl/libascendcl.so", slash ? (int)(slash - argv0) : 1,
             slash ? argv0 : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    g_fake.reserve = (fa_reserve_fn)dlsym(h, "aclrtReserveMemAddress");
    g_fake.release = (fa_release_fn)dlsym(h, "aclrtReleaseMemAddress");
    g_fake.malloc_phys = (fa_malloc_phys_fn)dlsym(h, "aclrtMallocPhysical");
    g_fake.free_phys = (fa_free_phys_fn)dlsym(h, "aclrtFreePhysical");
    g_fake.map = (fa_map_fn)dlsym(h, "aclrtMapMem");
    g_fake.unmap = (fa_unmap_fn)dlsym(h, "aclrtUnmapMem");
    return g_fake.reserve && g_fake.release && g_fake.malloc_phys && g_fake.free_phys &&
                   g_fake.map && g_fake.unmap
               ? 0
               : -1;
}

/* A vmm pool over the backing b (the fake: in a reserved range of its own); *va_out: the
 * fake's range to release, or NULL. */
static pool_t *slow_pool(const pool_backing_t *b, size_t limit, size_t chunk, void **va_out)
{
    uintptr_t base = POOL_BASE;
    *va_out = NULL;
    if (b == &g_fk) {
        if (g_fake.reserve(va_out, limit * POOL_VMM_VA_RATIO, chunk, NULL, 0) != 0) return NULL;
        base = (uintptr_t)*va_out;
    }
    return vmm_pool(base, limit, chunk, b);
}

static void slow_pool_close(pool_t *p, void *va)
{
    if (!p) return;
    pool_release_backing(p);
    pool_destroy(p);
    if (va) g_fake.release(va);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define REPEAT 7

/* Median over REPEAT runs of one slow path, in microseconds; calls: backing calls of one run. */
static double time_stitch(const pool_backing_t *b, uint64_t *calls)
{
    double t[REPEAT];
    for (int r = 0; r < REPEAT; r++) {
        void *va;
        pool_t *p = slow_pool(b, 8 * GiB, 2 * MiB, &va);
        uintptr_t blk[7], big;
        for (int i = 0; i < 7; i++) pool_alloc(p, GiB, GiB + 32, &blk[i], NULL);
        for (int i = 1; i < 7; i += 2) pool_free(p, blk[i], NULL, NULL);
        pool_stats_t s0, s1;
        pool_get_stats(p, &s0);
        double t0 = now_ns();
        int rc = pool_alloc(p, 2 * GiB, 2 * GiB + 32, &big, NULL);
        t[r] = (now_ns() - t0) / 1e3;
        pool_get_stats(p, &s1);
        *calls = 2 * (s1.chunks_unmapped - s0.chunks_unmapped);
        if (rc != POOL_OK || s1.stitches != 1) t[r] = -1;
        slow_pool_close(p, va);
    }
    qsort(t, REPEAT, sizeof *t, cmp_double);
    return t[0] < 0 ? -1 : t[REPEAT / 2];
}

static double time_give_back(const pool_backing_t *b, uint64_t *calls)
{
    double t[REPEAT];
    for (int r = 0; r < REPEAT; r++) {
        void *va;
        pool_t *p = slow_pool(b, 4 * GiB, 2 * MiB, &va);
        uintptr_t x;
        pool_alloc(p, 4096, 4096, &x, NULL); /* something live, as in a running job */
        double t0 = now_ns();
        size_t freed = pool_give_back(p, GiB);
        t[r] = (now_ns() - t0) / 1e3;
        *calls = 2 * (freed / (2 * MiB));
        if (freed != GiB) t[r] = -1;
        pool_free(p, x, NULL, NULL);
        slow_pool_close(p, va);
    }
    qsort(t, REPEAT, sizeof *t, cmp_double);
    return t[0] < 0 ? -1 : t[REPEAT / 2];
}

/* Creation of a 51.2 GiB pool (its first allocation), milliseconds, median of 3. */
static double time_map(const pool_backing_t *b, size_t chunk)
{
    double t[3];
    size_t limit = (size_t)(0.8 * (double)(64 * GiB)) & ~(chunk - 1);
    for (int r = 0; r < 3; r++) {
        void *va = NULL;
        double t0 = now_ns();
        pool_t *p = slow_pool(b, limit, chunk, &va);
        t[r] = p ? (now_ns() - t0) / 1e6 : -1;
        slow_pool_close(p, va);
    }
    qsort(t, 3, sizeof *t, cmp_double);
    return t[0] < 0 ? -1 : t[1];
}

static void vmm_slow_paths(const char *argv0)
{
    g_sim = pool_sim_backing(&g_sim_state);
    int have_fake = fake_open(argv0) == 0;
    printf("\nvmm slow paths (median of %d; sim = simulated backing: the pool's own work; fake = "
           "build/fakeacl/libascendcl.so: one system call per backing call)\n",
           REPEAT);
    if (!have_fake) printf("  (the fake runtime could not be opened: its rows are missing)\n");
    printf("%-44s %12s %12s %14s\n", "slow path", "sim us", "fake us", "backing calls");
    uint64_t c1 = 0, c2 = 0;
    double s = time_stitch(&g_sim, &c1), f = have_fake ? time_stitch(&g_fk, &c2) : -1;
    printf("%-44s %12.0f %12.0f %14llu\n", "stitch: 2 GiB from 1 GiB holes, 8 GiB pool", s, f,
           (unsigned long long)c1);
    printf("BENCH_VMM op=stitch sim_us=%.1f fake_us=%.1f calls=%llu\n", s, f,
           (unsigned long long)c1);
    s = time_give_back(&g_sim, &c1);
    f = have_fake ? time_give_back(&g_fk, &c2) : -1;
    printf("%-44s %12.0f %12.0f %14llu\n", "give-back: 1 GiB of free chunks", s, f,
           (unsigned long long)c1);
    printf("BENCH_VMM op=give_back sim_us=%.1f fake_us=%.1f calls=%llu\n", s, f,
           (unsigned long long)c1);
    printf(
        "\ncreation of a 51.2 GiB vmm pool (all of it mapped), by chunk size, ms (median of 3)\n");
    printf("%-10s %10s %10s %14s\n", "chunk", "sim ms", "fake ms", "backing calls");
    static const size_t chunks[] = {2 * MiB, 8 * MiB, 32 * MiB, 128 * MiB};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        double sm = time_map(&g_sim, chunks[i]), fm = have_fake ? time_map(&g_fk, chunks[i]) : -1;
        size_t n = ((size_t)(0.8 * (double)(64 * GiB)) & ~(chunks[i] - 1)) / chunks[i];
        printf("%-10s %10.1f %10.1f %14zu\n", human(chunks[i], (char[32]){0}, 32), sm, fm, 2 * n);
        printf("BENCH_VMM op=create chunk=%zu sim_ms=%.2f fake_ms=%.2f calls=%zu\n", chunks[i], sm,
               fm, 2 * n);
    }
}

/* ---- scenarios ------------------------------------------------------------------------- */
typedef struct scenario {
    size_t live;    /* live blocks in steady state */
    size_t lo, hi;  /* size range, log-uniform */
    size_t warm;    /* untimed pairs */
    size_t pairs;   /* timed pairs */
    size_t *fill;   /* [live] initial sizes */
    uint32_t *slot; /* [warm+pairs] victim slot of each pair */
    size_t *size;   /* [warm+pairs] new size of each pair */
} scenario_t;

typedef struct result {
    double median, p99, p999, max; /* ns, from per-pair timing */
    double mean;                   /* ns, total time of an untimed replay / pairs */
    size_t pairs;                  /* timed pairs */
    int failed;                    /* an allocation failed */
} result_t;

static size_t log_uniform(uint64_t *s, size_t lo, size_t hi)
{
    double u = splitmix_unit(s);
    size_t v = (size_t)exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    return v < lo ? lo : v > hi ? hi : v;
}

static void scenario_gen(scenario_t *sc, uint64_t seed)
{
    size_t n = sc->warm + sc->pairs;
    sc->fill = malloc(sc->live * sizeof *sc->fill);
    sc->slot = malloc(n * sizeof *sc->slot);
    sc->size = malloc(n * sizeof *sc->size);
    for (size_t i = 0; i < sc->live; i++) sc->fill[i] = log_uniform(&seed, sc->lo, sc->hi);
    for (size_t k = 0; k < n; k++) {
        sc->slot[k] = (uint32_t)(splitmix_next(&seed) % sc->live);
        sc->size[k] = log_uniform(&seed, sc->lo, sc->hi);
    }
}

static double ticks_to_ns(uint64_t t)
{
    double v = (double)t - g_overhead_ticks;
    return (v < 0 ? 0 : v) * g_ns_per_tick;
}

/* Fill the slots and run the warm-up pairs.  Returns non-zero if an allocation failed. */
static int prepare(const alloc_ops_t *ops, void *ctx, const scenario_t *sc, uintptr_t *slots,
                   size_t warm)
{
    int failed = 0;
    for (size_t i = 0; i < sc->live && !failed; i++)
        failed |= ops->alloc(ctx, sc->fill[i], &slots[i]) != 0;
    for (size_t k = 0; k < warm && !failed; k++) {
        uint32_t i = sc->slot[k];
        ops->free(ctx, slots[i]);
        failed |= ops->alloc(ctx, sc->size[k], &slots[i]) != 0;
    }
    return failed;
}

/* The same pairs again without per-pair timers: an exact mean, free of the timer's 20-ns-class
 * granularity and serialisation. */
static double replay_mean(const alloc_ops_t *ops, const scenario_t *sc, size_t pairs, size_t warm)
{
    void *ctx = ops->create();
    uintptr_t *slots = malloc(sc->live * sizeof *slots);
    double mean = -1;
    if (!prepare(ops, ctx, sc, slots, warm)) {
        int failed = 0;
        double t0 = now_ns();
        for (size_t k = warm; k < warm + pairs; k++) {
            uint32_t i = sc->slot[k];
            ops->free(ctx, slots[i]);
            failed |= ops->alloc(ctx, sc->size[k], &slots[i]);
        }
        double t1 = now_ns();
        if (!failed) mean = (t1 - t0) / (double)pairs;
    }
    for (size_t i = 0; i < sc->live; i++) ops->free(ctx, slots[i]);
    ops->destroy(ctx);
    free(slots);
    return mean;
}

static result_t run(const alloc_ops_t *ops, const scenario_t *sc, size_t pairs)
{
    result_t r = {0};
    void *ctx = ops->create();
    uintptr_t *slots = malloc(sc->live * sizeof *slots);
    uint64_t *samples = malloc(pairs * sizeof *samples);
    size_t warm = sc->warm;
    r.failed = prepare(ops, ctx, sc, slots, warm);
    for (size_t k = 0; k < pairs && !r.failed; k++) {
        size_t e = warm + k;
        uint32_t i = sc->slot[e];
        uintptr_t victim = slots[i]; /* the benchmark's own bookkeeping: read before timing */
        uint64_t t0 = t_begin();
        ops->free(ctx, victim);
        int rc = ops->alloc(ctx, sc->size[e], &slots[i]);
        uint64_t t1 = t_end();
        samples[k] = t1 - t0;
        r.failed |= rc != 0;
    }
    if (!r.failed) {
        qsort(samples, pairs, sizeof *samples, cmp_u64);
        r.pairs = pairs;
        r.median = ticks_to_ns(samples[pairs / 2]);
        r.p99 = ticks_to_ns(samples[pairs * 99 / 100]);
        r.p999 = ticks_to_ns(samples[pairs * 999 / 1000]);
        r.max = ticks_to_ns(samples[pairs - 1]);
    }
    for (size_t i = 0; i < sc->live; i++) ops->free(ctx, slots[i]);
    ops->destroy(ctx);
    free(slots);
    free(samples);
    if (!r.failed) r.mean = replay_mean(ops, sc, pairs, warm);
    return r;
}

static const char *human(size_t b, char *buf, size_t len)
{
    if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(buf, len, "%zuMiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, len, "%zuKiB", b >> 10);
    else
        snprintf(buf, len, "%zuB", b);
    return buf;
}

int main(int argc, char **argv)
{
    size_t pairs = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
    if (pairs < 1000) pairs = 1000;
    calibrate();
    printf("bench_pool: free+malloc pair latency in steady state, ns\n");
    printf("timer: %s, %.4f ns/tick calibrated against CLOCK_MONOTONIC, resolution %.1f ns; "
           "timer overhead %.1f ns (median of 200000 empty intervals) subtracted from every "
           "sample\n",
           TIMER_NAME, g_ns_per_tick, g_resolution_ticks * g_ns_per_tick,
           g_overhead_ticks * g_ns_per_tick);
    printf("mean = wall time of an untimed replay of the same pairs / pairs (no timer inside)\n");
    scenario_t sc[2] = {
        {.live = 1000, .lo = 512, .hi = 1 << 20, .warm = 20000, .pairs = pairs},
        {.live = 100000, .lo = 512, .hi = 256 << 10, .warm = 50000, .pairs = pairs},
    };
    result_t res[2][NOPS];
    printf("%-8s %-14s %-11s %8s %9s %9s %9s %10s %9s\n", "live", "sizes", "allocator", "pairs",
           "median", "p99", "p99.9", "max", "mean");
    for (int s = 0; s < 2; s++) {
        scenario_gen(&sc[s], 12345 + (uint64_t)s);
        char a[32], b[32], range[64];
        snprintf(range, sizeof range, "%s..%s", human(sc[s].lo, a, sizeof a),
                 human(sc[s].hi, b, sizeof b));
        for (size_t o = 0; o < NOPS; o++) {
            size_t n = strcmp(g_ops[o].name, "firstfit") == 0 ? pairs / 10 : pairs;
            res[s][o] = run(&g_ops[o], &sc[s], n);
            result_t *r = &res[s][o];
            if (r->failed) {
                printf("%-8zu %-14s %-11s   an allocation failed\n", sc[s].live, range,
                       g_ops[o].name);
                continue;
            }
            printf("%-8zu %-14s %-11s %8zu %9.1f %9.1f %9.1f %10.1f %9.1f\n", sc[s].live, range,
                   g_ops[o].name, r->pairs, r->median, r->p99, r->p999, r->max, r->mean);
            fflush(stdout);
        }
    }
    enum { NP = 0, NV = 1, GL = 2, FF = 3 };
    printf("\nsummary (targets from issue 2):\n");
    printf("  1,000 live: npupool median %.1f ns (target <= 100): %s\n", res[0][NP].median,
           res[0][NP].median <= 100 ? "met" : "MISSED");
    printf("  1,000 live: npupool/glibc median %.2f (target <= 0.5): %s\n",
           res[0][NP].median / res[0][GL].median,
           res[0][NP].median / res[0][GL].median <= 0.5 ? "met" : "MISSED");
    printf("  100,000 live vs 1,000 live, median: npupool %.2fx (target <= 1.5: %s), glibc %.2fx, "
           "firstfit %.2fx\n",
           res[1][NP].median / res[0][NP].median,
           res[1][NP].median / res[0][NP].median <= 1.5 ? "met" : "MISSED",
           res[1][GL].median / res[0][GL].median, res[1][FF].median / res[0][FF].median);
    printf("  100,000 live vs 1,000 live, mean: npupool %.2fx, glibc %.2fx\n",
           res[1][NP].mean / res[0][NP].mean, res[1][GL].mean / res[0][GL].mean);
    printf("  ratios npupool/glibc: median %.2f (1k) %.2f (100k); p99 %.2f (1k) %.2f (100k)\n",
           res[0][NP].median / res[0][GL].median, res[1][NP].median / res[1][GL].median,
           res[0][NP].p99 / res[0][GL].p99, res[1][NP].p99 / res[1][GL].p99);
    printf("  vmm backing vs block (issue 10: the same steady state): median %.2fx (1k) %.2fx "
           "(100k), mean %.2fx (1k) %.2fx (100k)\n",
           res[0][NV].median / res[0][NP].median, res[1][NV].median / res[1][NP].median,
           res[0][NV].mean / res[0][NP].mean, res[1][NV].mean / res[1][NP].mean);
    printf("\n");
    for (int s = 0; s < 2; s++)
        for (size_t o = 0; o < NOPS; o++)
            printf("BENCH_POOL live=%zu lo=%zu hi=%zu alloc=%s pairs=%zu median_ns=%.1f "
                   "p99_ns=%.1f p999_ns=%.1f max_ns=%.1f mean_ns=%.1f failed=%d\n",
                   sc[s].live, sc[s].lo, sc[s].hi, g_ops[o].name, res[s][o].pairs, res[s][o].median,
                   res[s][o].p99, res[s][o].p999, res[s][o].max, res[s][o].mean, res[s][o].failed);
    for (int s = 0; s < 2; s++) {
        free(sc[s].fill);
        free(sc[s].slot);
        free(sc[s].size);
    }
    vmm_slow_paths(argv[0]);
    return 0;
}
