/* tests/unit/test_bench_peers.c — the arena peers of bench_peers (bench/peers/) against a model.
 *
 * Every arena peer (tlsf, o1heap, bestfit) is driven through seeded random alloc/free
 * sequences.  The model is the set of live [offset, offset + block bytes): every
 * block must be PEER_GRAN aligned, lie inside the range, hold at least the request, overlap no
 * live block, and report the size the model recorded.  A refusal must be honest: the peer's
 * largest free block is then too small for what its algorithm promises (bestfit: any block of
 * the rounded size; tlsf: one class above it; o1heap: the next power of two).  check() runs
 * after every operation (0 violations; its live and free counts agree with the model).
 * Freeing a non-block must fail and change nothing.  After everything is freed, the range
 * must be one FREE block again (full coalescing).  Last, the checker itself must catch a
 * corrupted tiling, so that a broken peer cannot pass by a silent check().
 * The floor (peer_floor.c, bench_peers' reference row) is no arena allocator: it gets a test of
 * its own (distinct slots, sizes kept, misuse refused, its check catching a broken stack).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pblock.h"
#include "peer.h"
#include "ptrace.h"

#define RANGE ((size_t)64 << 20)

typedef struct live {
    uintptr_t off; /* block start */
    size_t bytes;  /* block bytes (block_size) */
    size_t req;    /* requested */
} live_t;

typedef struct model {
    live_t v[4096]; /* live blocks, in no order */
    size_t n;       /* entries */
    size_t bytes;   /* sum of bytes */
} model_t;

/* Index of the live block at `off`, or m->n. */
static size_t model_find(const model_t *m, uintptr_t off)
{
    size_t i = 0;
    while (i < m->n && m->v[i].off != off) i++;
    return i;
}

static void check_peer(const peer_ops_t *o, void *p, const model_t *m, const char *what,
                       peer_stats_t *st)
{
    char why[256];
    int bad = o->check(p, st, why, sizeof why);
    if (bad) print_error("%s: %s: %d violations, first: %s\n", o->name, what, bad, why);
    assert_int_equal(bad, 0);
    assert_int_equal(st->live_blocks, m->n);
    assert_int_equal(st->free_bytes + m->bytes, RANGE);
}

/* The largest free block that a refusal of `size` bytes allows, by the peer's promise. */
static size_t refusal_limit(const peer_ops_t *o, size_t size)
{
    size_t need = pblock_round(size);
    if (o == &peer_bestfit) return need - 1;
    if (o == &peer_o1heap) {
        size_t pow2 = PEER_GRAN;
        while (pow2 < need) pow2 *= 2;
        return pow2 - 1;
    }
    /* tlsf: rounding to the next class adds less than need/32; a block at least one class
     * width above that is always in a class the search reaches. */
    return need + need / 16 + 2 * PEER_GRAN;
}

static void do_alloc(const peer_ops_t *o, void *p, model_t *m, size_t size)
{
    uintptr_t off;
    peer_stats_t st;
    if (o->alloc(p, size, &off) != 0) {
        check_peer(o, p, m, "after a refusal", &st);
        if (st.largest_free > refusal_limit(o, size))
            print_error("%s refused %zu B with a free block of %zu B\n", o->name, size,
                        st.largest_free);
        assert_true(st.largest_free <= refusal_limit(o, size));
        return;
    }
    size_t bytes = o->block_size(p, off);
    assert_true(bytes >= size);
    assert_int_equal(bytes % PEER_GRAN, 0);
    assert_int_equal(off % PEER_GRAN, 0);
    assert_true(off + bytes <= RANGE);
    for (size_t i = 0; i < m->n; i++) {
        const live_t *e = &m->v[i];
        if (off < e->off + e->bytes && e->off < off + bytes)
            print_error("%s: [%zu, +%zu) overlaps live [%zu, +%zu)\n", o->name, (size_t)off, bytes,
                        (size_t)e->off, e->bytes);
        assert_false(off < e->off + e->bytes && e->off < off + bytes);
    }
    assert_true(m->n < sizeof m->v / sizeof m->v[0]);
    m->v[m->n++] = (live_t){off, bytes, size};
    m->bytes += bytes;
}

static void do_free(const peer_ops_t *o, void *p, model_t *m, size_t i)
{
    live_t e = m->v[i];
    assert_int_equal(o->block_size(p, e.off), e.bytes);
    assert_int_equal(o->free(p, e.off), 0);
    m->v[i] = m->v[--m->n];
    m->bytes -= e.bytes;
    assert_int_equal(o->block_size(p, e.off), 0);
}

