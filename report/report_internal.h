/* report/report_internal.h — what the files of report/ share with each other (never used outside).
 *
 * Owns: the growth baseline and threshold types, the document builder's inputs, and the hidden
 * functions the files call each other with: report.c (state, one report) calls report_json.c (the
 * document) and report_file.c (the file); reporter.c (the thread) and monitor.c (thresholds) call
 * back into report.c for background reports and the metrics file (metrics.h).
 * Locking: report_json_build and report_file_write run under the report lock (report.c's
 * `rs.lock`); monitor_* and reporter_wake take no lock.
 */
#ifndef NPUPOOL_REPORT_INTERNAL_H
#define NPUPOOL_REPORT_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger.h"
#include "report.h"
#include "suppress.h"

#define REPORT_HIDDEN __attribute__((visibility("hidden")))

/* Per (device, stack) figures of the previous report: the growth baseline. */
typedef struct report_baseline_entry {
    int device;        /* device id, -1 = unknown */
    uint32_t stack_id; /* stack id */
    uint64_t count;    /* live allocations then */
    uint64_t bytes;    /* requested bytes then */
} report_baseline_entry_t;

typedef struct report_threshold_info {
    int device;                /* device whose pool crossed */
    int level;                 /* 1 = warning, 2 = critical */
    double usage_ratio;        /* allocated / reserved at the crossing */
    double threshold_ratio;    /* the threshold crossed */
    size_t allocated_bytes;    /* pool allocated bytes at the crossing */
    size_t reserved_bytes;     /* pool reserved bytes */
    double growth_bytes_per_s; /* allocated bytes growth rate; NAN = unknown (window too short) */
    double predicted_oom_s;    /* seconds until allocated reaches reserved; < 0 = not growing,
                                  NAN = unknown */
    double rate_window_s;      /* seconds of history the rate was measured over */
} report_threshold_info_t;

/* A refusal kept after the refused call returned (refusal.c): its figures and its own copies of
 * the classifier's strings (info.kind and info.reason point into them). */
typedef struct refusal_copy {
    report_oom_info_t info; /* the refusal as the shim described it */
    char kind[24];          /* info.kind's text */
    char reason[320];       /* info.reason's text */
    double wall_s;          /* when (epoch seconds); info.refused_ns: when (clock_mono_ns) */
    int reported;           /* 1 when it got (or is owed) an oom report of its own */
} refusal_copy_t;

/* What every report says about refusals ("refusals" section, when total > 0). */
typedef struct report_refusals {
    uint64_t total;      /* refusals seen by this process */
    uint64_t reported;   /* of them, with an oom report of their own */
    uint64_t suppressed; /* of them, counted only */
    refusal_copy_t last; /* the last one */
} report_refusals_t;

/* Everything one report is built from. */
typedef struct report_input {
    enum wire_trigger trigger;                /* why */
    int device;                               /* device that caused it, -1 = none */
    uint64_t seq;                             /* this report's number (%n) */
    const report_config_t *cfg;               /* options in effect */
    int backtrace_depth;                      /* ledger_backtrace_depth() now */
    const report_source_t *src;               /* devices and options (may have NULL callbacks) */
    const ledger_site_t *sites;               /* live allocations by site, sorted for output */
    size_t nsites;                            /* entries in sites */
    const report_baseline_entry_t *base;      /* previous report's sites, sorted (device, stack) */
    size_t nbase;                             /* entries in base */
    const report_oom_info_t *oom;             /* oom trigger only */
    uint64_t oom_suppressed;                  /* oom reports skipped before this one */
    const report_threshold_info_t *threshold; /* threshold trigger only */
    const report_refusals_t *refusals;        /* refusals so far (total 0: none) */
    double start_wall_s;                      /* process start, epoch seconds */
    uint64_t now_mono_ns;                     /* clock_coarse_ns() at the start of the report */
    double now_wall_s;                        /* epoch seconds at the start of the report */
    const report_stats_t *stats;              /* reports written so far */
    const suppress_list_t *suppress;          /* NPUPOOL_SUPPRESS patterns, NULL = none */
    uint64_t leaks_after_report;              /* leaks listed only if newer than this report's
                                                 (its number), 0 = every live allocation */
} report_input_t;

/* ---- report_json.c ------------------------------------------------------------------------- */
/* What building a document found out. */
typedef struct report_json_result {
    size_t unsuppressed_sites; /* leak sites no suppression pattern covers */
    uint64_t suppressed_bytes; /* requested bytes of the sites a pattern covers */
} report_json_result_t;

