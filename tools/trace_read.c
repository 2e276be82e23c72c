/* tools/trace_read.c — the trace reader declared in trace_read.h.
 *
 * Algorithm: one pass over the bytes as they arrive (input_stream: a mapped file in one piece, a
 * pipe or stdin in pieces; a line split between pieces waits in a carry buffer of at most
 * TRACE_LINE_MAX bytes), hand-written field scanners (no strtok/sscanf: a 10,000,000-line trace
 * must parse in a couple of seconds), and an open-addressing hash (linear probing, backward-shift
 * deletion) from (device, pointer) to the live slot, so a free finds its allocation in expected
 * O(1).  A piece with a NUL byte, a line that is not the header, a comment or an event, or a line
 * longer than TRACE_LINE_MAX stops the read there: /dev/zero or /dev/urandom end after one piece.
 * Invariants: the hash holds exactly the allocations not yet freed; load factor <= 1/2.
 * Errors name the file and the 1-based line; the first error stops the read.
 */
#include "trace_read.h"

#include "input.h"
#include "tools.h"
#include "wire.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- live-pointer hash --------------------------------------------------------------------- */

typedef struct live_ent {
    uint64_t ptr;  /* recorded pointer; 0 = empty entry */
    uint32_t slot; /* allocation number */
    uint32_t dev;  /* device index */
    uint64_t size; /* requested bytes */
    uint64_t line; /* line of the allocation, for messages */
} live_ent_t;

typedef struct live_map {
    live_ent_t *e; /* table */
    size_t mask;   /* capacity - 1 (capacity is a power of two) */
    size_t n;      /* entries in use */
} live_map_t;

static size_t live_hash(uint64_t ptr, uint32_t dev)
{
    uint64_t h = (ptr ^ ((uint64_t)dev << 56)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20);
}

static int live_grow(live_map_t *m)
{
    size_t ncap = m->e ? (m->mask + 1) * 2 : 1024;
    live_ent_t *ne = calloc(ncap, sizeof *ne);
    if (ne == NULL) return -1;
    if (m->e) {
        for (size_t i = 0; i <= m->mask; i++) {
            if (m->e[i].ptr == 0) continue;
            size_t j = live_hash(m->e[i].ptr, m->e[i].dev) & (ncap - 1);
            while (ne[j].ptr != 0) j = (j + 1) & (ncap - 1);
            ne[j] = m->e[i];
        }
        free(m->e);
    }
    m->e = ne;
    m->mask = ncap - 1;
    return 0;
}

/* Index of the entry for (ptr, dev), or the empty entry where it would go. */
static size_t live_find(const live_map_t *m, uint64_t ptr, uint32_t dev)
{
    size_t i = live_hash(ptr, dev) & m->mask;
    while (m->e[i].ptr != 0 && !(m->e[i].ptr == ptr && m->e[i].dev == dev)) i = (i + 1) & m->mask;
    return i;
}

static void live_delete(live_map_t *m, size_t i)
{
    /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (m->e[j].ptr == 0) break;
        size_t home = live_hash(m->e[j].ptr, m->e[j].dev) & m->mask;
        /* Move e[j] into the hole at i when its home is not cyclically in (i, j]. */
        int in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            m->e[i] = m->e[j];
            i = j;
        }
    }
    m->e[i].ptr = 0;
    m->n--;
}

/* ---- parsing -------------------------------------------------------------------------------- */

#define TRACE_LINE_MAX 65536 /* bytes: the longest line read (a trace line is < 100) */

typedef struct parser {
    const char *name; /* file name for messages */
    int quiet;        /* no messages (fuzzing) */
    uint64_t line;    /* lines read so far (the current one, while it is parsed) */
    uint64_t bytes;   /* bytes fed so far */
    trace_t *t;       /* output */
    live_map_t live;  /* live allocations */
    int header_seen;  /* the column line (npupool) or the RMM header was read */
    char *carry;      /* the start of a line split between pieces (TRACE_LINE_MAX bytes) */
    size_t ncarry;    /* bytes in carry */
    unsigned keep;    /* TRACE_KEEP_* */
    uint64_t time;    /* the current line's time (ns), for TRACE_KEEP_TIME */
} parser_t;

