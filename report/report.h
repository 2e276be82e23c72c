/* report/report.h — JSON reports ("npupool-report/1", docs/report.md, docs/report-schema.json).
 *
 * Owns: when reports are written (exit, aclFinalize, a signal, an interval, a refused allocation,
 * aclrtResetDevice with live allocations, a pool-use threshold), where (report_config_t.pattern
 * with %p %n %t %r expanded by base/path.h, default WIRE_REPORT_DEFAULT_PATH), and how (cJSON; a
 * temporary file in the same directory, then rename(2), so a reader never sees half a report; a
 * path that exists and is not a regular file, e.g. /dev/full or a FIFO, is written in place).  A
 * failed write costs one `npupool:` stderr line and nothing else.
 *
 * The files of report/: report.c (this API: the report state, one report, exit/finalize/oom),
 * reporter.c (the background thread and the report signal), monitor.c (the pool-use thresholds),
 * report_file.c (atomic file writes), report_json.c (the document), report_cjson.c (cJSON,
 * loaded privately), symbolize.c (frames), trace.c (the allocation trace recorder, trace.h),
 * metrics.c (the Prometheus text file of NPUPOOL_METRICS, metrics.h, docs/metrics.md).
 *
 * Configuration comes in once, typed, from whoever owns the environment (the shim's option table):
 * report/ never reads NPUPOOL_* variables itself.
 *
 * Threads: one reporter thread (report_start_background) sleeps until a signal, an interval or a
 * threshold crossing wakes it and writes that report while the application keeps allocating (the
 * ledger and each pool are locked only briefly, one at a time).  Reports are serialised by one
 * mutex; `growth` is measured against the previous report written.  The same thread rewrites the
 * metrics file (NPUPOOL_METRICS) every NPUPOOL_METRICS_INTERVAL seconds, under the same mutex;
 * report_at_finalize and report_at_exit rewrite it once more, so it ends with the final state.
 *
 * Preconditions: report_write, report_oom, report_at_exit and report_at_finalize take the report
 * lock, each pool's lock and the ledger's shard locks in turn, and call the source's callbacks:
 * the caller must hold no npupool lock.  report_usage_changed takes no lock and may be called
 * anywhere (also under a pool lock).
 */
#ifndef NPUPOOL_REPORT_H
#define NPUPOOL_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "vocab.h"
#include "wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The options of report/, as the shim's option table parsed them (docs/report.md). */
typedef struct report_config {
    const char
        *pattern;      /* NPUPOOL_REPORT; NULL/"" = the default path, exit report only with leaks */
    int signal;        /* NPUPOOL_REPORT_SIGNAL: signal number, 0 = none */
    double interval_s; /* NPUPOOL_REPORT_INTERVAL: seconds between periodic reports, 0 = off */
    double warn_ratio; /* NPUPOOL_WARN_RATIO: pool use for a warning line + report, 0 = off */
    double critical_ratio; /* NPUPOOL_CRITICAL_RATIO: the same, critical, 0 = off */
    long free_map_max;     /* NPUPOOL_REPORT_FREE_MAP: most free-map entries per device */
    long live_map_max;     /* NPUPOOL_REPORT_LIVE_MAP: most live-map entries per device */
    int symbols;           /* NPUPOOL_REPORT_SYMBOLS: 1 = function/file/line in frames */
    long oom_max;          /* NPUPOOL_REPORT_OOM_MAX: further oom reports per process */
    const char *suppress;  /* NPUPOOL_SUPPRESS: suppressions file (base/suppress.h), "" = none */
    const char *metrics;   /* NPUPOOL_METRICS: Prometheus text file path pattern, NULL/"" = off */
    double metrics_interval_s; /* NPUPOOL_METRICS_INTERVAL: seconds between rewrites, 0 = at
                                  aclFinalize and exit only */
} report_config_t;

/* What the shim lends the report writer. */
typedef struct report_source {
    /* Call cb once per device that has a pool or live records; pool may be NULL (no pool) and
     * counters may be NULL.  cb takes each pool's lock briefly. */
    void (*for_each_device)(void *ctx,
                            void (*cb)(void *cbctx, int device, pool_t *pool,
                                       const wire_counters_t *counters),
                            void *cbctx);
    /* Call cb once per option with its effective value as text (the report's "config"). */
    void (*for_each_option)(void *ctx, void (*cb)(void *cbctx, const char *name, const char *value),
                            void *cbctx);
    /* The runtime library in use (the object defining the real aclrtMalloc): its path and GNU
     * build id, each NULL when not known (yet).  Called under the report lock; may be NULL. */
    void (*runtime)(void *ctx, const char **library, const char **build_id);
    void *ctx; /* passed to each of the above */
} report_source_t;

