/* tests/unit/test_pool_vmm.c — the virtual-memory backing of the pool: chunks mapped into a
 * reserved range, growth, stitching, give-back, release, refusals, faults and threads.
 *
 * The backing is a simulation (sim_t) that enforces pool.h's contract and counts every breach:
 * map only at a chunk-aligned address inside the range where nothing is mapped, only a handle
 * that exists and is mapped nowhere; unmap only what is mapped; free only a handle mapped
 * nowhere.  It can refuse physical memory beyond a budget (as a runtime whose memory another
 * process took) and fail the n-th call of each kind.  After every step pool_check() must find
 * nothing and the simulation's mappings must be exactly the pool's chunk table (white box),
 * so a lost or leaked chunk is seen at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pool.h"
#include "splitmix.h"
#include "pool_internal.h" /* white box: the chunk table, the heaps */

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define BASE ((uintptr_t)0x200000000000ull)

/* ---- the simulated backing --------------------------------------------------------------- */
enum { H_NONE = 0, H_LIVE = 1, H_MAPPED = 2 };

typedef struct sim {
    pthread_mutex_t lock;   /* guards everything below (the pool calls from several threads) */
    uintptr_t base;         /* the pool's range */
    size_t size;            /* its bytes */
    size_t chunk;           /* chunk bytes */
    uint64_t *at;           /* [size/chunk] handle mapped at each chunk, UINT64_MAX = none */
    uint8_t *state;         /* [cap] H_* of each handle */
    size_t cap;             /* handles the state array holds */
    uint64_t next;          /* next handle */
    size_t budget;          /* physical bytes the device has (0 = no limit) */
    size_t held;            /* physical bytes taken and not freed */
    uint64_t fail_phys_at;  /* the n-th phys_alloc fails (0 = off); counts down */
    uint64_t fail_map_at;   /* the n-th map fails */
    uint64_t fail_unmap_at; /* the n-th unmap fails */
    uint64_t calls;         /* backing calls */
    int breaches;           /* calls that broke the contract */
    int hold_map;           /* 1: the next map waits (outside the lock) until released; atomic */
    int in_map;             /* 1 while a map waits there; atomic */
} sim_t;

static void breach(sim_t *s, const char *what, uint64_t x)
{
    s->breaches++;
    print_error("backing contract broken: %s (%#llx)\n", what, (unsigned long long)x);
}

static int countdown(uint64_t *n) { return *n && --*n == 0; }

