/* tests/unit/report_test_util.h — what the report unit tests share: a made-up device with a real
 * pool over a made-up address range (no memory behind it), a report source over it, file and
 * JSON helpers, and a stderr catcher.  Header-only (static functions) so each test binary stays
 * one file.
 */
#ifndef NPUPOOL_REPORT_TEST_UTIL_H
#define NPUPOOL_REPORT_TEST_UTIL_H

#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ledger.h"
#include "pool.h"
#include "report.h"
#include "wire.h"

#define RT_DEVICES 2

static pool_t *rt_pool[RT_DEVICES];             /* pools of the made-up devices */
static wire_counters_t rt_counters[RT_DEVICES]; /* their counters */
static char rt_dir[256];                        /* scratch directory for reports */

static void rt_for_each_device(void *ctx,
                               void (*cb)(void *, int, pool_t *, const wire_counters_t *),
                               void *cbctx)
{
    (void)ctx;
    for (int d = 0; d < RT_DEVICES; d++)
        if (rt_pool[d]) cb(cbctx, d, rt_pool[d], &rt_counters[d]);
}

static char rt_pattern[400];   /* the report path pattern of the test */
static report_config_t rt_cfg; /* the configuration rt_init() passes */

/* As the shim's option table would list them (a few). */
static void rt_for_each_option(void *ctx, void (*cb)(void *, const char *, const char *),
                               void *cbctx)
{
    (void)ctx;
    char v[32];
    cb(cbctx, "NPUPOOL_RATIO", "0.8");
    cb(cbctx, "NPUPOOL_FALLBACK", "0");
    cb(cbctx, "NPUPOOL_BACKTRACE_DEPTH", "16");
    cb(cbctx, "NPUPOOL_REPORT", rt_cfg.pattern ? rt_cfg.pattern : "");
    snprintf(v, sizeof v, "%ld", rt_cfg.free_map_max);
    cb(cbctx, "NPUPOOL_REPORT_FREE_MAP", v);
}

/* As the shim would name the runtime library it forwards to. */
#define RT_RUNTIME_LIBRARY "/opt/fake/lib64/libascendcl.so"
#define RT_RUNTIME_BUILD_ID "0123456789abcdef0123456789abcdef01234567"
static void rt_runtime(void *ctx, const char **library, const char **build_id)
{
    (void)ctx;
    *library = RT_RUNTIME_LIBRARY;
    *build_id = RT_RUNTIME_BUILD_ID;
}

static const report_source_t rt_source = {.for_each_device = rt_for_each_device,
                                          .for_each_option = rt_for_each_option,
                                          .runtime = rt_runtime};

/* The shim's defaults (shim/options.c), with reports named `prefix`-%n.json in rt_dir. */
static void rt_config_defaults(const char *prefix)
{
    snprintf(rt_pattern, sizeof rt_pattern, "%s/%s-%%n.json", rt_dir, prefix);
    rt_cfg = (report_config_t){.pattern = rt_pattern,
                               .signal = 0,
                               .interval_s = 0,
                               .warn_ratio = 0.85,
                               .critical_ratio = 0.95,
                               .free_map_max = 4096,
                               .live_map_max = 4096,
                               .symbols = 1,
                               .oom_max = 10};
}

static void rt_init(void) { report_init(&rt_cfg, &rt_source); }

/* Pool of `bytes` over a made-up range for device d (replacing any previous one). */
static void rt_make_pool(int d, size_t bytes)
{
    if (rt_pool[d]) pool_destroy(rt_pool[d]);
    rt_pool[d] = pool_create(((uintptr_t)(d + 1)) << 44, bytes);
    memset(&rt_counters[d], 0, sizeof rt_counters[d]);
}

static pool_refusal_t rt_refusal; /* why the last refused rt_alloc was refused */

/* An allocation as the shim makes one: pool block, ledger record, counter.  0 when refused. */
static uintptr_t rt_alloc(int d, size_t size, uint32_t stack_id)
{
    size_t granted = ((size + 31) & ~(size_t)31) + 32;
    uintptr_t a;
    if (pool_alloc(rt_pool[d], size, granted, &a, &rt_refusal) != POOL_OK) {
        __atomic_fetch_add(&rt_counters[d].ooms, 1, __ATOMIC_RELAXED);
        return 0;
    }
    ledger_record_alloc(a, d, size, granted, VOCAB_MALLOC, VOCAB_FROM_POOL, stack_id);
    __atomic_fetch_add(&rt_counters[d].allocs, 1, __ATOMIC_RELAXED);
    return a;
}

static void rt_free(int d, uintptr_t a)
{
    ledger_record_free(a); /* before the block goes back: the address cannot be reused meanwhile */
    pool_free(rt_pool[d], a, NULL, NULL);
    __atomic_fetch_add(&rt_counters[d].frees, 1, __ATOMIC_RELAXED);
}

/* Back to no pool, no record, no reporter thread (each test's setup). */
static void rt_reset_all(void)
{
    report_stop_background();
    ledger_clear();
    for (int d = 0; d < RT_DEVICES; d++) {
        if (rt_pool[d]) pool_destroy(rt_pool[d]);
        rt_pool[d] = NULL;
    }
}

__attribute__((unused)) static void rt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void rt_make_dir(void)
{
    snprintf(rt_dir, sizeof rt_dir, "/tmp/npupool-test-report.XXXXXX");
    if (!mkdtemp(rt_dir)) abort();
}