static int perr(parser_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser_t *p, const char *fmt, ...)
{
    if (!p->quiet) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        tools_err("%s:%llu: %s", p->name, (unsigned long long)p->line, msg);
    }
    return TOOLS_BAD;
}

/* A field is [s, e); the scanners accept exactly the whole field. */
static int scan_dec(const char *s, const char *e, uint64_t *out)
{
    if (s == e || e - s > 20) return -1;
    uint64_t v = 0;
    for (; s < e; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > 9) return -1;
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int scan_hex(const char *s, const char *e, uint64_t *out)
{
    if (e - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    if (s == e || e - s > 16) return -1;
    uint64_t v = 0;
    for (; s < e; s++) {
        unsigned c = (unsigned char)*s, d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = (v << 4) | d;
    }
    *out = v;
    return 0;
}

static int field_is(const char *s, const char *e, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(e - s) == n && memcmp(s, lit, n) == 0;
}

static int dev_index(parser_t *p, long id, uint32_t *out)
{
    trace_t *t = p->t;
    for (int i = 0; i < t->ndevices; i++) {
        if (t->device_ids[i] == id) {
            *out = (uint32_t)i;
            return 0;
        }
    }
    if (t->ndevices == TRACE_MAX_DEVICES)
        return perr(p, "more than %d devices in one trace", TRACE_MAX_DEVICES);
    t->device_ids[t->ndevices] = id;
    *out = (uint32_t)t->ndevices++;
    return 0;
}

static int push(parser_t *p, uint8_t action, uint32_t dev, uint32_t slot, uint64_t size)
{
    trace_t *t = p->t;
    if (t->nev == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 4096;
        trace_event_t *ne = realloc(t->ev, ncap * sizeof *ne);
        if (ne == NULL) return perr(p, "out of memory (%zu events)", t->nev);
        t->ev = ne;
        if (p->keep & TRACE_KEEP_TIME) {
            uint64_t *nt = realloc(t->time_ns, ncap * sizeof *nt);
            if (nt == NULL) return perr(p, "out of memory (%zu events)", t->nev);
            t->time_ns = nt;
        }
        t->cap = ncap;
    }
    if (t->time_ns) t->time_ns[t->nev] = p->time;
    trace_event_t *ev = &t->ev[t->nev++];
    ev->size = size;
    ev->slot = slot;
    ev->action = action;
    ev->device = (uint8_t)dev;
    ev->unused = 0;
    return 0;
}

static int on_alloc(parser_t *p, uint64_t ptr, uint64_t size, uint32_t dev)
{
    trace_t *t = p->t;
    if (ptr == 0) return perr(p, "allocation at pointer 0");
    if (t->nallocs == UINT32_MAX) return perr(p, "more than %u allocations", UINT32_MAX - 1);
    if ((p->live.n + 1) * 2 > p->live.mask + 1 && live_grow(&p->live) != 0)
        return perr(p, "out of memory (%zu live allocations)", p->live.n);
    size_t i = live_find(&p->live, ptr, dev);
    if (p->live.e[i].ptr != 0)
        return perr(p, "pointer 0x%llx allocated again while still live (allocated at line %llu)",
                    (unsigned long long)ptr, (unsigned long long)p->live.e[i].line);
    live_ent_t *le = &p->live.e[i];
    le->ptr = ptr;
    le->dev = dev;
    le->slot = t->nallocs;
    le->size = size;
    le->line = p->line;
    p->live.n++;
    if (p->keep & TRACE_KEEP_ADDR) {
        if (t->nallocs == t->addr_cap) {
            size_t ncap = t->addr_cap ? t->addr_cap * 2 : 4096;
            uint64_t *na = realloc(t->addr, ncap * sizeof *na);
            if (na == NULL) return perr(p, "out of memory (%u allocations)", t->nallocs);
            t->addr = na;
            t->addr_cap = ncap;
        }
        t->addr[t->nallocs] = ptr;
    }
    return push(p, TRACE_ALLOC, dev, t->nallocs++, size);
}

static int on_free(parser_t *p, uint64_t ptr, uint32_t dev)
{
    trace_t *t = p->t;
    if (ptr == 0 || p->live.n == 0) {
        t->unknown_frees++;
        return 0;
    }
    size_t i = live_find(&p->live, ptr, dev);
    if (p->live.e[i].ptr == 0) { /* the application freed something it never got: skip */
        t->unknown_frees++;
        return 0;
    }
    uint32_t slot = p->live.e[i].slot;
    uint64_t size = p->live.e[i].size;
    live_delete(&p->live, i);
    t->nfrees++;
    return push(p, TRACE_FREE, dev, slot, size);
}

/* Split [s, e) at commas into at most `max` fields; returns the count (max+1 = too many). */
static int split(const char *s, const char *e, const char **fs, const char **fe, int max)
{
    int n = 0;
    const char *b = s;
    for (const char *c = s;; c++) {
        if (c == e || *c == ',') {
            if (n == max) return max + 1;
            fs[n] = b;
            fe[n] = c;
            n++;
            if (c == e) break;
            b = c + 1;
        }
    }
    return n;
}

static int parse_npupool_line(parser_t *p, const char *s, const char *e)
{
    const char *fs[6], *fe[6];
    int n = split(s, e, fs, fe, 6);
    if (n != 6) return perr(p, "expected 6 fields " WIRE_TRACE_COLUMNS "; got %d", n > 6 ? 7 : n);
    uint64_t tid, tm, ptr, size = 0, devv;
    if (scan_dec(fs[0], fe[0], &tid) != 0) return perr(p, "bad thread id (field 1)");
    if (scan_dec(fs[1], fe[1], &tm) != 0)
        return perr(p, "bad time (field 2): expected nanoseconds");
    p->time = tm;
    if (scan_hex(fs[3], fe[3], &ptr) != 0)
        return perr(p, "bad pointer (field 4): expected hex like 0x7f0010000000");
    const char *ds = fs[5];
    int neg = ds < fe[5] && *ds == '-';
    if (scan_dec(ds + neg, fe[5], &devv) != 0 || devv > 0x7fffffff)
        return perr(p, "bad device (field 6)");
    uint32_t dev = 0;
    if (dev_index(p, neg ? -(long)devv : (long)devv, &dev) != 0) return TOOLS_BAD;
    if (field_is(fs[2], fe[2], "alloc")) {
        if (scan_dec(fs[4], fe[4], &size) != 0) return perr(p, "bad size (field 5)");
        return on_alloc(p, ptr, size, dev);
    }
    if (field_is(fs[2], fe[2], "free")) {
        if (fs[4] != fe[4] && scan_dec(fs[4], fe[4], &size) != 0)
            return perr(p, "bad size (field 5)");
        return on_free(p, ptr, dev);
    }
    return perr(p, "bad action (field 3): expected alloc or free");
}

/* RMM's Time "HH:MM:SS.ffffff" as ns since midnight into p->time; unreadable: p->time stays. */
static void rmm_time(parser_t *p, const char *s, const char *e)
{
    uint64_t part[3] = {0}, frac = 0, scale = 1000000000;
    for (int k = 0; k < 3; k++) {
        const char *d = s;
        while (s < e && *s >= '0' && *s <= '9' && s - d < 9)
            part[k] = part[k] * 10 + (uint64_t)(*s++ - '0');
        if (s == d || (k < 2 && (s == e || *s++ != ':'))) return;
    }
    if (s < e && *s == '.')
        for (s++; s < e && *s >= '0' && *s <= '9' && scale > 1; s++)
            scale /= 10, frac += (uint64_t)(*s - '0') * scale;
    if (s != e || part[1] > 59 || part[2] > 60) return;
    p->time = ((part[0] * 60 + part[1]) * 60 + part[2]) * 1000000000 + frac;
}

static int parse_rmm_line(parser_t *p, const char *s, const char *e)
{
    const char *fs[6], *fe[6];
    int n = split(s, e, fs, fe, 6);
    if (n != 6) return perr(p, "expected 6 fields " TRACE_RMM_COLUMNS "; got %d", n > 6 ? 7 : n);
    uint64_t tid, ptr = 0, size;
    if (scan_dec(fs[0], fe[0], &tid) != 0) return perr(p, "bad Thread (field 1)");
    if (fs[1] == fe[1]) return perr(p, "empty Time (field 2)");
    if (p->keep & TRACE_KEEP_TIME) rmm_time(p, fs[1], fe[1]);
    if (scan_dec(fs[4], fe[4], &size) != 0) return perr(p, "bad Size (field 5)");
    int has_ptr = scan_hex(fs[3], fe[3], &ptr) == 0;
    if (field_is(fs[2], fe[2], "allocate")) {
        if (!has_ptr) return perr(p, "bad Pointer (field 4): expected hex like 0x7f0010000000");
        return on_alloc(p, ptr, size, 0);
    }
    if (field_is(fs[2], fe[2], "free") || field_is(fs[2], fe[2], "deallocate")) {
        if (!has_ptr) return perr(p, "bad Pointer (field 4): expected hex like 0x7f0010000000");
        return on_free(p, ptr, 0);
    }
    if (field_is(fs[2], fe[2], "allocate failure")) {
        p->t->nfails++;
        return push(p, TRACE_FAIL, 0, 0, size);
    }
    return perr(p, "bad Action (field 3): expected allocate, free or allocate failure");
}

static void trim(const char **s, const char **e)
{
    while (*s < *e && ((*e)[-1] == '\r' || (*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
    while (*s < *e && (**s == ' ' || **s == '\t')) (*s)++;
}

/* The header's key=value words that the reader uses (pid=); others are ignored. */
static void header_words(trace_t *t, const char *s, const char *e)
{
    while (s < e) {
        while (s < e && *s == ' ') s++;
        const char *w = s;
        while (s < e && *s != ' ') s++;
        uint64_t v;
        if (s - w > 4 && memcmp(w, "pid=", 4) == 0 && scan_dec(w + 4, s, &v) == 0 && v <= LONG_MAX)
            t->pid = (long)v;
    }
}

/* The first line: which format, or an error. */
static int first_line(parser_t *p, const char *ls, const char *le)
{
    static const char header[] = WIRE_TRACE_HEADER; /* "# npupool-trace/1" */
    const size_t hn = sizeof header - 1;
    const size_t stem = (size_t)(strrchr(header, '/') - header) + 1; /* "# npupool-trace/" */
    const size_t n = (size_t)(le - ls);
    trace_t *t = p->t;
    if (n >= stem && memcmp(ls, header, stem) == 0) {
        if (n < hn || memcmp(ls, header, hn) != 0 || (n > hn && ls[hn] != ' '))
            return perr(p, "trace format '%.*s' not supported (this npupool reads %s)",
                        (int)(n - 2 > 40 ? 40 : n - 2), ls + 2, WIRE_TRACE_FORMAT);
        t->format = TRACE_FMT_NPUPOOL;
        header_words(t, ls + hn, le);
        return TOOLS_OK;
    }
    if (field_is(ls, le, TRACE_RMM_COLUMNS)) {
        t->format = TRACE_FMT_RMM;
        t->device_ids[0] = 0; /* RMM logs carry no device: all on device 0 */
        t->ndevices = 1;
        p->header_seen = 1;
        return TOOLS_OK;
    }
    return perr(p, "not a trace: expected '%s' (npupool) or '%s' (RMM) on the first line",
                WIRE_TRACE_HEADER, TRACE_RMM_COLUMNS);
}

/* One line, without its '\n'. */
static int parse_line(parser_t *p, const char *ls, const char *le)
{
    p->line++;
    trim(&ls, &le);
    if (p->t->format == 0) return first_line(p, ls, le);
    if (ls == le) return TOOLS_OK;
    if (p->t->format == TRACE_FMT_RMM) return parse_rmm_line(p, ls, le);
    if (*ls == '#') return TOOLS_OK;
    if (p->header_seen) return parse_npupool_line(p, ls, le);
    if (!field_is(ls, le, WIRE_TRACE_COLUMNS))
        return perr(p, "expected the column line '%s'", WIRE_TRACE_COLUMNS);
    p->header_seen = 1;
    return TOOLS_OK;
}

static int too_long(parser_t *p)
{
    p->line++;
    return perr(p, "line longer than %d bytes: not a trace", TRACE_LINE_MAX);
}

/* The next piece of the input (an input_take_fn). */
static int feed(void *ctx, const char *data, size_t n)
{
    parser_t *p = ctx;
    const char *z = memchr(data, '\0', n);
    p->bytes += n;
    if (z != NULL) {
        p->line++;
        for (const char *c = data; c < z; c++) p->line += *c == '\n';
        return perr(p, "NUL byte: not a text trace");
    }
    const char *s = data, *end = data + n;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        if (p->ncarry + (size_t)(le - s) > TRACE_LINE_MAX) return too_long(p);
        if (nl == NULL || p->ncarry) { /* the line goes on in the next piece, or began before */
            if (p->carry == NULL && (p->carry = malloc(TRACE_LINE_MAX)) == NULL)
                return perr(p, "out of memory");
            memcpy(p->carry + p->ncarry, s, (size_t)(le - s));
            p->ncarry += (size_t)(le - s);
            if (nl == NULL) break;
            size_t len = p->ncarry;
            p->ncarry = 0;
            int rc = parse_line(p, p->carry, p->carry + len);
            if (rc != TOOLS_OK) return rc;
        } else {
            int rc = parse_line(p, s, le);
            if (rc != TOOLS_OK) return rc;
        }
        s = nl + 1;
    }
    return TOOLS_OK;
}

/* After the last piece: the last line when it had no '\n', and the checks of a whole trace. */
static int finish(parser_t *p)
{
    trace_t *t = p->t;
    if (p->bytes == 0) {
        p->line = 1;
        return perr(p, "empty file: not a trace");
    }
    if (p->ncarry) {
        int rc = parse_line(p, p->carry, p->carry + p->ncarry);
        p->ncarry = 0;
        if (rc != TOOLS_OK) return rc;
    }
    if (t->format == TRACE_FMT_NPUPOOL && !p->header_seen)
        return perr(p, "truncated: no column line '%s'", WIRE_TRACE_COLUMNS);
    t->lines = p->line;
    t->live_at_end = p->live.n;
    return TOOLS_OK;
}

static void parser_init(parser_t *p, const char *name, trace_t *t, int quiet, unsigned keep)
{
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", name);
    memset(p, 0, sizeof *p);
    p->name = name;
    p->quiet = quiet;
    p->t = t;
    p->keep = keep;
}

/* Free the parser; on failure, empty the trace too. */
static int parser_end(parser_t *p, int rc)
{
    free(p->live.e);
    free(p->carry);
    if (rc != TOOLS_OK) {
        trace_t *t = p->t;
        trace_read_release(t);
        memset(t, 0, sizeof *t);
        snprintf(t->path, sizeof t->path, "%s", p->name);
        return TOOLS_BAD;
    }
    return TOOLS_OK;
}

int trace_read_buffer(const char *name, const char *buf, size_t len, trace_t *t, int quiet)
{
    return trace_read_buffer_keep(name, buf, len, 0, t, quiet);
}

int trace_read_buffer_keep(const char *name, const char *buf, size_t len, unsigned keep, trace_t *t,
                           int quiet)
{
    parser_t p;
    parser_init(&p, name, t, quiet, keep);
    int rc = len ? feed(&p, buf, len) : TOOLS_OK;
    if (rc == TOOLS_OK) rc = finish(&p);
    return parser_end(&p, rc);
}

int trace_read_file(const char *path, trace_t *t) { return trace_read_file_keep(path, 0, t); }

int trace_read_file_keep(const char *path, unsigned keep, trace_t *t)
{
    parser_t p;
    parser_init(&p, path, t, 0, keep);
    int rc = input_stream(path, feed, &p);
    if (rc == TOOLS_OK) rc = finish(&p);
    return parser_end(&p, rc);
}

void trace_read_release(trace_t *t)
{
    free(t->ev);
    free(t->time_ns);
    free(t->addr);
    t->ev = NULL;
    t->time_ns = NULL;
    t->addr = NULL;
    t->nev = t->cap = t->addr_cap = 0;
}
