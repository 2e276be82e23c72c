/* bench/bench_shim.c — what a free+malloc pair costs an application through the shim (issue 13),
 * against glibc on the same size sequence in the same process.
 *
 * An ordinary ACL program: it calls aclrtMalloc / aclrtFree of the runtime it links (the fake,
 * build/fakeacl/libascendcl.so), and the driver runs it with LD_PRELOAD=libnpupool.so, so every
 * call takes the path an application's call takes (the PLT, the shim's hook, the pool, the
 * ledger, the observers).  Nothing of npupool is linked.
 *
 * Driver (no arguments, or the options below): runs each scenario `runs` times, alternating, as
 * a child of its own (`--child ...`) with LD_PRELOAD set, and prints the median over the runs of
 * each figure, the ratio to glibc and the goals beside them.  Scenarios:
 *   pairs      steady state of `live` blocks: fill, warm up, then time each pair "aclrtFree(slot
 *              i); aclrtMalloc(slot i, next size)" with i uniform, and the same pairs with
 *              free/malloc; 1,000 live at 512 B..1 MiB and 100,000 live at 512 B..256 KiB
 *              (log-uniform), backtraces off (NPUPOOL_BACKTRACE_DEPTH=0) and at the default
 *              depth (16).  The two allocators alternate in blocks of BLOCK pairs (order swapped
 *              each block) so that both see the same machine load.  The pair loop runs at the
 *              bottom of a call chain DEEP frames deep, so a backtrace has its full 16 frames.
 *              glibc is kept in its main arena as bench_pool does (mallopt: mmap threshold 32
 *              MiB, no trimming, one arena).
 *   threads    T = 1, 2, 4, 8 threads, each with its own 1,000 live blocks and its own sequence,
 *              allocating through the shim at once (backtraces off) for a fixed number of pairs
 *              each; two tables: sizes 512 B..256 KiB (every block from the pool's size classes,
 *              which the thread caches serve) and 512 B..1 MiB (9 % of the blocks from the large
 *              heap, under the pool lock).  Throughput per thread = pairs / wall time / min(T,
 *              CPUs): on a machine with fewer CPUs than threads, each running thread's share;
 *              the ratio to one thread shows what contention costs (locks, shared cache
 *              lines).  Also pairs per CPU-second of each thread (CLOCK_THREAD_CPUTIME_ID), and
 *              glibc (default arenas) in the same process for reference.
 * Timer: ptimer.h (rdtsc with fences on x86-64), calibrated once per child; the median empty
 * region is subtracted from every sample.  The victim's address is read before the timer starts.
 * Load: the 1-minute load average is printed before and after; figures on a loaded machine are
 * worth little (the README quotes them with the load).
 * Usage: bench_shim [--runs N] [--pairs N] [--shim PATH] [--quick]
 *   --runs   runs per scenario (default 3; the figures are medians over runs)
 *   --pairs  timed pairs per allocator per run (default 200000)
 *   --shim   the preload library (default: ../libnpupool.so next to this program)
 *   --quick  one run of 20,000 pairs, threads 1 and 8 (a smoke test)
 * For a profiler, one allocator alone, untimed (run it with LD_PRELOAD and the options set):
 *   bench_shim --child loop LIVE LO HI PAIRS shim|glibc
 *   bench_shim --child threads THREADS PAIRS SEED HI shim|glibc   (threads allocating at once,
 *                                                                  sizes 512 B..HI)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "ptimer.h"
#include "ptrace.h"

#define BLOCK 10000      /* timed pairs per allocator before the other one's turn */
#define DEEP 24          /* frames between main and the pair loop */
#define MAX_RUNS 15      /* runs per scenario, at most */
#define THREAD_MAX 8     /* threads in the largest row of the threads table */
#define THREAD_LIVE 1000 /* live blocks per thread */

/* ---- the child: one scenario, both allocators ------------------------------------------------ */

