/* tests/unit/test_pool_random.c — seeded random alloc/free sequences against a reference model.
 *
 * The model is a sorted array of live [addr, addr + ALIGN_UP(granted, 64)).  Every successful
 * alloc must be aligned, inside the usable range and overlap nothing in the model; every
 * ENOMEM must be honest (no free block the request could use was large enough); every free
 * returns what the alloc recorded.  pool_check() runs after every operation; the pool's
 * counters are compared with the model's sums.  Sizes are log-uniform from 1 byte to the whole
 * pool, mixed with the exact edge sizes (and the slab class boundaries).  Invalid frees
 * (random in-range addresses, outside addresses) must leave the pool unchanged.
 * After every operation the refusal classifier is probed at five sizes (slab-sized, large, a
 * class's slot size, the largest free run and just above it): pool_explain says NONE iff
 * pool_alloc of that size succeeds (the block is freed again), its usable_largest equals a
 * white-box figure worked out from the blocks, and a refusal's `why` equals pool_explain.
 * The thread's cache (pool_cache.c) is on: pool_check runs once with it as the operation left
 * it and once drained (pool_explain, the probes and pool_drain_caches give its blocks back).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pool.h"
#include "splitmix.h"
#include "pool_internal.h" /* to verify that an ENOMEM was honest */

#define MiB ((size_t)1 << 20)

typedef struct live {
    uintptr_t addr;   /* block start */
    size_t granted;   /* bytes given to pool_alloc */
    size_t requested; /* bytes given as requested */
} live_t;

typedef struct model {
    live_t *v;        /* sorted by addr */
    size_t n;         /* entries */
    size_t cap;       /* capacity */
    size_t granted;   /* sum of granted */
    size_t requested; /* sum of requested */
} model_t;

static void check_pool(pool_t *p, uint64_t seed, long step)
{
    char why[256];
    int bad = pool_check(p, why, sizeof why);
    if (bad)
        print_error("seed %llu step %ld: pool_check: %d violations, first: %s\n",
                    (unsigned long long)seed, step, bad, why);
    assert_int_equal(bad, 0);
}

/* First index with v[i].addr >= addr. */
static size_t model_lower(const model_t *m, uintptr_t addr)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void model_add(model_t *m, live_t e)
{
    size_t i = model_lower(m, e.addr);
    size_t end = e.addr + desc_align(e.granted);
    if (i < m->n) assert_true(end <= m->v[i].addr); /* no overlap with the block above */
    if (i > 0) assert_true(m->v[i - 1].addr + desc_align(m->v[i - 1].granted) <= e.addr);
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
        assert_non_null(m->v);
    }
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i] = e;
    m->n++;
    m->granted += e.granted;
    m->requested += e.requested;
}

static live_t model_take(model_t *m, size_t i)
{
    live_t e = m->v[i];
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
    m->n--;
    m->granted -= e.granted;
    m->requested -= e.requested;
    return e;
}

/* The largest block a request of `need` bytes could be given (white box, worked out here
 * from the blocks and pages, apart from pool_classify): a run of the large heap's FREE blocks
 * and cached (empty) slab pages, which a miss gives back and which then coalesce; for a
 * slab-sized request also a free slot of its class or a larger one. */
static size_t usable_free(pool_t *p, size_t need)
{
    size_t best = 0, run = 0;
    for (const desc_t *b = p->large_first; b; b = b->phys_next) {
        int free_now = b->state == DESC_FREE || (b->state == DESC_PAGE && b->page->live == 0);
        run = free_now ? run + b->size : 0;
        if (run > best) best = run;
    }
    for (const desc_t *b = p->large_first; need <= SLAB_MAX && b; b = b->phys_next)
        if (b->state == DESC_PAGE && b->page->live < b->page->nslots &&
            b->page->cls >= slab_class_of(need) && b->page->slot > best)
            best = b->page->slot;
    return best;
}

typedef struct counts {
    uint64_t ok_allocs, enomem, frees, invalid; /* what the pool's counters must say */
    uint64_t probes, refused;                   /* probes made, and refused */
} counts_t;

/* The classifier's guarantee, probed at request size g: pool_explain says NONE iff pool_alloc
 * succeeds; usable_largest is the white-box figure; a refusal's `why` is pool_explain's answer
 * (before and after: a refusal gives cached pages back, which changes no figure).  A block
 * the probe got is freed again.  pool_check after each. */
