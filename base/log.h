/* base/log.h — npupool's one stderr sink.
 *
 * Owns: every line npupool writes to stderr.  A line starts with the head (log_head): in the
 * preload library "npupool[PID]: ", then "rank N: " when the job's rank is known (base/rank.h),
 * so the lines of the ranks of one job can be told apart; in the command-line tool, which is one
 * process on its own terminal, "npupool: " (log_set_tagged(0)).  A line is formatted into a
 * fixed stack buffer and written with one write(2): no malloc, no stdio lock, usable in fork
 * children and late in exit (the pid is read at each line, so a fork child writes its own);
 * errno is preserved.
 * Rate limit, per call site and per window of LOG_WINDOW_NS: the first LOG_BURST lines of a window
 * are written, later ones are counted and dropped; the first line of a later window says how many
 * were dropped ("(N similar lines suppressed in the last 60 s)").  A site is never silenced for
 * the process lifetime.
 * Level: lines above log_level_threshold are not written (error < warn < info < debug, default
 * warn); log_set_level() is called once by whoever owns the configuration.  log_notice is for the
 * few facts a user must see at the default level without their being warnings (where a report
 * was written): written at warn level, silenced by the error level only.
 * Locking: none; a site's counters are atomics (a race may let one extra line through).
 */
#ifndef NPUPOOL_BASE_LOG_H
#define NPUPOOL_BASE_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

#define LOG_BURST 20                               /* lines per site and window */
#define LOG_WINDOW_NS (60ull * 1000 * 1000 * 1000) /* the window: one minute */

/* Per-call-site state, one static per macro expansion. */
typedef struct log_site {
    uint64_t window_start_ns; /* CLOCK_MONOTONIC start of the current window, 0 = none yet */
    uint32_t emitted;         /* lines attempted in the current window */
    uint32_t suppressed;      /* lines dropped in earlier windows, not yet announced */
} log_site_t;

extern int log_level_threshold; /* lines above this level are not written */

#define LOG_HEAD_MAX 48 /* longest head: "npupool[" pid "]: rank " rank ": " */

/* 1 (the default): heads carry the pid and the rank; 0: "npupool: ".  Set once at start-up. */
void log_set_tagged(int tagged);
/* The head of a line now into buf (NUL-terminated, at most LOG_HEAD_MAX - 1 characters);
 * returns its length.  Async-signal-safe in practice (getpid, getenv). */
size_t log_head(char *buf, size_t cap);

void log_set_level(enum log_level level);
/* Parse "error", "warn"/"warning", "info", "debug" (any case).  0, or -1 when unknown. */
int log_level_parse(const char *text, int *out);
const char *log_level_name(int level);

void log_write(enum log_level level, log_site_t *site, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define npupool_log(level, ...)                                                               \
    do {                                                                                      \
        static log_site_t log_site_;                                                          \
        if ((int)(level) <= log_level_threshold) log_write((level), &log_site_, __VA_ARGS__); \
    } while (0)

#define log_error(...) npupool_log(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) npupool_log(LOG_WARN, __VA_ARGS__)
#define log_notice(...) npupool_log(LOG_WARN, __VA_ARGS__)
#define log_info(...) npupool_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) npupool_log(LOG_DEBUG, __VA_ARGS__)

#endif
