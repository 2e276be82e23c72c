/* bench/bench_ledger.c — what the ledger costs (issue 3's benchmark), side by side in one run.
 *
 * 1. A free+malloc pair in steady state (1,000 live blocks, sizes log-uniform 512 B..1 MiB), each
 *    pair timed alone, made the way the shim makes it (capture before any lock,
 *    pool_alloc_tagged, ledger_record_alloc_tagged, the handle into the block's tag;
 *    pool_free_tagged, whose callback forgets the record), from a call chain ~40 frames deep
 *    with 64 distinct call paths:
 *        glibc          malloc/free (reference)
 *        pool           pool_alloc/pool_free only
 *        ledger bt=0    pool + ledger records, backtraces off
 *        ledger bt=16   + a backtrace of the default depth
 *        ledger bt=32   + a backtrace of 32 frames
 *    Target (issue 3): <= 400 ns median per pair at the default depth.
 * 2. Writing one report with 1,000,000 live allocations from 10,000 distinct stacks (real return
 *    addresses in this binary, 16 frames each), symbolized and not.  Target: <= 1 s.
 * 3. Ledger host memory per live allocation at 1,000,000 live (limit 64 bytes) and per stack.
 * 4. Python frames (issue 11): an interpreter is embedded (libpython3.X.so dlopen()ed; no Python
 *    header: the few functions are looked up by name) and the same pair loop runs inside a C
 *    function called from Python 20 frames deep, with the GIL held, with Python frames off and
 *    on (same native stack, so the difference is the Python frames' cost), at depth 32 (all 20
 *    Python frames kept) and 16; and once from C with the interpreter up but no Python frame.
 *    Target: <= 2 us per allocation above the native capture.  Not measured when no libpython
 *    can be loaded (said so).  The variant "bt=16 py-on" before it measures the check alone in
 *    a process without an interpreter.
 * 5. The ledger file (NPUPOOL_LEDGER_FILE, issue 9): the same pair with the ledger mirrored into a
 *    file on /dev/shm (tmpfs) and on /tmp, against the in-memory ledger, alternated three times
 *    (memory, file, memory, file, ...; the median of each side's medians); target <= 1.1x.  Then
 *    file bytes and mirror host memory per live allocation at 1,000,000 live.
 * 6. The stack walk alone (ledger_unwind_backtrace: libunwind's unw_backtrace, the walk every
 *    capture makes, without the interning), at the bottom of recursions of 0, 8, 16, 24 and 32
 *    extra frames: ns per walk by the frames it returned, and a least-squares line through them
 *    (what a walk costs to start, and per frame).  Timed in batches of WALK_BATCH walks (the
 *    median of the batches' means), so no timer overhead to subtract.
 * Timer: CLOCK_MONOTONIC (vDSO); the median of empty timed intervals is subtracted.
 * Usage: bench_ledger [timed_pairs]   (default 200000 per variant)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ledger.h"
#include "ledger_internal.h" /* ledger_unwind_backtrace: the walk alone (section 6) */
#include "ledger_py.h"
#include "ledger_file.h"
#include "pool.h"
#include "report.h"

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t log_uniform(size_t lo, size_t hi)
{
    double u = (double)(rng() >> 11) / 9007199254740992.0;
    return (size_t)exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
}

/* ---- pair benchmark ---------------------------------------------------------------------------- */

enum variant { V_GLIBC, V_POOL, V_LEDGER, V_COUNT };

typedef struct pair_bench {
    enum variant v;    /* what a pair does */
    pool_t *pool;      /* V_POOL, V_LEDGER */
    uintptr_t *slot;   /* live blocks */
    size_t nslots;     /* live count */
    size_t *sizes;     /* size sequence */
    uint64_t *samples; /* ns per timed pair */
    size_t timed;      /* pairs to time */
    uint64_t overhead; /* timer overhead, ns */
} pair_bench_t;