static void probe(pool_t *p, size_t g, size_t usable, counts_t *k, uint64_t seed, long step)
{
    if (g == 0 || g > usable) return;
    pool_refusal_t r, why, after;
    pool_explain(p, g, &r);
    size_t need = desc_align(g), white = usable_free(p, need);
    if (r.usable_largest != white || (r.kind == POOL_REFUSAL_NONE) != (white >= need))
        print_error("seed %llu step %ld: explain(%zu): kind %d usable %zu, white box %zu\n",
                    (unsigned long long)seed, step, g, r.kind, r.usable_largest, white);
    assert_int_equal(r.usable_largest, white);
    assert_int_equal(r.need, need);
    uintptr_t a;
    int rc = pool_alloc(p, g, g, &a, &why);
    if (rc == POOL_OK) {
        if (r.kind != POOL_REFUSAL_NONE)
            print_error("seed %llu step %ld: %zu B allocated, explain said %s\n",
                        (unsigned long long)seed, step, g, pool_refusal_name(r.kind));
        assert_int_equal(r.kind, POOL_REFUSAL_NONE);
        assert_int_equal(pool_free(p, a, NULL, NULL), POOL_OK);
        k->ok_allocs++;
        k->frees++;
    } else {
        assert_int_equal(rc, POOL_ENOMEM);
        if (r.kind == POOL_REFUSAL_NONE)
            print_error("seed %llu step %ld: %zu B refused, explain said it fits in %zu\n",
                        (unsigned long long)seed, step, g, r.usable_largest);
        assert_true(r.kind == POOL_REFUSAL_EXHAUSTED || r.kind == POOL_REFUSAL_FRAGMENTED);
        assert_int_equal(r.kind,
                         r.free_bytes < need ? POOL_REFUSAL_EXHAUSTED : POOL_REFUSAL_FRAGMENTED);
        assert_memory_equal(&why, &r, sizeof why);
        pool_explain(p, g, &after);
        assert_memory_equal(&after, &r, sizeof after);
        k->enomem++;
        k->refused++;
    }
    k->probes++;
    check_pool(p, seed, step);
}

static size_t pick_size(uint64_t *s, size_t usable)
{
    static const size_t edge[] = {1, 63, 64, 65, MiB - 1, MiB, MiB + 1};
    unsigned r = (unsigned)(splitmix_next(s) % 100);
    if (r < 6) return edge[splitmix_next(s) % (sizeof edge / sizeof edge[0])];
    if (r < 12) { /* a slab class's first or last size */
        unsigned c = (unsigned)(splitmix_next(s) % SLAB_NCLASSES);
        size_t v = splitmix_next(s) & 1 ? slab_geom[c].slot
                   : c == 0             ? 1
                                        : slab_geom[c - 1].slot + 1;
        return v > usable ? usable : v;
    }
    if (r == 6) return usable;
    if (r == 7) return usable + 1 + (size_t)(splitmix_next(s) % 100);
    double x = exp(splitmix_unit(s) * log((double)usable));
    size_t v = (size_t)x;
    return v < 1 ? 1 : v > usable ? usable : v;
}

/* The checker is O(blocks + map slots) per step; TSan makes it ~15x slower and this file has no
 * threads, so its sequences are shortened there (they run in full in the plain and ASan builds). */
#if defined(__SANITIZE_THREAD__)
#define STEP_SCALE 4
#else
#define STEP_SCALE 1
#endif
#define PROBE_EVERY 1 /* probe the refusal classifier after every operation */

