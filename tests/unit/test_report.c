/* tests/unit/test_report.c — report contents, growth, free map cap, oom reports, paths, failures.
 *
 * A real pool over a made-up address range plays the device; allocations are made "as the shim
 * does" (capture, pool_alloc, ledger_record_alloc) from named functions, some of them `static`
 * (this binary has no -rdynamic), and every report is read back with cJSON and checked: sites,
 * exact counts and bytes, function names and source lines, mutually consistent pool figures.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "buildid.h"
#include "clock.h"
#include "report_internal.h" /* report_write_deferred_oom: the reporter thread's call */
#include "report_test_util.h"
#include "version.h"

static int line_small, line_big, line_temp, line_oom;

__attribute__((noipa)) static uintptr_t leak_small(void)
{
    line_small = __LINE__ + 1;
    uint32_t sid = ledger_stack_capture(0);
    return rt_alloc(0, 1000, sid);
}

__attribute__((noipa)) uintptr_t leak_big(void) /* global: found in .symtab and .dynsym alike */
{
    line_big = __LINE__ + 1;
    uint32_t sid = ledger_stack_capture(0);
    return rt_alloc(0, (size_t)1 << 20, sid);
}

__attribute__((noipa)) static void temporary_work(void)
{
    for (int i = 0; i < 50; i++) {
        line_temp = __LINE__ + 1;
        uint32_t sid = ledger_stack_capture(0);
        uintptr_t a = rt_alloc(0, 4096 + (size_t)i, sid);
        rt_free(0, a);
    }
}

static int setup(void **state)
{
    (void)state;
    rt_reset_all();
    rt_config_defaults("report");
    ledger_init(&(ledger_config_t){.backtrace_depth = 16});
    rt_init();
    return 0;
}

static const cJSON *find_leak(const cJSON *doc, const char *function)
{
    const cJSON *l;
    cJSON_ArrayForEach(l, rt_get(doc, "leaks"))
    {
        const cJSON *f0 = cJSON_GetArrayItem(rt_get(l, "frames"), 0);
        const char *fn = rt_str(f0, "function");
        if (fn && !strcmp(fn, function)) return l;
    }
    return NULL;
}

static void check_frame0(const cJSON *leak, const char *function, int line)
{
    const cJSON *f0 = cJSON_GetArrayItem(rt_get(leak, "frames"), 0);
    assert_non_null(f0);
    assert_string_equal(rt_str(f0, "function"), function);
    assert_non_null(strstr(rt_str(f0, "module"), "test_report"));
    assert_true(rt_num(f0, "offset") > 0);
    assert_non_null(rt_str(f0, "build_id"));
    assert_non_null(rt_str(f0, "file"));
    const char *file = rt_str(f0, "file");
    assert_string_equal(file + strlen(file) - strlen("tests/unit/test_report.c"),
                        "tests/unit/test_report.c");
    assert_int_equal((int)rt_num(f0, "line"), line);
}

/* ---- contents ---------------------------------------------------------------------------------- */