static int sim_phys_alloc(void *ctx, size_t bytes, uint64_t *handle)
{
    sim_t *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->calls++;
    int rc = -1;
    if (bytes != s->chunk) breach(s, "phys_alloc of a size other than the chunk", bytes);
    if (!countdown(&s->fail_phys_at) && (!s->budget || s->held + bytes <= s->budget)) {
        if (s->next == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 1024;
            s->state = realloc(s->state, cap);
            assert_non_null(s->state);
            memset(s->state + s->cap, 0, cap - s->cap);
            s->cap = cap;
        }
        *handle = s->next;
        s->state[s->next++] = H_LIVE;
        s->held += bytes;
        rc = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void sim_phys_free(void *ctx, uint64_t handle)
{
    sim_t *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->calls++;
    if (handle >= s->next || s->state[handle] != H_LIVE)
        breach(s, "phys_free of a handle that is mapped or unknown", handle);
    else {
        s->state[handle] = H_NONE;
        s->held -= s->chunk;
    }
    pthread_mutex_unlock(&s->lock);
}

/* 1 when va is the start of a chunk of the range (*i its index).  pre: s->lock held. */
static int sim_chunk(const sim_t *s, uintptr_t va, size_t *i)
{
    if (va < s->base || va - s->base >= s->size || (va - s->base) % s->chunk) return 0;
    *i = (va - s->base) / s->chunk;
    return 1;
}

static int sim_map(void *ctx, uintptr_t va, size_t bytes, uint64_t handle)
{
    sim_t *s = ctx;
    if (__atomic_exchange_n(&s->hold_map, 0, __ATOMIC_ACQ_REL)) {
        __atomic_store_n(&s->in_map, 1, __ATOMIC_RELEASE);
        while (__atomic_load_n(&s->in_map, __ATOMIC_ACQUIRE)) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_lock(&s->lock);
    s->calls++;
    int rc = -1;
    size_t i = 0;
    if (bytes != s->chunk || !sim_chunk(s, va, &i))
        breach(s, "map outside the range, unaligned or not one chunk", va);
    else if (s->at[i] != UINT64_MAX)
        breach(s, "map over a mapping", va);
    else if (handle >= s->next || s->state[handle] != H_LIVE)
        breach(s, "map of a handle that is mapped or unknown", handle);
    else if (!countdown(&s->fail_map_at)) {
        s->at[i] = handle;
        s->state[handle] = H_MAPPED;
        rc = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_unmap(void *ctx, uintptr_t va)
{
    sim_t *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->calls++;
    int rc = -1;
    size_t i = 0;
    if (!sim_chunk(s, va, &i) || s->at[i] == UINT64_MAX)
        breach(s, "unmap of what is not mapped", va);
    else if (!countdown(&s->fail_unmap_at)) {
        s->state[s->at[i]] = H_LIVE;
        s->at[i] = UINT64_MAX;
        rc = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void sim_init(sim_t *s, uintptr_t base, size_t size, size_t chunk)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->base = base;
    s->size = size;
    s->chunk = chunk;
    s->at = malloc(size / chunk * sizeof *s->at);
    assert_non_null(s->at);
    for (size_t i = 0; i < size / chunk; i++) s->at[i] = UINT64_MAX;
}

static void sim_fini(sim_t *s)
{
    free(s->at);
    free(s->state);
    pthread_mutex_destroy(&s->lock);
}

static pool_backing_t sim_ops(sim_t *s)
{
    return (pool_backing_t){.ctx = s,
                            .phys_alloc = sim_phys_alloc,
                            .phys_free = sim_phys_free,
                            .map = sim_map,
                            .unmap = sim_unmap};
}

/* The pool, the checker and the simulation agree: no violation, no breach, the simulation
 * maps exactly the chunks the pool's table says, with the same handles, and holds no handle
 * mapped nowhere (a lost chunk). */
static void check_all(pool_t *p, sim_t *s)
{
    char why[256];
    int bad = pool_check(p, why, sizeof why);
    if (bad) print_error("pool_check: %d violations, first: %s\n", bad, why);
    assert_int_equal(bad, 0);
    assert_int_equal(s->breaches, 0);
    pool_lock(p);
    pthread_mutex_lock(&s->lock);
    const pool_vmm_t *v = p->vmm;
    size_t mapped = 0;
    for (size_t i = 0; i < v->nchunks; i++) {
        int on = (int)(v->mapped_bits[i >> 6] >> (i & 63) & 1);
        if (on != (s->at[i] != UINT64_MAX) || (on && v->handle[i] != s->at[i])) {
            print_error("chunk %zu: pool says %d (handle %llu), backing %llu\n", i, on,
                        (unsigned long long)v->handle[i], (unsigned long long)s->at[i]);
            fail();
        }
        mapped += (size_t)on;
    }
    if (v->in_flight == 0) assert_int_equal(s->held, mapped * s->chunk); /* nothing lost */
    pthread_mutex_unlock(&s->lock);
    pool_unlock(p);
}

static pool_t *make(sim_t *s, size_t va, size_t chunk, size_t limit, size_t grow)
{
    sim_init(s, BASE, va, chunk);
    pool_backing_t ops = sim_ops(s);
    pool_t *p = pool_create_vmm(BASE, va, chunk, limit, &ops);
    assert_non_null(p);
    check_all(p, s);
    if (grow) assert_int_equal(pool_grow(p, grow), grow);
    check_all(p, s);
    return p;
}

static void done(pool_t *p, sim_t *s)
{
    check_all(p, s);
    assert_int_equal(pool_release_backing(p), 0);
    assert_int_equal(s->held, 0); /* every chunk unmapped and freed */
    assert_int_equal(s->breaches, 0);
    pool_destroy(p);
    sim_fini(s);
}

static uintptr_t must_alloc(pool_t *p, sim_t *s, size_t g)
{
    uintptr_t a = 0;
    pool_refusal_t why;
    int rc = pool_alloc(p, g, g, &a, &why);
    if (rc != POOL_OK) {
        char t[400];
        pool_refusal_describe(&why, t, sizeof t);
        print_error("alloc %zu: %d: %s\n", g, rc, t);
    }
    assert_int_equal(rc, POOL_OK);
    check_all(p, s);
    return a;
}

static void must_free(pool_t *p, sim_t *s, uintptr_t a)
{
    assert_int_equal(pool_free(p, a, NULL, NULL), POOL_OK);
    check_all(p, s);
}

/* ---- tests ------------------------------------------------------------------------------- */
static void test_create_args(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, BASE, 64 * MiB, 2 * MiB);
    pool_backing_t ops = sim_ops(&s), bad = ops;
    bad.map = NULL;
    assert_null(pool_create_vmm(BASE, 64 * MiB, 2 * MiB, 16 * MiB, NULL));
    assert_null(pool_create_vmm(BASE, 64 * MiB, 2 * MiB, 16 * MiB, &bad));
    assert_null(pool_create_vmm(BASE, 64 * MiB, 3 * MiB, 16 * MiB, &ops));  /* not a power of 2 */
    assert_null(pool_create_vmm(BASE, 64 * MiB, 32 * KiB, 16 * MiB, &ops)); /* too small */
    assert_null(pool_create_vmm(BASE + MiB, 64 * MiB, 2 * MiB, 16 * MiB, &ops));
    assert_null(pool_create_vmm(BASE, 65 * MiB, 2 * MiB, 16 * MiB, &ops));
    assert_null(pool_create_vmm(BASE, 64 * MiB, 2 * MiB, MiB, &ops));       /* below a chunk */
    assert_null(pool_create_vmm(BASE, 64 * MiB, 2 * MiB, 128 * MiB, &ops)); /* above the range */
    pool_t *p = pool_create_vmm(BASE, 64 * MiB, 2 * MiB, 17 * MiB, &ops);   /* limit 16 MiB */
    assert_non_null(p);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.backing, POOL_BACKING_VMM);
    assert_int_equal(st.limit_bytes, 16 * MiB);
    assert_int_equal(st.va_bytes, 64 * MiB);
    assert_int_equal(st.reserved_bytes, 0); /* nothing mapped yet */
    assert_int_equal(st.free_bytes, 0);
    assert_int_equal(st.va_largest_unmapped, 64 * MiB);
    assert_int_equal(s.calls, 0); /* creation calls nothing */
    /* Nothing mapped: the first request grows the pool (within the limit). */
    check_all(p, &s);
    uintptr_t a = must_alloc(p, &s, 3 * MiB);
    assert_true(a >= BASE && a < BASE + 64 * MiB);
    pool_get_stats(p, &st);
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_int_equal(st.grows, 1);
    /* A block pool says so. */
    pool_t *b = pool_create(BASE, 64 * MiB);
    assert_int_equal(pool_grow(b, 2 * MiB), 0);
    assert_int_equal(pool_give_back(b, 2 * MiB), 0);
    assert_int_equal(pool_release_backing(b), 0);
    pool_get_stats(b, &st);
    assert_int_equal(st.backing, POOL_BACKING_BLOCK);
    assert_int_equal(st.limit_bytes, 64 * MiB);
    pool_destroy(b);
    must_free(p, &s, a);
    done(p, &s);
}

static void test_grow_to_limit(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 256 * MiB, 2 * MiB, 64 * MiB, 0);
    assert_int_equal(pool_grow(p, 40 * MiB), 40 * MiB);
    check_all(p, &s);
    assert_int_equal(pool_grow(p, 64 * MiB), 24 * MiB); /* only up to the limit */
    assert_int_equal(pool_grow(p, 2 * MiB), 0);
    check_all(p, &s);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.reserved_bytes, 64 * MiB);
    assert_int_equal(st.free_bytes, 64 * MiB);
    assert_int_equal(st.largest_free_bytes, 64 * MiB); /* adjacent growth coalesces */
    assert_int_equal(st.whole_chunk_free_bytes, 64 * MiB);
    assert_int_equal(st.chunks_mapped, 32);
    assert_int_equal(st.overhead_bytes, 0);
    /* A request above the limit can never be served. */
    uintptr_t a;
    pool_refusal_t why;
    assert_int_equal(pool_alloc(p, 0, 64 * MiB + 1, &a, &why), POOL_EINVAL);
    assert_int_equal(why.kind, POOL_REFUSAL_TOO_LARGE);
    /* The whole limit in one block. */
    a = must_alloc(p, &s, 64 * MiB);
    must_free(p, &s, a);
    done(p, &s);
}

/* The seeds' puzzle: 1 GiB blocks fill an 8 GiB pool, every other one is freed, 2 GiB asked. */
static void test_puzzle_stitched(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 32 * GiB, 2 * MiB, 8 * GiB, 8 * GiB);
    uintptr_t b[7];
    for (int i = 0; i < 7; i++) b[i] = must_alloc(p, &s, GiB + 32);
    for (int i = 1; i < 7; i += 2) must_free(p, &s, b[i]);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_true(st.largest_free_bytes < 2 * GiB);
    assert_true(st.free_bytes >= 4 * GiB - 1024);
    pool_refusal_t why;
    pool_explain(p, 2 * GiB + 32, &why);
    assert_int_equal(why.kind, POOL_REFUSAL_NONE); /* it can be stitched */
    assert_int_equal(why.stitch_bytes, 2 * GiB + 2 * MiB);
    uint64_t calls = s.calls;
    uintptr_t big = must_alloc(p, &s, 2 * GiB + 32);
    pool_get_stats(p, &st);
    assert_int_equal(st.stitches, 1);
    assert_int_equal(st.reserved_bytes, 8 * GiB); /* no fresh memory: the holes were remapped */
    assert_int_equal(st.chunks_unmapped, 1025);
    assert_int_equal(s.calls - calls, 2 * 1025); /* one unmap and one map per chunk */
    assert_true(big >= BASE + 8 * GiB);          /* a fresh part of the range */
    /* The holes gave up their whole chunks: what is left of them is pieces and whole chunks
     * the stitch did not need. */
    assert_true(st.free_bytes < 2 * GiB);
    must_free(p, &s, big);
    for (int i = 0; i < 7; i += 2) must_free(p, &s, b[i]);
    pool_get_stats(p, &st);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.free_bytes, 8 * GiB);
    done(p, &s);
}

