/* shim/options.c — the option table behind options.h.
 *
 * Each row: variable name, type, the field of npupool_config it fills, the default as text, the
 * accepted range, and the help text.  The default text goes through the same parser as a value
 * from the environment, so a default lives only here.  After the parse every effective value is
 * rendered back to text once, by type, for reports and NPUPOOL_LOG=info.
 * Locking: options_init is a pthread_once; the table and npupool_config are read-only after it.
 */
#define _GNU_SOURCE
#include "options.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "log.h"
#include "parse.h"

npupool_config_t npupool_config;

typedef enum option_type {
    OPT_BOOL,    /* int: 1/0, true/false, on/off, yes/no */
    OPT_SIZE,    /* size_t: bytes with K/M/G/T suffixes */
    OPT_NUMBER,  /* double: a finite decimal */
    OPT_COUNT,   /* long: a decimal integer */
    OPT_INT,     /* int: a decimal integer */
    OPT_LEVEL,   /* int: error, warn, info, debug */
    OPT_SIGNAL,  /* int: a signal by number or name, 0 = none */
    OPT_PATTERN, /* const char *: a path pattern, "" = unset */
    OPT_MODE,    /* int: enum npupool_mode, by name */
} option_type_t;

static const char *const mode_names[] = {"pool", "observe"}; /* enum npupool_mode */

#define OPT_ZERO_OFF 1u /* 0 is accepted below the range and means "off" */
#define OPT_MIN_OPEN 2u /* the range excludes its minimum */
#define OPT_UNIT_MIN 4u /* the minimum is the runtime's allocation unit (message says so) */

typedef struct option_def {
    const char *name;   /* environment variable */
    option_type_t type; /* how the text is read and rendered */
    size_t offset;      /* field in npupool_config */
    const char *dflt;   /* default, as text ("" = unset) */
    double min, max;    /* accepted range of numbers (inclusive unless OPT_MIN_OPEN) */
    unsigned flags;     /* OPT_* flags above */
    const char *help;   /* one line, markdown (README table, info log) */
} option_def_t;

#define FIELD(f) offsetof(npupool_config_t, f)
#define RUNTIME_UNIT (2.0 * 1024 * 1024) /* the runtime hands out HBM in 2 MiB units */

