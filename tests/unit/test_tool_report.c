/* tests/unit/test_tool_report.c — the CLI's report reader (tools/report_read.c) and its helpers:
 * a minimal valid report and the typed values read from it, every class of bad input (syntax,
 * truncation, schema version, missing and mistyped fields, inconsistent figures), units and
 * size parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../tools/report.h"
#include "../../tools/tools.h"

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

static int parse(const char *s, report_t *r) { return report_parse("mem", s, strlen(s), r, 1); }

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
    assert_string_equal(rep_site_label(&r.leaks[0], buf, sizeof buf), "x+0x1234");
    assert_string_equal(rep_frame_label(&r.leaks[0].frames[1], buf, sizeof buf), "main");
    report_release(&r);
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
        assert_int_equal(report_parse("mem", GOOD, n, &r, 1), 2);
}

static void test_units(void **state)
{
    (void)state;
    char b[TOOL_UNITS_LEN];
    assert_string_equal(tool_bytes(b, 0), "0 B");
    assert_string_equal(tool_bytes(b, 1023), "1023 B");
    assert_string_equal(tool_bytes(b, 1024), "1.0 KiB");
    assert_string_equal(tool_bytes(b, 1536ull << 20), "1.5 GiB");
    assert_string_equal(tool_bytes(b, (1ull << 20) - 1), "1.0 MiB");
    assert_string_equal(tool_sbytes(b, -2048), "-2.0 KiB");
    assert_string_equal(tool_sbytes(b, 5), "+5 B");
    uint64_t v;
    assert_int_equal(tool_parse_bytes("12G", &v), 0);
    assert_int_equal(v, 12ull << 30);
    assert_int_equal(tool_parse_bytes("1.5MiB", &v), 0);
    assert_int_equal(v, 3ull << 19);
    assert_int_equal(tool_parse_bytes("0x40", &v), 0);
    assert_int_equal(v, 64);
    assert_int_equal(tool_parse_bytes("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(tool_parse_bytes("-1", &v), -1);
    assert_int_equal(tool_parse_bytes("1.5", &v), -1);
    assert_int_equal(tool_parse_bytes("12Q", &v), -1);
    assert_int_equal(tool_parse_bytes("", &v), -1);
    assert_int_equal(tool_parse_bytes("99999999999T", &v), -1);
    assert_int_equal(tool_parse_u64("10", &v), 0);
    assert_int_equal(tool_parse_u64("1e3", &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