/* Offsets that are not live blocks: the peer must refuse them and stay as it was. */
static void do_bad_free(const peer_ops_t *o, void *p, const model_t *m, uint64_t *rng)
{
    uintptr_t at = ptrace_rand(rng) % RANGE;
    if (m->n && ptrace_rand(rng) % 2) at = m->v[ptrace_rand(rng) % m->n].off + PEER_GRAN;
    if (model_find(m, at) < m->n) return; /* a live block after all */
    assert_int_equal(o->free(p, at), -1);
}

static size_t random_size(uint64_t *rng)
{
    switch (ptrace_rand(rng) % 8) {
    case 0: return 1 + ptrace_rand(rng) % 200;              /* tiny: below one granule */
    case 1: return PEER_GRAN * (1 + ptrace_rand(rng) % 64); /* exact multiples */
    case 2: return ptrace_log_uniform(rng, RANGE / 64, RANGE / 3);
    default: return ptrace_log_uniform(rng, 1, RANGE / 64);
    }
}

static void run_seed(const peer_ops_t *o, uint64_t seed, int steps)
{
    static model_t m;
    memset(&m, 0, sizeof m);
    uint64_t rng = seed;
    void *p = o->create(RANGE);
    assert_non_null(p);
    peer_stats_t st;
    check_peer(o, p, &m, "fresh", &st);
    assert_int_equal(st.free_blocks, 1);
    for (int k = 0; k < steps; k++) {
        /* Phases: grow (70 % allocs), then shrink (30 %): exhaustion and coalescing both. */
        unsigned alloc_pct = (k / 500) % 2 ? 30 : 70;
        unsigned r = (unsigned)(ptrace_rand(&rng) % 100);
        if (r < 3)
            do_bad_free(o, p, &m, &rng);
        else if (m.n == 0 || r < alloc_pct)
            do_alloc(o, p, &m, random_size(&rng));
        else
            do_free(o, p, &m, ptrace_rand(&rng) % m.n);
        check_peer(o, p, &m, "after an operation", &st);
    }
    while (m.n) {
        do_free(o, p, &m, ptrace_rand(&rng) % m.n);
        if (m.n % 16 == 0) check_peer(o, p, &m, "while emptying", &st);
    }
    check_peer(o, p, &m, "emptied", &st);
    if (st.free_blocks != 1 || st.largest_free != RANGE)
        print_error("%s: emptied, %zu free blocks, largest %zu\n", o->name, st.free_blocks,
                    st.largest_free);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free, RANGE);
    /* The whole range is one block again. */
    uintptr_t off;
    assert_int_equal(o->alloc(p, RANGE, &off), 0);
    o->destroy(p);
}

static void test_random(void **state)
{
    const peer_ops_t *o = *state;
    for (uint64_t seed = 1; seed <= 6; seed++) run_seed(o, seed, 2500);
}

/* Many small blocks: the index grows long lists (and a deep tree), and every free coalesces. */
static void test_small_churn(void **state)
{
    const peer_ops_t *o = *state;
    static model_t m;
    memset(&m, 0, sizeof m);
    uint64_t rng = 99;
    void *p = o->create(RANGE);
    assert_non_null(p);
    peer_stats_t st;
    for (int k = 0; k < 20000; k++) {
        if (m.n < 3000 && (m.n == 0 || ptrace_rand(&rng) % 3))
            do_alloc(o, p, &m, 1 + ptrace_rand(&rng) % 2048);
        else
            do_free(o, p, &m, ptrace_rand(&rng) % m.n);
        if (k % 97 == 0) check_peer(o, p, &m, "churn", &st);
    }
    while (m.n) do_free(o, p, &m, m.n - 1);
    check_peer(o, p, &m, "churn emptied", &st);
    assert_int_equal(st.free_blocks, 1);
    o->destroy(p);
}

/* The checker must see a corrupted tiling: a LIVE block marked FREE behind the index's back,
 * and a FREE block's size changed without re-listing it. */
