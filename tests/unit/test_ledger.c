/* tests/unit/test_ledger.c — the live-record table, stack capture and interning, symbolization.
 *
 * Runs against the ledger archive alone (no shim, no runtime): records are made up addresses.
 * ledger_check() runs after every phase.  Stack capture is checked by symbolizing the captured
 * frames: this binary is linked without -rdynamic and the capturing functions are `static`, so the
 * names can only come from the ELF symbol table.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "ledger.h"
#include "ledger_test_util.h"

/* ---- records ----------------------------------------------------------------------------------- */

static void test_record_fields(void **state)
{
    (void)state;
    uintptr_t a = 0x7f0000001000u;
    ledger_record_alloc(a, 3, 1000, 1056, VOCAB_MALLOC_CACHED, VOCAB_FROM_FALLBACK, 0);
    ledger_record_t r;
    assert_int_equal(ledger_lookup(a, &r), 1);
    assert_int_equal(r.addr, a);
    assert_int_equal(r.device, 3);
    assert_int_equal(r.requested, 1000);
    assert_int_equal(r.granted, 1056);
    assert_int_equal(r.entry, VOCAB_MALLOC_CACHED);
    assert_int_equal(r.origin, VOCAB_FROM_FALLBACK);
    assert_int_equal(r.tid, (uint32_t)syscall(SYS_gettid));
    assert_true(r.time_ns > 0 && r.time_ns <= clock_coarse_ns());
    uint64_t seq1 = r.seq;
    ledger_record_alloc(a + 4096, 0, (size_t)5 << 30, (size_t)5 << 30, VOCAB_MAP_MEM,
                        VOCAB_FROM_PASSTHROUGH, 0);
    assert_int_equal(ledger_lookup(a + 4096, &r), 1);
    assert_true(r.seq > seq1);
    assert_int_equal(r.requested, (size_t)5 << 30);
    assert_int_equal(ledger_live_total(), 2);
    assert_int_equal(ledger_live_count(3), 1);
    assert_int_equal(ledger_live_count(1), 0);
    check_ledger();
    assert_int_equal(ledger_record_free(a), 1);
    assert_int_equal(ledger_record_free(a), 0);      /* double free: unknown now */
    assert_int_equal(ledger_record_free(a + 64), 0); /* never recorded */
    assert_int_equal(ledger_lookup(a, NULL), 0);
    assert_int_equal(ledger_live_total(), 1);
    check_ledger();
}

/* Sequence numbers come in per-thread blocks; a mark (ledger_last_seq) still puts every later
 * allocation above it, in the thread that took the mark and in a thread that held a block
 * from before it; and numbers rise along a thread. */
static int mark_phase; /* 0: record one, 1: wait for the mark, 2: record after it */
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mark_cond = PTHREAD_COND_INITIALIZER;

static void mark_wait(int phase)
{
    pthread_mutex_lock(&mark_lock);
    while (mark_phase < phase) pthread_cond_wait(&mark_cond, &mark_lock);
    pthread_mutex_unlock(&mark_lock);
}
static void mark_set(int phase)
{
    pthread_mutex_lock(&mark_lock);
    mark_phase = phase;
    pthread_cond_broadcast(&mark_cond);
    pthread_mutex_unlock(&mark_lock);
}
static void *mark_other(void *arg)
{
    (void)arg;
    ledger_record_alloc(0x9000, 0, 1, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0); /* takes a block */
    mark_set(1);
    mark_wait(2);
    ledger_record_alloc(0x9040, 0, 1, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0); /* after the mark */
    return NULL;
}