static void test_exit_report_names_the_leaks(void **state)
{
    (void)state;
    rt_make_pool(0, (size_t)64 << 20);
    uintptr_t small[3], big[2];
    volatile int three = 3, two = 2; /* real loops: one call site each (no unrolling) */
    for (int i = 0; i < three; i++) small[i] = leak_small();
    for (int i = 0; i < two; i++) big[i] = leak_big();
    temporary_work();
    for (int i = 0; i < 3; i++) assert_int_not_equal(small[i], 0);
    for (int i = 0; i < 2; i++) assert_int_not_equal(big[i], 0);
    report_at_exit();
    cJSON *doc = rt_last_report();
    assert_non_null(doc);
    assert_string_equal(rt_str(doc, "schema"), "npupool-report/1");
    assert_string_equal(rt_str(doc, "trigger"), "exit");
    assert_int_equal((int)rt_num(doc, "process.pid"), getpid());
    assert_non_null(strstr(rt_str(doc, "process.exe"), "test_report"));
    assert_true(cJSON_IsArray(rt_get(doc, "process.cmdline")));
    assert_non_null(rt_str(doc, "process.hostname"));
    assert_non_null(rt_str(doc, "process.start_time"));
    assert_non_null(rt_str(doc, "process.dump_time"));
    assert_string_equal(rt_str(doc, "config.NPUPOOL_RATIO"), "0.8");
    assert_non_null(rt_str(doc, "config.NPUPOOL_REPORT"));
    assert_string_equal(rt_str(doc, "config.NPUPOOL_BACKTRACE_DEPTH"), "16");
    /* exactly the two planted sites, biggest first, exact figures */
    const cJSON *leaks = rt_get(doc, "leaks");
    assert_int_equal(cJSON_GetArraySize(leaks), 2);
    const cJSON *l0 = cJSON_GetArrayItem(leaks, 0), *l1 = cJSON_GetArrayItem(leaks, 1);
    assert_ptr_equal(find_leak(doc, "leak_big"), l0);
    assert_ptr_equal(find_leak(doc, "leak_small"), l1);
    assert_int_equal((long)rt_num(l0, "count"), 2);
    assert_int_equal((long)rt_num(l0, "bytes"), 2L << 20);
    assert_int_equal((long)rt_num(l0, "granted_bytes"), 2 * ((1L << 20) + 32));
    assert_int_equal((long)rt_num(l1, "count"), 3);
    assert_int_equal((long)rt_num(l1, "bytes"), 3000);
    assert_int_equal((long)rt_num(l1, "granted_bytes"), 3 * (1024 + 32));
    assert_int_equal((long)rt_num(l1, "growth.count"), 3); /* first report: growth = everything */
    assert_int_equal((long)rt_num(l1, "growth.bytes"), 3000);
    assert_int_equal((int)rt_num(l1, "device"), 0);
    assert_true(rt_num(l1, "oldest_age_s") >= 0);
    assert_string_equal(rt_str(l1, "entry_point"), "aclrtMalloc");
    assert_int_equal((long)rt_num(l1, "origins.pool"), 3);
    check_frame0(l0, "leak_big", line_big);
    check_frame0(l1, "leak_small", line_small);
    /* the second frame is this test function */
    const cJSON *f1 = cJSON_GetArrayItem(rt_get(l1, "frames"), 1);
    assert_string_equal(rt_str(f1, "function"), "test_exit_report_names_the_leaks");
    /* devices and consistent pool figures */
    const cJSON *devs = rt_get(doc, "devices");
    assert_int_equal(cJSON_GetArraySize(devs), 1);
    const cJSON *d0 = cJSON_GetArrayItem(devs, 0);
    assert_int_equal((int)rt_num(d0, "device"), 0);
    assert_int_equal((long)rt_num(d0, "pool.reserved_bytes"), 64L << 20);
    assert_int_equal((long)rt_num(d0, "pool.allocated_bytes"),
                     2 * ((1L << 20) + 32) + 3 * (1024 + 32));
    assert_int_equal((long)rt_num(d0, "pool.requested_bytes"), (2L << 20) + 3000);
    assert_int_equal((long)rt_num(d0, "pool.live_blocks"), 5);
    assert_true(rt_num(d0, "pool.peak_allocated_bytes") >= rt_num(d0, "pool.allocated_bytes"));
    assert_true(cJSON_IsTrue(rt_get(d0, "pool.snapshot_consistent")));
    assert_int_equal((long)rt_num(d0, "counters.allocs"), 55);
    assert_int_equal((long)rt_num(d0, "counters.frees"), 50);
    assert_int_equal((long)rt_num(d0, "live_allocations"), 5);
    assert_int_equal(cJSON_GetArraySize(rt_get(d0, "buckets")), POOL_NBUCKETS);
    rt_check_pool_consistency(d0);
    /* the live map names each block's site: 2 blocks of leak_big (index 0), 3 of leak_small (1) */
    const cJSON *lm = rt_get(d0, "live_map"), *e;
    assert_int_equal(cJSON_GetArraySize(lm), 5);
    int per_site[2] = {0, 0};
    cJSON_ArrayForEach(e, lm)
    {
        assert_int_equal(cJSON_GetArraySize(e), 3);
        int site = (int)cJSON_GetArrayItem(e, 2)->valuedouble;
        assert_true(site == 0 || site == 1);
        per_site[site]++;
        assert_int_equal((long)cJSON_GetArrayItem(e, 1)->valuedouble,
                         site == 0 ? (1L << 20) + 32 : 1024 + 32);
    }
    assert_int_equal(per_site[0], 2);
    assert_int_equal(per_site[1], 3);
    assert_null(rt_get(doc, "oom"));
    cJSON_Delete(doc);
    /* nothing half-written stays behind */
    assert_int_equal(rt_count_files(".tmp."), 0);
}

