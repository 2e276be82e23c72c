/* base/path.c — see path.h. */
#include "path.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "rank.h"

/* YYYYmmddTHHMMSSZ for t (UTC), without gmtime (civil-from-days, Howard Hinnant's algorithm). */
static size_t utc_stamp(char *p, time_t t)
{
    int64_t days = (int64_t)t / 86400, secs = (int64_t)t % 86400;
    if (secs < 0) {
        secs += 86400;
        days--;
    }
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    int64_t f[6] = {y, m, d, secs / 3600, secs / 60 % 60, secs % 60};
    size_t n = 0;
    for (int i = 0; i < 6; i++) {
        if (i == 3) p[n++] = 'T';
        int width = i == 0 ? 4 : 2;
        for (int k = width - 1; k >= 0; k--) {
            int64_t v = f[i];
            for (int j = 0; j < k; j++) v /= 10;
            p[n++] = (char)('0' + (v < 0 ? 0 : v % 10));
        }
    }
    p[n++] = 'Z';
    return n;
}

int path_expand(const char *pattern, uint64_t seq, char *out, size_t len)
{
    size_t o = 0;
    for (const char *s = pattern; s && *s; s++) {
        char tmp[32];
        const char *piece = tmp;
        size_t n;
        if (s[0] == '%' && s[1]) {
            switch (s[1]) {
            case 'p': n = fmt_u64(tmp, (uint64_t)getpid()); break;
            case 'n': n = fmt_u64(tmp, seq); break;
            case 'r': {
                int r = rank_get();
                n = fmt_u64(tmp, (uint64_t)(r < 0 ? 0 : r));
                break;
            }
            case 't': n = utc_stamp(tmp, time(NULL)); break;
            case '%': piece = "%", n = 1; break;
            default: piece = s, n = 2; break;
            }
            s++;
        } else {
            piece = s;
            n = 1;
        }
        if (o + n + 1 > len) return -1;
        memcpy(out + o, piece, n);
        o += n;
    }
    if (o == 0) return -1;
    out[o] = 0;
    return 0;
}