static uintptr_t do_alloc(pair_bench_t *b, size_t size)
{
    switch (b->v) {
    case V_GLIBC: return (uintptr_t)malloc(size);
    case V_POOL: {
        uintptr_t a = 0;
        pool_alloc(b->pool, size, ((size + 31) & ~(size_t)31) + 32, &a, NULL);
        return a;
    }
    default: {
        uint32_t sid = ledger_stack_capture(0); /* before any lock, as the shim does */
        size_t granted = ((size + 31) & ~(size_t)31) + 32;
        uintptr_t a = 0;
        uint32_t *tag = NULL;
        if (pool_alloc_tagged(b->pool, size, granted, &a, NULL, &tag) == POOL_OK)
            __atomic_store_n(tag,
                             ledger_record_alloc_tagged(a, 0, size, granted, VOCAB_MALLOC,
                                                        VOCAB_FROM_POOL, sid, clock_coarse_ns()),
                             __ATOMIC_RELAXED);
        return a;
    }
    }
}

/* As the shim forgets a pool block (shim/entry.c: forget_tagged): at once on the lock-free
 * path, after the pool lock is let go otherwise. */
typedef struct forget {
    uintptr_t addr;
    uint32_t deferred;
} forget_t;

static void forget_cb(void *ctx, uint32_t tag, int locked)
{
    forget_t *f = ctx;
    if (locked)
        f->deferred = tag;
    else
        ledger_release_tagged(tag, f->addr);
}

static void do_free(pair_bench_t *b, uintptr_t a)
{
    switch (b->v) {
    case V_GLIBC: free((void *)a); break;
    case V_POOL: pool_free(b->pool, a, NULL, NULL); break;
    default: {
        forget_t f = {a, 0};
        pool_free_tagged(b->pool, a, NULL, forget_cb, &f);
        if (f.deferred) ledger_release_tagged(f.deferred, a);
        break;
    }
    }
}

static size_t seq_pos;

/* The steady-state loop; runs at the bottom of a deep call chain. */
__attribute__((noipa)) static void pair_loop(pair_bench_t *b, size_t warm)
{
    for (size_t i = 0; i < warm + b->timed; i++) {
        size_t k = rng() % b->nslots;
        size_t size = b->sizes[seq_pos++ % (b->nslots * 64)];
        uint64_t t0 = now_ns();
        do_free(b, b->slot[k]);
        b->slot[k] = do_alloc(b, size);
        uint64_t t1 = now_ns();
        if (i >= warm) b->samples[i - warm] = t1 - t0 > b->overhead ? t1 - t0 - b->overhead : 0;
    }
}

/* 64 distinct call paths, ~40 frames deep: bits choose one of two call sites per level. */
typedef void (*leaf_fn)(void *ctx);
__attribute__((noipa)) static void descend_a(int level, unsigned bits, leaf_fn f, void *ctx);
__attribute__((noipa)) static void descend_b(int level, unsigned bits, leaf_fn f, void *ctx);
__attribute__((noipa)) static void descend_a(int level, unsigned bits, leaf_fn f, void *ctx)
{
    if (level == 0) {
        f(ctx);
        return;
    }
    if (bits & 1)
        descend_b(level - 1, bits >> 1, f, ctx);
    else
        descend_a(level - 1, bits >> 1, f, ctx);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noipa)) static void descend_b(int level, unsigned bits, leaf_fn f, void *ctx)
{
    if (level == 0) {
        f(ctx);
        return;
    }
    if (bits & 1)
        descend_a(level - 1, bits >> 1, f, ctx);
    else
        descend_b(level - 1, bits >> 1, f, ctx);
    __asm__ volatile("" ::: "memory");
}

typedef struct chunk_ctx {
    pair_bench_t *b; /* the benchmark */
    size_t pairs;    /* pairs to run in this call path */
    size_t offset;   /* where its samples go */
} chunk_ctx_t;

static void run_chunk(void *arg)
{
    chunk_ctx_t *c = arg;
    pair_bench_t sub = *c->b;
    sub.samples = c->b->samples + c->offset;
    sub.timed = c->pairs;
    pair_loop(&sub, 0);
}

static double last_mean; /* run_variant_file: the mean of the fastest 99 % of its pairs, ns */