static const option_def_t option_table[] = {
    {"NPUPOOL_RATIO", OPT_NUMBER, FIELD(ratio), "0.8", 0, 1, OPT_MIN_OPEN,
     "share of the device's free HBM reserved for the pool at first use"},
    {"NPUPOOL_POOL_BYTES", OPT_SIZE, FIELD(pool_bytes), "0", RUNTIME_UNIT, 1e18,
     OPT_ZERO_OFF | OPT_UNIT_MIN,
     "absolute pool size (`K`/`M`/`G`/`T` suffixes); overrides `NPUPOOL_RATIO` when non-zero"},
    {"NPUPOOL_VMM", OPT_BOOL, FIELD(vmm), "1", 0, 1, 0,
     "1: where the runtime has the virtual-memory API, the pool is an address range with "
     "physical chunks mapped in: it gives free chunks back when the runtime refuses another "
     "request, and stitches free chunks for a request no free block can hold; 0: one runtime "
     "block, kept (as on runtimes without the API)"},
    {"NPUPOOL_CHUNK_BYTES", OPT_SIZE, FIELD(chunk_bytes), "2M", RUNTIME_UNIT, 1073741824.0,
     OPT_UNIT_MIN,
     "chunk of a virtual-memory pool (rounded up to a power-of-two multiple of the runtime's "
     "granularity): the unit of mapping, give-back and stitching"},
    {"NPUPOOL_FALLBACK", OPT_BOOL, FIELD(fallback), "1", 0, 1, 0,
     "1: a request the pool cannot serve goes to the real runtime; 0: refused with 207001"},
    {"NPUPOOL_MODE", OPT_MODE, FIELD(mode), "pool", 0, 0, 0,
     "`pool`: the pool serves allocations; `observe`: every allocation goes to the runtime "
     "unchanged (no reservation, no pool) while the ledger, reports, trace and thresholds "
     "(against the device's total HBM) work as in pool mode"},
    {"NPUPOOL_DEVICE_CACHE", OPT_BOOL, FIELD(device_cache), "1", 0, 1, 0,
     "1: a thread's current device is known from the `aclrtSetDevice` and context calls "
     "npupool sees (the runtime is asked once after each), so an allocation does not ask the "
     "runtime; a thread that made none of them is asked on every allocation; 0: ask the "
     "runtime (`aclrtGetDevice`) on every allocation (for a program whose libraries switch "
     "devices below ACL, e.g. with `rtSetDevice`)"},
    {"NPUPOOL_DISABLE", OPT_BOOL, FIELD(disable), "0", 0, 1, 0,
     "1: pure pass-through, npupool does nothing"},
    {"NPUPOOL_LOG", OPT_LEVEL, FIELD(log_level), "warn", 0, 3, 0,
     "stderr verbosity: `error`, `warn` (also one line per report written, with its path), "
     "`info`, `debug`; lines start `npupool[PID]:`, then `rank N:` when known"},
    {"NPUPOOL_BACKTRACE_DEPTH", OPT_INT, FIELD(ledger.backtrace_depth), "16", 0, 128, 0,
     "frames recorded per allocation site (native frames, and as many Python frames); 0 turns "
     "backtraces off"},
    {"NPUPOOL_PYTHON_FRAMES", OPT_BOOL, FIELD(ledger.python_frames), "1", 0, 1, 0,
     "1: in a CPython 3.9-3.13 process, stacks carry the Python frames of the allocating thread "
     "(file, function, line; never taking the GIL); 0: native frames only"},
    {"NPUPOOL_REPORT", OPT_PATTERN, FIELD(report.pattern), "", 0, 0, 0,
     "report path pattern: `%p` pid, `%n` report number, `%t` time, `%r` rank; unset: "
     "`./npupool-report-%p-%n.json`, written at exit only when leaks exist"},
    {"NPUPOOL_REPORT_SIGNAL", OPT_SIGNAL, FIELD(report.signal), "SIGUSR2", 0, 0, 0,
     "signal that asks for a report (name or number); 0 = none; never a fault signal; an "
     "application's own handler is never replaced"},
    {"NPUPOOL_REPORT_INTERVAL", OPT_NUMBER, FIELD(report.interval_s), "0", 0.1, 1e7, OPT_ZERO_OFF,
     "seconds between periodic reports; 0 = off"},
    {"NPUPOOL_WARN_RATIO", OPT_NUMBER, FIELD(report.warn_ratio), "0.85", 0, 1, 0,
     "pool use (allocated / reserved; in observe mode the device's live observed bytes / its "
     "total HBM) that writes a warning line and a `threshold` report; 0 = off"},
    {"NPUPOOL_CRITICAL_RATIO", OPT_NUMBER, FIELD(report.critical_ratio), "0.95", 0, 1, 0,
     "the same for the critical level"},
    {"NPUPOOL_REPORT_FREE_MAP", OPT_COUNT, FIELD(report.free_map_max), "4096", 0, 1e8, 0,
     "most free-map entries per device in a report (the largest blocks are kept)"},
    {"NPUPOOL_REPORT_LIVE_MAP", OPT_COUNT, FIELD(report.live_map_max), "4096", 0, 1e8, 0,
     "most live-map entries per device in a report (the largest blocks are kept)"},
    {"NPUPOOL_REPORT_SYMBOLS", OPT_BOOL, FIELD(report.symbols), "1", 0, 1, 0,
     "1: function/file/line in report frames; 0: module, offset and build id only (symbolize "
     "later with `npupool symbolize`)"},
    {"NPUPOOL_REPORT_OOM_MAX", OPT_COUNT, FIELD(report.oom_max), "10", 0, 1e6, 0,
     "`oom` post-mortem reports beyond the first refusal of each call site and reason (those "
     "always get one), at least 1 s apart; 0 = no oom reports"},
    {"NPUPOOL_SUPPRESS", OPT_PATTERN, FIELD(report.suppress), "", 0, 0, 0,
     "suppressions file: leaks whose stack matches a pattern are marked `suppressed` and alone "
     "write no exit report (format: `docs/tools.md`)"},
    {"NPUPOOL_METRICS", OPT_PATTERN, FIELD(report.metrics), "", 0, 0, 0,
     "Prometheus text file for node_exporter's textfile collector (name it `*.prom`), "
     "rewritten atomically; path pattern: `%p` pid, `%r` rank, `%t` time of the first write; see "
     "`docs/metrics.md`"},
    {"NPUPOOL_METRICS_INTERVAL", OPT_NUMBER, FIELD(report.metrics_interval_s), "15", 0.1, 1e7,
     OPT_ZERO_OFF,
     "seconds between rewrites of `NPUPOOL_METRICS` (also rewritten at `aclFinalize` and exit); "
     "0 = at those two only"},
    {"NPUPOOL_TRACE", OPT_PATTERN, FIELD(trace), "", 0, 0, 0,
     "record an allocation trace to this path pattern (`%p` pid); see `docs/trace.md`"},
    {"NPUPOOL_LEDGER_FILE", OPT_PATTERN, FIELD(ledger.file), "", 0, 0, 0,
     "keep the ledger in this file too (path pattern: `%p` pid, `%r` rank, `%t` time), mapped "
     "shared so that it outlives the process however it dies; `npupool recover FILE` turns it "
     "into a report; unset: in memory only (`docs/report.md`)"},
};
#define OPTION_COUNT (sizeof option_table / sizeof option_table[0])

