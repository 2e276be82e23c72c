/* tests/unit/test_pool_addrmap.c — the address map shared by the pool and the shim:
 * basic contract, reserved keys, replace, growth under load checked against a reference
 * (incremental migration in flight most of the time), foreach, and that addrmap_reserve()
 * really pre-allocates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "addrmap.h"
#include "splitmix.h"

static void test_basic(void **state)
{
    (void)state;
    addrmap_t m;
    assert_int_equal(addrmap_init(&m, 0), 0);
    uint64_t v = 0;
    assert_int_equal(addrmap_get(&m, 0, &v), 0);
    assert_int_equal(addrmap_put(&m, 0, 10), 0); /* key 0 is allowed */
    assert_int_equal(addrmap_put(&m, 64, 20), 0);
    assert_int_equal(addrmap_put(&m, 64, 21), 1); /* replace */
    assert_int_equal(addrmap_count(&m), 2);
    assert_int_equal(addrmap_get(&m, 0, &v), 1);
    assert_int_equal(v, 10);
    assert_int_equal(addrmap_get(&m, 64, &v), 1);
    assert_int_equal(v, 21);
    assert_int_equal(addrmap_get(&m, 128, NULL), 0);
    assert_int_equal(addrmap_put(&m, UINTPTR_MAX, 1), -1);
    assert_int_equal(addrmap_put(&m, UINTPTR_MAX - 1, 1), -1);
    assert_int_equal(addrmap_get(&m, UINTPTR_MAX, NULL), 0);
    assert_int_equal(addrmap_put(&m, UINTPTR_MAX - 2, 5), 0);
    assert_int_equal(addrmap_del(&m, 64, &v), 1);
    assert_int_equal(v, 21);
    assert_int_equal(addrmap_del(&m, 64, &v), 0);
    assert_int_equal(addrmap_count(&m), 2);
    assert_int_equal(addrmap_put_new(&m, 4096, 7), 0);
    assert_int_equal(addrmap_get(&m, 4096, &v), 1);
    assert_int_equal(v, 7);
    assert_int_equal(addrmap_put_new(&m, UINTPTR_MAX, 1), -1);
    assert_int_equal(addrmap_count(&m), 3);
    assert_int_equal(addrmap_check(&m), 0);
    addrmap_destroy(&m);
}

typedef struct ref {
    uintptr_t *keys; /* live keys */
    uint64_t *vals;  /* their values */
    size_t n;        /* live count */
} ref_t;

static int count_cb(void *ctx, uintptr_t key, uint64_t val)
{
    (void)key;
    uint64_t *sum = ctx;
    sum[0]++;
    sum[1] += val;
    return 0;
}

static void test_random_against_reference(void **state)
{
    (void)state;
    enum { MAXLIVE = 60000, OPS = 400000 };
    addrmap_t m;
    assert_int_equal(addrmap_init(&m, 4), 0); /* start tiny: many grows */
    ref_t r = {malloc(MAXLIVE * sizeof(uintptr_t)), malloc(MAXLIVE * sizeof(uint64_t)), 0};
    uint64_t s = 5, vsum = 0;
    unsigned grows_seen = 0;
    for (long op = 0; op < OPS; op++) {
        /* Phase: grow to MAXLIVE, shrink, grow again. */
        long phase = op / (OPS / 4);
        int want_put =
            (phase % 2 == 0) ? splitmix_next(&s) % 100 < 70 : splitmix_next(&s) % 100 < 30;
        if (r.n == 0 || (want_put && r.n < MAXLIVE)) {
            uintptr_t k = (uintptr_t)(splitmix_next(&s) & 0xffffffffffc0ull); /* 64-aligned */
            uint64_t v = splitmix_next(&s);
            int present = addrmap_get(&m, k, NULL);
            int rc = addrmap_put(&m, k, v);
            assert_int_equal(rc, present);
            if (!present) {
                r.keys[r.n] = k;
                r.vals[r.n] = v;
                r.n++;
                vsum += v;
            }
        } else {
            size_t i = (size_t)(splitmix_next(&s) % r.n);
            uint64_t v = 0;
            assert_int_equal(addrmap_get(&m, r.keys[i], &v), 1);
            assert_true(v == r.vals[i]);
            assert_int_equal(addrmap_del(&m, r.keys[i], &v), 1);
            assert_true(v == r.vals[i]);
            assert_int_equal(addrmap_get(&m, r.keys[i], NULL), 0);
            vsum -= v;
            r.n--;
            r.keys[i] = r.keys[r.n];
            r.vals[i] = r.vals[r.n];
        }
        assert_int_equal(addrmap_count(&m), r.n);
        if (m.old) grows_seen++;
        if (op < 3000 || op % 5000 == 0) {
            assert_int_equal(addrmap_check(&m), 0);
            /* every reference entry present with its value */
            for (size_t i = 0; i < r.n; i += (op < 3000 ? 1 : 7)) {
                uint64_t v;
                assert_int_equal(addrmap_get(&m, r.keys[i], &v), 1);
                assert_true(v == r.vals[i]);
            }
            uint64_t sum[2] = {0, 0};
            assert_int_equal(addrmap_foreach(&m, count_cb, sum), 0);
            assert_int_equal(sum[0], r.n);
            assert_true(sum[1] == vsum);
        }
    }
    assert_true(grows_seen > 1000); /* migration was exercised while in flight */
    assert_int_equal(addrmap_check(&m), 0);
    free(r.keys);
    free(r.vals);
    addrmap_destroy(&m);
}

static void test_reserve_preallocates(void **state)
{
    (void)state;
    addrmap_t m;
    assert_int_equal(addrmap_init(&m, 100), 0);
    for (uintptr_t k = 0; k < 100; k++) assert_int_equal(addrmap_put(&m, k * 64, k), 0);
    assert_int_equal(addrmap_reserve(&m, 5000), 0);
    const addrmap_slot_t *slots = m.slots;
    for (uintptr_t k = 100; k < 5100; k++) assert_int_equal(addrmap_put(&m, k * 64, k), 0);
    assert_ptr_equal(m.slots, slots); /* no new table was needed */
    assert_int_equal(addrmap_count(&m), 5100);
    assert_int_equal(addrmap_check(&m), 0);
    addrmap_destroy(&m);
}

static int stop_cb(void *ctx, uintptr_t key, uint64_t val)
{
    (void)key;
    (void)val;
    return ++*(int *)ctx == 3 ? 9 : 0;
}

static void test_foreach_stops(void **state)
{
    (void)state;
    addrmap_t m;
    assert_int_equal(addrmap_init(&m, 16), 0);
    for (uintptr_t k = 1; k <= 10; k++) addrmap_put(&m, k, k);
    int calls = 0;
    assert_int_equal(addrmap_foreach(&m, stop_cb, &calls), 9);
    assert_int_equal(calls, 3);
    addrmap_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_reserve_preallocates),
        cmocka_unit_test(test_foreach_stops),
    };
    return cmocka_run_group_tests_name("pool_addrmap", tests, NULL, NULL);
}