static void test_seq_marks(void **state)
{
    (void)state;
    mark_phase = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, mark_other, NULL), 0);
    mark_wait(1);
    uint64_t last = 0;
    for (int i = 0; i < 200; i++) { /* across several of this thread's blocks */
        ledger_record_alloc(0xa000 + (uintptr_t)i * 64, 0, 1, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
        ledger_record_t r;
        assert_int_equal(ledger_lookup(0xa000 + (uintptr_t)i * 64, &r), 1);
        assert_true(r.seq > last);
        last = r.seq;
    }
    uint64_t mark = ledger_last_seq();
    assert_true(mark >= last);
    ledger_record_alloc(0xf000, 0, 1, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    mark_set(2);
    pthread_join(th, NULL);
    ledger_record_t r;
    assert_int_equal(ledger_lookup(0xf000, &r), 1);
    assert_true(r.seq > mark);
    assert_int_equal(ledger_lookup(0x9040, &r), 1);
    assert_true(r.seq > mark);
    assert_int_equal(ledger_lookup(0x9000, &r), 1);
    assert_true(r.seq <= mark);
    assert_int_equal(ledger_live_count_since(mark), 2);
    check_ledger();
}

static void test_reused_address_replaces(void **state)
{
    (void)state;
    ledger_record_alloc(0x1000, 0, 100, 160, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    ledger_record_alloc(0x1000, 1, 200, 288, VOCAB_MALLOC_ALIGN32, VOCAB_FROM_POOL, 0);
    ledger_record_t r;
    assert_int_equal(ledger_lookup(0x1000, &r), 1);
    assert_int_equal(r.device, 1);
    assert_int_equal(r.requested, 200);
    assert_int_equal(ledger_live_total(), 1);
    check_ledger();
}

/* Random alloc/free against a reference model; the table grows, shrinks clusters, and every
 * record stays reachable. */
static void test_random_against_model(void **state)
{
    (void)state;
    enum { N = 60000, OPS = 400000 };
    uintptr_t *live = calloc(N, sizeof *live);
    int *dev = calloc(N, sizeof *dev);
    assert_non_null(live);
    size_t nlive = 0, per_dev[4] = {0};
    uint64_t rng = 12345;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t x = (uint32_t)(rng >> 33);
        if (nlive < N && (x % 100 < 55 || nlive == 0)) {
            uintptr_t a = ((uintptr_t)(rng >> 20) & ~(uintptr_t)63) | ((uintptr_t)1 << 44);
            if (ledger_lookup(a, NULL)) continue;
            int d = (int)(x % 4);
            ledger_record_alloc(a, d, 64, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
            live[nlive] = a;
            dev[nlive++] = d;
            per_dev[d]++;
        } else {
            size_t i = x % nlive;
            assert_int_equal(ledger_record_free(live[i]), 1);
            per_dev[dev[i]]--;
            live[i] = live[nlive - 1];
            dev[i] = dev[--nlive];
        }
        if (op % 100000 == 0) check_ledger();
    }
    assert_int_equal(ledger_live_total(), nlive);
    for (int d = 0; d < 4; d++) assert_int_equal(ledger_live_count(d), per_dev[d]);
    for (size_t i = 0; i < nlive; i++) assert_int_equal(ledger_lookup(live[i], NULL), 1);
    check_ledger();
    ledger_drop_device(2);
    assert_int_equal(ledger_live_count(2), 0);
    assert_int_equal(ledger_live_total(), nlive - per_dev[2]);
    for (size_t i = 0; i < nlive; i++) assert_int_equal(ledger_lookup(live[i], NULL), dev[i] != 2);
    check_ledger();
    free(live);
    free(dev);
}

static void test_collect_sites(void **state)
{
    (void)state;
    uintptr_t f1[] = {0x401000, 0x402000}, f2[] = {0x401010, 0x402000};
    uint32_t s1 = ledger_stack_intern(f1, 2), s2 = ledger_stack_intern(f2, 2);
    assert_int_not_equal(s1, s2);
    for (int i = 0; i < 10; i++)
        ledger_record_alloc(0x100000 + (uintptr_t)i * 4096, 0, 100 + (size_t)i, 256, VOCAB_MALLOC,
                            i < 7 ? VOCAB_FROM_POOL : VOCAB_FROM_FALLBACK, s1);
    for (int i = 0; i < 3; i++)
        ledger_record_alloc(0x900000 + (uintptr_t)i * 4096, 1, 1000, 1056, VOCAB_MALLOC_ALIGN32,
                            VOCAB_FROM_POOL, s1);
    ledger_record_alloc(0xA00000, 0, 5, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, s2);
    ledger_record_free(0x100000); /* the oldest of s1/dev0 goes away */
    ledger_site_t *sites;
    size_t n = ledger_collect_sites(&sites, 0);
    assert_int_equal(n, 3);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        ledger_site_t *s = &sites[i];
        if (s->device == 0 && s->stack_id == s1) {
            assert_int_equal(s->count, 9);
            assert_int_equal(s->requested_bytes,
                             101 + 102 + 103 + 104 + 105 + 106 + 107 + 108 + 109);
            assert_int_equal(s->granted_bytes, 9 * 256);
            assert_int_equal(s->by_origin[VOCAB_FROM_POOL], 6);
            assert_int_equal(s->by_origin[VOCAB_FROM_FALLBACK], 3);
            ledger_record_t r;
            assert_int_equal(ledger_lookup(0x101000, &r), 1);
            assert_int_equal(s->oldest_seq, r.seq);
            seen |= 1;
        } else if (s->device == 1 && s->stack_id == s1) {
            assert_int_equal(s->count, 3);
            assert_int_equal(s->entry, VOCAB_MALLOC_ALIGN32);
            seen |= 2;
        } else if (s->device == 0 && s->stack_id == s2) {
            assert_int_equal(s->count, 1);
            assert_int_equal(s->requested_bytes, 5);
            seen |= 4;
        }
    }
    assert_int_equal(seen, 7);
    free(sites);
    check_ledger();
}

/* ---- stacks ------------------------------------------------------------------------------------ */

static void test_intern(void **state)
{
    (void)state;
    uintptr_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    uint32_t ia = ledger_stack_intern(a, 4);
    assert_int_not_equal(ia, 0);
    assert_int_equal(ledger_stack_intern(a, 4), ia);
    assert_int_not_equal(ledger_stack_intern(b, 4), ia);
    assert_int_not_equal(ledger_stack_intern(a, 3), ia); /* a prefix is another stack */
    assert_int_equal(ledger_stack_intern(a, 0), 0);
    const uintptr_t *fr;
    assert_int_equal(ledger_stack_frames(ia, &fr), 4);
    assert_memory_equal(fr, a, sizeof a);
    assert_int_equal(ledger_stack_frames(0, &fr), 0);
    assert_int_equal(ledger_stack_frames(0x7fffffff, &fr), 0);
    /* Many distinct stacks: the table grows, every id stays found, memory grows per stack only. */
    ledger_memory_t m0, m1;
    ledger_memory(&m0);
    uint32_t first = 0;
    for (uintptr_t i = 0; i < 50000; i++) {
        uintptr_t f[8] = {0x1000 + i, 0x2000, 0x3000, i * 7, 5, 6, 7, 8};
        uint32_t id = ledger_stack_intern(f, 8);
        assert_int_not_equal(id, 0);
        if (i == 0) first = id;
    }
    for (uintptr_t i = 0; i < 50000; i += 997) {
        uintptr_t f[8] = {0x1000 + i, 0x2000, 0x3000, i * 7, 5, 6, 7, 8};
        assert_int_equal(ledger_stack_intern(f, 8), first + i);
    }
    ledger_memory(&m1);
    assert_true(m1.stacks >= m0.stacks + 50000);
    double per_stack = (double)(m1.stack_bytes - m0.stack_bytes) / 50000.0;
    print_message("# interned stack of 8 frames: %.1f host bytes each\n", per_stack);
    assert_true(per_stack < 16 + 8 * 8 + 40);
    /* Interning the same stacks again costs nothing. */
    for (uintptr_t i = 0; i < 50000; i++) {
        uintptr_t f[8] = {0x1000 + i, 0x2000, 0x3000, i * 7, 5, 6, 7, 8};
        ledger_stack_intern(f, 8);
    }
    ledger_memory_t m2;
    ledger_memory(&m2);
    assert_int_equal(m2.stack_bytes, m1.stack_bytes);
    assert_int_equal(m2.stacks, m1.stacks);
    check_ledger();
}

/* A capture from `levels` recursive calls deep: each level is another stack. */
__attribute__((noipa)) static uint32_t capture_at(int levels)
{
    uint32_t id = levels > 0 ? capture_at(levels - 1) : ledger_stack_capture(0);
    __asm__ volatile("" ::: "memory"); /* keep the call from being a tail call */
    return id;
}

/* Every site's capture twice in a row (the second a memo hit), from one call site each. */
__attribute__((noipa)) static void capture_sites(uint32_t ids[][2], int sites)
{
    volatile int reps = 2; /* loops the compiler cannot unroll: one call site */
    for (int k = 0; k < sites; k++)
        for (int rep = 0; rep < reps; rep++) ids[k][rep] = capture_at(k);
}

/* The thread's memo of its last stacks (ledger_stack.c) answers as interning does: six call
 * stacks (more than the memo holds) captured in turn get their first capture's id every time
 * and six different ids; a smaller depth gives the prefix its own id, not a memo entry's, and
 * the full depth then finds the first ids again. */
static void test_capture_memo(void **state)
{
    (void)state;
    enum { SITES = 6 };
    static const int depth_of_phase[3] = {16, 2, 16};
    volatile int phases = 3, rounds = 5; /* one call site of capture_sites for every capture */
    uint32_t first[SITES] = {0}, prefix = 0;
    for (int phase = 0; phase < phases; phase++) {
        ledger_init(&(ledger_config_t){.backtrace_depth = depth_of_phase[phase]});
        for (int round = 0; round < rounds; round++) {
            uint32_t ids[SITES][2];
            capture_sites(ids, SITES);
            for (int k = 0; k < SITES; k++) {
                assert_int_not_equal(ids[k][0], 0);
                assert_int_equal(ids[k][1], ids[k][0]);
                if (phase == 0 && round == 0) first[k] = ids[k][0];
                if (phase == 1) {
                    assert_int_not_equal(ids[k][0], first[k]);
                    if (k == 3) prefix = ids[k][0];
                } else {
                    assert_int_equal(ids[k][0], first[k]);
                }
            }
        }
    }
    for (int k = 0; k < SITES; k++)
        for (int j = 0; j < k; j++) assert_int_not_equal(first[k], first[j]);
    const uintptr_t *deep, *shallow;
    assert_true(ledger_stack_frames(first[3], &deep) > 3);
    assert_int_equal(ledger_stack_frames(prefix, &shallow), 2);
    assert_memory_equal(shallow, deep, 2 * sizeof deep[0]);
    check_ledger();
}

/* ---- memory per live allocation ---------------------------------------------------------------- */

static void test_memory_per_allocation(void **state)
{
    (void)state;
    ledger_clear();
    enum { N = 400000 };
    uintptr_t f[4] = {10, 20, 30, 40};
    uint32_t sid = ledger_stack_intern(f, 4);
    for (size_t i = 0; i < N; i++)
        ledger_record_alloc(((uintptr_t)1 << 40) + i * 512, (int)(i & 1), 300, 352, VOCAB_MALLOC,
                            VOCAB_FROM_POOL, sid);
    ledger_memory_t m;
    ledger_memory(&m);
    assert_int_equal(m.live_records, N);
    double per = (double)m.record_bytes / N;
    print_message("# ledger host memory: %.1f bytes per live allocation at %d live (limit 64)\n",
                  per, N);
    assert_true(per <= 64.0);
    /* Steady churn does not grow it, but for a record chunk here and there: the new addresses
     * spread over the shards a little differently, and a shard whose live count passes its
     * earlier most carves one more chunk (12 KiB). */
    for (size_t i = 0; i < N; i += 2) ledger_record_free(((uintptr_t)1 << 40) + i * 512);
    for (size_t i = 0; i < N; i += 2)
        ledger_record_alloc(((uintptr_t)1 << 41) + i * 512, 0, 300, 352, VOCAB_MALLOC,
                            VOCAB_FROM_POOL, sid);
    ledger_memory_t m2;
    ledger_memory(&m2);
    assert_int_equal(m2.live_records, N);
    print_message("# after churn: %zu bytes (before %zu)\n", m2.record_bytes, m.record_bytes);
    assert_true(m2.record_bytes <= m.record_bytes + m.record_bytes / 100);
    check_ledger();
    ledger_clear();
}

/* ---- threads and fork -------------------------------------------------------------------------- */

__attribute__((noipa)) static uint32_t capture_via(int which)
{
    uint32_t id = ledger_stack_capture(which); /* two call stacks: skip 0 or 1 frames */
    __asm__ volatile("" ::: "memory");         /* keep the call from being a tail call */
    return id;
}

typedef struct worker {
    int id;         /* worker number */
    int iterations; /* alloc/free pairs */
    size_t kept;    /* allocations left live */
} worker_t;

__attribute__((noipa)) static void *worker_main(void *arg)
{
    worker_t *w = arg;
    uintptr_t base = ((uintptr_t)(w->id + 1) << 36);
    for (int i = 0; i < w->iterations; i++) {
        uint32_t sid = (i % 8 == 0) ? capture_via(i & 1) : 0;
        uintptr_t a = base + (uintptr_t)i * 64;
        ledger_record_alloc(a, w->id % 2, 64, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, sid);
        if (i % 10 != 0) {
            if (ledger_record_free(a) != 1) return (void *)1;
        } else {
            w->kept++;
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    ledger_clear();
    ledger_init(&(ledger_config_t){.backtrace_depth = 16});
    enum { T = 8 };
    pthread_t th[T];
    worker_t w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker_t){i, 20000, 0};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    size_t kept = 0;
    for (int i = 0; i < T; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
        kept += w[i].kept;
    }
    assert_int_equal(ledger_live_total(), kept);
    check_ledger();
    ledger_clear();
}

/* Shards follow threads, so a record made by one thread and freed by another is found by the
 * search (own group, hint, the rest).  12 producers (more threads than the 8 groups: some share
 * one) each record XT_BLOCKS addresses of their own range; then 3 consumers free them all, each its
 * share of every producer's range, and look each up first; nothing is left, and a second free
 * of the same address finds nothing. */
enum { XT_PRODUCERS = 12, XT_BLOCKS = 3000, XT_CONSUMERS = 3 };

static uintptr_t xt_addr(int producer, int i)
{
    return 0x100000000000u + (uintptr_t)producer * 0x10000000u + (uintptr_t)i * 512u;
}

static void *xt_produce(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < XT_BLOCKS; i++)
        ledger_record_alloc(xt_addr(p, i), 0, 100, 128, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    return NULL;
}

static void *xt_consume(void *arg)
{
    int c = (int)(intptr_t)arg;
    for (int p = 0; p < XT_PRODUCERS; p++)
        for (int i = c; i < XT_BLOCKS; i += XT_CONSUMERS) {
            ledger_record_t r;
            if (!ledger_lookup(xt_addr(p, i), &r) || r.addr != xt_addr(p, i) || r.granted != 128)
                return (void *)1;
            if (ledger_record_free(xt_addr(p, i)) != 1) return (void *)2;
            if (ledger_record_free(xt_addr(p, i)) != 0) return (void *)3;
        }
    return NULL;
}

static void test_free_from_other_threads(void **state)
{
    (void)state;
    ledger_clear();
    pthread_t th[XT_PRODUCERS];
    for (int p = 0; p < XT_PRODUCERS; p++)
        assert_int_equal(pthread_create(&th[p], NULL, xt_produce, (void *)(intptr_t)p), 0);
    for (int p = 0; p < XT_PRODUCERS; p++) pthread_join(th[p], NULL);
    assert_int_equal(ledger_live_total(), (size_t)XT_PRODUCERS * XT_BLOCKS);
    check_ledger();
    for (int c = 0; c < XT_CONSUMERS; c++)
        assert_int_equal(pthread_create(&th[c], NULL, xt_consume, (void *)(intptr_t)c), 0);
    for (int c = 0; c < XT_CONSUMERS; c++) {
        void *rc;
        pthread_join(th[c], &rc);
        assert_null(rc);
    }
    assert_int_equal(ledger_live_total(), 0);
    check_ledger();
}

/* The invariant checker names an address live in two shards.  Two threads created one after
 * the other take different groups; each records the same address (as a missed free would
 * leave it: the shim forgets every block before the pool reuses it). */
static void *xt_record_dup(void *arg)
{
    (void)arg;
    ledger_record_alloc(0x5000, 0, 1, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    return NULL;
}

static void test_check_finds_address_in_two_shards(void **state)
{
    (void)state;
    ledger_clear();
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, xt_record_dup, NULL), 0);
    pthread_join(a, NULL);
    assert_int_equal(pthread_create(&b, NULL, xt_record_dup, NULL), 0);
    pthread_join(b, NULL);
    assert_int_equal(ledger_live_total(), 2);
    char why[256] = "";
    assert_true(ledger_check(why, sizeof why) > 0);
    assert_non_null(strstr(why, "live in shard"));
    assert_int_equal(ledger_record_free(0x5000), 1);
    assert_int_equal(ledger_record_free(0x5000), 1);
    assert_int_equal(ledger_record_free(0x5000), 0);
    check_ledger();
}

/* ---- tagged records ---------------------------------------------------------------------------- */
/* The tags of made-up blocks, as an allocator would keep them beside each block: an
 * open-addressing map address -> tag (0 = none), the resolver's answer. */
enum { TAG_SLOTS = 1 << 18 };
static uintptr_t tag_addr[TAG_SLOTS];
static uint32_t tag_val[TAG_SLOTS];
static pthread_mutex_t tag_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t tag_slot(uintptr_t a)
{
    size_t i = (size_t)((a >> 6) * 0x9e3779b97f4a7c15ULL >> 46) & (TAG_SLOTS - 1);
    while (tag_addr[i] && tag_addr[i] != a) i = (i + 1) & (TAG_SLOTS - 1);
    return i;
}
static void tag_set(uintptr_t a, uint32_t t) /* t = 0: the block is gone (its tag stays 0) */
{
    pthread_mutex_lock(&tag_lock);
    size_t i = tag_slot(a);
    tag_addr[i] = a;
    tag_val[i] = t;
    pthread_mutex_unlock(&tag_lock);
}
static int tag_resolve(uintptr_t a, uint32_t *t)
{
    pthread_mutex_lock(&tag_lock);
    size_t i = tag_slot(a);
    int ok = tag_addr[i] == a && tag_val[i] != 0;
    if (ok) *t = tag_val[i];
    pthread_mutex_unlock(&tag_lock);
    return ok;
}
static int tag_setup(void **state)
{
    setup_empty_ledger(state);
    memset(tag_addr, 0, sizeof tag_addr);
    memset(tag_val, 0, sizeof tag_val);
    ledger_set_resolver(tag_resolve);
    return 0;
}
static int tag_teardown(void **state)
{
    (void)state;
    ledger_set_park_min_chunks(LEDGER_PARK_MIN_CHUNKS);
    ledger_set_resolver(NULL);
    ledger_clear();
    return 0;
}
static uint32_t tagged_alloc(uintptr_t a, int device, size_t granted)
{
    uint32_t h = ledger_record_alloc_tagged(a, device, granted - 32, granted, VOCAB_MALLOC,
                                            VOCAB_FROM_POOL, 0, clock_coarse_ns());
    if (h) tag_set(a, h);
    return h;
}
static int tagged_free(uintptr_t a, uint32_t h)
{
    int ok = ledger_release_tagged(h, a);
    tag_set(a, 0);
    return ok;
}

/* A tagged record is found through its block's tag (lookup, free by address, the checker), is
 * counted like any other, and a stale, repeated or made-up handle changes nothing. */
static void test_tagged_records(void **state)
{
    (void)state;
    uintptr_t a = 0x7e0000000040u, b = 0x7e0000010000u;
    uint32_t ha = tagged_alloc(a, 1, 1056), hb = tagged_alloc(b, 2, 4128);
    assert_true(ha != 0 && hb != 0 && ha != hb);
    ledger_record_alloc(0x1000, 1, 10, 64, VOCAB_MALLOC, VOCAB_FROM_PASSTHROUGH, 0); /* untagged */
    ledger_record_t r;
    assert_int_equal(ledger_lookup(a, &r), 1);
    assert_int_equal(r.addr, a);
    assert_int_equal(r.device, 1);
    assert_int_equal(r.granted, 1056);
    assert_int_equal(r.requested, 1024);
    assert_int_equal(r.origin, VOCAB_FROM_POOL);
    assert_int_equal(ledger_live_total(), 3);
    assert_int_equal(ledger_live_count(1), 2);
    ledger_site_t *sites = NULL;
    size_t n = ledger_collect_sites(&sites, 0);
    size_t counted = 0;
    for (size_t i = 0; i < n; i++) counted += sites[i].count;
    free(sites);
    assert_int_equal(counted, 3);
    check_ledger();

    assert_int_equal(ledger_release_tagged(hb, a), 0);          /* another block's handle... */
    assert_int_equal(ledger_release_tagged(0, a), 0);           /* no handle */
    assert_int_equal(ledger_release_tagged(ha + 7, a), 0);      /* a record never carved */
    assert_int_equal(ledger_release_tagged(0x02000000u, a), 0); /* record number 0: none */
    assert_int_equal(ledger_live_total(), 3);
    check_ledger();
    assert_int_equal(tagged_free(a, ha), 1);
    assert_int_equal(ledger_release_tagged(ha, a), 0); /* double free */
    assert_int_equal(ledger_lookup(a, NULL), 0);
    /* The freed record taken again (the shard's free list is LIFO) by an untagged allocation of
     * the same address: the stale handle names that record and its address matches, but its
     * check word says "not tagged", so the handle is refused and the record stays. */
    ledger_record_alloc(a, 1, 100, 128, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    assert_int_equal(ledger_release_tagged(ha, a), 0);
    assert_int_equal(ledger_lookup(a, NULL), 1);
    check_ledger();
    assert_int_equal(ledger_record_free(a), 1);
    assert_int_equal(ledger_lookup(a, NULL), 0);
    assert_int_equal(ledger_record_free(b), 1); /* by address: through the resolver */
    tag_set(b, 0);
    assert_int_equal(ledger_release_tagged(hb, b), 0);
    assert_int_equal(ledger_live_total(), 1);
    check_ledger();
    /* a live handle given with another address changes nothing */
    uint32_t hc = tagged_alloc(a + 64, 1, 128);
    assert_true(hc != 0);
    assert_int_equal(ledger_release_tagged(hc, a + 128), 0);
    assert_int_equal(ledger_live_total(), 2);
    check_ledger();
}

/* Many lookups in one walk (a report's live map): tagged and untagged records, addresses with
 * none, and no resolver needed. */
static void test_lookup_sorted(void **state)
{
    (void)state;
    ledger_set_resolver(NULL);
    uintptr_t addrs[6] = {0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000};
    ledger_record_alloc(0x2000, 1, 10, 64, VOCAB_MALLOC, VOCAB_FROM_PASSTHROUGH, 0);
    assert_true(tagged_alloc(0x4000, 2, 4128) != 0);
    assert_true(tagged_alloc(0x6000, 3, 96) != 0);
    assert_true(tagged_alloc(0x7000, 3, 96) != 0); /* not asked for */
    ledger_record_t out[6];
    uint8_t found[6];
    memset(found, 7, sizeof found);
    assert_int_equal(ledger_lookup_sorted(addrs, 6, out, found), 3);
    const uint8_t want[6] = {0, 1, 0, 1, 0, 1};
    assert_memory_equal(found, want, 6);
    assert_int_equal(out[1].device, 1);
    assert_int_equal(out[3].addr, 0x4000);
    assert_int_equal(out[3].granted, 4128);
    assert_int_equal(out[5].device, 3);
    assert_int_equal(ledger_lookup(0x4000, NULL), 0); /* by address alone: no resolver */
    ledger_set_resolver(tag_resolve);
    assert_int_equal(ledger_lookup(0x4000, NULL), 1);
    check_ledger();
}

/* The checker names a tagged record whose block's tag names another record (a lost or stale
 * tag) and a tag that names no record. */
static void test_tagged_check_finds_wrong_tag(void **state)
{
    (void)state;
    uintptr_t a = 0x7e0000100000u, b = 0x7e0000200000u;
    uint32_t ha = tagged_alloc(a, 0, 256), hb = tagged_alloc(b, 0, 256);
    check_ledger();
    tag_set(a, hb); /* a's tag names b's record */
    char why[256] = "";
    assert_true(ledger_check(why, sizeof why) > 0);
    assert_non_null(strstr(why, "tag names another record"));
    tag_set(a, ha);
    check_ledger();
    tag_set(b, 0); /* b's block has no tag any more, its record is still live */
    assert_true(ledger_check(why, sizeof why) > 0);
    tag_set(b, hb);
    ledger_drop_device(0); /* drops tagged records too */
    assert_int_equal(ledger_live_total(), 0);
    assert_int_equal(ledger_lookup(a, NULL), 0);
    assert_int_equal(ledger_release_tagged(ha, a), 0);
    check_ledger();
}

/* Tagged and untagged records at random against a model; the checker after each phase. */
static void test_tagged_random_against_model(void **state)
{
    (void)state;
    enum { N = 40000, OPS = 300000 };
    uintptr_t *live = calloc(N, sizeof *live);
    uint32_t *tag = calloc(N, sizeof *tag);
    assert_true(live && tag);
    size_t nlive = 0;
    uint64_t rng = 777;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t x = (uint32_t)(rng >> 33);
        if (nlive < N && (x % 100 < 55 || nlive == 0)) {
            uintptr_t a = ((uintptr_t)(rng >> 20) & ((UINT64_C(1) << 36) - 64)) | UINT64_C(1) << 44;
            if (ledger_lookup(a, NULL)) continue;
            if (x & 1) {
                tag[nlive] = tagged_alloc(a, 0, 64);
                assert_true(tag[nlive] != 0);
            } else {
                ledger_record_alloc(a, 0, 32, 64, VOCAB_MALLOC, VOCAB_FROM_PASSTHROUGH, 0);
                tag[nlive] = 0;
            }
            live[nlive++] = a;
        } else {
            size_t i = x % nlive;
            if (tag[i])
                assert_int_equal(tagged_free(live[i], tag[i]), 1);
            else
                assert_int_equal(ledger_record_free(live[i]), 1);
            live[i] = live[nlive - 1];
            tag[i] = tag[--nlive];
        }
        if (op % 60000 == 0) check_ledger();
    }
    assert_int_equal(ledger_live_total(), nlive);
    for (size_t i = 0; i < nlive; i++) assert_int_equal(ledger_lookup(live[i], NULL), 1);
    check_ledger();
    free(live);
    free(tag);
}

/* Tagged records made by producer threads, released by consumer threads (other groups). */
static void *tt_produce(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < XT_BLOCKS; i++)
        if (!tagged_alloc(xt_addr(p, i) | UINT64_C(1) << 45, 0, 128)) return (void *)1;
    return NULL;
}
static void *tt_consume(void *arg)
{
    int c = (int)(intptr_t)arg;
    for (int p = 0; p < XT_PRODUCERS; p++)
        for (int i = c; i < XT_BLOCKS; i += XT_CONSUMERS) {
            uintptr_t a = xt_addr(p, i) | UINT64_C(1) << 45;
            uint32_t h;
            if (!tag_resolve(a, &h)) return (void *)2;
            if (tagged_free(a, h) != 1) return (void *)3;
            if (ledger_release_tagged(h, a) != 0) return (void *)4;
        }
    return NULL;
}

