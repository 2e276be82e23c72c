/* tests/unit/test_pool_threads.c — threads and the per-thread caches (pool_cache.c).
 *
 * test_threads: 8 threads allocate and free concurrently on one pool while a 9th takes
 * snapshots (statistics and walk of one instant: the fast paths are stopped, so they must
 * agree) and runs the checker; at the end no two live blocks overlap, the counters match what
 * the threads kept, the checker finds nothing, and freeing everything leaves one free block.
 * The caches: a block freed by another thread than the one that allocated it; two threads
 * freeing one block at once (one wins, one is refused); a double free that meets the reuse
 * of its page's memory by another class's page (refused, the other page untouched); a thread that
 * exits with blocks in its cache (they go back); pool_destroy while several live threads hold
 * blocks of the pool in their caches, then a new pool at the same address (the stale caches are
 * dropped, never touched: ASan); fork while threads hold cached blocks (the child's checker
 * holds, the child serves, drains and empties its pool); pool_drain_caches and a refusal that
 * needs the blocks other threads hold; one thread's cache stays within its bounds while far
 * more than it may hold passes through it; two threads refilling from one page take lanes
 * of their own; 64 threads handing blocks to each other; the same
 * with the fenced fallback (no membarrier).  Meant to run under the TSan build too.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "barrier.h" /* cpu_relax */
