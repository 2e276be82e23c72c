/* tests/unit/test_tool_report.c — the CLI's report reader (tools/report_read.c) and its helpers:
 * a minimal valid report and the typed values read from it, every class of bad input (syntax,
 * truncation, schema version, missing and mistyped fields, inconsistent figures, device ids),
 * exact integers up to 2^64 - 1 (tools/jsonscan.c) and the byte-level pre-check that stops
 * hostile input at its first bad byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonscan.h"
#include "report_read.h"
#include "site.h"
#include "tools.h"

#define POOL                                                                                       \
    "\"pool\":{\"reserved_bytes\":1024,\"allocated_bytes\":256,\"free_bytes\":768,\"largest_free_" \
    "bytes\":512,"                                                                                 \
    "\"fragmentation\":0.3333333333,\"base\":\"0x7f0000000000\"}"
#define GOOD                                                                                     \
    "{\"schema\":\"npupool-report/1\",\"trigger\":\"exit\",\"process\":{\"pid\":12,\"exe\":\"/"  \
    "bin/x\","                                                                                   \
    "\"cmdline\":[\"/bin/x\",\"-v\"],\"uptime_s\":2.5},\"devices\":[{\"device\":0," POOL ","     \
    "\"buckets\":[{\"min_bytes\":0,\"max_bytes\":1024,\"live_blocks\":1,\"live_bytes\":256,"     \
    "\"free_blocks\":2,"                                                                         \
    "\"free_bytes\":768},{\"min_bytes\":1025,\"max_bytes\":null}],"                              \
    "\"free_map\":[[256,256],[512,512]],\"free_map_omitted\":0,\"counters\":{\"allocs\":3,"      \
    "\"frees\":2}},"                                                                             \
    "{\"device\":1,\"pool\":null}],"                                                             \
    "\"leaks\":[{\"device\":0,\"count\":1,\"bytes\":200,\"granted_bytes\":256,\"stack_id\":7,"   \
    "\"growth\":{\"count\":-1,\"bytes\":-100},\"frames\":[{\"function\":null,\"module\":\"/bin/" \
    "x\","                                                                                       \
    "\"offset\":4660,\"file\":null,\"line\":null,\"build_id\":\"ab\"},{\"function\":\"main\","   \
    "\"line\":9}]}]}"

static int parse(const char *s, report_t *r)
{
    return report_read_buffer("mem", s, strlen(s), r, 1);
}

static void test_good(void **state)
{
    (void)state;
    report_t r;
    assert_int_equal(parse(GOOD, &r), 0);
    assert_string_equal(r.trigger, "exit");
    assert_int_equal(r.pid, 12);
    assert_string_equal(r.cmdline, "/bin/x -v");
    assert_true(r.uptime_s == 2.5);
    assert_int_equal(r.ndevices, 2);
    assert_int_equal(r.devices[0].has_pool, 1);
    assert_int_equal(r.devices[1].has_pool, 0);
    assert_int_equal(r.devices[0].base, 0x7f0000000000ull);
    assert_int_equal(r.devices[0].nbuckets, 2);
    assert_int_equal(r.devices[0].buckets[1].hi, UINT64_MAX);
    assert_int_equal(r.devices[0].nfree_map, 2);
    assert_int_equal(r.devices[0].free_map[1].size, 512);
    assert_int_equal(r.devices[0].ncounters, 2);
    assert_int_equal(r.nleaks, 1);
    assert_string_equal(r.leaks[0].stack_id, "7");
    assert_int_equal(r.leaks[0].growth_bytes, -100);
    assert_int_equal(r.leaks[0].nframes, 2);
    assert_null(r.leaks[0].frames[0].function);
    assert_int_equal(r.leaks[0].frames[0].offset, 4660);
    char buf[128];
    assert_string_equal(site_label(&r.leaks[0], buf, sizeof buf), "x+0x1234");
    assert_string_equal(site_frame_label(&r.leaks[0].frames[1], buf, sizeof buf), "main");
    report_read_release(&r);
}

/* Replace the first occurrence of `from` in GOOD by `to` and expect a refusal. */
static void expect_bad(const char *from, const char *to)
{
    char doc[4096];
    const char *g = GOOD;
    const char *at = strstr(g, from);
    if (at == NULL) fail_msg("fixture text not found: %s", from);
    snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - g), g, to, at + strlen(from));
    report_t r;
    if (parse(doc, &r) != 2) fail_msg("accepted: %s -> %s", from, to);
    assert_null(r.root);
}