static void test_tagged_free_from_other_threads(void **state)
{
    (void)state;
    pthread_t th[XT_PRODUCERS];
    void *rc;
    for (int p = 0; p < XT_PRODUCERS; p++)
        assert_int_equal(pthread_create(&th[p], NULL, tt_produce, (void *)(intptr_t)p), 0);
    for (int p = 0; p < XT_PRODUCERS; p++) {
        pthread_join(th[p], &rc);
        assert_null(rc);
    }
    assert_int_equal(ledger_live_total(), (size_t)XT_PRODUCERS * XT_BLOCKS);
    check_ledger();
    for (int c = 0; c < XT_CONSUMERS; c++)
        assert_int_equal(pthread_create(&th[c], NULL, tt_consume, (void *)(intptr_t)c), 0);
    for (int c = 0; c < XT_CONSUMERS; c++) {
        pthread_join(th[c], &rc);
        assert_null(rc);
    }
    assert_int_equal(ledger_live_total(), 0);
    check_ledger();
}

/* Parked forgets (ledger_release_tagged_later): a parked record is gone for every reader, the
 * next park forgets the one before, and a handle that went stale while parked changes nothing
 * when it is forgotten.  Slots are static: the ledger keeps them in its list for good. */
static ledger_parked_t pk_slot;
static void test_parked_forgets(void **state)
{
    (void)state;
    ledger_set_park_min_chunks(0); /* park in a ledger this small too */
    uintptr_t a = 0x7e0000300000u, b = 0x7e0000400000u, c = 0x7e0000500000u;
    uint32_t ha = tagged_alloc(a, 1, 256), hb = tagged_alloc(b, 1, 256),
             hc = tagged_alloc(c, 2, 512);
    assert_true(ha && hb && hc);
    ledger_release_tagged_later(&pk_slot, ha, a);
    tag_set(a, 0);
    assert_true(pk_slot.linked);
    assert_true(pk_slot.word != 0);                    /* parked, not forgotten yet... */
    assert_int_equal(ledger_live_total(), 2);          /* ...but no reader sees it */
    assert_true(pk_slot.word == 0);                    /* the reader completed it */
    assert_int_equal(ledger_release_tagged(ha, a), 0); /* forgotten once only */
    check_ledger();

    ledger_release_tagged_later(&pk_slot, hb, b); /* parked */
    tag_set(b, 0);
    ledger_release_tagged_later(&pk_slot, hc, c); /* forgets b, parks c */
    tag_set(c, 0);
    assert_int_equal(ledger_release_tagged(hb, b), 0); /* a writer: it completes nothing */
    assert_int_equal(ledger_release_tagged(hc, c), 1); /* c was still parked: forgotten here */
    assert_true(pk_slot.word != 0);
    assert_int_equal(ledger_live_count(2), 0); /* the stale parked c: refused, nothing changes */
    assert_int_equal(ledger_live_total(), 0);
    check_ledger();

    /* a handle that names no record, and one given with another address: refused when forgotten */
    uint32_t hd = tagged_alloc(a, 1, 256);
    ledger_release_tagged_later(&pk_slot, hd + 5, a);
    ledger_release_tagged_later(&pk_slot, hd, a + 64);
    assert_int_equal(ledger_live_total(), 1);
    ledger_release_tagged_later(&pk_slot, hd, a);
    tag_set(a, 0);
    ledger_release_tagged_later(&pk_slot, 0, a); /* no handle: nothing parked, nothing forgotten */
    assert_true(pk_slot.word != 0);
    assert_int_equal(ledger_lookup(a, NULL), 0);
    uint32_t he = tagged_alloc(b, 1, 256);
    ledger_release_tagged_later(NULL, he, b); /* no slot: immediate */
    tag_set(b, 0);
    assert_int_equal(ledger_release_tagged(he, b), 0);
    assert_int_equal(ledger_live_total(), 0);
    check_ledger();

    /* in a small ledger (the default threshold) a forget is immediate */
    ledger_set_park_min_chunks(LEDGER_PARK_MIN_CHUNKS);
    uint32_t hf = tagged_alloc(c, 1, 256);
    ledger_release_tagged_later(&pk_slot, hf, c);
    tag_set(c, 0);
    assert_true(pk_slot.word == 0);
    assert_int_equal(ledger_release_tagged(hf, c), 0);
    ledger_set_park_min_chunks(0);
    check_ledger();
}

