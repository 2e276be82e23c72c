/* tests/unit/test_report_metrics.c — the NPUPOOL_METRICS file: the formatter (metrics_format, a
 * pure function: exact lines, one HELP/TYPE per family, families without series left out, label
 * escaping, ratios without the locale, snprintf's contract when cut) and the file as the
 * reporter thread writes it (appears, follows the pool, no temporary file left, one stderr line
 * for a run of failures, nothing written before report_start_background arms it, the last
 * rewrite at finalize).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "metrics.h"
#include "report_test_util.h"

/* ---- the formatter ----------------------------------------------------------------------------- */

static metrics_sample_t sample; /* too large for a test's stack frame under ASan */

static void sample_two_devices(void)
{
    memset(&sample, 0, sizeof sample);
    sample.version = "1.2.3";
    sample.pid = 4242;
    sample.rank = 3;
    sample.ledger_live = 7;
    sample.ledger_stacks = 2;
    sample.ledger_host_bytes = 65536;
    sample.reports_written = 1;
    sample.ndevices = 2;
    metrics_device_t *d = &sample.devices[0];
    d->device = 0;
    d->has_pool = 1;
    d->has_counters = 1;
    d->reserved_bytes = 1073741824;
    d->allocated_bytes = 4096;
    d->requested_bytes = 4000;
    d->peak_allocated_bytes = 8192;
    d->free_bytes = 1073737728;
    d->largest_free_bytes = 1073737728;
    d->live_blocks = 5;
    d->fragmentation = 0.25;
    d->counters.allocs = 10;
    d->counters.frees = 5;
    d->counters.fallback_allocs = 2;
    d->counters.ooms = 1;
    d = &sample.devices[1]; /* the unknown device: counters, no pool */
    d->device = -1;
    d->has_counters = 1;
    d->counters.invalid_frees = 3;
}

static char text[65536];

static int count_lines(const char *t, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *l = t; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, prefix, len)) n++;
    return n;
}

static int has_line(const char *t, const char *line)
{
    size_t len = strlen(line);
    for (const char *l = t; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, line, len) && (l[len] == '\n' || l[len] == 0)) return 1;
    return 0;
}

static void test_format_lines(void **state)
{
    (void)state;
    sample_two_devices();
    size_t n = metrics_format(&sample, text, sizeof text);
    assert_int_equal(n, strlen(text));
    assert_true(text[n - 1] == '\n');
    assert_true(has_line(text, "# TYPE npupool_info gauge"));
    assert_true(has_line(text, "npupool_info{pid=\"4242\",rank=\"3\",version=\"1.2.3\"} 1"));
    assert_true(has_line(text, "npupool_ledger_live_allocations{pid=\"4242\",rank=\"3\"} 7"));
    assert_true(has_line(text, "# TYPE npupool_pool_reserved_bytes gauge"));
    assert_true(has_line(
        text, "npupool_pool_reserved_bytes{pid=\"4242\",rank=\"3\",device=\"0\"} 1073741824"));
    assert_true(has_line(
        text, "npupool_pool_fragmentation_ratio{pid=\"4242\",rank=\"3\",device=\"0\"} 0.25"));
    assert_true(has_line(text, "# TYPE npupool_pool_allocations_total counter"));
    /* a counter's help is base/wire.h's meaning */
    assert_true(has_line(text, "# HELP npupool_pool_allocations_total allocations served by the "
                               "pool"));
    assert_true(
        has_line(text, "npupool_pool_allocations_total{pid=\"4242\",rank=\"3\",device=\"0\"} 10"));
    assert_true(has_line(
        text, "npupool_fallback_allocations_total{pid=\"4242\",rank=\"3\",device=\"0\"} 2"));
    assert_true(has_line(text, "npupool_refusals_total{pid=\"4242\",rank=\"3\",device=\"0\"} 1"));
    /* the unknown device has counters but no pool series */
    assert_true(has_line(
        text, "npupool_invalid_frees_total{pid=\"4242\",rank=\"3\",device=\"unknown\"} 3"));
    assert_false(strstr(text, "npupool_pool_reserved_bytes{pid=\"4242\",rank=\"3\",device=\"unk"));
    /* one HELP and one TYPE per family, the TYPE right after the HELP, series after both, and
     * every counter's name ends in _total */
    int families = 0;
    for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
        if (!strncmp(l, "# TYPE ", 7)) continue;
        if (strncmp(l, "# HELP ", 7)) {
            assert_true(strncmp(l, "npupool_", 8) == 0); /* no other comment, no blank line */
            continue;
        }
        families++;
        char name[128];
        assert_int_equal(sscanf(l + 7, "%127s", name), 1);
        char help[160], type[160];
        snprintf(help, sizeof help, "# HELP %s ", name);
        snprintf(type, sizeof type, "# TYPE %s ", name);
        assert_int_equal(count_lines(text, help), 1);
        assert_int_equal(count_lines(text, type), 1);
        const char *next = strchr(l, '\n') + 1;
        assert_true(strncmp(next, type, strlen(type)) == 0);
        if (!strncmp(next + strlen(type), "counter", 7))
            assert_string_equal(name + strlen(name) - 6, "_total");
        /* the family's series follow as one group: none after another family began */
        const char *after = strchr(next, '\n') + 1;
        while (*after && !strncmp(after, name, strlen(name))) after = strchr(after, '\n') + 1;
        char series[160];
        snprintf(series, sizeof series, "%s{", name);
        assert_null(strstr(after, series));
    }
    assert_true(families >= 20);
}