/* Build the whole document (NULL when host memory ran out).  Calls the symbolizer, pool_* and
 * the source's callbacks.  *sym_out receives the symbolizer whose strings the document references:
 * symbolize_close() it after printing the document (it may be NULL). */
struct symbolizer;
REPORT_HIDDEN cJSON *report_json_build(const report_input_t *in, struct symbolizer **sym_out,
                                       report_json_result_t *res);

/* ---- report_file.c ------------------------------------------------------------------------- */
/* Write data to path atomically (a temporary file + rename; in place for an existing non-regular
 * file).  Returns 0, or -1 with errno set and *what naming the failed step. */
REPORT_HIDDEN int report_file_write(const char *path, const char *data, size_t len, uint64_t seq,
                                    const char **what);

/* ---- report.c, for the reporter thread --------------------------------------------------- */
/* A background report (signal, interval, threshold): skipped once the exit report was written.
 * Takes the report lock. */
REPORT_HIDDEN void report_write_background(enum wire_trigger trigger, int device,
                                           const report_threshold_info_t *threshold);
REPORT_HIDDEN void report_count_signal(void);
REPORT_HIDDEN double report_interval_s(void);
/* The metrics file (metrics.h): seconds between rewrites (0 = no periodic rewrite), and one
 * rewrite now (skipped once the exit report was written).  Take the report lock. */
REPORT_HIDDEN double report_metrics_interval_s(void);
REPORT_HIDDEN void report_write_metrics(void);

/* The reporter thread's share of refusals and thresholds: reports that could not be written on
 * the thread that caused them because another report was being written. */
REPORT_HIDDEN void report_write_deferred_oom(void);
/* A threshold crossing, written now when the report lock is free, else left to the thread.
 * Returns 1 when written (or when reports are over: exiting), 0 when the thread owes it. */
REPORT_HIDDEN int report_write_threshold_now(const report_threshold_info_t *t);

/* ---- refusal.c ------------------------------------------------------------------------- */
/* One refused allocation: 1 when it gets a report of its own (*out: its copy, *suppressed_before:
 * refusals suppressed since the previous oom report), 0 when it is only counted. */
REPORT_HIDDEN int refusal_admit(const report_oom_info_t *info, long oom_max, refusal_copy_t *out,
                                uint64_t *suppressed_before);
REPORT_HIDDEN void refusal_defer(const refusal_copy_t *c);    /* the reporter thread writes it */
REPORT_HIDDEN int refusal_take_deferred(refusal_copy_t *out); /* the oldest owed: 1, else 0 */
REPORT_HIDDEN void refusal_summary(report_refusals_t *out);   /* for every report */
REPORT_HIDDEN int refusal_last_unreported(void); /* 1: the last refusal has no report yet */
REPORT_HIDDEN void refusal_fork_prepare(void);
REPORT_HIDDEN void refusal_fork_parent(void);
REPORT_HIDDEN void refusal_fork_child(void);

/* ---- reporter.c -------------------------------------------------------------------------- */
#define REPORTER_WAKE_SIGNAL 's'    /* the report signal arrived */
#define REPORTER_WAKE_THRESHOLD 't' /* a threshold was crossed */
#define REPORTER_WAKE_OOM 'o'       /* a refusal's report was deferred */
/* Wake the reporter thread (async-signal-safe, lock-free, errno preserved). */
REPORT_HIDDEN void reporter_wake(char why);
/* Start the thread and install the signal handler (pre: the report lock held).  0, or -1 after
 * one stderr line. */
REPORT_HIDDEN int reporter_start_locked(int signal, int need_thread);
/* Stop and join the thread, restore the signal if npupool installed it.  No lock held. */
REPORT_HIDDEN void reporter_stop(void);
/* In a fork child: the parent's thread and wake-up channel are not ours; drop them. */
REPORT_HIDDEN void reporter_fork_child(void);

/* ---- monitor.c --------------------------------------------------------------------------- */
REPORT_HIDDEN void monitor_configure(double warn_ratio, double critical_ratio);
/* Write the threshold reports the monitors owe (the reporter thread, no lock held). */
REPORT_HIDDEN void monitor_write_pending(void);
/* Forget every level (tests: report_stop_background). */
REPORT_HIDDEN void monitor_reset(void);

#endif