/* Below the chunk size, fragmentation remains, and the sentence says so. */
static void test_fragmentation_below_chunk(void **state)
{
    (void)state;
    sim_t s;
    size_t chunk = 64 * MiB;
    pool_t *p = make(&s, 4 * GiB, chunk, GiB, GiB);
    /* 16 blocks of 63 MiB + 64 B then 1 MiB blocks between them: every free hole (the 63 MiB
     * ones freed) straddles a chunk edge, so no chunk is whole. */
    uintptr_t big[15], small[15];
    for (int i = 0; i < 15; i++) {
        big[i] = must_alloc(p, &s, 63 * MiB);
        small[i] = must_alloc(p, &s, MiB + 4096);
    }
    for (int i = 0; i < 15; i += 2) must_free(p, &s, big[i]);
    pool_stats_t st;
    pool_get_stats(p, &st);
    pool_refusal_t why;
    uintptr_t a;
    size_t ask = 100 * MiB;
    assert_true(st.free_bytes > ask);
    assert_int_equal(pool_alloc(p, ask, ask, &a, &why), POOL_ENOMEM);
    assert_int_equal(why.kind, POOL_REFUSAL_FRAGMENTED);
    assert_int_equal(why.backing, POOL_BACKING_VMM);
    assert_true(why.remappable_bytes < why.stitch_bytes);
    char t[400];
    pool_refusal_describe(&why, t, sizeof t);
    assert_non_null(strstr(t, "fragmentation: "));
    assert_non_null(strstr(t, "whole 64.0 MiB chunks that could be remapped"));
    assert_non_null(strstr(t, "pieces smaller than a chunk"));
    pool_refusal_t again;
    pool_explain(p, ask, &again);
    assert_int_equal(again.kind, POOL_REFUSAL_FRAGMENTED);
    check_all(p, &s);
    for (int i = 1; i < 15; i += 2) must_free(p, &s, big[i]);
    for (int i = 0; i < 15; i++) must_free(p, &s, small[i]);
    done(p, &s);
}

