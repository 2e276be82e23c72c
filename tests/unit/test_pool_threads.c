/* tests/unit/test_pool_threads.c — 8 threads allocate and free concurrently on one pool while
 * a 9th takes snapshots (statistics and walk under one lock hold, which must agree) and runs
 * the checker; at the end no two live blocks overlap, the counters match what the threads
 * kept, the checker finds nothing, and freeing everything leaves one free block.  Meant to run
 * under the TSan build too.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pool.h"

#define NTHREADS 8
#define OPS 20000
#define KEEP 64
#define MiB ((size_t)1 << 20)

typedef struct worker {
    pool_t *pool;         /* shared pool */
    uint64_t seed;        /* private RNG state */
    uintptr_t addr[KEEP]; /* live blocks of this thread */
    size_t granted[KEEP]; /* their granted sizes */
    size_t n;             /* live count */
    uint64_t allocs;      /* successful allocs */
    uint64_t frees;       /* successful frees */
    uint64_t enomem;      /* ENOMEM answers */
    int errors;           /* unexpected answers */
} worker_t;

static volatile int stop_reader; /* set once the workers are done (joined before reading) */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    for (int op = 0; op < OPS; op++) {
        int do_alloc = w->n == 0 || (w->n < KEEP && rng_next(&w->seed) % 100 < 55);
        if (do_alloc) {
            /* log-uniform-ish 1 B .. 4 MiB */
            unsigned bits = (unsigned)(rng_next(&w->seed) % 22);
            size_t g = ((size_t)1 << bits) + (size_t)(rng_next(&w->seed) % ((size_t)1 << bits));
            uintptr_t a;
            int rc = pool_alloc(w->pool, g / 2, g, &a, NULL);
            if (rc == POOL_OK) {
                size_t got = 0;
                if (a % POOL_ALIGN || pool_block_size(w->pool, a, &got, NULL) != POOL_OK ||
                    got != g)
                    w->errors++;
                w->addr[w->n] = a;
                w->granted[w->n] = g;
                w->n++;
                w->allocs++;
            } else if (rc == POOL_ENOMEM) {
                w->enomem++;
            } else {
                w->errors++;
            }
        } else {
            size_t i = (size_t)(rng_next(&w->seed) % w->n);
            size_t g = 0;
            if (pool_free(w->pool, w->addr[i], &g, NULL) != POOL_OK || g != w->granted[i])
                w->errors++;
            w->n--;
            w->addr[i] = w->addr[w->n];
            w->granted[i] = w->granted[w->n];
            w->frees++;
        }
    }
    return NULL;
}

typedef struct reader {
    pool_t *pool;   /* shared pool */
    int bad_checks; /* pool_check answers != 0 */
    int bad_stats;  /* inconsistent stats snapshots */
    long rounds;    /* snapshots taken */
} reader_t;

/* Tallies of one walk, to compare with the statistics of the same snapshot. */
typedef struct tally {
    uint64_t live, free_extents; /* live extents; FREE + SLOTS extents */
    size_t live_bytes, free_bytes, slot_bytes, largest;
} tally_t;

static int tally_cb(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind)
{
    tally_t *t = ctx;
    (void)addr;
    if (kind == POOL_EXTENT_LIVE) {
        t->live++;
        t->live_bytes += size;
        return 0;
    }
    t->free_extents++;
    t->free_bytes += size;
    if (kind == POOL_EXTENT_SLOTS) t->slot_bytes += size;
    if (kind == POOL_EXTENT_FREE && size > t->largest) t->largest = size;
    return 0;
}