typedef struct seq {
    size_t live;    /* live blocks */
    size_t warm;    /* untimed pairs before timing */
    size_t pairs;   /* timed pairs */
    size_t *fill;   /* [live] first sizes */
    uint32_t *slot; /* [warm + pairs] victim of each pair */
    size_t *size;   /* [warm + pairs] new size of each pair */
} seq_t;

static void seq_make(seq_t *s, size_t live, size_t lo, size_t hi, size_t warm, size_t pairs,
                     uint64_t seed)
{
    size_t n = warm + pairs;
    s->live = live, s->warm = warm, s->pairs = pairs;
    s->fill = malloc(live * sizeof *s->fill);
    s->slot = malloc(n * sizeof *s->slot);
    s->size = malloc(n * sizeof *s->size);
    if (!s->fill || !s->slot || !s->size) {
        fprintf(stderr, "bench_shim: no memory for the sequence\n");
        exit(2);
    }
    for (size_t i = 0; i < live; i++) s->fill[i] = ptrace_log_uniform(&seed, lo, hi);
    for (size_t k = 0; k < n; k++) {
        s->slot[k] = (uint32_t)(ptrace_rand(&seed) % live);
        s->size[k] = ptrace_log_uniform(&seed, lo, hi);
    }
}

static void seq_free(seq_t *s)
{
    free(s->fill);
    free(s->slot);
    free(s->size);
}

enum alloc_kind { A_GLIBC, A_SHIM };

static inline void *one_alloc(enum alloc_kind a, size_t size)
{
    if (a == A_GLIBC) return malloc(size);
    void *p = NULL;
    return aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS ? p : NULL;
}

static inline void one_free(enum alloc_kind a, void *p)
{
    if (a == A_GLIBC)
        free(p);
    else
        aclrtFree(p);
}

/* Pairs k in [from, to) of s on slots, untimed.  0, or -1 when an allocation failed. */
static int pairs_untimed(enum alloc_kind a, const seq_t *s, void **slots, size_t from, size_t to)
{
    for (size_t k = from; k < to; k++) {
        uint32_t i = s->slot[k];
        one_free(a, slots[i]);
        if (!(slots[i] = one_alloc(a, s->size[k]))) return -1;
    }
    return 0;
}

/* Pairs k in [from, to), each timed alone; ticks into out[k - from]. */
__attribute__((noipa)) static int pairs_timed(enum alloc_kind a, const seq_t *s, void **slots,
                                              size_t from, size_t to, uint64_t *out)
{
    for (size_t k = from; k < to; k++) {
        uint32_t i = s->slot[k];
        size_t size = s->size[k];
        void *victim = slots[i];
        uint64_t t0 = ptimer_begin();
        one_free(a, victim);
        void *p = one_alloc(a, size);
        uint64_t t1 = ptimer_end();
        if (!p) return -1;
        slots[i] = p;
        out[k - from] = t1 - t0;
    }
    return 0;
}

static void **fill(enum alloc_kind a, const seq_t *s)
{
    void **slots = calloc(s->live, sizeof *slots);
    if (!slots) return NULL;
    for (size_t i = 0; i < s->live; i++)
        if (!(slots[i] = one_alloc(a, s->fill[i]))) {
            fprintf(stderr, "bench_shim: %s refused the fill allocation %zu\n",
                    a == A_GLIBC ? "glibc" : "aclrtMalloc", i);
            return NULL;
        }
    if (pairs_untimed(a, s, slots, 0, s->warm) != 0) return NULL;
    return slots;
}

static void drain(enum alloc_kind a, const seq_t *s, void **slots)
{
    for (size_t i = 0; i < s->live; i++) one_free(a, slots[i]);
    free(slots);
}

/* One line per allocator: "R <name> median p99 p99.9 mean" in ns. */
static void print_result(const char *name, uint64_t *ticks, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += ptimer_ns(ticks[i]);
    ptimer_sort(ticks, n);
    printf("R %s %.1f %.1f %.1f %.1f\n", name, ptimer_ns(ptimer_quantile(ticks, n, 0.5)),
           ptimer_ns(ptimer_quantile(ticks, n, 0.99)), ptimer_ns(ptimer_quantile(ticks, n, 0.999)),
           sum / (double)n);
}

