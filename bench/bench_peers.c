/* bench/bench_peers.c — npupool's pool against peer allocators, side by side in one process, on
 * identical operation sequences (issue 13's tables).  docs/bench.md says how to read them.
 *
 * Allocators (bench/peers/peer.h):
 *   npupool   pool/ through its API: pool_alloc(requested = granted = size) / pool_free over a
 *             made-up range (64 GiB for latency), POOL_ALIGN (64 B) blocks, as in bench_pool
 *   tlsf, o1heap, bestfit   arena peers written for this bench (bench/peers/), host metadata
 *   firstfit  the seed's first-fit pool (tools/firstfit.c): fragmentation table only
 *   glibc, mimalloc, jemalloc, tcmalloc   host mallocs (the last three dlopen()ed from Debian's
 *             packages when installed, else "skipped: ..."): latency table only
 *   floor     the latency table's reference row (bench/peers/peer_floor.c), not a contender: one
 *             word of host metadata per block read and written by a pair, nothing else; no goal
 *             and no "best peer" is measured against it
 * A. Threads: 1, 8 and 64 threads, each with its own 1,000 live blocks of 64 B..64 KiB and its
 *    own sequence, all released together; cost = the thread's CPU time / its pairs (median over
 *    the threads), against one thread (goal: <= 2x at 8).  The arena peers, not thread-safe, are
 *    called under one mutex; npupool and the host mallocs directly (glibc with its default
 *    settings: peer_glibc_plain).
 * B. Pair latency: for each scale (1,000 live of 512 B..1 MiB, 100,000 of 512 B..256 KiB,
 *    1,000,000 of 64 B..64 KiB, log-uniform), every allocator gets the same sequence: fill the
 *    live slots, run untimed warm-up pairs, then time each "free slot i; allocate a new size
 *    into slot i" (i uniform) on its own with the region timer (bench/peers/ptimer.h: rdtsc
 *    fenced, the empty region's median cost subtracted).  The victim's address is read before
 *    the timer starts (bench_pool's reason: the slot array misses the cache at 100,000 live).
 *    Before the timed pairs, as many other pairs run untimed under one wall-clock reading: their
 *    mean is exact where the timer's resolution (10 ns on this machine kind's VM) is coarse.
 *    Three runs, interleaved (run 1 of every allocator, then run 2, ...), each a fresh
 *    instance; the table gives the median over the runs of each run's median, p99, p99.9 and
 *    mean.  Then npupool's timed pairs by path (cache, locked, large: enum np_path), and the
 *    arena allocators' host metadata after the warm-up, in all and per live block (mallinfo2).
 *    Last, the floor's figures beside the scaling goal: what reading the freed block's word
 *    alone costs at 1,000 and at 1,000,000 live.
 *    Nothing of the bench's own runs between npupool's pairs that does not run between a
 *    peer's: the path needs the freed block's size, which pool_free answers.
 * C. Fragmentation: for each trace (bench/peers/ptrace.h: the tensor trace of bench_frag, a
 *    mixed small/large trace with about 11 live blocks per slab class of npupool, and the
 *    shipped traces/rmm_random.trace), the smallest arena that runs the whole trace without a
 *    refusal, found by bisection to peak/4096 as bench_frag does, divided by the peak of live
 *    requested bytes; beside it the waste per block: the mean over every allocation of (bytes
 *    the block occupies - bytes requested).  For npupool the block's bytes are read from the
 *    pool's overhead counter before and after each allocation (pool_get_stats).
 * Then BENCH_PEERS lines for scripts, and the machine: nproc, CPU model, load average at the
 *    start and at the end.
 * Usage: bench_peers [scale]   (BENCH_PEERS_SECTIONS=ABC: the sections to run, default all;
 *        BENCH_PEERS_ONLY=o1heap,tlsf: sections A and B with only these peers beside npupool and
 *        the floor, for a quick A/B of a pool change; the goal lines then compare with those
 *        peers only; a name that is no peer's, or an empty list, exits 2 with a line saying so)
 *        scale (default 1) multiplies the timed pairs, the warm-up, the
 *        1,000,000-live scenario's live count and the generated traces' lengths (e.g. 0.05 for
 *        a quick look); the default run takes 1 to 3 minutes on 2 loaded cores.
 *        BENCH_PEERS_TRACE=FILE replays another trace file in section C in place of
 *        traces/rmm_random.trace, BENCH_PEERS_TRACE_NAME its name in the tables (default "rmm").
 */
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "firstfit.h"
#include "peer.h"
#include "pool.h"
#include "ptimer.h"
#include "ptrace.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define POOL_BASE ((uintptr_t)0x100000000000ull)
#define LAT_RANGE ((size_t)64 << 30)
#define RUNS 3
#define MAX_ALLOCS 16

/* ---- npupool and firstfit behind the peer face ------------------------------------------- */
/* npupool: addresses are absolute (POOL_BASE + offset).  block_size answers for the block the
 * last alloc made, and only in the tracking variant (pool_get_stats before and after each
 * alloc: the growth of overhead_bytes is the block's rounding). */
typedef struct np_peer {
    size_t last_block; /* first (last_block_size): bytes of the last allocated block (track) */
    pool_t *pool;      /* the pool under test */
    int track;         /* 1: measure each block's bytes */
} np_peer_t;
/* Granted bytes of the block this thread's last np_free gave back (np_path_of).  Per thread:
 * a field of the shared np_peer_t, written by every free, was one cache line all of section
 * A's threads wrote (8 threads: 3.4 x one thread's CPU time per pair with it). */
static __thread size_t np_last_freed;

/* block_size of the two wrappers here: what their last alloc recorded (the only block the
 * harness asks about); both structs start with that size_t. */
static size_t last_block_size(void *c, uintptr_t at)
{
    (void)at;
    return *(const size_t *)c;
}

static void *np_open(size_t range, int track)
{
    np_peer_t *n = calloc(1, sizeof *n);
    if (n) n->pool = pool_create(POOL_BASE, range);
    if (n && !n->pool) {
        free(n);
        return NULL;
    }
    if (n) n->track = track;
    return n;
}
static void *np_create(size_t range) { return np_open(range, 0); }
static void *np_create_track(size_t range) { return np_open(range, 1); }
static void np_destroy(void *c)
{
    np_peer_t *n = c;
    pool_destroy(n->pool);
    free(n);
}
static int np_alloc(void *c, size_t size, uintptr_t *out)
{
    np_peer_t *n = c;
    pool_stats_t a, b;
    if (n->track) pool_get_stats(n->pool, &a);
    if (pool_alloc(n->pool, size, size, out, NULL) != POOL_OK) return -1;
    if (n->track) {
        pool_get_stats(n->pool, &b);
        n->last_block = size + (b.overhead_bytes - a.overhead_bytes);
    }
    return 0;
}
static int np_free(void *c, uintptr_t at)
{
    np_peer_t *n = c;
    return pool_free(n->pool, at, &np_last_freed, NULL) == POOL_OK ? 0 : -1;
}

