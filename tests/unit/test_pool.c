/* tests/unit/test_pool.c — pool API, edge sizes, misuse, exhaustion, coalescing, segregation
 * of small blocks, statistics, and the size-class slabs (class geometry and boundaries, page
 * carve/cache/release, the incarnations of reused page memory, misuse inside pages,
 * fallbacks, free runs across page edges).
 * pool_check() is asserted to be 0 after every operation.
 * (Randomised sequences: test_pool_random.c; threads: test_pool_threads.c.)
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fmt.h"
#include "pool.h"
#include "splitmix.h"
#include "pool_internal.h" /* white box: class geometry, pages, the large heap's classes */

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

static void check_pool(pool_t *p)
{
    char why[256];
    int bad = pool_check(p, why, sizeof why);
    if (bad) print_error("pool_check: %d violations, first: %s\n", bad, why);
    assert_int_equal(bad, 0);
}

static size_t rng_range(uint64_t *s, size_t lo, size_t hi) /* inclusive */
{
    return lo + (size_t)(splitmix_next(s) % (hi - lo + 1));
}

static void shuffle(uintptr_t *a, size_t n, uint64_t *s)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix_next(s) % i);
        uintptr_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* ---- walk helpers ---------------------------------------------------------------------- */
typedef struct walk_sum {
    size_t free_blocks, free_bytes;     /* free extents (FREE and SLOTS) and their bytes */
    size_t largest;                     /* longest FREE extent */
    size_t live_blocks, live_bytes;     /* live extents and their granted bytes */
    size_t runs, slot_runs, slot_bytes; /* FREE extents, SLOTS extents and their bytes */
    uintptr_t last_end;                 /* end of the previous extent */
    int order_ok;                       /* 0 once an extent came out of address order */
} walk_sum_t;

static int walk_cb(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind)
{
    walk_sum_t *w = ctx;
    if (addr < w->last_end) w->order_ok = 0;
    w->last_end = addr + size;
    if (kind == POOL_EXTENT_LIVE) {
        w->live_blocks++;
        w->live_bytes += size;
        return 0;
    }
    w->free_blocks++;
    w->free_bytes += size;
    if (kind == POOL_EXTENT_FREE) {
        w->runs++;
        if (size > w->largest) w->largest = size;
    } else {
        assert_int_equal(kind, POOL_EXTENT_SLOTS);
        w->slot_runs++;
        w->slot_bytes += size;
    }
    return 0;
}

static walk_sum_t walk_sum(pool_t *p)
{
    walk_sum_t w = {.order_ok = 1};
    assert_int_equal(pool_walk(p, walk_cb, &w), 0);
    assert_true(w.order_ok);
    return w;
}

static void assert_one_free_block(pool_t *p, size_t usable)
{
    walk_sum_t w = walk_sum(p);
    assert_int_equal(w.free_blocks, 1);
    assert_int_equal(w.free_bytes, usable);
    assert_int_equal(w.live_blocks, 0);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.free_bytes, usable);
    assert_int_equal(st.largest_free_bytes, usable);
    assert_true(st.fragmentation == 0.0);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.live_blocks, 0);
}

static uintptr_t must_alloc(pool_t *p, size_t granted)
{
    uintptr_t a = 0;
    int rc = pool_alloc(p, granted, granted, &a, NULL);
    assert_int_equal(rc, POOL_OK);
    assert_int_equal(a % POOL_ALIGN, 0);
    check_pool(p);
    return a;
}

static void must_free(pool_t *p, uintptr_t a)
{
    assert_int_equal(pool_free(p, a, NULL, NULL), POOL_OK);
    check_pool(p);
}

/* A pool whose small blocks always go to pages: these tests place blocks by the slab's rules
 * (test_page_gate covers the gate that keeps a class with few live blocks out of pages). */
static pool_t *make_pool(uintptr_t base, size_t size)
{
    pool_t *p = pool_create(base, size);
    if (p) p->slab.min_live = 1;
    return p;
}

/* ---- tests ----------------------------------------------------------------------------- */
static void test_create_args(void **state)
{
    (void)state;
    assert_null(pool_create(0x1000, 0));
    assert_null(pool_create(1, 100));                 /* no aligned 64-byte block inside */
    assert_null(pool_create(UINTPTR_MAX - 100, 200)); /* wraps */
    pool_t *p = pool_create(0, 64);
    assert_non_null(p);
    check_pool(p);
    uintptr_t a;
    assert_int_equal(pool_alloc(p, 0, 64, &a, NULL), POOL_OK);
    assert_int_equal(a, 0); /* address 0 is a valid block start */
    check_pool(p);
    assert_int_equal(pool_alloc(p, 0, 1, &a, NULL), POOL_ENOMEM);
    assert_int_equal(pool_free(p, 0, NULL, NULL), POOL_OK);
    check_pool(p);
    pool_destroy(p);

    /* Unaligned range: head and tail are overhead. */
    p = pool_create(0x10000010, 10 * MiB + 100);
    assert_non_null(p);
    pool_stats_t st;
    pool_get_stats(p, &st);
    size_t usable = (0x10000010 + 10 * MiB + 100 - 0x10000040) & ~(size_t)63;
    assert_int_equal(st.base, 0x10000010);
    assert_int_equal(st.reserved_bytes, 10 * MiB + 100);
    assert_int_equal(st.free_bytes, usable);
    assert_int_equal(st.overhead_bytes, 10 * MiB + 100 - usable);
    assert_true(st.fragmentation == 0.0);
    assert_true(pool_contains(p, 0x10000010));
    assert_true(pool_contains(p, 0x10000010 + 10 * MiB + 99));
    assert_false(pool_contains(p, 0x10000010 + 10 * MiB + 100));
    assert_false(pool_contains(p, 0x1000000f));
    check_pool(p);
    pool_destroy(p);
}

static void test_edge_sizes(void **state)
{
    (void)state;
    const uintptr_t base = 0x7f0000000010ull;
    const size_t size = 64 * MiB + 37;
    pool_t *p = make_pool(base, size);
    assert_non_null(p);
    uintptr_t ubase = (base + 63) & ~(uintptr_t)63, uend = (base + size) & ~(uintptr_t)63;
    size_t usable = uend - ubase;
    const size_t sizes[] = {1, 63, 64, 65, MiB - 1, MiB, MiB + 1, 2 * MiB, usable - 64, usable};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uintptr_t a = 0;
        size_t req = sizes[i] > 1 ? sizes[i] - 1 : 1;
        assert_int_equal(pool_alloc(p, req, sizes[i], &a, NULL), POOL_OK);
        assert_int_equal(a % POOL_ALIGN, 0);
        assert_true(a >= ubase && a + sizes[i] <= uend);
        check_pool(p);
        size_t g = 0, r = 0;
        assert_int_equal(pool_block_size(p, a, &g, &r), POOL_OK);
        assert_int_equal(g, sizes[i]);
        assert_int_equal(r, req);
        pool_stats_t st;
        pool_get_stats(p, &st);
        assert_int_equal(st.allocated_bytes, sizes[i]);
        assert_int_equal(st.requested_bytes, req);
        assert_int_equal(st.allocated_bytes + st.free_bytes + st.overhead_bytes, st.reserved_bytes);
        assert_int_equal(st.overhead_bytes, size - usable + ((64 - sizes[i] % 64) % 64));
        if (sizes[i] == usable) {
            uintptr_t b;
            assert_int_equal(pool_alloc(p, 1, 1, &b, NULL), POOL_ENOMEM);
            check_pool(p);
        }
        g = r = 0;
        assert_int_equal(pool_free(p, a, &g, &r), POOL_OK);
        assert_int_equal(g, sizes[i]);
        assert_int_equal(r, req);
        check_pool(p);
        assert_one_free_block(p, usable);
    }
    uintptr_t a;
    assert_int_equal(pool_alloc(p, 0, usable + 1, &a, NULL), POOL_EINVAL);
    assert_int_equal(pool_alloc(p, 0, size, &a, NULL), POOL_EINVAL); /* head/tail never usable */
    assert_int_equal(pool_alloc(p, 0, 0, &a, NULL), POOL_EINVAL);
    assert_int_equal(pool_alloc(p, 10, 5, &a, NULL), POOL_EINVAL); /* requested > granted */
    assert_int_equal(pool_alloc(p, 0, SIZE_MAX, &a, NULL), POOL_EINVAL);
    assert_int_equal(pool_alloc(p, 0, 64, NULL, NULL), POOL_EINVAL);
    /* Every refusal writes *why whole, so a caller need not clear it (pool.h); a success leaves
     * it as it was. */
    pool_refusal_t why, zero;
    memset(&zero, 0, sizeof zero);
    memset(&why, 0xa5, sizeof why);
    assert_int_equal(pool_alloc(p, 10, 5, &a, &why), POOL_EINVAL);
    assert_memory_equal(&why, &zero, sizeof why); /* bad arguments: kind NONE, all zero */
    memset(&why, 0xa5, sizeof why);
    assert_int_equal(pool_alloc(p, 0, usable + 1, &a, &why), POOL_EINVAL);
    assert_int_equal(why.kind, POOL_REFUSAL_TOO_LARGE);
    assert_int_equal(why.need, (usable + 1 + 63) / 64 * 64);
    pool_refusal_t before;
    memset(&why, 0xa5, sizeof why);
    before = why;
    assert_int_equal(pool_alloc(p, 64, 64, &a, &why), POOL_OK);
    assert_memory_equal(&why, &before, sizeof why);
    assert_int_equal(pool_free(p, a, NULL, NULL), POOL_OK);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.failed_allocs, 1);
    assert_int_equal(st.allocs, sizeof sizes / sizeof sizes[0] + 1);
    assert_int_equal(st.frees, sizeof sizes / sizeof sizes[0] + 1);
    assert_int_equal(st.peak_allocated_bytes, usable);
    check_pool(p);
    pool_destroy(p);
}

static int stats_equal_but_invalid(const pool_stats_t *a, const pool_stats_t *b)
{
    pool_stats_t x = *a, y = *b;
    x.invalid_frees = y.invalid_frees = 0;
    return memcmp(&x, &y, sizeof x) == 0;
}