static void test_bad(void **state)
{
    (void)state;
    expect_bad("npupool-report/1", "npupool-report/2"); /* other schema version */
    expect_bad("\"schema\":\"npupool-report/1\",", ""); /* no schema */
    expect_bad("\"trigger\":\"exit\",", "");            /* missing required */
    expect_bad("\"pid\":12", "\"pid\":\"12\"");         /* wrong type */
    expect_bad("\"reserved_bytes\":1024", "\"reserved_bytes\":-1");
    expect_bad("\"reserved_bytes\":1024", "\"reserved_bytes\":1.5");
    expect_bad("\"fragmentation\":0.3333333333", "\"fragmentation\":1.5");
    expect_bad("\"largest_free_bytes\":512", "\"largest_free_bytes\":5120"); /* > free_bytes */
    expect_bad("[256,256]", "[256]");
    expect_bad("[256,256]", "[256,0]");
    expect_bad("\"counters\":{\"allocs\":3", "\"counters\":{\"allocs\":\"3\"");
    expect_bad("\"frames\":[{", "\"frames\":[7,{");
    expect_bad("\"line\":9", "\"line\":\"nine\"");
    expect_bad("\"growth\":{\"count\":-1,", "\"growth\":{");
    expect_bad("{\"device\":1,\"pool\":null}", "{\"device\":1}");
    expect_bad("\"leaks\":[", "\"leaks\":{\"x\":[");
    expect_bad("\"devices\":[", "\"devices\":[[],");
    report_t r;
    assert_int_equal(parse("", &r), 2);
    assert_int_equal(parse("[1,2]", &r), 2);
    assert_int_equal(parse("{\"schema\":", &r), 2); /* truncated */
    assert_int_equal(parse(GOOD " x", &r), 2);      /* trailing data */
    assert_int_equal(parse("{\"a\":tru}", &r), 2);  /* syntax */
    char deep[5000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    assert_int_equal(parse(deep, &r), 2); /* nesting limit, not a stack overflow */
    /* A truncated copy of GOOD at every length fails cleanly. */
    for (size_t n = 1; n < strlen(GOOD); n += 7)
        assert_int_equal(report_read_buffer("mem", GOOD, n, &r, 1), 2);
}

/* GOOD with `from` replaced by `to`, parsed; returns the reader's answer. */
static int parse_edited(const char *from, const char *to, report_t *r)
{
    char doc[4096];
    const char *at = strstr(GOOD, from);
    if (at == NULL) fail_msg("fixture text not found: %s", from);
    snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
    return parse(doc, r);
}

#define MAX64 "18446744073709551615"

static void test_exact_integers(void **state)
{
    (void)state;
    report_t r;
    /* every unsigned field up to 2^64 - 1, exactly; signed growth down to -2^63 */
    assert_int_equal(
        parse_edited("\"reserved_bytes\":1024,\"allocated_bytes\":256,\"free_bytes\":768",
                     "\"reserved_bytes\":" MAX64 ",\"allocated_bytes\":18446744073709551614,"
                     "\"free_bytes\":9007199254740993",
                     &r),
        0);
    assert_true(r.devices[0].reserved == UINT64_MAX);
    assert_true(r.devices[0].allocated == UINT64_MAX - 1);
    assert_true(r.devices[0].free_bytes == 9007199254740993ull); /* 2^53 + 1: no double holds it */
    report_read_release(&r);
    assert_int_equal(parse_edited("\"bytes\":200", "\"bytes\":" MAX64, &r), 0);
    assert_true(r.leaks[0].bytes == UINT64_MAX);
    report_read_release(&r);
    assert_int_equal(parse_edited("\"stack_id\":7", "\"stack_id\":" MAX64, &r), 0);
    assert_string_equal(r.leaks[0].stack_id, MAX64);
    report_read_release(&r);
    assert_int_equal(parse_edited("\"bytes\":-100", "\"bytes\":-9223372036854775808", &r), 0);
    assert_true(r.leaks[0].growth_bytes == INT64_MIN);
    report_read_release(&r);
    assert_int_equal(parse_edited("[512,512]", "[512,18446744073709551103]", &r), 0);
    assert_true(r.devices[0].free_map[1].size == UINT64_MAX - 512);
    report_read_release(&r);
    assert_int_equal(parse_edited("\"allocs\":3", "\"allocs\":" MAX64, &r), 0);
    assert_true(r.devices[0].counters[0].value == UINT64_MAX);
    report_read_release(&r);
    /* integers written another way are integers; "-0" is 0 */
    assert_int_equal(parse_edited("\"bytes\":200", "\"bytes\":2.0e2", &r), 0);
    assert_int_equal(r.leaks[0].bytes, 200);
    report_read_release(&r);
    assert_int_equal(parse_edited("\"count\":1,", "\"count\":-0,", &r), 0);
    assert_int_equal(r.leaks[0].count, 0);
    report_read_release(&r);
    /* an oom report's request near SIZE_MAX (issue 8, item 5) */
    assert_int_equal(parse_edited("]}]}", "]}],\"oom\":{\"requested_bytes\":" MAX64 "}}", &r), 0);
    assert_int_equal(r.oom.present, 1);
    assert_true(r.oom.requested == UINT64_MAX);
    /* printed back (symbolize) as written, not as 1.8446744073709552e+19 */
    report_read_keep_literals(&r);
    char *text = cJSON_PrintUnformatted(r.root);
    assert_non_null(strstr(text, "\"requested_bytes\":" MAX64));
    assert_non_null(strstr(text, "\"fragmentation\":0.3333333333"));
    cJSON_free(text);
    report_read_release(&r);
    /* not exact non-negative integers: refused */
    static const char *const bad[] = {
        "18446744073709551616", "1.8446744073709552e+19", "1e20", "200.5", "2e-1", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char to[64];
        snprintf(to, sizeof to, "\"bytes\":%s", bad[i]);
        if (parse_edited("\"bytes\":200", to, &r) != 2) fail_msg("accepted bytes %s", bad[i]);
    }
    assert_int_equal(parse_edited("\"bytes\":-100", "\"bytes\":-9223372036854775809", &r), 2);
    /* device ids: -1 (unknown) or 0..63 */
    assert_int_equal(parse_edited("{\"device\":1,", "{\"device\":-1,", &r), 0);
    report_read_release(&r);
    assert_int_equal(parse_edited("{\"device\":1,", "{\"device\":64,", &r), 2);
    assert_int_equal(parse_edited("{\"device\":1,", "{\"device\":-2,", &r), 2);
}

/* Numbers inside strings and keys, escaped quotes, nesting: the literals stay in step. */
static void test_literals_in_step(void **state)
{
    (void)state;
    report_t r;
    assert_int_equal(parse_edited("\"trigger\":\"exit\",",
                                  "\"trigger\":\"exit\",\"x\\\"1\":[12345678901234567,\"9 8\\\"7\","
                                  "{\"18\":[1e400,-5.5,[[0.1]]]}],",
                                  &r),
                     0);
    assert_true(r.devices[0].reserved == 1024);
    report_read_release(&r);
    assert_int_equal(
        parse_edited("\"exe\":\"/bin/x\"", "\"exe\":\"/bin/x 12345678901234567890\"", &r), 0);
    assert_string_equal(r.exe, "/bin/x 12345678901234567890");
    report_read_release(&r);
    assert_int_equal(parse_edited("\"bytes\":200", "\"bytes\":12345678901234567890", &r), 0);
    assert_true(r.leaks[0].bytes == 12345678901234567890ull);
    report_read_release(&r);
}

static void test_jsonscan_integer(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int want, neg;
        uint64_t mag;
    } cases[] = {
        {"0", JSONSCAN_INT, 0, 0},
        {"-0", JSONSCAN_INT, 1, 0},
        {MAX64, JSONSCAN_INT, 0, UINT64_MAX},
        {"-" MAX64, JSONSCAN_INT, 1, UINT64_MAX},
        {"18446744073709551616", JSONSCAN_RANGE, 0, 0},
        {"1.8446744073709551615e19", JSONSCAN_INT, 0, UINT64_MAX},
        {"1.8446744073709552e+19", JSONSCAN_RANGE, 0, 0},
        {"4e3", JSONSCAN_INT, 0, 4000},
        {"4E+3", JSONSCAN_INT, 0, 4000},
        {"120.000", JSONSCAN_INT, 0, 120},
        {"120.5", JSONSCAN_FRACTION, 0, 0},
        {"1200e-2", JSONSCAN_INT, 0, 12},
        {"1250e-2", JSONSCAN_FRACTION, 0, 0},
        {"0.000e99999999999", JSONSCAN_INT, 0, 0},
        {"1e99999999999", JSONSCAN_RANGE, 0, 0},
        {"1e-99999999999", JSONSCAN_FRACTION, 0, 0},
        {"00012", JSONSCAN_INT, 0, 12},
        {"1.", JSONSCAN_INT, 0, 1},
        {"-", JSONSCAN_FRACTION, 0, 0},
        {"1e", JSONSCAN_FRACTION, 0, 0},
        {"1.2.3", JSONSCAN_FRACTION, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int neg;
        uint64_t mag;
        int k = jsonscan_integer(cases[i].text, strlen(cases[i].text), &neg, &mag);
        if (k != cases[i].want) fail_msg("%s: %d, expected %d", cases[i].text, k, cases[i].want);
        if (k == JSONSCAN_INT && (neg != cases[i].neg || mag != cases[i].mag))
            fail_msg("%s: wrong value", cases[i].text);
    }
}

/* The pre-check: where it stops and why; pieces give the same answer as the whole. */
static void test_jsonscan_feed(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t len;
        int why;
        size_t at;
    } cases[] = {
        {GOOD, sizeof GOOD - 1, JSONSCAN_OK, 0},
        {" \n{\"a\":\"\xc3\xa9\\u0001\\\"\"}", 0, JSONSCAN_OK, 0},
        {"\0\0\0\0", 4, JSONSCAN_NUL, 0},
        {"{\"a\":\"x\0\"}", 10, JSONSCAN_NUL, 7},
        {"{\"a\":\"x\x01\"}", 0, JSONSCAN_CONTROL, 7},
        {"  [1,2]", 0, JSONSCAN_NOT_OBJECT, 2},
        {"this is not json", 0, JSONSCAN_NOT_OBJECT, 0},
        {"{\"a\": 12x}", 0, JSONSCAN_BYTE, 8},
        {"{\"a\": \x89PNG}", 0, JSONSCAN_BYTE, 6},
        {"{\"a\": 1}\x7f", 0, JSONSCAN_BYTE, 8},
        {"{\"a\": 1} {", 0, JSONSCAN_TRAILING, 9},
        {"{\"a\": \"}\"} \n\t\r", 0, JSONSCAN_OK, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
        jsonscan_t whole = {0}, bytewise = {0};
        int rc = jsonscan_feed(&whole, cases[i].text, len);
        for (size_t n = 1; n <= len && jsonscan_feed(&bytewise, cases[i].text, n) == 0; n++) {
        }
        if (whole.why != cases[i].why)
            fail_msg("case %zu: why %d, expected %d", i, whole.why, cases[i].why);
        assert_int_equal(rc, cases[i].why ? -1 : 0);
        assert_int_equal(bytewise.why, whole.why);
        if (cases[i].why) {
            assert_int_equal(whole.bad, cases[i].at);
            assert_int_equal(bytewise.bad, cases[i].at);
        }
    }
    /* cJSON's nesting limit: 1000 levels pass both, 1001 stop at the 1001st bracket */
    static char deep[2100];
    for (int levels = 1000; levels <= 1001; levels++) {
        size_t n = 0;
        n += (size_t)snprintf(deep, sizeof deep, "{\"a\":");
        memset(deep + n, '[', (size_t)levels - 1);
        n += (size_t)levels - 1;
        memset(deep + n, ']', (size_t)levels - 1);
        n += (size_t)levels - 1;
        deep[n++] = '}';
        jsonscan_t j = {0};
        int rc = jsonscan_feed(&j, deep, n);
        cJSON *tree = cJSON_ParseWithLength(deep, n);
        if (levels == 1000) {
            assert_int_equal(rc, 0);
            assert_non_null(tree);
        } else {
            assert_int_equal(j.why, JSONSCAN_DEPTH);
            assert_int_equal(j.bad, 5 + 999);
            assert_null(tree);
        }
        cJSON_Delete(tree);
    }
    /* random bytes stop within the first few */
    uint64_t s = 7;
    for (int round = 0; round < 100; round++) {
        unsigned char buf[4096];
        for (size_t i = 0; i < sizeof buf; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (unsigned char)(s >> 56);
        }
        buf[0] = '{';
        jsonscan_t j = {0};
        assert_int_equal(jsonscan_feed(&j, (const char *)buf, sizeof buf), -1);
        assert_true(j.bad < 512);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_exact_integers),
        cmocka_unit_test(test_literals_in_step),
        cmocka_unit_test(test_jsonscan_integer),
        cmocka_unit_test(test_jsonscan_feed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
