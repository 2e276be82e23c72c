/* tools/jsonscan.c — the byte-level JSON scanner declared in jsonscan.h.
 *
 * Outside strings a byte is blank space, a structural character, '"', a character of a number
 * literal (-+.0-9eE) or a letter of true/false/null; inside a string anything but a control byte
 * (RFC 8259 wants those escaped; the writers escape them).  A number literal is what cJSON reads
 * as one: it starts with '-' or a digit and runs over -+.0-9eE; in a document cJSON accepted,
 * that run is exactly what its strtod consumed, or the next byte would have failed the parse.
 */
#include "jsonscan.h"

enum { C_BAD = 0, C_BLANK, C_PLAIN, C_QUOTE, C_OPEN, C_CLOSE };

/* Class of a byte outside strings (0 = C_BAD). */
static const unsigned char outside[256] = {
    [' '] = C_BLANK, ['\t'] = C_BLANK, ['\n'] = C_BLANK, ['\r'] = C_BLANK, ['"'] = C_QUOTE,
    ['{'] = C_OPEN,  ['}'] = C_CLOSE,  ['['] = C_OPEN,   [']'] = C_CLOSE,  [':'] = C_PLAIN,
    [','] = C_PLAIN, ['-'] = C_PLAIN,  ['+'] = C_PLAIN,  ['.'] = C_PLAIN,  ['0'] = C_PLAIN,
    ['1'] = C_PLAIN, ['2'] = C_PLAIN,  ['3'] = C_PLAIN,  ['4'] = C_PLAIN,  ['5'] = C_PLAIN,
    ['6'] = C_PLAIN, ['7'] = C_PLAIN,  ['8'] = C_PLAIN,  ['9'] = C_PLAIN,  ['e'] = C_PLAIN,
    ['E'] = C_PLAIN, ['a'] = C_PLAIN,  ['f'] = C_PLAIN,  ['l'] = C_PLAIN,  ['n'] = C_PLAIN,
    ['r'] = C_PLAIN, ['s'] = C_PLAIN,  ['t'] = C_PLAIN,  ['u'] = C_PLAIN,
};

static int stop(jsonscan_t *s, int why, size_t at)
{
    s->why = why;
    s->bad = at;
    s->pos = at;
    return -1;
}

int jsonscan_feed(jsonscan_t *s, const char *buf, size_t len)
{
    if (s->why != JSONSCAN_OK) return -1;
    const unsigned char *b = (const unsigned char *)buf;
    size_t i = s->pos;
    while (i < len) {
        unsigned c = b[i];
        if (s->in_string) {
            if (c < 0x20) return stop(s, c ? JSONSCAN_CONTROL : JSONSCAN_NUL, i);
            if (s->escaped)
                s->escaped = 0;
            else if (c == '\\')
                s->escaped = 1;
            else if (c == '"')
                s->in_string = 0;
            i++;
            continue;
        }
        int k = outside[c];
        if (k == C_BAD) {
            if (c == 0) return stop(s, JSONSCAN_NUL, i);
            return stop(s, c < 0x20 ? JSONSCAN_CONTROL : JSONSCAN_BYTE, i);
        }
        if (k != C_BLANK) {
            if (!s->started && c != '{') return stop(s, JSONSCAN_NOT_OBJECT, i);
            if (s->started && s->depth == 0) return stop(s, JSONSCAN_TRAILING, i);
            s->started = 1;
        }
        if (k == C_QUOTE) s->in_string = 1;
        if (k == C_OPEN && ++s->depth > JSONSCAN_MAX_DEPTH) return stop(s, JSONSCAN_DEPTH, i);
        if (k == C_CLOSE) s->depth--;
        i++;
    }
    s->pos = i;
    return 0;
}

static int number_byte(unsigned c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

int jsonscan_next_number(const char *buf, size_t len, size_t pos, size_t *start, size_t *n)
{
    const unsigned char *b = (const unsigned char *)buf;
    for (size_t i = pos; i < len; i++) {
        unsigned c = b[i];
        if (c == '"') { /* skip the string, escapes included */
            for (i++; i < len && b[i] != '"'; i++)
                if (b[i] == '\\') i++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            size_t e = i + 1;
            while (e < len && number_byte(b[e])) e++;
            *start = i;
            *n = e - i;
            return 0;
        }
    }
    return -1;
}

#define EXP_CLAMP 100000 /* |exponent| beyond this is as good as infinite here */

int jsonscan_integer(const char *text, size_t n, int *neg, uint64_t *mag)
{
    const char *p = text, *end = text + n;
    *neg = 0;
    *mag = 0;
    if (p < end && *p == '-') *neg = 1, p++;
    /* The significant digits (integer and fraction part), as a span with the '.' skipped. */
    const char *ds = p;
    long frac = 0; /* digits after the '.' */
    int seen_dot = 0, ndig = 0;
    for (; p < end; p++) {
        if (*p >= '0' && *p <= '9') {
            ndig++;
            frac += seen_dot;
        } else if (*p == '.' && !seen_dot) {
            seen_dot = 1;
        } else {
            break;
        }
    }
    const char *de = p;
    if (ndig == 0) return JSONSCAN_FRACTION;
    long exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p == end) return JSONSCAN_FRACTION;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (exp < EXP_CLAMP) exp = exp * 10 + (*p - '0');
        if (eneg) exp = -exp;
    }
    if (p != end) return JSONSCAN_FRACTION;
    /* value = D * 10^(exp - frac), D the digit string without its leading zeros; drop D's
     * trailing zeros into the exponent. */
    while (ds < de && (*ds == '0' || *ds == '.')) ds++;
    if (ds == de) return JSONSCAN_INT; /* zero */
    while (de[-1] == '0' || de[-1] == '.') {
        if (de[-1] == '0') frac--; /* a trailing zero of the fraction, or one more power of ten */
        de--;
    }
    long shift = exp - frac;
    if (shift < 0) return JSONSCAN_FRACTION;
    int sig = 0;
    for (const char *q = ds; q < de; q++) sig += *q != '.';
    if (sig + shift > 20) return JSONSCAN_RANGE;
    uint64_t v = 0;
    for (const char *q = ds; q < de; q++) {
        if (*q == '.') continue;
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10) return JSONSCAN_RANGE;
        v = v * 10 + d;
    }
    for (long k = 0; k < shift; k++) {
        if (v > UINT64_MAX / 10) return JSONSCAN_RANGE;
        v *= 10;
    }
    *mag = v;
    return JSONSCAN_INT;
}