static void test_check_catches(void **state)
{
    const peer_ops_t *o = *state;
    void *p = o->create(RANGE);
    uintptr_t a, b;
    peer_stats_t st;
    assert_int_equal(o->alloc(p, 4096, &a), 0);
    assert_int_equal(o->alloc(p, 8192, &b), 0);
    assert_int_equal(o->check(p, &st, NULL, 0), 0);
    pblock_heap_t *h = p; /* every arena peer starts with its pblock_heap_t */
    uint64_t v;
    assert_true(addrmap_get(&h->live, b, &v));
    pblock_t *blk = (pblock_t *)(uintptr_t)v;
    blk->free = 1;
    char why[200];
    assert_true(o->check(p, &st, why, sizeof why) > 0);
    blk->free = 0;
    assert_int_equal(o->check(p, &st, NULL, 0), 0);
    pblock_t *top = blk->next; /* the FREE rest of the range */
    assert_non_null(top);
    assert_true(top->free);
    top->size -= PEER_GRAN;
    assert_true(o->check(p, &st, why, sizeof why) > 0);
    top->size += PEER_GRAN;
    assert_int_equal(o->check(p, &st, NULL, 0), 0);
    o->destroy(p);
}

/* The floor: random pairs against the model (slots distinct and aligned, the live count and
 * the free stack agree), misuse refused without a change, and check() catching a slot that is
 * both live and on the free stack. */
static void test_floor(void **state)
{
    (void)state;
    const peer_ops_t *o = &peer_floor;
    void *p = o->create(0);
    assert_non_null(p);
    static uintptr_t at[512];
    size_t n = 0;
    uint64_t seed = 7;
    peer_stats_t st;
    char why[256];
    for (int k = 0; k < 20000; k++) {
        if (n < 512 && (n == 0 || ptrace_rand(&seed) % 2)) {
            size_t size = 1 + (size_t)(ptrace_rand(&seed) % ((size_t)1 << 20));
            assert_int_equal(o->alloc(p, size, &at[n]), 0);
            assert_int_equal(at[n] % ((uintptr_t)1 << 20), 0);
            for (size_t j = 0; j < n; j++) assert_true(at[j] != at[n]);
            assert_int_equal(o->block_size(p, at[n]), (size_t)1 << 20);
            n++;
        } else {
            size_t j = (size_t)(ptrace_rand(&seed) % n);
            assert_int_equal(o->free(p, at[j]), 0);
            assert_int_equal(o->free(p, at[j]), -1); /* twice: refused */
            assert_int_equal(o->block_size(p, at[j]), 0);
            at[j] = at[--n];
        }
        assert_int_equal(o->check(p, &st, why, sizeof why), 0);
        assert_int_equal(st.live_blocks, n);
    }
    uintptr_t x;
    assert_int_equal(o->alloc(p, 0, &x), -1);
    assert_int_equal(o->alloc(p, ((size_t)1 << 20) + 1, &x), -1);
    assert_int_equal(o->free(p, n ? at[0] + 64 : 64), -1); /* not a block's start */
    assert_int_equal(o->free(p, (uintptr_t)1 << 50), -1);  /* beyond every slot */
    assert_int_equal(o->check(p, &st, why, sizeof why), 0);
    assert_int_equal(st.live_blocks, n);
    /* a live slot pushed on the free stack behind the peer's back */
    assert_true(n > 0);
    assert_int_equal(o->free(p, at[0]), 0);
    assert_int_equal(o->alloc(p, 100, &x), 0); /* takes the slot just freed (LIFO) */
    assert_int_equal(x, at[0]);
    floor_peer_t *f = p;
    f->stack[f->top++] = (uint32_t)(x >> 20);
    assert_true(o->check(p, &st, why, sizeof why) > 0);
    f->top--;
    assert_int_equal(o->check(p, &st, why, sizeof why), 0);
    o->destroy(p);
}

/* One test per (peer, function), named after both. */
#define PEER_TEST(peer, fn)                                 \
    {                                                       \
#peer " " #fn, fn, NULL, NULL, (void *)&peer_##peer \
    }
#define PEER_TESTS(fn) PEER_TEST(tlsf, fn), PEER_TEST(o1heap, fn), PEER_TEST(bestfit, fn)

int main(void)
{
    /* Every arena peer is covered: the list in peer.h is what bench_peers runs. */
    size_t n = 0;
    while (peer_arenas[n]) n++;
    if (n != 3) {
        fprintf(stderr, "test_bench_peers: peer_arenas has %zu peers, the tests know 3\n", n);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        PEER_TESTS(test_random),
        PEER_TESTS(test_small_churn),
        PEER_TESTS(test_check_catches),
        cmocka_unit_test(test_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