#include "pool.h"
#include "splitmix.h"
#include "pool_internal.h" /* pool_cache_fenced, the caches (white box) */

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

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    for (int op = 0; op < OPS; op++) {
        int do_alloc = w->n == 0 || (w->n < KEEP && splitmix_next(&w->seed) % 100 < 55);
        if (do_alloc) {
            /* log-uniform-ish 1 B .. 4 MiB */
            unsigned bits = (unsigned)(splitmix_next(&w->seed) % 22);
            size_t g =
                ((size_t)1 << bits) + (size_t)(splitmix_next(&w->seed) % ((size_t)1 << bits));
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
            size_t i = (size_t)(splitmix_next(&w->seed) % w->n);
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

static void check(pool_t *p)
{
    char why[256];
    int bad = pool_check(p, why, sizeof why);
    if (bad) print_error("pool_check: %s\n", why);
    assert_int_equal(bad, 0);
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

    check(p);
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
    assert_int_equal(st.cached_blocks, 0); /* the workers exited: their caches went back */
    assert_true(allocs > NTHREADS * OPS / 4);

    for (size_t k = 0; k < n; k++) assert_int_equal(pool_free(p, all[k].addr, NULL, NULL), POOL_OK);
    check(p);
    pool_get_stats(p, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.free_bytes, size);
    pool_destroy(p);
}

/* The pool holds nothing: one free block over the range, no cached block. */
static void assert_empty(pool_t *p, size_t size)
{
    pool_stats_t st;
    check(p);
    pool_get_stats(p, &st);
    assert_int_equal(st.live_blocks, 0);
    assert_int_equal(st.cached_blocks, 0);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.free_bytes, size);
}

/* ---- a parked thread: runs one step, then waits at a barrier for the next ---------------- */
typedef struct parked {
    int id;                                /* 0, 1, ... */
    pool_t *pool;                          /* the pool it works on (may change between steps) */
    pthread_barrier_t *bar;                /* shared with the main thread */
    int steps;                             /* steps to run */
    void (*step)(struct parked *t, int i); /* step i */
    uintptr_t addr[64];                    /* blocks it holds */
    size_t n;                              /* how many */
    int errors;                            /* unexpected answers */
} parked_t;

static void *parked_main(void *arg)
{
    parked_t *t = arg;
    for (int i = 0; i < t->steps; i++) {
        t->step(t, i);
        pthread_barrier_wait(t->bar); /* step i done */
        pthread_barrier_wait(t->bar); /* go on */
    }
    return NULL;
}

/* Small blocks of a few classes, allocated then freed: they end in the thread's cache. */
static void fill_cache(parked_t *t)
{
    for (size_t i = 0; i < 48; i++) {
        size_t g = 64 + (i % 6) * 1000;
        if (pool_alloc(t->pool, g, g, &t->addr[i], NULL) != POOL_OK) t->errors++;
    }
    for (size_t i = 0; i < 48; i++)
        if (pool_free(t->pool, t->addr[i], NULL, NULL) != POOL_OK) t->errors++;
    t->n = 0;
}

static void step_fill(parked_t *t, int i)
{
    (void)i;
    fill_cache(t);
}

/* Run n parked threads for `steps` steps; between steps the main thread runs between(k). */
static void run_parked(parked_t *t, int n, int steps, void (*between)(parked_t *t, int n, int k))
{
    pthread_t th[16];
    pthread_barrier_t bar;
    assert_true(n <= 16);
    assert_int_equal(pthread_barrier_init(&bar, NULL, (unsigned)n + 1), 0);
    for (int i = 0; i < n; i++) {
        t[i].id = i;
        t[i].bar = &bar;
        t[i].steps = steps;
        assert_int_equal(pthread_create(&th[i], NULL, parked_main, &t[i]), 0);
    }
    for (int k = 0; k < steps; k++) {
        pthread_barrier_wait(&bar); /* the threads are parked after step k */
        between(t, n, k);
        pthread_barrier_wait(&bar);
    }
    for (int i = 0; i < n; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(t[i].errors, 0);
    }
    pthread_barrier_destroy(&bar);
}

/* ---- a free from another thread ------------------------------------------------------------ */
static void step_alloc_or_free(parked_t *t, int i)
{
    if (i == 0 && t->id == 0) { /* thread 0 allocates */
        for (size_t k = 0; k < 64; k++) {
            size_t g = 100 + (k % 4) * 700;
            if (pool_alloc(t->pool, g, g, &t->addr[k], NULL) != POOL_OK) t->errors++;
        }
        t->n = 64;
    } else if (t->n) { /* step 1: the other thread frees them */
        for (size_t k = 0; k < t->n; k++) {
            size_t g = 0;
            if (pool_free(t->pool, t->addr[k], &g, NULL) != POOL_OK || g != 100 + (k % 4) * 700)
                t->errors++;
        }
        t->n = 0;
    }
}

static void between_handover(parked_t *t, int n, int k)
{
    (void)n;
    pool_stats_t st;
    check(t[0].pool);
    pool_get_stats(t[0].pool, &st);
    if (k == 0) { /* hand thread 0's blocks to thread 1 */
        assert_int_equal(st.live_blocks, 64);
        memcpy(t[1].addr, t[0].addr, sizeof t[0].addr);
        t[1].n = 64;
        t[0].n = 0;
    } else { /* thread 1 freed them: nothing live, its cache holds some, all free memory */
        assert_int_equal(st.live_blocks, 0);
        assert_int_equal(st.allocated_bytes, 0);
        assert_true(st.cached_blocks > 0);
        assert_int_equal(st.allocs, 64);
        assert_int_equal(st.frees, 64);
        assert_int_equal(st.free_bytes + st.overhead_bytes, st.reserved_bytes);
        pool_drain_caches(t[0].pool);
        assert_empty(t[0].pool, 64 * MiB);
    }
}

static void test_cross_thread_free(void **state)
{
    (void)state;
    pool_t *p = pool_create(0x90000000ull, 64 * MiB);
    parked_t t[2] = {{.pool = p, .step = step_alloc_or_free},
                     {.pool = p, .step = step_alloc_or_free}};
    run_parked(t, 2, 2, between_handover);
    assert_empty(p, 64 * MiB);
    pool_destroy(p);
}

/* ---- two threads free one block at once --------------------------------------------------- */
/* The main thread allocates a block, then it and a helper free it at the same moment, the main
 * thread after a delay that changes every round so that the two frees meet at every skew.  One
 * free must win and the other be refused, every round, and the pool must stay consistent.
 * (Before the lock-free free claimed the slot with a compare-and-swap, about 1 round in 1,000
 * had both accepted and pool_check failed.) */
#define RACE_ROUNDS 30000
typedef struct racer {
    pool_t *pool;
    uintptr_t addr; /* the block of the current round (written before `round`) */
    int round;      /* atomic: the round the helper may run */
    int done;       /* atomic: the last round the helper finished */
    int rc;         /* the helper's answer (read after `done`) */
} racer_t;

static void wait_for(const int *word, int want)
{
    for (unsigned n = 0; __atomic_load_n(word, __ATOMIC_ACQUIRE) != want; n++) {
        if (n < 4096)
            cpu_relax();
        else
            sched_yield(); /* two CPUs and a busy machine: let the other side run */
    }
}

static void *racer_main(void *arg)
{
    racer_t *r = arg;
    for (int k = 1; k <= RACE_ROUNDS; k++) {
        wait_for(&r->round, k);
        r->rc = pool_free(r->pool, r->addr, NULL, NULL);
        __atomic_store_n(&r->done, k, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_racing_double_free(void **state)
{
    (void)state;
    pool_t *p = pool_create(0x90000000ull, 64 * MiB);
    uintptr_t keep[64]; /* enough live blocks of the class that it gets a slab page */
    for (int i = 0; i < 64; i++) assert_int_equal(pool_alloc(p, 1000, 1024, &keep[i], NULL), 0);
    racer_t r = {.pool = p};
    pthread_t helper;
    assert_int_equal(pthread_create(&helper, NULL, racer_main, &r), 0);
    int both = 0, neither = 0;
    uint32_t lcg = 1;
    for (int k = 1; k <= RACE_ROUNDS; k++) {
        assert_int_equal(pool_alloc(p, 1000, 1024, &r.addr, NULL), 0);
        __atomic_store_n(&r.round, k, __ATOMIC_RELEASE);
        lcg = lcg * 1103515245u + 12345u;
        for (volatile unsigned d = (lcg >> 16) % 256; d; d--) {
        }
        int mine = pool_free(p, r.addr, NULL, NULL);
        wait_for(&r.done, k);
        assert_true(mine == POOL_OK || mine == POOL_ENOTLIVE);
        assert_true(r.rc == POOL_OK || r.rc == POOL_ENOTLIVE);
        both += mine == POOL_OK && r.rc == POOL_OK;
        neither += mine != POOL_OK && r.rc != POOL_OK;
        if (k % 5000 == 0) check(p);
    }
    pthread_join(helper, NULL);
    if (both || neither)
        print_error("%d rounds with both frees accepted, %d with neither\n", both, neither);
    assert_int_equal(both, 0);
    assert_int_equal(neither, 0);
    for (int i = 0; i < 64; i++) assert_int_equal(pool_free(p, keep[i], NULL, NULL), 0);
    pool_drain_caches(p);
    assert_empty(p, 64 * MiB);
    pool_destroy(p);
}

/* ---- a double free that meets the reuse of its page's memory -------------------------------- */
/* Between the lock-free free finding a slot's record and reading it (pool_free_race_hook), the
 * slot's page is released and its memory reused by a page of another class, whose slot at the
 * same record is live.  The free must not take that slot (its page is another incarnation):
 * it is refused, and the other page's block stays live. */
#define REUSE_OTHERS 15
#define REUSE_MAX 2000
static struct {
    uintptr_t others[REUSE_OTHERS]; /* the old page's other live blocks */
    slab_slot_t *rec;               /* the double-freed slot's record in the old page */
    uintptr_t fresh[REUSE_MAX];     /* blocks of the other class */
    int nfresh;
    int ran;
} reuse;

static void reuse_page(pool_t *p, uintptr_t addr)
{
    (void)addr;
    pool_free_race_hook = NULL; /* once: the frees below take the fast path too */
    reuse.ran++;
    for (int i = 0; i < REUSE_OTHERS; i++)
        assert_int_equal(pool_free(p, reuse.others[i], NULL, NULL), POOL_OK);
    pool_drain_caches(p); /* the pool is empty: every page is released */
    while (reuse.nfresh < REUSE_MAX &&
           !slab_record_live(__atomic_load_n(reuse.rec, __ATOMIC_RELAXED)))
        assert_int_equal(pool_alloc(p, 1152, 1152, &reuse.fresh[reuse.nfresh++], NULL), POOL_OK);
}

static void test_double_free_meets_reuse(void **state)
{
    (void)state;
    pool_t *p = pool_create(0x90000000ull, 64 * MiB);
    uintptr_t x; /* after the others: the class has live blocks enough for a page by then */
    for (int i = 0; i < REUSE_OTHERS; i++)
        assert_int_equal(pool_alloc(p, 1024, 1024, &reuse.others[i], NULL), POOL_OK);
    assert_int_equal(pool_alloc(p, 1024, 1024, &x, NULL), POOL_OK);
    slab_page_t *pg = slab_page_of(&p->slab, x);
    assert_non_null(pg);
    reuse.rec = slab_rec(pg, (size_t)slab_slot_index(pg, x));
    assert_int_equal(pool_free(p, x, NULL, NULL), POOL_OK);
    pool_free_race_hook = reuse_page;
    int rc = pool_free(p, x, NULL, NULL); /* the double free */
    pool_free_race_hook = NULL;
    /* the premise: the old page's memory now holds a live slot of the 1152-byte class */
    assert_int_equal(reuse.ran, 1);
    slab_slot_t now = __atomic_load_n(reuse.rec, __ATOMIC_RELAXED);
    assert_true(slab_record_live(now));
    assert_int_equal(slab_slot_granted(now), 1152);
    assert_int_equal(rc, POOL_ENOTLIVE);
    assert_int_equal(__atomic_load_n(reuse.rec, __ATOMIC_RELAXED), now); /* still live */
    check(p);
    for (int i = 0; i < reuse.nfresh; i++)
        assert_int_equal(pool_free(p, reuse.fresh[i], NULL, NULL), POOL_OK);
    pool_drain_caches(p);
    assert_empty(p, 64 * MiB);
    pool_destroy(p);
}

/* ---- thread exit with blocks in its cache ------------------------------------------------ */
static void between_cached(parked_t *t, int n, int k)
{
    (void)k;
    pool_stats_t st;
    check(t[0].pool);
    pool_get_stats(t[0].pool, &st);
    assert_int_equal(st.live_blocks, 0);
    assert_true(st.cached_blocks >= (uint64_t)n); /* each thread keeps some */
    assert_true(st.free_blocks > 1);
}

static void test_thread_exit_flushes(void **state)
{
    (void)state;
    pool_t *p = pool_create(0xa0000000ull, 64 * MiB);
    parked_t t[4];
    for (int i = 0; i < 4; i++) t[i] = (parked_t){.pool = p, .step = step_fill};
    run_parked(t, 4, 1, between_cached);
    /* joined: their key destructors gave every cached block back */
    assert_empty(p, 64 * MiB);
    pool_destroy(p);
}

/* ---- pool_destroy while other threads hold cached blocks of it ----------------------------- */
static pool_t *g_next_pool; /* the pool the threads use after the destroy */

static void step_fill_then_new(parked_t *t, int i)
{
    if (i == 1) t->pool = g_next_pool; /* the old one is gone: its cache must be dropped */
    fill_cache(t);
}

static void between_destroy(parked_t *t, int n, int k)
{
    if (k != 0) return;
    pool_destroy(t[0].pool); /* no thread is inside it; several hold cached blocks of it */
    /* the same range again: likely the same host address too (a stale cache must not match) */
    g_next_pool = pool_create(0xb0000000ull, 64 * MiB);
    assert_non_null(g_next_pool);
    (void)n;
}

static void test_destroy_with_cached(void **state)
{
    (void)state;
    pool_t *p = pool_create(0xb0000000ull, 64 * MiB);
    parked_t t[4];
    for (int i = 0; i < 4; i++) t[i] = (parked_t){.pool = p, .step = step_fill_then_new};
    run_parked(t, 4, 2, between_destroy);
    assert_empty(g_next_pool, 64 * MiB); /* the threads exited: their new caches went back */
    pool_destroy(g_next_pool);
    g_next_pool = NULL;
}

/* ---- fork while threads hold cached blocks ----------------------------------------------- */
static void between_fork(parked_t *t, int n, int k)
{
    (void)n, (void)k;
    pool_t *p = t[0].pool;
    uintptr_t mine;
    assert_int_equal(pool_alloc(p, 4000, 4000, &mine, NULL), POOL_OK);
    pool_stats_t before;
    pool_get_stats(p, &before);
    assert_true(before.cached_blocks > 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* only this thread exists here; the others' caches are orphans */
        int bad = pool_check(p, NULL, 0);
        pool_stats_t st;
        pool_get_stats(p, &st); /* the orphans went back to their pages: counted, not lost */
        bad += st.live_blocks != 1 || st.allocated_bytes != 4000 || st.allocs != before.allocs;
        uintptr_t x[32];
        for (int i = 0; i < 32; i++) bad += pool_alloc(p, 300, 300, &x[i], NULL) != POOL_OK;
        for (int i = 0; i < 32; i++) bad += pool_free(p, x[i], NULL, NULL) != POOL_OK;
        bad += pool_free(p, mine, NULL, NULL) != POOL_OK;
        pool_drain_caches(p);
        bad += pool_check(p, NULL, 0);
        pool_get_stats(p, &st);
        bad += st.free_blocks != 1 || st.live_blocks != 0 || st.cached_blocks != 0;
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    check(p); /* the parent's pool is untouched */
    assert_int_equal(pool_free(p, mine, NULL, NULL), POOL_OK);
}

static void test_fork_with_caches(void **state)
{
    (void)state;
    pool_t *p = pool_create(0xc0000000ull, 64 * MiB);
    parked_t t[3];
    for (int i = 0; i < 3; i++) t[i] = (parked_t){.pool = p, .step = step_fill};
    run_parked(t, 3, 1, between_fork);
    pool_drain_caches(p); /* this thread's own cache: it freed its block while others had one */
    assert_empty(p, 64 * MiB);
    pool_destroy(p);
}

/* ---- draining other threads' caches: on request, and before a refusal -------------------- */
static void between_drain(parked_t *t, int n, int k)
{
    (void)n;
    pool_t *p = t[0].pool;
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_true(st.cached_blocks > 0);
    if (k == 0) {
        pool_drain_caches(p); /* the threads are alive, parked, caches full */
        assert_empty(p, 8 * MiB);
        return;
    }
    /* The whole pool at once: only possible once every thread's cache gave its slots back
     * and the pages went back to the large heap.  pool_explain says so before. */
    pool_refusal_t r;
    pool_explain(p, 8 * MiB, &r);
    assert_int_equal(r.kind, POOL_REFUSAL_NONE);
    fill_cache(&t[0]); /* (this thread's own cache, refilled) */
    uintptr_t a;
    assert_int_equal(pool_alloc(p, 8 * MiB, 8 * MiB, &a, NULL), POOL_OK);
    assert_int_equal(pool_free(p, a, NULL, NULL), POOL_OK);
    check(p);
}

static void test_drain_and_refusal(void **state)
{
    (void)state;
    pool_t *p = pool_create(0xd0000000ull, 8 * MiB);
    parked_t t[3];
    for (int i = 0; i < 3; i++) t[i] = (parked_t){.pool = p, .step = step_fill};
    run_parked(t, 3, 2, between_drain);
    assert_empty(p, 8 * MiB);
    pool_destroy(p);
}

/* ---- the bounds of one thread's cache ----------------------------------------------------- */
/* One thread allocates 1,000 blocks of 32..256 KiB (every class of those sizes gets pages), then
 * frees them in a shuffled order, a sentinel block keeping the pool from emptying: far more
 * bytes than a cache may hold go through it.  After every free the checker holds and the cache
 * holds at most CACHE_BYTES_MAX; at the end it holds more than half of that (it was trimmed, not
 * emptied), and some class of slots above 128 KiB holds more than one block (CACHE_MAG_MIN:
 * with one block per class those magazines took the lock at nearly every call). */
#define BOUND_BLOCKS 1000
static void test_cache_bounds(void **state)
{
    (void)state;
    const size_t size = 1024 * MiB;
    pool_t *p = pool_create(0x100000000ull, size);
    assert_non_null(p);
    uintptr_t sentinel, a[BOUND_BLOCKS];
    assert_int_equal(pool_alloc(p, 64, 64, &sentinel, NULL), POOL_OK);
    uint64_t seed = 13;
    for (int i = 0; i < BOUND_BLOCKS; i++) {
        size_t g = (32 << 10) + (size_t)(splitmix_next(&seed) % (224u << 10));
        assert_int_equal(pool_alloc(p, g, g, &a[i], NULL), POOL_OK);
    }
    for (int i = BOUND_BLOCKS - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(splitmix_next(&seed) % (uint64_t)(i + 1));
        uintptr_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
    pool_stats_t st;
    for (int i = 0; i < BOUND_BLOCKS; i++) {
        assert_int_equal(pool_free(p, a[i], NULL, NULL), POOL_OK);
        check(p);
        pool_get_stats(p, &st);
        assert_true(st.cached_bytes <= CACHE_BYTES_MAX);
    }
    assert_true(st.cached_bytes > CACHE_BYTES_MAX / 2);
    cache_t *c = pool_cache_peek(p);
    assert_non_null(c);
    uint32_t most = 0; /* the fullest magazine of a class of slots above 128 KiB */
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++) {
        assert_true(c->mag[k].cap >= CACHE_MAG_MIN && c->mag[k].cap <= CACHE_MAG_MAX);
        assert_true(c->mag[k].n <= c->mag[k].cap);
        if (slab_geom[k].slot > (128u << 10) && c->mag[k].n > most) most = c->mag[k].n;
    }
    assert_true(most > 1);
    assert_int_equal(pool_free(p, sentinel, NULL, NULL), POOL_OK);
    assert_empty(p, size); /* the last free gave the cache back */
    pool_destroy(p);
}

/* A magazine entry names its page (flushes give the slot back through it, never looking the
 * address up): the checker must refuse an entry whose page is another one, and accept it again
 * once put right. */
static void test_checker_sees_wrong_page(void **state)
{
    (void)state;
    pool_t *p = pool_create(0x100000000ull, 64 * MiB);
    assert_non_null(p);
    enum { EACH = 16 }; /* live blocks per class: enough for pages (SLAB_PAGE_MIN_LIVE) */
    uintptr_t a[2][EACH];
    for (int i = 0; i < EACH; i++) {
        assert_int_equal(pool_alloc(p, 64, 64, &a[0][i], NULL), POOL_OK);
        assert_int_equal(pool_alloc(p, 4096, 4096, &a[1][i], NULL), POOL_OK);
    }
    uintptr_t small = a[0][EACH - 1], big = a[1][EACH - 1];
    assert_int_equal(pool_free(p, small, NULL, NULL), POOL_OK);
    assert_int_equal(pool_free(p, big, NULL, NULL), POOL_OK);
    check(p);
    cache_t *c = pool_cache_peek(p);
    assert_non_null(c);
    cache_ent_t *e_small = NULL, *e_big = NULL;
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++)
        for (uint32_t i = 0; i < c->mag[k].n; i++) {
            if (c->mag[k].ent[i].addr == small) e_small = &c->mag[k].ent[i];
            if (c->mag[k].ent[i].addr == big) e_big = &c->mag[k].ent[i];
        }
    assert_non_null(e_small);
    assert_non_null(e_big);
    assert_ptr_not_equal(e_small->pg, e_big->pg);
    slab_page_t *right = e_small->pg;
    e_small->pg = e_big->pg;
    char why[256];
    assert_true(pool_check(p, why, sizeof why) > 0);
    assert_non_null(strstr(why, "is not a cached slot of its class"));
    e_small->pg = right;
    check(p);
    for (int i = 0; i < EACH - 1; i++) {
        assert_int_equal(pool_free(p, a[0][i], NULL, NULL), POOL_OK);
        assert_int_equal(pool_free(p, a[1][i], NULL, NULL), POOL_OK);
        check(p);
    }
    assert_empty(p, 64 * MiB);
    pool_destroy(p);
}

/* ---- lanes: threads refilling from one page write lines of their own ------------------------ */
#define LANE_TURNS 6 /* turns of each thread */
#define LANE_BATCH 8 /* allocations per turn: one refill's worth (CACHE_REFILL_MAX) */
typedef struct lane_run {
    pool_t *pool;
    size_t size; /* of every block */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int turn; /* whose turn: 0 or 1 */
    uintptr_t got[2][LANE_TURNS * LANE_BATCH];
    int errors;
} lane_run_t;
typedef struct lane_arg {
    lane_run_t *run;
    int me;
} lane_arg_t;

static void *lane_main(void *arg)
{
    lane_arg_t *a = arg;
    lane_run_t *r = a->run;
    for (int t = 0; t < LANE_TURNS; t++) {
        pthread_mutex_lock(&r->mu);
        while (r->turn != a->me) pthread_cond_wait(&r->cv, &r->mu);
        for (int i = 0; i < LANE_BATCH; i++)
            if (pool_alloc(r->pool, r->size, r->size, &r->got[a->me][t * LANE_BATCH + i], NULL) !=
                POOL_OK)
                r->errors++;
        r->turn = !a->me;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

/* Two threads take turns allocating blocks of one size, one refill per turn: their slots never
 * share a lane (a record line, a tag line) while the page has lanes no slot was taken from
 * (slab.h: lanes).  Taking the lowest free slot instead mixes them from the second turn on. */
static void refill_lanes(size_t size)
{
    pool_t *p = pool_create(0x100000000ull, 64 * MiB);
    assert_non_null(p);
    uintptr_t first[SLAB_PAGE_MIN_LIVE]; /* this thread's: the class gets its page */
    for (unsigned i = 0; i < SLAB_PAGE_MIN_LIVE; i++)
        assert_int_equal(pool_alloc(p, size, size, &first[i], NULL), POOL_OK);
    lane_run_t run = {.pool = p, .size = size, .turn = 0};
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    lane_arg_t args[2] = {{&run, 0}, {&run, 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, lane_main, &args[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    assert_int_equal(run.errors, 0);
    check(p);
    const slab_page_t *page[2][LANE_TURNS * LANE_BATCH]; /* each block's page and slot */
    long slot[2][LANE_TURNS * LANE_BATCH];
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < LANE_TURNS * LANE_BATCH; i++) {
            page[w][i] = slab_page_of(&p->slab, run.got[w][i]);
            assert_non_null(page[w][i]); /* a slab slot */
            slot[w][i] = slab_slot_index(page[w][i], run.got[w][i]);
            assert_true(slot[w][i] >= 0);
        }
    for (int i = 0; i < LANE_TURNS * LANE_BATCH; i++)
        for (int j = 0; j < LANE_TURNS * LANE_BATCH; j++) {
            const slab_page_t *pa = page[0][i];
            long width = (long)slab_lane_width(pa), la = slot[0][i] / width;
            if (pa == page[1][j] && la == slot[1][j] / width)
                fail_msg("%zu B: slots %ld and %ld of the two threads share lane %ld of %ld slots",
                         size, slot[0][i], slot[1][j], la, width);
        }
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < LANE_TURNS * LANE_BATCH; i++) {
            assert_int_equal(pool_free(p, run.got[w][i], NULL, NULL), POOL_OK);
            check(p);
        }
    for (unsigned i = 0; i < SLAB_PAGE_MIN_LIVE; i++)
        assert_int_equal(pool_free(p, first[i], NULL, NULL), POOL_OK);
    assert_empty(p, 64 * MiB);
    pthread_cond_destroy(&run.cv);
    pthread_mutex_destroy(&run.mu);
    pool_destroy(p);
}

static void test_refill_lanes(void **state)
{
    (void)state;
    refill_lanes(64);        /* pages of 4,096 slots: lanes of 16 */
    refill_lanes(16 << 10);  /* pages of 16 slots: lanes of 4 */
    refill_lanes(128 << 10); /* pages of 2 slots: lanes of 1 */
}

/* ---- many threads handing blocks to each other ------------------------------------------- */
#define MANY 64
#define MANY_SLOTS 1024
typedef struct many {
    pool_t *pool;     /* shared */
    uintptr_t *slots; /* [MANY_SLOTS] shared exchange: 0 or a live block */
    uint64_t seed;    /* private RNG */
    int ops;          /* operations */
    int errors;       /* unexpected answers */
    size_t allocated; /* granted bytes this thread allocated */
    size_t freed;     /* granted bytes it freed (pool_free's answer) */
} many_t;

static void *many_main(void *arg)
{
    many_t *m = arg;
    for (int op = 0; op < m->ops; op++) {
        size_t i = (size_t)(splitmix_next(&m->seed) % MANY_SLOTS), g = 0;
        uintptr_t a = __atomic_exchange_n(&m->slots[i], 0, __ATOMIC_ACQ_REL);
        if (a) { /* someone else's block, most likely: free it */
            int rc = pool_free(m->pool, a, &g, NULL);
            if (rc != POOL_OK && m->errors++ == 0)
                print_error("pool_free(%#lx): %d\n", (unsigned long)a, rc);
            m->freed += g;
            continue;
        }
        g = (size_t)1 << (splitmix_next(&m->seed) % 16);
        g += splitmix_next(&m->seed) % g;
        int rc = pool_alloc(m->pool, g, g, &a, NULL);
        if (rc != POOL_OK) {
            if (m->errors++ == 0) print_error("pool_alloc(%zu): %d\n", g, rc);
            continue;
        }
        m->allocated += g;
        /* the slot may have been refilled meanwhile: keep that one, free this one */
        uintptr_t expect = 0;
        if (!__atomic_compare_exchange_n(&m->slots[i], &expect, a, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE)) {
            if (pool_free(m->pool, a, &g, NULL) != POOL_OK) m->errors++;
            m->freed += g;
        }
    }
    return NULL;
}

static void many_threads(int fenced)
{
    const size_t size = 1024 * MiB;
    int saved = pool_cache_fenced;
    if (fenced) pool_cache_fenced = 1; /* before the threads: both sides fence */
    pool_t *p = pool_create(0x100000000ull, size);
    static uintptr_t slots[MANY_SLOTS];
    static many_t m[MANY];
    pthread_t th[MANY];
    memset(slots, 0, sizeof slots);
#if NPUPOOL_DEBUG >= 2
    int ops = 1500; /* the sanitizer builds: 64 threads on 2 cores */
#else
    int ops = 20000;
#endif
    for (int i = 0; i < MANY; i++) {
        m[i] = (many_t){.pool = p, .slots = slots, .seed = 77 + (uint64_t)i, .ops = ops};
        assert_int_equal(pthread_create(&th[i], NULL, many_main, &m[i]), 0);
    }
    for (int r = 0; r < 20; r++) { /* checks and snapshots while they run */
        check(p);
        pool_stats_t st;
        pool_get_stats(p, &st);
        assert_int_equal(st.allocated_bytes + st.free_bytes + st.overhead_bytes, size);
        if (r == 10) pool_drain_caches(p);
    }
    size_t net = 0;
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(m[i].errors, 0);
        net += m[i].allocated - m[i].freed;
    }
    check(p);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.cached_blocks, 0);     /* every thread exited */
    assert_int_equal(st.allocated_bytes, net); /* what the threads were told, summed */
    size_t live = 0;
    for (int i = 0; i < MANY_SLOTS; i++)
        if (slots[i]) {
            live++;
            assert_int_equal(pool_free(p, slots[i], NULL, NULL), POOL_OK);
        }
    assert_int_equal(st.live_blocks, live);
    assert_empty(p, size);
    pool_destroy(p);
    pool_cache_fenced = saved;
}

static void test_many_threads(void **state)
{
    (void)state;
    many_threads(0);
}

static void test_many_threads_fenced(void **state)
{
    (void)state;
    many_threads(1);
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
        cmocka_unit_test(test_cross_thread_free),
        cmocka_unit_test(test_racing_double_free),
        cmocka_unit_test(test_double_free_meets_reuse),
        cmocka_unit_test(test_thread_exit_flushes),
        cmocka_unit_test(test_destroy_with_cached),
        cmocka_unit_test(test_fork_with_caches),
        cmocka_unit_test(test_drain_and_refusal),
        cmocka_unit_test(test_cache_bounds),
        cmocka_unit_test(test_checker_sees_wrong_page),
        cmocka_unit_test(test_refill_lanes),
        cmocka_unit_test(test_many_threads),
        cmocka_unit_test(test_many_threads_fenced),
        cmocka_unit_test(test_lock_unlock),
    };
    return cmocka_run_group_tests_name("pool_threads", tests, NULL, NULL);
}
