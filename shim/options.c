/* shim/options.c — the options table behind options.h.
 *
 * Each row: variable name, default as text, a parser that writes into npupool_opt, and help.
 * The default text is parsed by the same parser at init, so the table is the only place a default
 * lives.  Effective values are rendered back to text once, for reports and NPUPOOL_LOG=info.
 */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

npupool_options_t npupool_opt;

typedef int (*option_parser)(const char *text, void *field);

typedef struct option_row {
    const char *name;     /* environment variable */
    const char *fallback; /* default, as text */
    option_parser parse;  /* text -> field; 0 ok, -1 bad */
    void *field;          /* where the value lives in npupool_opt */
    const char *help;     /* one line, for README and info logging */
    char shown[256];      /* effective value rendered as text after init */
} option_row_t;

int options_parse_size(const char *text, size_t *out)
{
    if (!text || !*text) return -1;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (errno || end == text || v < 0) return -1;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    double bytes = v * mult;
    if (bytes >= 18446744073709551615.0) return -1;
    *out = (size_t)bytes;
    return 0;
}

int options_parse_bool(const char *text, int *out)
{
    static const char *yes[] = {"1", "true", "on", "yes"};
    static const char *no[] = {"0", "false", "off", "no"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(text, yes[i])) {
            *out = 1;
            return 0;
        }
        if (!strcasecmp(text, no[i])) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

int options_parse_signal(const char *text, int *out)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2},   {"HUP", SIGHUP}, {"QUIT", SIGQUIT},
        {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"URG", SIGURG},
    };
    int off;
    if (options_parse_bool(text, &off) == 0 && off == 0) {
        *out = 0;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!errno && end != text && !*end) {
        if (v < 0 || v >= NSIG || v == SIGKILL || v == SIGSTOP || v == SIGSEGV) return -1;
        *out = (int)v;
        return 0;
    }
    const char *name = strncasecmp(text, "SIG", 3) == 0 ? text + 3 : text;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i].name)) {
            *out = names[i].sig;
            return 0;
        }
    return -1;
}

static int parse_ratio(const char *text, void *field)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v > 0.0 && v <= 1.0)) return -1;
    *(double *)field = v;
    return 0;
}

/* A ratio where 0 means "off" (thresholds). */
static int parse_ratio_or_off(const char *text, void *field)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= 0.0 && v <= 1.0)) return -1;
    *(double *)field = v;
    return 0;
}

static int parse_count(const char *text, void *field)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 0 || v > 100000000) return -1;
    *(long *)field = v;
    return 0;
}

static int parse_seconds(const char *text, void *field)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= 0.0 && v <= 1e7)) return -1;
    *(double *)field = v;
    return 0;
}

static int parse_size_field(const char *text, void *field)
{
    return options_parse_size(text, field);
}
static int parse_bool_field(const char *text, void *field)
{
    return options_parse_bool(text, field);
}
static int parse_signal_field(const char *text, void *field)
{
    return options_parse_signal(text, field);
}

static int parse_depth(const char *text, void *field)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 0 || v > 128) return -1;
    *(int *)field = (int)v;
    return 0;
}

static int parse_level(const char *text, void *field)
{
    static const char *levels[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(text, levels[i])) {
            *(int *)field = i;
            return 0;
        }
    if (!strcasecmp(text, "warning")) {
        *(int *)field = LOG_WARN;
        return 0;
    }
    return -1;
}

static int parse_string(const char *text, void *field)
{
    *(const char **)field = text; /* environment strings live as long as the process */
    return 0;
}

