/* base/suppress.c — suppression patterns (suppress.h): parser, file reader, glob matcher.
 *
 * Reading: bytes go through one line assembler (lines_feed) whether they come from a buffer
 * (suppress_parse) or from read(2) in pieces of READ_PIECE bytes (suppress_load): a line split
 * between pieces waits in the assembler's fixed buffer of SUPPRESS_LINE_MAX bytes.  A bad byte
 * or an over-long line stops the read at that line, so /dev/zero or /dev/urandom end within the
 * first piece, and a file is read no further than SUPPRESS_FILE_MAX bytes.
 * Matching: the classic greedy glob walk with one back-tracking point (the last '*' seen):
 * when a later byte fails, the last '*' takes one more byte and the walk resumes.  Keeping only
 * the last star is enough because a star can absorb anything an earlier star could have.
 * Nothing here allocates; the state is the caller's list and the stack.
 */
#include "suppress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define READ_PIECE 4096 /* bytes read at a time by suppress_load */

static const char prefix_function[] = "function:";
static const char prefix_module[] = "module:";

void suppress_init(suppress_list_t *l)
{
    l->n = 0;
    l->err[0] = '\0';
}

static int fail(suppress_list_t *l, const char *source, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(suppress_list_t *l, const char *source, uint32_t line, const char *fmt, ...)
{
    /* "SOURCE:LINE: message", cut at SUPPRESS_ERR_MAX bytes (still one line) */
    int n = line ? snprintf(l->err, sizeof l->err, "%s:%u: ", source ? source : "?", (unsigned)line)
                 : snprintf(l->err, sizeof l->err, "%s: ", source ? source : "?");
    if (n >= 0 && (size_t)n < sizeof l->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->err + n, sizeof l->err - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- glob ------------------------------------------------------------------------------------ */

/* The end of the bracket expression that starts at p ('['), or NULL when it is not closed.  A
 * ']' right after '[' (or after '[!' / '[^') belongs to the set. */
static const char *class_end(const char *p)
{
    const char *q = p + 1;
    if (*q == '!' || *q == '^') q++;
    if (*q == ']') q++;
    while (*q && *q != ']') q++;
    return *q == ']' ? q : NULL;
}

/* 1 when byte c is in the set [p+1, end) (p points at '['). */
static int class_has(const char *p, const char *end, unsigned char c)
{
    const char *q = p + 1;
    int negate = *q == '!' || *q == '^';
    if (negate) q++;
    int hit = 0;
    for (; q < end; q++) {
        if (q + 2 < end && q[1] == '-') {
            unsigned char lo = (unsigned char)q[0], hi = (unsigned char)q[2];
            if (c >= lo && c <= hi) hit = 1;
            q += 2;
        } else if ((unsigned char)*q == c) {
            hit = 1;
        }
    }
    return hit != negate;
}

/* Match the one-byte token at *pp against c; on a match *pp moves past the token. */
static int token_matches(const char **pp, unsigned char c)
{
    const char *p = *pp;
    if (*p == '?') {
        *pp = p + 1;
        return 1;
    }
    if (*p == '[') {
        const char *end = class_end(p);
        if (end) {
            if (!class_has(p, end, c)) return 0;
            *pp = end + 1;
            return 1;
        }
        /* unclosed: a literal '[' */
    } else if (*p == '\\' && p[1] != '\0') {
        p++;
    }
    if ((unsigned char)*p != c) return 0;
    *pp = p + 1;
    return 1;
}

int suppress_glob(const char *pattern, const char *name)
{
    const char *p = pattern, *s = name;
    const char *star_p = NULL, *star_s = NULL; /* after the last '*', and where it began */
    while (*s) {
        if (*p == '*') {
            while (*p == '*') p++;
            star_p = p;
            star_s = s;
            continue;
        }
        if (*p && token_matches(&p, (unsigned char)*s)) {
            s++;
            continue;
        }
        if (star_p == NULL) return 0;
        p = star_p; /* the last star takes one more byte */
        s = ++star_s;
    }
    while (*p == '*') p++;
    return *p == '\0';
}

/* ---- parsing --------------------------------------------------------------------------------- */

/* NULL when `pat` (NUL-terminated) is a well-formed glob, else what is wrong. */
static const char *glob_problem(const char *pat)
{
    for (const char *p = pat; *p; p++) {
        if (*p == '\\') {
            if (p[1] == '\0') return "'\\' at the end of the pattern";
            p++;
        } else if (*p == '[') {
            const char *end = class_end(p);
            if (end == NULL) return "'[' without its ']'";
            p = end;
        }
    }
    return NULL;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* -1 with l->err set when text[0..len) holds a byte no suppressions file has, else 0. */
static int check_bytes(suppress_list_t *l, const char *text, size_t len, const char *source,
                       uint32_t line)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)text[i];
        if (b == '\0') return fail(l, source, line, "NUL byte: not a suppressions file");
        if ((b < 0x20 && b != '\t' && b != '\r') || b == 0x7f)
            return fail(l, source, line, "control byte 0x%02x: not a suppressions file", b);
    }
    return 0;
}

int suppress_add(suppress_list_t *l, const char *text, size_t len, const char *source,
                 uint32_t line)
{
    const char *s = text, *e = text + len;
    if (check_bytes(l, text, len, source, line) != 0) return -1;
    if (len > SUPPRESS_LINE_MAX)
        return fail(l, source, line, "line longer than %d bytes", SUPPRESS_LINE_MAX);
    while (s < e && (is_blank(*s) || *s == '\r')) s++;
    while (e > s && (is_blank(e[-1]) || e[-1] == '\r')) e--;
    if (s == e || *s == '#') return 0;
    uint8_t kind = SUPPRESS_ANY;
    size_t nf = sizeof prefix_function - 1, nm = sizeof prefix_module - 1;
    if ((size_t)(e - s) >= nf && memcmp(s, prefix_function, nf) == 0)
        kind = SUPPRESS_FUNCTION, s += nf;
    else if ((size_t)(e - s) >= nm && memcmp(s, prefix_module, nm) == 0)
        kind = SUPPRESS_MODULE, s += nm;
    while (s < e && is_blank(*s)) s++;
    if (s == e) return fail(l, source, line, "empty pattern after its prefix");
    if ((size_t)(e - s) > SUPPRESS_PATTERN_MAX)
        return fail(l, source, line, "pattern longer than %d bytes", SUPPRESS_PATTERN_MAX);
    if (l->n >= SUPPRESS_MAX_RULES)
        return fail(l, source, line, "more than %d patterns", SUPPRESS_MAX_RULES);
    suppress_rule_t *r = &l->rule[l->n];
    memcpy(r->pattern, s, (size_t)(e - s));
    r->pattern[e - s] = '\0';
    const char *why = glob_problem(r->pattern);
    if (why) return fail(l, source, line, "bad pattern '%.80s': %s", r->pattern, why);
    r->kind = kind;
    r->line = line;
    r->source = source;
    l->n++;
    return 0;
}

/* The line assembler shared by suppress_parse and suppress_load. */
typedef struct lines {
    suppress_list_t *l;              /* where patterns go */
    const char *source;              /* name for messages */
    uint32_t line;                   /* lines completed so far */
    size_t bytes;                    /* bytes fed so far */
    size_t n;                        /* bytes of the current line held in buf */
    char buf[SUPPRESS_LINE_MAX + 1]; /* the current line when it spans pieces */
} lines_t;

static int lines_line(lines_t *r, const char *s, size_t n)
{
    r->line++;
    return suppress_add(r->l, s, n, r->source, r->line);
}

static int lines_feed(lines_t *r, const char *data, size_t n)
{
    r->bytes += n;
    if (r->bytes > SUPPRESS_FILE_MAX)
        return fail(r->l, r->source, 0, "larger than %zu bytes: not a suppressions file",
                    SUPPRESS_FILE_MAX);
    const char *s = data, *end = data + n;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        size_t k = (size_t)(le - s);
        if (r->n + k > SUPPRESS_LINE_MAX) {
            /* a bad byte says more than the length (binary input has no newlines) */
            if (check_bytes(r->l, s, k, r->source, r->line + 1) != 0) return -1;
            return fail(r->l, r->source, r->line + 1, "line longer than %d bytes",
                        SUPPRESS_LINE_MAX);
        }
        if (nl == NULL || r->n) { /* goes on in the next piece, or began in an earlier one */
            memcpy(r->buf + r->n, s, k);
            r->n += k;
            if (nl == NULL) break;
            size_t len = r->n;
            r->n = 0;
            if (lines_line(r, r->buf, len) != 0) return -1;
        } else if (lines_line(r, s, k) != 0) {
            return -1;
        }
        s = nl + 1;
    }
    return 0;
}

