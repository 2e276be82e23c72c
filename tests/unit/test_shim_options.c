/* tests/unit/test_shim_options.c — shim/options.c: one table, parsed once, typed.
 *
 * Each case runs in a fork child (the parse happens once per process): the child sets the
 * environment, parses, and checks the typed configuration and the `npupool:` lines it printed.
 * Also: the README's variable table is exactly what the option table generates
 * (`test_shim_options --markdown` prints it; `make options-table` too).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "options.h"
#include "pool.h"

/* Run fn in a child with stderr in a pipe; returns the child's exit status, stderr into err. */
static int in_child(void (*fn)(void), char *err, size_t len)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        for (char **e = environ; *e;) { /* a clean slate: no NPUPOOL_* from the caller */
            if (!strncmp(*e, "NPUPOOL_", 8)) {
                char name[128];
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)n, *e);
                unsetenv(name);
            } else {
                e++;
            }
        }
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t n;
    while (used + 1 < len && (n = read(fds[0], err + used, len - used - 1)) > 0) used += (size_t)n;
    err[used] = 0;
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#define CHILD_CHECK(c)                                           \
    do {                                                         \
        if (!(c)) {                                              \
            fprintf(stderr, "CHECK %s line %d\n", #c, __LINE__); \
            _exit(1);                                            \
        }                                                        \
    } while (0)

static void child_defaults(void)
{
    options_init();
    const npupool_config_t *c = &npupool_config;
    CHILD_CHECK(c->ratio == 0.8 && c->pool_bytes == 0 && c->fallback == 1 && c->disable == 0);
    CHILD_CHECK(c->log_level == 1 && c->ledger.backtrace_depth == 16);
    CHILD_CHECK(c->report.signal == SIGUSR2 && c->report.interval_s == 0);
    CHILD_CHECK(c->report.warn_ratio == 0.85 && c->report.critical_ratio == 0.95);
    CHILD_CHECK(c->report.free_map_max == 4096 && c->report.oom_max == 10);
    CHILD_CHECK(!c->report.pattern[0] && !c->trace[0]);
    /* the virtual-memory pool, with the chunk `npupool replay` assumes by default */
    CHILD_CHECK(c->vmm == 1 && c->chunk_bytes == POOL_VMM_CHUNK_DEFAULT);
}

static void test_defaults_are_silent(void **state)
{
    (void)state;
    char err[4096];
    assert_int_equal(in_child(child_defaults, err, sizeof err), 0);
    assert_string_equal(err, "");
}

static void child_good_values(void)
{
    setenv("NPUPOOL_RATIO", "0.5", 1);
    setenv("NPUPOOL_POOL_BYTES", "1.5G", 1);
    setenv("NPUPOOL_FALLBACK", "off", 1);
    setenv("NPUPOOL_REPORT_SIGNAL", "SIGUSR1", 1);
    setenv("NPUPOOL_REPORT_INTERVAL", "0.5", 1);
    setenv("NPUPOOL_REPORT_OOM_MAX", "500000", 1); /* accepted here and used as such */
    setenv("NPUPOOL_REPORT", "/tmp/r-%p.json", 1);
    setenv("NPUPOOL_MODE", "observe", 1);
    setenv("NPUPOOL_PYTHON_FRAMES", "off", 1);
    options_init();
    const npupool_config_t *c = &npupool_config;
    CHILD_CHECK(c->mode == NPUPOOL_MODE_OBSERVE && c->ledger.python_frames == 0);
    CHILD_CHECK(c->ratio == 0.5 && c->pool_bytes == (size_t)3 << 29 && c->fallback == 0);
    CHILD_CHECK(c->report.signal == SIGUSR1 && c->report.interval_s == 0.5);
    CHILD_CHECK(c->report.oom_max == 500000 && !strcmp(c->report.pattern, "/tmp/r-%p.json"));
}

static void test_good_values(void **state)
{
    (void)state;
    char err[4096];
    assert_int_equal(in_child(child_good_values, err, sizeof err), 0);
    assert_string_equal(err, "");
}

static void child_bad_values(void)
{
    static const char *const bad[][2] = {
        {"NPUPOOL_RATIO", "nan"},
        {"NPUPOOL_POOL_BYTES", "nan"},
        {"NPUPOOL_REPORT_INTERVAL", "1e-300"},
        {"NPUPOOL_REPORT_SIGNAL", "8"},
        {"NPUPOOL_REPORT_FREE_MAP", "-5"},
        {"NPUPOOL_REPORT_SYMBOLS", "maybe"},
        {"NPUPOOL_BACKTRACE_DEPTH", "500"},
        {"NPUPOOL_WARN_RATIO", "inf"},
        {"NPUPOOL_REPORT_OOM_MAX", "5000000"},
        {"NPUPOOL_MODE", "watch"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) setenv(bad[i][0], bad[i][1], 1);
    options_init();
    options_init(); /* once: no second message */
    const npupool_config_t *c = &npupool_config;
    CHILD_CHECK(c->ratio == 0.8 && c->pool_bytes == 0 && c->report.interval_s == 0);
    CHILD_CHECK(c->report.signal == SIGUSR2 && c->report.free_map_max == 4096);
    CHILD_CHECK(c->report.symbols == 1 && c->ledger.backtrace_depth == 16);
    CHILD_CHECK(c->report.warn_ratio == 0.85 && c->report.oom_max == 10);
    CHILD_CHECK(c->mode == NPUPOOL_MODE_POOL && c->ledger.python_frames == 1);
}

static void test_bad_values_one_line_each(void **state)
{
    (void)state;
    char err[8192];
    assert_int_equal(in_child(child_bad_values, err, sizeof err), 0);
    print_message("%s", err);
    assert_int_equal(lines(err), 10);
    assert_non_null(
        strstr(err, "NPUPOOL_MODE=\"watch\" is not valid (not a mode (pool, observe))"));
    assert_non_null(strstr(err, "NPUPOOL_RATIO=\"nan\" is not valid (not a finite number)"));
    assert_non_null(strstr(err, "NPUPOOL_REPORT_SIGNAL=\"8\" is not valid (a fault"));
    assert_non_null(strstr(err, "NPUPOOL_REPORT_INTERVAL=\"1e-300\" is not valid (outside"));
    assert_non_null(strstr(err, "NPUPOOL_REPORT_OOM_MAX=\"5000000\" is not valid (outside"));
    assert_non_null(strstr(err, "using the default 10"));
}

static void child_signal_names(void)
{
    setenv("NPUPOOL_REPORT_SIGNAL", "SIGSEGV", 1);
    options_init();
    CHILD_CHECK(npupool_config.report.signal == SIGUSR2);
}

static void child_signal_none(void)
{
    setenv("NPUPOOL_REPORT_SIGNAL", "none", 1);
    options_init();
    CHILD_CHECK(npupool_config.report.signal == 0);
}

static void test_signals(void **state)
{
    (void)state;
    char err[4096];
    assert_int_equal(in_child(child_signal_names, err, sizeof err), 0);
    assert_non_null(strstr(err, "NPUPOOL_REPORT_SIGNAL=\"SIGSEGV\" is not valid (a fault"));
    assert_int_equal(in_child(child_signal_none, err, sizeof err), 0);
    assert_string_equal(err, "");
}

static void child_small_pool(void)
{
    setenv("NPUPOOL_POOL_BYTES", "1M", 1);
    options_init();
    CHILD_CHECK(npupool_config.pool_bytes == 0);
}

static void test_pool_below_the_unit(void **state)
{
    (void)state;
    char err[4096];
    assert_int_equal(in_child(child_small_pool, err, sizeof err), 0);
    assert_non_null(
        strstr(err, "NPUPOOL_POOL_BYTES=\"1M\" is not valid (below the runtime's allocation unit "
                    "(2.0 MiB))"));
}

static void child_unknown(void)
{
    setenv("NPUPOOL_RATO", "0.5", 1);
    setenv("NPUPOOL_REPORT_INTERVL", "5", 1);
    setenv("NPUPOOL_SOMETHING_ENTIRELY_DIFFERENT", "1", 1);
    options_init();
    CHILD_CHECK(npupool_config.ratio == 0.8);
}

static void test_unknown_names(void **state)
{
    (void)state;
    char err[4096];
    assert_int_equal(in_child(child_unknown, err, sizeof err), 0);
    print_message("%s", err);
    assert_int_equal(lines(err), 3);
    assert_non_null(
        strstr(err, "NPUPOOL_RATO is not an npupool option (did you mean NPUPOOL_RATIO?)"));
    assert_non_null(strstr(err, "(did you mean NPUPOOL_REPORT_INTERVAL?)"));
    assert_non_null(strstr(err, "NPUPOOL_SOMETHING_ENTIRELY_DIFFERENT is not an npupool option; it "
                                "is ignored"));
}

static void child_level_first(void)
{
    setenv("NPUPOOL_RATIO", "2", 1);
    setenv("NPUPOOL_LOG", "error", 1); /* governs the warnings about every other option */
    options_init();
}

static void test_level_governs_warnings(void **state)
{
    (void)state;
    char err[4096];
    assert_int_equal(in_child(child_level_first, err, sizeof err), 0);
    assert_string_equal(err, "");
}

/* Every option appears in the report's config, by name, once. */
static int seen_count;
static void count_cb(void *ctx, const char *name, const char *value)
{
    (void)ctx;
    (void)value;
    if (!strncmp(name, "NPUPOOL_", 8)) seen_count++;
}

static void child_for_each(void)
{
    options_init();
    options_for_each(count_cb, NULL);
    CHILD_CHECK(seen_count >= 16);
}

static void test_for_each(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(in_child(child_for_each, err, sizeof err), 0);
}

/* The README's table between the markers is exactly the generated one. */
static void test_readme_table(void **state)
{
    (void)state;
    char *gen = NULL;
    size_t glen = 0;
    FILE *g = open_memstream(&gen, &glen);
    options_markdown(g);
    fclose(g);
    FILE *f = fopen("README.md", "r");
    if (!f) skip();
    char *readme = NULL;
    size_t rlen = 0, cap = 0;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (rlen + n + 1 > cap) readme = realloc(readme, cap = (rlen + n + 1) * 2);
        memcpy(readme + rlen, buf, n);
        rlen += n;
    }
    fclose(f);
    readme[rlen] = 0;
    const char *begin = strstr(readme, "<!-- options:begin -->\n");
    const char *end = strstr(readme, "<!-- options:end -->");
    if (!begin || !end) fail_msg("README.md has no <!-- options:begin/end --> markers");
    begin += strlen("<!-- options:begin -->\n");
    if ((size_t)(end - begin) != glen || memcmp(begin, gen, glen) != 0)
        fail_msg("README.md's variable table differs from the option table; run `make "
                 "options-table` and paste:\n%s",
                 gen);
    free(readme);
    free(gen);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--markdown")) {
        options_markdown(stdout);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_silent),
        cmocka_unit_test(test_good_values),
        cmocka_unit_test(test_bad_values_one_line_each),
        cmocka_unit_test(test_signals),
        cmocka_unit_test(test_pool_below_the_unit),
        cmocka_unit_test(test_unknown_names),
        cmocka_unit_test(test_level_governs_warnings),
        cmocka_unit_test(test_for_each),
        cmocka_unit_test(test_readme_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
