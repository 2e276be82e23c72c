/* tools/cmd_export.c — `npupool export TRACE`: npupool's data in the viewers people already use.
 *
 * Owns: the options of export, the choice of the stacks report and the pool size, and where the
 * reports sit on the trace's clock; the formats are export_viz.c (PyTorch memory snapshot) and
 * export_perfetto.c (Chrome trace events).
 * Placement of reports: a trace's times are CLOCK_MONOTONIC and a report's dump_time is wall
 * clock, with no common instant written down, so the latest report (by dump_time) is placed at
 * the trace's last event — exact for the exit report, which the shim writes at exit, just after
 * the trace's last line — and every other report by its dump time before that one.  Reports of
 * another process than the trace's (pid) are refused.
 * Stacks: from the latest report that lists live blocks of a pool (the exit report written after
 * aclFinalize has no pool left; the finalize report before it has), else the latest report.
 * Pool size: --pool-bytes / --ratio / --device-bytes as `replay`; when none is given and a
 * report is, the largest pool of the stacks report (the size the recorded run had).
 */
#include "commands.h"
#include "export.h"
#include "fmt.h"
#include "replay.h"
#include "report_read.h"
#include "tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    OPT_MEMORY_VIZ,
    OPT_PERFETTO,
    OPT_REPORT,
    OPT_POOL_BYTES,
    OPT_RATIO,
    OPT_DEVICE_BYTES,
    OPT_FALLBACK,
    OPT_ROUNDING,
    OPT_BACKING,
    OPT_CHUNK_BYTES,
    OPT_MAX_SAMPLES,
};
static const cli_opt_t export_opts[] = {
    [OPT_MEMORY_VIZ] = {"memory-viz", 0, CLI_TEXT, "OUT.pickle", NULL, 0,
                        "write a PyTorch memory snapshot (pytorch.org/memory_viz,\n"
                        "torch.cuda._memory_viz); '-' = standard output"},
    [OPT_PERFETTO] = {"perfetto", 0, CLI_TEXT, "OUT.json", NULL, 0,
                      "write Chrome trace events (ui.perfetto.dev, chrome://tracing):\n"
                      "the trace replayed through the pool; '-' = standard output"},
    [OPT_REPORT] = {"report", 0, CLI_TEXT, "REPORT", NULL, CLI_REPEAT,
                    "a report of the traced process: its stacks label the allocations\n"
                    "live in it (the latest report), each report is an instant event"},
    REPLAY_POOL_OPTS(OPT_POOL_BYTES, OPT_RATIO, OPT_DEVICE_BYTES, OPT_FALLBACK, OPT_ROUNDING,
                     OPT_BACKING, OPT_CHUNK_BYTES),
    [OPT_MAX_SAMPLES] = {"max-samples", 0, CLI_UINT, "N", "100000", CLI_POSITIVE,
                         "counter points (and refusal instants) per device at most"},
    {NULL},
};

/* An ISO 8601 UTC time "YYYY-mm-ddTHH:MM:SS[.fff]Z" as ns since the epoch; -1 when it is not. */
static int64_t iso_ns(const char *s)
{
    struct tm tm = {0};
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    int64_t frac = 0, scale = 1000000000;
    const char *p = s + n;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (scale > 1) scale /= 10, frac += (*p - '0') * scale;
    if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0) return -1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return -1;
    return (int64_t)t * 1000000000 + frac;
}

/* Place the reports on the trace's clock (export.h: report_ns); returns the latest one. */
static const report_t *place(const trace_t *t, const report_t *r, size_t n, int64_t *at,
                             const char **how)
{
    const report_t *latest = NULL;
    int64_t latest_wall = 0, last = 0;
    for (size_t e = 0; t->time_ns && e < t->nev; e++)
        if ((int64_t)t->time_ns[e] > last) last = (int64_t)t->time_ns[e];
    for (size_t i = 0; i < n; i++) {
        int64_t w = iso_ns(r[i].dump_time);
        if (w >= 0 && (latest == NULL || w > latest_wall)) latest = &r[i], latest_wall = w;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t w = iso_ns(r[i].dump_time);
        at[i] = w < 0 || latest == NULL ? EXPORT_UNPLACED : last - (latest_wall - w);
    }
    *how = latest == NULL ? "no report has a dump_time"
           : strcmp(latest->trigger, "exit") == 0
               ? "the latest report (an exit report) at the trace's last event, the others by "
                 "their dump_time before it"
               : "the latest report at the trace's last event (an estimate: it is not an exit "
                 "report), the others by their dump_time before it";
    if (latest == NULL && n) latest = &r[n - 1];
    return latest;
}