#define NP_STR_(x) #x
#define NP_STR(x) NP_STR_(x) /* a macro's value as a string literal */
static const peer_ops_t g_npupool = {
    .name = "npupool",
    .about = "npupool pool/ (pool_alloc/pool_free, size-class slabs <= " NP_STR(
        POOL_SLAB_MAX_KIB) " KiB + TLSF large heap, made-up range, 64 B alignment)",
    .arena = 1,
    .create = np_create,
    .destroy = np_destroy,
    .alloc = np_alloc,
    .free = np_free,
};
static const peer_ops_t g_npupool_track = {
    .name = "npupool",
    .arena = 1,
    .create = np_create_track,
    .destroy = np_destroy,
    .alloc = np_alloc,
    .free = np_free,
    .block_size = last_block_size,
};

/* firstfit rounds every size up to FIRSTFIT_ALIGN: block_size is that, for the last block. */
typedef struct ff_peer {
    size_t last_block; /* first (last_block_size): bytes of the last allocated block */
    firstfit_t *ff;    /* the seed's pool */
} ff_peer_t;

static void *ff_create(size_t range)
{
    ff_peer_t *f = calloc(1, sizeof *f);
    if (f && !(f->ff = firstfit_create(range))) {
        free(f);
        return NULL;
    }
    return f;
}
static void ff_destroy(void *c)
{
    firstfit_destroy(((ff_peer_t *)c)->ff);
    free(c);
}
static int ff_alloc(void *c, size_t size, uintptr_t *out)
{
    ff_peer_t *f = c;
    size_t off;
    if (firstfit_alloc(f->ff, size, &off) != 0) return -1;
    f->last_block = (size + FIRSTFIT_ALIGN - 1) & ~(size_t)(FIRSTFIT_ALIGN - 1);
    *out = off;
    return 0;
}
static int ff_free(void *c, uintptr_t at) { return firstfit_free(((ff_peer_t *)c)->ff, at); }

static const peer_ops_t g_firstfit = {
    .name = "firstfit",
    .about = "the seed's first-fit pool (tools/firstfit.c): fragmentation table only",
    .arena = 1,
    .create = ff_create,
    .destroy = ff_destroy,
    .alloc = ff_alloc,
    .free = ff_free,
    .block_size = last_block_size,
};

/* ---- the machine ------------------------------------------------------------------------------ */
static void read_loadavg(char *buf, size_t len)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double a = -1, b = -1, c = -1;
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &a, &b, &c) != 3) a = b = c = -1;
        fclose(f);
    }
    snprintf(buf, len, "%.2f %.2f %.2f", a, b, c);
}

static void read_cpu_model(char *buf, size_t len)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(buf, len, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, len, "%s", colon);
        break;
    }
    if (f) fclose(f);
}

static const char *human(size_t b, char *buf, size_t len)
{
    if (b >= GiB)
        snprintf(buf, len, "%.2fG", (double)b / (double)GiB);
    else if (b >= MiB && b % MiB == 0)
        snprintf(buf, len, "%zuMiB", b / MiB);
    else if (b >= MiB)
        snprintf(buf, len, "%.1fM", (double)b / (double)MiB);
    else if (b >= KiB && b % KiB == 0)
        snprintf(buf, len, "%zuKiB", b / KiB);
    else
        snprintf(buf, len, "%zuB", b);
    return buf;
}

static double median3(double a, double b, double c)
{
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

/* ---- B. pair latency --------------------------------------------------------------------------- */
typedef struct scenario {
    size_t live;    /* live blocks in steady state */
    size_t lo, hi;  /* sizes, log-uniform */
    size_t warm;    /* untimed warm-up pairs */
    size_t pairs;   /* pairs of the untimed mean pass, and as many timed ones */
    size_t *fill;   /* [live] first sizes */
    uint32_t *slot; /* [warm + 2 pairs] victim of each pair */
    size_t *size;   /* [warm + 2 pairs] new size of each pair */
} scenario_t;

/* npupool's timed pairs by the path they took: both calls served by the thread's magazines
 * (no lock), a small block's refill or flush under the pool lock (the thread's count of locked
 * changes moved: pool_thread_mirror_writes), or the freed or the new block beyond the slab limit
 * (the large heap, always under the lock). */
enum np_path { PATH_CACHE, PATH_LOCKED, PATH_LARGE, PATH_COUNT };
static const char *const g_path_name[PATH_COUNT] = {"cache", "locked", "large"};
typedef struct path_fig {
    double share;                  /* of the timed pairs, 0..1 */
    double median, p90, p99, p999; /* ns, of those pairs */
} path_fig_t;

typedef struct lat {
    double median, p99, p999;    /* ns, each pair timed on its own */
    double mean;                 /* ns, wall time of the untimed pass / its pairs */
    int failed;                  /* an allocation was refused (or the peer is unavailable) */
    path_fig_t path[PATH_COUNT]; /* npupool only: the timed pairs by path */
    double host_bytes;           /* arena allocators: host memory from malloc after the warm-up
                                    (the instance's metadata: host_in_use), else 0 */
} lat_t;

static int scenario_make(scenario_t *sc, uint64_t seed)
{
    size_t n = sc->warm + 2 * sc->pairs;
    sc->fill = malloc(sc->live * sizeof *sc->fill);
    sc->slot = malloc(n * sizeof *sc->slot);
    sc->size = malloc(n * sizeof *sc->size);
    if (!sc->fill || !sc->slot || !sc->size) return -1;
    for (size_t i = 0; i < sc->live; i++) sc->fill[i] = ptrace_log_uniform(&seed, sc->lo, sc->hi);
    for (size_t k = 0; k < n; k++) {
        sc->slot[k] = (uint32_t)(ptrace_rand(&seed) % sc->live);
        sc->size[k] = ptrace_log_uniform(&seed, sc->lo, sc->hi);
    }
    return 0;
}

static void scenario_free(scenario_t *sc)
{
    free(sc->fill);
    free(sc->slot);
    free(sc->size);
}

/* Pairs [from, from + n) of the scenario, untimed. */
static int lat_pass(const peer_ops_t *o, void *p, const scenario_t *sc, uintptr_t *slots,
                    size_t from, size_t n)
{
    int failed = 0;
    for (size_t k = from; k < from + n && !failed; k++) {
        uint32_t i = sc->slot[k];
        o->free(p, slots[i]);
        failed = o->alloc(p, sc->size[k], &slots[i]);
    }
    return failed;
}

/* The path figures of npupool's timed pairs: ticks[k] of pair k, path[k] its path; sorts a
 * copy per path in `tmp` (pairs entries). */
static void path_figures(lat_t *r, const uint64_t *ticks, const unsigned char *path, size_t pairs,
                         uint64_t *tmp)
{
    for (int q = 0; q < PATH_COUNT; q++) {
        size_t m = 0;
        for (size_t k = 0; k < pairs; k++)
            if (path[k] == q) tmp[m++] = ticks[k];
        path_fig_t *f = &r->path[q];
        f->share = (double)m / (double)pairs;
        if (!m) continue;
        ptimer_sort(tmp, m);
        f->median = ptimer_ns(ptimer_quantile(tmp, m, 0.5));
        f->p90 = ptimer_ns(ptimer_quantile(tmp, m, 0.9));
        f->p99 = ptimer_ns(ptimer_quantile(tmp, m, 0.99));
        f->p999 = ptimer_ns(ptimer_quantile(tmp, m, 0.999));
    }
}

/* The path of npupool's pair that freed a block of `old_size`, allocated `new_size`, and moved
 * the thread's count of locked changes from mw0 to mw1. */
static unsigned char np_path_of(size_t old_size, size_t new_size, uint64_t mw0, uint64_t mw1)
{
    if (old_size > POOL_SLAB_MAX || new_size > POOL_SLAB_MAX) return PATH_LARGE;
    return mw1 != mw0 ? PATH_LOCKED : PATH_CACHE;
}

/* What lat_run needs to tell npupool's paths apart.  The freed block's size comes from the
 * pool (np_last_freed), not from an array of the bench's own: at 1,000,000 live such an
 * array is 8 MB more of memory read at random between the pairs, which only npupool's runs
 * would pay for in the CPU caches. */
typedef struct path_work {
    unsigned char *path; /* [pairs] each timed pair's path */
    uint64_t *tmp;       /* [pairs] scratch */
} path_work_t;

/* Bytes this process has from malloc now (in-use heap plus mmap()ed chunks): an arena
 * allocator's metadata is the growth from before its create to after its warm-up (the bench's
 * own arrays are allocated before).  0 where glibc does not say. */
static size_t host_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#else
    return 0;
#endif
}

