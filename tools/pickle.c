/* tools/pickle.c — the pickle writer declared in pickle.h.
 *
 * Every value ends with item_done(): the enclosing container counts it and, after PICKLE_BATCH
 * items (an even number in a dict: whole key/value pairs), closes the batch with SETITEMS or
 * APPENDS and opens the next with MARK.  A container's end closes its last batch (possibly
 * empty: the opcodes accept that) and counts the container as one item of its parent.
 */
#include "pickle.h"

#include <string.h>

/* Opcodes (Python's Lib/pickle.py names). */
#define OP_PROTO 0x80
#define OP_STOP '.'
#define OP_MARK '('
#define OP_EMPTY_DICT '}'
#define OP_SETITEMS 'u'
#define OP_EMPTY_LIST ']'
#define OP_APPENDS 'e'
#define OP_BINUNICODE 'X'
#define OP_BININT 'J'
#define OP_BININT1 'K'
#define OP_BININT2 'M'
#define OP_LONG1 0x8a
#define OP_NEWTRUE 0x88
#define OP_NEWFALSE 0x89
#define OP_NONE 'N'
#define OP_BINFLOAT 'G'
#define OP_BINPUT 'q'
#define OP_BINGET 'h'

static void put(pickle_t *p, const void *b, size_t n)
{
    if (p->err == 0 && n && fwrite(b, 1, n, p->f) != n) p->err = -1;
}

static void op(pickle_t *p, int code)
{
    unsigned char c = (unsigned char)code;
    put(p, &c, 1);
}

static const char *batch_op(char kind) { return kind == 'd' ? "u" : "e"; }

static void item_done(pickle_t *p)
{
    if (p->depth == 0) return;
    int i = p->depth - 1;
    if (++p->items[i] < PICKLE_BATCH || (p->kind[i] == 'd' && p->items[i] % 2)) return;
    put(p, batch_op(p->kind[i]), 1);
    op(p, OP_MARK);
    p->items[i] = 0;
}

void pickle_begin(pickle_t *p, FILE *f)
{
    memset(p, 0, sizeof *p);
    p->f = f;
    unsigned char proto[2] = {OP_PROTO, 2};
    put(p, proto, 2);
}

int pickle_end(pickle_t *p)
{
    if (p->depth != 0) p->err = -1;
    op(p, OP_STOP);
    if (p->err == 0 && fflush(p->f) != 0) p->err = -1;
    return p->err;
}

static void open_container(pickle_t *p, char kind)
{
    if (p->depth == PICKLE_DEPTH) {
        p->err = -1;
        return;
    }
    op(p, kind == 'd' ? OP_EMPTY_DICT : OP_EMPTY_LIST);
    op(p, OP_MARK);
    p->kind[p->depth] = kind;
    p->items[p->depth] = 0;
    p->depth++;
}

static void close_container(pickle_t *p, char kind)
{
    if (p->depth == 0 || p->kind[p->depth - 1] != kind ||
        (kind == 'd' && p->items[p->depth - 1] % 2)) {
        p->err = -1;
        return;
    }
    put(p, batch_op(kind), 1);
    p->depth--;
    item_done(p);
}

void pickle_dict_begin(pickle_t *p) { open_container(p, 'd'); }
void pickle_dict_end(pickle_t *p) { close_container(p, 'd'); }
void pickle_list_begin(pickle_t *p) { open_container(p, 'l'); }
void pickle_list_end(pickle_t *p) { close_container(p, 'l'); }

static void le32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s[0] does not start one. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    unsigned v = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    return n;
}

void pickle_str(pickle_t *p, const char *s)
{
    if (s == NULL) {
        pickle_none(p);
        return;
    }
    size_t n = strlen(s);
    unsigned char h[5] = {OP_BINUNICODE};
    le32(h + 1, (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n));
    put(p, h, 5);
    /* valid runs as they are, each byte that starts no valid sequence as '?' (same length) */
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        size_t k = utf8_len(u + i);
        if (k) {
            i += k;
            continue;
        }
        put(p, u + run, i - run);
        put(p, "?", 1);
        run = ++i;
    }
    put(p, u + run, n - run);
    item_done(p);
}

