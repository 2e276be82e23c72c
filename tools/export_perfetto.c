/* tools/export_perfetto.c — the trace replayed through the pool, as Chrome trace-event JSON
 * (export.h: export_perfetto_write), for ui.perfetto.dev and chrome://tracing.
 *
 * The file: {"displayTimeUnit": "ns", "otherData": {...}, "traceEvents": [...]} with
 *   - per trace device one "process" (pid PID_BASE + device index, named "device N (npupool
 *     pool replay)" by a "process_name" metadata event) holding four counter tracks, each a "C"
 *     event with one argument: "allocated" {bytes} (live granted bytes in the pool), "reserved"
 *     {bytes} (pool + live fallback), "largest free" {bytes}, "fragmentation" {percent}
 *     (100 * (1 - largest free / free), 0 when nothing is free) — the figures replay.c computes,
 *     taken after every event through its observer;
 *   - "i" instant events: "refused" (process scope, at the refused request, with the request,
 *     free and largest free bytes), "recorded failure" for an RMM "allocate failure", and one
 *     "report TRIGGER" per report (global scope) at its dump time on the trace's clock.
 * Timestamps are microseconds (3 decimals: exact nanoseconds) from the trace's first event,
 * never decreasing (a hand-made trace out of time order is flattened).
 * Sampling: a device with at most max_samples events gets a counter point at every event where
 * a value changed.  With more, its events are cut into windows of ceil(events / max_samples)
 * and each window is represented by its point of highest allocated bytes (so the peak is kept),
 * again only where a value changed.  Refusal instants stop at max_samples per device (counted).
 */
#include "export.h"

#include "fmt.h"
#include "tools.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PID_BASE 1000 /* pid of device index 0's track group */

enum { C_ALLOCATED, C_RESERVED, C_LARGEST, C_FRAG, NCOUNTERS };
static const char *const counter_name[NCOUNTERS] = {"allocated", "reserved", "largest free",
                                                    "fragmentation"};

typedef struct pf_dev {
    uint64_t nev;           /* events of this device in the trace */
    uint64_t window;        /* events per sample window (1: every event) */
    uint64_t seen;          /* events observed so far */
    int have_best;          /* best holds a point of the current window */
    replay_point_t best;    /* the window's point of highest allocated bytes */
    uint64_t best_at;       /* its time (ns) */
    int emitted;            /* a point was written before: last[] is valid */
    double last[NCOUNTERS]; /* the values last written */
    uint64_t refusals;      /* refusal instants written */
} pf_dev_t;

typedef struct pf {
    const export_in_t *in;           /* what to write */
    FILE *f;                         /* where */
    int first;                       /* no event written yet (no comma) */
    uint64_t t0;                     /* the trace's first time (ns) */
    uint64_t clock;                  /* the largest time seen so far (ns): timestamps never fall */
    pf_dev_t dev[TRACE_MAX_DEVICES]; /* by trace device index */
    export_perfetto_stats_t *st;     /* counts */
} pf_t;

/* A JSON string (quotes included) of s. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* Start one element of traceEvents. */
static void ev_begin(pf_t *pf)
{
    fputs(pf->first ? "\n" : ",\n", pf->f);
    pf->first = 0;
}

static void ts(pf_t *pf, uint64_t ns)
{
    uint64_t d = ns - pf->t0;
    fprintf(pf->f, "%" PRIu64 ".%03" PRIu64, d / 1000, d % 1000);
}

/* The time of event e on the trace's clock, never less than the one before. */
static uint64_t time_of(pf_t *pf, size_t e)
{
    uint64_t t = pf->in->t->time_ns ? pf->in->t->time_ns[e] : pf->t0 + e * 1000;
    if (t < pf->clock) t = pf->clock;
    pf->clock = t;
    return t;
}

static void counters(pf_t *pf, const replay_point_t *pt, uint64_t at)
{
    pf_dev_t *d = &pf->dev[pt->device];
    double v[NCOUNTERS] = {
        (double)pt->allocated,
        (double)pt->reserved,
        (double)pt->largest_free,
        pt->free_bytes ? 100.0 * (1.0 - (double)pt->largest_free / (double)pt->free_bytes) : 0.0,
    };
    for (int c = 0; c < NCOUNTERS; c++) {
        if (d->emitted && v[c] == d->last[c]) continue;
        ev_begin(pf);
        fprintf(pf->f,
                "{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%d,\"tid\":0,\"ts\":", counter_name[c],
                PID_BASE + pt->device);
        ts(pf, at);
        if (c == C_FRAG)
            fprintf(pf->f, ",\"args\":{\"percent\":%.3f}}", v[c]);
        else
            fprintf(pf->f, ",\"args\":{\"bytes\":%" PRIu64 "}}",
                    c == C_ALLOCATED  ? pt->allocated
                    : c == C_RESERVED ? pt->reserved
                                      : pt->largest_free);
        d->last[c] = v[c];
        pf->st->counters++;
    }
    d->emitted = 1;
}

static void instant_refused(pf_t *pf, const replay_point_t *pt, uint64_t at)
{
    pf_dev_t *d = &pf->dev[pt->device];
    if (d->refusals >= pf->in->max_samples) {
        pf->st->refusals_left++;
        return;
    }
    d->refusals++;
    pf->st->refusals++;
    char b[FMT_BYTES_LEN];
    const int failure = pt->action == TRACE_FAIL;
    ev_begin(pf);
    fprintf(pf->f, "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"%s\",\"pid\":%d,\"tid\":0,\"ts\":",
            failure ? "recorded failure" : "refused", PID_BASE + pt->device);
    ts(pf, at);
    fprintf(pf->f,
            ",\"args\":{\"requested\":%" PRIu64 ",\"requested_text\":\"%s\",\"free\":%" PRIu64
            ",\"largest_free\":%" PRIu64 ",\"event\":%zu",
            pt->size, fmt_bytes(b, pt->size), pt->free_bytes, pt->largest_free, pt->event + 1);
    if (failure) fprintf(pf->f, ",\"pool_could_serve\":%s", pt->failure_served ? "true" : "false");
    fputs("}}", pf->f);
}