/* One run: a fresh instance; fill; the warm-up pairs; the mean pass (untimed, wall clock
 * around all of it: exact, free of the timer's resolution); then each pair of the timed pass
 * on its own.  slots[live], ticks[pairs]; with pw (npupool only) also the path of each timed
 * pair, in r.path. */
static lat_t lat_run(const peer_ops_t *o, const scenario_t *sc, uintptr_t *slots, uint64_t *ticks,
                     const path_work_t *pw)
{
    lat_t r = {.failed = 1};
    size_t host0 = host_in_use();
    void *p = o->create(LAT_RANGE);
    if (!p) return r;
    int failed = 0;
    for (size_t i = 0; i < sc->live && !failed; i++) failed = o->alloc(p, sc->fill[i], &slots[i]);
    failed = failed || lat_pass(o, p, sc, slots, 0, sc->warm);
    size_t host1 = host_in_use();
    double host_bytes = o->arena && host1 > host0 ? (double)(host1 - host0) : 0;
    double w0 = ptimer_wall_ns();
    failed = failed || lat_pass(o, p, sc, slots, sc->warm, sc->pairs);
    r.mean = (ptimer_wall_ns() - w0) / (double)sc->pairs;
    for (size_t k = 0; k < sc->pairs && !failed; k++) {
        size_t e = sc->warm + sc->pairs + k;
        uint32_t i = sc->slot[e];
        uintptr_t victim = slots[i]; /* the bench's own bookkeeping, before the timer */
        uint64_t mw0 = pw ? pool_thread_mirror_writes() : 0;
        uint64_t t0 = ptimer_begin();
        o->free(p, victim);
        int rc = o->alloc(p, sc->size[e], &slots[i]);
        uint64_t t1 = ptimer_end();
        ticks[k] = t1 - t0;
        if (pw) {
            pw->path[k] = np_path_of(np_last_freed, sc->size[e], mw0, pool_thread_mirror_writes());
        }
        failed = rc;
    }
    if (!failed && pw) path_figures(&r, ticks, pw->path, sc->pairs, pw->tmp);
    if (!failed) {
        ptimer_sort(ticks, sc->pairs);
        r.median = ptimer_ns(ptimer_quantile(ticks, sc->pairs, 0.5));
        r.p99 = ptimer_ns(ptimer_quantile(ticks, sc->pairs, 0.99));
        r.p999 = ptimer_ns(ptimer_quantile(ticks, sc->pairs, 0.999));
        r.host_bytes = host_bytes;
        r.failed = 0;
        /* Host peers must get their blocks back (an arena's destroy drops them all). */
        for (size_t i = 0; i < sc->live; i++) o->free(p, slots[i]);
    }
    o->destroy(p);
    return r;
}

/* ---- BENCH_PEERS lines, printed at the end ------------------------------------------------------ */
static char *g_lines;
static size_t g_lines_len, g_lines_cap;

static void __attribute__((format(printf, 1, 2))) bench_line(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    if (g_lines_len + len + 2 > g_lines_cap) {
        size_t cap = 2 * (g_lines_cap + len + 2);
        char *l = realloc(g_lines, cap);
        if (!l) return;
        g_lines = l;
        g_lines_cap = cap;
    }
    memcpy(g_lines + g_lines_len, buf, len);
    g_lines_len += len;
    g_lines[g_lines_len++] = '\n';
    g_lines[g_lines_len] = '\0';
}

/* ---- B. the latency tables ---------------------------------------------------------------------- */
typedef struct contender {
    const peer_ops_t *ops; /* the allocator */
    lat_t run[RUNS];       /* each run's figures */
    lat_t med;             /* medians over the runs */
} contender_t;

static void lat_medians(contender_t *c)
{
    c->med.failed = 0;
    for (int r = 0; r < RUNS; r++) c->med.failed |= c->run[r].failed;
    c->med.median = median3(c->run[0].median, c->run[1].median, c->run[2].median);
    c->med.p99 = median3(c->run[0].p99, c->run[1].p99, c->run[2].p99);
    c->med.p999 = median3(c->run[0].p999, c->run[1].p999, c->run[2].p999);
    c->med.mean = median3(c->run[0].mean, c->run[1].mean, c->run[2].mean);
    c->med.host_bytes = median3(c->run[0].host_bytes, c->run[1].host_bytes, c->run[2].host_bytes);
    for (int q = 0; q < PATH_COUNT; q++) {
        path_fig_t *m = &c->med.path[q];
        const lat_t *r = c->run;
        m->share = median3(r[0].path[q].share, r[1].path[q].share, r[2].path[q].share);
        m->median = median3(r[0].path[q].median, r[1].path[q].median, r[2].path[q].median);
        m->p90 = median3(r[0].path[q].p90, r[1].path[q].p90, r[2].path[q].p90);
        m->p99 = median3(r[0].path[q].p99, r[1].path[q].p99, r[2].path[q].p99);
        m->p999 = median3(r[0].path[q].p999, r[1].path[q].p999, r[2].path[q].p999);
    }
}

enum figure { FIG_MEDIAN, FIG_P99, FIG_P999, FIG_MEAN, FIG_COUNT };
static const char *const g_figure_name[FIG_COUNT] = {"median", "p99", "p99.9", "mean"};

