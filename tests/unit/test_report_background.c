/* tests/unit/test_report_background.c — the reporter thread: signal reports while threads
 * allocate, an application's own handler left alone, periodic reports showing a slow leak's
 * growth (and none for a busy balanced site), and the pool-use threshold monitor.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "report_test_util.h"

static int setup(void **state)
{
    (void)state;
    rt_reset_all();
    rt_config_defaults("bg");
    ledger_init(&(ledger_config_t){
        .backtrace_depth =
            2}); /* the allocating function and its caller: sites independent of the test */
    return 0;
}

static uint64_t written(void)
{
    report_stats_t st;
    report_get_stats(&st);
    return st.written;
}

static int wait_written(uint64_t at_least, int timeout_ms)
{
    for (int t = 0; t < timeout_ms; t += 10) {
        if (written() >= at_least) return 1;
        rt_sleep_ms(10);
    }
    return written() >= at_least;
}

/* ---- signal ------------------------------------------------------------------------------------ */

static _Atomic int stop_workers;

typedef struct worker {
    int id;      /* worker number */
    long ops;    /* alloc/free pairs done */
    long errors; /* allocations refused or frees unknown */
} worker_t;

__attribute__((noipa)) static uintptr_t busy_alloc(int id)
{
    uint32_t sid = ledger_stack_capture(0);
    return rt_alloc(0, 512 + (size_t)(id * 64), sid);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    uintptr_t keep[64] = {0};
    for (long i = 0; !stop_workers; i++) {
        int k = (int)(i % 64);
        if (keep[k]) {
            if (!ledger_lookup(keep[k], NULL)) w->errors++;
            rt_free(0, keep[k]);
        }
        keep[k] = busy_alloc(w->id);
        if (!keep[k]) w->errors++;
        w->ops++;
    }
    for (int k = 0; k < 64; k++)
        if (keep[k]) rt_free(0, keep[k]);
    return NULL;
}

static void test_signal_reports_while_threads_allocate(void **state)
{
    (void)state;
    rt_cfg.signal = SIGUSR2;
    rt_init();
    rt_make_pool(0, (size_t)256 << 20);
    report_start_background();
    struct sigaction sa;
    sigaction(SIGUSR2, NULL, &sa);
    assert_true(sa.sa_handler != SIG_DFL); /* npupool's handler is in place */
    enum { T = 4 };
    pthread_t th[T];
    worker_t w[T];
    stop_workers = 0;
    for (int i = 0; i < T; i++) {
        w[i] = (worker_t){i, 0, 0};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    uint64_t before = written();
    for (int k = 0; k < 5; k++) {
        rt_sleep_ms(30);
        kill(getpid(), SIGUSR2);
        assert_true(wait_written(before + (uint64_t)k + 1, 10000));
    }
    stop_workers = 1;
    long ops = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].errors, 0);
        ops += w[i].ops;
    }
    print_message("# 5 signal reports while 4 threads did %ld alloc/free pairs\n", ops);
    assert_true(ops > 1000);
    report_stats_t st;
    report_get_stats(&st);
    assert_true(st.signals >= 5);
    cJSON *doc = rt_load(st.last_path);
    assert_non_null(doc);
    assert_string_equal(rt_str(doc, "trigger"), "signal");
    rt_check_pool_consistency(cJSON_GetArrayItem(rt_get(doc, "devices"), 0));
    cJSON_Delete(doc);
    report_stop_background();
    sigaction(SIGUSR2, NULL, &sa);
    assert_true(sa.sa_handler == SIG_DFL); /* our handler is gone again */
}

static _Atomic int app_handler_calls;
static void app_handler(int sig)
{
    (void)sig;
    app_handler_calls++;
}

static void test_application_handler_is_kept(void **state)
{
    (void)state;
    signal(SIGUSR1, app_handler);
    rt_cfg.signal = SIGUSR1;
    rt_init();
    report_start_background();
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    assert_ptr_equal(sa.sa_handler, app_handler);
    uint64_t before = written();
    raise(SIGUSR1);
    rt_sleep_ms(200);
    assert_int_equal(app_handler_calls, 1);
    assert_int_equal(written(), before);
    report_stop_background();
    sigaction(SIGUSR1, NULL, &sa);
    assert_ptr_equal(sa.sa_handler, app_handler);
    signal(SIGUSR1, SIG_DFL);
}

static void test_signal_zero_disables(void **state)
{
    (void)state;
    rt_cfg.signal = 0;
    rt_cfg.warn_ratio = 0;
    rt_cfg.critical_ratio = 0;
    rt_init();
    report_start_background();
    struct sigaction sa;
    sigaction(SIGUSR2, NULL, &sa);
    assert_true(sa.sa_handler == SIG_DFL);
    report_stop_background();
}

/* ---- interval and growth ----------------------------------------------------------------------- */

__attribute__((noipa)) static uintptr_t slow_leak(void)
{
    uint32_t sid = ledger_stack_capture(0);
    return rt_alloc(0, 4096, sid);
}

__attribute__((noipa)) static void balanced(void)
{
    uint32_t sid = ledger_stack_capture(0);
    uintptr_t a = rt_alloc(0, 8192, sid);
    rt_free(0, a);
}

static const cJSON *leak_named(const cJSON *doc, const char *fn)
{
    const cJSON *l;
    cJSON_ArrayForEach(l, rt_get(doc, "leaks"))
    {
        const char *f = rt_str(cJSON_GetArrayItem(rt_get(l, "frames"), 0), "function");
        if (f && !strcmp(f, fn)) return l;
    }
    return NULL;
}