/* Threads park their own frees while another thread reads the ledger: every record ends
 * forgotten exactly once, and the records live at the end are all there. */
enum { PK_THREADS = 4, PK_BLOCKS = 64, PK_ROUNDS = 20000 };
static ledger_parked_t pk_slots[PK_THREADS];
static int pk_stop;
static void *pk_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uintptr_t base = 0x7f0000000000u + ((uintptr_t)id << 32);
    uint32_t h[PK_BLOCKS] = {0};
    uint64_t rng = 99 + (uint64_t)id;
    for (int round = 0; round < PK_ROUNDS; round++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int i = (int)(rng % PK_BLOCKS);
        uintptr_t a = base + (uintptr_t)i * 4096;
        if (h[i]) {
            ledger_release_tagged_later(&pk_slots[id], h[i], a);
            tag_set(a, 0);
            h[i] = 0;
        } else if ((h[i] = tagged_alloc(a, id, 4096)) == 0) {
            return (void *)-1;
        }
    }
    size_t live = 0;
    for (int i = 0; i < PK_BLOCKS; i++) live += h[i] != 0;
    return (void *)(uintptr_t)live;
}

static void *pk_reader(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&pk_stop, __ATOMIC_ACQUIRE)) {
        (void)ledger_live_total();
        (void)ledger_lookup(0x7f0000000000u, NULL);
    }
    return NULL;
}

