/* report/report.c — the report state and one report (the API of report.h).
 *
 * Owns: the report state `rs`: configuration, sequence numbers, the growth baseline, statistics,
 * the oom rate limit, the exit/finalize decision and the fork handlers.  One report: collect the
 * ledger's sites, build the document (report_json.c), print it, write it (report_file.c), keep
 * its sites as the next report's growth baseline.  When the metrics file (metrics.c) is written:
 * by the reporter thread through report_write_metrics, and at finalize and exit.
 * Locking: rs.lock serialises reports and guards rs (except the atomics named at the fields).
 * It is taken before any pool or ledger lock and never held across a call into the runtime.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "path.h"
#include "report_cjson.h"
#include "report_internal.h"
#include "suppress.h"
#include "symbolize.h"

static struct {
    pthread_mutex_t lock;          /* see the header comment */
    report_config_t cfg;           /* options in effect */
    report_source_t src;           /* the shim's callbacks (zeroed = none) */
    uint64_t seq;                  /* reports attempted; %n of the last */
    report_baseline_entry_t *base; /* previous report's sites, sorted */
    size_t nbase;                  /* entries in base */
    report_stats_t stats;          /* written / failed / last path */
    double start_wall_s;           /* process start, epoch seconds */
    int exiting;                   /* the exit report was written: no more background ones */
    int fork_child;                /* 1 in a child made by fork() */
    uint64_t fork_seq;             /* in a fork child: ledger_last_seq() at the fork */
    int bg_started;                /* report_start_background was called */
    _Atomic long oom_max;          /* cfg.oom_max, read by report_oom without the lock */
    uint64_t finalize_seq;         /* ledger_last_seq() when the finalize report was written */
    uint64_t finalize_report;      /* that report's number (%n), 0 = none written */
    suppress_list_t suppress;      /* NPUPOOL_SUPPRESS patterns (n = 0: none) */
    _Atomic uint64_t signals;      /* signal wake-ups seen by the reporter thread */
} rs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *pattern_of(const report_config_t *c)
{
    return c->pattern && *c->pattern ? c->pattern : WIRE_REPORT_DEFAULT_PATH;
}

static int pattern_set(const report_config_t *c) { return c->pattern && *c->pattern; }

static long rs_oom_max(void) { return atomic_load_explicit(&rs.oom_max, memory_order_relaxed); }

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
    suppress_init(&rs.suppress);
    if (cfg->suppress && *cfg->suppress && suppress_load(&rs.suppress, cfg->suppress) != 0)
        log_warn("NPUPOOL_SUPPRESS: %s (the patterns before it are used)", rs.suppress.err);
    atomic_store_explicit(&rs.oom_max, cfg->oom_max, memory_order_relaxed);
    if (src)
        rs.src = *src;
    else
        memset(&rs.src, 0, sizeof rs.src);
    if (rs.start_wall_s == 0) rs.start_wall_s = process_start_wall();
    monitor_configure(cfg->warn_ratio, cfg->critical_ratio);
    metrics_configure(cfg->metrics, cfg->metrics_interval_s);
    pthread_mutex_unlock(&rs.lock);
}

REPORT_HIDDEN double report_interval_s(void)
{
    pthread_mutex_lock(&rs.lock);
    double s = rs.cfg.interval_s;
    pthread_mutex_unlock(&rs.lock);
    return s;
}

