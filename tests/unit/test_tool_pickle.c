/* tests/unit/test_tool_pickle.c — tools/pickle.c byte for byte: each opcode as Python's pickle
 * module defines it (Lib/pickle.py: PROTO 2, EMPTY_DICT/EMPTY_LIST + MARK ... SETITEMS/APPENDS,
 * BININT1/BININT2/BININT/LONG1 at their boundaries, BINUNICODE, NEWTRUE/NEWFALSE, NONE,
 * BINFLOAT big-endian, BINPUT/BINGET, STOP); batches of 1000 items; invalid UTF-8 made valid;
 * bad nesting and write errors reported.  (tests/cases/tool_export.sh loads whole snapshots with Python.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pickle.h"

typedef struct buf {
    char *data; /* the bytes written */
    size_t len; /* their number */
    FILE *f;    /* the memstream */
} buf_t;

static pickle_t *start(buf_t *b)
{
    static pickle_t p;
    b->f = open_memstream(&b->data, &b->len);
    assert_non_null(b->f);
    pickle_begin(&p, b->f);
    return &p;
}

/* End the pickle and compare its bytes with want[0..n). */
static void expect(pickle_t *p, buf_t *b, const char *want, size_t n)
{
    assert_int_equal(pickle_end(p), 0);
    fclose(b->f);
    if (b->len != n || memcmp(b->data, want, n) != 0) {
        fprintf(stderr, "got %zu bytes:", b->len);
        for (size_t i = 0; i < b->len; i++) fprintf(stderr, " %02x", (unsigned char)b->data[i]);
        fprintf(stderr, "\n");
        fail_msg("bytes differ");
    }
    free(b->data);
}
#define EXPECT(p, b, lit) expect(p, b, lit, sizeof(lit) - 1)

static void test_scalars(void **state)
{
    (void)state;
    buf_t b;
    pickle_t *p = start(&b);
    pickle_list_begin(p);
    pickle_int(p, 0);
    pickle_int(p, 255);
    pickle_int(p, 256);
    pickle_int(p, 65535);
    pickle_int(p, 65536);
    pickle_int(p, -1);
    pickle_int(p, INT32_MAX);
    pickle_int(p, (int64_t)INT32_MAX + 1);
    pickle_int(p, (int64_t)INT32_MIN - 1);
    pickle_uint(p, UINT64_MAX);
    pickle_bool(p, 1);
    pickle_bool(p, 0);
    pickle_none(p);
    pickle_float(p, 1.5);
    pickle_str(p, "héllo");
    pickle_str(p, NULL);
    pickle_list_end(p);
    EXPECT(p, &b,
           "\x80\x02"
           "](" /* EMPTY_LIST MARK */
           "K\x00"
           "K\xff"
           "M\x00\x01"
           "M\xff\xff"
           "J\x00\x00\x01\x00"
           "J\xff\xff\xff\xff"
           "J\xff\xff\xff\x7f"
           "\x8a\x05\x00\x00\x00\x80\x00"                 /* 2^31: LONG1, 5 bytes (sign byte 0) */
           "\x8a\x05\xff\xff\xff\x7f\xff"                 /* -2^31-1 */
           "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00" /* 2^64-1 */
           "\x88\x89N"
           "G\x3f\xf8\x00\x00\x00\x00\x00\x00"
           "X\x06\x00\x00\x00h\xc3\xa9llo"
           "N"
           "e.");
}

static void test_containers(void **state)
{
    (void)state;
    buf_t b;
    pickle_t *p = start(&b);
    pickle_dict_begin(p);
    pickle_key_int(p, "a", 1);
    pickle_str(p, "l");
    pickle_list_begin(p);
    pickle_list_end(p);
    pickle_dict_end(p);
    EXPECT(p, &b,
           "\x80\x02}("
           "X\x01\x00\x00\x00"
           "a"
           "q\x00" /* keys are memoized */
           "K\x01"
           "X\x01\x00\x00\x00"
           "l" /* pickle_str: not memoized */
           "](e"
           "u.");
}

/* Memoized strings: BINPUT on first use, BINGET after, also across a batch end; a full memo
 * falls back to plain strings. */