typedef struct pair_args {
    seq_t *s;        /* the sequence */
    void **slots[2]; /* per allocator */
    uint64_t *t[2];  /* per allocator: ticks */
    int failed;      /* an allocation failed */
} pair_args_t;

/* The timed blocks, alternating allocators. */
static void pairs_run(pair_args_t *a)
{
    const seq_t *s = a->s;
    for (size_t from = s->warm, b = 0; from < s->warm + s->pairs; from += BLOCK, b++) {
        size_t to = from + BLOCK < s->warm + s->pairs ? from + BLOCK : s->warm + s->pairs;
        for (int j = 0; j < 2; j++) {
            enum alloc_kind k = (enum alloc_kind)((b + (size_t)j) & 1);
            if (pairs_timed(k, s, a->slots[k], from, to, a->t[k] + (from - s->warm)) != 0)
                a->failed = 1;
        }
    }
}

/* DEEP frames of call chain above the pair loop (what an application's stack looks like to a
 * backtrace: it keeps 16 frames). */
__attribute__((noipa)) static void descend(int level, pair_args_t *a)
{
    if (level == 0)
        pairs_run(a);
    else
        descend(level - 1, a);
    __asm__ volatile("" ::: "memory"); /* not a tail call: the frame stays */
}

/* 0 when the shim answered the allocations: the fake runtime saw a handful of its own (the
 * pool's reservation or chunks), not one per pair. */
static int shim_in_front(size_t calls)
{
    uint64_t (*count)(const char *) =
        (uint64_t(*)(const char *))dlsym(RTLD_DEFAULT, "fakeacl_count");
    if (!count) return 0; /* not the fake: nothing to ask */
    uint64_t n = count("device_allocs");
    if (n < calls / 100) return 0;
    fprintf(stderr,
            "bench_shim: %llu of %zu allocations reached the runtime: the shim is not in "
            "front (LD_PRELOAD?)\n",
            (unsigned long long)n, calls);
    return -1;
}

static int child_pairs(size_t live, size_t lo, size_t hi, size_t pairs, uint64_t seed)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, 64 << 20);
    mallopt(M_ARENA_MAX, 1);
    ptimer_calibrate();
    seq_t s;
    seq_make(&s, live, lo, hi, live < 20000 ? 20000 : live, pairs, seed);
    pair_args_t a = {.s = &s};
    for (int k = 0; k < 2; k++) {
        a.t[k] = malloc(pairs * sizeof *a.t[k]);
        a.slots[k] = fill((enum alloc_kind)k, &s);
        if (!a.t[k] || !a.slots[k]) return 1;
    }
    descend(DEEP, &a);
    if (a.failed) {
        fprintf(stderr, "bench_shim: an allocation failed during the timed pairs\n");
        return 1;
    }
    if (shim_in_front(s.live + s.warm + pairs) != 0) return 1;
    print_result("glibc", a.t[A_GLIBC], pairs);
    print_result("shim", a.t[A_SHIM], pairs);
    printf("T %.3f %.1f\n", ptimer_cal.ns_per_tick * ptimer_cal.resolution_ticks,
           ptimer_cal.overhead_ticks * ptimer_cal.ns_per_tick);
    for (int k = 0; k < 2; k++) {
        drain((enum alloc_kind)k, &s, a.slots[k]);
        free(a.t[k]);
    }
    seq_free(&s);
    return 0;
}

