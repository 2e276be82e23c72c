/* report/metrics.c — the Prometheus text file of NPUPOOL_METRICS (metrics.h, docs/metrics.md).
 *
 * Owns: the metric families (names, types, help texts: the tables below), the text of one sample
 * (metrics_format) and the file's state `ms`.  The figures are the ones the JSON reports carry,
 * read the same way: a device's pool figures come from one pool_snapshot (so fragmentation is
 * the report's 1 - largest_free / free of the same instant), its counters are the shim's
 * wire_counters_t (base/wire.h; their help texts are wire.h's meanings), the ledger's totals
 * come from ledger_memory.  No accounting of its own.
 * Invariants: a family is written as one group (HELP, TYPE, then its series, devices in the
 * source's order), only when it has a series; every series carries pid and rank, a device's also
 * device; counters end in _total and never go down within a process (the wire counters only
 * grow); the text is ASCII with '.' as the decimal point whatever the host's locale.
 * The file is written only when armed (report_start_background ran in this process), by
 * report_file_write: temporary file "<path>.tmp.<pid>.<n>" (O_EXCL, removed on failure), then
 * rename(2) over the path; no fsync (the file describes a live process: after a crash of the
 * machine it is stale anyway).  A failure costs one stderr line per run of failures (the next
 * success says so at NPUPOOL_LOG=info), never an error to the host.
 * Locking: ms is guarded by the report lock (report.c), held by every caller except
 * metrics_format's (the unit test).
 */
#define _GNU_SOURCE
#include "metrics.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"
#include "log.h"
#include "path.h"
#include "rank.h"
#include "version.h"

/* ---- the families ------------------------------------------------------------------------------ */

enum metric_value { MV_U64, MV_RATIO };

/* One per-device family. */
typedef struct metric_def {
    const char *name;    /* after "npupool_": unit suffix (_bytes, _ratio), counters end _total */
    const char *type;    /* "gauge" or "counter" */
    const char *help;    /* NULL: the meaning of the wire counter at `offset` (base/wire.h) */
    size_t offset;       /* the field in metrics_device_t */
    int from_pool;       /* 1: a pool figure (devices with a pool); 0: a counter */
    enum metric_value v; /* how the field is read */
} metric_def_t;

#define POOLF(f) offsetof(metrics_device_t, f)
#define WIREF(f) (offsetof(metrics_device_t, counters) + offsetof(wire_counters_t, f))

static const metric_def_t device_metrics[] = {
    {"pool_reserved_bytes", "gauge", "device memory the pool manages (its reservation)",
     POOLF(reserved_bytes), 1, MV_U64},
    {"pool_allocated_bytes", "gauge",
     "bytes of the pool's live blocks as granted (alignment and padding included)",
     POOLF(allocated_bytes), 1, MV_U64},
    {"pool_requested_bytes", "gauge", "bytes the application asked for, of the pool's live blocks",
     POOLF(requested_bytes), 1, MV_U64},
    {"pool_peak_allocated_bytes", "gauge", "high-water mark of npupool_pool_allocated_bytes",
     POOLF(peak_allocated_bytes), 1, MV_U64},
    {"pool_free_bytes", "gauge", "free bytes in the pool (free runs and free small-block slots)",
     POOLF(free_bytes), 1, MV_U64},
    {"pool_largest_free_bytes", "gauge",
     "the largest free run: the largest block a request above 512 KiB can be given now",
     POOLF(largest_free_bytes), 1, MV_U64},
    {"pool_fragmentation_ratio", "gauge",
     "1 - largest free run / free bytes (0 when nothing is free), as in the JSON reports",
     POOLF(fragmentation), 1, MV_RATIO},
    {"pool_live_allocations", "gauge", "live allocations served by the pool", POOLF(live_blocks), 1,
     MV_U64},
    {"pool_allocations_total", "counter", NULL, WIREF(allocs), 0, MV_U64},
    {"pool_frees_total", "counter", NULL, WIREF(frees), 0, MV_U64},
    {"fallback_allocations_total", "counter", NULL, WIREF(fallback_allocs), 0, MV_U64},
    {"fallback_frees_total", "counter", NULL, WIREF(fallback_frees), 0, MV_U64},
    {"fallback_live_bytes", "gauge", NULL, WIREF(fallback_bytes), 0, MV_U64},
    {"passthrough_allocations_total", "counter", NULL, WIREF(passthrough_allocs), 0, MV_U64},
    {"refusals_total", "counter", NULL, WIREF(ooms), 0, MV_U64},
    {"invalid_frees_total", "counter", NULL, WIREF(invalid_frees), 0, MV_U64},
    {"pool_reservations_total", "counter", NULL, WIREF(pool_reservations), 0, MV_U64},
};
#define DEVICE_METRIC_COUNT (sizeof device_metrics / sizeof device_metrics[0])

