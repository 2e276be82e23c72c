/* shim/log.h — npupool's one error sink.
 *
 * Owns: every line npupool writes to stderr.  Lines start with "npupool: ", are formatted into a
 * fixed stack buffer and written with one write(2) (no malloc, no stdio locks, usable from fork
 * children and late in exit).  Each call site is rate-limited: after LOG_BURST lines from one site
 * further lines from that site are dropped, and one "(further messages suppressed)" line says so.
 * Level comes from NPUPOOL_LOG (error|warn|info|debug, default warn), set once by options.c.
 */
#ifndef NPUPOOL_LOG_H
#define NPUPOOL_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

#define LOG_BURST 20 /* lines per call site before it goes quiet */

/* Per-call-site counter, one static per macro expansion. */
typedef struct log_site {
    uint32_t emitted; /* lines written (or attempted) from this site */
} log_site_t;

extern int log_threshold; /* lines above this level are not written */

void log_write(enum log_level level, log_site_t *site, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "1.5 GiB"-style text for a byte count, into buf (always terminated). */
void log_format_bytes(char *buf, size_t len, size_t bytes);

#define npupool_log(level, ...)                                                    \
    do {                                                                           \
        static log_site_t log_site_;                                               \
        if ((level) <= log_threshold) log_write((level), &log_site_, __VA_ARGS__); \
    } while (0)

#define log_error(...) npupool_log(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) npupool_log(LOG_WARN, __VA_ARGS__)
#define log_info(...) npupool_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) npupool_log(LOG_DEBUG, __VA_ARGS__)

#endif