/* Untimed pairs through one allocator, for a profiler (perf record -g). */
static int child_loop(size_t live, size_t lo, size_t hi, size_t pairs, const char *alloc)
{
    enum alloc_kind k = strcmp(alloc, "glibc") == 0 ? A_GLIBC : A_SHIM;
    seq_t s;
    seq_make(&s, live, lo, hi, 0, pairs, 1);
    void **slots = fill(k, &s);
    if (!slots) return 1;
    double w0 = ptimer_wall_ns();
    if (pairs_untimed(k, &s, slots, 0, pairs) != 0) return 1;
    printf("%s: %.1f ns per pair (mean, no timer)\n", alloc,
           (ptimer_wall_ns() - w0) / (double)pairs);
    drain(k, &s, slots);
    seq_free(&s);
    return 0;
}

/* ---- the child: threads ---------------------------------------------------------------------- */

typedef struct thread_arg {
    enum alloc_kind kind;     /* allocator */
    seq_t s;                  /* this thread's sequence */
    pthread_barrier_t *ready; /* every thread filled and warmed up */
    pthread_barrier_t *go;    /* start of the timed part */
    double cpu_ns;            /* CPU time of the timed part */
    double end_ns;            /* CLOCK_MONOTONIC at its end */
    int failed;               /* an allocation failed */
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *t = p;
    if (t->kind == A_SHIM && aclrtSetDevice(0) != ACL_SUCCESS) t->failed = 1;
    void **slots = t->failed ? NULL : fill(t->kind, &t->s);
    if (!slots) t->failed = 1;
    pthread_barrier_wait(t->ready);
    pthread_barrier_wait(t->go);
    double c0 = ptimer_thread_cpu_ns();
    if (slots && pairs_untimed(t->kind, &t->s, slots, t->s.warm, t->s.warm + t->s.pairs) != 0)
        t->failed = 1;
    t->cpu_ns = ptimer_thread_cpu_ns() - c0;
    t->end_ns = ptimer_wall_ns();
    pthread_barrier_wait(t->ready); /* nobody drains before everybody finished */
    if (slots) drain(t->kind, &t->s, slots);
    return NULL;
}

/* "H <alloc> <threads> <pairs/s aggregate> <pairs per CPU-s, mean over threads>" */
static int threads_row(enum alloc_kind kind, int n, size_t pairs, size_t hi, uint64_t seed)
{
    pthread_t tid[THREAD_MAX];
    thread_arg_t arg[THREAD_MAX];
    pthread_barrier_t ready, go;
    pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        arg[i] = (thread_arg_t){.kind = kind, .ready = &ready, .go = &go};
        seq_make(&arg[i].s, THREAD_LIVE, 512, hi, 20000, pairs, seed + (uint64_t)i * 7919);
        pthread_create(&tid[i], NULL, thread_main, &arg[i]);
    }
    pthread_barrier_wait(&ready);
    double w0 = ptimer_wall_ns();
    pthread_barrier_wait(&go);
    pthread_barrier_wait(&ready);
    double end = 0, cpu_rate = 0;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        if (arg[i].end_ns > end) end = arg[i].end_ns;
        cpu_rate += (double)pairs / (arg[i].cpu_ns * 1e-9);
        failed |= arg[i].failed;
        seq_free(&arg[i].s);
    }
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    if (failed) {
        fprintf(stderr, "bench_shim: an allocation failed in the threads table\n");
        return 1;
    }
    printf("H %s %d %.0f %.0f\n", kind == A_GLIBC ? "glibc" : "shim", n,
           (double)pairs * n / ((end - w0) * 1e-9), cpu_rate / n);
    return 0;
}

/* Sizes 512 B..hi; both allocators, or only `only` ("shim" or "glibc": for a profiler). */
static int child_threads(int n, size_t pairs, uint64_t seed, size_t hi, const char *only)
{
    if (strcmp(only, "glibc") != 0 && threads_row(A_SHIM, n, pairs, hi, seed) != 0) return 1;
    return strcmp(only, "shim") != 0 ? threads_row(A_GLIBC, n, pairs, hi, seed) : 0;
}

/* ---- the driver ------------------------------------------------------------------------------ */

typedef struct fig {
    double v[MAX_RUNS][4]; /* per run: median, p99, p99.9, mean */
    int n;                 /* runs recorded */
} fig_t;