static void test_parked_forgets_threads(void **state)
{
    (void)state;
    pthread_t th[PK_THREADS], rd;
    ledger_set_park_min_chunks(0);
    __atomic_store_n(&pk_stop, 0, __ATOMIC_RELEASE);
    assert_int_equal(pthread_create(&rd, NULL, pk_reader, NULL), 0);
    for (int i = 0; i < PK_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, pk_worker, (void *)(intptr_t)i), 0);
    size_t live = 0;
    for (int i = 0; i < PK_THREADS; i++) {
        void *rc;
        pthread_join(th[i], &rc);
        assert_true(rc != (void *)-1);
        live += (size_t)(uintptr_t)rc;
    }
    __atomic_store_n(&pk_stop, 1, __ATOMIC_RELEASE);
    pthread_join(rd, NULL);
    assert_int_equal(ledger_live_total(), live);
    for (int i = 0; i < PK_THREADS; i++) assert_true(pk_slots[i].word == 0);
    check_ledger();
}

static void test_fork_while_threads_record(void **state)
{
    (void)state;
    ledger_clear();
    static int registered;
    if (!registered) {
        /* as shim/fork.c orders them: prepare handlers run in reverse, so the gate closes first */
        pthread_atfork(ledger_fork_lock, ledger_fork_unlock, ledger_fork_reinit);
        pthread_atfork(ledger_stack_fork_gate_close, ledger_stack_fork_gate_open,
                       ledger_stack_fork_gate_child);
        registered = 1;
    }
    enum { T = 4 };
    pthread_t th[T];
    worker_t w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker_t){i, 30000, 0};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    for (int k = 0; k < 5; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* The child can use the ledger: no lock inherited held. */
            ledger_record_alloc(0xdead000, 0, 1, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, capture_via(0));
            int ok = ledger_record_free(0xdead000) == 1 && ledger_check(NULL, 0) == 0;
            /* not _exit: TSan's hook there reports the parent's threads, which the child has
             * as copies nobody will join, as leaked (exit 66), about every other run */
            syscall(SYS_exit_group, ok ? 0 : 3);
        }
        assert_true(pid > 0);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    check_ledger();
    ledger_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_record_fields, setup_empty_ledger),
        cmocka_unit_test_setup(test_reused_address_replaces, setup_empty_ledger),
        cmocka_unit_test_setup(test_seq_marks, setup_empty_ledger),
        cmocka_unit_test_setup(test_random_against_model, setup_empty_ledger),
        cmocka_unit_test_setup(test_collect_sites, setup_empty_ledger),
        cmocka_unit_test_setup(test_intern, setup_empty_ledger),
        cmocka_unit_test_setup(test_capture_memo, setup_empty_ledger),
        cmocka_unit_test_setup(test_memory_per_allocation, setup_empty_ledger),
        cmocka_unit_test_setup(test_threads, setup_empty_ledger),
        cmocka_unit_test_setup(test_free_from_other_threads, setup_empty_ledger),
        cmocka_unit_test_setup(test_check_finds_address_in_two_shards, setup_empty_ledger),
        cmocka_unit_test_setup(test_fork_while_threads_record, setup_empty_ledger),
        cmocka_unit_test_setup_teardown(test_tagged_records, tag_setup, tag_teardown),
        cmocka_unit_test_setup_teardown(test_lookup_sorted, tag_setup, tag_teardown),
        cmocka_unit_test_setup_teardown(test_tagged_check_finds_wrong_tag, tag_setup, tag_teardown),
        cmocka_unit_test_setup_teardown(test_tagged_random_against_model, tag_setup, tag_teardown),
        cmocka_unit_test_setup_teardown(test_tagged_free_from_other_threads, tag_setup,
                                        tag_teardown),
        cmocka_unit_test_setup_teardown(test_parked_forgets, tag_setup, tag_teardown),
        cmocka_unit_test_setup_teardown(test_parked_forgets_threads, tag_setup, tag_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