/* file: a ledger-file pattern, NULL = the ledger in memory only. */
static void run_variant_file(const char *name, enum variant v, int depth, int python, size_t timed,
                             double *median_out, const char *file)
{
    enum { LIVE = 1000 };
    pair_bench_t b = {0};
    b.v = v;
    b.nslots = LIVE;
    b.timed = timed;
    b.slot = calloc(LIVE, sizeof *b.slot);
    b.sizes = malloc(LIVE * 64 * sizeof *b.sizes);
    b.samples = malloc(timed * sizeof *b.samples);
    rng_state = 88172645463325252ull; /* the same sequence for every variant */
    seq_pos = 0;
    for (size_t i = 0; i < LIVE * 64; i++) b.sizes[i] = log_uniform(512, 1u << 20);
    if (v != V_GLIBC) b.pool = pool_create((uintptr_t)1 << 40, (size_t)64 << 30);
    ledger_clear();
    ledger_init(
        &(ledger_config_t){.backtrace_depth = depth, .python_frames = python, .file = file});
    /* timer overhead */
    uint64_t *e = malloc(100000 * sizeof *e);
    for (int i = 0; i < 100000; i++) {
        uint64_t t0 = now_ns();
        e[i] = now_ns() - t0;
    }
    qsort(e, 100000, sizeof *e, cmp_u64);
    b.overhead = e[50000];
    free(e);
    for (size_t i = 0; i < LIVE; i++) b.slot[i] = do_alloc(&b, b.sizes[i]);
    pair_bench_t warm = b;
    warm.timed = 0;
    pair_loop(&warm, 20000);
    /* timed pairs in 64 call paths of 40 frames */
    size_t per = timed / 64, off = 0;
    for (unsigned path = 0; path < 64; path++) {
        chunk_ctx_t c = {&b, path == 63 ? timed - off : per, off};
        descend_a(40, path, run_chunk, &c);
        off += c.pairs;
    }
    qsort(b.samples, timed, sizeof *b.samples, cmp_u64);
    double sum = 0; /* the mean of the fastest 99 % (a 10 ns timer: means resolve less) */
    for (size_t i = 0; i < timed * 99 / 100; i++) sum += (double)b.samples[i];
    last_mean = sum / (double)(timed * 99 / 100);
    double med = (double)b.samples[timed / 2], p99 = (double)b.samples[timed * 99 / 100];
    double p999 = (double)b.samples[timed * 999 / 1000];
    printf("  %-20s median %7.0f ns   p99 %7.0f ns   p99.9 %7.0f ns\n", name, med, p99, p999);
    printf("BENCH_LEDGER pair variant=%s median_ns=%.0f p99_ns=%.0f p999_ns=%.0f\n", name, med, p99,
           p999);
    if (median_out) *median_out = med;
    for (size_t i = 0; i < LIVE; i++) do_free(&b, b.slot[i]);
    if (b.pool) pool_destroy(b.pool);
    free(b.slot);
    free(b.sizes);
    free(b.samples);
    ledger_clear();
    if (file) ledger_file_close(1);
}

static void run_variant(const char *name, enum variant v, int depth, int python, size_t timed,
                        double *median_out)
{
    run_variant_file(name, v, depth, python, timed, median_out, NULL);
}

/* ---- the ledger file ------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Memory and file alternated `rounds` times at one depth; prints both medians of medians and the
 * ratio.  dir: where the file goes. */
static void file_pairs(const char *dir, int depth, size_t timed, int rounds)
{
    char pattern[256], mem_name[64], file_name[96];
    snprintf(pattern, sizeof pattern, "%s/npupool-bench-%%p.ledger", dir);
    snprintf(mem_name, sizeof mem_name, "memory bt=%d", depth);
    snprintf(file_name, sizeof file_name, "file bt=%d %s", depth, dir);
    double mem[8], fil[8], mem_mean[8], fil_mean[8];
    for (int r = 0; r < rounds && r < 8; r++) {
        run_variant_file(mem_name, V_LEDGER, depth, 0, timed, &mem[r], NULL);
        mem_mean[r] = last_mean;
        run_variant_file(file_name, V_LEDGER, depth, 0, timed, &fil[r], pattern);
        fil_mean[r] = last_mean;
    }
    qsort(mem, (size_t)rounds, sizeof mem[0], cmp_double);
    qsort(fil, (size_t)rounds, sizeof fil[0], cmp_double);
    qsort(mem_mean, (size_t)rounds, sizeof mem_mean[0], cmp_double);
    qsort(fil_mean, (size_t)rounds, sizeof fil_mean[0], cmp_double);
    double m = mem[rounds / 2], f = fil[rounds / 2];
    double mm = mem_mean[rounds / 2], fm = fil_mean[rounds / 2];
    printf("  ledger file on %s, %d frames: memory %.0f ns, file %.0f ns: %.3fx; means of the "
           "fastest 99 %%: %.1f ns, %.1f ns: %.3fx (medians of %d alternated runs; target <= "
           "1.1x)\n",
           dir, depth, m, f, f / m, mm, fm, fm / mm, rounds);
    printf("BENCH_LEDGER file dir=%s depth=%d memory_ns=%.0f file_ns=%.0f ratio=%.3f "
           "memory_mean_ns=%.1f file_mean_ns=%.1f mean_ratio=%.3f\n",
           dir, depth, m, f, f / m, mm, fm, fm / mm);
}

