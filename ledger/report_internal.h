/* ledger/report_internal.h — what report.c (when and where) and report_json.c (what) share.
 *
 * Owns: the report configuration, the growth baseline type and the document builder's inputs.
 * Everything here is used under the report lock (report.c, `rs.lock`).
 */
#ifndef NPUPOOL_REPORT_INTERNAL_H
#define NPUPOOL_REPORT_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger.h"
#include "ledger_internal.h"
#include "report.h"

typedef struct report_config {
    char pattern[4096];    /* NPUPOOL_REPORT ("" = default path) */
    int pattern_set;       /* 1 when NPUPOOL_REPORT is non-empty */
    int signal;            /* NPUPOOL_REPORT_SIGNAL, 0 = off */
    double interval_s;     /* NPUPOOL_REPORT_INTERVAL, 0 = off */
    double warn_ratio;     /* NPUPOOL_WARN_RATIO, 0 = off */
    double critical_ratio; /* NPUPOOL_CRITICAL_RATIO, 0 = off */
    long free_map_max;     /* NPUPOOL_REPORT_FREE_MAP */
    long live_map_max;     /* NPUPOOL_REPORT_LIVE_MAP */
    int symbols;           /* NPUPOOL_REPORT_SYMBOLS */
    long oom_max;          /* NPUPOOL_REPORT_OOM_MAX */
    int backtrace_depth;   /* NPUPOOL_BACKTRACE_DEPTH in effect */
} report_config_t;

/* Per (device, stack) figures of the previous report: the growth baseline. */
typedef struct report_baseline_entry {
    int device;        /* device id */
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
    double growth_bytes_per_s; /* allocated bytes growth rate (<= 0: not growing) */
    double predicted_oom_s;    /* seconds until allocated reaches reserved; < 0 = never */
} report_threshold_info_t;

/* Everything one report is built from. */
typedef struct report_input {
    enum report_trigger trigger; /* why */
    int device;                  /* device that caused it, -1 = none */
    uint64_t seq;                /* this report's number (%n) */
    const report_config_t *cfg;  /* options in effect */
    const report_source_t *src;  /* devices and options (may have NULL callbacks) */
    const ledger_site_t *sites;  /* live allocations by site, sorted for output */
    size_t nsites;
    const report_baseline_entry_t *base; /* previous report's sites, sorted by (device, stack) */
    size_t nbase;
    const report_oom_info_t *oom;             /* oom trigger only */
    uint64_t oom_suppressed;                  /* oom reports skipped before this one */
    const report_threshold_info_t *threshold; /* threshold trigger only */
    double start_wall_s;                      /* process start, epoch seconds */
    uint64_t now_mono_ns;                     /* ledger_now_ns() at the start of the report */
    double now_wall_s;                        /* epoch seconds at the start of the report */
    const report_stats_t *stats;              /* reports written so far */
} report_input_t;

/* Build the whole document (NULL when host memory ran out).  Calls the symbolizer, pool_* and
 * the source's callbacks.  *sym_out receives the symbolizer whose strings the document references:
 * sym_close() it after printing the document (it may be NULL). */
struct symbolizer;
LEDGER_HIDDEN cJSON *report_build(const report_input_t *in, struct symbolizer **sym_out);

/* ISO 8601 UTC with milliseconds ("2024-05-01T12:00:00.123Z"). */
LEDGER_HIDDEN void report_iso_time(double epoch_s, char *buf, size_t len);

#endif
