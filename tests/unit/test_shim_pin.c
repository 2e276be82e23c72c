/* tests/unit/test_shim_pin.c — shim/pin.c: a retirer waits for every pin on its object and for
 * nothing else; pins of exited threads and of a fork parent's other threads do not block it;
 * many threads pinning while the published object is replaced and retired never see a retired
 * object (each retired object is poisoned after pin_wait_unheld, and users check it).  Every
 * test runs with fences in the pinning threads, then with the membarrier protocol (pin_init).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pin.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int object_a, object_b;

typedef struct waiter {
    const void *obj;
    int done; /* atomic */
} waiter_t;

static void *wait_thread(void *arg)
{
    waiter_t *w = arg;
    pin_wait_unheld(w->obj);
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The waiter returns only after the holder lets go; a pin on another object does not hold it. */
static void test_wait_for_pin(void **state)
{
    (void)state;
    void *shared = &object_a;
    assert_ptr_equal(pin_load(&shared), &object_a);
    shared = NULL; /* unpublished */
    waiter_t w = {&object_a, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    sleep_ms(50);
    assert_int_equal(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE), 0);
    pin_release();
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.done, 1);

    void *other = &object_b;
    assert_ptr_equal(pin_load(&other), &object_b);
    pin_wait_unheld(&object_a); /* returns at once */
    pin_release();
}

/* Nothing published: nothing pinned. */
static void test_null(void **state)
{
    (void)state;
    void *shared = NULL;
    assert_null(pin_load(&shared));
    pin_wait_unheld(NULL);
}

static void *pin_and_exit(void *arg)
{
    void *shared = arg;
    pin_load(&shared); /* never released: the thread exits holding it */
    return NULL;
}

/* A thread that exits while pinned does not block a retirer, and its slot is reused. */
static void test_thread_exit(void **state)
{
    (void)state;
    for (int i = 0; i < 50; i++) {
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, pin_and_exit, &object_a), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
    }
    pin_wait_unheld(&object_a);
}

static void *pin_forever(void *arg)
{
    void *shared = arg;
    pin_load(&shared);
    for (;;) pause();
    return NULL;
}

/* A fork child does not wait for the pins of the parent's other threads. */
static void test_fork_child(void **state)
{
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pin_forever, &object_b), 0);
    sleep_ms(20);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pin_fork_child();
        alarm(10);
        pin_wait_unheld(&object_b);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pthread_cancel(t);
    pthread_join(t, NULL);
}

/* ---- stress: users never see a retired object ---------------------------------------------- */
typedef struct obj {
    int alive; /* 1 while it may be used; 0 once retired and waited for */
} obj_t;

static void *published;
static int stop;
static int started; /* users that have pinned once */
static long violations;

static void *user(void *arg)
{
    (void)arg;
    int first_done = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        obj_t *o = pin_load(&published);
        if (o && !__atomic_load_n(&o->alive, __ATOMIC_ACQUIRE))
            __atomic_add_fetch(&violations, 1, __ATOMIC_RELAXED);
        pin_release();
        if (!first_done) {
            first_done = 1;
            __atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

/* USERS threads pin what `published` names while this thread replaces it ROUNDS times, waits
 * for the old object's pins and "destroys" it; no user may see a destroyed object. */
#define STRESS_USERS_MAX 8
static void run_stress(int users, int rounds)
{
    obj_t *objs = calloc((size_t)rounds, sizeof *objs);
    pthread_t th[STRESS_USERS_MAX];
    assert_non_null(objs);
    assert_true(users <= STRESS_USERS_MAX);
    /* Each group runs these tests: start from nothing, not from the last run's stop. */
    __atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&violations, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&started, 0, __ATOMIC_RELAXED);
    objs[0].alive = 1;
    __atomic_store_n(&published, &objs[0], __ATOMIC_RELEASE);
    for (int i = 0; i < users; i++) assert_int_equal(pthread_create(&th[i], NULL, user, NULL), 0);
    while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < users) sched_yield(); /* none idle */
    for (int r = 1; r < rounds; r++) {
        objs[r].alive = 1;
        obj_t *old = __atomic_exchange_n((obj_t **)&published, &objs[r], __ATOMIC_SEQ_CST);
        pin_wait_unheld(old);
        __atomic_store_n(&old->alive, 0, __ATOMIC_RELEASE); /* "destroyed" */
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < users; i++) pthread_join(th[i], NULL);
    __atomic_store_n(&published, NULL, __ATOMIC_RELEASE);
    free(objs);
    assert_int_equal(violations, 0);
}

/* More users than cores: a retirer waits for pins of preempted threads. */
static void test_stress_preempted(void **state)
{
    (void)state;
    run_stress(4, 100);
}

/* As many users as cores here, so rounds are short and many: a pin whose store is still in a
 * store buffer when the retirer scans shows up as a violation.  Under qemu-user (the aarch64
 * tests), a seq_cst store and load without a fence between them failed this in 2 of 10 runs
 * at 5,000 rounds with four users; natively the rounds cost microseconds. */
static void test_stress_ordering(void **state)
{
    (void)state;
    run_stress(2, 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_for_pin),     cmocka_unit_test(test_null),
        cmocka_unit_test(test_thread_exit),      cmocka_unit_test(test_fork_child),
        cmocka_unit_test(test_stress_preempted), cmocka_unit_test(test_stress_ordering),
    };
    /* Fences of their own first; then, where the kernel offers it, the membarrier protocol (no
     * thread pins between the two groups). */
    int failed = cmocka_run_group_tests_name("pins with fences", tests, NULL, NULL);
    if (!pin_init()) {
        printf(
            "membarrier is not available (or a TSan build): the asymmetric protocol is not run\n");
        return failed;
    }
    return failed + cmocka_run_group_tests_name("pins with membarrier", tests, NULL, NULL);
}
