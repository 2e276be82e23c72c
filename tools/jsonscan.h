/* tools/jsonscan.h — a byte-level look at JSON text, beside cJSON's parser.
 *
 * Owns:
 *   - the streaming pre-check of a report's bytes: it stops at the first byte that cannot belong
 *     to a JSON object document — a NUL or another control byte, a byte outside a string that no
 *     JSON token has, a first non-blank byte that is not '{', nesting deeper than cJSON takes, or
 *     anything but blank space after the document — so hostile input (/dev/zero, /dev/urandom,
 *     a binary, `yes {`) is refused at its first piece, before any parse;
 *   - the exact text of number literals: cJSON keeps a number as a double, exact to 2^53 only;
 *     jsonscan_next_number() walks the text a parse accepted and yields its number literals in
 *     document order, which is the pre-order of the tree's number nodes;
 *   - jsonscan_integer(): the exact integer a literal denotes ("18446744073709551615", "1.0",
 *     "4e3"), or why it is none.
 * Stateless but for the pre-check's state; no allocation.
 */
#ifndef NPUPOOL_TOOLS_JSONSCAN_H
#define NPUPOOL_TOOLS_JSONSCAN_H

#include <stddef.h>
#include <stdint.h>

enum jsonscan_why {
    JSONSCAN_OK = 0,         /* nothing wrong so far */
    JSONSCAN_NUL = 1,        /* a NUL byte */
    JSONSCAN_CONTROL = 2,    /* a control byte other than blank space, or one inside a string */
    JSONSCAN_BYTE = 3,       /* a byte outside a string that no JSON token has */
    JSONSCAN_NOT_OBJECT = 4, /* the first non-blank byte is not '{' */
    JSONSCAN_DEPTH = 5,      /* nested deeper than JSONSCAN_MAX_DEPTH */
    JSONSCAN_TRAILING = 6,   /* a non-blank byte after the document */
};

#define JSONSCAN_MAX_DEPTH 1000 /* = cJSON's CJSON_NESTING_LIMIT (report_read.c checks) */

typedef struct jsonscan {
    size_t pos;    /* bytes scanned */
    int started;   /* the first non-blank byte was seen */
    int in_string; /* inside a string literal */
    int escaped;   /* the byte before was a backslash inside a string */
    int depth;     /* objects and arrays open */
    int why;       /* enum jsonscan_why of the failure */
    size_t bad;    /* offset of the offending byte (after a failure) */
} jsonscan_t;

/* Scan buf[s->pos .. len); buf holds everything fed so far (zero-initialise s first).  0, or -1
 * with s->why and s->bad set; a failed scan stays failed. */
int jsonscan_feed(jsonscan_t *s, const char *buf, size_t len);

/* The next number literal at or after `pos` (which is outside any string): 0 with *start and
 * *n, or -1 when there is none. */
int jsonscan_next_number(const char *buf, size_t len, size_t pos, size_t *start, size_t *n);

enum jsonscan_int {
    JSONSCAN_INT = 0,      /* an integer: *neg and *mag hold it */
    JSONSCAN_FRACTION = 1, /* a number that is not an integer, or not a number literal */
    JSONSCAN_RANGE = 2,    /* an integer whose magnitude is above 2^64 - 1 */
};

/* The exact value of the number literal text[0..n): enum jsonscan_int. */
int jsonscan_integer(const char *text, size_t n, int *neg, uint64_t *mag);

#endif /* NPUPOOL_TOOLS_JSONSCAN_H */