static void test_give_back_and_grow_back(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 1 * GiB, 2 * MiB, 256 * MiB, 256 * MiB);
    uintptr_t a = must_alloc(p, &s, 100 * MiB);
    uintptr_t small = must_alloc(p, &s, 4096);
    pool_stats_t st;
    pool_get_stats(p, &st);
    size_t whole = st.whole_chunk_free_bytes;
    assert_true(whole > 100 * MiB);
    assert_int_equal(pool_give_back(p, 30 * MiB + 1), 32 * MiB); /* rounded up to chunks */
    check_all(p, &s);
    pool_get_stats(p, &st);
    assert_int_equal(st.reserved_bytes, 224 * MiB);
    assert_int_equal(st.give_backs, 1);
    assert_int_equal(st.given_back_bytes, 32 * MiB);
    assert_int_equal(s.held, 224 * MiB);
    /* Everything that holds no live block. */
    size_t freed = pool_give_back(p, SIZE_MAX);
    check_all(p, &s);
    pool_get_stats(p, &st);
    assert_int_equal(st.whole_chunk_free_bytes, 0);
    assert_int_equal(freed + 32 * MiB + st.reserved_bytes, 256 * MiB);
    assert_true(st.reserved_bytes <= 100 * MiB + 2 * 2 * MiB + 256 * KiB);
    assert_int_equal(pool_give_back(p, 2 * MiB), 0); /* nothing left to give */
    /* The pool grows back when its own requests need it, up to the limit. */
    uintptr_t c = must_alloc(p, &s, 150 * MiB);
    pool_get_stats(p, &st);
    assert_true(st.reserved_bytes <= 256 * MiB);
    assert_true(st.grows >= 2);
    must_free(p, &s, c);
    must_free(p, &s, small);
    must_free(p, &s, a);
    c = must_alloc(p, &s, 256 * MiB); /* the whole limit again: stitched and grown back */
    must_free(p, &s, c);
    done(p, &s);
}

/* Another process took the memory the pool gave back: growth is refused, the pool stitches
 * what it has; when that is not enough the refusal says "exhausted". */
