/* shim/log.c — the error sink declared in log.h (see there for the contract). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int log_threshold = LOG_WARN;

static void write_all(const char *buf, size_t len)
{
    int saved = errno; /* never disturb the host program's errno */
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        buf += n;
        len -= (size_t)n;
    }
    errno = saved;
}

void log_write(enum log_level level, log_site_t *site, const char *fmt, ...)
{
    (void)level;
    uint32_t n = __atomic_fetch_add(&site->emitted, 1, __ATOMIC_RELAXED);
    if (n > LOG_BURST) return;
    char buf[512];
    size_t len;
    if (n == LOG_BURST) {
        len = (size_t)snprintf(buf, sizeof buf,
                               "npupool: (further messages like the last suppressed)\n");
    } else {
        int head = snprintf(buf, sizeof buf, "npupool: ");
        va_list ap;
        va_start(ap, fmt);
        int body = vsnprintf(buf + head, sizeof buf - (size_t)head - 1, fmt, ap);
        va_end(ap);
        len = (size_t)head + (body < 0 ? 0 : (size_t)body);
        if (len > sizeof buf - 2) len = sizeof buf - 2;
        buf[len++] = '\n';
    }
    write_all(buf, len);
}

void log_format_bytes(char *buf, size_t len, size_t bytes)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}