static void test_misuse(void **state)
{
    (void)state;
    const uintptr_t base = 0x100000000ull;
    pool_t *p = make_pool(base, 64 * MiB);
    uintptr_t small = must_alloc(p, 1000), big = must_alloc(p, 3 * MiB);
    uintptr_t gone = must_alloc(p, 5000);
    must_free(p, gone);
    pool_stats_t before, after;
    pool_get_stats(p, &before);
    struct {
        uintptr_t addr;
        int want;
    } bad[] = {
        {gone, POOL_ENOTLIVE},             /* double free */
        {small + 64, POOL_ENOTLIVE},       /* interior pointer, small block */
        {small + 1, POOL_ENOTLIVE},        /* unaligned interior pointer */
        {big + MiB, POOL_ENOTLIVE},        /* interior pointer, large block */
        {base + 40 * MiB, POOL_ENOTLIVE},  /* inside a free block */
        {base - 1, POOL_ENOTOWNED},        /* just below */
        {base + 64 * MiB, POOL_ENOTOWNED}, /* just above */
        {0, POOL_ENOTOWNED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t g = 12345;
        assert_int_equal(pool_free(p, bad[i].addr, &g, NULL), bad[i].want);
        assert_int_equal(g, 12345); /* untouched */
        assert_int_equal(pool_block_size(p, bad[i].addr, &g, NULL), bad[i].want);
        check_pool(p);
        pool_get_stats(p, &after);
        assert_true(stats_equal_but_invalid(&before, &after));
        assert_int_equal(after.invalid_frees, before.invalid_frees + i + 1);
    }
    /* The blocks are intact. */
    size_t g;
    assert_int_equal(pool_block_size(p, small, &g, NULL), POOL_OK);
    assert_int_equal(g, 1000);
    must_free(p, small);
    must_free(p, big);
    assert_int_equal(pool_free(p, big, NULL, NULL), POOL_ENOTLIVE);
    assert_int_equal(pool_free(NULL, big, NULL, NULL), POOL_ENOTOWNED);
    check_pool(p);
    pool_destroy(p);
}

static void test_exhaustion(void **state)
{
    (void)state;
    const size_t size = 256 * MiB;
    pool_t *p = make_pool(0x200000000ull, size);
    uintptr_t *live = malloc(200000 * sizeof *live);
    size_t n = 0;
    uint64_t seed = 42;
    /* Fill with shrinking sizes until not even 64 bytes fit. */
    for (size_t s = 8 * MiB; s >= 64; s /= 2) {
        for (;;) {
            size_t g = rng_range(&seed, s / 2 + 1, s);
            if (s == 64) g = 64;
            uintptr_t a;
            int rc = pool_alloc(p, g, g, &a, NULL);
            if (rc == POOL_ENOMEM) break;
            assert_int_equal(rc, POOL_OK);
            assert_true(n < 200000);
            live[n++] = a;
        }
        check_pool(p);
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.free_bytes, 0);
    assert_int_equal(st.free_blocks, 0);
    assert_int_equal(st.largest_free_bytes, 0);
    assert_true(st.fragmentation == 0.0);
    assert_int_equal(st.live_blocks, n);
    assert_int_equal(st.allocated_bytes + st.overhead_bytes, size);
    uint64_t failed = st.failed_allocs;
    for (int i = 0; i < 5; i++) {
        uintptr_t a;
        assert_int_equal(pool_alloc(p, 1, 1, &a, NULL), POOL_ENOMEM);
        assert_int_equal(pool_alloc(p, 0, 100 * MiB, &a, NULL), POOL_ENOMEM);
    }
    pool_get_stats(p, &st);
    assert_int_equal(st.failed_allocs, failed + 10);
    check_pool(p);
    shuffle(live, n, &seed);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(pool_free(p, live[i], NULL, NULL), POOL_OK);
        if (i % 16 == 0 || i + 1 == n) check_pool(p);
    }
    assert_one_free_block(p, size);
    /* Usable again in one piece. */
    uintptr_t a = must_alloc(p, size);
    must_free(p, a);
    free(live);
    pool_destroy(p);
}

/* The seed's puzzle: enough free memory in total, no piece large enough. */
static void test_oom_puzzle(void **state)
{
    (void)state;
    pool_t *p = make_pool(0x200000000000ull, 8 * GiB);
    uintptr_t blk[8];
    for (int i = 0; i < 8; i++) blk[i] = must_alloc(p, GiB);
    uintptr_t a;
    assert_int_equal(pool_alloc(p, 0, GiB, &a, NULL), POOL_ENOMEM);
    for (int i = 1; i < 8; i += 2) must_free(p, blk[i]);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.free_bytes, 4 * GiB);
    assert_int_equal(st.largest_free_bytes, GiB);
    assert_int_equal(st.free_blocks, 4);
    assert_true(st.fragmentation > 0.7499 && st.fragmentation < 0.7501);
    assert_int_equal(st.buckets[7].free_blocks, 0);
    assert_int_equal(st.buckets[6].free_blocks, 4);
    assert_int_equal(st.buckets[6].live_blocks, 4);
    assert_int_equal(pool_alloc(p, 0, 2 * GiB, &a, NULL), POOL_ENOMEM);
    pool_get_stats(p, &st);
    assert_int_equal(st.failed_allocs, 2);
    check_pool(p);
    blk[1] = must_alloc(p, GiB);
    pool_get_stats(p, &st);
    assert_true(st.fragmentation > 0.6666 && st.fragmentation < 0.6667);
    for (int i = 0; i < 8; i++)
        if (i % 2 == 0 || i == 1) must_free(p, blk[i]);
    assert_one_free_block(p, 8 * GiB);
    pool_destroy(p);
}

/* ---- refusals ------------------------------------------------------------------------- */

/* pool_explain(granted), then pool_alloc(granted) with a `why`: they agree (NONE iff it
 * succeeds, and a refusal's `why` is what pool_explain said); a block it got is freed again.
 * Returns the explanation. */
static pool_refusal_t explain_and_try(pool_t *p, size_t granted)
{
    pool_refusal_t r, why, after;
    memset(&why, 0xa5, sizeof why);
    pool_explain(p, granted, &r);
    pool_refusal_t untouched = why;
    uintptr_t a;
    int rc = pool_alloc(p, granted, granted, &a, &why);
    check_pool(p);
    if (r.kind == POOL_REFUSAL_NONE) {
        assert_int_equal(rc, POOL_OK);
        assert_memory_equal(&why, &untouched, sizeof why); /* not touched on success */
        assert_true(r.usable_largest >= r.need);
        must_free(p, a);
    } else {
        assert_int_equal(rc, r.kind == POOL_REFUSAL_TOO_LARGE ? POOL_EINVAL : POOL_ENOMEM);
        assert_memory_equal(&why, &r, sizeof why);
        pool_explain(p, granted, &after); /* the refusal changed nothing that matters */
        assert_memory_equal(&after, &r, sizeof after);
    }
    assert_int_equal(r.need, granted > SIZE_MAX - 63 ? granted : desc_align(granted));
    return r;
}

static int largest_run_cb(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind)
{
    (void)addr;
    size_t *m = ctx;
    if (kind == POOL_EXTENT_FREE && size > m[0]) m[0] = size;
    if (kind == POOL_EXTENT_SLOTS) m[1] += size;
    return 0;
}

/* The issue's reproduction: a 64 MiB pool filled with 100,000-byte blocks (ACL grants 100,032
 * B), four of every five freed.  Most of the free space is now free slots, which no large
 * request can use: requests of 410,000 and 800,000 B are refused for fragmentation, and the
 * largest block they could be given is the longest free run, far below the 851,968 B the old
 * "largest free block" (free slots merged with their neighbours) claimed. */
static void test_refusal_issue_scenario(void **state)
{
    (void)state;
    pool_t *p = make_pool(0x1100000000ull, 64 * MiB);
    uintptr_t a[1000];
    size_t n = 0;
    while (n < 1000 && pool_alloc(p, 100000, 100032, &a[n], NULL) == POOL_OK) n++;
    assert_true(n > 600 && n < 1000);
    check_pool(p);
    for (size_t i = 0; i < n; i++)
        if (i % 5) must_free(p, a[i]);
    size_t m[2] = {0, 0};
    pool_stats_t st;
    pool_snapshot(p, &st, largest_run_cb, m);
    const size_t run = m[0];
    assert_int_equal(st.largest_free_bytes, run);
    assert_int_equal(st.slab_free_bytes, m[1]);
    assert_true(st.slab_free_bytes > st.free_bytes / 2); /* mostly free slots */
    assert_true(run >= 358112 && run < 410000);          /* the figures of this fill */

    pool_refusal_t r = explain_and_try(p, 358112); /* a free run holds it */
    assert_int_equal(r.kind, POOL_REFUSAL_NONE);
    assert_int_equal(r.usable_largest, run);
    for (int i = 0; i < 2; i++) {
        size_t g = i ? 800000 : 410000;
        r = explain_and_try(p, g);
        assert_int_equal(r.kind, POOL_REFUSAL_FRAGMENTED);
        assert_int_equal(r.usable_largest, run);
        assert_int_equal(r.free_bytes, st.free_bytes);
        assert_int_equal(r.slab_free_bytes, st.slab_free_bytes);
        assert_int_equal(r.reserved_bytes, 64 * MiB);
        char want[256], f[4][FMT_BYTES_LEN], got[256];
        snprintf(want, sizeof want,
                 "fragmentation: %s free, but the largest block a %s request can be given is %s "
                 "(%s of the free space is free slots in small-block pages)",
                 fmt_bytes(f[0], st.free_bytes), fmt_bytes(f[1], desc_align(g)),
                 fmt_bytes(f[2], run), fmt_bytes(f[3], st.slab_free_bytes));
        assert_int_equal(pool_refusal_describe(&r, got, sizeof got), strlen(want));
        assert_string_equal(got, want);
    }
    /* A slab-sized request is given a slot of its class (or a free run). */
    r = explain_and_try(p, 100032);
    assert_int_equal(r.kind, POOL_REFUSAL_NONE);
    r = explain_and_try(p, 64 * MiB + 1); /* more than the pool could ever hold */
    assert_int_equal(r.kind, POOL_REFUSAL_TOO_LARGE);
    assert_string_equal(pool_refusal_name(r.kind), "too large");
    char got[160];
    pool_refusal_describe(&r, got, sizeof got);
    assert_string_equal(got, "too large: 67108928 B needed, more than the pool can ever hold "
                             "(67108864 B)");
    for (size_t i = 0; i < n; i += 5) must_free(p, a[i]);
    assert_one_free_block(p, 64 * MiB);
    pool_destroy(p);
}

