/* report/report.c — the report state and one report (the API of report.h).
 *
 * Owns: the report state `rs`: configuration, sequence numbers, the growth baseline, statistics,
 * the oom rate limit, the exit/finalize decision and the fork handlers.  One report: collect the
 * ledger's sites, build the document (report_json.c), print it, write it (report_file.c), keep
 * its sites as the next report's growth baseline.
 * Locking: rs.lock serialises reports and guards rs (except the atomics named at the fields).
 * It is taken before any pool or ledger lock and never held across a call into the runtime.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "path.h"
#include "report_cjson.h"
#include "symbolize.h"

#define OOM_GAP_NS 1000000000ull /* oom reports at least this far apart */

static struct {
    pthread_mutex_t lock;            /* see the header comment */
    report_config_t cfg;             /* options in effect */
    report_source_t src;             /* the shim's callbacks (zeroed = none) */
    uint64_t seq;                    /* reports attempted; %n of the last */
    report_baseline_entry_t *base;   /* previous report's sites, sorted */
    size_t nbase;                    /* entries in base */
    report_stats_t stats;            /* written / failed / last path */
    double start_wall_s;             /* process start, epoch seconds */
    int exiting;                     /* the exit report was written: no more background ones */
    int fork_child;                  /* 1 in a child made by fork() */
    uint64_t fork_seq;               /* in a fork child: ledger_last_seq() at the fork */
    int bg_started;                  /* report_start_background was called */
    uint64_t oom_reports;            /* oom reports written or attempted */
    uint64_t oom_last_ns;            /* time of the last one */
    _Atomic uint64_t oom_suppressed; /* skipped since the last one */
    _Atomic uint64_t oom_suppressed_total; /* skipped in all */
    _Atomic uint64_t signals;              /* signal wake-ups seen by the reporter thread */
} rs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *pattern_of(const report_config_t *c)
{
    return c->pattern && *c->pattern ? c->pattern : WIRE_REPORT_DEFAULT_PATH;
}

static int pattern_set(const report_config_t *c) { return c->pattern && *c->pattern; }

/* ---- configuration ---------------------------------------------------------------------------- */

static double process_start_wall(void)
{
    /* /proc/self/stat field 22 (start time in clock ticks since boot) + /proc/stat btime. */
    double now = clock_wall_s();
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f) return now;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return now;
    unsigned long long ticks = 0;
    int field = 2;
    for (char *t = strtok(p + 1, " "); t; t = strtok(NULL, " ")) {
        if (++field == 22) {
            ticks = strtoull(t, NULL, 10);
            break;
        }
    }
    f = fopen("/proc/stat", "re");
    if (!f) return now;
    unsigned long long btime = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1) break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (!btime || hz <= 0) return now;
    double start = (double)btime + (double)ticks / (double)hz;
    return start <= now ? start : now;
}

void report_init(const report_config_t *cfg, const report_source_t *src)
{
    report_cjson_load(0); /* the loader's lock, before ours (report_cjson.h) */
    pthread_mutex_lock(&rs.lock);
    rs.cfg = *cfg;
    if (src)
        rs.src = *src;
    else
        memset(&rs.src, 0, sizeof rs.src);
    if (rs.start_wall_s == 0) rs.start_wall_s = process_start_wall();
    monitor_configure(cfg->warn_ratio, cfg->critical_ratio);
    pthread_mutex_unlock(&rs.lock);
}

REPORT_HIDDEN double report_interval_s(void)
{
    pthread_mutex_lock(&rs.lock);
    double s = rs.cfg.interval_s;
    pthread_mutex_unlock(&rs.lock);
    return s;
}

/* ---- one report ------------------------------------------------------------------------------- */