/* File bytes and mirror host memory per live allocation at 1,000,000 live, 10,000 stacks. */
static void file_memory(const char *dir)
{
    enum { LIVE = 1000000, STACKS = 10000 };
    char pattern[256];
    snprintf(pattern, sizeof pattern, "%s/npupool-bench-%%p.ledger", dir);
    ledger_clear();
    ledger_init(&(ledger_config_t){.backtrace_depth = 16, .file = pattern});
    uintptr_t frames[16];
    for (size_t i = 0; i < LIVE; i++) {
        uint32_t sid = 0;
        if (i < STACKS) {
            for (int k = 0; k < 16; k++) frames[k] = 0x400000 + i * 64 + (uintptr_t)k * 4096;
            sid = ledger_stack_intern(frames, 16);
        }
        ledger_record_alloc((i + 1) * 64, 0, 256, 320, VOCAB_MALLOC, VOCAB_FROM_POOL,
                            sid ? sid : (uint32_t)(i % STACKS + 1));
    }
    struct stat st;
    const char *path = ledger_file_path();
    if (!path || stat(path, &st) != 0) {
        printf("  ledger file on %s: not made\n", dir);
        return;
    }
    ledger_memory_t m;
    ledger_memory(&m);
    lfmt_header_t h = {0}; /* its chunk_end: the bytes used, the rest is reserved ahead */
    FILE *f = fopen(path, "rb");
    if (!f || fread(&h, sizeof h, 1, f) != 1) h.chunk_end = 0;
    if (f) fclose(f);
    double used = (double)h.chunk_end / (double)m.live_records;
    double per = (double)st.st_blocks * 512.0 / (double)m.live_records;
    double host = (double)ledger_file_host_bytes() / (double)m.live_records;
    printf("  ledger file with %zu live / %zu stacks of 16 frames: %.1f MB reserved, %.1f bytes "
           "per live allocation (%.1f used: slots, stacks, modules, figures; the rest reserved "
           "ahead); mirror host memory %.2f bytes per live allocation (on top of the ledger's "
           "%.1f)\n",
           m.live_records, m.stacks, (double)st.st_blocks * 512.0 / 1e6, per, used, host,
           (double)m.record_bytes / (double)m.live_records);
    printf("BENCH_LEDGER file_memory live=%zu file_bytes=%lld file_bytes_per_live=%.1f "
           "used_bytes_per_live=%.1f mirror_host_bytes_per_live=%.2f\n",
           m.live_records, (long long)st.st_blocks * 512, per, used, host);
    ledger_clear();
    ledger_file_close(1);
}

/* ---- report benchmark -------------------------------------------------------------------------- */

typedef struct big_ctx {
    pool_t *pool;     /* the device */
    size_t per_stack; /* allocations per stack */
    size_t made;      /* allocations made so far */
} big_ctx_t;

static void alloc_many(void *arg)
{
    big_ctx_t *c = arg;
    uint32_t sid = ledger_stack_capture(0);
    for (size_t i = 0; i < c->per_stack; i++) {
        uintptr_t a;
        if (pool_alloc(c->pool, 256, 320, &a, NULL) != POOL_OK) return;
        ledger_record_alloc(a, 0, 256, 320, VOCAB_MALLOC, VOCAB_FROM_POOL, sid);
        c->made++;
    }
}

static pool_t *bench_pool;
static void for_each_device(void *ctx, void (*cb)(void *, int, pool_t *, const wire_counters_t *),
                            void *cbctx)
{
    (void)ctx;
    cb(cbctx, 0, bench_pool, NULL);
}

