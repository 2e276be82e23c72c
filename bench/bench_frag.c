/* bench/bench_frag.c — fragmentation on the seed scenario: npupool's pool (on a block, and on
 * the virtual-memory backing: 2 MiB chunks, a range of POOL_VMM_VA_RATIO x its limit, over a
 * simulated backing) vs the seed's first-fit pool (tools/firstfit.c).
 *
 * Trace (seeded, identical for both allocators): NALLOC allocations of fp32 tensors
 * [batch, seq, 4096] with batch uniform in {1,2,4,8,16,32} and seq uniform in
 * {128,256,512,1024,2048} (2 MiB .. 1 GiB); each is given a lifetime counted in allocation
 * steps: 90% short (log-uniform 1..32), 10% long (log-uniform 100..2000, activations and caches
 * that outlive many others).  At step t, the tensors whose lifetime ends are freed first (in
 * random order), then tensor t is allocated.  Tensors still alive after the last step stay
 * allocated: that is the "end" state.  Both allocators get the ACL size of each tensor:
 * ALIGN_UP(bytes, 32) + 32.
 *
 * Reported per seed and allocator:
 *   min pool     the smallest pool (1 MiB resolution, bisection between the trace's peak live
 *                bytes and the first size that works) that runs the whole trace without one
 *                failed allocation; also as a multiple of the peak live bytes;
 *   at a tight pool = the larger of the two minimal pools (so both run without failure) and at
 *   the seed's default pool (80% of a 64 GiB device): largest_free / total_free after the last
 *   step ("end") and its minimum over every step of the run ("worst"), where largest_free is
 *   the largest physically contiguous free range (for first fit, touching spans of its list
 *   count as one range: the seed's own stats would report only the largest list entry).
 * The vmm pool's figures: the same, where "largest free" is the largest free run before any
 * stitching; its minimum pool is the one that matters.  Then the address range's size: the vmm
 * pool's minimum with a range of 1x, 2x and 4x (the default) its limit (1x: nothing to stitch
 * into, the pool behaves as a block of chunks), and at the 4x minimum, how many requests the
 * pool stitched and how many it could not stitch for want of an unmapped stretch.
 * Lines starting with BENCH_FRAG are for scripts (README table).
 * Usage: bench_frag [nalloc] (default 20000)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "firstfit.h"
#include "pool.h"
#include "splitmix.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define POOL_BASE ((uintptr_t)0x100000000000ull)

typedef struct event {
    int32_t id;   /* tensor index */
    int32_t free; /* 1 = free, 0 = alloc */
} event_t;

typedef struct trace {
    size_t n;      /* tensors */
    size_t *bytes; /* [n] ACL size of each tensor */
    event_t *ev;   /* events in order */
    size_t nev;    /* number of events */
    size_t peak;   /* peak of live bytes over the trace */
} trace_t;

static size_t log_uniform(uint64_t *s, double lo, double hi)
{
    return (size_t)floor(exp(log(lo) + splitmix_unit(s) * (log(hi + 1) - log(lo))));
}

typedef struct death {
    size_t step;  /* allocation step before which the tensor is freed */
    uint64_t key; /* random tie-break: frees of one step happen in random order */
    int32_t id;   /* tensor */
} death_t;

static int death_cmp(const void *a, const void *b)
{
    const death_t *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

static void trace_gen(trace_t *t, size_t n, uint64_t seed)
{
    static const size_t batch[] = {1, 2, 4, 8, 16, 32};
    static const size_t seq[] = {128, 256, 512, 1024, 2048};
    t->n = n;
    t->bytes = malloc(n * sizeof *t->bytes);
    t->ev = malloc(2 * n * sizeof *t->ev);
    death_t *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) {
        size_t b = batch[splitmix_next(&seed) % 6], s = seq[splitmix_next(&seed) % 5];
        size_t raw = b * s * 4096 * 4;
        t->bytes[i] = ((raw + 31) & ~(size_t)31) + 32;
        size_t life = splitmix_next(&seed) % 10 == 0 ? log_uniform(&seed, 100, 2000)
                                                     : log_uniform(&seed, 1, 32);
        d[i] = (death_t){i + (life ? life : 1), splitmix_next(&seed), (int32_t)i};
    }
    qsort(d, n, sizeof *d, death_cmp);
    size_t k = 0, live = 0;
    t->nev = 0;
    t->peak = 0;
    for (size_t step = 0; step < n; step++) {
        while (k < n && d[k].step <= step) {
            t->ev[t->nev++] = (event_t){d[k].id, 1};
            live -= t->bytes[d[k].id];
            k++;
        }
        t->ev[t->nev++] = (event_t){(int32_t)step, 0};
        live += t->bytes[step];
        if (live > t->peak) t->peak = live;
    }
    free(d);
}