static int site_order(const void *x, const void *y)
{
    const ledger_site_t *a = x, *b = y;
    if (a->requested_bytes != b->requested_bytes)
        return a->requested_bytes > b->requested_bytes ? -1 : 1;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static int base_order(const void *x, const void *y)
{
    const report_baseline_entry_t *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* pre: rs.lock held. */
static int write_locked(enum wire_trigger trigger, int device, const report_oom_info_t *oom,
                        uint64_t oom_suppressed, const report_threshold_info_t *thr)
{
    if (!report_cjson_load(1)) { /* one line, the first time */
        rs.stats.failed++;
        return -1;
    }
    uint64_t seq = ++rs.seq;
    char path[4096];
    if (path_expand(pattern_of(&rs.cfg), seq, path, sizeof path) != 0) {
        rs.stats.failed++;
        log_warn(
            "cannot write the %s report: NPUPOOL_REPORT=\"%s\" expands to a path that is too long",
            wire_trigger_name(trigger), pattern_of(&rs.cfg));
        return -1;
    }

    ledger_site_t *sites = NULL;
    size_t nsites = ledger_collect_sites(&sites);
    if (nsites == (size_t)-1) {
        rs.stats.failed++;
        log_warn("cannot write the %s report %s: out of host memory", wire_trigger_name(trigger),
                 path);
        return -1;
    }
    if (nsites > 1) qsort(sites, nsites, sizeof *sites, site_order);

    report_input_t in = {
        .trigger = trigger,
        .device = device,
        .seq = seq,
        .cfg = &rs.cfg,
        .backtrace_depth = ledger_backtrace_depth(),
        .src = &rs.src,
        .sites = sites,
        .nsites = nsites,
        .base = rs.base,
        .nbase = rs.nbase,
        .oom = oom,
        .oom_suppressed = oom_suppressed,
        .threshold = thr,
        .start_wall_s = rs.start_wall_s,
        .now_mono_ns = clock_coarse_ns(),
        .now_wall_s = clock_wall_s(),
        .stats = &rs.stats,
    };
    symbolizer_t *sym = NULL;
    cJSON *doc = report_json_build(&in, &sym);
    /* One buffer sized for the document up front: no repeated regrowth of a 40 MB text. */
    size_t guess = nsites * 4096 + ((size_t)1 << 20);
    char *text = doc ? cJSON_PrintBuffered(
                           doc, (int)(guess < ((size_t)1 << 30) ? guess : ((size_t)1 << 30)), 1)
                     : NULL;
    cJSON_Delete(doc);
    symbolize_close(sym);
    if (!text) {
        free(sites);
        rs.stats.failed++;
        log_warn("cannot write the %s report %s: out of host memory", wire_trigger_name(trigger),
                 path);
        return -1;
    }
    size_t len = strlen(text);
    text[len] = '\n'; /* cJSON_Print leaves room for exactly the terminator: replace it */
    const char *what = "";
    int r = report_file_write(path, text, len + 1, seq, &what);
    int e = errno;
    cJSON_free(text);
    if (r != 0) {
        free(sites);
        rs.stats.failed++;
        log_warn("cannot write the %s report to %s (%s: %s)", wire_trigger_name(trigger), path,
                 what, strerror(e));
        return -1;
    }
    rs.stats.written++;
    snprintf(rs.stats.last_path, sizeof rs.stats.last_path, "%s", path);
    log_notice("%s report written to %s (%zu sites)", wire_trigger_name(trigger), path, nsites);

    /* The new growth baseline. */
    report_baseline_entry_t *nb = nsites ? malloc(nsites * sizeof *nb) : NULL;
    if (nsites && !nb) {
        free(sites);
        return 0; /* keep the old baseline */
    }
    for (size_t i = 0; i < nsites; i++)
        nb[i] = (report_baseline_entry_t){sites[i].device, sites[i].stack_id, sites[i].count,
                                          sites[i].requested_bytes};
    if (nsites > 1) qsort(nb, nsites, sizeof *nb, base_order);
    free(rs.base);
    rs.base = nb;
    rs.nbase = nsites;
    free(sites);
    return 0;
}

int report_write(enum wire_trigger trigger, int device)
{
    pthread_mutex_lock(&rs.lock);
    int r = write_locked(trigger, device, NULL, 0, NULL);
    pthread_mutex_unlock(&rs.lock);
    return r;
}

REPORT_HIDDEN void report_write_background(enum wire_trigger trigger, int device,
                                           const report_threshold_info_t *threshold)
{
    pthread_mutex_lock(&rs.lock);
    if (!rs.exiting) write_locked(trigger, device, NULL, 0, threshold);
    pthread_mutex_unlock(&rs.lock);
}

REPORT_HIDDEN void report_count_signal(void) { atomic_fetch_add(&rs.signals, 1); }

void report_get_stats(report_stats_t *out)
{
    pthread_mutex_lock(&rs.lock);
    *out = rs.stats;
    out->oom_suppressed = atomic_load(&rs.oom_suppressed_total);
    out->signals = atomic_load(&rs.signals);
    pthread_mutex_unlock(&rs.lock);
}

/* "Leaks exist": live allocations of this process.  A fork child inherits the parent's records
 * (its memory is a copy); only what it allocated itself since the fork counts as its leaks. */
static void report_if_needed(enum wire_trigger trigger)
{
    pthread_mutex_lock(&rs.lock);
    size_t live = rs.fork_child ? ledger_live_count_since(rs.fork_seq) : ledger_live_total();
    if (pattern_set(&rs.cfg) || live > 0) write_locked(trigger, -1, NULL, 0, NULL);
    pthread_mutex_unlock(&rs.lock);
}

void report_at_exit(void)
{
    report_if_needed(WIRE_TRIGGER_EXIT);
    pthread_mutex_lock(&rs.lock);
    rs.exiting = 1; /* the reporter thread starts no report after this one */
    pthread_mutex_unlock(&rs.lock);
}

void report_at_finalize(void) { report_if_needed(WIRE_TRIGGER_FINALIZE); }

/* ---- oom -------------------------------------------------------------------------------------- */

void report_oom(const report_oom_info_t *info)
{
    if (!info) return;
    uint64_t now = clock_coarse_ns();
    pthread_mutex_lock(&rs.lock);
    if (rs.oom_reports >= (uint64_t)rs.cfg.oom_max ||
        (rs.oom_reports > 0 && now - rs.oom_last_ns < OOM_GAP_NS)) {
        atomic_fetch_add(&rs.oom_suppressed, 1);
        atomic_fetch_add(&rs.oom_suppressed_total, 1);
        pthread_mutex_unlock(&rs.lock);
        return;
    }
    rs.oom_reports++;
    rs.oom_last_ns = now;
    uint64_t suppressed = atomic_exchange(&rs.oom_suppressed, 0);
    write_locked(WIRE_TRIGGER_OOM, info->device, info, suppressed, NULL);
    pthread_mutex_unlock(&rs.lock);
}

/* ---- background ------------------------------------------------------------------------------- */

void report_start_background(void)
{
    pthread_mutex_lock(&rs.lock);
    if (!rs.bg_started) {
        rs.bg_started = 1;
        int need = rs.cfg.signal > 0 || rs.cfg.interval_s > 0 || monitor_enabled();
        reporter_start_locked(rs.cfg.signal, need);
    }
    pthread_mutex_unlock(&rs.lock);
}

void report_stop_background(void)
{
    reporter_stop();
    pthread_mutex_lock(&rs.lock);
    rs.bg_started = 0;
    pthread_mutex_unlock(&rs.lock);
    monitor_reset();
}

/* ---- fork ------------------------------------------------------------------------------------- */

void report_fork_prepare(void) { pthread_mutex_lock(&rs.lock); }
void report_fork_parent(void) { pthread_mutex_unlock(&rs.lock); }

void report_fork_child(void)
{
    pthread_mutex_init(&rs.lock, NULL);
    reporter_fork_child();
    rs.bg_started = 0;
    rs.oom_reports = 0;
    rs.start_wall_s = clock_wall_s();
    rs.fork_child = 1;
    rs.fork_seq = ledger_last_seq();
}