static void report_bench(void)
{
    enum { STACKS = 10000, LIVE = 1000000 };
    ledger_init(&(ledger_config_t){.backtrace_depth = 16});
    ledger_clear();
    bench_pool = pool_create((uintptr_t)1 << 40, (size_t)1 << 30);
    big_ctx_t c = {bench_pool, LIVE / STACKS, 0};
    uint64_t t0 = now_ns();
    for (unsigned s = 0; s < STACKS; s++) descend_a(14, s, alloc_many, &c);
    uint64_t t1 = now_ns();
    ledger_memory_t m;
    ledger_memory(&m);
    printf("  %zu live allocations from %zu stacks recorded in %.2f s\n", m.live_records, m.stacks,
           (double)(t1 - t0) * 1e-9);
    printf("  ledger host memory: %.1f bytes per live allocation (limit 64); stacks: %zu bytes "
           "(%.0f per stack of 16 frames)\n",
           (double)m.record_bytes / (double)m.live_records, m.stack_bytes,
           (double)m.stack_bytes / (double)m.stacks);
    printf("BENCH_LEDGER memory live=%zu bytes_per_live=%.1f stacks=%zu stack_bytes=%zu\n",
           m.live_records, (double)m.record_bytes / (double)m.live_records, m.stacks,
           m.stack_bytes);
    char path[128];
    snprintf(path, sizeof path, "/tmp/npupool-bench-report-%d.json", (int)getpid());
    report_source_t src = {.for_each_device = for_each_device};
    for (int symbols = 0; symbols <= 1; symbols++) {
        report_config_t cfg = {.pattern = path,
                               .free_map_max = 4096,
                               .live_map_max = 4096,
                               .symbols = symbols,
                               .oom_max = 10};
        report_init(&cfg, &src);
        uint64_t best = UINT64_MAX, first = 0;
        for (int rep = 0; rep < 3; rep++) {
            uint64_t r0 = now_ns();
            if (report_write(WIRE_TRIGGER_SIGNAL, -1) != 0) {
                printf("  report failed\n");
                return;
            }
            uint64_t r1 = now_ns();
            if (r1 - r0 < best) best = r1 - r0;
            if (rep == 0) first = r1 - r0;
        }
        struct stat st;
        stat(path, &st);
        printf("  report with %zu live / %zu stacks, symbols %s: %.3f s (best of 3; first %.3f s), "
               "%.1f MB "
               "(target 1 s)\n",
               m.live_records, m.stacks, symbols ? "on " : "off", (double)best * 1e-9,
               (double)first * 1e-9, (double)st.st_size / 1e6);
        printf("BENCH_LEDGER report symbols=%d seconds=%.3f bytes=%lld\n", symbols,
               (double)best * 1e-9, (long long)st.st_size);
    }
    if (!getenv("BENCH_KEEP_REPORT")) unlink(path);
    ledger_clear();
    pool_destroy(bench_pool);
}

/* ---- Python frames ------------------------------------------------------------------------- */

/* The embedded interpreter's API, looked up by name (stable ABI; no Python header). */
typedef struct py_method_def {
    const char *ml_name;              /* PyMethodDef.ml_name */
    void *(*ml_meth)(void *, void *); /* PyCFunction */
    int ml_flags;                     /* METH_NOARGS */
    const char *ml_doc;               /* docstring */
} py_method_def_t;
#define PY_METH_NOARGS 0x0004

static struct {
    void (*initialize)(int);                               /* Py_InitializeEx */
    int (*run)(const char *);                              /* PyRun_SimpleString */
    void *(*add_module)(const char *);                     /* PyImport_AddModule (borrowed) */
    void *(*cfunction)(py_method_def_t *, void *, void *); /* PyCFunction_NewEx */
    int (*set_attr)(void *, const char *, void *);         /* PyObject_SetAttrString */
    void *(*from_long)(long);                              /* PyLong_FromLong */
    size_t timed;                                          /* pairs per variant */
    double med[4];                                         /* bt=32 off/on, bt=16 off/on */
    int frames_seen;                                       /* Python frames in one captured stack */
} pyb;

static int count_python_frames(void)
{
    const uintptr_t *fr;
    int n = ledger_stack_frames(ledger_stack_capture(0), &fr), py = 0;
    ledger_py_frame_t f;
    for (int i = 0; i < n; i++) py += ledger_py_frame(fr[i], &f);
    return py;
}