static void test_memo(void **state)
{
    (void)state;
    buf_t b;
    pickle_t *p = start(&b);
    pickle_list_begin(p);
    pickle_str_memo(p, "alloc");
    pickle_str_memo(p, "free");
    char copy[] = "alloc"; /* equal text, other storage */
    pickle_str_memo(p, copy);
    pickle_str_memo(p, "free");
    pickle_list_end(p);
    EXPECT(p, &b,
           "\x80\x02]("
           "X\x05\x00\x00\x00"
           "alloc"
           "q\x00"
           "X\x04\x00\x00\x00"
           "free"
           "q\x01"
           "h\x00"
           "h\x01"
           "e.");
    p = start(&b);
    static char words[PICKLE_MEMO + 1][8];
    for (int i = 0; i <= PICKLE_MEMO; i++) {
        snprintf(words[i], sizeof words[i], "w%d", i);
        pickle_str_memo(p, words[i]);
    }
    assert_int_equal(p->nmemo, PICKLE_MEMO);
    assert_int_equal(pickle_end(p), 0);
    fclose(b.f);
    /* the last word is a plain string: no BINPUT after it, STOP */
    assert_memory_equal(b.data + b.len - 9, "X\x03\x00\x00\x00w64.", 9);
    free(b.data);
}

static void test_batches(void **state)
{
    (void)state;
    buf_t b;
    pickle_t *p = start(&b);
    pickle_list_begin(p);
    for (int i = 0; i < 2001; i++) pickle_none(p);
    pickle_list_end(p);
    /* ]( 1000 x N e( 1000 x N e( N e . */
    size_t n = 2 + 2 + 1000 + 2 + 1000 + 2 + 1 + 1 + 1;
    char *want = malloc(n), *w = want;
    memcpy(w, "\x80\x02](", 4), w += 4;
    memset(w, 'N', 1000), w += 1000;
    memcpy(w, "e(", 2), w += 2;
    memset(w, 'N', 1000), w += 1000;
    memcpy(w, "e(Ne.", 5);
    expect(p, &b, want, n);
    free(want);
    /* a dict closes a batch only after whole pairs: 1001 pairs = 2002 items; the key is
     * "X k BINPUT" the first time (8 bytes), "BINGET 0" after (2), the value "K 7" (2) */
    p = start(&b);
    pickle_dict_begin(p);
    for (int i = 0; i < 1001; i++) pickle_key_int(p, "k", 7);
    pickle_dict_end(p);
    assert_int_equal(pickle_end(p), 0);
    fclose(b.f);
    size_t first = 8 + 2, pair = 2 + 2, head = 2 + 2, batch1 = first + 499 * pair;
    assert_int_equal(b.len, head + batch1 + 2 + 500 * pair + 2 + pair + 1 + 1);
    assert_int_equal(b.data[head + batch1], 'u');
    assert_int_equal(b.data[head + batch1 + 1], '(');
    free(b.data);
}

static void test_utf8(void **state)
{
    (void)state;
    buf_t b;
    pickle_t *p = start(&b);
    /* a lone continuation byte, an overlong '/', a surrogate, a truncated sequence */
    pickle_str(p, "a\x80"
                  "b\xc0\xaf"
                  "c\xed\xa0\x80"
                  "d\xe2\x82");
    EXPECT(p, &b,
           "\x80\x02X\x0c\x00\x00\x00"
           "a?b??c???d??.");
    p = start(&b);
    pickle_str(p, "\xf0\x9f\x98\x80"); /* a valid 4-byte sequence is kept */
    EXPECT(p, &b, "\x80\x02X\x04\x00\x00\x00\xf0\x9f\x98\x80.");
}

static void test_errors(void **state)
{
    (void)state;
    buf_t b;
    pickle_t *p = start(&b);
    pickle_list_begin(p);
    assert_int_equal(pickle_end(p), -1); /* unclosed */
    fclose(b.f), free(b.data);
    p = start(&b);
    pickle_list_begin(p);
    pickle_dict_end(p); /* wrong kind */
    assert_int_equal(pickle_end(p), -1);
    fclose(b.f), free(b.data);
    p = start(&b);
    pickle_dict_begin(p);
    pickle_str(p, "key without value");
    pickle_dict_end(p);
    assert_int_equal(pickle_end(p), -1);
    fclose(b.f), free(b.data);
    p = start(&b);
    for (int i = 0; i <= PICKLE_DEPTH; i++) pickle_list_begin(p);
    assert_int_equal(p->err, -1);
    fclose(b.f), free(b.data);
    /* a write error (full device) is reported by pickle_end */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        static pickle_t q;
        pickle_begin(&q, full);
        for (int i = 0; i < 10000; i++) pickle_str(&q, "some text that fills the stdio buffer");
        assert_int_equal(pickle_end(&q), -1);
        fclose(full);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars), cmocka_unit_test(test_containers),
        cmocka_unit_test(test_memo),    cmocka_unit_test(test_batches),
        cmocka_unit_test(test_utf8),    cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
