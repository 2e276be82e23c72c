/* tests/unit/test_tool_replay.c — the replay engine (tools/replay.c) over the real pool:
 * hand-built traces with known answers (live peak, --min-pool with and without fragmentation,
 * fallback and refusal accounting, RMM "allocate failure" events, several devices), and the
 * pool's invariant checker after every event of a generated workload.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "replay.h"

#define HDR "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n"

static void load(const char *text, trace_t *t)
{
    assert_int_equal(trace_read_buffer("mem", text, strlen(text), t, 0), 0);
}

static replay_opts_t opts(uint64_t pool, int fallback)
{
    replay_opts_t o = {.alloc = &replay_pool_allocator,
                       .pool_bytes = pool,
                       .fallback = fallback,
                       .rounding = REPLAY_ROUND_NONE,
                       .only_device = -1,
                       .check_every_op = 1};
    return o;
}

static void test_granted(void **state)
{
    (void)state;
    assert_int_equal(replay_granted(1, REPLAY_ROUND_ACL), 64);
    assert_int_equal(replay_granted(32, REPLAY_ROUND_ACL), 64);
    assert_int_equal(replay_granted(33, REPLAY_ROUND_ACL), 96);
    assert_int_equal(replay_granted(33, REPLAY_ROUND_ALIGN32), 64);
    assert_int_equal(replay_granted(0, REPLAY_ROUND_ALIGN32), 32);
    assert_int_equal(replay_granted(7, REPLAY_ROUND_NONE), 7);
}

/* Everything freed before the big one: the pool can be exactly the live peak. */
static void test_min_pool_no_fragmentation(void **state)
{
    (void)state;
    trace_t t;
    load(HDR "1,1,alloc,0x100,1000,0\n1,2,alloc,0x200,1000,0\n1,3,alloc,0x300,1000,0\n"
             "1,4,free,0x100,,0\n1,5,free,0x200,,0\n1,6,free,0x300,,0\n1,7,alloc,0x400,4096,0\n",
         &t);
    replay_opts_t o = opts(1 << 20, 0);
    assert_int_equal(replay_live_peak(&t, 0, REPLAY_ROUND_NONE, 64), 4096);
    int probes;
    assert_int_equal(replay_min_pool(&t, 0, &o, 64, &probes), 4096);
    assert_int_equal(probes, 1);
    trace_read_release(&t);
}

#define KNOWN_ANSWER                                                                  \
    HDR "1,1,alloc,0xa000,1024,0\n1,2,alloc,0xb000,1024,0\n1,3,alloc,0xc000,1024,0\n" \
        "1,4,free,0xb000,,0\n1,5,alloc,0xd000,2048,0\n"

/* A, B, C of 1 KiB, free B, then D of 2 KiB: live peak 4 KiB, but the 1 KiB hole between A and C
 * cannot hold D, so the pool needs A|hole|C|D = 5 KiB (the pool splits free blocks from their
 * start, as TLSF does).  Below that the replay must refuse D. */
static void test_min_pool_known_answer(void **state)
{
    (void)state;
    trace_t t;
    load(KNOWN_ANSWER, &t);
    replay_opts_t o = opts(0, 0);
    int probes;
    assert_int_equal(replay_live_peak(&t, 0, REPLAY_ROUND_NONE, 64), 4096);
    assert_int_equal(replay_min_pool(&t, 0, &o, 64, &probes), 5120);
    assert_true(probes > 1);

    replay_result_t r;
    o.pool_bytes = 5120 - 64;
    assert_int_equal(replay_run(&t, &o, &r), 0);
    assert_int_equal(r.dev[0].refused, 1);
    assert_int_equal(r.dev[0].refused_bytes, 2048);
    assert_int_equal(r.dev[0].first_refusal, 4);
    assert_int_equal(r.violations, 0);
    o.pool_bytes = 5120;
    assert_int_equal(replay_run(&t, &o, &r), 0);
    assert_int_equal(r.dev[0].refused, 0);
    assert_int_equal(r.dev[0].peak_allocated, 4096);
    assert_int_equal(r.dev[0].peak_requested, 4096);
    trace_read_release(&t);
}

/* The verified search: on the known-answer trace every larger size serves (safe = min); the
 * vmm pool works in whole chunks, stitches D out of the hole and C's chunk, and needs only the
 * chunks of the live peak. */