static void rt_remove_dir(void)
{
    DIR *d = opendir(rt_dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", rt_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(rt_dir);
}

/* cmocka group setup and teardown: the scratch directory, made and removed. */
static int rt_group_setup(void **state)
{
    (void)state;
    rt_make_dir();
    return 0;
}

static int rt_group_teardown(void **state)
{
    (void)state;
    rt_reset_all();
    rt_remove_dir();
    return 0;
}

/* Files in rt_dir whose name contains `part`. */
__attribute__((unused)) static int rt_count_files(const char *part)
{
    DIR *d = opendir(rt_dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && strstr(e->d_name, part)) n++;
    closedir(d);
    return n;
}

static cJSON *rt_load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    return j;
}

static cJSON *rt_last_report(void)
{
    report_stats_t st;
    report_get_stats(&st);
    return st.last_path[0] ? rt_load(st.last_path) : NULL;
}

/* "a.b.c" lookup (no arrays). */
static cJSON *rt_get(const cJSON *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = o;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, "."))
        cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
    return (cJSON *)cur;
}

static double rt_num(const cJSON *o, const char *path)
{
    const cJSON *j = rt_get(o, path);
    return j && cJSON_IsNumber(j) ? j->valuedouble : NAN;
}

static const char *rt_str(const cJSON *o, const char *path)
{
    const cJSON *j = rt_get(o, path);
    return j && cJSON_IsString(j) ? j->valuestring : NULL;
}

/* stderr catcher: everything written to fd 2 between begin and end goes to a file. */
static int rt_saved_stderr = -1;
static char rt_err_path[300];

static void rt_stderr_begin(void)
{
    snprintf(rt_err_path, sizeof rt_err_path, "%s/stderr.txt", rt_dir);
    int fd = open(rt_err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    fflush(stderr);
    rt_saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Returns the number of npupool's lines ("npupool[PID]: ..."), not counting the notices of
 * reports written (one per report, at the default level: background reports may land in any
 * window); copies the whole text into buf. */
static int rt_stderr_end(char *buf, size_t len)
{
    fflush(stderr);
    dup2(rt_saved_stderr, 2);
    close(rt_saved_stderr);
    FILE *f = fopen(rt_err_path, "r");
    int n = 0;
    size_t used = 0;
    char line[1024];
    if (buf && len) buf[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "npupool[", 8) && !strstr(line, " report written to ")) n++;
        size_t l = strlen(line);
        if (buf && used + l < len) {
            memcpy(buf + used, line, l + 1);
            used += l;
        }
    }
    if (f) fclose(f);
    unlink(rt_err_path);
    return n;
}

/* The pool figures must agree with each other and with the free map. */
static void rt_check_pool_consistency(const cJSON *dev)
{
    const cJSON *pool = rt_get(dev, "pool");
    if (!pool || cJSON_IsNull(pool)) return;
    double reserved = rt_num(pool, "reserved_bytes"), allocated = rt_num(pool, "allocated_bytes");
    double freeb = rt_num(pool, "free_bytes"), overhead = rt_num(pool, "overhead_bytes");
    double largest = rt_num(pool, "largest_free_bytes"), frag = rt_num(pool, "fragmentation");
    if (allocated + freeb + overhead != reserved) {
        fprintf(stderr, "allocated %.0f + free %.0f + overhead %.0f != reserved %.0f\n", allocated,
                freeb, overhead, reserved);
        abort();
    }
    double want = freeb > 0 ? 1.0 - largest / freeb : 0.0;
    if (fabs(frag - want) > 1e-12) abort();
    const cJSON *fm = rt_get(dev, "free_map");
    double maxfm = 0, sumfm = 0, prev_end = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, fm)
    {
        double off = cJSON_GetArrayItem(e, 0)->valuedouble,
               sz = cJSON_GetArrayItem(e, 1)->valuedouble;
        if (off < prev_end) abort(); /* address order, no overlap */
        prev_end = off + sz;
        if (sz > maxfm) maxfm = sz;
        sumfm += sz;
    }
    if (freeb > 0 && maxfm != largest) abort();
    if (cJSON_GetArraySize(fm) + rt_num(dev, "free_map_omitted") != rt_num(pool, "free_blocks"))
        abort();
    if (sumfm + rt_num(dev, "free_map_omitted_bytes") != freeb) abort();
    double lsum = 0;
    prev_end = -1;
    cJSON_ArrayForEach(e, rt_get(dev, "live_map"))
    {
        double off = cJSON_GetArrayItem(e, 0)->valuedouble,
               sz = cJSON_GetArrayItem(e, 1)->valuedouble;
        if (off < prev_end) abort();
        prev_end = off + sz;
        lsum += sz;
    }
    if (cJSON_GetArraySize(rt_get(dev, "live_map")) + rt_num(dev, "live_map_omitted") !=
        rt_num(pool, "live_blocks"))
        abort();
    if (lsum + rt_num(dev, "live_map_omitted_bytes") != allocated) abort();
    double live_bytes = 0, free_blocks = 0;
    cJSON_ArrayForEach(e, rt_get(dev, "buckets"))
    {
        live_bytes += rt_num(e, "live_bytes");
        free_blocks += rt_num(e, "free_blocks");
    }
    if (live_bytes != allocated || free_blocks != rt_num(pool, "free_blocks")) abort();
}

#endif
