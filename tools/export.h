/* tools/export.h — npupool's data in other people's viewers (`npupool export`).
 * Names: types export_*_t, functions export_viz_* (export_viz.c), export_perfetto_*
 * (export_perfetto.c).
 *
 * Owns: the two file formats written from a trace (and reports):
 *   - a PyTorch memory snapshot (pickle) for pytorch.org/memory_viz and torch.cuda._memory_viz:
 *     the trace's own allocations and frees, at their recorded addresses, in one segment per
 *     device (the pool), with the stacks of a report where an allocation can be matched to one
 *     of its live records;
 *   - a Chrome trace-event JSON file for ui.perfetto.dev and chrome://tracing: the trace
 *     replayed through the real pool, counter tracks per device (allocated, reserved, largest
 *     free block, fragmentation) and instant events for refusals and reports.
 * What the files hold, and what they cannot, is written down in docs/tools.md.
 */
#ifndef NPUPOOL_TOOLS_EXPORT_H
#define NPUPOOL_TOOLS_EXPORT_H

#include "replay.h"
#include "report_read.h"
#include "trace_read.h"

#include <stdint.h>
#include <stdio.h>

#define EXPORT_UNPLACED INT64_MIN /* a report whose time on the trace's clock is unknown */

typedef struct export_in {
    const trace_t *t;         /* read with TRACE_KEEP_TIME | TRACE_KEEP_ADDR */
    const report_t *reports;  /* --report, as given */
    size_t nreports;          /* entries in reports */
    const report_t *stacks;   /* the report whose stacks label allocations (the latest), or
                                   NULL */
    const int64_t *report_ns; /* each report's dump time on the trace's clock (ns), or
                                   EXPORT_UNPLACED */
    const char *placement;    /* how report_ns was found, in words (for the file) */
    replay_opts_t replay;     /* how the Perfetto export replays (pool size, rounding, ...) */
    uint64_t max_samples;     /* counter points per device track (and refusal instants) */
} export_in_t;

typedef struct export_viz_stats {
    uint64_t events;          /* trace entries written (all devices) */
    uint64_t segments;        /* segments written */
    uint64_t live_blocks;     /* active blocks in the segments (allocations live at the end) */
    uint64_t with_frames;     /* of those, blocks that got a report's stack */
    uint64_t skipped_devices; /* trace devices memory_viz cannot index (id < 0 or > 4096) */
    uint64_t outside;         /* allocations outside the report's pool: a segment each */
} export_viz_stats_t;

typedef struct export_perfetto_stats {
    uint64_t counters;      /* counter events written */
    uint64_t refusals;      /* refusal instants written */
    uint64_t refusals_left; /* refusals beyond max_samples a device, not written */
    uint64_t reports;       /* report instants written */
} export_perfetto_stats_t;

/* Write the snapshot to f.  Returns 0, or -1 when out of memory or on a write error (no
 * message: the caller names the file). */
int export_viz_write(const export_in_t *in, FILE *f, export_viz_stats_t *st);

/* Replay the trace and write the trace-event JSON to f.  Returns 0, or -1 (out of memory, a
 * write error, or the pool cannot be created: no message). */
int export_perfetto_write(const export_in_t *in, FILE *f, export_perfetto_stats_t *st);

#endif /* NPUPOOL_TOOLS_EXPORT_H */
