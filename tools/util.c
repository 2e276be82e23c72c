/* tools/util.c — messages, units, number parsing and file reading for the `npupool` command.
 * See tools.h for the contracts.  No state.
 */
#include "tools.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

void tool_err(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "npupool: %s\n", buf);
}

int tool_usage_error(const char *cmd, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "npupool %s: %s (see 'npupool %s --help')\n", cmd, buf, cmd);
    return TOOL_BAD;
}

const char *tool_bytes(char *buf, uint64_t v)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (v < 1024) {
        snprintf(buf, TOOL_UNITS_LEN, "%" PRIu64 " B", v);
        return buf;
    }
    double d = (double)v;
    int u = 0;
    while (d >= 1024.0 && u < 6) {
        d /= 1024.0;
        u++;
    }
    /* 1023.96 KiB would print as "1024.0 KiB": move to the next unit instead. */
    if (d >= 1023.95 && u < 6) {
        d /= 1024.0;
        u++;
    }
    snprintf(buf, TOOL_UNITS_LEN, "%.1f %s", d, unit[u]);
    return buf;
}

const char *tool_sbytes(char *buf, int64_t v)
{
    char tmp[TOOL_UNITS_LEN];
    if (v == 0) {
        snprintf(buf, TOOL_UNITS_LEN, "0 B");
        return buf;
    }
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    snprintf(buf, TOOL_UNITS_LEN, "%c%s", v < 0 ? '-' : '+', tool_bytes(tmp, mag));
    return buf;
}

int tool_parse_u64(const char *s, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') return -1;
    *out = v;
    return 0;
}

int tool_parse_bytes(const char *s, uint64_t *out)
{
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+' || *s == ' ') return -1;
    char *end;
    errno = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        unsigned long long v = strtoull(s, &end, 16);
        if (errno != 0 || *end != '\0' || end == s + 2) return -1;
        *out = v;
        return 0;
    }
    double d = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(d) || d < 0) return -1;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: break;
    }
    if (mul > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    else if (mul == 1 && strcmp(end, "B") == 0)
        end++;
    if (*end != '\0') return -1;
    d *= mul;
    if (d >= 18446744073709551615.0) return -1;
    if (mul == 1 && d != floor(d)) return -1; /* "1.5" bytes */
    *out = (uint64_t)llround(d);
    return 0;
}

int tool_read_file(const char *path, char **bufp, size_t *lenp)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        tool_err("%s: cannot open: %s", path, strerror(errno));
        return TOOL_BAD;
    }
    size_t cap = 1 << 16, len = 0;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap + 1);
    if (buf == NULL) goto oom;
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
        if (len == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (nb == NULL) goto oom;
            buf = nb;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        tool_err("%s: read error: %s", path, strerror(errno));
        free(buf);
        if (f != stdin) fclose(f);
        return TOOL_BAD;
    }
    if (f != stdin) fclose(f);
    buf[len] = '\0';
    *bufp = buf;
    *lenp = len;
    return TOOL_OK;
oom:
    tool_err("%s: out of memory reading the file", path);
    free(buf);
    if (f != stdin) fclose(f);
    return TOOL_BAD;
}

/* ---- JSON arena ---------------------------------------------------------------------------
 * A report becomes millions of small cJSON nodes; with libc malloc that is most of the time of
 * `summary` on a large report.  The command reads a report, answers and exits, so its nodes come
 * from a bump arena that is never freed (chunks of ARENA_CHUNK bytes; larger requests get their
 * own block).  The fuzz targets do not call this and keep cJSON on malloc/free.
 */
#define ARENA_CHUNK ((size_t)16 << 20) /* bytes per arena chunk */

static struct {
    char *cur;   /* next free byte of the current chunk */
    size_t left; /* bytes left in it */
} arena;

static void *arena_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > ARENA_CHUNK / 4) return malloc(n); /* never freed either: cJSON_Delete is a no-op */
    if (n > arena.left) {
        /* Pre-faulted in one call: page faults one by one cost more than parsing. */
        char *c = mmap(NULL, ARENA_CHUNK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (c == MAP_FAILED) return NULL;
        arena.cur = c;
        arena.left = ARENA_CHUNK;
    }
    void *p = arena.cur;
    arena.cur += n;
    arena.left -= n;
    return p;
}

static void arena_free(void *p) { (void)p; }

void tool_json_arena(void)
{
    cJSON_Hooks h = {.malloc_fn = arena_alloc, .free_fn = arena_free};
    cJSON_InitHooks(&h);
}