__attribute__((noipa)) static void make_leaks(int nsmall, int nbig, uintptr_t *big)
{
    for (int i = 0; i < nsmall; i++) leak_small();
    for (int i = 0; i < nbig; i++) big[i] = leak_big();
}

static void test_growth_between_reports(void **state)
{
    (void)state;
    /* Two frames (the leaking function and make_leaks): the test's own call sites do not matter. */
    ledger_init(&(ledger_config_t){.backtrace_depth = 2});
    rt_make_pool(0, (size_t)64 << 20);
    uintptr_t big[3];
    make_leaks(3, 3, big);
    assert_int_equal(report_write(WIRE_TRIGGER_INTERVAL, -1), 0);
    /* small grows by 2, big shrinks by 1, temporary allocations leave nothing */
    make_leaks(2, 0, big);
    rt_free(0, big[0]);
    temporary_work();
    assert_int_equal(report_write(WIRE_TRIGGER_INTERVAL, -1), 0);
    cJSON *doc = rt_last_report();
    assert_string_equal(rt_str(doc, "trigger"), "interval");
    const cJSON *s = find_leak(doc, "leak_small"), *b = find_leak(doc, "leak_big");
    assert_non_null(s);
    assert_non_null(b);
    assert_int_equal((long)rt_num(s, "count"), 5);
    assert_int_equal((long)rt_num(s, "growth.count"), 2);
    assert_int_equal((long)rt_num(s, "growth.bytes"), 2000);
    assert_int_equal((long)rt_num(b, "growth.count"), -1);
    assert_int_equal((long)rt_num(b, "growth.bytes"), -(1L << 20));
    assert_null(find_leak(doc, "temporary_work"));
    assert_int_equal(cJSON_GetArraySize(rt_get(doc, "leaks")), 2);
    assert_int_equal(cJSON_GetArraySize(rt_get(s, "frames")), 2);
    cJSON_Delete(doc);
    /* nothing changed: no growth anywhere */
    temporary_work();
    assert_int_equal(report_write(WIRE_TRIGGER_INTERVAL, -1), 0);
    doc = rt_last_report();
    const cJSON *l;
    cJSON_ArrayForEach(l, rt_get(doc, "leaks"))
    {
        assert_int_equal((long)rt_num(l, "growth.count"), 0);
        assert_int_equal((long)rt_num(l, "growth.bytes"), 0);
    }
    cJSON_Delete(doc);
}

__attribute__((noipa)) static void fragment_pool(uintptr_t *blocks, int n)
{
    for (int i = 0; i < n; i++) blocks[i] = rt_alloc(0, (size_t)(i + 1) * 3 << 20, 0);
    for (int i = 0; i < n; i += 2) rt_free(0, blocks[i]);
}