static void test_format_edge_cases(void **state)
{
    (void)state;
    /* no device: only the process families */
    memset(&sample, 0, sizeof sample);
    sample.version = "v\"1\\2\n";
    sample.pid = 7;
    sample.rank = -1;
    size_t n = metrics_format(&sample, text, sizeof text);
    assert_int_equal(n, strlen(text));
    assert_true(
        has_line(text, "npupool_info{pid=\"7\",rank=\"unknown\",version=\"v\\\"1\\\\2\\n\"} 1"));
    assert_null(strstr(text, "pool_reserved_bytes"));
    assert_null(strstr(text, "device="));
    /* snprintf's contract: the full length, a terminated prefix */
    sample_two_devices();
    size_t full = metrics_format(&sample, NULL, 0);
    assert_true(full > 1000);
    assert_int_equal(metrics_format(&sample, text, sizeof text), full);
    char small[100];
    memset(small, 'x', sizeof small);
    assert_int_equal(metrics_format(&sample, small, sizeof small), full);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_true(strncmp(small, text, sizeof small - 1) == 0);
    /* ratios: shortest decimals, '.', read back exactly enough */
    const double ratios[] = {0, 1, 0.5, 6.71234567e-7, 0.999999999999, 1.0 / 3};
    const char *want[] = {"0", "1", "0.5", NULL, NULL, NULL};
    for (size_t i = 0; i < sizeof ratios / sizeof ratios[0]; i++) {
        sample.devices[0].fragmentation = ratios[i];
        metrics_format(&sample, text, sizeof text);
        const char *p = strstr(text, "npupool_pool_fragmentation_ratio{");
        assert_non_null(p);
        p = strchr(p, ' ') + 1;
        char v[64];
        assert_int_equal(sscanf(p, "%63s", v), 1);
        if (want[i]) assert_string_equal(v, want[i]);
        assert_null(strchr(v, ','));
        assert_true(fabs(strtod(v, NULL) - ratios[i]) < 1e-14);
    }
    sample.devices[0].fragmentation = NAN;
    metrics_format(&sample, text, sizeof text);
    assert_non_null(strstr(text, "device=\"0\"} NaN\n"));
}

/* ---- the file ---------------------------------------------------------------------------------- */

static char metrics_path[512];

static int setup(void **state)
{
    (void)state;
    rt_reset_all();
    rt_config_defaults("mx");
    rt_cfg.signal = 0;
    rt_cfg.warn_ratio = 0;
    rt_cfg.critical_ratio = 0;
    snprintf(metrics_path, sizeof metrics_path, "%s/npupool-%%p.prom", rt_dir);
    rt_cfg.metrics = metrics_path;
    rt_cfg.metrics_interval_s = 0.05;
    ledger_init(&(ledger_config_t){.backtrace_depth = 2});
    return 0;
}

/* The expanded path of this process. */
static const char *file_path(void)
{
    static char p[600];
    snprintf(p, sizeof p, "%s/npupool-%d.prom", rt_dir, (int)getpid());
    return p;
}

static int read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
    return (int)n;
}

/* The value of the series whose line starts with `series` ("name{labels}"), or NAN. */
static double value_of(const char *t, const char *series)
{
    const char *p = strstr(t, series);
    return p ? strtod(p + strlen(series), NULL) : NAN;
}

static char series_buf[256];
static const char *series(const char *name, int device)
{
    snprintf(series_buf, sizeof series_buf, "npupool_%s{pid=\"%d\",rank=\"unknown\",device=\"%d\"}",
             name, (int)getpid(), device);
    return series_buf;
}

/* Wait until the file shows `want` allocated bytes on device 0. */
static int wait_allocated(double want, char *buf, size_t len)
{
    for (int t = 0; t < 5000; t += 10) {
        if (read_file(file_path(), buf, len) > 0 &&
            value_of(buf, series("pool_allocated_bytes", 0)) == want)
            return 1;
        rt_sleep_ms(10);
    }
    return 0;
}

