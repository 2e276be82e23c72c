/* tests/unit/test_base_parse.c — base/parse.h, base/fmt.h, base/path.h, base/rank.h: every value
 * people type is read one way (and nan, inf, fault signals and overflows are refused), every byte
 * count is printed with one rounding rule, path patterns expand the same everywhere. */
#define _GNU_SOURCE
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

#include "fmt.h"
#include "parse.h"
#include "path.h"
#include "rank.h"

static void test_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t want;
    } ok[] = {
        {"0", 0},
        {"123", 123},
        {"4K", 4096},
        {"4k", 4096},
        {"1.5G", 1610612736},
        {"64MiB", 64 << 20},
        {"2gb", (uint64_t)2 << 30},
        {"1T", (uint64_t)1 << 40},
        {"0x1000", 4096},
        {"18446744073709551615", UINT64_MAX},
        {"0xffffffffffffffff", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 1;
        assert_int_equal(parse_bytes(ok[i].text, &v), 0);
        assert_true(v == ok[i].want);
    }
    static const char *const bad[] = {
        "",          "-1", "+1",   " 1", "1.5", "nan",  "inf",  "1e3",
        "4Q",        "0x", "0x1g", "K",  "16E", "2e30", "1KB0", "18446744073709551616",
        "1.0000001K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        if (parse_bytes(bad[i], &v) == 0) fail_msg("parse_bytes accepted \"%s\"", bad[i]);
        assert_true(v == 7);
    }
}

static void test_numbers(void **state)
{
    (void)state;
    double d;
    assert_int_equal(parse_double("0.85", &d), 0);
    assert_true(d == 0.85);
    assert_int_equal(parse_double("1e-3", &d), 0);
    static const char *const bad[] = {"nan",   "NaN", "inf", "-inf", "infinity", "1e999",
                                      "0x1p3", "",    "1,5", "1.5s", " 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (parse_double(bad[i], &d) == 0) fail_msg("parse_double accepted \"%s\"", bad[i]);
    uint64_t u;
    assert_int_equal(parse_u64("42", &u), 0);
    assert_true(u == 42);
    assert_int_equal(parse_u64("-1", &u), -1);
    assert_int_equal(parse_u64("99999999999999999999", &u), -1);
    int b;
    assert_int_equal(parse_bool("ON", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(parse_bool("no", &b), 0);
    assert_int_equal(b, 0);
    assert_int_equal(parse_bool("maybe", &b), -1);
}

static void test_signals(void **state)
{
    (void)state;
    int s;
    assert_int_equal(parse_signal("USR2", &s), 0);
    assert_int_equal(s, SIGUSR2);
    assert_int_equal(parse_signal("sigusr1", &s), 0);
    assert_int_equal(s, SIGUSR1);
    assert_int_equal(parse_signal("12", &s), 0);
    assert_int_equal(s, 12);
    assert_int_equal(parse_signal("none", &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(parse_signal("0", &s), 0);
    assert_int_equal(s, 0);
    /* The fault signals and the uncatchable ones, by name and by number. */
    static const int refused[] = {SIGSEGV, SIGBUS, SIGFPE,  SIGILL, SIGABRT,
                                  SIGTRAP, SIGSYS, SIGKILL, SIGSTOP};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char num[8];
        snprintf(num, sizeof num, "%d", refused[i]);
        assert_int_equal(parse_signal(num, &s), -2);
        const char *name = parse_signal_name(refused[i]);
        assert_non_null(name);
        assert_int_equal(parse_signal(name, &s), -2);
        assert_int_equal(parse_signal(name + 3, &s), -2);
    }
    assert_int_equal(parse_signal("SIGBOGUS", &s), -1);
    assert_int_equal(parse_signal("999", &s), -1);
    assert_string_equal(parse_signal_name(SIGUSR2), "SIGUSR2");
}

static void test_closest(void **state)
{
    (void)state;
    static const char *const names[] = {"NPUPOOL_RATIO", "NPUPOOL_POOL_BYTES", "NPUPOOL_REPORT",
                                        "NPUPOOL_REPORT_INTERVAL"};
    assert_string_equal(parse_closest("NPUPOOL_RATO", names, 4), "NPUPOOL_RATIO");
    assert_string_equal(parse_closest("NPUPOOL_REPORT_INTERVL", names, 4),
                        "NPUPOOL_REPORT_INTERVAL");
    assert_string_equal(parse_closest("npupool_pool_bytes", names, 4), "NPUPOOL_POOL_BYTES");
    assert_null(parse_closest("NPUPOOL_SOMETHING_ELSE_ENTIRELY", names, 4));
}

static void test_fmt(void **state)
{
    (void)state;
    char b[FMT_BYTES_LEN];
    assert_string_equal(fmt_bytes(b, 0), "0 B");
    assert_string_equal(fmt_bytes(b, 1023), "1023 B");
    assert_string_equal(fmt_bytes(b, 1024), "1.0 KiB");
    assert_string_equal(fmt_bytes(b, 1536), "1.5 KiB");
    assert_string_equal(fmt_bytes(b, 1048575), "1.0 MiB"); /* never "1024.0 KiB" */
    assert_string_equal(fmt_bytes(b, (uint64_t)51 << 30), "51.0 GiB");
    assert_string_equal(fmt_bytes(b, UINT64_MAX), "16.0 EiB");
    assert_string_equal(fmt_sbytes(b, -512), "-512 B");
    assert_string_equal(fmt_sbytes(b, 0), "0 B");
    assert_string_equal(fmt_sbytes(b, INT64_MIN), "-8.0 EiB");
    char p[32];
    assert_int_equal(fmt_u64(p, UINT64_MAX), 20);
    assert_memory_equal(p, "18446744073709551615", 20);
    assert_int_equal(fmt_hex(p, 0), 3);
    assert_memory_equal(p, "0x0", 3);
}

static void test_path(void **state)
{
    (void)state;
    char out[256], want[256];
    setenv("RANK", "3", 1);
    assert_int_equal(path_expand("a-%p-%n-%r-%%-%x.json", 7, out, sizeof out), 0);
    snprintf(want, sizeof want, "a-%d-7-3-%%-%%x.json", (int)getpid());
    assert_string_equal(out, want);
    unsetenv("RANK");
    setenv("LOCAL_RANK", "5", 1);
    assert_int_equal(rank_get(), 5);
    assert_int_equal(path_expand("%r", 1, out, sizeof out), 0);
    assert_string_equal(out, "5");
    unsetenv("LOCAL_RANK");
    setenv("RANK", "node-3", 1); /* not a number: unknown */
    assert_int_equal(rank_get(), -1);
    unsetenv("RANK");
    assert_int_equal(path_expand("%r", 1, out, sizeof out), 0);
    assert_string_equal(out, "0");
    assert_int_equal(path_expand("t%t", 1, out, sizeof out), 0);
    assert_int_equal(strlen(out), 1 + 16); /* t + YYYYmmddTHHMMSSZ */
    assert_true(out[9] == 'T' && out[16] == 'Z');
    char year[5] = {0};
    memcpy(year, out + 1, 4);
    assert_true(atoi(year) >= 2024);
    assert_int_equal(path_expand("0123456789-%p", 1, out, 8), -1); /* does not fit */
    assert_int_equal(path_expand("", 1, out, sizeof out), -1);     /* empty */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),   cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_signals), cmocka_unit_test(test_closest),
        cmocka_unit_test(test_fmt),     cmocka_unit_test(test_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
