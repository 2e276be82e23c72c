/* report/metrics.h — the Prometheus text file of NPUPOOL_METRICS (docs/metrics.md), shared by the
 * files of report/ only (and the formatter's unit test).
 *
 * Owns: the metric names, types and help texts; one sample of the process (metrics_sample_t: the
 * pool snapshot's figures and the wire counters of each device, the ledger's totals); its text
 * (metrics_format: a pure function, no I/O, no allocation, no locale, no stdio); and the file's
 * state: the pattern, the path (expanded once per process), the rewrite count, whether writes
 * are failing.
 * The file is rewritten whole, as report_file_write writes a report (a temporary file in the
 * same directory, then rename(2)), so a reader such as node_exporter's textfile collector never
 * sees half of it; it is opened, written and closed at each rewrite: no descriptor is kept.
 * Who writes: the reporter thread every NPUPOOL_METRICS_INTERVAL seconds, report_at_finalize
 * and report_at_exit (the end state); never an allocating thread.  Only once
 * report_start_background has armed it (the shim does at the first ACL call), so a process that
 * never called ACL, and a fork child that did not start its own, writes no metrics file.
 * Locking: every function except metrics_format runs under the report lock (report.c's
 * `rs.lock`), which serialises the file with the reports and the fork handlers; collecting a
 * sample takes each pool's lock and the ledger's shard locks briefly, in the lock order.
 */
#ifndef NPUPOOL_REPORT_METRICS_H
#define NPUPOOL_REPORT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "report_internal.h"

#define METRICS_MAX_DEVICES (NPUPOOL_MAX_DEVICES + 1) /* every device id and the unknown one */

/* One device in a sample. */
typedef struct metrics_device {
    int device;                    /* device id, VOCAB_DEVICE_UNKNOWN (-1) = unknown */
    int has_pool;                  /* 1: the pool figures below are set */
    int has_counters;              /* 1: counters is set */
    uint64_t reserved_bytes;       /* pool_stats_t.reserved_bytes */
    uint64_t allocated_bytes;      /* pool_stats_t.allocated_bytes (granted, padding included) */
    uint64_t requested_bytes;      /* pool_stats_t.requested_bytes */
    uint64_t peak_allocated_bytes; /* pool_stats_t.peak_allocated_bytes */
    uint64_t free_bytes;           /* pool_stats_t.free_bytes */
    uint64_t largest_free_bytes;   /* pool_stats_t.largest_free_bytes */
    uint64_t live_blocks;          /* pool_stats_t.live_blocks: live pool allocations */
    double fragmentation;          /* pool_stats_t.fragmentation, 0..1 */
    wire_counters_t counters;      /* the device's event counters (base/wire.h) */
} metrics_device_t;

/* One sample of the process: what one rewrite of the file says. */
typedef struct metrics_sample {
    const char *version;        /* npupool's version (npupool_info's label) */
    int pid;                    /* the process (every series' `pid` label) */
    int rank;                   /* the job's rank, -1 = unknown (`rank="unknown"`) */
    uint64_t ledger_live;       /* ledger_memory_t.live_records: every device */
    uint64_t ledger_stacks;     /* ledger_memory_t.stacks */
    uint64_t ledger_host_bytes; /* record_bytes + stack_bytes */
    uint64_t reports_written;   /* report_stats_t.written */
    size_t ndevices;            /* entries in devices */
    metrics_device_t devices[METRICS_MAX_DEVICES]; /* in the source's order */
} metrics_sample_t;

/* The text of one file for sample s into buf (at most len bytes with the terminating NUL; buf
 * may be NULL when len is 0).  Returns the text's length, as snprintf does: a return >= len
 * means it was cut.  Every family has a HELP and a TYPE line and is written only when it has a
 * sample; labels are pid, rank (and device); no timestamps (the textfile collector refuses
 * them).  Async-signal-safe. */
REPORT_HIDDEN size_t metrics_format(const metrics_sample_t *s, char *buf, size_t len);

/* ---- the file (pre: the report lock held) ----------------------------------------------------- */
/* Remember the configuration: the pattern (NULL/"" = no file; %p %r %t %% expanded once per
 * process, %n as 0) and the interval.  Does not arm. */
REPORT_HIDDEN void metrics_configure(const char *pattern, double interval_s);
/* Seconds between rewrites; 0 when there is no file or it is written at finalize and exit only. */
REPORT_HIDDEN double metrics_interval_s(void);
/* Allow writes in this process (report_start_background) / forbid them again. */
REPORT_HIDDEN void metrics_arm(void);
REPORT_HIDDEN void metrics_disarm(void);
/* Collect a sample from src (its for_each_device; the ledger) and rewrite the file.  Nothing
 * when not armed or not configured.  A failure costs one stderr line per run of failures. */
REPORT_HIDDEN void metrics_write_locked(const report_source_t *src, uint64_t reports_written);
/* In a fork child: not armed; the path is expanded again (its pid) if it is armed there. */
REPORT_HIDDEN void metrics_fork_child(void);

#endif