static void test_free_map_cap_keeps_largest(void **state)
{
    (void)state;
    rt_cfg.free_map_max = 3;
    rt_init();
    rt_make_pool(0, (size_t)1 << 30);
    uintptr_t blocks[20];
    fragment_pool(blocks, 20);
    assert_int_equal(report_write(WIRE_TRIGGER_SIGNAL, -1), 0);
    cJSON *doc = rt_last_report();
    const cJSON *d0 = cJSON_GetArrayItem(rt_get(doc, "devices"), 0);
    const cJSON *fm = rt_get(d0, "free_map");
    assert_int_equal(cJSON_GetArraySize(fm), 3);
    assert_true(rt_num(d0, "free_map_omitted") >= 8);
    assert_true(rt_num(d0, "pool.fragmentation") > 0.3);
    rt_check_pool_consistency(d0); /* includes: the largest free block is listed */
    assert_string_equal(rt_str(doc, "config.NPUPOOL_REPORT_FREE_MAP"), "3");
    cJSON_Delete(doc);
    /* cap 0: no map at all, everything counted */
    rt_cfg.free_map_max = 0;
    rt_init();
    assert_int_equal(report_write(WIRE_TRIGGER_SIGNAL, -1), 0);
    doc = rt_last_report();
    d0 = cJSON_GetArrayItem(rt_get(doc, "devices"), 0);
    assert_int_equal(cJSON_GetArraySize(rt_get(d0, "free_map")), 0);
    assert_int_equal(rt_num(d0, "free_map_omitted"), rt_num(d0, "pool.free_blocks"));
    cJSON_Delete(doc);
}

/* ---- oom --------------------------------------------------------------------------------------- */

/* The report written just before the last one: its file name's number (%n) one less. */
static cJSON *rt_report_before_last(void)
{
    report_stats_t st;
    report_get_stats(&st);
    char path[sizeof st.last_path];
    snprintf(path, sizeof path, "%s", st.last_path);
    char *dash = strrchr(path, '-');
    if (!dash) return NULL;
    long n = strtol(dash + 1, NULL, 10);
    snprintf(dash + 1, sizeof path - (size_t)(dash + 1 - path), "%ld.json", n - 1);
    return rt_load(path);
}

/* Ask device 0's pool for `bytes` from stack `sid`; on a refusal, tell report_oom what the shim
 * would (the pool's classification of it and its sentence) and return 207001. */
static int ask_for(size_t bytes, uint32_t sid)
{
    uintptr_t a = rt_alloc(0, bytes, sid);
    if (a) return 0;
    char reason[320];
    pool_refusal_describe(&rt_refusal, reason, sizeof reason);
    report_oom_info_t info = {.requested_bytes = bytes,
                              .granted_bytes = bytes + 32,
                              .device = 0,
                              .entry = VOCAB_MALLOC,
                              .stack_id = sid,
                              .kind = pool_refusal_name(rt_refusal.kind),
                              .reason = reason,
                              .free_bytes = rt_refusal.free_bytes,
                              .largest_free_bytes = rt_refusal.usable_largest};
    report_oom(&info);
    return 207001;
}

/* The seeds' puzzle: 1 GiB blocks fill the pool, every other one is freed, 2 GiB cannot fit. */
__attribute__((noipa)) static int ask_for_two_gib(void)
{
    line_oom = __LINE__ + 1;
    uint32_t sid = ledger_stack_capture(0);
    return ask_for((size_t)2 << 30, sid);
}

/* More than the pool has free at all: exhausted, from a call site of its own. */
__attribute__((noipa)) static int ask_for_everything(void)
{
    uint32_t sid = ledger_stack_capture(0);
    return ask_for((size_t)8 << 30, sid);
}

/* The same call site twice in a row (one stack). */
__attribute__((noipa)) static int ask_for_two_gib_twice(void)
{
    int rc = 0;
    volatile int times = 2;
    for (int i = 0; i < times; i++) rc = ask_for_two_gib();
    return rc;
}