static FILE *open_out(const char *path)
{
    if (strcmp(path, "-") == 0) return stdout;
    FILE *f = fopen(path, "wb");
    if (f == NULL) tools_err("%s: cannot write", path);
    return f;
}

static int close_out(FILE *f, int rc)
{
    if (f == stdout) return fflush(f) == 0 && rc == 0 ? 0 : -1;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

static int write_viz(const char *path, const export_in_t *in)
{
    FILE *f = open_out(path);
    if (f == NULL) return TOOLS_BAD;
    export_viz_stats_t st;
    if (close_out(f, export_viz_write(in, f, &st)) != 0) {
        tools_err("%s: cannot write the snapshot (disk full, or out of memory)", path);
        return TOOLS_BAD;
    }
    if (f == stdout) return TOOLS_OK;
    printf("wrote %s: PyTorch memory snapshot, %" PRIu64 " trace entries, %" PRIu64
           " segment%s, %" PRIu64 " block%s live at the end (%" PRIu64 " with a stack%s%s)\n",
           path, st.events, st.segments, st.segments == 1 ? "" : "s", st.live_blocks,
           st.live_blocks == 1 ? "" : "s", st.with_frames, in->stacks ? " from " : "",
           in->stacks ? in->stacks->path : "");
    if (st.outside)
        printf("  %" PRIu64 " allocation%s outside the report's pool: a segment each\n", st.outside,
               st.outside == 1 ? "" : "s");
    if (st.skipped_devices)
        printf("  %" PRIu64 " device%s with a negative id (or one above 4096) left out\n",
               st.skipped_devices, st.skipped_devices == 1 ? "" : "s");
    printf("  open: drag it onto https://pytorch.org/memory_viz, or python -m "
           "torch.cuda._memory_viz trace_plot %s -o out.html\n",
           path);
    return TOOLS_OK;
}

static int write_perfetto(const char *path, const export_in_t *in)
{
    FILE *f = open_out(path);
    if (f == NULL) return TOOLS_BAD;
    export_perfetto_stats_t st;
    if (close_out(f, export_perfetto_write(in, f, &st)) != 0) {
        char b[FMT_BYTES_LEN];
        tools_err("%s: cannot write (disk full, out of memory, or no %s pool)", path,
                  fmt_bytes(b, in->replay.pool_bytes));
        return TOOLS_BAD;
    }
    if (f == stdout) return TOOLS_OK;
    char b[FMT_BYTES_LEN];
    printf("wrote %s: Chrome trace events of a replay through a %s pool per device (fallback %s), "
           "%d device%s x 4 counter tracks, %" PRIu64 " counter events, %" PRIu64 " refusal%s",
           path, fmt_bytes(b, in->replay.pool_bytes), in->replay.fallback ? "on" : "off",
           in->t->ndevices, in->t->ndevices == 1 ? "" : "s", st.counters, st.refusals,
           st.refusals == 1 ? "" : "s");
    if (st.refusals_left) printf(" (%" PRIu64 " more not written)", st.refusals_left);
    printf(", %" PRIu64 " report%s\n", st.reports, st.reports == 1 ? "" : "s");
    printf("  open: https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load)\n");
    return TOOLS_OK;
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    const char *viz = a->v[OPT_MEMORY_VIZ].text, *pf = a->v[OPT_PERFETTO].text;
    if (!viz && !pf) return cli_usage_error(cmd, "give --memory-viz FILE or --perfetto FILE");
    if (viz && pf && strcmp(viz, "-") == 0 && strcmp(pf, "-") == 0)
        return cli_usage_error(cmd, "only one of the files can go to standard output");
    const size_t nr = (size_t)a->v[OPT_REPORT].given;
    report_t *r = calloc(nr ? nr : 1, sizeof *r);
    int64_t *at = calloc(nr ? nr : 1, sizeof *at);
    trace_t t;
    memset(&t, 0, sizeof t);
    size_t loaded = 0;
    int rc = TOOLS_BAD;
    if (r == NULL || at == NULL) {
        tools_err("out of memory");
        goto out;
    }
    if ((rc = trace_read_file_keep(a->operand[0], TRACE_KEEP_TIME | TRACE_KEEP_ADDR, &t)) != 0)
        goto out;
    for (; loaded < nr; loaded++) {
        if ((rc = report_read_file(a->v[OPT_REPORT].all[loaded], &r[loaded])) != TOOLS_OK) {
            goto out;
        }
        if (t.pid && r[loaded].pid && t.pid != r[loaded].pid) {
            tools_err("%s: a report of process %ld, the trace is of process %ld", r[loaded].path,
                      r[loaded].pid, t.pid);
            rc = TOOLS_BAD;
            loaded++;
            goto out;
        }
    }
    const char *how = "no reports";
    const report_t *latest = nr ? place(&t, r, nr, at, &how) : NULL;
    /* The stacks and the pool: the latest report that still lists live blocks of a pool (the
     * exit report after aclFinalize has no pool left; the finalize report before it has). */
    const report_t *stacks = latest;
    int64_t stacks_wall = -1;
    for (size_t i = 0; i < nr; i++) {
        int64_t w = iso_ns(r[i].dump_time);
        int listed = 0;
        for (size_t k = 0; k < r[i].ndevices; k++)
            listed |= r[i].devices[k].has_pool && r[i].devices[k].nlive_map > 0;
        if (listed && w >= stacks_wall) stacks = &r[i], stacks_wall = w;
    }
    export_in_t in = {
        .t = &t,
        .reports = r,
        .nreports = nr,
        .stacks = stacks,
        .report_ns = at,
        .placement = how,
        .max_samples = a->v[OPT_MAX_SAMPLES].u,
        .replay =
            {
                .alloc = &replay_pool_allocator,
                .pool_bytes = replay_pool_bytes(&a->v[OPT_POOL_BYTES], &a->v[OPT_RATIO],
                                                &a->v[OPT_DEVICE_BYTES]),
                .fallback = a->v[OPT_FALLBACK].choice == 1,
                .rounding = a->v[OPT_ROUNDING].choice,
                .only_device = -1,
            },
    };
    const int sized =
        a->v[OPT_POOL_BYTES].given || a->v[OPT_RATIO].given || a->v[OPT_DEVICE_BYTES].given;
    if (!sized && stacks) {
        uint64_t biggest = 0;
        for (size_t k = 0; k < stacks->ndevices; k++)
            if (stacks->devices[k].has_pool && stacks->devices[k].reserved > biggest)
                biggest = stacks->devices[k].reserved;
        if (biggest) in.replay.pool_bytes = biggest;
    }
    rc = replay_choose_backing(&a->v[OPT_BACKING], &a->v[OPT_CHUNK_BYTES], &in.replay);
    if (viz && rc == TOOLS_OK) rc = write_viz(viz, &in);
    if (pf && rc == TOOLS_OK) rc = write_perfetto(pf, &in);
out:
    for (size_t i = 0; i < loaded; i++) report_read_release(&r[i]);
    trace_read_release(&t);
    free(r);
    free(at);
    return rc;
}

const cli_cmd_t cmd_export = {
    .name = "export",
    .operands = "TRACE",
    .purpose = "a trace (and reports) for memory_viz, Perfetto and chrome://tracing",
    .about = "Write a trace (NPUPOOL_TRACE, or an RMM log) in formats other tools open: a PyTorch "
             "memory\nsnapshot for pytorch.org/memory_viz (the trace's allocations at their "
             "recorded addresses,\nwith the stacks of a report where they match a live record), "
             "and Chrome trace events for\nui.perfetto.dev (the trace replayed through the pool: "
             "allocated, reserved, largest free block\nand fragmentation over time per device, "
             "refusals and reports as instants).",
    .opts = export_opts,
    .epilog = "See docs/tools.md for what each file holds and how to open it.",
    .run = run,
};