/* The other kinds: nothing free at all (exhausted), the seed's puzzle (fragmentation without
 * free slots), a slab-sized request served by a larger class's free slot, and the sentence's
 * truncation. */
static void test_refusal_kinds(void **state)
{
    (void)state;
    /* Exhausted: a pool of one large block. */
    pool_t *p = make_pool(0x1200000000ull, 8 * MiB);
    uintptr_t big = must_alloc(p, 8 * MiB - 64 * KiB);
    pool_refusal_t r = explain_and_try(p, 100 * KiB);
    assert_int_equal(r.kind, POOL_REFUSAL_EXHAUSTED);
    assert_int_equal(r.free_bytes, 64 * KiB);
    assert_int_equal(r.usable_largest, 64 * KiB);
    char s[128];
    pool_refusal_describe(&r, s, sizeof s);
    assert_string_equal(s, "exhausted: 64.0 KiB free, 100.0 KiB needed");
    assert_string_equal(pool_refusal_name(r.kind), "exhausted");
    r = explain_and_try(p, 64 * KiB); /* exactly what is left: a 64 KiB page cannot be
                                           carved (256 KiB minimum), the large heap serves it */
    assert_int_equal(r.kind, POOL_REFUSAL_NONE);
    assert_int_equal(r.usable_largest, 64 * KiB);
    pool_refusal_describe(&r, s, sizeof s);
    assert_string_equal(s, "none: a 64.0 KiB request fits (the largest block it can be given is "
                           "64.0 KiB)");
    /* Figures that differ but print alike get their exact byte counts. */
    {
        pool_t *q = make_pool(0x1400000000ull, 8 * MiB);
        uintptr_t half = must_alloc(q, 4 * MiB);
        pool_refusal_t e = explain_and_try(q, 4 * MiB + 1);
        assert_int_equal(e.kind, POOL_REFUSAL_EXHAUSTED);
        char t[160];
        pool_refusal_describe(&e, t, sizeof t);
        assert_string_equal(t, "exhausted: 4.0 MiB (4194304 bytes) free, 4.0 MiB (4194368 bytes) "
                               "needed");
        must_free(q, half);
        pool_destroy(q);
    }
    /* Truncation: as snprintf. */
    char small[10];
    assert_int_equal(pool_refusal_describe(&r, small, sizeof small), strlen(s));
    assert_string_equal(small, "none: a 6");
    assert_int_equal(pool_refusal_describe(&r, NULL, 0), strlen(s));
    must_free(p, big);
    pool_destroy(p);

    /* The seed's puzzle: 4 GiB free in 1 GiB pieces, no free slot. */
    p = make_pool(0x200000000000ull, 8 * GiB);
    uintptr_t blk[8];
    for (int i = 0; i < 8; i++) blk[i] = must_alloc(p, GiB);
    for (int i = 1; i < 8; i += 2) must_free(p, blk[i]);
    r = explain_and_try(p, 2 * GiB);
    assert_int_equal(r.kind, POOL_REFUSAL_FRAGMENTED);
    assert_int_equal(r.usable_largest, GiB);
    assert_int_equal(r.slab_free_bytes, 0);
    pool_refusal_describe(&r, s, sizeof s);
    assert_string_equal(s, "fragmentation: 4.0 GiB free, but the largest block a 2.0 GiB request "
                           "can be given is 1.0 GiB");
    assert_string_equal(pool_refusal_name(r.kind), "fragmentation");
    r = explain_and_try(p, GiB);
    assert_int_equal(r.kind, POOL_REFUSAL_NONE);
    for (int i = 0; i < 8; i += 2) must_free(p, blk[i]);
    pool_destroy(p);

    /* A free slot of a larger class is the largest block a small request can be given. */
    p = make_pool(0x1300000000ull, 4 * MiB);
    uintptr_t x = must_alloc(p, 200 * KiB), y = must_alloc(p, 200 * KiB);
    slab_page_t *pg = slab_page_of(&p->slab, x);
    assert_ptr_equal(slab_page_of(&p->slab, y), pg);
    assert_int_equal(pg->nslots, 2);
    uintptr_t rest = must_alloc(p, 4 * MiB - pg->span); /* the whole large heap */
    must_free(p, x);                                    /* one free 224 KiB slot */
    r = explain_and_try(p, 1000);
    assert_int_equal(r.kind, POOL_REFUSAL_NONE);
    assert_int_equal(r.usable_largest, pg->slot);
    r = explain_and_try(p, pg->slot + 64); /* larger than the class: nothing */
    assert_int_equal(r.kind, POOL_REFUSAL_EXHAUSTED);
    assert_int_equal(r.usable_largest, 0);
    assert_int_equal(r.slab_free_bytes, pg->slot);
    must_free(p, y);
    must_free(p, rest);
    assert_one_free_block(p, 4 * MiB);
    pool_destroy(p);
    assert_string_equal(pool_refusal_name(POOL_REFUSAL_NONE), "none");
    assert_string_equal(pool_refusal_name((enum pool_refusal_kind)42), "unknown");
}

static void coalesce_in_order(int order, uint64_t seed)
{
    const size_t size = 64 * MiB;
    pool_t *p = make_pool(0x300000000ull, size);
    uintptr_t live[400];
    size_t n = 0;
    while (n < 400) {
        /* Mixed: mostly small (slab pages), some large. */
        size_t g = splitmix_next(&seed) % 4 == 0 ? rng_range(&seed, MiB + 1, 3 * MiB)
                                                 : rng_range(&seed, 1, 200 * KiB);
        uintptr_t a;
        int rc = pool_alloc(p, g, g, &a, NULL);
        if (rc == POOL_ENOMEM) break;
        assert_int_equal(rc, POOL_OK);
        live[n++] = a;
        check_pool(p);
    }
    assert_true(n > 50);
    if (order == 1) {
        for (size_t i = 0; i < n / 2; i++) {
            uintptr_t t = live[i];
            live[i] = live[n - 1 - i];
            live[n - 1 - i] = t;
        }
    } else if (order == 2) {
        shuffle(live, n, &seed);
    }
    for (size_t i = 0; i < n; i++) must_free(p, live[i]);
    assert_one_free_block(p, size);
    pool_destroy(p);
}

static void test_coalesce_forward(void **state)
{
    (void)state;
    coalesce_in_order(0, 1);
}

static void test_coalesce_reverse(void **state)
{
    (void)state;
    coalesce_in_order(1, 2);
}

static void test_coalesce_random(void **state)
{
    (void)state;
    for (uint64_t s = 3; s < 8; s++) coalesce_in_order(2, s);
}

/* Small blocks live in slab pages carved from the top of free space; large blocks from the
 * bottom.  After the small ones are freed, the large free space is one piece again (cached
 * empty pages count as free and merge with it), and a request for all of it succeeds (the
 * miss gives the cached pages back). */
static void test_small_segregation(void **state)
{
    (void)state;
    pool_cache_thread_enable(0); /* the slab layer itself, below the caches (caches_on) */
    const uintptr_t base = 0x400000000ull;
    const size_t size = GiB;
    pool_t *p = make_pool(base, size);
    uintptr_t large[40], small[40 * 30];
    size_t nl = 0, ns = 0, large_bytes = 0;
    uint64_t seed = 7;
    for (int round = 0; round < 40; round++) {
        size_t g = rng_range(&seed, 2 * MiB, 12 * MiB);
        large[nl++] = must_alloc(p, g);
        large_bytes += desc_align(g);
        for (int k = 0; k < 30; k++) small[ns++] = must_alloc(p, rng_range(&seed, 1, 256 * KiB));
    }
    /* Large blocks are packed at the bottom of the range, with no page in between. */
    for (size_t i = 0; i < nl; i++) {
        size_t g;
        assert_int_equal(pool_block_size(p, large[i], &g, NULL), POOL_OK);
        assert_true(large[i] + g <= base + large_bytes);
        assert_null(slab_page_of(&p->slab, large[i]));
    }
    for (size_t i = 0; i < ns; i++) {
        assert_true(small[i] >= base + large_bytes);
        assert_non_null(slab_page_of(&p->slab, small[i]));
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_true(st.buckets[0].live_blocks + st.buckets[1].live_blocks + st.buckets[2].live_blocks ==
                ns);
    shuffle(small, ns, &seed);
    for (size_t i = 0; i < ns; i++) must_free(p, small[i]);
    assert_true(p->slab.cached_pages > 0); /* empty pages kept by their classes */
    walk_sum_t w = walk_sum(p);
    pool_get_stats(p, &st);
    assert_int_equal(w.free_blocks, 1);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.free_bytes, size - large_bytes);
    assert_int_equal(st.largest_free_bytes, size - large_bytes);
    uintptr_t a = must_alloc(p, size - large_bytes);
    assert_int_equal(p->slab.cached_pages, 0);
    must_free(p, a);
    for (size_t i = 0; i < nl; i++) must_free(p, large[i]);
    assert_one_free_block(p, size);
    pool_destroy(p);
}

/* A page that empties while other blocks are live stays cached (free memory, merged with its
 * free neighbours in the walk); a large request that misses takes it back; the pool gives
 * every page back when nothing is live.  A pool smaller than a page serves small requests
 * from the large heap, and so does a pool whose free space cannot hold a page. */
