/* base/fmt.c — see fmt.h. */
#include "fmt.h"

#include <inttypes.h>
#include <stdio.h>

const char *fmt_bytes(char *buf, uint64_t v)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (v < 1024) {
        snprintf(buf, FMT_BYTES_LEN, "%" PRIu64 " B", v);
        return buf;
    }
    double d = (double)v;
    int u = 0;
    while (d >= 1024.0 && u < 6) {
        d /= 1024.0;
        u++;
    }
    if (d >= 1023.95 && u < 6) { /* would print as "1024.0 KiB": the next unit instead */
        d /= 1024.0;
        u++;
    }
    snprintf(buf, FMT_BYTES_LEN, "%.1f %s", d, unit[u]);
    return buf;
}

const char *fmt_sbytes(char *buf, int64_t v)
{
    char tmp[FMT_BYTES_LEN];
    if (v == 0) {
        snprintf(buf, FMT_BYTES_LEN, "0 B");
        return buf;
    }
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    snprintf(buf, FMT_BYTES_LEN, "%c%s", v < 0 ? '-' : '+', fmt_bytes(tmp, mag));
    return buf;
}

size_t fmt_u64(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

size_t fmt_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v != 0);
    p[0] = '0';
    p[1] = 'x';
    for (size_t i = 0; i < n; i++) p[2 + i] = tmp[n - 1 - i];
    return n + 2;
}