/* The wire counters' meanings, by field offset (the help text of the counter families). */
static const struct {
    size_t offset;       /* in wire_counters_t */
    const char *meaning; /* base/wire.h's text */
} wire_meanings[] = {
#define WIRE_MEANING(field, meaning) {offsetof(wire_counters_t, field), meaning},
    WIRE_COUNTERS(WIRE_MEANING)
#undef WIRE_MEANING
};

static const char *help_of(const metric_def_t *m)
{
    if (m->help) return m->help;
    size_t off = m->offset - offsetof(metrics_device_t, counters);
    for (size_t i = 0; i < sizeof wire_meanings / sizeof wire_meanings[0]; i++)
        if (wire_meanings[i].offset == off) return wire_meanings[i].meaning;
    return "";
}

/* ---- text -------------------------------------------------------------------------------------- */

/* A bounded writer with snprintf's contract: n counts every byte, at most cap are stored. */
typedef struct out {
    char *buf;  /* destination (NULL when cap is 0) */
    size_t cap; /* bytes buf holds */
    size_t n;   /* bytes of text so far, stored or not */
} out_t;

static void put(out_t *o, const char *s, size_t len)
{
    if (o->n < o->cap) {
        size_t room = o->cap - o->n;
        memcpy(o->buf + o->n, s, len < room ? len : room);
    }
    o->n += len;
}

static void put_str(out_t *o, const char *s) { put(o, s, strlen(s)); }

static void put_u64(out_t *o, uint64_t v)
{
    char d[24];
    put(o, d, fmt_u64(d, v));
}

/* A non-negative ratio with up to 15 decimals (what a double holds of a value below 1), '.'
 * whatever the locale: "0", "0.25", "0.000000671234567", "1". */
static void put_ratio(out_t *o, double v)
{
    if (v != v) { /* NaN: never from the pool; spelled as Prometheus reads it */
        put_str(o, "NaN");
        return;
    }
    if (v < 0) v = 0;
    if (v > 1e3) v = 1e3; /* a ratio: only the fraction needs the digits */
    const uint64_t scale = UINT64_C(1000000000000000);
    uint64_t whole = (uint64_t)v;
    uint64_t frac = (uint64_t)((v - (double)whole) * (double)scale + 0.5);
    if (frac >= scale) {
        whole++;
        frac = 0;
    }
    put_u64(o, whole);
    if (!frac) return;
    char d[15];
    for (int i = 14; i >= 0; i--, frac /= 10) d[i] = (char)('0' + frac % 10);
    size_t len = sizeof d;
    while (d[len - 1] == '0') len--;
    put(o, ".", 1);
    put(o, d, len);
}

/* A label value: backslash, double quote and newline escaped. */
static void put_label_value(out_t *o, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            put_str(o, "\\\\");
        else if (*s == '"')
            put_str(o, "\\\"");
        else if (*s == '\n')
            put_str(o, "\\n");
        else
            put(o, s, 1);
    }
}

static void put_family(out_t *o, const char *name, const char *type, const char *help)
{
    put_str(o, "# HELP npupool_");
    put_str(o, name);
    put(o, " ", 1);
    put_str(o, help);
    put_str(o, "\n# TYPE npupool_");
    put_str(o, name);
    put(o, " ", 1);
    put_str(o, type);
    put(o, "\n", 1);
}

