/* ledger/ledger_util.c — the ledger's option reader and small helpers (see ledger_internal.h).
 *
 * Owns: the one place ledger/ reads configuration.  Options the shim's table knows
 * (shim/options.c, npupool_option_str: the effective value, already validated there) are taken
 * from it; options it does not know yet are read from the environment here and validated here,
 * with one `npupool:` warning per bad option.  npupool_option_str is a weak reference so that the
 * ledger's unit tests link without the shim.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ledger_internal.h"
#include "log.h"

extern const char *npupool_option_str(const char *name) __attribute__((weak));

/* Options warned about already (one message per bad option for the process). */
static char warned[16][48];
static int nwarned;
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;

LEDGER_HIDDEN const char *ledger_option(const char *name)
{
    const char *v = npupool_option_str ? npupool_option_str(name) : NULL;
    if (!v) v = getenv(name);
    return v && *v ? v : NULL;
}

static void warn_bad(const char *name, const char *text, const char *what, const char *dflt)
{
    pthread_mutex_lock(&warned_lock);
    for (int i = 0; i < nwarned; i++) {
        if (!strcmp(warned[i], name)) {
            pthread_mutex_unlock(&warned_lock);
            return;
        }
    }
    if (nwarned < 16) snprintf(warned[nwarned++], sizeof warned[0], "%s", name);
    pthread_mutex_unlock(&warned_lock);
    log_warn("%s=\"%s\" is not valid (%s); keeping the default %s", name, text, what, dflt);
}

LEDGER_HIDDEN double ledger_option_double(const char *name, double dflt, double lo, double hi)
{
    const char *t = ledger_option(name);
    if (!t) return dflt;
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (errno || end == t || *end || !(v >= lo && v <= hi)) {
        char what[96], d[32];
        snprintf(what, sizeof what, "a number from %g to %g", lo, hi);
        snprintf(d, sizeof d, "%g", dflt);
        warn_bad(name, t, what, d);
        return dflt;
    }
    return v;
}

LEDGER_HIDDEN long ledger_option_long(const char *name, long dflt, long lo, long hi)
{
    const char *t = ledger_option(name);
    if (!t) return dflt;
    char *end;
    errno = 0;
    long v = strtol(t, &end, 10);
    if (errno || end == t || *end || v < lo || v > hi) {
        char what[96], d[32];
        snprintf(what, sizeof what, "an integer from %ld to %ld", lo, hi);
        snprintf(d, sizeof d, "%ld", dflt);
        warn_bad(name, t, what, d);
        return dflt;
    }
    return v;
}

LEDGER_HIDDEN int ledger_option_signal(const char *name, int dflt)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2},   {"HUP", SIGHUP}, {"QUIT", SIGQUIT},
        {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"URG", SIGURG},
    };
    const char *t = ledger_option(name);
    if (!t) return dflt;
    if (!strcasecmp(t, "off") || !strcasecmp(t, "none")) return 0;
    char *end;
    errno = 0;
    long v = strtol(t, &end, 10);
    if (!errno && end != t && !*end && v >= 0 && v < NSIG && v != SIGKILL && v != SIGSTOP &&
        v != SIGSEGV)
        return (int)v;
    const char *n = strncasecmp(t, "SIG", 3) == 0 ? t + 3 : t;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(n, names[i].name)) return names[i].sig;
    char d[16];
    snprintf(d, sizeof d, "%d", dflt);
    warn_bad(name, t, "a signal number or name such as USR2, or 0", d);
    return dflt;
}

LEDGER_HIDDEN double ledger_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

LEDGER_HIDDEN const char *ledger_human_bytes(double bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double v = bytes < 0 ? -bytes : bytes;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%s%.0f B", bytes < 0 ? "-" : "", v);
    else
        snprintf(buf, len, "%s%.1f %s", bytes < 0 ? "-" : "", v, units[u]);
    return buf;
}
