/* base/log.c — the stderr sink declared in log.h (see there for the contract). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "fmt.h"
#include "io.h"
#include "rank.h"

int log_level_threshold = LOG_WARN;
static int log_tagged = 1; /* see log_set_tagged */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level level) { log_level_threshold = (int)level; }

int log_level_parse(const char *text, int *out)
{
    if (!text) return -1;
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(text, level_names[i])) {
            *out = i;
            return 0;
        }
    if (!strcasecmp(text, "warning")) {
        *out = LOG_WARN;
        return 0;
    }
    return -1;
}

const char *log_level_name(int level) { return level_names[(unsigned)level & 3u]; }

void log_set_tagged(int tagged) { log_tagged = tagged; }

/* Appends s to buf[*n] (bounded by cap - 1). */
static void head_put(char *buf, size_t cap, size_t *n, const char *s, size_t len)
{
    if (*n + len > cap - 1) len = cap - 1 - *n;
    memcpy(buf + *n, s, len);
    *n += len;
}

size_t log_head(char *buf, size_t cap)
{
    size_t n = 0;
    char num[24];
    if (cap == 0) return 0;
    if (!log_tagged) {
        head_put(buf, cap, &n, "npupool: ", 9);
    } else {
        head_put(buf, cap, &n, "npupool[", 8);
        head_put(buf, cap, &n, num, fmt_u64(num, (uint64_t)getpid()));
        head_put(buf, cap, &n, "]: ", 3);
        int rank = rank_get();
        if (rank >= 0) {
            head_put(buf, cap, &n, "rank ", 5);
            head_put(buf, cap, &n, num, fmt_u64(num, (uint64_t)rank));
            head_put(buf, cap, &n, ": ", 2);
        }
    }
    buf[n] = 0;
    return n;
}

/* 1 when this line may be written; *announce receives the count to announce first (0 = none). */
static int site_admit(log_site_t *site, uint32_t *announce)
{
    uint64_t now = clock_mono_ns();
    uint64_t start = __atomic_load_n(&site->window_start_ns, __ATOMIC_RELAXED);
    *announce = 0;
    if (start == 0 || now - start >= LOG_WINDOW_NS) {
        if (__atomic_compare_exchange_n(&site->window_start_ns, &start, now, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            uint32_t was = __atomic_exchange_n(&site->emitted, 0, __ATOMIC_RELAXED);
            if (was > LOG_BURST)
                __atomic_fetch_add(&site->suppressed, was - LOG_BURST, __ATOMIC_RELAXED);
            *announce = __atomic_exchange_n(&site->suppressed, 0, __ATOMIC_RELAXED);
        }
    }
    uint32_t n = __atomic_fetch_add(&site->emitted, 1, __ATOMIC_RELAXED);
    return n < LOG_BURST;
}

void log_write(enum log_level level, log_site_t *site, const char *fmt, ...)
{
    (void)level;
    int saved = errno; /* never disturb the host program's errno */
    uint32_t announce;
    int admit = site_admit(site, &announce);
    char buf[720];
    char head[LOG_HEAD_MAX];
    size_t head_len = log_head(head, sizeof head);
    size_t len = 0;
    if (announce) {
        int n = snprintf(buf, sizeof buf, "%s(%u similar lines suppressed in the last %llu s)\n",
                         head, announce, (unsigned long long)(LOG_WINDOW_NS / 1000000000ull));
        len = n > 0 ? (size_t)n : 0;
    }
    if (admit) {
        memcpy(buf + len, head, head_len);
        len += head_len;
        va_list ap;
        va_start(ap, fmt);
        int body = vsnprintf(buf + len, sizeof buf - len - 1, fmt, ap);
        va_end(ap);
        len += body < 0 ? 0 : (size_t)body;
        if (len > sizeof buf - 2) len = sizeof buf - 2;
        buf[len++] = '\n';
    }
    if (len) (void)io_write_all(STDERR_FILENO, buf, len);
    errno = saved;
}
