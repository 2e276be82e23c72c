/* tests/unit/test_base_lock.c — base/lock.h, the pool's lock: mutual exclusion (threads add to a
 * plain counter under it: a lost update shows in the sum, and ThreadSanitizer would name a race
 * if acquire and release did not order the critical sections), sleepers are woken (a holder keeps
 * the lock far longer than the spin, so the others sleep on the futex, and every one of them gets
 * it after the release), a release from another thread than the acquirer, and a fork child that
 * releases what its parent's thread held at fork (as the shim's fork handlers do).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lock.h"

enum { THREADS = 8, ROUNDS = 50000 };

static lock_t g_lock;
static uint64_t g_counter; /* guarded by g_lock; deliberately not atomic */
static int g_inside;       /* guarded by g_lock: 1 while a thread is in the critical section */
static int g_overlaps;     /* atomic: critical sections seen overlapping */

static void *adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        lock_acquire(&g_lock);
        if (g_inside) __atomic_add_fetch(&g_overlaps, 1, __ATOMIC_RELAXED);
        g_inside = 1;
        uint64_t c = g_counter;
        if (i % 64 == 0) sched_yield(); /* a preempted holder: the others spin, then sleep */
        g_counter = c + 1;
        g_inside = 0;
        lock_release(&g_lock);
    }
    return NULL;
}

static void test_mutual_exclusion(void **state)
{
    (void)state;
    lock_init(&g_lock);
    g_counter = 0;
    g_overlaps = 0;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, adder, NULL), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    assert_int_equal(g_counter, (uint64_t)THREADS * ROUNDS);
    assert_int_equal(g_overlaps, 0);
    assert_int_equal(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 0);
}

static int g_got; /* atomic: waiters that acquired */

static void *waiter(void *arg)
{
    (void)arg;
    lock_acquire(&g_lock);
    __atomic_add_fetch(&g_got, 1, __ATOMIC_RELAXED);
    lock_release(&g_lock);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void test_sleepers_are_woken(void **state)
{
    (void)state;
    lock_init(&g_lock);
    g_got = 0;
    lock_acquire(&g_lock);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, waiter, NULL), 0);
    sleep_ms(100); /* far past the spin: they sleep */
    assert_int_equal(__atomic_load_n(&g_got, __ATOMIC_RELAXED), 0);
    assert_int_equal(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 2); /* sleepers marked */
    lock_release(&g_lock);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    assert_int_equal(g_got, 4);
    assert_int_equal(__atomic_load_n(&g_lock.word, __ATOMIC_RELAXED), 0);
}

static void *releaser(void *arg)
{
    lock_release(arg);
    return NULL;
}

static void test_release_by_another_thread(void **state)
{
    (void)state;
    lock_t l;
    lock_init(&l);
    lock_acquire(&l);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, releaser, &l), 0);
    pthread_join(t, NULL);
    lock_acquire(&l); /* free again: does not block */
    lock_release(&l);
    assert_int_equal(l.word, 0);
}

static void test_fork_child_releases(void **state)
{
    (void)state;
    lock_init(&g_lock);
    lock_acquire(&g_lock); /* as a fork prepare handler holds the pool lock */
    pid_t pid = fork();
    if (pid == 0) {
        lock_release(&g_lock);
        lock_acquire(&g_lock);
        int ok = g_lock.word == 1;
        lock_release(&g_lock);
        syscall(SYS_exit_group, ok && g_lock.word == 0 ? 0 : 3);
    }
    assert_true(pid > 0);
    lock_release(&g_lock);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_exclusion),
        cmocka_unit_test(test_sleepers_are_woken),
        cmocka_unit_test(test_release_by_another_thread),
        cmocka_unit_test(test_fork_child_releases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