/* The replay's observer: one call per event of a replayed device. */
static void observe(void *ctx, const replay_point_t *pt)
{
    pf_t *pf = ctx;
    pf_dev_t *d = &pf->dev[pt->device];
    uint64_t at = time_of(pf, pt->event);
    if (pt->refused || pt->action == TRACE_FAIL) instant_refused(pf, pt, at);
    d->seen++;
    if (d->window <= 1) {
        counters(pf, pt, at);
        return;
    }
    if (!d->have_best || pt->allocated > d->best.allocated) {
        d->best = *pt;
        d->best_at = at;
        d->have_best = 1;
    }
    if (d->seen % d->window == 0 || d->seen == d->nev) {
        counters(pf, &d->best, d->best_at);
        d->have_best = 0;
    }
}

static void metadata(pf_t *pf)
{
    const trace_t *t = pf->in->t;
    char b[FMT_BYTES_LEN], name[160];
    for (int i = 0; i < t->ndevices; i++) {
        snprintf(name, sizeof name, "device %ld (npupool pool replay, %s pool)", t->device_ids[i],
                 fmt_bytes(b, pf->in->replay.pool_bytes));
        ev_begin(pf);
        fprintf(pf->f,
                "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{"
                "\"name\":",
                PID_BASE + i);
        json_str(pf->f, name);
        fputs("}}", pf->f);
        ev_begin(pf);
        fprintf(pf->f,
                "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{"
                "\"sort_index\":%d}}",
                PID_BASE + i, i);
    }
}

static void reports(pf_t *pf)
{
    const export_in_t *in = pf->in;
    for (size_t i = 0; i < in->nreports; i++) {
        const report_t *r = &in->reports[i];
        if (in->report_ns[i] == EXPORT_UNPLACED) continue;
        uint64_t at = (uint64_t)in->report_ns[i];
        if (at < pf->t0) at = pf->t0;
        uint64_t allocated = 0;
        for (size_t k = 0; k < r->ndevices; k++)
            allocated = tools_add_sat(allocated, r->devices[k].allocated);
        char name[64];
        snprintf(name, sizeof name, "report %s", r->trigger);
        ev_begin(pf);
        fputs("{\"ph\":\"i\",\"s\":\"g\",\"name\":", pf->f);
        json_str(pf->f, name);
        fprintf(pf->f, ",\"pid\":%d,\"tid\":0,\"ts\":", PID_BASE);
        ts(pf, at);
        fputs(",\"args\":{\"path\":", pf->f);
        json_str(pf->f, r->path);
        fputs(",\"trigger\":", pf->f);
        json_str(pf->f, r->trigger);
        fputs(",\"dump_time\":", pf->f);
        json_str(pf->f, r->dump_time);
        fprintf(pf->f, ",\"pid\":%ld,\"sequence\":%ld,\"allocated_bytes\":%" PRIu64, r->pid,
                r->sequence, allocated);
        if (r->oom.present) fprintf(pf->f, ",\"oom_requested_bytes\":%" PRIu64, r->oom.requested);
        fputs(",\"placed\":", pf->f);
        json_str(pf->f, in->placement);
        fputs("}}", pf->f);
        pf->st->reports++;
    }
}

int export_perfetto_write(const export_in_t *in, FILE *f, export_perfetto_stats_t *st)
{
    const trace_t *t = in->t;
    pf_t *pf = calloc(1, sizeof *pf);
    replay_result_t *res = calloc(1, sizeof *res);
    int rc = -1;
    if (pf == NULL || res == NULL) goto out;
    memset(st, 0, sizeof *st);
    pf->in = in;
    pf->f = f;
    pf->first = 1;
    pf->st = st;
    pf->t0 = t->nev && t->time_ns ? t->time_ns[0] : 0;
    for (size_t e = 1; t->time_ns && e < t->nev; e++)
        if (t->time_ns[e] < pf->t0) pf->t0 = t->time_ns[e];
    pf->clock = pf->t0;
    for (size_t e = 0; e < t->nev; e++) pf->dev[t->ev[e].device].nev++;
    const uint64_t cap = in->max_samples ? in->max_samples : 1;
    for (int i = 0; i < t->ndevices; i++) pf->dev[i].window = (pf->dev[i].nev + cap - 1) / cap;

    char b[FMT_BYTES_LEN];
    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"npupool export\",\"trace\":",
          f);
    json_str(f, t->path);
    fprintf(f, ",\"pool_bytes\":%" PRIu64 ",\"pool\":\"%s\",\"fallback\":%s,\"events\":%zu",
            in->replay.pool_bytes, fmt_bytes(b, in->replay.pool_bytes),
            in->replay.fallback ? "true" : "false", t->nev);
    fputs(",\"report_placement\":", f);
    json_str(f, in->placement);
    fputs("},\"traceEvents\":[", f);
    metadata(pf);
    replay_opts_t o = in->replay;
    o.observe = observe;
    o.observe_ctx = pf;
    o.only_device = -1;
    o.stop_on_refusal = 0;
    if (replay_run(t, &o, res) != 0) goto out;
    reports(pf);
    fputs("\n]}\n", f);
    rc = fflush(f) == 0 && !ferror(f) ? 0 : -1;
out:
    free(res);
    free(pf);
    return rc;
}