/* `npupool_NAME{pid="P",rank="R"` (the caller adds more labels, then closes). */
static void put_series(out_t *o, const metrics_sample_t *s, const char *name)
{
    put_str(o, "npupool_");
    put_str(o, name);
    put_str(o, "{pid=\"");
    put_u64(o, s->pid > 0 ? (uint64_t)s->pid : 0);
    put_str(o, "\",rank=\"");
    if (s->rank >= 0)
        put_u64(o, (uint64_t)s->rank);
    else
        put_str(o, "unknown");
    put(o, "\"", 1);
}

/* A process-wide family with its one series. */
static void put_process(out_t *o, const metrics_sample_t *s, const char *name, const char *type,
                        const char *help, uint64_t v)
{
    put_family(o, name, type, help);
    put_series(o, s, name);
    put_str(o, "} ");
    put_u64(o, v);
    put(o, "\n", 1);
}

static int device_has(const metrics_device_t *d, const metric_def_t *m)
{
    return m->from_pool ? d->has_pool : d->has_counters;
}

REPORT_HIDDEN size_t metrics_format(const metrics_sample_t *s, char *buf, size_t len)
{
    out_t o = {buf, len, 0};
    put_family(&o, "info", "gauge",
               "always 1: npupool is in front of this process; the labels say which version");
    put_series(&o, s, "info");
    put_str(&o, ",version=\"");
    put_label_value(&o, s->version ? s->version : "unknown");
    put_str(&o, "\"} 1\n");
    put_process(&o, s, "ledger_live_allocations", "gauge",
                "live allocations the ledger records (every device; fallback and pass-through "
                "included)",
                s->ledger_live);
    put_process(&o, s, "ledger_stacks", "gauge", "distinct allocation stacks the ledger interned",
                s->ledger_stacks);
    put_process(&o, s, "ledger_host_bytes", "gauge",
                "host memory of the ledger's records and stacks", s->ledger_host_bytes);
    put_process(&o, s, "reports_written_total", "counter", "JSON reports this process wrote",
                s->reports_written);
    for (size_t k = 0; k < DEVICE_METRIC_COUNT; k++) {
        const metric_def_t *m = &device_metrics[k];
        int any = 0;
        for (size_t i = 0; i < s->ndevices && !any; i++) any = device_has(&s->devices[i], m);
        if (!any) continue;
        put_family(&o, m->name, m->type, help_of(m));
        for (size_t i = 0; i < s->ndevices; i++) {
            const metrics_device_t *d = &s->devices[i];
            if (!device_has(d, m)) continue;
            put_series(&o, s, m->name);
            put_str(&o, ",device=\"");
            if (d->device >= 0)
                put_u64(&o, (uint64_t)d->device);
            else
                put_str(&o, "unknown");
            put_str(&o, "\"} ");
            const char *field = (const char *)d + m->offset;
            if (m->v == MV_RATIO) {
                double v;
                memcpy(&v, field, sizeof v);
                put_ratio(&o, v);
            } else {
                uint64_t v;
                memcpy(&v, field, sizeof v);
                put_u64(&o, v);
            }
            put(&o, "\n", 1);
        }
    }
    if (len) buf[o.n < len ? o.n : len - 1] = 0;
    return o.n;
}

/* ---- the file ---------------------------------------------------------------------------------- */

static struct {
    const char *pattern;     /* NPUPOOL_METRICS, NULL = no file */
    double interval_s;       /* NPUPOOL_METRICS_INTERVAL */
    int armed;               /* report_start_background ran in this process */
    char path[4096];         /* the pattern expanded ("" = not yet, in this process) */
    uint64_t rewrites;       /* attempts (the temporary file's number) */
    uint64_t failures;       /* failed attempts in the current run of failures */
    char *text;              /* the text buffer, kept between rewrites */
    size_t text_cap;         /* its bytes */
    metrics_sample_t sample; /* the sample being written (too large for a stack) */
} ms;

REPORT_HIDDEN void metrics_configure(const char *pattern, double interval_s)
{
    ms.pattern = pattern && *pattern ? pattern : NULL;
    ms.interval_s = interval_s > 0 ? interval_s : 0; /* 0: at aclFinalize and exit only */
    ms.path[0] = 0;
    ms.failures = 0;
}

