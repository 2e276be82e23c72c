/* tests/unit/test_ledger_dlopen.c — unwinding while other threads dlopen/dlclose.
 *
 * The known deadlock: a thread unwinds (the unwinder asks the loader for the module list, i.e.
 * waits for the loader lock) while holding a lock that a thread inside dlopen — holding the
 * loader lock and running a constructor — needs.  npupool captures stacks before taking any lock,
 * so this must never hang.  Threads capture stacks and record/free allocations (taking the shard
 * locks) while one thread dlopen()s and dlclose()s libledger_ctor.so, whose constructor and
 * destructor themselves capture stacks (through this binary's exported ledger_stack_capture).
 * A watchdog (alarm) turns a deadlock into a failure instead of a hung test.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ledger.h"

static _Atomic int stop;
static _Atomic long captures;

static char lib_path[PATH_MAX + 64];

__attribute__((noinline)) static void *unwinder(void *arg)
{
    uintptr_t base = ((uintptr_t)(intptr_t)arg + 1) << 36;
    for (uintptr_t i = 0; !stop; i++) {
        uint32_t sid = ledger_stack_capture(0);
        ledger_record_alloc(base + (i % 4096) * 64, 0, 64, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, sid);
        ledger_record_free(base + (i % 4096) * 64);
        captures++;
    }
    return NULL;
}

static void *loader(void *arg)
{
    long rounds = (long)(intptr_t)arg;
    for (long r = 0; r < rounds; r++) {
        void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
        if (!h) return (void *)1;
        int (*work)(void) = (int (*)(void))dlsym(h, "ledger_ctor_work");
        if (!work || work() == 0) return (void *)2; /* the library's captures worked */
        dlclose(h);
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_ledger_dlopen: deadlock (watchdog fired)\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(99);
}

static void test_unwind_during_dlopen(void **state)
{
    (void)state;
    ledger_init(&(ledger_config_t){.backtrace_depth = 32});
    assert_int_equal(ledger_backtrace_depth(), 32);
    signal(SIGALRM, on_alarm);
    alarm(120);
    /* One loading thread: TSan does not see ld.so's internal lock, and two threads dlopen()ing
     * at once would be reported as races inside ld.so. */
    enum { U = 4, L = 1 };
    pthread_t u[U], l[L];
    for (int i = 0; i < U; i++) pthread_create(&u[i], NULL, unwinder, (void *)(intptr_t)i);
    for (int i = 0; i < L; i++) pthread_create(&l[i], NULL, loader, (void *)(intptr_t)1000);
    for (int i = 0; i < L; i++) {
        void *r;
        pthread_join(l[i], &r);
        assert_null(r);
    }
    stop = 1;
    for (int i = 0; i < U; i++) pthread_join(u[i], NULL);
    alarm(0);
    print_message("# %ld captures while loading/unloading 1000 times\n", (long)captures);
    assert_true(captures > 0);
    assert_int_equal(ledger_live_total(), 0);
    assert_int_equal(ledger_check(NULL, 0), 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* The library sits in ../programs/ relative to this binary. */
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(lib_path, sizeof lib_path, "%s/../programs/libledger_ctor.so", self);
    (void)argv;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unwind_during_dlopen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