static int lines_finish(lines_t *r)
{
    if (r->n == 0) return 0;
    size_t len = r->n;
    r->n = 0;
    return lines_line(r, r->buf, len);
}

static void lines_init(lines_t *r, suppress_list_t *l, const char *source)
{
    r->l = l;
    r->source = source;
    r->line = 0;
    r->bytes = 0;
    r->n = 0;
}

int suppress_parse(suppress_list_t *l, const char *text, size_t len, const char *source)
{
    lines_t r;
    lines_init(&r, l, source);
    if (lines_feed(&r, text, len) != 0) return -1;
    return lines_finish(&r);
}

int suppress_load(suppress_list_t *l, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(l, path, 0, "cannot open: %s", strerror(errno));
    lines_t r;
    lines_init(&r, l, path);
    char piece[READ_PIECE];
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, piece, sizeof piece);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = fail(l, path, 0, "read error: %s", strerror(errno));
            break;
        }
        if (n == 0) {
            rc = lines_finish(&r);
            break;
        }
        if ((rc = lines_feed(&r, piece, (size_t)n)) != 0) break;
    }
    close(fd);
    return rc;
}

/* ---- matching -------------------------------------------------------------------------------- */

int suppress_match(const suppress_list_t *l, const char *function, const char *module)
{
    const char *base = NULL;
    if (module) {
        const char *slash = strrchr(module, '/');
        base = slash ? slash + 1 : module;
    }
    for (int i = 0; i < l->n; i++) {
        const suppress_rule_t *r = &l->rule[i];
        if (r->kind != SUPPRESS_MODULE && function && suppress_glob(r->pattern, function)) return i;
        if (r->kind != SUPPRESS_FUNCTION && module &&
            (suppress_glob(r->pattern, module) || suppress_glob(r->pattern, base)))
            return i;
    }
    return -1;
}