/* Called from Python, 20 Python frames deep, with the GIL held. */
static void *python_pairs(void *self, void *unused)
{
    (void)self;
    (void)unused;
    run_variant("py20 bt=32 py-off", V_LEDGER, 32, 0, pyb.timed, &pyb.med[0]);
    run_variant("py20 bt=32 py-on", V_LEDGER, 32, 1, pyb.timed, &pyb.med[1]);
    pyb.frames_seen = count_python_frames();
    run_variant("py20 bt=16 py-off", V_LEDGER, 16, 0, pyb.timed, &pyb.med[2]);
    run_variant("py20 bt=16 py-on", V_LEDGER, 16, 1, pyb.timed, &pyb.med[3]);
    return pyb.from_long(0);
}

static void python_bench(size_t timed)
{
    static const char *const libs[] = {"libpython3.13.so.1.0", "libpython3.12.so.1.0",
                                       "libpython3.11.so.1.0", "libpython3.10.so.1.0",
                                       "libpython3.9.so.1.0"};
    const char *want = getenv("BENCH_LIBPYTHON");
    void *h = want ? dlopen(want, RTLD_NOW | RTLD_GLOBAL) : NULL;
    for (size_t i = 0; !h && !want && i < sizeof libs / sizeof libs[0]; i++)
        h = dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        printf("  not measured: no libpython3.9..3.13 could be loaded (BENCH_LIBPYTHON=path)\n");
        return;
    }
    pyb.initialize = (void (*)(int))dlsym(h, "Py_InitializeEx");
    pyb.run = (int (*)(const char *))dlsym(h, "PyRun_SimpleString");
    pyb.add_module = (void *(*)(const char *))dlsym(h, "PyImport_AddModule");
    pyb.cfunction = (void *(*)(py_method_def_t *, void *, void *))dlsym(h, "PyCFunction_NewEx");
    pyb.set_attr = (int (*)(void *, const char *, void *))dlsym(h, "PyObject_SetAttrString");
    pyb.from_long = (void *(*)(long))dlsym(h, "PyLong_FromLong");
    if (!pyb.initialize || !pyb.run || !pyb.add_module || !pyb.cfunction || !pyb.set_attr ||
        !pyb.from_long) {
        printf("  not measured: the loaded libpython lacks the embedding API\n");
        return;
    }
    pyb.timed = timed;
    pyb.initialize(0); /* this thread holds the GIL from here on */
    double none;
    run_variant("interp, 0 py frames", V_LEDGER, 32, 1, timed, &none);
    ledger_py_status_t st;
    ledger_py_status(&st);
    if (!st.supported) {
        printf("  not measured: Python %s is not one npupool reads\n", st.version);
        return;
    }
    static py_method_def_t def = {"pairs", python_pairs, PY_METH_NOARGS, NULL};
    void *fn = pyb.cfunction(&def, NULL, NULL);
    if (!fn || pyb.set_attr(pyb.add_module("__main__"), "pairs", fn) != 0 ||
        pyb.run("def rec(n):\n"
                "    return pairs() if n == 0 else rec(n - 1)\n"
                "rec(18)\n") != 0) { /* <module> + rec(18) .. rec(0): 20 Python frames */
        printf("  not measured: the Python side failed\n");
        return;
    }
    printf("  Python %s; a stack captured in the loop holds %d Python frames\n", st.version,
           pyb.frames_seen);
    printf("  Python frames cost: %.0f ns per allocation with 20 frames (bt=32), %.0f ns with 16 "
           "(bt=16), over the same native capture; target 2000 ns: %s\n",
           pyb.med[1] - pyb.med[0], pyb.med[3] - pyb.med[2],
           pyb.med[1] - pyb.med[0] <= 2000 ? "met" : "MISSED");
    printf("BENCH_LEDGER python version=%s frames=%d cost32_ns=%.0f cost16_ns=%.0f\n", st.version,
           pyb.frames_seen, pyb.med[1] - pyb.med[0], pyb.med[3] - pyb.med[2]);
}

/* ---- 6. the stack walk by depth ------------------------------------------------------------ */
#define WALK_MAX 64      /* frames a walk may return (more than the deepest recursion gives) */
#define WALK_BATCH 1000  /* walks timed together */
#define WALK_BATCHES 101 /* batches; the median of their means is the figure */
static volatile int walk_sink;

