/* tests/unit/test_ledger_py.c — the Python side of the ledger without an interpreter: line tables
 * of the three formats (hand-made entries of every kind; tests/cases/python_layout.sh compares the
 * decoder with real interpreters), the merge of Python frames into a native stack, the Python
 * frame table (interning, reading back, from several threads), stack marks, and a process without
 * an interpreter (no mark, nothing found).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ledger.h"
#include "ledger_test_util.h"
#include "ledger_internal.h"
#include "ledger_py.h"
#include "ledger_py_layout.h"

/* ---- line tables ----------------------------------------------------------------------------- */

static void test_line_lnotab(void **state)
{
    (void)state;
    /* (byte delta, line delta): 0..5 -> 10, 6..13 -> 11, 14..17 -> 13, then back to 10 */
    const uint8_t t[] = {6, 1, 8, 2, 4, (uint8_t)-3};
    const int want[][2] = {{-1, 10}, {0, 10}, {5, 10}, {6, 11}, {13, 11}, {14, 13}, {18, 10}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(ledger_py_line(PY_LINES_LNOTAB, t, sizeof t, 10, want[i][0]), want[i][1]);
}

static void test_line_310(void **state)
{
    (void)state;
    /* [0,2) +1 -> 21; [2,6) no line; an empty range +3; [6,12) -1 -> 23; past the end: none */
    const uint8_t t[] = {2, 1, 4, (uint8_t)-128, 0, 3, 6, (uint8_t)-1};
    const int want[][2] = {{-1, 20}, {0, 21}, {1, 21},  {2, -1},
                           {5, -1},  {6, 23}, {11, 23}, {12, -1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(ledger_py_line(PY_LINES_310, t, sizeof t, 20, want[i][0]), want[i][1]);
}

static void test_line_locations(void **state)
{
    (void)state;
    const uint8_t t[] = {
        0x80 | 13 << 3 | 1, 10,            /* no columns, +5 (varint 10): 2 units -> 105 */
        0x80 | 11 << 3 | 0, 4,    9,       /* one line, +1, columns 4..9: 1 unit -> 106 */
        0x80 | 15 << 3 | 2,                /* no location: 3 units -> none */
        0x80 | 14 << 3 | 0, 15,   0, 2, 4, /* long form, -7 (varint 15), end line, columns -> 99 */
        0x80 | 0 << 3 | 0,  0x21,          /* short form, same line: 1 unit -> 99 */
        0x80 | 13 << 3 | 0, 72,   3,       /* no columns, +100 (two-byte varint 200) -> 199 */
    };
    const int want[][2] = {{-1, 100}, {0, 105}, {3, 105}, {4, 106},  {5, 106},  {6, -1}, {11, -1},
                           {12, 99},  {13, 99}, {14, 99}, {16, 199}, {17, 199}, {18, -1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(ledger_py_line(PY_LINES_LOCATIONS, t, sizeof t, 100, want[i][0]),
                         want[i][1]);
    /* a table that does not start an entry where one must start is not believed */
    const uint8_t broken[] = {0x05, 0x80};
    assert_int_equal(ledger_py_line(PY_LINES_LOCATIONS, broken, sizeof broken, 1, 0), -1);
}

/* ---- merging ----------------------------------------------------------------------------------- */

#define A 0x500010u /* a native frame (libffi) */
#define B 0x500020u /* another (the ctypes module) */
#define G1 0x1010u  /* interpreter glue */
#define E1 0x1110u  /* inside _PyEval_EvalFrameDefault */
#define G2 0x1020u  /* glue */
#define E2 0x1120u  /* the eval loop again */
#define N 0x600010u /* libc, outside the interpreter */
#define P(i) (LEDGER_PY_TAG | (i))
#define MARK (LEDGER_PY_TAG | LEDGER_PY_MARK | LEDGER_PY_GIL_HELD)

static int merge(const uintptr_t *native, int nn, const uintptr_t *py, int npy,
                 const uint16_t *group, int ng, int nmax, int pmax, uintptr_t *out, int cap)
{
    ledger_py_merge_t m = {.native = native,
                           .nnative = nn,
                           .eval_lo = 0x1100,
                           .eval_hi = 0x1200,
                           .interp_lo = 0x1000,
                           .interp_hi = 0x2000,
                           .py = py,
                           .npy = npy,
                           .group = group,
                           .ngroups = ng,
                           .native_max = nmax,
                           .py_max = pmax,
                           .mark = MARK};
    return ledger_py_merge(&m, out, cap);
}

static void expect(const uintptr_t *got, int n, const uintptr_t *want, int nwant)
{
    assert_int_equal(n, nwant);
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("frame %d: %#lx, expected %#lx", i, got[i], want[i]);
}

static void test_merge(void **state)
{
    (void)state;
    const uintptr_t native[] = {A, B, G1, E1, G2, E2, N};
    const uintptr_t py[] = {P(1), P(2), P(3)};
    uintptr_t out[32];
    /* the first eval call runs two Python frames (an inlined call), the second one */
    const uint16_t g21[] = {2, 1};
    const uintptr_t w1[] = {A, B, P(1), P(2), P(3), N, MARK};
    expect(out, merge(native, 7, py, 3, g21, 2, 16, 16, out, 32), w1, 7);
    /* one frame each, three calls: the third has no eval frame captured: appended */
    const uint16_t g111[] = {1, 1, 1};
    expect(out, merge(native, 7, py, 3, g111, 3, 16, 16, out, 32),
           (const uintptr_t[]){A, B, P(1), P(2), N, P(3), MARK}, 7);
    /* a call that runs no visible frame (an incomplete one) keeps the others in place */
    const uint16_t g03[] = {0, 3};
    expect(out, merge(native, 7, py, 3, g03, 2, 16, 16, out, 32),
           (const uintptr_t[]){A, B, P(1), P(2), P(3), N, MARK}, 7);
    /* budgets: one native frame, two Python frames */
    expect(out, merge(native, 7, py, 3, g21, 2, 1, 2, out, 32),
           (const uintptr_t[]){A, P(1), P(2), MARK}, 4);
    /* no Python frames (native only): nothing dropped, the eval loop and glue stay */
    expect(out, merge(native, 7, py, 0, g21, 0, 16, 16, out, 32),
           (const uintptr_t[]){A, B, G1, E1, G2, E2, N, MARK}, 8);
    /* a full buffer keeps the mark */
    expect(out, merge(native, 7, py, 3, g21, 2, 16, 16, out, 3), (const uintptr_t[]){A, B, MARK},
           3);
    /* a return address just past the eval loop's end is a call from its last instruction */
    const uintptr_t edge[] = {A, 0x1200, N};
    const uint16_t g1[] = {1};
    expect(out, merge(edge, 3, py, 1, g1, 1, 16, 16, out, 32),
           (const uintptr_t[]){A, P(1), N, MARK}, 4);
}

/* ---- the frame table ------------------------------------------------------------------------- */

static void test_table(void **state)
{
    (void)state;
    uint32_t a = ledger_py_table_intern("/srv/train.py", "Model.forward", 42);
    uint32_t b = ledger_py_table_intern("/srv/train.py", "Model.forward", 43);
    uint32_t c = ledger_py_table_intern("/srv/eval.py", "Model.forward", 42);
    assert_true(a && b && c && a != b && a != c && b != c);
    assert_int_equal(ledger_py_table_intern("/srv/train.py", "Model.forward", 42), a);
    ledger_py_frame_t f;
    assert_int_equal(ledger_py_frame(LEDGER_PY_TAG | a, &f), 1);
    assert_string_equal(f.file, "/srv/train.py");
    assert_string_equal(f.function, "Model.forward");
    assert_int_equal(f.line, 42);
    assert_int_equal(ledger_py_frame(a, &f), 0);                        /* a return address */
    assert_int_equal(ledger_py_frame(LEDGER_PY_TAG | 0xffffff, &f), 0); /* no such frame */
    assert_int_equal(ledger_py_frame(LEDGER_PY_TAG | LEDGER_PY_MARK | 1, &f), 0); /* a mark */
    /* stacks: distinct Python sites stay apart, identical ones intern once */
    uintptr_t s1[] = {0x500010, LEDGER_PY_TAG | a, LEDGER_PY_TAG | LEDGER_PY_MARK | 1};
    uintptr_t s2[] = {0x500010, LEDGER_PY_TAG | b, LEDGER_PY_TAG | LEDGER_PY_MARK | 1};
    uint32_t i1 = ledger_stack_intern(s1, 3), i2 = ledger_stack_intern(s2, 3);
    assert_true(i1 && i2 && i1 != i2);
    assert_int_equal(ledger_stack_intern(s1, 3), i1);
    const uintptr_t *fr;
    int depth = ledger_stack_frames(i2, &fr);
    assert_int_equal(ledger_py_stack_seen(fr, depth), LEDGER_PY_GIL_HELD);
    assert_int_equal(ledger_py_stack_seen(fr, depth - 1), LEDGER_PY_SEEN_NONE);
    assert_string_equal(ledger_py_seen_name(LEDGER_PY_GIL_RELEASED), "gil_released");
    assert_string_equal(ledger_py_seen_name(LEDGER_PY_NOT_VISIBLE), "not_visible");
    assert_null(ledger_py_seen_name(LEDGER_PY_SEEN_NONE));
    assert_null(ledger_py_seen_name(LEDGER_PY_SEEN_COUNT));
    ledger_py_status_t st;
    ledger_py_status(&st);
    assert_true(st.frames >= 3 && st.strings >= 3 && st.bytes > 0);
    check_ledger();
}

enum { THREADS = 4, NAMES = 300 };
static uint32_t got_ids[THREADS][NAMES];

static void *intern_many(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int k = 0; k < NAMES; k++) {
        int i = (k * 7 + t * 101) % NAMES; /* every thread, its own order */
        char file[64], func[64];
        snprintf(file, sizeof file, "/src/mod%d.py", i % 17);
        snprintf(func, sizeof func, "fn_%d", i);
        got_ids[t][i] = ledger_py_table_intern(file, func, (uint32_t)i);
        ledger_py_frame_t f; /* read back while others intern */
        if (!ledger_py_frame(LEDGER_PY_TAG | got_ids[t][i], &f) || strcmp(f.function, func) != 0)
            got_ids[t][i] = 0;
    }
    return NULL;
}

static void test_table_threads(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, intern_many, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int i = 0; i < NAMES; i++) {
        assert_true(got_ids[0][i] != 0);
        for (int t = 1; t < THREADS; t++) assert_int_equal(got_ids[t][i], got_ids[0][i]);
    }
    check_ledger();
}

/* ---- no interpreter -------------------------------------------------------------------------- */

static void test_no_interpreter(void **state)
{
    (void)state;
    ledger_init(&(ledger_config_t){.backtrace_depth = 16, .python_frames = 1});
    ledger_py_status_t st;
    ledger_py_status(&st);
    assert_int_equal(st.found, 0);
    assert_string_equal(st.version, "");
    uint32_t id = ledger_stack_capture(0);
    assert_true(id != 0);
    const uintptr_t *fr;
    int depth = ledger_stack_frames(id, &fr);
    assert_int_equal(ledger_py_stack_seen(fr, depth), LEDGER_PY_SEEN_NONE);
    for (int i = 0; i < depth; i++) assert_false(fr[i] & LEDGER_PY_TAG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_lnotab),    cmocka_unit_test(test_line_310),
        cmocka_unit_test(test_line_locations), cmocka_unit_test(test_merge),
        cmocka_unit_test(test_table),          cmocka_unit_test(test_table_threads),
        cmocka_unit_test(test_no_interpreter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