static void test_cached_page_and_tiny_pool(void **state)
{
    (void)state;
    pool_t *p = make_pool(0x500000000ull, 64 * MiB);
    uintptr_t keep = must_alloc(p, 2 * MiB);
    uintptr_t s1 = must_alloc(p, SLAB_MAX);            /* the top class: never thread-cached */
    uintptr_t s0 = must_alloc(p, SLAB_MAX - 12 * KiB); /* same class */
    slab_page_t *pg = slab_page_of(&p->slab, s1);
    assert_non_null(pg);
    assert_int_equal(pg->slot, SLAB_MAX);
    assert_int_equal(pg->nslots, 1); /* a class with no live slot gets a minimum page */
    assert_int_equal(pg->addr + pg->span, 0x500000000ull + 64 * MiB); /* carved from the top */
    assert_int_equal(slab_page_of(&p->slab, s0)->addr + SLAB_MAX,
                     pg->addr); /* the next one below */
    pool_stats_t st;
    pool_get_stats(p, &st);
    /* keep | free | s0 | s1 */
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free_bytes, 64 * MiB - 2 * MiB - 2 * SLAB_MAX);
    assert_int_equal(st.overhead_bytes, 12 * KiB);
    must_free(p, s1); /* page empties: cached, one free run up to the top */
    assert_int_equal(p->slab.cached_pages, 1);
    assert_int_equal(p->slab.pages, 2);
    pool_get_stats(p, &st);
    assert_int_equal(st.free_blocks, 2);
    assert_int_equal(st.largest_free_bytes, 64 * MiB - 2 * MiB - 2 * SLAB_MAX);
    must_free(p, s0); /* the class's second empty page: cached too */
    assert_int_equal(p->slab.cached_pages, 2);
    assert_int_equal(p->slab.cls[slab_class_of(SLAB_MAX)].ncached, 2);
    assert_int_equal(p->slab.pages, 2);
    pool_get_stats(p, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free_bytes, 62 * MiB);
    uintptr_t s2 = must_alloc(p, SLAB_MAX / 16 * 15 + 64); /* a cached page is used again */
    assert_true(s2 == s0 || s2 == s1);
    assert_int_equal(p->slab.cached_pages, 1);
    assert_int_equal(p->slab.pages, 2);
    must_free(p, s2);
    /* A large request larger than the large heap's free block takes the cached page back. */
    uintptr_t big = must_alloc(p, 62 * MiB);
    assert_int_equal(p->slab.pages, 0);
    must_free(p, big);
    must_free(p, keep);
    assert_one_free_block(p, 64 * MiB);
    pool_destroy(p);

    p = make_pool(0x600000000ull, 48 * KiB); /* smaller than any page */
    uintptr_t t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = must_alloc(p, 100);
        assert_null(slab_page_of(&p->slab, t[i]));
    }
    assert_int_equal(t[1], t[0] + 128); /* packed by the large heap, 64-byte granular */
    for (int i = 0; i < 3; i++) must_free(p, t[i]);
    assert_one_free_block(p, 48 * KiB);
    pool_destroy(p);

    p = make_pool(0x600000000ull, 3 * MiB + 192 * KiB);
    uintptr_t a = must_alloc(p, 100); /* a 256 KiB page */
    assert_non_null(slab_page_of(&p->slab, a));
    uintptr_t b = must_alloc(p, 2 * MiB);
    uintptr_t c = must_alloc(p, 900 * KiB); /* above the slab limit: the large heap */
    assert_null(slab_page_of(&p->slab, c));
    uintptr_t d;
    assert_int_equal(pool_alloc(p, 0, 200 * KiB, &d, NULL), POOL_ENOMEM); /* 60 KiB are left */
    check_pool(p);
    must_free(p, b);
    must_free(p, a);
    must_free(p, c);
    assert_one_free_block(p, 3 * MiB + 192 * KiB);
    pool_destroy(p);

    /* 230 KiB left: a 200 KiB request's page (2 slots of 224 KiB) cannot be carved; the large
     * heap serves it directly, and it is freed through the address map. */
    p = make_pool(0x600000000ull, 2 * MiB + 230 * KiB);
    b = must_alloc(p, 2 * MiB);
    c = must_alloc(p, 200 * KiB);
    assert_null(slab_page_of(&p->slab, c));
    assert_int_equal(p->slab.pages, 0);
    size_t g = 0;
    assert_int_equal(pool_block_size(p, c, &g, NULL), POOL_OK);
    assert_int_equal(g, 200 * KiB);
    must_free(p, c);
    must_free(p, b);
    assert_one_free_block(p, 2 * MiB + 230 * KiB);
    pool_destroy(p);
}

static void test_stats_consistency(void **state)
{
    (void)state;
    assert_int_equal(pool_bucket_of(1), 0);
    for (int k = 0; k < POOL_NBUCKETS - 1; k++) {
        assert_int_equal(pool_bucket_of(pool_bucket_limit[k]), k);
        assert_int_equal(pool_bucket_of(pool_bucket_limit[k] + 1), k + 1);
    }
    assert_int_equal(pool_bucket_of(SIZE_MAX), POOL_NBUCKETS - 1);
    assert_int_equal(pool_bucket_limit[0], KiB);
    assert_int_equal(pool_bucket_limit[2], 256 * KiB);

    pool_t *p = make_pool(0x700000000ull, 4 * GiB + 4096 + 3);
    uintptr_t live[600];
    size_t n = 0, granted_sum = 0, requested_sum = 0;
    uint64_t seed = 99;
    for (int step = 0; step < 3000; step++) {
        if (n < 600 && (n == 0 || splitmix_next(&seed) % 100 < 60)) {
            /* log-uniform 1 B .. 2 GiB */
            unsigned bits = (unsigned)rng_range(&seed, 0, 31);
            size_t g = rng_range(&seed, (size_t)1 << bits, ((size_t)2 << bits) - 1);
            size_t r = g - g / 3;
            uintptr_t a;
            int rc = pool_alloc(p, r, g, &a, NULL);
            if (rc == POOL_OK) {
                live[n++] = a;
                granted_sum += g;
                requested_sum += r;
            } else {
                assert_int_equal(rc, POOL_ENOMEM);
            }
        } else {
            size_t i = (size_t)(splitmix_next(&seed) % n), g, r;
            assert_int_equal(pool_free(p, live[i], &g, &r), POOL_OK);
            granted_sum -= g;
            requested_sum -= r;
            live[i] = live[--n];
        }
        if (step % 50) continue;
        check_pool(p);
        pool_stats_t st;
        pool_get_stats(p, &st);
        walk_sum_t w = walk_sum(p);
        assert_int_equal(st.live_blocks, n);
        assert_int_equal(st.allocated_bytes, granted_sum);
        assert_int_equal(st.requested_bytes, requested_sum);
        assert_int_equal(w.live_blocks, n);
        assert_int_equal(w.live_bytes, granted_sum);
        assert_int_equal(w.free_blocks, st.free_blocks);
        assert_int_equal(w.free_bytes, st.free_bytes);
        assert_int_equal(w.largest, st.largest_free_bytes);
        assert_int_equal(st.overhead_bytes, st.reserved_bytes - st.allocated_bytes - st.free_bytes);
        double frag = st.free_bytes ? 1.0 - (double)w.largest / (double)st.free_bytes : 0.0;
        assert_true(st.fragmentation == frag);
        assert_true(st.fragmentation >= 0.0 && st.fragmentation < 1.0);
        uint64_t lb = 0, fb = 0;
        size_t lbytes = 0, fbytes = 0;
        for (int k = 0; k < POOL_NBUCKETS; k++) {
            lb += st.buckets[k].live_blocks;
            lbytes += st.buckets[k].live_bytes;
            fb += st.buckets[k].free_blocks;
            fbytes += st.buckets[k].free_bytes;
        }
        assert_int_equal(lb, st.live_blocks);
        assert_int_equal(lbytes, st.allocated_bytes);
        assert_int_equal(fb, st.free_blocks);
        assert_int_equal(fbytes, st.free_bytes);
        assert_true(st.peak_allocated_bytes >= st.allocated_bytes);
    }
    while (n > 0) must_free(p, live[--n]);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.allocs, st.frees);
    pool_destroy(p);
}

/* A request can be served by a block of its own size class that is not at the head of the
 * class list when no larger class has a block (TLSF's bounded probe). */
static void test_exact_class_probe(void **state)
{
    (void)state;
    const size_t size = 16 * MiB;
    pool_t *p = make_pool(0xa00000000ull, size);
    const size_t A = 2 * MiB + 8 * KiB, B = 2 * MiB + 32 * KiB, R = 2 * MiB + 16 * KiB;
    unsigned fa, sa, fb, sb, fr, sr;
    tlsf_mapping(A, &fa, &sa);
    tlsf_mapping(B, &fb, &sb);
    tlsf_mapping(R, &fr, &sr);
    assert_true(fa == fb && fb == fr && sa == sb && sb == sr); /* one class */
    uintptr_t a = must_alloc(p, A), s1 = must_alloc(p, 3 * MiB / 2);
    uintptr_t b = must_alloc(p, B), s2 = must_alloc(p, 3 * MiB / 2);
    pool_stats_t st;
    pool_get_stats(p, &st);
    uintptr_t rest = must_alloc(p, st.free_bytes);
    must_free(p, b);
    must_free(p, a); /* head of the class list now: too small for R */
    uintptr_t r;
    assert_int_equal(pool_alloc(p, R, R, &r, NULL), POOL_OK);
    assert_int_equal(r, b);
    check_pool(p);
    assert_int_equal(pool_alloc(p, 0, B + 64, &r, NULL), POOL_ENOMEM); /* nothing that large */
    must_free(p, b);
    must_free(p, s1);
    must_free(p, s2);
    must_free(p, rest);
    assert_one_free_block(p, size);
    pool_destroy(p);
}

/* The search is exact: a request whose only fitting block sits at the tail of its own class's
 * list, behind more blocks than any bounded probe would look at, is served. */