REPORT_HIDDEN double report_metrics_interval_s(void)
{
    pthread_mutex_lock(&rs.lock);
    double s = metrics_interval_s();
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

/* What the exit/finalize decision adds to one report. */
typedef struct write_scope {
    uint64_t after_seq;    /* list only allocations made after this sequence number (0 = all) */
    uint64_t after_report; /* ... because report number after_report listed the older ones */
    int only_if_leaks;     /* write nothing when no leak is left once suppressions apply */
} write_scope_t;

/* pre: rs.lock held. */
static int write_scoped(enum wire_trigger trigger, int device, const report_oom_info_t *oom,
                        uint64_t oom_suppressed, const report_threshold_info_t *thr,
                        const write_scope_t *scope)
{
    if (!report_cjson_load(1)) { /* one line, the first time */
        rs.stats.failed++;
        return -1;
    }
    uint64_t seq = rs.seq + 1;
    report_refusals_t refusals;
    refusal_summary(&refusals);
    char path[4096];
    if (path_expand(pattern_of(&rs.cfg), seq, path, sizeof path) != 0) {
        rs.stats.failed++;
        log_warn(
            "cannot write the %s report: NPUPOOL_REPORT=\"%s\" expands to a path that is too long",
            wire_trigger_name(trigger), pattern_of(&rs.cfg));
        return -1;
    }

    ledger_site_t *sites = NULL;
    size_t nsites = ledger_collect_sites(&sites, scope ? scope->after_seq : 0);
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
        .refusals = &refusals,
        .start_wall_s = rs.start_wall_s,
        .now_mono_ns = clock_coarse_ns(),
        .now_wall_s = clock_wall_s(),
        .stats = &rs.stats,
        .suppress = rs.suppress.n ? &rs.suppress : NULL,
        .leaks_after_report = scope ? scope->after_report : 0,
    };
    symbolizer_t *sym = NULL;
    report_json_result_t res = {0};
    cJSON *doc = report_json_build(&in, &sym, &res);
    if (doc && scope && scope->only_if_leaks && res.unsuppressed_sites == 0) {
        log_info("no %s report: every live allocation is suppressed (NPUPOOL_SUPPRESS) or was "
                 "listed in report %llu",
                 wire_trigger_name(trigger), (unsigned long long)scope->after_report);
        cJSON_Delete(doc);
        symbolize_close(sym);
        free(sites);
        return 0;
    }
    rs.seq = seq;
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

static int write_locked(enum wire_trigger trigger, int device, const report_oom_info_t *oom,
                        uint64_t oom_suppressed, const report_threshold_info_t *thr)
{
    return write_scoped(trigger, device, oom, oom_suppressed, thr, NULL);
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

REPORT_HIDDEN void report_write_metrics(void)
{
    pthread_mutex_lock(&rs.lock);
    if (!rs.exiting) metrics_write_locked(&rs.src, rs.stats.written);
    pthread_mutex_unlock(&rs.lock);
}

REPORT_HIDDEN void report_count_signal(void) { atomic_fetch_add(&rs.signals, 1); }

void report_get_stats(report_stats_t *out)
{
    pthread_mutex_lock(&rs.lock);
    *out = rs.stats;
    report_refusals_t r;
    refusal_summary(&r);
    out->oom_suppressed = r.suppressed;
    out->signals = atomic_load(&rs.signals);
    pthread_mutex_unlock(&rs.lock);
}

/* The exit and finalize reports, written when they have something to say: a pattern was set,
 * leaks exist (live allocations of this process that no suppression pattern covers), or the last
 * refusal got no report of its own (it is never lost).  A fork child inherits the parent's records
 * (its memory is a copy): only what it allocated itself since the fork counts.  After a finalize
 * report, the exit report lists only what was allocated since (the finalize report listed the
 * rest). */
static void report_if_needed(enum wire_trigger trigger)
{
    pthread_mutex_lock(&rs.lock);
    write_scope_t scope = {.after_seq = rs.fork_child ? rs.fork_seq : 0};
    if (trigger == WIRE_TRIGGER_EXIT && rs.finalize_report) {
        scope.after_seq = rs.finalize_seq > scope.after_seq ? rs.finalize_seq : scope.after_seq;
        scope.after_report = rs.finalize_report;
    }
    size_t live = scope.after_seq ? ledger_live_count_since(scope.after_seq) : ledger_live_total();
    /* With NPUPOOL_REPORT set every exit/finalize report is written, except an exit report that
     * would only repeat a finalize report (nothing allocated since: it would also overwrite it
     * under a pattern without %n). */
    int must = (pattern_set(&rs.cfg) && !scope.after_report) || refusal_last_unreported();
    scope.only_if_leaks = !must;
    uint64_t seq_now = ledger_last_seq();
    if (must || live > 0) {
        int before = (int)rs.stats.written;
        write_scoped(trigger, -1, NULL, 0, NULL, &scope);
        if (trigger == WIRE_TRIGGER_FINALIZE && (int)rs.stats.written > before) {
            rs.finalize_seq = seq_now;
            rs.finalize_report = rs.seq;
        }
    }
    /* In the same hold of the lock, so that no background report or rewrite comes in between:
     * the metrics file's rewrite with the state this report saw, and at exit the end of
     * background work (the reporter thread starts no report or rewrite after this one). */
    if (!rs.exiting) metrics_write_locked(&rs.src, rs.stats.written);
    if (trigger == WIRE_TRIGGER_EXIT) rs.exiting = 1;
    pthread_mutex_unlock(&rs.lock);
}

void report_at_exit(void)
{
    report_write_deferred_oom(); /* owed by a reporter thread that may not exist */
    report_if_needed(WIRE_TRIGGER_EXIT);
}

void report_at_finalize(void) { report_if_needed(WIRE_TRIGGER_FINALIZE); }

/* ---- oom -------------------------------------------------------------------------------------- */

#define OOM_LOCK_TRY_NS 2000000ull /* 2 ms: a refusal is rare and slow already */

void report_oom(const report_oom_info_t *info)
{
    if (!info) return;
    refusal_copy_t c; /* c.info.refused_ns: when (the report says how late it was written) */
    uint64_t suppressed = 0;
    if (!refusal_admit(info, rs_oom_max(), &c, &suppressed)) return; /* c's strings are its own */
    /* Never block on the report lock here (see refusal.c): write now, or hand it over.  Most of
     * its holders hold it for a moment (the reporter thread reads its settings under it), and a
     * report handed over describes the pool when the reporter writes it, not at the refusal
     * (tests/cases/vmm_puzzle.sh saw its pool figures disagree with the refusal's under load):
     * so try for up to OOM_LOCK_TRY_NS, yielding, before handing it over. */
    uint64_t give_up = clock_mono_ns() + OOM_LOCK_TRY_NS;
    do {
        if (pthread_mutex_trylock(&rs.lock) == 0) {
            write_locked(WIRE_TRIGGER_OOM, c.info.device, &c.info, suppressed, NULL);
            pthread_mutex_unlock(&rs.lock);
            return;
        }
        sched_yield();
    } while (clock_mono_ns() < give_up);
    refusal_defer(&c);
    reporter_wake(REPORTER_WAKE_OOM);
}

/* Each owed refusal is taken from the queue under the report lock and written in the same hold:
 * taken before the lock, it was in nobody's sight while this thread waited for it, and an exit
 * in that moment (report_at_exit drains the queue, then writes the exit report) lost it
 * (tests/cases/guest_refusals.sh: one oom report of two, 1 run in 45). */
REPORT_HIDDEN void report_write_deferred_oom(void)
{
    refusal_copy_t c;
    for (;;) {
        pthread_mutex_lock(&rs.lock);
        if (!refusal_take_deferred(&c)) { /* oldest first; c's strings are its own */
            pthread_mutex_unlock(&rs.lock);
            return;
        }
        write_locked(WIRE_TRIGGER_OOM, c.info.device, &c.info, 0, NULL);
        pthread_mutex_unlock(&rs.lock);
    }
}

REPORT_HIDDEN int report_write_threshold_now(const report_threshold_info_t *t)
{
    if (pthread_mutex_trylock(&rs.lock) != 0) return 0;
    if (!rs.exiting) write_locked(WIRE_TRIGGER_THRESHOLD, t->device, NULL, 0, t);
    pthread_mutex_unlock(&rs.lock);
    return 1;
}

/* ---- background ------------------------------------------------------------------------------- */

void report_start_background(void)
{
    pthread_mutex_lock(&rs.lock);
    if (!rs.bg_started) {
        rs.bg_started = 1;
        metrics_arm(); /* this process called ACL: its metrics file may be written */
        int need = rs.cfg.signal > 0 || rs.cfg.interval_s > 0 || report_usage_watched() ||
                   metrics_interval_s() > 0;
        reporter_start_locked(rs.cfg.signal, need);
    }
    pthread_mutex_unlock(&rs.lock);
}

void report_stop_background(void)
{
    reporter_stop();
    pthread_mutex_lock(&rs.lock);
    rs.bg_started = 0;
    metrics_disarm();
    pthread_mutex_unlock(&rs.lock);
    monitor_reset();
}

/* ---- fork ------------------------------------------------------------------------------------- */

void report_fork_prepare(void)
{
    pthread_mutex_lock(&rs.lock);
    refusal_fork_prepare();
}

void report_fork_parent(void)
{
    refusal_fork_parent();
    pthread_mutex_unlock(&rs.lock);
}

void report_fork_child(void)
{
    refusal_fork_child();
    pthread_mutex_init(&rs.lock, NULL);
    reporter_fork_child();
    metrics_fork_child();
    rs.bg_started = 0;
    rs.start_wall_s = clock_wall_s();
    rs.fork_child = 1;
    rs.fork_seq = ledger_last_seq();
}