static void test_growth_refused(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 1 * GiB, 2 * MiB, 128 * MiB, 128 * MiB);
    uintptr_t a[8];
    for (int i = 0; i < 8; i++) a[i] = must_alloc(p, &s, 15 * MiB);
    for (int i = 0; i < 8; i += 2) must_free(p, &s, a[i]);
    assert_int_equal(pool_give_back(p, 8 * MiB), 8 * MiB);
    s.budget = s.held; /* the device is full: nothing more to take */
    pool_stats_t st;
    pool_get_stats(p, &st);
    /* Needs fresh memory or stitching: growth is refused, stitching serves it. */
    uintptr_t b = must_alloc(p, &s, 30 * MiB);
    pool_get_stats(p, &st);
    assert_int_equal(st.reserved_bytes, 120 * MiB);
    assert_true(st.backing_failures >= 1);
    assert_int_equal(st.stitches, 1);
    /* More than everything free and the headroom: refused as exhausted without asking the
     * runtime (even the headroom would not do). */
    uintptr_t c;
    pool_refusal_t why;
    uint64_t calls = s.calls;
    assert_int_equal(pool_alloc(p, 100 * MiB, 100 * MiB, &c, &why), POOL_ENOMEM);
    assert_int_equal(s.calls, calls);
    assert_int_equal(why.kind, POOL_REFUSAL_EXHAUSTED);
    assert_int_equal(why.headroom_bytes, 8 * MiB);
    char t[400];
    pool_refusal_describe(&why, t, sizeof t);
    assert_non_null(strstr(t, "more the pool may still map"));
    check_all(p, &s);
    /* Free + headroom would do, but the runtime refuses the growth: the refusal counts no
     * headroom then, and pool_explain (which cannot know) does. */
    size_t ask = st.free_bytes + 4 * MiB;
    assert_int_equal(pool_alloc(p, ask, ask, &c, &why), POOL_ENOMEM);
    assert_int_equal(why.headroom_bytes, 0);
    assert_int_equal(why.kind, POOL_REFUSAL_EXHAUSTED);
    pool_explain(p, ask, &why);
    assert_int_equal(why.headroom_bytes, 8 * MiB);
    check_all(p, &s);
    must_free(p, &s, b);
    for (int i = 1; i < 8; i += 2) must_free(p, &s, a[i]);
    done(p, &s);
}

/* Backing calls that fail leave a consistent pool and no lost chunk. */
static void test_backing_faults(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        for (uint64_t nth = 1; nth <= 40; nth += 13) {
            sim_t s;
            pool_t *p = make(&s, 1 * GiB, 2 * MiB, 128 * MiB, 128 * MiB);
            uintptr_t a[8];
            for (int i = 0; i < 8; i++) a[i] = must_alloc(p, &s, 15 * MiB);
            for (int i = 0; i < 8; i += 2) must_free(p, &s, a[i]);
            pool_give_back(p, 6 * MiB); /* headroom, so the next stitch also grows */
            check_all(p, &s);
            if (kind == 0) s.fail_phys_at = nth;
            if (kind == 1) s.fail_map_at = nth;
            if (kind == 2) s.fail_unmap_at = nth;
            uintptr_t b;
            pool_refusal_t why;
            int rc = pool_alloc(p, 40 * MiB, 40 * MiB, &b, &why);
            check_all(p, &s);
            if (rc == POOL_OK)
                must_free(p, &s, b);
            else
                assert_int_equal(rc, POOL_ENOMEM);
            pool_give_back(p, 10 * MiB);
            check_all(p, &s);
            s.fail_phys_at = s.fail_map_at = s.fail_unmap_at = 0;
            b = must_alloc(p, &s, 40 * MiB); /* all well again: served */
            must_free(p, &s, b);
            for (int i = 1; i < 8; i += 2) must_free(p, &s, a[i]);
            done(p, &s);
        }
    }
}

/* Small blocks: a slab page is made room for like a block; the pool starts empty. */
static void test_small_blocks_grow(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 256 * MiB, 2 * MiB, 64 * MiB, 0);
    uintptr_t v[2000];
    for (int i = 0; i < 2000; i++) v[i] = must_alloc(p, &s, 64 + (size_t)(i % 50) * 1000);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_true(st.reserved_bytes >= st.allocated_bytes);
    assert_true(st.grows > 1);
    for (int i = 0; i < 2000; i += 2) must_free(p, &s, v[i]);
    pool_give_back(p, SIZE_MAX);
    check_all(p, &s);
    for (int i = 1; i < 2000; i += 2) must_free(p, &s, v[i]);
    done(p, &s);
}

/* ---- random sequences: the classifier's guarantee ---------------------------------------- */
static size_t log_size(uint64_t *r, size_t hi)
{
    unsigned bits = (unsigned)(splitmix_next(r) % (unsigned)(63 - __builtin_clzll(hi)));
    size_t g = ((size_t)1 << bits) + (size_t)(splitmix_next(r) % ((size_t)1 << bits));
    return g > hi ? hi : g ? g : 1;
}