static void *reader_main(void *arg)
{
    reader_t *r = arg;
    while (!__atomic_load_n(&stop_reader, __ATOMIC_ACQUIRE)) {
        pool_stats_t st;
        tally_t t = {0};
        pool_snapshot(r->pool, &st, r->rounds % 4 == 0 ? tally_cb : NULL, &t);
        if (st.allocated_bytes + st.free_bytes + st.overhead_bytes != st.reserved_bytes ||
            st.largest_free_bytes > st.free_bytes || st.allocs < st.frees ||
            st.slab_free_bytes > st.free_bytes)
            r->bad_stats++;
        /* one lock hold: the walk describes exactly the instant of the statistics */
        if (r->rounds % 4 == 0 &&
            (t.live != st.live_blocks || t.live_bytes != st.allocated_bytes ||
             t.free_extents != st.free_blocks || t.free_bytes != st.free_bytes ||
             t.slot_bytes != st.slab_free_bytes || t.largest != st.largest_free_bytes))
            r->bad_stats++;
        if (r->rounds % 16 == 0 && pool_check(r->pool, NULL, 0) != 0) r->bad_checks++;
        if (!pool_contains(r->pool, st.base)) r->bad_stats++;
        r->rounds++;
    }
    return NULL;
}

typedef struct span {
    uintptr_t addr; /* start */
    size_t len;     /* granted */
} span_t;

static int span_cmp(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void test_threads(void **state)
{
    (void)state;
    const size_t size = 512 * MiB;
    pool_t *p = pool_create(0x40000000ull, size);
    assert_non_null(p);
    static worker_t w[NTHREADS];
    pthread_t t[NTHREADS], rt;
    reader_t rd = {.pool = p};
    __atomic_store_n(&stop_reader, 0, __ATOMIC_RELEASE);
    assert_int_equal(pthread_create(&rt, NULL, reader_main, &rd), 0);
    for (int i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].pool = p;
        w[i].seed = 1000 + (uint64_t)i;
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    __atomic_store_n(&stop_reader, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(rt, NULL), 0);

    char why[256];
    int bad = pool_check(p, why, sizeof why);
    if (bad) print_error("pool_check: %s\n", why);
    assert_int_equal(bad, 0);
    assert_int_equal(rd.bad_checks, 0);
    assert_int_equal(rd.bad_stats, 0);

    span_t all[NTHREADS * KEEP];
    size_t n = 0, granted = 0;
    uint64_t allocs = 0, frees = 0, enomem = 0;
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(w[i].errors, 0);
        for (size_t k = 0; k < w[i].n; k++) {
            all[n++] = (span_t){w[i].addr[k], w[i].granted[k]};
            granted += w[i].granted[k];
        }
        allocs += w[i].allocs;
        frees += w[i].frees;
        enomem += w[i].enomem;
    }
    qsort(all, n, sizeof all[0], span_cmp);
    for (size_t k = 1; k < n; k++) assert_true(all[k - 1].addr + all[k - 1].len <= all[k].addr);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.live_blocks, n);
    assert_int_equal(st.allocated_bytes, granted);
    assert_int_equal(st.allocs, allocs);
    assert_int_equal(st.frees, frees);
    assert_int_equal(st.failed_allocs, enomem);
    assert_true(allocs > NTHREADS * OPS / 4);

    for (size_t k = 0; k < n; k++) assert_int_equal(pool_free(p, all[k].addr, NULL, NULL), POOL_OK);
    assert_int_equal(pool_check(p, why, sizeof why), 0);
    pool_get_stats(p, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.free_bytes, size);
    pool_destroy(p);
}

/* fork handlers' use: lock every pool, fork, unlock in both. */
static void test_lock_unlock(void **state)
{
    (void)state;
    pool_t *p = pool_create(0x80000000ull, 64 * MiB);
    pool_lock(p);
    pool_unlock(p);
    uintptr_t a;
    assert_int_equal(pool_alloc(p, 0, 4096, &a, NULL), POOL_OK);
    assert_int_equal(pool_free(p, a, NULL, NULL), POOL_OK);
    pool_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_lock_unlock),
    };
    return cmocka_run_group_tests_name("pool_threads", tests, NULL, NULL);
}