static double figure_of(const lat_t *l, enum figure f)
{
    return f == FIG_MEDIAN ? l->median : f == FIG_P99 ? l->p99 : f == FIG_P999 ? l->p999 : l->mean;
}

/* Index of the peer (not npupool, entry 0, nor a reference row) with the lowest figure f, or
 * -1. */
static int best_peer(const contender_t *c, size_t n, enum figure f)
{
    int best = -1;
    for (size_t i = 1; i < n; i++)
        if (!c[i].med.failed && !c[i].ops->reference &&
            (best < 0 || figure_of(&c[i].med, f) < figure_of(&c[best].med, f)))
            best = (int)i;
    return best;
}

/* Index of the reference row, or -1. */
static int reference_of(const contender_t *c, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (c[i].ops->reference && !c[i].med.failed) return (int)i;
    return -1;
}

typedef struct summary {
    char label[96];            /* "1000 (512B..1MiB)" */
    size_t live;               /* the scenario's live blocks */
    contender_t c[MAX_ALLOCS]; /* every allocator's figures, npupool first */
    size_t n;                  /* entries of c */
} summary_t;

static void lat_scale(scenario_t *sc, contender_t *c, size_t n, summary_t *sum)
{
    char a[32], b[32], range[64];
    snprintf(range, sizeof range, "%s..%s", human(sc->lo, a, sizeof a), human(sc->hi, b, sizeof b));
    uintptr_t *slots = malloc(sc->live * sizeof *slots);
    uint64_t *ticks = malloc(sc->pairs * sizeof *ticks);
    path_work_t pw = {malloc(sc->pairs), malloc(sc->pairs * sizeof *pw.tmp)};
    if (!slots || !ticks || !pw.path || !pw.tmp || scenario_make(sc, 0x5eed0000u + sc->live) != 0) {
        fprintf(stderr, "bench_peers: out of host memory for %zu live\n", sc->live);
        exit(1);
    }
    for (int r = 0; r < RUNS; r++)
        for (size_t i = 0; i < n; i++)
            c[i].run[r] = lat_run(c[i].ops, sc, slots, ticks, c[i].ops == &g_npupool ? &pw : NULL);
    for (size_t i = 0; i < n; i++) {
        lat_medians(&c[i]);
        const lat_t *m = &c[i].med;
        if (m->failed) {
            printf("%-9zu %-14s %-9s  an allocation failed\n", sc->live, range, c[i].ops->name);
        } else {
            char rm[16] = "-", ra[16] = "-"; /* a ratio to 0 (the floor's median) is none */
            if (m->median > 0) snprintf(rm, sizeof rm, "%.2f", c[0].med.median / m->median);
            if (m->mean > 0) snprintf(ra, sizeof ra, "%.2f", c[0].med.mean / m->mean);
            printf("%-9zu %-14s %-9s %8.1f %8.1f %8.1f %8.1f %8s %8s\n", sc->live, range,
                   c[i].ops->name, m->median, m->p99, m->p999, m->mean, rm, ra);
        }
        bench_line("BENCH_PEERS kind=latency live=%zu lo=%zu hi=%zu alloc=%s runs=%d pairs=%zu "
                   "warm=%zu median_ns=%.1f p99_ns=%.1f p999_ns=%.1f mean_ns=%.2f failed=%d",
                   sc->live, sc->lo, sc->hi, c[i].ops->name, RUNS, sc->pairs, sc->warm, m->median,
                   m->p99, m->p999, m->mean, m->failed);
    }
    fflush(stdout);
    snprintf(sum->label, sizeof sum->label, "%zu (%s)", sc->live, range);
    memcpy(sum->c, c, n * sizeof *c);
    sum->n = n;
    sum->live = sc->live;
    free(slots);
    free(ticks);
    free(pw.path);
    free(pw.tmp);
    scenario_free(sc);
}

/* The arena allocators' host metadata in steady state at each scale, per live block. */
static void metadata_table(const summary_t *sum)
{
    printf("\nhost metadata of the arena allocators after the warm-up: bytes from malloc (the "
           "growth from before the instance was made; npupool's thread cache, mapped on its own, "
           "not counted), in all and per live block; median over the runs\n");
    printf("%-24s %-9s %10s %10s\n", "live (sizes)", "allocator", "host MiB", "B/block");
    for (int k = 0; k < 3; k++) {
        int first = 1;
        for (size_t i = 0; i < sum[k].n; i++) {
            const contender_t *c = &sum[k].c[i];
            if (!c->ops->arena || c->ops->reference || c->med.failed || c->med.host_bytes <= 0)
                continue;
            double per = c->med.host_bytes / (double)sum[k].live;
            printf("%-24s %-9s %10.2f %10.1f\n", first ? sum[k].label : "", c->ops->name,
                   c->med.host_bytes / MiB, per);
            bench_line("BENCH_PEERS kind=metadata live=%zu alloc=%s host_bytes=%.0f "
                       "bytes_per_block=%.1f",
                       sum[k].live, c->ops->name, c->med.host_bytes, per);
            first = 0;
        }
    }
}