static void test_oom_report_explains_fragmentation(void **state)
{
    (void)state;
    rt_make_pool(0, 12 * (((size_t)1 << 30) + 64)); /* exactly 12 blocks of 1 GiB (+ padding) */
    uintptr_t blocks[16];
    int n = 0;
    while (n < 16 && (blocks[n] = rt_alloc(0, (size_t)1 << 30, 0)) != 0) n++;
    assert_int_equal(n, 12);
    for (int i = 0; i < n; i += 2) rt_free(0, blocks[i]);
    report_stats_t before;
    report_get_stats(&before);
    /* the first refusal of the site gets a report; the same site and kind again right away is
     * counted only */
    assert_int_equal(ask_for_two_gib_twice(), 207001);
    cJSON *doc = rt_last_report();
    assert_string_equal(rt_str(doc, "trigger"), "oom");
    const cJSON *oom = rt_get(doc, "oom");
    assert_non_null(oom);
    assert_int_equal((long)rt_num(oom, "requested_bytes"), 2L << 30);
    assert_int_equal((long)rt_num(oom, "granted_bytes"), (2L << 30) + 32);
    assert_int_equal((int)rt_num(oom, "device"), 0);
    assert_string_equal(rt_str(oom, "entry_point"), "aclrtMalloc");
    assert_true(rt_num(oom, "free_bytes") >= 5.0 * (1 << 30));
    assert_true(rt_num(oom, "largest_free_bytes") < 2.0 * (1 << 30));
    const char *reason = rt_str(oom, "reason");
    assert_non_null(reason);
    print_message("# oom reason: %s\n", reason ? reason : "?");
    assert_true(!strncmp(reason, "fragmentation: ", 15)); /* the pool's sentence, as given */
    assert_non_null(strstr(
        reason, "GiB free, but the largest block a 2.0 GiB request can be given is 1.0 GiB"));
    assert_string_equal(rt_str(oom, "kind"), "fragmentation");
    const cJSON *f0 = cJSON_GetArrayItem(rt_get(oom, "frames"), 0);
    assert_string_equal(rt_str(f0, "function"), "ask_for_two_gib");
    assert_int_equal((int)rt_num(f0, "line"), line_oom);
    const cJSON *d0 = cJSON_GetArrayItem(rt_get(doc, "devices"), 0);
    assert_int_equal(rt_num(d0, "pool.free_bytes"), rt_num(oom, "free_bytes"));
    assert_int_equal(rt_num(d0, "pool.largest_free_bytes"), rt_num(oom, "largest_free_bytes"));
    /* written at once, on the refusing thread (generous: sanitizer builds, loaded machines) */
    assert_true(rt_num(oom, "written_after_refusal_ms") < 1000.0);
    rt_check_pool_consistency(d0);
    cJSON_Delete(doc);
    report_stats_t after;
    report_get_stats(&after);
    assert_int_equal(after.written, before.written + 1);
    assert_int_equal(after.oom_suppressed, before.oom_suppressed + 1);
    /* exhausted (not fragmented): the same site with another reason gets its own report at once
     * (no 1 s gap), which counts the one suppressed before it */
    for (int i = 0; i < n; i += 2) blocks[i] = rt_alloc(0, (size_t)1 << 30, 0);
    assert_int_equal(ask_for_two_gib_twice(), 207001);
    doc = rt_last_report();
    reason = rt_str(doc, "oom.reason");
    assert_non_null(reason);
    print_message("# oom reason: %s\n", reason ? reason : "?");
    assert_true(!strncmp(reason, "exhausted: ", 11));
    assert_int_equal((long)rt_num(doc, "oom.reports_suppressed"), 1);
    /* every report says how many refusals there were and which was the last */
    assert_int_equal((long)rt_num(doc, "refusals.total"), 3); /* written at the third */
    assert_int_equal((long)rt_num(doc, "refusals.reported"), 2);
    assert_int_equal((long)rt_num(doc, "refusals.suppressed"), 1);
    assert_string_equal(rt_str(doc, "refusals.last.kind"), "exhausted");
    cJSON_Delete(doc);
    report_get_stats(&after);
    assert_int_equal(after.written, before.written + 2);
}