static void test_interval_reports_show_slow_leak(void **state)
{
    (void)state;
    rt_cfg.interval_s = 0.25;
    rt_init();
    rt_make_pool(0, (size_t)256 << 20);
    uint64_t first = written() + 1;
    report_start_background();
    for (int i = 0; i < 130; i++) { /* ~1.3 s: one leak and 200 balanced pairs every 10 ms */
        slow_leak();
        for (int k = 0; k < 200; k++) balanced();
        rt_sleep_ms(10);
    }
    report_stop_background();
    uint64_t last = written();
    print_message("# %llu interval reports\n", (unsigned long long)(last - first + 1));
    assert_true(last >= first + 2);
    double total_growth = 0;
    for (uint64_t n = first; n <= last; n++) {
        char path[400];
        snprintf(path, sizeof path, "%s/bg-%llu.json", rt_dir, (unsigned long long)n);
        cJSON *doc = rt_load(path);
        assert_non_null(doc);
        assert_string_equal(rt_str(doc, "trigger"), "interval");
        const cJSON *leak = leak_named(doc, "slow_leak");
        assert_non_null(leak);
        double g = rt_num(leak, "growth.count");
        /* ~25 per 0.25 s on an idle machine; under load a window may hold
         * fewer, and the last one may close just after the loop ended */
        if (n < last) assert_true(g >= 1);
        total_growth += g;
        assert_int_equal((long)rt_num(leak, "growth.bytes"), (long)g * 4096);
        /* the busy balanced site is (almost) never live and never grows */
        const cJSON *bal = leak_named(doc, "balanced");
        if (bal) {
            assert_true(rt_num(bal, "count") <= 1);
            assert_true(rt_num(bal, "growth.count") <= 1);
        }
        if (n == last) assert_int_equal((long)total_growth, (long)rt_num(leak, "count"));
        cJSON_Delete(doc);
    }
}

/* ---- thresholds -------------------------------------------------------------------------------- */

static void test_threshold_crossings(void **state)
{
    (void)state;
    rt_cfg.warn_ratio = 0.85;
    rt_cfg.critical_ratio = 0.95;
    rt_init();
    rt_make_pool(1, (size_t)1 << 30);
    report_start_background();
    char err[2048];
    uint64_t before = written();
    size_t G = (size_t)1 << 30;
    report_usage_changed(1, G / 2, G); /* below: nothing */
    rt_sleep_ms(1100);                 /* one growth sample a second at most */
    rt_stderr_begin();
    report_usage_changed(1, (size_t)(0.86 * (double)G), G);
    report_usage_changed(1, (size_t)(0.87 * (double)G), G); /* same level: nothing more */
    int lines = rt_stderr_end(err, sizeof err);
    print_message("%s", err);
    assert_int_equal(lines, 1);
    assert_non_null(strstr(err, "warning threshold (85%)"));
    /* 1.1 s of history: too little for a growth rate (10 s needed), so no prediction either */
    assert_non_null(strstr(err, "growth rate not known yet ("));
    assert_true(wait_written(before + 1, 5000));
    cJSON *doc = rt_last_report();
    assert_string_equal(rt_str(doc, "trigger"), "threshold");
    assert_int_equal((int)rt_num(doc, "trigger_device"), 1);
    assert_string_equal(rt_str(doc, "threshold.level"), "warning");
    assert_int_equal((int)rt_num(doc, "threshold.device"), 1);
    assert_true(fabs(rt_num(doc, "threshold.usage_ratio") - 0.86) < 0.001);
    assert_true(fabs(rt_num(doc, "threshold.threshold_ratio") - 0.85) < 1e-9);
    assert_true(cJSON_IsNull(rt_get(doc, "threshold.growth_bytes_per_s")));
    assert_true(cJSON_IsNull(rt_get(doc, "threshold.predicted_oom_s")));
    double window = rt_num(doc, "threshold.rate_window_s");
    assert_true(window >= 1.0 && window < 10.0);
    cJSON_Delete(doc);
    rt_sleep_ms(100);
    assert_int_equal(written(), before + 1);
    /* critical */
    rt_stderr_begin();
    report_usage_changed(1, (size_t)(0.96 * (double)G), G);
    lines = rt_stderr_end(err, sizeof err);
    assert_int_equal(lines, 1);
    assert_non_null(strstr(err, "critical threshold (95%)"));
    assert_true(wait_written(before + 2, 5000));
    doc = rt_last_report();
    assert_string_equal(rt_str(doc, "threshold.level"), "critical");
    cJSON_Delete(doc);
    /* falling just below is not enough to re-arm; clearly below is */
    rt_stderr_begin();
    report_usage_changed(1, (size_t)(0.84 * (double)G), G);
    report_usage_changed(1, (size_t)(0.90 * (double)G), G); /* warning level: already announced */
    report_usage_changed(1, (size_t)(0.50 * (double)G), G); /* re-armed */
    report_usage_changed(1, (size_t)(0.86 * (double)G), G); /* announced again */
    lines = rt_stderr_end(err, sizeof err);
    assert_int_equal(lines, 1);
    assert_true(wait_written(before + 3, 5000));
    /* flat usage: not growing, no OOM predicted */
    report_usage_changed(1, (size_t)(0.50 * (double)G), G);
    report_stop_background();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_signal_reports_while_threads_allocate, setup),
        cmocka_unit_test_setup(test_application_handler_is_kept, setup),
        cmocka_unit_test_setup(test_signal_zero_disables, setup),
        cmocka_unit_test_setup(test_interval_reports_show_slow_leak, setup),
        cmocka_unit_test_setup(test_threshold_crossings, setup),
    };
    return cmocka_run_group_tests(tests, rt_group_setup, rt_group_teardown);
}