static void lat_section(double scale, const peer_ops_t *const *ops, size_t n)
{
    size_t pairs = (size_t)(200000 * scale), big = (size_t)(1000000 * scale);
    pairs = pairs < 2000 ? 2000 : pairs;
    big = big < 10000 ? 10000 : big;
    scenario_t sc[3] = {
        {.live = 1000, .lo = 512, .hi = MiB},
        {.live = 100000, .lo = 512, .hi = 256 * KiB},
        {.live = big, .lo = 64, .hi = 64 * KiB},
    };
    summary_t sum[3];
    contender_t c[MAX_ALLOCS];
    printf("\nB. free+malloc pair latency in steady state, ns: median over %d interleaved runs of "
           "each run's median / p99 / p99.9 (%zu pairs timed one by one) and mean (%zu other "
           "pairs, untimed, wall clock / pairs); np/this = npupool's figure / this one's\n",
           RUNS, pairs, pairs);
    printf("%-9s %-14s %-9s %8s %8s %8s %8s %8s %8s\n", "live", "sizes", "allocator", "median",
           "p99", "p99.9", "mean", "np/this", "np/this");
    printf("%-9s %-14s %-9s %8s %8s %8s %8s %8s %8s\n", "", "", "", "", "", "", "", "median",
           "mean");
    for (int s = 0; s < 3; s++) {
        size_t w = sc[s].live < 500000 ? sc[s].live : 500000;
        sc[s].warm = (size_t)((double)(w > 20000 ? w : 20000) * (scale < 1 ? scale : 1));
        sc[s].pairs = pairs;
        memset(c, 0, sizeof c);
        for (size_t i = 0; i < n; i++) c[i].ops = ops[i];
        lat_scale(&sc[s], c, n, &sum[s]);
    }
    printf("\nsummary: npupool against the best of the others, figure by figure\n");
    printf("%-24s %-7s %9s  %-20s %8s\n", "live (sizes)", "figure", "npupool", "best peer",
           "np/best");
    for (int s = 0; s < 3; s++) {
        const summary_t *m = &sum[s];
        for (enum figure f = FIG_MEDIAN; f < FIG_COUNT; f++) {
            if (f == FIG_P99) continue;
            int b = best_peer(m->c, m->n, f);
            double np = figure_of(&m->c[0].med, f);
            double bv = b > 0 ? figure_of(&m->c[b].med, f) : 0;
            char best[64] = "-", ratio[16] = "-";
            if (b > 0) {
                snprintf(best, sizeof best, "%s %.1f", m->c[b].ops->name, bv);
                snprintf(ratio, sizeof ratio, "%.2f", np / bv);
            }
            printf("%-24s %-7s %9.1f  %-20s %8s\n", f == FIG_MEDIAN ? m->label : "",
                   g_figure_name[f], np, best, ratio);
            bench_line("BENCH_PEERS kind=latency_summary live=%zu figure=%s npupool_ns=%.2f "
                       "best=%s best_ns=%.2f np_over_best=%s",
                       m->live, g_figure_name[f], np, b > 0 ? m->c[b].ops->name : "-", bv, ratio);
        }
    }
    printf("\nnpupool's timed pairs by path (median over the runs): cache = both calls served by "
           "the thread's magazines, no lock; locked = a small block's refill or flush under the "
           "pool lock; large = the freed or the new block above the slab limit (%zu KiB), on the "
           "large heap\n",
           (size_t)POOL_SLAB_MAX / KiB);
    printf("%-24s %-7s %7s %8s %8s %8s %8s\n", "live (sizes)", "path", "share", "median", "p90",
           "p99", "p99.9");
    for (int s = 0; s < 3; s++)
        for (int q = 0; q < PATH_COUNT; q++) {
            const path_fig_t *f = &sum[s].c[0].med.path[q];
            printf("%-24s %-7s %6.1f%% %8.1f %8.1f %8.1f %8.1f\n", q == 0 ? sum[s].label : "",
                   g_path_name[q], 100 * f->share, f->median, f->p90, f->p99, f->p999);
            bench_line("BENCH_PEERS kind=np_path live=%zu path=%s share=%.4f median_ns=%.1f "
                       "p90_ns=%.1f p99_ns=%.1f p999_ns=%.1f",
                       sum[s].live, g_path_name[q], f->share, f->median, f->p90, f->p99, f->p999);
        }
    metadata_table(sum);
    const lat_t *np_1k = &sum[0].c[0].med, *np_big = &sum[2].c[0].med;
    printf("npupool at %zu live / npupool at 1,000 live: median %.2f, mean %.2f\n", sc[2].live,
           np_big->median / np_1k->median, np_big->mean / np_1k->mean);
    /* The goals of issue 13, with the figures above. */
    int b1 = best_peer(sum[0].c, sum[0].n, FIG_MEDIAN);
    double bm = b1 > 0 ? sum[0].c[b1].med.median : 0;
    printf("goal: median at 1,000 live <= the best peer's: npupool %.1f, %s %.1f: %s\n",
           np_1k->median, b1 > 0 ? sum[0].c[b1].ops->name : "-", bm,
           np_1k->median <= bm ? "met" : "not met");
    for (int k = 0; k < 3; k++) {
        int w = 0; /* the peers whose p99.9 is below npupool's */
        char names[256] = "";
        size_t at = 0;
        for (size_t i = 1; i < sum[k].n; i++)
            if (!sum[k].c[i].med.failed && !sum[k].c[i].ops->reference &&
                sum[k].c[i].med.p999 < sum[k].c[0].med.p999) {
                w++;
                at +=
                    (size_t)snprintf(names + at, sizeof names - at, "%s%s %.1f", w > 1 ? ", " : "",
                                     sum[k].c[i].ops->name, sum[k].c[i].med.p999);
                if (at >= sizeof names) at = sizeof names - 1;
            }
        printf("goal: p99.9 at %zu live <= every peer's: npupool %.1f: %s%s%s\n", sum[k].live,
               sum[k].c[0].med.p999, w ? "not met (below it: " : "met", names, w ? ")" : "");
    }
    double ratio = np_big->median / np_1k->median;
    printf("goal: median at %zu live <= 1.5 x npupool's at 1,000 live: %.2f x: %s\n", sc[2].live,
           ratio, ratio <= 1.5 ? "met" : "not met");
    int f1 = reference_of(sum[0].c, sum[0].n), fb = reference_of(sum[2].c, sum[2].n);
    if (f1 > 0 && fb > 0) {
        /* what reading the freed block's word costs at each scale, against that goal */
        const lat_t *fl_1k = &sum[0].c[f1].med, *fl_big = &sum[2].c[fb].med;
        printf("  the floor (one word of host metadata per block, read and written by a pair) at "
               "1,000 live: median %.1f ns; at %zu live: %.1f ns, %.1f ns over its 1,000-live "
               "figure, where the goal leaves npupool %.1f ns over its own (npupool: %.1f)\n",
               fl_1k->median, sc[2].live, fl_big->median, fl_big->median - fl_1k->median,
               0.5 * np_1k->median, np_big->median - np_1k->median);
        bench_line("BENCH_PEERS kind=floor live_big=%zu floor_1k_ns=%.1f floor_big_ns=%.1f "
                   "npupool_1k_ns=%.1f npupool_big_ns=%.1f",
                   sc[2].live, fl_1k->median, fl_big->median, np_1k->median, np_big->median);
    }
    bench_line("BENCH_PEERS kind=scaling live_big=%zu npupool_big_over_1k_median=%.3f "
               "npupool_big_over_1k_mean=%.3f",
               sc[2].live, np_big->median / np_1k->median, np_big->mean / np_1k->mean);
}

/* ---- A. threads ------------------------------------------------------------------------------ */
static double median_of(double *v, int n);
#define TH_LIVE 1000
#define TH_MAX 64
typedef struct th_arg {
    const peer_ops_t *ops;       /* the allocator */
    void *inst;                  /* its instance, shared by the threads */
    pthread_mutex_t *mu;         /* non-NULL: every call under it (an arena peer is not
                                    thread-safe) */
    pthread_barrier_t *bar;      /* all threads start the timed pairs together */
    uint64_t seed;               /* this thread's sequence */
    size_t pairs;                /* timed pairs */
    double cpu_ns, wall0, wall1; /* CPU time of the pairs; wall clock at start and end */
    int failed;                  /* an allocation was refused */
} th_arg_t;

static int th_alloc(th_arg_t *a, size_t size, uintptr_t *out)
{
    if (a->mu) pthread_mutex_lock(a->mu);
    int rc = a->ops->alloc(a->inst, size, out);
    if (a->mu) pthread_mutex_unlock(a->mu);
    return rc;
}

static void th_free(th_arg_t *a, uintptr_t at)
{
    if (a->mu) pthread_mutex_lock(a->mu);
    a->ops->free(a->inst, at);
    if (a->mu) pthread_mutex_unlock(a->mu);
}