static void test_file_follows_the_pool(void **state)
{
    (void)state;
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    rt_init();
    rt_make_pool(0, (size_t)64 << 20);
    report_start_background();
    static char buf[65536];
    assert_true(wait_allocated(0, buf, sizeof buf));
    uintptr_t a[10];
    for (int i = 0; i < 10; i++) a[i] = rt_alloc(0, 100000, ledger_stack_capture(0));
    pool_stats_t st;
    pool_get_stats(rt_pool[0], &st);
    assert_true(wait_allocated((double)st.allocated_bytes, buf, sizeof buf));
    assert_true(value_of(buf, series("pool_reserved_bytes", 0)) == (double)st.reserved_bytes);
    assert_true(value_of(buf, series("pool_live_allocations", 0)) == 10);
    assert_true(value_of(buf, series("pool_allocations_total", 0)) == 10);
    for (int i = 0; i < 4; i++) rt_free(0, a[i]);
    pool_get_stats(rt_pool[0], &st);
    assert_true(wait_allocated((double)st.allocated_bytes, buf, sizeof buf));
    assert_true(value_of(buf, series("pool_frees_total", 0)) == 4);
    assert_true(value_of(buf, series("pool_largest_free_bytes", 0)) ==
                (double)st.largest_free_bytes);
    assert_true(fabs(value_of(buf, series("pool_fragmentation_ratio", 0)) - st.fragmentation) <
                1e-12);
    /* only the file: no temporary file left beside it */
    assert_int_equal(rt_count_files(".prom"), 1);
    assert_int_equal(rt_count_files(".tmp."), 0);
    /* finalize rewrites it with the state of that moment, also after the thread stopped */
    report_stop_background();
    for (int i = 4; i < 10; i++) rt_free(0, a[i]);
    report_start_background(); /* armed again */
    report_at_finalize();
    assert_true(read_file(file_path(), buf, sizeof buf) > 0);
    assert_true(value_of(buf, series("pool_allocated_bytes", 0)) == 0);
    assert_true(value_of(buf, series("pool_frees_total", 0)) == 10);
    /* ... the figures of the finalize report written just before it */
    cJSON *doc = rt_last_report();
    assert_non_null(doc);
    assert_string_equal(rt_str(doc, "trigger"), "finalize");
    const cJSON *dev = cJSON_GetArrayItem(rt_get(doc, "devices"), 0);
    rt_check_pool_consistency(dev);
    assert_true(value_of(buf, series("pool_free_bytes", 0)) == rt_num(dev, "pool.free_bytes"));
    assert_true(value_of(buf, series("pool_peak_allocated_bytes", 0)) ==
                rt_num(dev, "pool.peak_allocated_bytes"));
    assert_true(value_of(buf, series("pool_allocations_total", 0)) ==
                rt_num(dev, "counters.allocs"));
    assert_true(value_of(buf, series("refusals_total", 0)) == rt_num(dev, "counters.ooms"));
    char reports[128];
    snprintf(reports, sizeof reports, "npupool_reports_written_total{pid=\"%d\",rank=\"unknown\"}",
             (int)getpid());
    assert_true(value_of(buf, reports) >= 1);
    cJSON_Delete(doc);
    report_stop_background();
    unlink(file_path());
}

static void test_not_armed_writes_nothing(void **state)
{
    (void)state;
    rt_init(); /* configured, but report_start_background never ran */
    rt_make_pool(0, (size_t)64 << 20);
    report_at_finalize();
    assert_int_equal(rt_count_files(".prom"), 0);
}

/* A fork child is not armed (its pool figures are a copy of the parent's, and a pattern without
 * %p would overwrite the parent's file): its finalize writes no metrics file.  Interval 0: no
 * thread to fork around, the file is written at finalize only. */
static void test_fork_child_writes_nothing(void **state)
{
    (void)state;
    rt_cfg.metrics_interval_s = 0;
    rt_init();
    rt_make_pool(0, (size_t)64 << 20);
    report_start_background();
    report_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        report_fork_child();
        report_at_finalize();
        _exit(0);
    }
    report_fork_parent();
    assert_true(pid > 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(rt_count_files(".prom"), 0); /* the interval is 0: nothing yet */
    char child_file[600];
    snprintf(child_file, sizeof child_file, "%s/npupool-%d.prom", rt_dir, (int)pid);
    assert_int_equal(access(child_file, F_OK), -1);
    report_at_finalize();
    assert_int_equal(access(file_path(), F_OK), 0);
    assert_int_equal(rt_count_files(".prom"), 1);
    report_stop_background();
    unlink(file_path());
}

static void test_unwritable_path_one_line(void **state)
{
    (void)state;
    snprintf(metrics_path, sizeof metrics_path, "%s/no-such-dir/m.prom", rt_dir);
    rt_init();
    rt_make_pool(0, (size_t)64 << 20);
    char err[4096];
    rt_stderr_begin();
    report_start_background();
    rt_sleep_ms(400); /* about 8 rewrites tried */
    report_stop_background();
    int lines = rt_stderr_end(err, sizeof err);
    print_message("# %s", err);
    assert_int_equal(lines, 1);
    assert_non_null(strstr(err, "cannot write the metrics file "));
    assert_non_null(strstr(err, "no-such-dir/m.prom (create: No such file or directory)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_lines),
        cmocka_unit_test(test_format_edge_cases),
        cmocka_unit_test_setup(test_file_follows_the_pool, setup),
        cmocka_unit_test_setup(test_not_armed_writes_nothing, setup),
        cmocka_unit_test_setup(test_fork_child_writes_nothing, setup),
        cmocka_unit_test_setup(test_unwritable_path_one_line, setup),
    };
    return cmocka_run_group_tests(tests, rt_group_setup, rt_group_teardown);
}
