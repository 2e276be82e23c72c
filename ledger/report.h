/* ledger/report.h — JSON reports ("npupool-report/1", docs/report.md, docs/report-schema.json).
 *
 * Owns: when reports are written (exit, aclFinalize, a signal, an interval, a refused allocation,
 * aclrtResetDevice with live allocations, a pool-use threshold), where (NPUPOOL_REPORT with %p %n
 * %t %r expanded, default ./npupool-report-%p-%n.json), and how (cJSON; a temporary file in the
 * same directory, then rename(2), so a reader never sees half a report; a path that exists and is
 * not a regular file, e.g. /dev/full or a FIFO, is written in place).  A failed write costs one
 * `npupool:` stderr line and nothing else.
 *
 * Threads: one reporter thread (report_start_background) waits on a pipe.  The signal handler and
 * the threshold monitor only write one byte to that pipe; the thread writes the report while the
 * application keeps allocating (the ledger and each pool are locked only briefly, one at a time).
 * Reports are serialised by one mutex; `growth` is measured against the previous report written.
 *
 * Preconditions: report_write, report_oom, report_at_exit and report_at_finalize take the report
 * lock, each pool's lock (pool_get_stats / pool_walk) and the ledger's shard locks in turn, and call
 * the source's callbacks: the caller must hold no npupool lock.  report_usage_changed takes no lock
 * and may be called anywhere (also under a pool lock).
 *
 * Options (read in report_init through ledger_option(): the shim's table, else the environment):
 *   NPUPOOL_REPORT            path pattern; set (non-empty) = also write an exit report without leaks
 *   NPUPOOL_REPORT_SIGNAL     signal that asks for a report (SIGUSR2; 0 = off)
 *   NPUPOOL_REPORT_INTERVAL   seconds between periodic reports (0 = off)
 *   NPUPOOL_WARN_RATIO        pool use for a warning line + report (0.85; 0 = off)
 *   NPUPOOL_CRITICAL_RATIO    pool use for a critical line + report (0.95; 0 = off)
 *   NPUPOOL_REPORT_FREE_MAP   most free-map entries per device (4096; the largest blocks are kept)
 *   NPUPOOL_REPORT_LIVE_MAP   most live-map entries per device (4096; the largest blocks are kept)
 *   NPUPOOL_REPORT_SYMBOLS    1 = function/file/line in frames, 0 = module/offset/build id only (1)
 *   NPUPOOL_REPORT_OOM_MAX    most oom reports per process (10); at least 1 s apart
 */
#ifndef NPUPOOL_REPORT_H
#define NPUPOOL_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REPORT_SCHEMA "npupool-report/1"
#define REPORT_DEFAULT_PATH "npupool-report-%p-%n.json"

enum report_trigger {
    REPORT_EXIT,
    REPORT_FINALIZE,
    REPORT_SIGNAL,
    REPORT_INTERVAL,
    REPORT_OOM,
    REPORT_RESET,
    REPORT_THRESHOLD,
    REPORT_TRIGGER_COUNT
};

struct shim_counters; /* shim/shim_counters.h */

/* What the shim lends the report writer. */
typedef struct report_source {
    /* Call cb once per device that has a pool or live records; pool may be NULL (no pool) and
     * counters may be NULL.  cb takes each pool's lock briefly. */
    void (*for_each_device)(void *ctx,
                            void (*cb)(void *cbctx, int device, pool_t *pool,
                                       const struct shim_counters *counters),
                            void *cbctx);
    /* Call cb once per option with its effective value as text. */
    void (*for_each_option)(void *ctx, void (*cb)(void *cbctx, const char *name, const char *value),
                            void *cbctx);
    void *ctx; /* passed to both */
} report_source_t;

/* (Re)reads the options and remembers *src (copied; src may be NULL: no devices, no options
 * besides the report's own).  Call once at start-up, before report_start_background. */
void report_init(const report_source_t *src);

/* Write one report now.  device: the device that caused it (reset, threshold), -1 = none.
 * Returns 0 when the report was written, -1 when not (one stderr line said why). */
int report_write(enum report_trigger trigger, int device);

typedef struct report_oom_info {
    size_t requested_bytes;    /* what the application asked for */
    int device;                /* device of the request */
    const char *entry_point;   /* "aclrtMalloc", ... */
    size_t free_bytes;         /* free bytes in the pool when it refused */
    size_t largest_free_bytes; /* largest free block then */
    uint32_t stack_id;         /* ledger_capture_stack() of the refused call, 0 = none */
    size_t granted_bytes; /* bytes the block would have needed (padding included); 0 = requested */
} report_oom_info_t;
/* A refused allocation: an `oom` report, rate-limited (NPUPOOL_REPORT_OOM_MAX per process, at
 * least 1 s apart; the next one counts the suppressed).  Written on the calling thread. */
void report_oom(const report_oom_info_t *info);

/* The pool of `device` now has `allocated` of `reserved` bytes in use.  Costs a few loads and
 * compares unless a threshold is crossed upwards: then one stderr line (with growth rate and the
 * predicted time to OOM) and a `threshold` report written by the reporter thread.  A level is
 * re-armed when use falls 5 points below it. */
void report_usage_changed(int device, size_t allocated, size_t reserved);

/* Start the reporter thread (when a signal, an interval or a threshold is configured) and install
 * the signal handler when the application has none for that signal.  Idempotent. */
void report_start_background(void);
/* Stop and join the reporter thread, restore the signal's default disposition if npupool
 * installed it (tests; not needed at exit). */
void report_stop_background(void);

/* Exit / aclFinalize: write the report when NPUPOOL_REPORT is set or live allocations exist. */
void report_at_exit(void);
void report_at_finalize(void);

/* pthread_atfork: prepare waits for a report in progress (take it before the pool and ledger
 * locks: the writer holds it while taking those).  The child keeps the parent's growth baseline
 * but has no reporter thread (none is started in a fork child; call report_start_background in
 * it to get one) and the report signal gets its default action back. */
void report_atfork_prepare(void);
void report_atfork_parent(void);
void report_atfork_child(void);

const char *report_trigger_name(enum report_trigger trigger); /* "exit", "finalize", ... */

/* Expand %p %n %t %r %% of `pattern` (NULL or "" = REPORT_DEFAULT_PATH).  0, or -1 when the
 * result does not fit in `len`. */
int report_expand_path(const char *pattern, uint64_t seq, char *out, size_t len);

/* Statistics (tests, and the "report" section of the next report). */
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