static void *th_main(void *arg)
{
    th_arg_t *a = arg;
    uint64_t s = a->seed;
    uintptr_t slots[TH_LIVE];
    size_t n = a->pairs + TH_LIVE;
    uint32_t *victim = malloc(n * sizeof *victim);
    size_t *size = malloc(n * sizeof *size);
    if (!victim || !size) {
        a->failed = 1;
        pthread_barrier_wait(a->bar);
        free(victim);
        free(size);
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        victim[k] = (uint32_t)(ptrace_rand(&s) % TH_LIVE);
        size[k] = ptrace_log_uniform(&s, 64, 64 * KiB);
    }
    for (size_t i = 0; i < TH_LIVE && !a->failed; i++) a->failed = th_alloc(a, size[i], &slots[i]);
    for (size_t k = 0; k < TH_LIVE && !a->failed; k++) { /* warm-up: as many pairs as live */
        uint32_t i = victim[k];
        th_free(a, slots[i]);
        a->failed = th_alloc(a, size[n - 1 - k], &slots[i]);
    }
    pthread_barrier_wait(a->bar);
    a->wall0 = ptimer_wall_ns();
    double c0 = ptimer_thread_cpu_ns();
    for (size_t k = TH_LIVE; k < n && !a->failed; k++) {
        uint32_t i = victim[k];
        th_free(a, slots[i]);
        a->failed = th_alloc(a, size[k], &slots[i]);
    }
    a->cpu_ns = ptimer_thread_cpu_ns() - c0;
    a->wall1 = ptimer_wall_ns();
    if (!a->failed)
        for (size_t i = 0; i < TH_LIVE; i++) th_free(a, slots[i]);
    free(victim);
    free(size);
    return NULL;
}

typedef struct th_result {
    double ns_cpu;   /* median over the threads of CPU ns per pair */
    double mpairs_s; /* all pairs / wall time of the timed phase, millions per second */
    int failed;      /* something failed */
} th_result_t;

/* lock: 1 to call the allocator through one mutex (the single-threaded arena peers); npupool's
 * pool and the host allocators are called directly, they are thread-safe themselves. */
static th_result_t th_run(const peer_ops_t *o, int lock, int nthreads, size_t pairs, uint64_t seed)
{
    th_result_t r = {0, 0, 1};
    void *inst = o->create(LAT_RANGE);
    if (!inst) return r;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    th_arg_t a[TH_MAX];
    pthread_t th[TH_MAX];
    for (int t = 0; t < nthreads; t++) {
        a[t] = (th_arg_t){.ops = o,
                          .inst = inst,
                          .mu = lock ? &mu : NULL,
                          .bar = &bar,
                          .seed = seed + (uint64_t)t * 7919,
                          .pairs = pairs};
        if (pthread_create(&th[t], NULL, th_main, &a[t]) != 0) {
            /* the threads started wait at the barrier for this one: nothing to join */
            fprintf(stderr, "bench_peers: cannot start thread %d of %d\n", t + 1, nthreads);
            exit(1);
        }
    }
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    double per[TH_MAX], w0 = a[0].wall0, w1 = a[0].wall1;
    r.failed = 0;
    for (int t = 0; t < nthreads; t++) {
        r.failed |= a[t].failed;
        per[t] = a[t].cpu_ns / (double)pairs;
        if (a[t].wall0 < w0) w0 = a[t].wall0;
        if (a[t].wall1 > w1) w1 = a[t].wall1;
    }
    r.ns_cpu = median_of(per, nthreads);
    r.mpairs_s = (double)pairs * nthreads / ((w1 - w0) / 1e9) / 1e6;
    pthread_barrier_destroy(&bar);
    pthread_mutex_destroy(&mu);
    o->destroy(inst);
    return r;
}

static void threads_section(double scale, const peer_ops_t *const *ops, size_t n, long ncpu)
{
    static const int counts[] = {1, 8, 64};
    enum { NCOUNTS = 3 };
    size_t pairs = (size_t)(100000 * scale);
    pairs = pairs < 2000 ? 2000 : pairs;
    printf("\nA. threads allocating at once: each thread keeps %d live blocks of 64 B..64 KiB "
           "(log-uniform) and runs free+malloc pairs on them (%zu each; %zu each at 64 "
           "threads), all threads released together; cost = the thread's CPU time / its pairs, "
           "median over the threads (with %ld CPUs the threads share them: CPU time counts a "
           "thread's own work, its spinning and its time in the kernel, not its waiting); "
           "x1 = that cost / the cost with one thread (goal: <= 2.00 at 8 threads); wall = "
           "all pairs / the wall time of the timed phase; median of %d interleaved runs\n",
           TH_LIVE, pairs, pairs / 8, ncpu, RUNS);
    printf("%-16s %8s %12s %8s %12s\n", "allocator", "threads", "ns/pair cpu", "x1",
           "wall Mpair/s");
    double one[MAX_ALLOCS] = {0};
    for (size_t i = 0; i < n; i++) {
        const peer_ops_t *o = ops[i];
        char label[32];
        int lock = o->arena && i; /* every arena peer but npupool (ops[0]) */
        snprintf(label, sizeof label, "%s%s", o->name, lock ? "+mutex" : "");
        for (int c = 0; c < NCOUNTS; c++) {
            double cpu[RUNS], wall[RUNS];
            int failed = 0;
            size_t pp = counts[c] > 8 ? pairs / 8 : pairs;
            for (int run = 0; run < RUNS; run++) {
                th_result_t r = th_run(o, lock, counts[c], pp, 0x7e4d0000u + (uint64_t)run);
                cpu[run] = r.ns_cpu;
                wall[run] = r.mpairs_s;
                failed |= r.failed;
            }
            double mc = median_of(cpu, RUNS), mw = median_of(wall, RUNS);
            if (c == 0) one[i] = mc;
            if (failed) {
                printf("%-16s %8d  an allocation failed\n", label, counts[c]);
                continue;
            }
            double x = one[i] > 0 ? mc / one[i] : 0;
            printf("%-16s %8d %12.1f %8.2f %12.2f%s\n", label, counts[c], mc, x, mw,
                   counts[c] == 8 ? (x <= 2.0 ? "   goal met" : "   goal not met") : "");
            bench_line("BENCH_PEERS kind=threads alloc=%s threads=%d pairs=%zu ns_cpu=%.2f "
                       "x_one=%.3f wall_mpairs_s=%.3f locked=%d",
                       o->name, counts[c], pp, mc, x, mw, lock);
        }
        fflush(stdout);
    }
}

/* ---- C. fragmentation --------------------------------------------------------------------------- */
typedef struct frag_entry {
    const peer_ops_t *ops;   /* for the bisection */
    const peer_ops_t *waste; /* the same allocator with block_size (npupool: the tracking one) */
} frag_entry_t;

