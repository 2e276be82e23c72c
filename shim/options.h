/* shim/options.h — npupool's configuration: one table of options read once from the environment.
 *
 * Owns: the effective value of every NPUPOOL_* variable.  options_init() parses the table once
 * (from the library constructor, before any hook does work); afterwards the values are read-only,
 * so readers need no lock.  A bad value prints one `npupool:` warning and keeps the default.
 * Accepted forms: booleans 1/0, true/false, on/off, yes/no; sizes with K/M/G/T (binary) suffixes;
 * ratios as decimals in (0, 1]; signals by number or name (USR2, SIGUSR2); 0 or "off" disables.
 */
#ifndef NPUPOOL_OPTIONS_H
#define NPUPOOL_OPTIONS_H

#include <stddef.h>

typedef struct npupool_options {
    double ratio;           /* NPUPOOL_RATIO: share of free HBM to reserve per device */
    size_t pool_bytes;      /* NPUPOOL_POOL_BYTES: absolute pool size, 0 = use ratio */
    int fallback;           /* NPUPOOL_FALLBACK: 1 = go to the runtime when the pool can't serve */
    int disable;            /* NPUPOOL_DISABLE: 1 = pure pass-through */
    int log_level;          /* NPUPOOL_LOG: enum log_level */
    int backtrace_depth;    /* NPUPOOL_BACKTRACE_DEPTH: frames per stack, 0 = off */
    const char *report;     /* NPUPOOL_REPORT: report path pattern, "" = default when needed */
    int report_signal;      /* NPUPOOL_REPORT_SIGNAL: signal number, 0 = off */
    double report_interval; /* NPUPOOL_REPORT_INTERVAL: seconds between reports, 0 = off */
    double warn_ratio;      /* NPUPOOL_WARN_RATIO: pool use that triggers a warning report */
    double critical_ratio;  /* NPUPOOL_CRITICAL_RATIO: pool use that triggers a critical report */
    long report_free_map;   /* NPUPOOL_REPORT_FREE_MAP: free-map entries per device in a report */
    long report_live_map;   /* NPUPOOL_REPORT_LIVE_MAP: live-map entries per device in a report */
    int report_symbols;     /* NPUPOOL_REPORT_SYMBOLS: 1 = symbolize frames in reports */
    long report_oom_max;    /* NPUPOOL_REPORT_OOM_MAX: oom reports per process */
    const char *trace;      /* NPUPOOL_TRACE: allocation trace path, "" = off */
} npupool_options_t;

extern npupool_options_t npupool_opt; /* valid after options_init() */

void options_init(void);          /* idempotent; parses the environment once */
void options_log_effective(void); /* one info line per option (NPUPOOL_LOG=info) */

/* Effective value of an option as text ("" for an unset string); NULL for an unknown name. */
const char *npupool_option_str(const char *name);
/* Calls cb for each option in table order with its effective value as text. */
void options_for_each(void (*cb)(void *ctx, const char *name, const char *value), void *ctx);

/* Parsers, exposed for the tools and the tests: return 0 and set *out on success, -1 otherwise. */
int options_parse_size(const char *text, size_t *out);
int options_parse_bool(const char *text, int *out);
int options_parse_signal(const char *text, int *out);

#endif