/* ---- the two allocators behind one face ------------------------------------------------ */
typedef struct runner {
    int kind;         /* 0 = npupool, 1 = firstfit, 2 = npupool on the vmm backing */
    int va_ratio;     /* kind 2: the address range, times the limit */
    pool_t *pool;     /* kinds 0 and 2 */
    firstfit_t *ff;   /* kind 1 */
    size_t size;      /* pool bytes */
    size_t *live_off; /* kind 1: sorted offsets of live blocks (for the physical view) */
    size_t *live_len; /* their aligned lengths */
    size_t nlive;     /* entries */
} runner_t;

static pool_sim_t g_sim; /* the vmm pools' simulated backing */

static void runner_open(runner_t *r, int kind, size_t size, size_t cap, int va_ratio)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->size = size;
    r->va_ratio = va_ratio;
    if (kind == 0) {
        r->pool = pool_create(POOL_BASE, size);
    } else if (kind == 2) {
        size_t limit = size & ~(2 * MiB - 1);
        pool_backing_t sim = pool_sim_backing(&g_sim);
        r->pool = pool_create_vmm(POOL_BASE, limit * (size_t)va_ratio, 2 * MiB, limit, &sim);
        if (r->pool) pool_grow(r->pool, limit);
    } else {
        r->ff = firstfit_create(size);
        r->live_off = malloc(cap * sizeof *r->live_off);
        r->live_len = malloc(cap * sizeof *r->live_len);
    }
}

static void runner_close(runner_t *r)
{
    pool_destroy(r->pool);
    firstfit_destroy(r->ff);
    free(r->live_off);
    free(r->live_len);
}