static void test_exact_class_search(void **state)
{
    (void)state;
    enum { NSMALL = 12 };
    pool_t *p = make_pool(0xa80000000ull, 64 * MiB);
    const size_t A = 2 * MiB + 8 * KiB, B = 2 * MiB + 32 * KiB, R = 2 * MiB + 16 * KiB;
    uintptr_t b = must_alloc(p, B), sep[NSMALL + 1], a[NSMALL];
    sep[0] = must_alloc(p, 3 * MiB / 2);
    for (int i = 0; i < NSMALL; i++) {
        a[i] = must_alloc(p, A);
        sep[i + 1] = must_alloc(p, 3 * MiB / 2);
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    uintptr_t rest = must_alloc(p, st.free_bytes);
    must_free(p, b); /* first in, so last in the LIFO class list */
    for (int i = 0; i < NSMALL; i++) must_free(p, a[i]);
    pool_refusal_t why;
    pool_explain(p, R, &why); /* the classifier promises it, so the search must find it */
    assert_int_equal(why.kind, POOL_REFUSAL_NONE);
    assert_int_equal(why.usable_largest, B);
    uintptr_t r;
    assert_int_equal(pool_alloc(p, R, R, &r, NULL), POOL_OK);
    assert_int_equal(r, b);
    check_pool(p);
    assert_int_equal(pool_alloc(p, 0, B + 64, &r, NULL), POOL_ENOMEM); /* nothing that large */
    must_free(p, b);
    for (int i = 0; i <= NSMALL; i++) must_free(p, sep[i]);
    must_free(p, rest);
    assert_one_free_block(p, 64 * MiB);
    pool_destroy(p);
}

/* Thousands of live blocks: the address map grows (incrementally, checked while the migration
 * is in flight) and the descriptor slab takes several pages. */
static void test_many_blocks(void **state)
{
    (void)state;
    enum { N = 6000 };
    pool_t *p = make_pool(0x900000000ull, 256 * MiB);
    uintptr_t *live = malloc(N * sizeof *live);
    uint64_t seed = 17;
    for (size_t i = 0; i < N; i++) {
        size_t g = rng_range(&seed, 1, 8 * KiB);
        assert_int_equal(pool_alloc(p, g, g, &live[i], NULL), POOL_OK);
        if (i < 2500 || i % 100 == 0) check_pool(p);
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.live_blocks, N);
    shuffle(live, N, &seed);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(pool_free(p, live[i], NULL, NULL), POOL_OK);
        if (i % 100 == 0) check_pool(p);
    }
    assert_one_free_block(p, 256 * MiB);
    check_pool(p);
    free(live);
    pool_destroy(p);
}

/* ---- size-class slabs ------------------------------------------------------------------ */

/* Class table: 64-byte steps to 1 KiB, then 8 per power of two to SLAB_MAX (waste < 12.5 %);
 * class_of agrees with the table at every 64-byte size; page geometry within its bounds; the
 * reciprocal gives the exact slot index for every 64-byte offset inside a largest page. */
static void test_class_geometry(void **state)
{
    (void)state;
    slab_geom_init();
    assert_int_equal(slab_geom[0].slot, 64);
    assert_int_equal(slab_geom[15].slot, KiB);
    assert_int_equal(slab_geom[SLAB_NCLASSES - 1].slot, SLAB_MAX);
    for (unsigned c = 0; c < SLAB_NCLASSES; c++) {
        const slab_geom_t *g = &slab_geom[c];
        size_t lo = c == 0 ? 64 : slab_geom[c - 1].slot + 64; /* smallest need of c */
        assert_int_equal(g->slot % 64, 0);
        assert_true(g->slot >= lo);
        for (size_t need = lo; need <= g->slot; need += 64) /* every size, not the bounds only */
            assert_int_equal(slab_class_of(need), c);
        if (c >= 16)
            assert_true((double)g->slot < 1.125 * (double)lo + 1e-9);
        else
            assert_int_equal(g->slot, lo);
        assert_true(g->min_slots >= 1 && g->min_slots <= g->max_slots);
        assert_true(g->max_slots <= SLAB_PAGE_MAX_SLOTS);
        assert_true((size_t)g->min_slots * g->slot >= SLAB_PAGE_MIN);
        assert_true((size_t)g->max_slots * g->slot <= SLAB_PAGE_MAX);
        if ((size_t)g->slot * SLAB_PAGE_SLOTS <= SLAB_PAGE_MAX)
            assert_true(g->max_slots >= SLAB_PAGE_SLOTS);
        uint32_t units = g->slot / 64, end = g->max_slots * units;
        for (uint32_t u = 0; u < end; u++)
            if ((uint32_t)(((uint64_t)u * g->inv) >> 31) != u / units)
                fail_msg("class %u: reciprocal wrong at offset %u units", c, u);
    }
}

/* The first and the last size of every class land in a page of that class, keep their
 * sizes, and account slot - granted as overhead. */
static void test_slab_class_boundaries(void **state)
{
    (void)state;
    pool_t *p = make_pool(0xb00000000ull, 256 * MiB);
    for (unsigned c = 0; c < SLAB_NCLASSES; c++) {
        size_t slot = slab_geom[c].slot;
        size_t sizes[2] = {c == 0 ? 1 : slab_geom[c - 1].slot + 1, slot};
        uintptr_t a[2];
        for (int i = 0; i < 2; i++) {
            assert_int_equal(pool_alloc(p, sizes[i] / 2, sizes[i], &a[i], NULL), POOL_OK);
            check_pool(p);
            slab_page_t *pg = slab_page_of(&p->slab, a[i]);
            assert_non_null(pg);
            assert_int_equal(pg->cls, c);
            assert_int_equal(pg->slot, slot);
            assert_int_equal((a[i] - pg->addr) % slot, 0);
            size_t g = 0, r = 0;
            assert_int_equal(pool_block_size(p, a[i], &g, &r), POOL_OK);
            assert_int_equal(g, sizes[i]);
            assert_int_equal(r, sizes[i] / 2);
        }
        pool_stats_t st;
        pool_get_stats(p, &st);
        assert_int_equal(st.allocated_bytes, sizes[0] + sizes[1]);
        assert_int_equal(st.overhead_bytes, 2 * slot - sizes[0] - sizes[1]);
        assert_int_equal(st.buckets[pool_bucket_of(sizes[1])].live_bytes >= sizes[1], 1);
        for (int i = 0; i < 2; i++) {
            size_t g = 0, r = 0;
            assert_int_equal(pool_free(p, a[i], &g, &r), POOL_OK);
            assert_int_equal(g, sizes[i]);
            assert_int_equal(r, sizes[i] / 2);
            check_pool(p);
        }
        assert_int_equal(p->slab.pages, 0); /* nothing live: every page given back */
    }
    /* One past the last class: the large heap. */
    uintptr_t a = must_alloc(p, SLAB_MAX + 1);
    assert_null(slab_page_of(&p->slab, a));
    must_free(p, a);
    assert_one_free_block(p, 256 * MiB);
    pool_destroy(p);
}

static size_t partial_len(const slab_class_t *c)
{
    size_t n = 0;
    for (const slab_page_t *pg = c->partial; pg; pg = pg->next) n++;
    return n;
}

/* Pages grow with their class, fill up, leave and rejoin the partial list, are cached when
 * they empty (at most SLAB_CACHE_PAGES per class: beyond that the lowest one goes), reused
 * before new pages are carved, and given back. */
static void test_slab_page_recycling(void **state)
{
    (void)state;
    pool_cache_thread_enable(0); /* the slab layer itself, below the caches (caches_on) */
    enum { N = 600 };
    pool_t *p = make_pool(0xc00000000ull, 256 * MiB);
    uintptr_t keep = must_alloc(p, 8 * MiB); /* keeps the pool non-empty */
    unsigned c = slab_class_of(16 * KiB);
    const slab_geom_t *g = &slab_geom[c];
    assert_int_equal(g->min_slots, SLAB_PAGE_MIN / (16 * KiB));
    assert_true(g->max_slots > g->min_slots);
    uintptr_t a[N];
    for (int i = 0; i < N; i++) {
        a[i] = must_alloc(p, 16 * KiB);
        assert_true(partial_len(&p->slab.cls[c]) <= 1);
    }
    assert_int_equal(p->slab.cls[c].live, N);
    assert_int_equal(slab_page_of(&p->slab, a[0])->nslots, g->min_slots); /* the first page */
    assert_true(slab_page_of(&p->slab, a[N - 1])->nslots > g->min_slots); /* grown with the class */
    /* Empty pages one after another, from the top (the oldest) down: the first
     * SLAB_CACHE_PAGES are cached, then each new empty page is the lowest and goes. */
    slab_page_t *order[N];
    size_t npages = 0;
    for (int i = 0; i < N; i++) {
        slab_page_t *pg = slab_page_of(&p->slab, a[i]);
        if (npages == 0 || order[npages - 1] != pg) order[npages++] = pg;
    }
    assert_true(npages > SLAB_CACHE_PAGES + 2);
    uintptr_t cached_addr[SLAB_CACHE_PAGES];
    for (size_t k = 0; k < SLAB_CACHE_PAGES + 2; k++) {
        slab_page_t *pg = order[k];
        uintptr_t addr = pg->addr;
        uint64_t pages = p->slab.pages;
        for (int i = 0; i < N; i++)
            if (a[i] && slab_page_of(&p->slab, a[i]) == pg) {
                must_free(p, a[i]);
                a[i] = 0;
            }
        if (k < SLAB_CACHE_PAGES) {
            assert_int_equal(p->slab.pages, pages);
            assert_int_equal(p->slab.cls[c].ncached, k + 1);
            cached_addr[k] = addr;
            assert_true(k == 0 || addr < cached_addr[k - 1]);
        } else {
            assert_int_equal(p->slab.pages, pages - 1); /* the lowest (this one) is given back */
            assert_int_equal(p->slab.cls[c].ncached, SLAB_CACHE_PAGES);
            assert_null(slab_page_of(&p->slab, addr));
        }
    }
    assert_int_equal(p->slab.cached_pages, SLAB_CACHE_PAGES);
    /* Partly used pages are on the partial list and are filled before any cached one. */
    for (int i = 0; i < N; i += 7)
        if (a[i]) {
            must_free(p, a[i]);
            a[i] = 0;
        }
    assert_true(partial_len(&p->slab.cls[c]) > 1);
    for (int i = 0; i < N; i++)
        if (!a[i] && p->slab.cls[c].partial) {
            a[i] = must_alloc(p, 16 * KiB - 100);
            for (size_t k = 0; k < SLAB_CACHE_PAGES; k++)
                assert_true(slab_page_of(&p->slab, a[i])->addr != cached_addr[k]);
        }
    assert_int_equal(partial_len(&p->slab.cls[c]), 0);
    assert_int_equal(p->slab.cached_pages, SLAB_CACHE_PAGES);
    /* Then the cached pages, before any new page is carved. */
    uint64_t pages = p->slab.pages;
    size_t reused = 0;
    for (int i = 0; i < N; i++)
        if (!a[i]) {
            a[i] = must_alloc(p, 16 * KiB);
            for (size_t k = 0; k < SLAB_CACHE_PAGES; k++)
                reused += slab_page_of(&p->slab, a[i])->addr == cached_addr[k];
        }
    assert_int_equal(p->slab.cached_pages, 0);
    assert_true(reused >= SLAB_CACHE_PAGES);
    assert_int_equal(p->slab.pages, pages + 1); /* one more page for the two pages given back */
    for (int i = N; i-- > 0;) must_free(p, a[i]);
    assert_true(p->slab.cached_pages <= SLAB_CACHE_PAGES);
    assert_int_equal(p->slab.cls[c].live, 0);
    must_free(p, keep);
    assert_int_equal(p->slab.pages, 0);
    assert_int_equal(p->slab.cached_pages, 0);
    assert_one_free_block(p, 256 * MiB);
    pool_destroy(p);
}