/* pool_explain says NONE iff pool_alloc succeeds (the block is freed again). */
static void probe(pool_t *p, sim_t *s, size_t g, uint64_t seed, long step)
{
    pool_refusal_t r, why;
    pool_explain(p, g, &r);
    uintptr_t a;
    int rc = pool_alloc(p, g, g, &a, &why);
    if ((rc == POOL_OK) != (r.kind == POOL_REFUSAL_NONE)) {
        char t[400];
        pool_refusal_describe(&r, t, sizeof t);
        print_error("seed %llu step %ld: %zu bytes: pool_alloc %d, pool_explain said %s\n",
                    (unsigned long long)seed, step, g, rc, t);
        fail();
    }
    if (rc == POOL_OK) {
        assert_int_equal(pool_free(p, a, NULL, NULL), POOL_OK);
    } else if (rc == POOL_ENOMEM) {
        pool_refusal_t now;
        pool_explain(p, g, &now);
        assert_int_equal(why.kind, now.kind);
    }
    check_all(p, s);
}

static void run_random(uint64_t seed, size_t va, size_t chunk, size_t limit, int steps)
{
    sim_t s;
    pool_t *p = make(&s, va, chunk, limit, limit / 2);
    uintptr_t live[512];
    size_t n = 0;
    uint64_t r = seed;
    for (int step = 0; step < steps; step++) {
        uint64_t op = splitmix_next(&r) % 100;
        if (op < 50 && n < 512) {
            size_t g = log_size(&r, limit / 4);
            uintptr_t a;
            pool_refusal_t why;
            pool_refusal_t before;
            pool_explain(p, g, &before);
            int rc = pool_alloc(p, g, g, &a, &why);
            assert_int_equal(rc == POOL_OK, before.kind == POOL_REFUSAL_NONE);
            if (rc == POOL_OK) live[n++] = a;
            check_all(p, &s);
        } else if (op < 90 && n) {
            size_t i = (size_t)(splitmix_next(&r) % n);
            must_free(p, &s, live[i]);
            live[i] = live[--n];
        } else if (op < 95) {
            pool_give_back(p, log_size(&r, limit / 8));
            check_all(p, &s);
        } else {
            pool_grow(p, log_size(&r, limit / 8));
            check_all(p, &s);
        }
        if (step % 7 == 0) probe(p, &s, log_size(&r, limit), seed, step);
        if (step % 11 == 0) {
            pool_stats_t st;
            pool_get_stats(p, &st);
            if (st.largest_free_bytes) probe(p, &s, st.largest_free_bytes + 64, seed, step);
        }
    }
    while (n) must_free(p, &s, live[--n]);
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.free_bytes, st.reserved_bytes);
    done(p, &s);
}

static void test_random_2m(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) run_random(seed, GiB, 2 * MiB, 256 * MiB, 1500);
}

static void test_random_64m_tight_va(void **state)
{
    (void)state;
    /* The range only twice the limit: unmapped stretches run short too. */
    for (uint64_t seed = 7; seed <= 8; seed++) run_random(seed, 2 * GiB, 64 * MiB, GiB, 1500);
}

static void test_random_small_chunks(void **state)
{
    (void)state;
    run_random(11, 64 * MiB, 64 * KiB, 16 * MiB, 2000);
}

/* ---- threads ----------------------------------------------------------------------------- */
#define NTHREADS 8
#define KEEP 32

typedef struct worker {
    pool_t *pool;         /* shared */
    uint64_t seed;        /* RNG */
    uintptr_t addr[KEEP]; /* live blocks */
    size_t n;             /* their number */
    int errors;           /* unexpected answers */
} worker_t;

static volatile int stop_taker; /* set once the workers are joined */
static uint64_t taker_rounds;   /* give-backs the taker asked for so far (atomic) */
static int taker_failed;        /* the taker found the pool inconsistent and stopped (atomic) */
#define TAKER_ROUNDS_MIN 50     /* workers keep going until the taker did this many */

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    /* A taker that failed does no more rounds: stop then, so that the test fails, not hangs. */
    for (int op = 0;
         !__atomic_load_n(&taker_failed, __ATOMIC_ACQUIRE) &&
         (op < 4000 || __atomic_load_n(&taker_rounds, __ATOMIC_ACQUIRE) < TAKER_ROUNDS_MIN);
         op++) {
        if (w->n == 0 || (w->n < KEEP && splitmix_next(&w->seed) % 100 < 55)) {
            size_t g = log_size(&w->seed, 8 * MiB);
            uintptr_t a;
            int rc = pool_alloc(w->pool, g, g, &a, NULL);
            if (rc == POOL_OK)
                w->addr[w->n++] = a;
            else if (rc != POOL_ENOMEM)
                w->errors++;
        } else {
            size_t i = (size_t)(splitmix_next(&w->seed) % w->n);
            if (pool_free(w->pool, w->addr[i], NULL, NULL) != POOL_OK) w->errors++;
            w->addr[i] = w->addr[--w->n];
        }
    }
    return NULL;
}