/* At the bottom of `extra` more frames of this function: the median ns of one walk, and its
 * frame count in *frames.  (Each level uses the result after the call: no tail call, so every
 * level keeps its frame.) */
__attribute__((noinline)) static double walk_at_depth(int extra, int *frames)
{
    if (extra > 0) {
        double ns = walk_at_depth(extra - 1, frames);
        walk_sink += *frames;
        return ns;
    }
    void *buf[WALK_MAX];
    double mean[WALK_BATCHES];
    int n = 0;
    for (int i = 0; i < WALK_BATCH; i++) n = ledger_unwind_backtrace(buf, WALK_MAX); /* warm */
    for (int b = 0; b < WALK_BATCHES; b++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < WALK_BATCH; i++) n = ledger_unwind_backtrace(buf, WALK_MAX);
        mean[b] = (double)(now_ns() - t0) / WALK_BATCH;
    }
    qsort(mean, WALK_BATCHES, sizeof mean[0], cmp_double);
    *frames = n;
    return mean[WALK_BATCHES / 2];
}

static void walk_bench(void)
{
    if (!ledger_unwind_load()) {
        printf("  not measured: libunwind could not be loaded\n");
        return;
    }
    enum { NDEPTHS = 5 };
    double x[NDEPTHS], y[NDEPTHS], sx = 0, sy = 0;
    for (int k = 0; k < NDEPTHS; k++) {
        int frames = 0;
        y[k] = walk_at_depth(8 * k, &frames);
        x[k] = frames;
        sx += x[k];
        sy += y[k];
        printf("  %2d frames  %6.1f ns a walk\n", frames, y[k]);
        printf("BENCH_LEDGER walk frames=%d ns=%.1f\n", frames, y[k]);
    }
    double mx = sx / NDEPTHS, my = sy / NDEPTHS, sxy = 0, sxx = 0;
    for (int k = 0; k < NDEPTHS; k++) {
        sxy += (x[k] - mx) * (y[k] - my);
        sxx += (x[k] - mx) * (x[k] - mx);
    }
    double per = sxx > 0 ? sxy / sxx : 0, start = my - per * mx;
    printf("  least squares: %.1f ns to start a walk, %.2f ns a frame (a capture of the default "
           "depth walks its 16 frames and npupool's own above them)\n",
           start, per);
    printf("BENCH_LEDGER walk_fit start_ns=%.1f per_frame_ns=%.2f\n", start, per);
}

int main(int argc, char **argv)
{
    size_t timed = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
    if (timed < 1000) timed = 1000;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_ARENA_MAX, 1);
    printf("bench_ledger: free+malloc pair, 1,000 live, sizes 512 B..1 MiB log-uniform, %zu timed "
           "pairs\n",
           timed);
    double glibc, off, d16, d32;
    double d16_py;
    run_variant("glibc", V_GLIBC, 0, 0, timed, &glibc);
    run_variant("pool", V_POOL, 0, 0, timed, NULL);
    run_variant("ledger bt=0", V_LEDGER, 0, 0, timed, &off);
    run_variant("ledger bt=16", V_LEDGER, 16, 0, timed, &d16);
    run_variant("ledger bt=16 py-on", V_LEDGER, 16, 1, timed, &d16_py);
    run_variant("ledger bt=32", V_LEDGER, 32, 0, timed, &d32);
    printf("  backtrace cost: %.0f ns at 16 frames, %.0f ns at 32 (medians over backtraces off); "
           "default depth %s the 400 ns target\n",
           d16 - off, d32 - off, d16 <= 400 ? "meets" : "MISSES");
    printf("  Python frames on, no interpreter in the process: %+.0f ns (bt=16)\n", d16_py - d16);
    printf("bench_ledger: the stack walk alone (libunwind), by the frames it returns\n");
    walk_bench();
    printf("bench_ledger: report writing and memory\n");
    report_bench();
    printf("bench_ledger: Python frames (an embedded interpreter)\n");
    python_bench(timed);
    const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    printf("bench_ledger: the ledger file (NPUPOOL_LEDGER_FILE)\n");
    file_pairs(shm, 16, timed, 3);
    file_pairs(shm, 0, timed, 3);
    file_pairs("/tmp", 16, timed, 3);
    file_memory(shm);
    return 0;
}