/* Remember the configuration and the source (both copied; src may be NULL: no devices, no
 * options).  Call once at start-up, before report_start_background; a later call replaces both
 * (tests).  cfg->pattern must stay valid for the process lifetime. */
void report_init(const report_config_t *cfg, const report_source_t *src);

/* Write one report now.  device: the device that caused it (reset, threshold), -1 = none.
 * Returns 0 when the report was written, -1 when not (one stderr line said why). */
int report_write(enum wire_trigger trigger, int device);

typedef struct report_oom_info {
    size_t requested_bytes;    /* what the application asked for */
    size_t granted_bytes;      /* bytes the block would have needed (padding included) */
    int device;                /* device of the request, -1 = unknown */
    enum vocab_entry entry;    /* the entry point refused */
    uint32_t stack_id;         /* ledger_stack_capture() of the refused call, 0 = none */
    const char *kind;          /* the classifier's word: "exhausted", "fragmentation", ... */
    const char *reason;        /* the classifier's one-line explanation (the stderr line's too) */
    size_t free_bytes;         /* free bytes in the pool when it refused (0 without a pool) */
    size_t largest_free_bytes; /* the largest block a request of this size could be given then */
    uint64_t refused_ns;       /* clock_mono_ns() of the refusal: set when report_oom records it */
} report_oom_info_t;
/* A refused allocation: an `oom` report, rate-limited (NPUPOOL_REPORT_OOM_MAX per process, at
 * least 1 s apart; the next one counts the suppressed).  Written on the calling thread. */
void report_oom(const report_oom_info_t *info);

/* The pool of `device` now has `allocated` of `reserved` bytes in use (reserved 0: no figures,
 * nothing to do).  Costs a few loads and
 * compares unless a threshold is crossed upwards: then one stderr line (with growth rate and the
 * predicted time to OOM) and a `threshold` report written by the reporter thread.  A level is
 * re-armed when use falls 5 points below it. */
void report_usage_changed(int device, size_t allocated, size_t reserved);
/* The same at a time the caller read already (clock_coarse_ns()): one clock read serves the
 * ledger record and the monitor of an allocation. */
void report_usage_changed_at(int device, size_t allocated, size_t reserved, uint64_t coarse_ns);
/* 1 when a threshold is configured, so that report_usage_changed wants the figures; a caller
 * whose figures cost something (a pool's allocated bytes: a cache line every thread's large
 * blocks write) asks first. */
int report_usage_watched(void);

/* Start the reporter thread (when a signal, an interval, a threshold or the metrics file is
 * configured) and install the signal handler when the application has none for that signal.
 * Idempotent.  The metrics file is written only in a process that called this (the shim calls it
 * at the first ACL call), and in a fork child only once it is called there again. */
void report_start_background(void);
/* Stop and join the reporter thread, restore the signal's default disposition if npupool
 * installed it (tests; not needed at exit). */
void report_stop_background(void);

/* Exit / aclFinalize: write the report when a pattern is set or live allocations exist. */
void report_at_exit(void);
void report_at_finalize(void);

/* Fork (shim/fork.c's table): prepare waits for a report in progress (it comes before the pool
 * and ledger locks: the writer holds the report lock while taking those).  The child keeps the
 * parent's growth baseline but has no reporter thread (none is started in a fork child; call
 * report_start_background in it to get one) and the report signal gets its default action back. */
void report_fork_prepare(void);
void report_fork_parent(void);
void report_fork_child(void);

/* Statistics (tests, and the "ledger" section of the next report). */
typedef struct report_stats {
    uint64_t written;        /* reports written */
    uint64_t failed;         /* reports that could not be written */
    uint64_t oom_suppressed; /* oom reports skipped by the rate limit */
    uint64_t signals;        /* signal wake-ups seen by the reporter thread */
    char last_path[4096];    /* path of the last report written ("" if none) */
} report_stats_t;
void report_get_stats(report_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* NPUPOOL_REPORT_H */