static size_t live_pos(const runner_t *r, size_t off)
{
    size_t lo = 0, hi = r->nlive;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->live_off[mid] < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int runner_alloc(runner_t *r, size_t bytes, uintptr_t *addr, int track)
{
    if (r->kind != 1) return pool_alloc(r->pool, bytes, bytes, addr, NULL) == POOL_OK ? 0 : -1;
    size_t off;
    if (firstfit_alloc(r->ff, bytes, &off) != 0) return -1;
    *addr = off;
    if (track) {
        size_t i = live_pos(r, off);
        memmove(&r->live_off[i + 1], &r->live_off[i], (r->nlive - i) * sizeof *r->live_off);
        memmove(&r->live_len[i + 1], &r->live_len[i], (r->nlive - i) * sizeof *r->live_len);
        r->live_off[i] = off;
        r->live_len[i] = (bytes + 31) & ~(size_t)31;
        r->nlive++;
    }
    return 0;
}

static void runner_free(runner_t *r, uintptr_t addr, int track)
{
    if (r->kind != 1) {
        pool_free(r->pool, addr, NULL, NULL);
        return;
    }
    firstfit_free(r->ff, addr);
    if (track) {
        size_t i = live_pos(r, addr);
        memmove(&r->live_off[i], &r->live_off[i + 1], (r->nlive - i - 1) * sizeof *r->live_off);
        memmove(&r->live_len[i], &r->live_len[i + 1], (r->nlive - i - 1) * sizeof *r->live_len);
        r->nlive--;
    }
}

/* largest physically contiguous free range / total free; -1 when nothing is free */
static double runner_ratio(runner_t *r)
{
    if (r->kind != 1) {
        pool_stats_t st;
        pool_get_stats(r->pool, &st);
        return st.free_bytes ? (double)st.largest_free_bytes / (double)st.free_bytes : -1.0;
    }
    size_t free_bytes = firstfit_free_bytes(r->ff);
    if (!free_bytes) return -1.0;
    size_t best = 0, at = 0;
    for (size_t i = 0; i < r->nlive; i++) {
        if (r->live_off[i] - at > best) best = r->live_off[i] - at;
        at = r->live_off[i] + r->live_len[i];
    }
    if (r->size - at > best) best = r->size - at;
    return (double)best / (double)free_bytes;
}

typedef struct outcome {
    size_t failures;      /* allocations refused */
    double end;           /* ratio after the last step (-1: nothing free) */
    double worst;         /* minimum ratio over the run */
    uint64_t stitches;    /* vmm: requests served by stitching */
    uint64_t va_refusals; /* vmm: refusals for want of an unmapped stretch */
} outcome_t;

static outcome_t run_va(const trace_t *t, int kind, size_t size, int measure, int va_ratio)
{
    outcome_t o = {0, -1.0, 2.0, 0, 0};
    runner_t r;
    runner_open(&r, kind, size, t->n, va_ratio);
    if (kind != 1 && !r.pool) {
        o.failures = 1;
        runner_close(&r);
        return o;
    }
    uintptr_t *addr = malloc(t->n * sizeof *addr);
    unsigned char *ok = calloc(t->n, 1);
    for (size_t e = 0; e < t->nev; e++) {
        const event_t *ev = &t->ev[e];
        if (ev->free) {
            if (ok[ev->id]) runner_free(&r, addr[ev->id], measure);
        } else if (runner_alloc(&r, t->bytes[ev->id], &addr[ev->id], measure) == 0) {
            ok[ev->id] = 1;
        } else {
            o.failures++;
            if (kind == 2) {
                pool_refusal_t why;
                pool_explain(r.pool, t->bytes[ev->id], &why);
                o.va_refusals +=
                    why.kind == POOL_REFUSAL_FRAGMENTED && why.remappable_bytes >= why.stitch_bytes;
            }
            if (!measure) break; /* bisection only needs to know that it failed */
        }
        if (measure) {
            double q = runner_ratio(&r);
            if (q >= 0 && q < o.worst) o.worst = q;
        }
    }
    if (measure) o.end = runner_ratio(&r);
    if (kind == 2) {
        pool_stats_t st;
        pool_get_stats(r.pool, &st);
        o.stitches = st.stitches;
    }
    free(addr);
    free(ok);
    runner_close(&r);
    return o;
}

static outcome_t run(const trace_t *t, int kind, size_t size, int measure)
{
    return run_va(t, kind, size, measure, POOL_VMM_VA_RATIO);
}

static size_t min_pool_va(const trace_t *t, int kind, int va_ratio)
{
    size_t lo = t->peak - 1, hi = (t->peak + MiB - 1) & ~(MiB - 1);
    while (run_va(t, kind, hi, 0, va_ratio).failures) {
        lo = hi;
        hi *= 2;
        if (hi > 64 * t->peak) return 0;
    }
    while (hi - lo > MiB) {
        size_t mid = (lo / 2 + hi / 2) & ~(MiB - 1);
        if (mid <= lo) mid = lo + 1;
        if (run_va(t, kind, mid, 0, va_ratio).failures)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

static size_t min_pool(const trace_t *t, int kind)
{
    return min_pool_va(t, kind, POOL_VMM_VA_RATIO);
}

#define NKINDS 3
static const char *const g_name[NKINDS] = {"npupool", "firstfit", "npupool-vmm"};

int main(int argc, char **argv)
{
    size_t nalloc = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
    if (nalloc < 100) nalloc = 100;
    const size_t seed_pool = (size_t)(0.8 * (double)(64 * GiB)) & ~(MiB - 1);
    printf("bench_frag: tensors [b, s, 4096] fp32, b in {1,2,4,8,16,32}, s in "
           "{128,256,512,1024,2048}; %zu allocations; lifetimes 90%% 1..32 steps, 10%% "
           "100..2000 steps (log-uniform); ratio = largest contiguous free / total free\n\n",
           nalloc);
    printf("%-4s %-11s %9s %9s %7s | %-30s | %-30s\n", "seed", "allocator", "peak_live", "min_pool",
           "min/pk", "tight pool: GiB  end  worst  fail", "51.2 GiB pool: end  worst fail");
    double sum_x[NKINDS] = {0};
    char lines[3 * (NKINDS + 1)][400], va_lines[3][300]; /* per seed: one per kind, one VA */
    int nl = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        trace_t t;
        trace_gen(&t, nalloc, seed);
        size_t mp[NKINDS];
        for (int k = 0; k < NKINDS; k++) mp[k] = min_pool(&t, k);
        size_t tight = mp[0] > mp[1] ? mp[0] : mp[1];
        for (int k = 0; k < NKINDS; k++) {
            outcome_t a = run(&t, k, tight, 1), b = run(&t, k, seed_pool, 1);
            double x = (double)mp[k] / (double)t.peak;
            sum_x[k] += x;
            printf(
                "%-4llu %-11s %8.2fG %8.2fG %7.3f | %8.2f %7.3f %6.3f %5zu | %14.3f %6.3f %4zu\n",
                (unsigned long long)seed, g_name[k], (double)t.peak / GiB, (double)mp[k] / GiB, x,
                (double)tight / GiB, a.end, a.worst, a.failures, b.end, b.worst, b.failures);
            snprintf(lines[nl++], sizeof lines[0],
                     "BENCH_FRAG seed=%llu alloc=%s nalloc=%zu peak_live=%zu min_pool=%zu "
                     "min_over_peak=%.4f tight_pool=%zu tight_end=%.4f tight_worst=%.4f "
                     "tight_fail=%zu big_pool=%zu big_end=%.4f big_worst=%.4f big_fail=%zu",
                     (unsigned long long)seed, g_name[k], nalloc, t.peak, mp[k], x, tight, a.end,
                     a.worst, a.failures, seed_pool, b.end, b.worst, b.failures);
        }
        /* the vmm pool's address range: 1x, 2x, 4x its limit */
        size_t m1 = min_pool_va(&t, 2, 1), m2 = min_pool_va(&t, 2, 2);
        outcome_t at = run(&t, 2, mp[2], 1);
        snprintf(va_lines[seed - 1], sizeof va_lines[0],
                 "%-4llu %14.3f %14.3f %14.3f | %10llu %12llu", (unsigned long long)seed,
                 (double)m1 / (double)t.peak, (double)m2 / (double)t.peak,
                 (double)mp[2] / (double)t.peak, (unsigned long long)at.stitches,
                 (unsigned long long)at.va_refusals);
        snprintf(lines[nl++], sizeof lines[0],
                 "BENCH_FRAG_VA seed=%llu min_over_peak_1x=%.4f min_over_peak_2x=%.4f "
                 "min_over_peak_4x=%.4f stitches=%llu va_refusals=%llu",
                 (unsigned long long)seed, (double)m1 / (double)t.peak, (double)m2 / (double)t.peak,
                 (double)mp[2] / (double)t.peak, (unsigned long long)at.stitches,
                 (unsigned long long)at.va_refusals);
        free(t.bytes);
        free(t.ev);
    }
    printf("\nmean min_pool / peak_live: npupool %.3f, npupool-vmm %.3f, firstfit %.3f\n",
           sum_x[0] / 3, sum_x[2] / 3, sum_x[1] / 3);
    printf("\nvmm address range (x its limit): min_pool / peak_live, and at the 4x minimum the "
           "stitches and the refusals for want of an unmapped stretch\n");
    printf("%-4s %14s %14s %14s | %10s %12s\n", "seed", "1x", "2x", "4x", "stitches",
           "va_refusals");
    for (int i = 0; i < 3; i++) puts(va_lines[i]);
    printf("\n");
    for (int i = 0; i < nl; i++) puts(lines[i]);
    return 0;
}