/* ---- failures ---------------------------------------------------------------------------------- */

static void test_write_failures_cost_one_line(void **state)
{
    (void)state;
    rt_make_pool(0, (size_t)64 << 20);
    leak_small();
    char err[2048];
    const char *bad[] = {"/nonexistent-npupool-dir/r.json", "/dev/full", "/"};
    for (size_t i = 0; i < 3; i++) {
        rt_cfg.pattern = bad[i];
        rt_init();
        report_stats_t before, after;
        report_get_stats(&before);
        rt_stderr_begin();
        int r = report_write(WIRE_TRIGGER_SIGNAL, -1);
        int lines = rt_stderr_end(err, sizeof err);
        print_message("# %s -> %s", bad[i], err);
        assert_int_equal(r, -1);
        assert_int_equal(lines, 1);
        assert_non_null(strstr(err, bad[i]));
        report_get_stats(&after);
        assert_int_equal(after.failed, before.failed + 1);
    }
    struct stat st;
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode)); /* written in place, never replaced */
    /* a name too long to expand */
    char longp[5000];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    rt_cfg.pattern = longp;
    rt_init();
    rt_stderr_begin();
    assert_int_equal(report_write(WIRE_TRIGGER_SIGNAL, -1), -1);
    assert_int_equal(rt_stderr_end(NULL, 0), 1);
}

/* Every report names the npupool that wrote it (version, build id and path of the object the
 * report code is in: this test program, which links it statically) and the runtime library. */
static void test_report_names_npupool_and_runtime(void **state)
{
    (void)state;
    rt_init();
    rt_make_pool(0, (size_t)64 << 20);
    leak_small();
    assert_int_equal(report_write(WIRE_TRIGGER_SIGNAL, -1), 0);
    cJSON *doc = rt_last_report();
    assert_string_equal(rt_str(doc, "npupool.version"), version_string());
    char bid[BUILDID_HEX_MAX], exe[4096];
    assert_true(buildid_of_file("/proc/self/exe", bid, sizeof bid) >= 40); /* sha1 */
    assert_string_equal(rt_str(doc, "npupool.build_id"), bid);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
    assert_string_equal(rt_str(doc, "npupool.library"), exe);
    assert_string_equal(rt_str(doc, "runtime.library"), RT_RUNTIME_LIBRARY);
    assert_string_equal(rt_str(doc, "runtime.build_id"), RT_RUNTIME_BUILD_ID);
    cJSON_Delete(doc);
}

static void test_symbols_off(void **state)
{
    (void)state;
    rt_cfg.symbols = 0;
    rt_init();
    rt_make_pool(0, (size_t)64 << 20);
    leak_small();
    assert_int_equal(report_write(WIRE_TRIGGER_SIGNAL, -1), 0);
    cJSON *doc = rt_last_report();
    const cJSON *f0 =
        cJSON_GetArrayItem(rt_get(cJSON_GetArrayItem(rt_get(doc, "leaks"), 0), "frames"), 0);
    assert_true(cJSON_IsNull(rt_get(f0, "function")));
    assert_true(cJSON_IsNull(rt_get(f0, "file")));
    assert_non_null(rt_str(f0, "module"));
    assert_non_null(rt_str(f0, "build_id"));
    cJSON_Delete(doc);
}