typedef struct taker {
    pool_t *pool;    /* shared */
    sim_t *sim;      /* the device */
    uint64_t rounds; /* give-backs asked for */
} taker_t;

/* Another user of the device: takes physical memory the pool gives back, returns it later. */
static void *taker_main(void *arg)
{
    taker_t *t = arg;
    uint64_t r = 99;
    while (!__atomic_load_n(&stop_taker, __ATOMIC_ACQUIRE)) {
        size_t want = (size_t)(splitmix_next(&r) % 16 + 1) * 2 * MiB;
        size_t got = pool_give_back(t->pool, want);
        pthread_mutex_lock(&t->sim->lock);
        t->sim->budget = t->sim->held + (splitmix_next(&r) % 2 ? 0 : got); /* sometimes keep it */
        pthread_mutex_unlock(&t->sim->lock);
        t->rounds++;
        __atomic_store_n(&taker_rounds, t->rounds, __ATOMIC_RELEASE);
        char why[128];
        if (pool_check(t->pool, why, sizeof why) != 0) {
            print_error("pool_check during the threads: %s\n", why);
            __atomic_store_n(&taker_failed, 1, __ATOMIC_RELEASE);
            return (void *)1;
        }
    }
    return NULL;
}

static void test_threads_with_give_back(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 2 * GiB, 2 * MiB, 512 * MiB, 512 * MiB);
    s.budget = 512 * MiB;
    worker_t w[NTHREADS];
    pthread_t th[NTHREADS], tt;
    taker_t t = {.pool = p, .sim = &s};
    stop_taker = 0;
    taker_rounds = 0;
    taker_failed = 0;
    assert_int_equal(pthread_create(&tt, NULL, taker_main, &t), 0);
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker_t){.pool = p, .seed = 1000 + (uint64_t)i};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    __atomic_store_n(&stop_taker, 1, __ATOMIC_RELEASE);
    void *tr;
    pthread_join(tt, &tr);
    assert_null(tr);
    assert_true(t.rounds >= TAKER_ROUNDS_MIN);
    check_all(p, &s);
    /* No lost block: every live block is still the pool's, none overlaps another. */
    size_t total = 0;
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(w[i].errors, 0);
        for (size_t k = 0; k < w[i].n; k++) {
            size_t g;
            assert_int_equal(pool_block_size(p, w[i].addr[k], &g, NULL), POOL_OK);
            total += g;
        }
    }
    pool_stats_t st;
    pool_get_stats(p, &st);
    assert_int_equal(st.allocated_bytes, total);
    for (int i = 0; i < NTHREADS; i++)
        for (size_t k = 0; k < w[i].n; k++) must_free(p, &s, w[i].addr[k]);
    s.budget = 0;
    uintptr_t a = must_alloc(p, &s, 512 * MiB); /* back to the whole limit */
    must_free(p, &s, a);
    done(p, &s);
}

typedef struct stitcher {
    pool_t *pool;   /* shared */
    uintptr_t addr; /* what it got */
    int rc;         /* pool_alloc's answer */
} stitcher_t;

static void *stitcher_main(void *arg)
{
    stitcher_t *t = arg;
    t->rc = pool_alloc(t->pool, 40 * MiB, 40 * MiB, &t->addr, NULL);
    return NULL;
}

/* fork() while a thread is inside a slow path (the lock released, a stitch half done): the
 * child's pool is consistent (its TRANSIT blocks stay in flight for good) and serves requests;
 * the parent's slow path completes. */