/* Incarnations (slab.h: slab_rec_find): the memory of a released page, reused by the next page
 * of its size, is rewritten between two increments of its gen (odd while rewritten), so gen
 * rises by 2 per reuse; the checker refuses a page left odd. */
static void test_page_incarnations(void **state)
{
    (void)state;
    pool_cache_thread_enable(0); /* the slab layer itself, below the caches (caches_on) */
    pool_t *p = make_pool(0xc00000000ull, 256 * MiB);
    uintptr_t a = must_alloc(p, 16 * KiB);
    slab_page_t *pg = slab_page_of(&p->slab, a);
    assert_non_null(pg);
    assert_int_equal(pg->gen, 0); /* new memory */
    must_free(p, a);              /* the pool is empty: the page is released */
    assert_int_equal(p->slab.pages, 0);
    for (uint32_t round = 1; round <= 3; round++) {
        a = must_alloc(p, 16 * KiB);
        assert_ptr_equal(slab_page_of(&p->slab, a), pg); /* its memory again */
        assert_int_equal(pg->gen, 2 * round);
        if (round == 3) {
            char why[256];
            pg->gen++;
            assert_true(pool_check(p, why, sizeof why) > 0);
            assert_non_null(strstr(why, "incarnation"));
            pg->gen--;
        }
        must_free(p, a);
    }
    assert_one_free_block(p, 256 * MiB);
    pool_destroy(p);
}

/* Misuse inside slab pages: interior pointers, double frees, free slots never used, slots of
 * a cached page; none changes anything. */
static void test_slab_misuse(void **state)
{
    (void)state;
    pool_cache_thread_enable(0); /* the slab layer itself, below the caches (caches_on) */
    const uintptr_t base = 0xd00000000ull;
    pool_t *p = make_pool(base, 64 * MiB);
    uintptr_t keep = must_alloc(p, 2 * MiB);
    uintptr_t a = must_alloc(p, 3000), b = must_alloc(p, 3000), c = must_alloc(p, 3000);
    slab_page_t *pg = slab_page_of(&p->slab, a);
    assert_int_equal(pg->slot, 3 * KiB);
    assert_int_equal(b, a + 3 * KiB);
    assert_int_equal(c, b + 3 * KiB);
    uintptr_t x = must_alloc(p, 100 * KiB); /* its own class and page */
    must_free(p, x);                        /* ... now cached */
    assert_int_equal(p->slab.cached_pages, 1);
    must_free(p, b);
    pool_stats_t before, after;
    pool_get_stats(p, &before);
    const uintptr_t bad[] = {
        b,                             /* double free */
        a + 64,                        /* interior, 64-aligned */
        a + 1,                         /* interior, unaligned */
        a + 3 * KiB - 64,              /* last 64 bytes of a slot */
        c + 3 * KiB,                   /* a free slot never handed out */
        pg->addr + pg->span - 3 * KiB, /* the page's last slot, free */
        pg->addr + pg->span - 64,      /* inside it */
        x,                             /* a slot of the cached page (double free) */
        x + 128,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t g = 777, r = 777;
        assert_int_equal(pool_free(p, bad[i], &g, &r), POOL_ENOTLIVE);
        assert_int_equal(g, 777);
        assert_int_equal(r, 777);
        assert_int_equal(pool_block_size(p, bad[i], &g, &r), POOL_ENOTLIVE);
        check_pool(p);
        pool_get_stats(p, &after);
        assert_true(stats_equal_but_invalid(&before, &after));
        assert_int_equal(after.invalid_frees, before.invalid_frees + i + 1);
    }
    size_t g;
    assert_int_equal(pool_block_size(p, a, &g, NULL), POOL_OK);
    assert_int_equal(g, 3000);
    must_free(p, c);
    assert_int_equal(pool_free(p, c, NULL, NULL), POOL_ENOTLIVE);
    must_free(p, a); /* the page empties: cached (the 100 KiB class holds the other) */
    assert_int_equal(p->slab.cached_pages, 2);
    must_free(p, keep); /* nothing live: both pages go */
    assert_int_equal(p->slab.pages, 0);
    assert_int_equal(pool_free(p, a, NULL, NULL), POOL_ENOTLIVE); /* now a free large block */
    assert_one_free_block(p, 64 * MiB);
    pool_destroy(p);
}

/* With the large heap exhausted, a small request takes a free slot of a larger class; when
 * none is left either, ENOMEM. */
static void test_slab_larger_class_fallback(void **state)
{
    (void)state;
    pool_t *p = make_pool(0xe00000000ull, 4 * MiB);
    uintptr_t a = must_alloc(p, 1000);
    slab_page_t *pg = slab_page_of(&p->slab, a);
    assert_int_equal(pg->slot, KiB);
    const size_t n = pg->nslots - 1, span = pg->span;
    uintptr_t big = must_alloc(p, 4 * MiB - span); /* the whole large heap */
    uintptr_t *s = malloc(n * sizeof *s);
    size_t granted = 0;
    for (size_t i = 0; i < n; i++) {
        size_t want = 100 + i % 900;
        s[i] = must_alloc(p, want);
        granted += want;
        assert_ptr_equal(slab_page_of(&p->slab, s[i]), pg);
        size_t g;
        assert_int_equal(pool_block_size(p, s[i], &g, NULL), POOL_OK);
        assert_int_equal(g, want);
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.free_bytes, 0);
    assert_int_equal(st.free_blocks, 0);
    assert_int_equal(st.overhead_bytes, span - 1000 - granted);
    uintptr_t x;
    assert_int_equal(pool_alloc(p, 0, 64, &x, NULL), POOL_ENOMEM);
    check_pool(p);
    must_free(p, s[10]);
    assert_int_equal(pool_alloc(p, 0, 64, &x, NULL), POOL_OK); /* the slot just freed */
    assert_int_equal(x, s[10]);
    s[10] = x;
    check_pool(p);
    for (size_t i = 0; i < n; i++) must_free(p, s[i]);
    must_free(p, a);
    must_free(p, big);
    assert_one_free_block(p, 4 * MiB);
    free(s);
    pool_destroy(p);
}

/* Cached (empty) pages are part of the free runs of the large heap: a cached page between a
 * free block and a live page is one free run with the free block. */
static void test_free_runs_across_pages(void **state)
{
    (void)state;
    const uintptr_t base = 0xf00000000ull;
    pool_t *p = make_pool(base, 64 * MiB);
    uintptr_t keep = must_alloc(p, 2 * MiB);
    uintptr_t p1 = must_alloc(p, SLAB_MAX), p2 = must_alloc(p, SLAB_MAX); /* never cached */
    uintptr_t p3 = must_alloc(p, SLAB_MAX);
    assert_int_equal(p1, base + 64 * MiB - SLAB_MAX); /* one-slot pages stacked downwards */
    assert_int_equal(p2, p1 - SLAB_MAX);
    assert_int_equal(p3, p2 - SLAB_MAX);
    must_free(p, p2); /* cached, between live p3 and live p1 */
    walk_sum_t w = walk_sum(p);
    assert_int_equal(w.free_blocks, 2);
    assert_int_equal(w.runs, 2);
    assert_int_equal(w.largest, 64 * MiB - 2 * MiB - 3 * SLAB_MAX);
    must_free(p, p3); /* cached too: p3, p2 and the free space below are one run */
    assert_int_equal(p->slab.pages, 3);
    assert_int_equal(p->slab.cached_pages, 2);
    w = walk_sum(p);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(w.free_blocks, 1);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free_bytes, 64 * MiB - 2 * MiB - SLAB_MAX);
    assert_int_equal(st.slab_free_bytes, 0); /* cached pages are not free slots */
    assert_true(st.fragmentation == 0.0);
    /* A large request for the whole run gets it: the miss gives the cached pages back. */
    uintptr_t big = must_alloc(p, 64 * MiB - 2 * MiB - SLAB_MAX);
    assert_int_equal(p->slab.cached_pages, 0);
    must_free(p, big);
    must_free(p, p1);
    must_free(p, keep);
    assert_one_free_block(p, 64 * MiB);
    pool_destroy(p);
}

static int stop_at_second(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind);

typedef struct extent {
    uintptr_t addr;        /* first byte */
    size_t size;           /* bytes (granted for a live one) */
    enum pool_extent kind; /* what pool_walk said it is */
} extent_t;

typedef struct extents {
    extent_t e[32]; /* the first 32 extents of a walk */
    size_t n;       /* extents the walk reported (may exceed 32) */
} extents_t;

static int record_cb(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind)
{
    extents_t *x = ctx;
    if (x->n < 32) x->e[x->n] = (extent_t){addr, size, kind};
    x->n++;
    return 0;
}