static void test_exit_report_only_when_needed(void **state)
{
    (void)state;
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(rt_dir), 0);
    rt_cfg.pattern = NULL;
    rt_init();
    rt_make_pool(0, (size_t)64 << 20);
    report_stats_t a, b;
    report_get_stats(&a);
    report_at_exit();
    report_at_finalize();
    report_get_stats(&b);
    assert_int_equal(b.written, a.written); /* nothing set, nothing live: no report */
    uintptr_t p = leak_small();
    report_at_finalize();
    report_get_stats(&b);
    assert_int_equal(b.written, a.written + 1);
    char want[64];
    snprintf(want, sizeof want, "npupool-report-%d-", (int)getpid());
    assert_non_null(strstr(b.last_path, want)); /* default name, in the working directory */
    assert_true(b.last_path[0] != '/');
    cJSON *doc = rt_last_report();
    assert_string_equal(rt_str(doc, "trigger"), "finalize");
    cJSON_Delete(doc);
    rt_free(0, p);
    assert_int_equal(chdir(cwd), 0);
}

/* Two devices, one without a pool but with live records (e.g. fallback allocations). */
/* A report source whose options walk waits while the gate is closed: a report in progress that
 * the test holds open, with the report lock held. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_closed, gate_inside;

static void gated_options(void *ctx, void (*cb)(void *, const char *, const char *), void *cbctx)
{
    pthread_mutex_lock(&gate_mu);
    gate_inside = 1;
    pthread_cond_broadcast(&gate_cv);
    while (gate_closed) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    rt_for_each_option(ctx, cb, cbctx);
}

static void *write_held_report(void *arg)
{
    (void)arg;
    report_write(WIRE_TRIGGER_SIGNAL, -1);
    return NULL;
}

/* A refusal while another report is being written: its report is handed over (the refusing
 * thread waits 2 ms at most, not for the report in progress) and written later, and it says how
 * much later, since its pool and leak sections describe that moment, not the refusal. */
static void test_late_oom_report_says_how_late(void **state)
{
    (void)state;
    rt_make_pool(0, 12 * (((size_t)1 << 30) + 64));
    uintptr_t blocks[12];
    for (int i = 0; i < 12; i++)
        assert_int_not_equal(blocks[i] = rt_alloc(0, (size_t)1 << 30, 0), 0);
    for (int i = 0; i < 12; i += 2) rt_free(0, blocks[i]);
    report_source_t gated = rt_source;
    gated.for_each_option = gated_options;
    report_init(&rt_cfg, &gated);
    report_stats_t at_start;
    report_get_stats(&at_start);
    gate_closed = 1;
    gate_inside = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, write_held_report, NULL), 0);
    pthread_mutex_lock(&gate_mu);
    while (!gate_inside) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    uint64_t t0 = clock_mono_ns();
    assert_int_equal(ask_for_two_gib(), 207001); /* does not wait for the report in progress */
    assert_true(clock_mono_ns() - t0 < (uint64_t)1000000000);
    /* a second first refusal (another site, another kind) while the first is still owed: it
     * is owed too, not put in the first one's place */
    assert_int_equal(ask_for_everything(), 207001);
    rt_sleep_ms(50);
    pthread_mutex_lock(&gate_mu);
    gate_closed = 0;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    assert_int_equal(pthread_join(th, NULL), 0);
    cJSON *held = rt_last_report();
    assert_string_equal(rt_str(held, "trigger"), "signal"); /* the oom report is still owed */
    cJSON_Delete(held);
    report_stats_t before, after;
    report_get_stats(&before);
    report_write_deferred_oom(); /* what the reporter thread does when woken: every owed one */
    report_get_stats(&after);
    assert_int_equal(after.written, before.written + 2);
    cJSON *doc = rt_last_report(); /* the newest: the exhausted one, written second */
    assert_string_equal(rt_str(doc, "trigger"), "oom");
    assert_string_equal(rt_str(doc, "oom.kind"), "exhausted");
    assert_int_equal(after.oom_suppressed, at_start.oom_suppressed); /* neither replaced */
    cJSON_Delete(doc);
    doc = rt_report_before_last();
    assert_string_equal(rt_str(doc, "trigger"), "oom");
    double late = rt_num(doc, "oom.written_after_refusal_ms");
    print_message("# oom report written %.1f ms after the refusal\n", late);
    assert_true(late >= 50.0);
    assert_string_equal(rt_str(doc, "oom.kind"), "fragmentation");
    cJSON_Delete(doc);
    report_write_deferred_oom(); /* nothing owed any more: nothing written */
    report_stats_t last;
    report_get_stats(&last);
    assert_int_equal(last.written, after.written);
    report_init(&rt_cfg, &rt_source);
}