static void test_fork_during_slow_path(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 1 * GiB, 2 * MiB, 128 * MiB, 128 * MiB);
    uintptr_t a[8];
    for (int i = 0; i < 8; i++) a[i] = must_alloc(p, &s, 15 * MiB);
    for (int i = 0; i < 8; i += 2) must_free(p, &s, a[i]);
    stitcher_t t = {.pool = p};
    pthread_t th;
    s.hold_map = 1;
    assert_int_equal(pthread_create(&th, NULL, stitcher_main, &t), 0);
    while (!__atomic_load_n(&s.in_map, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = pool_check(p, NULL, 0);
        uintptr_t x = 0;
        int rc = pool_alloc(p, 4096, 4096, &x, NULL);
        int rc2 = rc == POOL_OK ? pool_free(p, x, NULL, NULL) : rc;
        bad += pool_check(p, NULL, 0);
        pool_vmm_t *v = p->vmm;
        _exit(bad == 0 && rc == POOL_OK && rc2 == POOL_OK && v->in_flight == 1 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    __atomic_store_n(&s.in_map, 0, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    assert_int_equal(t.rc, POOL_OK);
    check_all(p, &s);
    must_free(p, &s, t.addr);
    for (int i = 1; i < 8; i += 2) must_free(p, &s, a[i]);
    done(p, &s);
}

/* A chunk whose blocks are all in another thread's cache is free memory: pool_give_back
 * drains the caches first and gives it back; the thread then allocates again as usual. */
typedef struct cacher {
    pool_t *pool;           /* shared */
    pthread_barrier_t *bar; /* main <-> this thread */
    int errors;             /* unexpected answers */
} cacher_t;

static void *cacher_main(void *arg)
{
    cacher_t *t = arg;
    uintptr_t a[12]; /* enough for its class to get a page (SLAB_PAGE_MIN_LIVE) */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 12; i++)
            if (pool_alloc(t->pool, 16 * KiB, 16 * KiB, &a[i], NULL) != POOL_OK) t->errors++;
        for (int i = 0; i < 12; i++)
            if (pool_free(t->pool, a[i], NULL, NULL) != POOL_OK) t->errors++;
        pthread_barrier_wait(t->bar); /* its cache holds the blocks (the page is taken) */
        pthread_barrier_wait(t->bar); /* main gave the memory back meanwhile */
    }
    return NULL;
}

static void test_give_back_cached(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 256 * MiB, 2 * MiB, 64 * MiB, 4 * MiB);
    uintptr_t big = must_alloc(p, &s, 2 * MiB); /* one chunk live for good */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    cacher_t t = {.pool = p, .bar = &bar};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cacher_main, &t), 0);
    for (int round = 0; round < 2; round++) {
        pthread_barrier_wait(&bar);
        pool_stats_t st;
        pool_get_stats(p, &st);
        assert_int_equal(st.live_blocks, 1);
        assert_true(st.cached_blocks > 0); /* the page is taken: only its cache holds it */
        check_all(p, &s);
        size_t mapped = st.reserved_bytes;
        size_t got = pool_give_back(p, 64 * MiB); /* everything but big's chunk */
        assert_int_equal(got, mapped - 2 * MiB);
        pool_get_stats(p, &st);
        assert_int_equal(st.cached_blocks, 0);
        assert_int_equal(st.reserved_bytes, 2 * MiB);
        check_all(p, &s);
        pthread_barrier_wait(&bar);
    }
    pthread_join(th, NULL);
    assert_int_equal(t.errors, 0);
    pthread_barrier_destroy(&bar);
    must_free(p, &s, big);
    done(p, &s);
}

/* The checker notices a chunk table that disagrees with the blocks. */
static void test_checker_sees_chunks(void **state)
{
    (void)state;
    sim_t s;
    pool_t *p = make(&s, 256 * MiB, 2 * MiB, 64 * MiB, 64 * MiB);
    pool_vmm_t *v = p->vmm;
    v->mapped_bits[0] ^= 1; /* chunk 0 "unmapped" under a FREE block */
    assert_true(pool_check(p, NULL, 0) > 0);
    v->mapped_bits[0] ^= 1;
    v->mapped_bits[1] |= 1; /* chunk 64 "mapped" inside a VOID block */
    assert_true(pool_check(p, NULL, 0) > 0);
    v->mapped_bits[1] &= ~1ull;
    v->mapped += 2 * MiB;
    assert_true(pool_check(p, NULL, 0) > 0);
    v->mapped -= 2 * MiB;
    p->large.whole_bytes += 2 * MiB;
    assert_true(pool_check(p, NULL, 0) > 0);
    p->large.whole_bytes -= 2 * MiB;
    check_all(p, &s);
    done(p, &s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_grow_to_limit),
        cmocka_unit_test(test_puzzle_stitched),
        cmocka_unit_test(test_fragmentation_below_chunk),
        cmocka_unit_test(test_give_back_and_grow_back),
        cmocka_unit_test(test_growth_refused),
        cmocka_unit_test(test_backing_faults),
        cmocka_unit_test(test_small_blocks_grow),
        cmocka_unit_test(test_random_2m),
        cmocka_unit_test(test_random_64m_tight_va),
        cmocka_unit_test(test_random_small_chunks),
        cmocka_unit_test(test_threads_with_give_back),
        cmocka_unit_test(test_fork_during_slow_path),
        cmocka_unit_test(test_give_back_cached),
        cmocka_unit_test(test_checker_sees_chunks),
    };
    return cmocka_run_group_tests_name("pool_vmm", tests, NULL, NULL);
}