REPORT_HIDDEN double metrics_interval_s(void) { return ms.pattern ? ms.interval_s : 0; }

REPORT_HIDDEN void metrics_arm(void) { ms.armed = 1; }
REPORT_HIDDEN void metrics_disarm(void) { ms.armed = 0; }

REPORT_HIDDEN void metrics_fork_child(void)
{
    ms.armed = 0;
    ms.path[0] = 0; /* %p is the child's if it is armed there */
    ms.failures = 0;
}

/* Runs under each pool's lock in turn (pool_snapshot): copies figures, calls nothing else. */
static void collect_device(void *ctx, int device, pool_t *pool, const wire_counters_t *counters)
{
    metrics_sample_t *s = ctx;
    if (s->ndevices >= METRICS_MAX_DEVICES) return;
    metrics_device_t *d = &s->devices[s->ndevices++];
    memset(d, 0, sizeof *d);
    d->device = device;
    if (pool) {
        pool_stats_t st;
        pool_snapshot(pool, &st, NULL, NULL); /* the report's figures, one instant */
        d->has_pool = 1;
        d->reserved_bytes = st.reserved_bytes;
        d->allocated_bytes = st.allocated_bytes;
        d->requested_bytes = st.requested_bytes;
        d->peak_allocated_bytes = st.peak_allocated_bytes;
        d->free_bytes = st.free_bytes;
        d->largest_free_bytes = st.largest_free_bytes;
        d->live_blocks = st.live_blocks;
        d->fragmentation = st.fragmentation;
    }
    if (counters) {
        d->has_counters = 1;
#define COPY_COUNTER(field, meaning) d->counters.field = wire_counter_get(counters, field);
        WIRE_COUNTERS(COPY_COUNTER)
#undef COPY_COUNTER
    }
}

static void collect(metrics_sample_t *s, const report_source_t *src, uint64_t reports_written)
{
    s->version = version_string();
    s->pid = (int)getpid();
    s->rank = rank_get();
    ledger_memory_t m;
    ledger_memory(&m);
    s->ledger_live = m.live_records;
    s->ledger_stacks = m.stacks;
    s->ledger_host_bytes = (uint64_t)m.record_bytes + m.stack_bytes;
    s->reports_written = reports_written;
    s->ndevices = 0;
    if (src && src->for_each_device) src->for_each_device(src->ctx, collect_device, s);
}

/* The text of ms.sample in ms.text; its length, or (size_t)-1 when host memory ran out. */
static size_t render(void)
{
    size_t need = metrics_format(&ms.sample, ms.text, ms.text_cap);
    if (need < ms.text_cap) return need;
    size_t cap = need + 4096; /* room for a few more series next time */
    char *t = realloc(ms.text, cap);
    if (!t) return (size_t)-1;
    ms.text = t;
    ms.text_cap = cap;
    return metrics_format(&ms.sample, ms.text, ms.text_cap);
}

REPORT_HIDDEN void metrics_write_locked(const report_source_t *src, uint64_t reports_written)
{
    if (!ms.armed || !ms.pattern) return;
    if (!ms.path[0] && path_expand(ms.pattern, 0, ms.path, sizeof ms.path) != 0) {
        log_warn("no metrics file: NPUPOOL_METRICS=\"%s\" expands to a path that is too long",
                 ms.pattern);
        ms.pattern = NULL; /* said once: nothing more to try */
        return;
    }
    collect(&ms.sample, src, reports_written);
    size_t len = render();
    const char *what = "memory";
    int r = -1, e = ENOMEM;
    if (len != (size_t)-1) {
        r = report_file_write(ms.path, ms.text, len, ++ms.rewrites, &what);
        e = errno;
    }
    if (r == 0) {
        if (ms.failures)
            log_info("metrics file %s written again (%llu rewrites had failed)", ms.path,
                     (unsigned long long)ms.failures);
        ms.failures = 0;
        return;
    }
    if (ms.failures++ == 0) /* one line per run of failures: it is retried at each interval */
        log_warn("cannot write the metrics file %s (%s: %s); later rewrites are tried without "
                 "further lines until one works",
                 ms.path, what, strerror(e));
}