static void test_min_pool_verified(void **state)
{
    (void)state;
    trace_t t;
    load(KNOWN_ANSWER, &t);
    replay_opts_t o = opts(0, 0);
    replay_min_pool_result_t m;
    replay_min_pool_verified(&t, 0, &o, 64, 10, &m);
    assert_int_equal(m.min, 5120);
    assert_int_equal(m.safe, 5120);
    assert_true(m.checked >= 10 && m.refused == 0 && m.checked_to > 5120);
    int bisect;
    assert_int_equal(replay_min_pool(&t, 0, &o, 64, &bisect), 5120);
    assert_int_equal(m.probes, bisect + (int)m.checked); /* the bisection, then the checks */
    o.alloc = &replay_pool_vmm_allocator;
    o.chunk_bytes = 64 << 10;
    assert_int_equal(replay_resolution(&o, 64), 64 << 10);
    replay_min_pool_verified(&t, 0, &o, 64, 10, &m);
    assert_int_equal(m.min, 64 << 10); /* one chunk holds everything */
    assert_int_equal(m.safe, m.min);
    trace_read_release(&t);
}

static void test_fallback_accounting(void **state)
{
    (void)state;
    trace_t t;
    load(HDR "1,1,alloc,0x1,2048,0\n1,2,alloc,0x2,2048,0\n1,3,alloc,0x3,2048,0\n"
             "1,4,free,0x3,,0\n1,5,free,0x1,,0\n1,6,alloc,0x4,2048,0\n",
         &t);
    replay_result_t r;
    replay_opts_t o = opts(4096, 1);
    assert_int_equal(replay_run(&t, &o, &r), 0);
    assert_int_equal(r.dev[0].refused, 1);
    assert_int_equal(r.dev[0].fallback, 1);
    assert_int_equal(r.dev[0].peak_fallback, 2048);
    assert_int_equal(r.dev[0].peak_reserved, 4096 + 2048);
    assert_int_equal(r.dev[0].peak_requested, 6144);
    assert_int_equal(r.dev[0].peak_allocated, 4096);
    assert_int_equal(r.dev[0].served, 3);
    assert_int_equal(r.dev[0].live_requested, 4096);

    o.fallback = 0; /* the refused block's free is ignored; the last alloc fits again */
    assert_int_equal(replay_run(&t, &o, &r), 0);
    assert_int_equal(r.dev[0].refused, 1);
    assert_int_equal(r.dev[0].peak_requested, 4096);
    assert_int_equal(r.dev[0].peak_fallback, 0);
    assert_int_equal(r.dev[0].served, 3);
    assert_int_equal(r.violations, 0);
    trace_read_release(&t);
}

/* What the observer saw: every event once, in order, and the figures after it. */
typedef struct seen {
    size_t n;                 /* calls */
    size_t next;              /* the event index expected next */
    replay_point_t last[2];   /* the last point per device */
    uint64_t max_alloc[2];    /* the largest allocated per device */
    uint64_t max_reserved[2]; /* the largest reserved per device */
    uint64_t refusals;        /* points with refused set */
} seen_t;

static void on_point(void *ctx, const replay_point_t *pt)
{
    seen_t *s = ctx;
    assert_int_equal(pt->event, s->next);
    s->next++;
    s->n++;
    assert_true(pt->device >= 0 && pt->device < 2);
    assert_true(pt->largest_free <= pt->free_bytes);
    s->last[pt->device] = *pt;
    if (pt->allocated > s->max_alloc[pt->device]) s->max_alloc[pt->device] = pt->allocated;
    if (pt->reserved > s->max_reserved[pt->device]) s->max_reserved[pt->device] = pt->reserved;
    s->refusals += pt->refused;
}

/* The observer agrees with the result: peaks, refusals, the final free space. */
static void test_observer(void **state)
{
    (void)state;
    trace_t t;
    load(HDR "1,1,alloc,0x1,2048,0\n1,2,alloc,0x2,2048,1\n1,3,alloc,0x3,2048,0\n"
             "1,4,alloc,0x5,4096,0\n1,5,free,0x3,,0\n1,6,free,0x1,,0\n1,7,alloc,0x4,1024,0\n",
         &t);
    seen_t s = {0};
    replay_result_t r;
    replay_opts_t o = opts(4096, 1);
    o.observe = on_point;
    o.observe_ctx = &s;
    assert_int_equal(replay_run(&t, &o, &r), 0);
    assert_int_equal(s.n, t.nev);
    assert_int_equal(s.refusals, r.dev[0].refused + r.dev[1].refused);
    assert_int_equal(r.dev[0].refused, 1); /* the 4 KiB block */
    for (int d = 0; d < 2; d++) {
        assert_int_equal(s.max_alloc[d], r.dev[d].peak_allocated);
        assert_int_equal(s.max_reserved[d], r.dev[d].peak_reserved);
        assert_int_equal(s.last[d].free_bytes, r.dev[d].final_free);
        assert_int_equal(s.last[d].largest_free, r.dev[d].final_largest);
        assert_int_equal(s.last[d].requested, r.dev[d].live_requested);
    }
    assert_int_equal(s.last[0].reserved, 4096 + 4096); /* the fallback block is still live */
    trace_read_release(&t);
}