static double median_of(double *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: a handful of values */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n ? (n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

static double fig_median(const fig_t *f, int col)
{
    double v[MAX_RUNS];
    for (int i = 0; i < f->n; i++) v[i] = f->v[i][col];
    return median_of(v, f->n);
}

static char g_self[PATH_MAX];
static char g_shim[PATH_MAX];

/* Run this program with `args` as a child in front of the shim, with `depth` (NULL: the
 * default) as NPUPOOL_BACKTRACE_DEPTH; its stdout into buf.  0 on success. */
static int run_child(char *const args[], const char *depth, char *buf, size_t len)
{
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("LD_PRELOAD", g_shim, 1);
        if (depth)
            setenv("NPUPOOL_BACKTRACE_DEPTH", depth, 1);
        else
            unsetenv("NPUPOOL_BACKTRACE_DEPTH");
        execv(g_self, args);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd[0], buf + got, len - 1 - got)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0) got += (size_t)r;
    buf[got] = 0;
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

typedef struct scenario {
    const char *label;   /* live blocks, for the table */
    size_t live, lo, hi; /* blocks and size range */
    const char *depth;   /* NPUPOOL_BACKTRACE_DEPTH, NULL = default (16) */
    double goal;         /* shim / glibc median at most this; 0 = no goal */
    fig_t glibc, shim;   /* results */
    double tick_ns;      /* timer resolution seen */
} scenario_t;

static int parse_pairs(const char *out, scenario_t *sc)
{
    int found = 0;
    for (const char *l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        char name[16];
        double m, p99, p999, mean, res, ovh;
        if (sscanf(l, "R %15s %lf %lf %lf %lf", name, &m, &p99, &p999, &mean) == 5) {
            fig_t *f = strcmp(name, "glibc") == 0 ? &sc->glibc : &sc->shim;
            if (f->n < MAX_RUNS) {
                f->v[f->n][0] = m, f->v[f->n][1] = p99, f->v[f->n][2] = p999, f->v[f->n][3] = mean;
                f->n++;
                found++;
            }
        } else if (sscanf(l, "T %lf %lf", &res, &ovh) == 2) {
            sc->tick_ns = res;
        }
    }
    return found == 2 ? 0 : -1;
}

static double load1(void)
{
    double l[1] = {0};
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* One threads table: sizes 512 B..hi ("512 B-" what in the title).  1 when the goal is met, 0
 * when not, -1 when a child failed. */
static int threads_table(int runs, size_t pairs, int quick, size_t hi, const char *what, long cpus,
                         char *buf)
{
    int rows[] = {1, 2, 4, 8}, nrows = quick ? 2 : 4;
    if (quick) rows[1] = 8;
    double shim_tp[4][MAX_RUNS], shim_cpu[4][MAX_RUNS], gl_tp[4][MAX_RUNS];
    size_t tpairs = pairs < 50000 ? pairs : pairs / 2;
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < nrows; k++) {
            char nt[16], np[32], seed[32], hs[32];
            snprintf(nt, sizeof nt, "%d", rows[k]);
            snprintf(np, sizeof np, "%zu", tpairs);
            snprintf(seed, sizeof seed, "%d", 100 + r);
            snprintf(hs, sizeof hs, "%zu", hi);
            char *args[] = {g_self, "--child", "threads", nt, np, seed, hs, NULL};
            if (run_child(args, "0", buf, 1 << 16) != 0) {
                fprintf(stderr, "bench_shim: the threads child (%d) failed:\n%s\n", rows[k], buf);
                return -1;
            }
            for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
                char name[16];
                int n;
                double tp, cpu;
                if (sscanf(l, "H %15s %d %lf %lf", name, &n, &tp, &cpu) != 4) continue;
                if (strcmp(name, "shim") == 0) {
                    shim_tp[k][r] = tp;
                    shim_cpu[k][r] = cpu;
                } else {
                    gl_tp[k][r] = tp;
                }
            }
        }
    }
    printf("\n%d threads (each its own 1,000 live blocks, 512 B-%s, backtraces off), %zu pairs "
           "per thread:\n",
           THREAD_MAX, what, tpairs);
    printf("%-8s %14s %16s %10s %16s %18s\n", "threads", "shim pairs/s", "per running thr",
           "vs 1 thr", "per CPU-s/thread", "glibc per run thr");
    double one = 0;
    int threads_met = 1;
    for (int k = 0; k < nrows; k++) {
        double tp = median_of(shim_tp[k], runs), cpu = median_of(shim_cpu[k], runs);
        double gl = median_of(gl_tp[k], runs);
        double running = (double)(rows[k] < cpus ? rows[k] : cpus);
        double per = tp / running;
        if (k == 0) one = per;
        double slow = per > 0 ? one / per : 0;
        if (rows[k] == THREAD_MAX) threads_met = slow <= 2.0;
        printf("%-8d %14.0f %16.0f %9.2fx %16.0f %18.0f\n", rows[k], tp, per, slow, cpu,
               gl / running);
    }
    printf("goal: throughput per thread with %d threads within 2x of one thread: %s\n", THREAD_MAX,
           threads_met ? "met" : "NOT met");
    return threads_met;
}