static void test_devices_without_pool(void **state)
{
    (void)state;
    rt_make_pool(0, (size_t)64 << 20);
    leak_small();
    ledger_record_alloc(0x5000000, 1, 4096, 4160, VOCAB_MALLOC, VOCAB_FROM_FALLBACK, 0);
    assert_int_equal(report_write(WIRE_TRIGGER_RESET, 1), 0);
    cJSON *doc = rt_last_report();
    assert_string_equal(rt_str(doc, "trigger"), "reset");
    assert_int_equal((int)rt_num(doc, "trigger_device"), 1);
    const cJSON *devs = rt_get(doc, "devices");
    assert_int_equal(cJSON_GetArraySize(devs), 2);
    const cJSON *d1 = cJSON_GetArrayItem(devs, 1);
    assert_int_equal((int)rt_num(d1, "device"), 1);
    assert_true(cJSON_IsNull(rt_get(d1, "pool")));
    assert_int_equal((long)rt_num(d1, "live_allocations"), 1);
    const cJSON *l;
    int found = 0;
    cJSON_ArrayForEach(l, rt_get(doc, "leaks"))
    {
        if (rt_num(l, "device") == 1) {
            found = 1;
            assert_int_equal((long)rt_num(l, "stack_id"), 0);
            assert_int_equal(cJSON_GetArraySize(rt_get(l, "frames")), 0);
            assert_int_equal((long)rt_num(l, "origins.fallback"), 1);
        }
    }
    assert_true(found);
    cJSON_Delete(doc);
}

/* A fork child inherits the parent's records: they are not its leaks. */
static void test_fork_child_reports_only_its_own_leaks(void **state)
{
    (void)state;
    static int registered;
    if (!registered) {
        pthread_atfork(report_fork_prepare, report_fork_parent, report_fork_child);
        registered = 1;
    }
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(rt_dir), 0);
    rt_cfg.pattern = NULL;
    rt_init();
    rt_make_pool(0, (size_t)64 << 20);
    leak_small(); /* the parent's */
    pid_t pid = fork();
    if (pid == 0) {
        char mine[64];
        snprintf(mine, sizeof mine, "npupool-report-%d-", (int)getpid());
        report_at_exit();
        if (rt_count_files(mine) != 0) _exit(1); /* only inherited records: no report */
        leak_small();
        report_at_exit();
        if (rt_count_files(mine) != 1) _exit(2); /* its own leak: a report */
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_exit_report_names_the_leaks, setup),
        cmocka_unit_test_setup(test_growth_between_reports, setup),
        cmocka_unit_test_setup(test_free_map_cap_keeps_largest, setup),
        cmocka_unit_test_setup(test_write_failures_cost_one_line, setup),
        cmocka_unit_test_setup(test_report_names_npupool_and_runtime, setup),
        cmocka_unit_test_setup(test_symbols_off, setup),
        cmocka_unit_test_setup(test_exit_report_only_when_needed, setup),
        /* after it: a refusal left without a report of its own forces an exit report */
        cmocka_unit_test_setup(test_oom_report_explains_fragmentation, setup),
        cmocka_unit_test_setup(test_late_oom_report_says_how_late, setup),
        cmocka_unit_test_setup(test_devices_without_pool, setup),
        cmocka_unit_test_setup(test_fork_child_reports_only_its_own_leaks, setup),
    };
    return cmocka_run_group_tests(tests, rt_group_setup, rt_group_teardown);
}