/* Run the whole trace in an arena of `arena` bytes; returns the refusals.  Without `waste`
 * it stops at the first; with it, *waste = mean (block bytes - requested) per allocation. */
static size_t frag_run(const peer_ops_t *o, const ptrace_t *t, size_t arena, uintptr_t *addr,
                       unsigned char *ok, double *waste)
{
    void *p = o->create(arena);
    if (!p) return 1;
    size_t fails = 0, n = 0;
    double sum = 0;
    memset(ok, 0, t->nallocs);
    for (size_t e = 0; e < t->nev; e++) {
        uint32_t id = t->ev[e].id;
        if (t->ev[e].free) {
            if (ok[id]) o->free(p, addr[id]);
        } else if (o->alloc(p, t->size[id], &addr[id]) == 0) {
            ok[id] = 1;
            if (waste) sum += (double)(o->block_size(p, addr[id]) - t->size[id]), n++;
        } else if (fails++, !waste) {
            break;
        }
    }
    o->destroy(p);
    if (waste) *waste = n ? sum / (double)n : 0;
    return fails;
}

/* The smallest arena (to peak/4096, at least 64 KiB) that runs the trace without a refusal;
 * 0 if even 64 x peak does not. */
static size_t min_arena(const peer_ops_t *o, const ptrace_t *t, uintptr_t *addr, unsigned char *ok)
{
    size_t res = t->peak_live / 4096;
    res = (res < 64 * KiB ? 64 * KiB : res + PEER_GRAN - 1) & ~(size_t)(PEER_GRAN - 1);
    size_t lo = t->peak_live - 1; /* fails: the live blocks alone need more */
    size_t hi = (t->peak_live + res - 1) / res * res;
    while (frag_run(o, t, hi, addr, ok, NULL)) {
        lo = hi;
        hi *= 2;
        if (hi > 64 * t->peak_live) return 0;
    }
    while (hi - lo > res) {
        size_t mid = (lo + (hi - lo) / 2) & ~(size_t)(PEER_GRAN - 1);
        if (mid <= lo) mid = lo + 1;
        if (frag_run(o, t, mid, addr, ok, NULL))
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

#define NSEEDS 3
typedef struct frag_cell {
    size_t peak, arena; /* peak live bytes, smallest arena */
    double ratio;       /* arena / peak (0: none found) */
    double waste;       /* mean bytes per block beyond the request */
} frag_cell_t;

static double median_of(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n ? v[n / 2] : 0;
}

/* One trace family (1..NSEEDS traces) through every arena allocator; prints its rows and
 * returns npupool's and bestfit's median ratios. */
static void frag_family(ptrace_t *tr, int ntr, const frag_entry_t *fe, size_t nfe, double *ratio_np,
                        double *ratio_bf)
{
    frag_cell_t cell[8][NSEEDS];
    for (size_t a = 0; a < nfe; a++)
        for (int s = 0; s < ntr; s++) {
            ptrace_t *t = &tr[s];
            uintptr_t *addr = malloc(t->nallocs * sizeof *addr);
            unsigned char *ok = malloc(t->nallocs ? t->nallocs : 1);
            frag_cell_t *c = &cell[a][s];
            *c = (frag_cell_t){t->peak_live, 0, 0, 0};
            if (addr && ok) c->arena = min_arena(fe[a].ops, t, addr, ok);
            if (c->arena) {
                frag_run(fe[a].waste, t, c->arena, addr, ok, &c->waste);
                c->ratio = (double)c->arena / (double)t->peak_live;
            }
            bench_line("BENCH_PEERS kind=frag trace=%s seed=%d alloc=%s events=%zu peak_live=%zu "
                       "min_arena=%zu min_over_peak=%.4f waste_per_block=%.1f",
                       t->name, s + 1, fe[a].ops->name, t->nev, c->peak, c->arena, c->ratio,
                       c->waste);
            free(addr);
            free(ok);
        }
    for (size_t a = 0; a < nfe; a++) {
        double r[NSEEDS], w[NSEEDS];
        char each[64] = "", pk[32], ar[32], ws[32];
        size_t at = 0;
        for (int s = 0; s < ntr; s++) {
            r[s] = cell[a][s].ratio;
            w[s] = cell[a][s].waste;
            at += (size_t)snprintf(each + at, sizeof each - at, "%s%.3f", s ? " " : "", r[s]);
        }
        double mr = median_of(r, ntr), mw = median_of(w, ntr);
        if (mw >= (double)MiB)
            snprintf(ws, sizeof ws, "%.1f MiB", mw / (double)MiB);
        else if (mw >= 100.0 * KiB)
            snprintf(ws, sizeof ws, "%.1f KiB", mw / (double)KiB);
        else
            snprintf(ws, sizeof ws, "%.0f B", mw);
        printf("%-8s %-9s %9s %9s  %-20s %7.3f %11s\n", tr[0].name, fe[a].ops->name,
               human(cell[a][0].peak, pk, sizeof pk), human(cell[a][0].arena, ar, sizeof ar), each,
               mr, ws);
        if (fe[a].ops == fe[0].ops) *ratio_np = mr;
        if (fe[a].ops == &peer_bestfit) *ratio_bf = mr;
    }
    printf("%-8s npupool / bestfit (medians): %.3f (goal <= 1: %s)\n", tr[0].name,
           *ratio_np / *ratio_bf, *ratio_np <= *ratio_bf ? "met" : "not met");
    bench_line("BENCH_PEERS kind=frag_summary trace=%s npupool_min_over_peak=%.4f "
               "bestfit_min_over_peak=%.4f np_over_bestfit=%.4f",
               tr[0].name, *ratio_np, *ratio_bf, *ratio_np / *ratio_bf);
    fflush(stdout);
}

static void frag_section(double scale, const char *rmm_path, const char *rmm_name)
{
    static const frag_entry_t fe[] = {
        {&g_npupool, &g_npupool_track}, {&peer_tlsf, &peer_tlsf},   {&peer_o1heap, &peer_o1heap},
        {&peer_bestfit, &peer_bestfit}, {&g_firstfit, &g_firstfit},
    };
    size_t nfe = sizeof fe / sizeof fe[0];
    size_t ntensor = (size_t)(20000 * scale), npairs = (size_t)(20000 * scale);
    ntensor = ntensor < 1000 ? 1000 : ntensor;
    npairs = npairs < 2000 ? 2000 : npairs;
    printf("\nC. fragmentation: smallest arena that runs the trace (bisection to peak/4096) / peak "
           "live requested bytes, per seed and their median; waste = mean (block bytes - "
           "requested) per allocation\n");
    printf("   tensor: bench_frag's tensor trace, %zu allocations; mixed: 1,250 live blocks "
           "512 B..8 MiB log-uniform (about 11 live per npupool slab class), %zu replacements; "
           "%s: %s\n",
           ntensor, npairs, rmm_name, rmm_path);
    printf("%-8s %-9s %9s %9s  %-20s %7s %11s\n", "trace", "allocator", "peak(s1)", "arena(s1)",
           "min/peak per seed", "median", "waste/block");
    ptrace_t tr[NSEEDS];
    double np, bf;
    for (int s = 0; s < NSEEDS; s++)
        if (ptrace_tensor(&tr[s], ntensor, (uint64_t)s + 1) != 0) exit(1);
    frag_family(tr, NSEEDS, fe, nfe, &np, &bf);
    for (int s = 0; s < NSEEDS; s++) ptrace_release(&tr[s]);
    for (int s = 0; s < NSEEDS; s++)
        if (ptrace_mixed(&tr[s], 1250, npairs, (uint64_t)s + 1) != 0) exit(1);
    frag_family(tr, NSEEDS, fe, nfe, &np, &bf);
    for (int s = 0; s < NSEEDS; s++) ptrace_release(&tr[s]);
    if (access(rmm_path, R_OK) != 0 || ptrace_load(&tr[0], rmm_path, rmm_name) != 0) {
        printf("%-8s skipped: %s cannot be read\n", rmm_name, rmm_path);
        return;
    }
    frag_family(tr, 1, fe, nfe, &np, &bf);
    ptrace_release(&tr[0]);
}

/* BENCH_PEERS_ONLY: a comma-separated list of peer names.  The peers it may name, both lists. */
static const peer_ops_t *const *const g_peer_lists[] = {peer_arenas, peer_hosts};
#define PEER_LISTS (sizeof g_peer_lists / sizeof *g_peer_lists)

/* 1 when the name at[0..len) is `name`. */
static int name_is(const char *at, size_t len, const char *name)
{
    return strlen(name) == len && strncmp(at, name, len) == 0;
}

/* 1 when peer o is in the list `only`, or there is no list. */
static int peer_chosen(const char *only, const peer_ops_t *o)
{
    if (!only) return 1;
    for (const char *at = only; *at;) {
        size_t len = strcspn(at, ",");
        if (name_is(at, len, o->name)) return 1;
        at += len + (at[len] == ',');
    }
    return 0;
}

/* 1 when every name in the list `only` (or no list) is a peer's; else says which is not, on
 * stderr, with the names there are. */
static int peers_known(const char *only)
{
    if (only && !*only) {
        fputs("bench_peers: BENCH_PEERS_ONLY is empty: name peers, or unset it for all\n", stderr);
        return 0;
    }
    for (const char *at = only; at && *at;) {
        size_t len = strcspn(at, ",");
        int found = 0;
        for (size_t l = 0; l < PEER_LISTS && !found; l++)
            for (const peer_ops_t *const *p = g_peer_lists[l]; *p; p++)
                found |= name_is(at, len, (*p)->name);
        if (!found) {
            fprintf(stderr,
                    "bench_peers: BENCH_PEERS_ONLY names no peer '%.*s'; the peers:", (int)len, at);
            for (size_t l = 0; l < PEER_LISTS; l++)
                for (const peer_ops_t *const *p = g_peer_lists[l]; *p; p++)
                    fprintf(stderr, " %s", (*p)->name);
            fputc('\n', stderr);
            return 0;
        }
        at += len + (at[len] == ',');
    }
    return 1;
}

int main(int argc, char **argv)
{
    peer_host_prepare(argv);
    const char *only_peers = getenv("BENCH_PEERS_ONLY");
    if (!peers_known(only_peers)) return 2;
    double scale = argc > 1 ? strtod(argv[1], NULL) : 1.0;
    if (!(scale > 0) || scale > 10) scale = 1.0;
    const char *rmm =
        getenv("BENCH_PEERS_TRACE") ? getenv("BENCH_PEERS_TRACE") : "traces/rmm_random.trace";
    const char *rmm_name =
        getenv("BENCH_PEERS_TRACE_NAME") ? getenv("BENCH_PEERS_TRACE_NAME") : "rmm";
    char load0[64], load1[64], cpu[256];
    read_loadavg(load0, sizeof load0);
    read_cpu_model(cpu, sizeof cpu);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_peers: npupool's pool against peer allocators, one process, identical sequences "
           "(scale %.3g)\n",
           scale);
    printf("machine: nproc %ld, cpu \"%s\", load average at start %s\n", ncpu, cpu, load0);
    ptimer_calibrate();
    printf("timer: %s, %.4f ns/tick (calibrated against CLOCK_MONOTONIC), resolution %.1f ns, "
           "empty-region cost %.1f ns subtracted from every sample\n",
           ptimer_cal.source, ptimer_cal.ns_per_tick,
           ptimer_cal.resolution_ticks * ptimer_cal.ns_per_tick,
           ptimer_cal.overhead_ticks * ptimer_cal.ns_per_tick);

    const peer_ops_t *lat[MAX_ALLOCS];
    size_t n = 0;
    lat[n++] = &g_npupool;
    printf("allocators:\n  %-9s %s\n", g_npupool.name, g_npupool.about);
    for (const peer_ops_t *const *p = peer_arenas; *p; p++) {
        if (!peer_chosen(only_peers, *p)) continue;
        lat[n++] = *p;
        printf("  %-9s %s\n", (*p)->name, (*p)->about);
    }
    printf("  %-9s %s\n", g_firstfit.name, g_firstfit.about);
    for (const peer_ops_t *const *p = peer_hosts; *p; p++) {
        if (!peer_chosen(only_peers, *p)) continue;
        const char *why = peer_host_unavailable(*p);
        printf("  %-9s %s\n", (*p)->name, why ? why : (*p)->about);
        if (why)
            bench_line("BENCH_PEERS kind=skipped alloc=%s reason=\"%s\"", (*p)->name, why);
        else
            lat[n++] = *p;
    }
    /* The threads first: glibc's settings for the latency table (one arena) come later. */
    const peer_ops_t *thr[MAX_ALLOCS];
    size_t nthr = 0;
    for (size_t i = 0; i < n; i++) thr[nthr++] = lat[i] == &peer_glibc ? &peer_glibc_plain : lat[i];
    lat[n++] = &peer_floor; /* the latency table's reference row */
    printf("  %-9s %s\n", peer_floor.name, peer_floor.about);
    const char *only = getenv("BENCH_PEERS_SECTIONS"); /* e.g. "C": fragmentation only */
    if (!only || strchr(only, 'A')) threads_section(scale, thr, nthr, ncpu);
    if (!only || strchr(only, 'B')) lat_section(scale, lat, n);
    if (!only || strchr(only, 'C')) frag_section(scale, rmm, rmm_name);
    read_loadavg(load1, sizeof load1);
    printf("\nload average at start %s, at end %s\n\n", load0, load1);
    printf("BENCH_PEERS kind=machine nproc=%ld cpu=\"%s\" load_start=\"%s\" load_end=\"%s\" "
           "scale=%.3g timer=%s\n",
           ncpu, cpu, load0, load1, scale, ptimer_cal.source);
    fputs(g_lines ? g_lines : "", stdout);
    free(g_lines);
    return 0;
}