static char shown[OPTION_COUNT][64]; /* effective values as text (not patterns), after init */

static void *field_of(const option_def_t *o) { return (char *)&npupool_config + o->offset; }

/* A bound as people write it: "0.1", "128", "10000000". */
static const char *num_text(double v, char *buf, size_t len)
{
    snprintf(buf, len, v == (double)(long long)v ? "%.0f" : "%g", v);
    return buf;
}

/* The range as text, for messages and the README: "from 0.1 to 10000000, or 0". */
static void range_text(const option_def_t *o, char *buf, size_t len)
{
    char lo[32], hi[32];
    const char *off = o->flags & OPT_ZERO_OFF ? ", or 0" : "";
    num_text(o->min, lo, sizeof lo);
    num_text(o->max, hi, sizeof hi);
    if (o->flags & OPT_MIN_OPEN)
        snprintf(buf, len, "above %s, at most %s%s", lo, hi, off);
    else
        snprintf(buf, len, "from %s to %s%s", lo, hi, off);
}

/* Is v inside the option's range?  Writes the complaint into why when not. */
static int in_range(const option_def_t *o, double v, char *why, size_t len)
{
    if ((o->flags & OPT_ZERO_OFF) && v == 0) return 1;
    int ok = (o->flags & OPT_MIN_OPEN ? v > o->min : v >= o->min) && v <= o->max;
    if (ok) return 1;
    if ((o->flags & OPT_UNIT_MIN) && v < o->min) {
        char unit[FMT_BYTES_LEN];
        snprintf(why, len, "below the runtime's allocation unit (%s)",
                 fmt_bytes(unit, (uint64_t)o->min));
    } else {
        char r[96];
        range_text(o, r, sizeof r);
        snprintf(why, len, "outside the accepted range: %s", r);
    }
    return 0;
}

/* Parse text into the option's field.  0, or -1 with the complaint in why. */
static int parse_into(const option_def_t *o, const char *text, char *why, size_t len)
{
    void *f = field_of(o);
    uint64_t u;
    double d;
    int i, rc;
    switch (o->type) {
    case OPT_BOOL:
        if (parse_bool(text, &i) != 0) return snprintf(why, len, "not a boolean (1/0, on/off)"), -1;
        *(int *)f = i;
        return 0;
    case OPT_SIZE:
        if (parse_bytes(text, &u) != 0) return snprintf(why, len, "not a byte count"), -1;
        if (!in_range(o, (double)u, why, len)) return -1;
        *(size_t *)f = (size_t)u;
        return 0;
    case OPT_NUMBER:
        if (parse_double(text, &d) != 0) return snprintf(why, len, "not a finite number"), -1;
        if (!in_range(o, d, why, len)) return -1;
        *(double *)f = d;
        return 0;
    case OPT_COUNT:
    case OPT_INT:
        if (parse_u64(text, &u) != 0) return snprintf(why, len, "not a whole number"), -1;
        if (!in_range(o, (double)u, why, len)) return -1;
        if (o->type == OPT_COUNT)
            *(long *)f = (long)u;
        else
            *(int *)f = (int)u;
        return 0;
    case OPT_LEVEL:
        if (log_level_parse(text, &i) != 0)
            return snprintf(why, len, "not a level (error, warn, info, debug)"), -1;
        *(int *)f = i;
        return 0;
    case OPT_SIGNAL:
        rc = parse_signal(text, &i);
        if (rc == -2)
            return snprintf(why, len,
                            "a fault or uncatchable signal: its handling belongs to the program"),
                   -1;
        if (rc != 0) return snprintf(why, len, "not a signal name or number"), -1;
        *(int *)f = i;
        return 0;
    case OPT_PATTERN: *(const char **)f = text; return 0;
    case OPT_MODE:
        for (i = 0; i < (int)(sizeof mode_names / sizeof mode_names[0]); i++)
            if (strcmp(text, mode_names[i]) == 0) {
                *(int *)f = i;
                return 0;
            }
        return snprintf(why, len, "not a mode (pool, observe)"), -1;
    }
    return -1;
}