static void expect_extents(pool_t *p, const extent_t *want, size_t n)
{
    extents_t got = {0};
    pool_stats_t st;
    assert_int_equal(pool_snapshot(p, &st, record_cb, &got), 0);
    for (size_t i = 0; i < n && i < got.n; i++)
        if (got.e[i].addr != want[i].addr || got.e[i].size != want[i].size ||
            got.e[i].kind != want[i].kind)
            fail_msg("extent %zu: got %#lx+%zu kind %d, want %#lx+%zu kind %d", i,
                     (unsigned long)got.e[i].addr, got.e[i].size, got.e[i].kind,
                     (unsigned long)want[i].addr, want[i].size, want[i].kind);
    assert_int_equal(got.n, n);
}

/* pool_walk's three kinds, exactly: free slots are reported per page, never merged with the
 * free run next to the page nor across the page's edge; a cached page is (part of) a free
 * run; the statistics count the same extents (free slots are fragmentation). */
static void test_walk_kinds(void **state)
{
    (void)state;
    pool_cache_thread_enable(0); /* the slab layer itself, below the caches (caches_on) */
    const uintptr_t base = 0xf80000000ull, top = base + 64 * MiB;
    const enum pool_extent L = POOL_EXTENT_LIVE, F = POOL_EXTENT_FREE, S = POOL_EXTENT_SLOTS;
    pool_t *p = make_pool(base, 64 * MiB);
    uintptr_t keep = must_alloc(p, 2 * MiB), q[8];
    for (int i = 0; i < 8; i++) q[i] = must_alloc(p, 64); /* one page: 4096 slots of 64 B */
    const uintptr_t pg = top - 256 * KiB;
    assert_int_equal(q[0], pg);
    for (int i = 0; i < 8; i += 2) must_free(p, q[i]);
    const size_t run = 64 * MiB - 2 * MiB - 256 * KiB, tail = (4096 - 8) * 64;
    const extent_t want1[] = {
        {keep, 2 * MiB, L}, {base + 2 * MiB, run, F}, {pg, 64, S},         {pg + 64, 64, L},
        {pg + 128, 64, S},  {pg + 192, 64, L},        {pg + 256, 64, S},   {pg + 320, 64, L},
        {pg + 384, 64, S},  {pg + 448, 64, L},        {pg + 512, tail, S},
    };
    expect_extents(p, want1, sizeof want1 / sizeof want1[0]);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.free_bytes, run + 4 * 64 + tail);
    assert_int_equal(st.largest_free_bytes, run); /* not run + 64: slot 0 is not merged */
    assert_int_equal(st.slab_free_bytes, 4 * 64 + tail);
    assert_int_equal(st.free_blocks, 6);
    assert_int_equal(st.buckets[0].free_blocks, 4);
    assert_int_equal(st.buckets[2].free_blocks, 1); /* the page's last 4088 slots */
    assert_int_equal(st.buckets[5].free_blocks, 1); /* the run */
    assert_true(st.fragmentation == 1.0 - (double)run / (double)(run + 4 * 64 + tail));

    /* Two 256 KiB one-slot pages below it; the upper one empties: a cached page between a
     * live page and the slots of q's page is a free run of its own. */
    uintptr_t r1 = must_alloc(p, 256 * KiB), r2 = must_alloc(p, 256 * KiB);
    assert_int_equal(r1, pg - 256 * KiB);
    assert_int_equal(r2, pg - 512 * KiB);
    must_free(p, r1);
    assert_int_equal(p->slab.cached_pages, 1);
    const extent_t want2[] = {
        {keep, 2 * MiB, L},  {base + 2 * MiB, run - 512 * KiB, F},
        {r2, 256 * KiB, L},  {r1, 256 * KiB, F},
        {pg, 64, S},         {pg + 64, 64, L},
        {pg + 128, 64, S},   {pg + 192, 64, L},
        {pg + 256, 64, S},   {pg + 320, 64, L},
        {pg + 384, 64, S},   {pg + 448, 64, L},
        {pg + 512, tail, S},
    };
    expect_extents(p, want2, sizeof want2 / sizeof want2[0]);
    must_free(p, r2); /* cached too: one run from the free block up to q's page */
    assert_int_equal(p->slab.cached_pages, 2);
    expect_extents(p, want1, sizeof want1 / sizeof want1[0]);
    pool_get_stats(p, &st);
    assert_int_equal(st.largest_free_bytes, run);
    assert_int_equal(st.slab_free_bytes, 4 * 64 + tail);
    for (int i = 1; i < 8; i += 2) must_free(p, q[i]);
    must_free(p, keep);
    assert_one_free_block(p, 64 * MiB);
    pool_destroy(p);
}

/* pool_snapshot: the statistics and the walk of one instant; either may be left out. */
static void test_snapshot(void **state)
{
    (void)state;
    pool_t *p = make_pool(0xfc0000000ull, 64 * MiB);
    uintptr_t a = must_alloc(p, 3 * MiB), b = must_alloc(p, 1000), c = must_alloc(p, 5 * MiB);
    must_free(p, a);
    pool_stats_t s1, s2;
    walk_sum_t w = {.order_ok = 1};
    assert_int_equal(pool_snapshot(p, &s1, walk_cb, &w), 0);
    pool_get_stats(p, &s2);
    assert_memory_equal(&s1, &s2, sizeof s1);
    assert_int_equal(pool_snapshot(p, &s2, NULL, NULL), 0);
    assert_memory_equal(&s1, &s2, sizeof s1);
    assert_int_equal(w.free_blocks, s1.free_blocks);
    assert_int_equal(w.free_bytes, s1.free_bytes);
    assert_int_equal(w.largest, s1.largest_free_bytes);
    assert_int_equal(w.slot_bytes, s1.slab_free_bytes);
    assert_int_equal(w.live_blocks, s1.live_blocks);
    assert_int_equal(w.live_bytes, s1.allocated_bytes);
    int calls = 0;
    assert_int_equal(pool_snapshot(p, NULL, stop_at_second, &calls), 77);
    assert_int_equal(calls, 2);
    assert_int_equal(pool_snapshot(NULL, &s2, walk_cb, &w), 0);
    assert_int_equal(s2.reserved_bytes, 0);
    must_free(p, b);
    must_free(p, c);
    pool_destroy(p);
}

static int stop_at_second(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind)
{
    (void)addr;
    (void)size;
    (void)kind;
    return ++*(int *)ctx == 2 ? 77 : 0;
}

static void test_walk_stops(void **state)
{
    (void)state;
    pool_t *p = make_pool(0x800000000ull, 64 * MiB);
    uintptr_t a = must_alloc(p, 2 * MiB), b = must_alloc(p, 3 * MiB);
    int calls = 0;
    assert_int_equal(pool_walk(p, stop_at_second, &calls), 77);
    assert_int_equal(calls, 2);
    must_free(p, a);
    must_free(p, b);
    pool_destroy(p);
}

/* ---- leveled assertions ---------------------------------------------------------------- */
#if NPUPOOL_DEBUG >= 2
typedef struct misuse {
    pool_t *p;   /* pool the child misuses */
    uintptr_t a; /* a live slot */
    int what;    /* which violation */
} misuse_t;

static void misuse(misuse_t *m)
{
    pool_t *p = m->p;
    slab_page_t *pg = slab_page_of(&p->slab, m->a);
    switch (m->what) {
    case 0: tlsf_coalesce(&p->large, &p->desc, p->large_first); break; /* a FREE block */
    case 1: slab_slot_give(&p->slab, pg, pg->nslots - 1); break;       /* a free slot */
    case 2: tlsf_remove(&p->large, pg->blk); break;                    /* a PAGE block */
    case 3: pool_explain(NULL, 64, NULL); break;                       /* contract */
    }
}

/* Run misuse number `what` in a child (stderr to /dev/null); it must die of SIGABRT. */
static void expect_abort(misuse_t *m, int what)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 2);
        m->what = what;
        misuse(m);
        _exit(0); /* the assertion did not fire */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
        fail_msg("misuse %d: child ended with status %#x, not SIGABRT", what, st);
}
#endif

/* The assertions of base/debug.h are on in the sanitizer builds (NPUPOOL_DEBUG=2): deliberate
 * precondition violations abort (in a child).  The plain build compiles them out: nothing to
 * test there (not a cmocka skip(), which TAP reports as "not ok ... # SKIP"). */
static void test_assertions_fire(void **state)
{
    (void)state;
#if NPUPOOL_DEBUG >= 2
    pool_t *p = make_pool(0x1400000000ull, 64 * MiB);
    uintptr_t big = must_alloc(p, 4 * MiB);
    must_free(p, big); /* the whole range is one FREE block */
    misuse_t m = {.p = p, .a = must_alloc(p, 1000)};
    for (int what = 0; what < 4; what++) expect_abort(&m, what);
    check_pool(p); /* the parent's pool is untouched */
    must_free(p, m.a);
    pool_destroy(p);
#endif
}

/* The page gate: a class with fewer than SLAB_PAGE_MIN_LIVE live blocks gets no page, its
 * blocks go to the large heap at their size rounded to 64 B; the block that brings the class
 * to the threshold gets a page, and freeing the large-heap ones keeps the count right. */
static void test_page_gate(void **state)
{
    (void)state;
    pool_t *p = pool_create(0x1600000000ull, 64 * MiB); /* the default gate */
    unsigned c = slab_class_of(desc_align(20000));
    uintptr_t a[SLAB_PAGE_MIN_LIVE];
    for (unsigned i = 0; i + 1 < SLAB_PAGE_MIN_LIVE; i++) {
        a[i] = must_alloc(p, 20000);
        assert_null(slab_page_of(&p->slab, a[i])); /* a large-heap block */
        assert_int_equal(p->slab.cls[c].outside, i + 1);
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.overhead_bytes, (SLAB_PAGE_MIN_LIVE - 1) * (desc_align(20000) - 20000));
    a[SLAB_PAGE_MIN_LIVE - 1] = must_alloc(p, 20000);
    slab_page_t *pg = slab_page_of(&p->slab, a[SLAB_PAGE_MIN_LIVE - 1]);
    assert_non_null(pg); /* the class has enough live blocks now */
    assert_int_equal(pg->cls, c);
    for (unsigned i = 0; i < SLAB_PAGE_MIN_LIVE; i++) must_free(p, a[i]);
    assert_int_equal(p->slab.cls[c].outside, 0);
    assert_one_free_block(p, 64 * MiB);
    pool_destroy(p);
}