static option_row_t option_table[] = {
    {"NPUPOOL_RATIO", "0.8", parse_ratio, &npupool_opt.ratio,
     "share of the device's free HBM reserved for the pool at first use (0 < r <= 1)", ""},
    {"NPUPOOL_POOL_BYTES", "0", parse_size_field, &npupool_opt.pool_bytes,
     "absolute pool size (K/M/G suffixes); overrides NPUPOOL_RATIO when non-zero", ""},
    {"NPUPOOL_FALLBACK", "1", parse_bool_field, &npupool_opt.fallback,
     "1: requests the pool cannot serve go to the real runtime; 0: refuse them with 207001", ""},
    {"NPUPOOL_DISABLE", "0", parse_bool_field, &npupool_opt.disable,
     "1: pure pass-through, npupool does nothing", ""},
    {"NPUPOOL_LOG", "warn", parse_level, &npupool_opt.log_level,
     "stderr verbosity: error, warn, info, debug", ""},
    {"NPUPOOL_BACKTRACE_DEPTH", "16", parse_depth, &npupool_opt.backtrace_depth,
     "frames recorded per allocation site, 0 turns backtraces off (max 128)", ""},
    {"NPUPOOL_REPORT", "", parse_string, &npupool_opt.report,
     "report path pattern (%p pid, %n sequence, %t time, %r rank); empty = default path", ""},
    {"NPUPOOL_REPORT_SIGNAL", "SIGUSR2", parse_signal_field, &npupool_opt.report_signal,
     "signal that asks for a report, 0 = none; never replaces an application's handler", ""},
    {"NPUPOOL_REPORT_INTERVAL", "0", parse_seconds, &npupool_opt.report_interval,
     "seconds between periodic reports, 0 = off", ""},
    {"NPUPOOL_WARN_RATIO", "0.85", parse_ratio_or_off, &npupool_opt.warn_ratio,
     "pool use (allocated/reserved) that writes a warning line and report, 0 = off", ""},
    {"NPUPOOL_CRITICAL_RATIO", "0.95", parse_ratio_or_off, &npupool_opt.critical_ratio,
     "pool use that writes a critical line and report, 0 = off", ""},
    {"NPUPOOL_REPORT_FREE_MAP", "4096", parse_count, &npupool_opt.report_free_map,
     "most free-map entries per device in a report (the largest blocks are kept)", ""},
    {"NPUPOOL_REPORT_LIVE_MAP", "4096", parse_count, &npupool_opt.report_live_map,
     "most live-map entries per device in a report (the largest blocks are kept)", ""},
    {"NPUPOOL_REPORT_SYMBOLS", "1", parse_bool_field, &npupool_opt.report_symbols,
     "1: function/file/line in report frames; 0: module, offset and build id only", ""},
    {"NPUPOOL_REPORT_OOM_MAX", "10", parse_count, &npupool_opt.report_oom_max,
     "most oom post-mortem reports per process (at least 1 s apart)", ""},
    {"NPUPOOL_TRACE", "", parse_string, &npupool_opt.trace,
     "path of an allocation trace to record (%p pid); empty = off", ""},
};
#define OPTION_COUNT (sizeof option_table / sizeof option_table[0])

static void render(option_row_t *row)
{
    if (row->parse == parse_ratio || row->parse == parse_ratio_or_off ||
        row->parse == parse_seconds)
        snprintf(row->shown, sizeof row->shown, "%g", *(double *)row->field);
    else if (row->parse == parse_count)
        snprintf(row->shown, sizeof row->shown, "%ld", *(long *)row->field);
    else if (row->parse == parse_size_field)
        snprintf(row->shown, sizeof row->shown, "%zu", *(size_t *)row->field);
    else if (row->parse == parse_string)
        snprintf(row->shown, sizeof row->shown, "%s", *(const char **)row->field);
    else if (row->parse == parse_level) {
        static const char *levels[] = {"error", "warn", "info", "debug"};
        snprintf(row->shown, sizeof row->shown, "%s", levels[*(int *)row->field & 3]);
    } else
        snprintf(row->shown, sizeof row->shown, "%d", *(int *)row->field);
}

static void options_parse_all(void)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        option_row_t *row = &option_table[i];
        row->parse(row->fallback, row->field);
        const char *text = getenv(row->name);
        if (text && row->parse(text, row->field) != 0) {
            row->parse(row->fallback, row->field);
            log_warn("%s=\"%s\" is not valid (%s); keeping the default %s", row->name, text,
                     row->help, row->fallback[0] ? row->fallback : "(empty)");
        }
        if (row->field == &npupool_opt.log_level) log_set_level(npupool_opt.log_level);
    }
    if (npupool_opt.critical_ratio > 0 && npupool_opt.critical_ratio < npupool_opt.warn_ratio) {
        log_warn(
            "NPUPOOL_CRITICAL_RATIO (%g) is below NPUPOOL_WARN_RATIO (%g); using the warning ratio",
            npupool_opt.critical_ratio, npupool_opt.warn_ratio);
        npupool_opt.critical_ratio = npupool_opt.warn_ratio;
    }
    for (size_t i = 0; i < OPTION_COUNT; i++) render(&option_table[i]);
}

void options_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, options_parse_all);
}

void options_log_effective(void)
{
    for (size_t i = 0; i < OPTION_COUNT; i++)
        log_info("option %s=%s", option_table[i].name, option_table[i].shown);
}

/* Strings are returned whole (a report path may be longer than `shown`). */
static const char *row_value(const option_row_t *row)
{
    return row->parse == parse_string ? *(const char *const *)row->field : row->shown;
}

const char *npupool_option_str(const char *name)
{
    options_init();
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (!strcmp(option_table[i].name, name)) return row_value(&option_table[i]);
    return NULL;
}

void options_for_each(void (*cb)(void *ctx, const char *name, const char *value), void *ctx)
{
    for (size_t i = 0; i < OPTION_COUNT; i++)
        cb(ctx, option_table[i].name, row_value(&option_table[i]));
}