void pickle_str_memo(pickle_t *p, const char *s)
{
    for (int i = 0; s && i < p->nmemo; i++) {
        if (p->memo[i] != s && strcmp(p->memo[i], s) != 0) continue;
        unsigned char get[2] = {OP_BINGET, (unsigned char)i};
        put(p, get, 2);
        item_done(p);
        return;
    }
    /* first use: the string, then BINPUT before item_done (a batch end would pop it) */
    if (s == NULL || p->nmemo == PICKLE_MEMO) {
        pickle_str(p, s);
        return;
    }
    size_t n = strlen(s);
    unsigned char h[5] = {OP_BINUNICODE};
    le32(h + 1, (uint32_t)n);
    put(p, h, 5);
    put(p, s, n);
    unsigned char bp[2] = {OP_BINPUT, (unsigned char)p->nmemo};
    put(p, bp, 2);
    p->memo[p->nmemo++] = s;
    item_done(p);
}

void pickle_int(pickle_t *p, int64_t v)
{
    unsigned char b[10];
    if (v >= 0 && v < 0x100) {
        b[0] = OP_BININT1, b[1] = (unsigned char)v;
        put(p, b, 2);
    } else if (v >= 0 && v < 0x10000) {
        b[0] = OP_BININT2, b[1] = (unsigned char)v, b[2] = (unsigned char)(v >> 8);
        put(p, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        b[0] = OP_BININT;
        le32(b + 1, (uint32_t)(int32_t)v);
        put(p, b, 5);
    } else { /* LONG1: little-endian two's complement, as few bytes as keep the sign */
        uint64_t u = (uint64_t)v;
        int n = 8;
        while (n > 1) {
            unsigned char top = (unsigned char)(u >> (8 * (n - 1)));
            unsigned char next_sign = (unsigned char)(u >> (8 * (n - 2) + 7)) & 1;
            if (!((top == 0 && !next_sign) || (top == 0xff && next_sign))) break;
            n--;
        }
        b[0] = OP_LONG1, b[1] = (unsigned char)n;
        for (int i = 0; i < n; i++) b[2 + i] = (unsigned char)(u >> (8 * i));
        put(p, b, (size_t)(2 + n));
    }
    item_done(p);
}

void pickle_uint(pickle_t *p, uint64_t v)
{
    if (v <= INT64_MAX) {
        pickle_int(p, (int64_t)v);
        return;
    }
    unsigned char b[11] = {OP_LONG1, 9}; /* 8 bytes and a 0 so it reads as positive */
    for (int i = 0; i < 8; i++) b[2 + i] = (unsigned char)(v >> (8 * i));
    b[10] = 0;
    put(p, b, sizeof b);
    item_done(p);
}

void pickle_bool(pickle_t *p, int v)
{
    op(p, v ? OP_NEWTRUE : OP_NEWFALSE);
    item_done(p);
}

void pickle_none(pickle_t *p)
{
    op(p, OP_NONE);
    item_done(p);
}

void pickle_float(pickle_t *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    unsigned char b[9] = {OP_BINFLOAT};
    for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(u >> (8 * (7 - i)));
    put(p, b, sizeof b);
    item_done(p);
}

void pickle_key_str(pickle_t *p, const char *key, const char *value)
{
    pickle_str_memo(p, key);
    pickle_str(p, value);
}

void pickle_key_int(pickle_t *p, const char *key, int64_t value)
{
    pickle_str_memo(p, key);
    pickle_int(p, value);
}

void pickle_key_uint(pickle_t *p, const char *key, uint64_t value)
{
    pickle_str_memo(p, key);
    pickle_uint(p, value);
}