static void test_rmm_failures_and_devices(void **state)
{
    (void)state;
    trace_t t;
    load("Thread,Time,Action,Pointer,Size,Stream\n"
         "1,00:00:01.000001,allocate,0x1000,4096,0x0\n"
         "1,00:00:01.000002,allocate failure,0x0,8192,0x0\n"
         "1,00:00:01.000003,allocate failure,0x0,65536,0x0\n"
         "1,00:00:01.000004,free,0x1000,4096,0x0\n",
         &t);
    replay_result_t r;
    replay_opts_t o = opts(16384, 0);
    assert_int_equal(replay_run(&t, &o, &r), 0);
    assert_int_equal(r.dev[0].source_failures, 2);
    assert_int_equal(r.dev[0].failures_served,
                     1); /* 8 KiB fits next to 4 KiB in 16 KiB; 64 KiB not */
    assert_int_equal(r.dev[0].peak_requested, 4096);
    trace_read_release(&t);

    load(HDR "1,1,alloc,0x1,1000,0\n1,2,alloc,0x1,3000,1\n1,3,alloc,0x2,3000,1\n1,4,free,0x1,,1\n",
         &t);
    o = opts(8192, 0);
    assert_int_equal(replay_run(&t, &o, &r), 0);
    assert_int_equal(r.ndevices, 2);
    assert_int_equal(r.dev[0].peak_requested, 1000);
    assert_int_equal(r.dev[1].peak_requested, 6000);
    assert_int_equal(r.dev[1].frees, 1);
    int probes;
    assert_int_equal(replay_min_pool(&t, 1, &o, 64, &probes), 6016); /* 2 x 3008 (64-byte blocks) */
    trace_read_release(&t);
}

/* A random workload with the checker after every event; replay twice gives the same figures. */
static void test_checked_random(void **state)
{
    (void)state;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    n += (size_t)snprintf(buf, cap, HDR);
    uint64_t s = 42, live[256];
    size_t nl = 0, next = 1;
    for (int i = 0; i < 8000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        if (nl < 256 && (nl == 0 || (s >> 33) % 100 < 60)) {
            live[nl++] = next;
            n += (size_t)snprintf(buf + n, cap - n, "1,%d,alloc,0x%zx,%llu,0\n", i, next++ * 256,
                                  (unsigned long long)((s >> 40) % (1 << 20) + 1));
        } else {
            size_t k = (size_t)((s >> 20) % nl);
            n += (size_t)snprintf(buf + n, cap - n, "1,%d,free,0x%llx,,0\n", i,
                                  (unsigned long long)live[k] * 256);
            live[k] = live[--nl];
        }
    }
    trace_t t;
    assert_int_equal(trace_read_buffer("mem", buf, n, &t, 0), 0);
    free(buf);
    replay_result_t a, b;
    replay_opts_t o = opts(64 << 20, 1);
    o.rounding = REPLAY_ROUND_ACL;
    assert_int_equal(replay_run(&t, &o, &a), 0);
    assert_int_equal(a.violations, 0);
    assert_int_equal(replay_run(&t, &o, &b), 0);
    assert_memory_equal(&a.dev[0].peak_requested, &b.dev[0].peak_requested, sizeof(uint64_t));
    assert_int_equal(a.dev[0].refused, b.dev[0].refused);
    assert_true(a.dev[0].worst_frag >= a.dev[0].final_frag);
    /* the baseline never needs less than the live peak */
    int probes;
    o.alloc = &replay_firstfit_allocator;
    o.check_every_op = 0;
    uint64_t m = replay_min_pool(&t, 0, &o, 64, &probes);
    assert_true(m >= replay_live_peak(&t, 0, REPLAY_ROUND_ACL, 32));
    trace_read_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_granted),
        cmocka_unit_test(test_min_pool_no_fragmentation),
        cmocka_unit_test(test_min_pool_known_answer),
        cmocka_unit_test(test_min_pool_verified),
        cmocka_unit_test(test_fallback_accounting),
        cmocka_unit_test(test_observer),
        cmocka_unit_test(test_rmm_failures_and_devices),
        cmocka_unit_test(test_checked_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