/* The large heap takes the best fit among the blocks of a class list (the smallest, the
 * lowest address among equals), not the first. */
static void test_best_fit(void **state)
{
    (void)state;
    pool_t *p = make_pool(0x1700000000ull, 256 * MiB);
    uintptr_t sep[6], hole[5];
    /* holes of 8.0, 7.9, 7.8, 7.9, 7.8 MiB (one class list: within 1/32) between separators */
    const size_t sizes[5] = {8 * MiB, 8 * MiB - 100 * KiB, 8 * MiB - 200 * KiB, 8 * MiB - 100 * KiB,
                             8 * MiB - 200 * KiB};
    for (int i = 0; i < 5; i++) {
        sep[i] = must_alloc(p, 1 * MiB);
        hole[i] = must_alloc(p, sizes[i]);
    }
    sep[5] = must_alloc(p, 1 * MiB);
    for (int i = 0; i < 5; i++) must_free(p, hole[i]);
    check_pool(p);
    /* 7.7 MiB fits every hole: the smallest (7.8), the lower of the two */
    uintptr_t x = must_alloc(p, 8 * MiB - 300 * KiB);
    assert_int_equal(x, hole[2]);
    uintptr_t y = must_alloc(p, 8 * MiB - 300 * KiB);
    assert_int_equal(y, hole[4]);
    uintptr_t z = must_alloc(p, 8 * MiB - 150 * KiB); /* the 7.9 ones: the lower */
    assert_int_equal(z, hole[1]);
    must_free(p, x);
    must_free(p, y);
    must_free(p, z);
    for (int i = 0; i < 6; i++) must_free(p, sep[i]);
    assert_one_free_block(p, 256 * MiB);
    pool_destroy(p);
}

/* ---- tags (pool_alloc_tagged, pool_block_tag) ------------------------------------------------ */
/* Every kind of block keeps the tag its caller stored, through the thread cache's fast paths,
 * refills and flushes, the locked path, the 256 KiB class, the large heap and a slot whose
 * requested size escapes its record; a block that is not live has none. */
enum { TAG_N = 3000 };
typedef struct tag_blocks {
    pool_t *p;
    uintptr_t a[TAG_N];
    uint32_t t[TAG_N];
    size_t g[TAG_N]; /* granted */
} tag_blocks_t;

static void tag_fill(tag_blocks_t *b, size_t i, uint64_t *rng)
{
    static const size_t fixed[] = {64, 256 * KiB, 256 * KiB + 64, 3 * MiB, 200 * KiB};
    size_t g = i < 5 ? fixed[i] : rng_range(rng, 1, 2 * MiB) >> rng_range(rng, 0, 12);
    if (g == 0) g = 1;
    size_t req = i == 4 ? 1 : g; /* 200 KiB - 1 B does not fit a slot record: req_map */
    uint32_t *w = NULL;
    assert_int_equal(pool_alloc_tagged(b->p, req, g, &b->a[i], NULL, &w), POOL_OK);
    assert_non_null(w);
    b->t[i] = (uint32_t)splitmix_next(rng) | 1u;
    b->g[i] = g;
    *w = b->t[i];
}

static void tag_verify(tag_blocks_t *b)
{
    for (size_t i = 0; i < TAG_N; i++) {
        uint32_t t = 0;
        assert_int_equal(pool_block_tag(b->p, b->a[i], &t), POOL_OK);
        assert_int_equal(t, b->t[i]);
    }
}

static void *tag_verify_thread(void *arg)
{
    tag_verify(arg);
    return NULL;
}

typedef struct tag_told {
    int calls;
    int locked;
    uint32_t tag;
} tag_told_t;

static void tag_tell(void *ctx, uint32_t tag, int locked)
{
    tag_told_t *t = ctx;
    t->calls++;
    t->locked = locked;
    t->tag = tag;
}

static void tag_run(int caches)
{
    pool_cache_thread_enable(caches);
    uint64_t rng = 99 + (uint64_t)caches;
    tag_blocks_t *b = calloc(1, sizeof *b);
    assert_non_null(b);
    b->p = pool_create(0x100000000000ull, 4 * GiB);
    assert_non_null(b->p);
    for (size_t i = 0; i < TAG_N; i++) tag_fill(b, i, &rng);
    check_pool(b->p);
    tag_verify(b);
    pthread_t th; /* another thread reads them: no cache of its own for the pool */
    assert_int_equal(pthread_create(&th, NULL, tag_verify_thread, b), 0);
    pthread_join(th, NULL);
    for (int round = 0; round < 4; round++) { /* churn: half freed and allocated again */
        for (size_t i = round & 1; i < TAG_N; i += 2) {
            uintptr_t a = b->a[i];
            tag_told_t told = {0, 0, 0};
            if (round < 2) { /* pool_free_tagged tells the tag once, before the block goes */
                assert_int_equal(pool_free_tagged(b->p, a, NULL, tag_tell, &told), POOL_OK);
                assert_int_equal(told.calls, 1);
                assert_int_equal(told.tag, b->t[i]);
                if (told.locked == 0) /* only the lock-free fast path: a thread-cached slot */
                    assert_true(b->g[i] < SLAB_MAX);
                if (b->g[i] > SLAB_MAX) assert_int_equal(told.locked, 1); /* the large heap */
                assert_int_equal(pool_free_tagged(b->p, a, NULL, tag_tell, &told), POOL_ENOTLIVE);
                assert_int_equal(told.calls, 1); /* a refused free tells nothing */
            } else {
                assert_int_equal(pool_free(b->p, a, NULL, NULL), POOL_OK);
            }
            uint32_t t = 7;
            assert_int_equal(pool_block_tag(b->p, a, &t), POOL_ENOTLIVE);
            assert_int_equal(t, 7); /* untouched */
            tag_fill(b, i, &rng);
        }
        check_pool(b->p);
        tag_verify(b);
    }
    pool_drain_caches(b->p); /* cached slots go back to their pages; live tags stay */
    tag_verify(b);
    uint32_t t;
    assert_int_equal(pool_block_tag(b->p, b->a[1] + 64, &t), POOL_ENOTLIVE); /* interior */
    assert_int_equal(pool_block_tag(b->p, 0x100000000000ull - 64, &t), POOL_ENOTOWNED);
    assert_int_equal(pool_alloc_tagged(b->p, 64, 64, &b->a[0], NULL, NULL), POOL_EINVAL);
    for (size_t i = 0; i < TAG_N; i++)
        assert_int_equal(pool_free(b->p, b->a[i], NULL, NULL), POOL_OK);
    check_pool(b->p);
    pool_destroy(b->p);
    free(b);
}

/* pool_allocated_bytes changes only in calls that move pool_thread_mirror_writes: a watcher that
 * reads it only after those sees every change (the shim's threshold monitor relies on it). */
static void test_mirror_writes(void **state)
{
    (void)state;
    pool_t *p = pool_create(0x100000000000ull, 1 * GiB);
    assert_non_null(p);
    uintptr_t a[64], big;
    size_t seen = pool_allocated_bytes(p);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 64; i++) {
            uint64_t w = pool_thread_mirror_writes();
            assert_int_equal(pool_alloc(p, 1000, 1024, &a[i], NULL), POOL_OK);
            if (pool_thread_mirror_writes() != w) seen = pool_allocated_bytes(p);
            assert_int_equal(pool_allocated_bytes(p), seen); /* nothing changed unseen */
        }
        uint64_t w = pool_thread_mirror_writes();
        assert_int_equal(pool_alloc(p, 3 * MiB, 3 * MiB, &big, NULL), POOL_OK); /* locked */
        assert_true(pool_thread_mirror_writes() != w);
        seen = pool_allocated_bytes(p);
        for (int i = 0; i < 64; i++) {
            w = pool_thread_mirror_writes();
            assert_int_equal(pool_free(p, a[i], NULL, NULL), POOL_OK);
            if (pool_thread_mirror_writes() != w) seen = pool_allocated_bytes(p);
            assert_int_equal(pool_allocated_bytes(p), seen);
        }
        w = pool_thread_mirror_writes();
        assert_int_equal(pool_free(p, big, NULL, NULL), POOL_OK);
        assert_true(pool_thread_mirror_writes() != w);
        seen = pool_allocated_bytes(p);
        check_pool(p);
    }
    pool_drain_caches(p);
    assert_int_equal(pool_allocated_bytes(p), 0);
    pool_destroy(p);
}

static void test_tags(void **state)
{
    (void)state;
    tag_run(1);
    tag_run(0);
}

/* Teardown of the tests that turned the calling thread's caches off. */
static int caches_on(void **state)
{
    (void)state;
    pool_cache_thread_enable(1);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_edge_sizes),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_exhaustion),
        cmocka_unit_test(test_oom_puzzle),
        cmocka_unit_test(test_refusal_issue_scenario),
        cmocka_unit_test(test_refusal_kinds),
        cmocka_unit_test(test_coalesce_forward),
        cmocka_unit_test(test_coalesce_reverse),
        cmocka_unit_test(test_coalesce_random),
        cmocka_unit_test_teardown(test_small_segregation, caches_on),
        cmocka_unit_test(test_cached_page_and_tiny_pool),
        cmocka_unit_test(test_stats_consistency),
        cmocka_unit_test(test_exact_class_probe),
        cmocka_unit_test(test_exact_class_search),
        cmocka_unit_test(test_many_blocks),
        cmocka_unit_test(test_walk_stops),
        cmocka_unit_test(test_class_geometry),
        cmocka_unit_test(test_slab_class_boundaries),
        cmocka_unit_test_teardown(test_slab_page_recycling, caches_on),
        cmocka_unit_test_teardown(test_page_incarnations, caches_on),
        cmocka_unit_test_teardown(test_slab_misuse, caches_on),
        cmocka_unit_test(test_slab_larger_class_fallback),
        cmocka_unit_test(test_free_runs_across_pages),
        cmocka_unit_test(test_assertions_fire),
        cmocka_unit_test_teardown(test_walk_kinds, caches_on),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_page_gate),
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test_teardown(test_tags, caches_on),
        cmocka_unit_test(test_mirror_writes),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