static void render(const option_def_t *o, char *buf, size_t len)
{
    const void *f = field_of(o);
    switch (o->type) {
    case OPT_BOOL:
    case OPT_INT: snprintf(buf, len, "%d", *(const int *)f); break;
    case OPT_SIZE: snprintf(buf, len, "%zu", *(const size_t *)f); break;
    case OPT_NUMBER: snprintf(buf, len, "%g", *(const double *)f); break;
    case OPT_COUNT: snprintf(buf, len, "%ld", *(const long *)f); break;
    case OPT_LEVEL: snprintf(buf, len, "%s", log_level_name(*(const int *)f)); break;
    case OPT_SIGNAL: {
        int sig = *(const int *)f;
        const char *name = parse_signal_name(sig);
        if (name && sig)
            snprintf(buf, len, "%s", name);
        else
            snprintf(buf, len, "%d", sig);
        break;
    }
    case OPT_PATTERN: snprintf(buf, len, "%s", *(const char *const *)f); break;
    case OPT_MODE: snprintf(buf, len, "%s", mode_names[*(const int *)f & 1]); break;
    }
}

static void parse_one(const option_def_t *o)
{
    char why[160];
    if (parse_into(o, o->dflt, why, sizeof why) != 0) /* a broken table: a bug, said loudly */
        log_error("option %s: the default \"%s\" is %s", o->name, o->dflt, why);
    const char *text = getenv(o->name);
    if (!text || !*text) return;
    if (parse_into(o, text, why, sizeof why) != 0) /* it wrote nothing: the default stays */
        log_warn("%s=\"%s\" is not valid (%s); using the default %s", o->name, text, why,
                 o->dflt[0] ? o->dflt : "(unset)");
}

/* One warning per NPUPOOL_* variable the table does not know, naming the closest one. */
static void warn_unknown(void)
{
    extern char **environ;
    const char *names[OPTION_COUNT];
    for (size_t i = 0; i < OPTION_COUNT; i++) names[i] = option_table[i].name;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "NPUPOOL_", 8) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        char name[64];
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = 0;
        int known = 0;
        for (size_t i = 0; i < OPTION_COUNT && !known; i++) known = !strcmp(name, names[i]);
        if (known) continue;
        const char *close = parse_closest(name, names, OPTION_COUNT);
        if (close)
            log_warn("%s is not an npupool option (did you mean %s?); it is ignored", name, close);
        else
            log_warn("%s is not an npupool option; it is ignored", name);
    }
}

static void options_parse_all(void)
{
    /* The level first, so that it governs the warnings about the other options. */
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (option_table[i].type == OPT_LEVEL) parse_one(&option_table[i]);
    log_set_level((enum log_level)npupool_config.log_level);
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (option_table[i].type != OPT_LEVEL) parse_one(&option_table[i]);
    report_config_t *r = &npupool_config.report;
    if (r->critical_ratio > 0 && r->critical_ratio < r->warn_ratio) {
        log_warn("NPUPOOL_CRITICAL_RATIO (%g) is below NPUPOOL_WARN_RATIO (%g); using %g for both",
                 r->critical_ratio, r->warn_ratio, r->warn_ratio);
        r->critical_ratio = r->warn_ratio;
    }
    warn_unknown();
    for (size_t i = 0; i < OPTION_COUNT; i++) render(&option_table[i], shown[i], sizeof shown[i]);
}

void options_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, options_parse_all);
}

static const char *value_of(size_t i)
{
    const option_def_t *o = &option_table[i];
    return o->type == OPT_PATTERN ? *(const char *const *)field_of(o) : shown[i];
}

void options_for_each(void (*cb)(void *ctx, const char *name, const char *value), void *ctx)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) cb(ctx, option_table[i].name, value_of(i));
}

void options_markdown(FILE *f)
{
    fprintf(f, "| variable | default | meaning |\n|---|---|---|\n");
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_def_t *o = &option_table[i];
        char range[112] = "";
        if (o->type == OPT_NUMBER || o->type == OPT_COUNT || o->type == OPT_INT ||
            o->type == OPT_SIZE) {
            char r[96];
            if (o->flags & OPT_UNIT_MIN) {
                char unit[FMT_BYTES_LEN];
                snprintf(r, sizeof r, "at least %s, or 0", fmt_bytes(unit, (uint64_t)o->min));
            } else {
                range_text(o, r, sizeof r);
            }
            snprintf(range, sizeof range, " (%s)", r);
        }
        if (o->dflt[0])
            fprintf(f, "| `%s` | `%s` | %s%s |\n", o->name, o->dflt, o->help, range);
        else
            fprintf(f, "| `%s` | (unset) | %s%s |\n", o->name, o->help, range);
    }
}