static void run_sequence(uint64_t seed, uintptr_t base, size_t size, long steps, int alloc_pct)
{
    steps /= STEP_SCALE;
    pool_t *p = pool_create(base, size);
    assert_non_null(p);
    uintptr_t ubase = (base + 63) & ~(uintptr_t)63, uend = (base + size) & ~(uintptr_t)63;
    size_t usable = uend - ubase;
    model_t m = {0};
    uint64_t s = seed;
    counts_t k = {0};
    for (long step = 0; step < steps; step++) {
        unsigned op = (unsigned)(splitmix_next(&s) % 100);
        if (op < 3) {
            /* invalid free: random address, in range (not a live start) or out of range */
            uintptr_t a = op == 0 ? base + (uintptr_t)(splitmix_next(&s) % size)
                          : op == 1
                              ? ubase + (uintptr_t)((splitmix_next(&s) % (usable / 64)) * 64)
                              : (splitmix_next(&s) & 1 ? base - 1 - splitmix_next(&s) % 4096
                                                       : base + size + splitmix_next(&s) % 4096);
            size_t i = model_lower(&m, a);
            if (i < m.n && m.v[i].addr == a) continue;
            pool_stats_t before, after;
            pool_get_stats(p, &before);
            int rc = pool_free(p, a, NULL, NULL);
            assert_int_equal(rc, pool_contains(p, a) ? POOL_ENOTLIVE : POOL_ENOTOWNED);
            pool_get_stats(p, &after);
            before.invalid_frees++;
            assert_memory_equal(&before, &after, sizeof before);
            k.invalid++;
        } else if (m.n == 0 || op < (unsigned)alloc_pct) {
            size_t g = pick_size(&s, usable);
            size_t r = (size_t)(splitmix_next(&s) % (g + 1));
            uintptr_t a = 0;
            int rc = pool_alloc(p, r, g, &a, NULL);
            if (g > usable) {
                assert_int_equal(rc, POOL_EINVAL);
            } else if (rc == POOL_OK) {
                assert_int_equal(a % POOL_ALIGN, 0);
                assert_true(a >= ubase && a <= uend && uend - a >= g);
                model_add(&m, (live_t){a, g, r});
                k.ok_allocs++;
            } else {
                assert_int_equal(rc, POOL_ENOMEM);
                size_t need = desc_align(g), have = usable_free(p, need);
                if (have >= need)
                    print_error("seed %llu step %ld: ENOMEM for %zu bytes with a %zu-byte "
                                "free block\n",
                                (unsigned long long)seed, step, need, have);
                assert_true(have < need);
                k.enomem++;
            }
        } else {
            size_t i = (size_t)(splitmix_next(&s) % m.n);
            live_t e = model_take(&m, i);
            size_t g = 0, r = 0;
            assert_int_equal(pool_free(p, e.addr, &g, &r), POOL_OK);
            assert_int_equal(g, e.granted);
            assert_int_equal(r, e.requested);
            k.frees++;
        }
        check_pool(p, seed, step);
        if (step % PROBE_EVERY == 0) {
            /* Probes: a slab size, a large size, a slab class's last size, and both sides of
             * the largest free run (the edge where a request starts to be refused). */
            pool_stats_t now;
            pool_get_stats(p, &now);
            probe(p, 1 + (size_t)(splitmix_next(&s) % SLAB_MAX), usable, &k, seed, step);
            probe(p, pick_size(&s, usable), usable, &k, seed, step);
            probe(p, slab_geom[splitmix_next(&s) % SLAB_NCLASSES].slot, usable, &k, seed, step);
            probe(p, now.largest_free_bytes, usable, &k, seed, step);
            probe(p, now.largest_free_bytes + 1 + splitmix_next(&s) % 64, usable, &k, seed, step);
        }
        /* The checker ran with this thread's cache as the operation left it (refilled,
         * flushed, pushed); now with it drained (pool_explain drained it already, and
         * pool_drain_caches must leave it so). */
        pool_drain_caches(p);
        check_pool(p, seed, step);
        pool_stats_t st;
        pool_get_stats(p, &st);
        assert_int_equal(st.cached_blocks, 0);
        assert_int_equal(st.live_blocks, m.n);
        assert_int_equal(st.allocated_bytes, m.granted);
        assert_int_equal(st.requested_bytes, m.requested);
        assert_int_equal(st.allocs, k.ok_allocs);
        assert_int_equal(st.frees, k.frees);
        assert_int_equal(st.failed_allocs, k.enomem);
        assert_int_equal(st.invalid_frees, k.invalid);
        assert_int_equal(st.allocated_bytes + st.free_bytes + st.overhead_bytes, size);
    }
    /* Every kind of outcome happened. */
    assert_true(k.ok_allocs > 100 / STEP_SCALE && k.frees > 100 / STEP_SCALE);
    assert_true(k.enomem > 10 / STEP_SCALE && k.invalid > 10 / STEP_SCALE);
    assert_true(k.probes > 100 / STEP_SCALE && k.refused > 10 / STEP_SCALE);
    while (m.n > 0) {
        live_t e = model_take(&m, (size_t)(splitmix_next(&s) % m.n));
        assert_int_equal(pool_free(p, e.addr, NULL, NULL), POOL_OK);
        check_pool(p, seed, -1);
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.free_bytes, usable);
    assert_true(st.fragmentation == 0.0);
    free(m.v);
    pool_destroy(p);
}

static void test_random_64m_unaligned(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++)
        run_sequence(seed, 0x7f1234560010ull + seed * 8, 64 * MiB + 37 * seed, 4000, 55);
}

static void test_random_small_pool(void **state)
{
    (void)state;
    /* A few MiB: pages often cannot be carved (small requests fall back to the large heap or
     * to a free slot of a larger class) and cached pages are taken back by large requests. */
    for (uint64_t seed = 11; seed <= 13; seed++)
        run_sequence(seed, 0x10000000ull, 7 * MiB + 4096, 3000, 55);
}

static void test_random_large_pool(void **state)
{
    (void)state;
    for (uint64_t seed = 21; seed <= 23; seed++)
        run_sequence(seed, 0x100000000000ull, (size_t)16 << 30, 3000, 60);
}

static void test_random_alloc_heavy(void **state)
{
    (void)state;
    /* Mostly allocations: the pool lives near exhaustion. */
    run_sequence(31, 0x20000000ull, 256 * MiB, 5000, 80);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_64m_unaligned),
        cmocka_unit_test(test_random_small_pool),
        cmocka_unit_test(test_random_large_pool),
        cmocka_unit_test(test_random_alloc_heavy),
    };
    return cmocka_run_group_tests_name("pool_random", tests, NULL, NULL);
}