static int driver(int runs, size_t pairs, int quick)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double load_before = load1();
    printf("bench_shim: a free+malloc pair through LD_PRELOAD=%s on the fake runtime,\n"
           "against glibc malloc/free on the same sizes in the same process; %d run(s) per "
           "scenario, %zu timed pairs per allocator per run; %ld CPUs, load average %.2f\n",
           g_shim, runs, pairs, cpus, load_before);
    scenario_t sc[] = {
        {.label = "1,000", .live = 1000, .lo = 512, .hi = 1 << 20, .depth = "0", .goal = 0.30},
        {.label = "1,000", .live = 1000, .lo = 512, .hi = 1 << 20, .goal = 0.90},
        {.label = "100,000",
         .live = 100000,
         .lo = 512,
         .hi = 256 << 10,
         .depth = "0",
         .goal = 0.15},
        {.label = "100,000", .live = 100000, .lo = 512, .hi = 256 << 10},
    };
    size_t nsc = sizeof sc / sizeof sc[0];
    char *buf = malloc(1 << 16);
    if (!buf) return 1;
    for (int r = 0; r < runs; r++) {
        for (size_t i = 0; i < nsc; i++) {
            char live[32], lo[32], hi[32], np[32], seed[32];
            snprintf(live, sizeof live, "%zu", sc[i].live);
            snprintf(lo, sizeof lo, "%zu", sc[i].lo);
            snprintf(hi, sizeof hi, "%zu", sc[i].hi);
            snprintf(np, sizeof np, "%zu", pairs);
            snprintf(seed, sizeof seed, "%d", 1 + r);
            char *args[] = {g_self, "--child", "pairs", live, lo, hi, np, seed, NULL};
            if (run_child(args, sc[i].depth, buf, 1 << 16) != 0 || parse_pairs(buf, &sc[i]) != 0) {
                fprintf(stderr, "bench_shim: the child for %s live failed:\n%s\n", sc[i].label,
                        buf);
                return 1;
            }
        }
    }
    printf("\n%-8s %-10s %-6s %8s %8s %8s %8s  %-7s %s\n", "live", "sizes", "bt", "glibc", "shim",
           "p99", "p99.9", "ratio", "goal");
    int all_met = 1;
    for (size_t i = 0; i < nsc; i++) {
        double g = fig_median(&sc[i].glibc, 0), s = fig_median(&sc[i].shim, 0);
        double ratio = g > 0 ? s / g : 0;
        char goal[48] = "-";
        if (sc[i].goal > 0) {
            int met = ratio <= sc[i].goal;
            all_met &= met;
            snprintf(goal, sizeof goal, "<= %.2fx glibc: %s", sc[i].goal, met ? "met" : "NOT met");
        }
        printf("%-8s %-10s %-6s %8.0f %8.0f %8.0f %8.0f  %5.2fx  %s\n", sc[i].label,
               sc[i].hi == (1u << 20) ? "512B-1MiB" : "512B-256KiB", sc[i].depth ? "off" : "16", g,
               s, fig_median(&sc[i].shim, 1), fig_median(&sc[i].shim, 2), ratio, goal);
    }
    printf("(ns; medians over %d run(s) of each run's median, p99 and p99.9 of the shim; glibc "
           "p99 / p99.9 at 1,000 live, bt off: %.0f / %.0f; the timer resolves %.1f ns)\n",
           runs, fig_median(&sc[0].glibc, 1), fig_median(&sc[0].glibc, 2), sc[0].tick_ns);

    /* threads: two size ranges */
    static const struct {
        size_t hi;
        const char *what;
    } ranges[] = {{256 << 10, "256 KiB (all from size classes)"},
                  {1 << 20, "1 MiB (9 % from the large heap)"}};
    for (size_t h = 0; h < sizeof ranges / sizeof ranges[0]; h++) {
        int met = threads_table(runs, pairs, quick, ranges[h].hi, ranges[h].what, cpus, buf);
        if (met < 0) {
            free(buf);
            return 1;
        }
        all_met &= met;
    }
    printf("\nload average %.2f before, %.2f after; goals %s\n", load_before, load1(),
           all_met ? "all met" : "NOT all met");
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
        if (aclrtSetDevice(0) != ACL_SUCCESS) {
            fprintf(stderr, "bench_shim: aclrtSetDevice(0) failed\n");
            return 1;
        }
        if (strcmp(argv[2], "pairs") == 0 && argc == 8)
            return child_pairs(strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10),
                               strtoul(argv[5], NULL, 10), strtoul(argv[6], NULL, 10),
                               strtoull(argv[7], NULL, 10));
        if (strcmp(argv[2], "loop") == 0 && argc == 8)
            return child_loop(strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10),
                              strtoul(argv[5], NULL, 10), strtoul(argv[6], NULL, 10), argv[7]);
        if (strcmp(argv[2], "threads") == 0 && (argc == 7 || argc == 8) && atoi(argv[3]) >= 1 &&
            atoi(argv[3]) <= THREAD_MAX && strtoul(argv[6], NULL, 10) >= 512 &&
            (argc == 7 || !strcmp(argv[7], "shim") || !strcmp(argv[7], "glibc")))
            return child_threads(atoi(argv[3]), strtoul(argv[4], NULL, 10),
                                 strtoull(argv[5], NULL, 10), strtoul(argv[6], NULL, 10),
                                 argc == 8 ? argv[7] : "both");
        fprintf(stderr, "bench_shim: bad child arguments\n");
        return 2;
    }
    int runs = 3, quick = 0;
    size_t pairs = 200000;
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0) return 1;
    g_self[n] = 0;
    snprintf(g_shim, sizeof g_shim, "%.*s/../libnpupool.so", (int)(strrchr(g_self, '/') - g_self),
             g_self);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc)
            pairs = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--shim") == 0 && i + 1 < argc)
            snprintf(g_shim, sizeof g_shim, "%s", argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else {
            fprintf(stderr, "usage: bench_shim [--runs N] [--pairs N] [--shim PATH] [--quick]\n");
            return 2;
        }
    }
    if (quick) runs = 1, pairs = 20000;
    if (runs < 1 || runs > MAX_RUNS || pairs < 1000) {
        fprintf(stderr, "bench_shim: --runs 1..%d, --pairs >= 1000\n", MAX_RUNS);
        return 2;
    }
    char real[PATH_MAX];
    if (!realpath(g_shim, real)) {
        fprintf(stderr, "bench_shim: no preload library at %s (make builds it)\n", g_shim);
        return 1;
    }
    snprintf(g_shim, sizeof g_shim, "%s", real);
    return driver(runs, pairs, quick);
}
