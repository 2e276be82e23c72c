/* tests/unit/test_report_symbolize.c — stacks captured by the ledger, symbolized by report/symbolize.c:
 * function names from .symtab (static functions, no -rdynamic), file:line from DWARF, module,
 * offset and build id; the capture depth and `skip`.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ledger.h"
#include "ledger_test_util.h"
#include "symbolize.h"

static _Atomic int line_a, line_b; /* written by every capturing thread */

__attribute__((noipa)) static uint32_t capture_site_a(void)
{
    line_a = __LINE__ + 1;
    uint32_t id = ledger_stack_capture(0);
    __asm__ volatile("" ::: "memory"); /* keep the call from being a tail call */
    return id;
}

__attribute__((noipa)) static uint32_t capture_site_b(void)
{
    line_b = __LINE__ + 1;
    uint32_t id = ledger_stack_capture(0);
    __asm__ volatile("" ::: "memory");
    return id;
}

__attribute__((noipa)) static uint32_t capture_via(int which)
{
    uint32_t id = which ? capture_site_b() : capture_site_a();
    __asm__ volatile("" ::: "memory");
    return id;
}

static void test_capture_and_symbolize(void **state)
{
    (void)state;
    ledger_init(&(ledger_config_t){.backtrace_depth = 16});
    assert_int_equal(ledger_backtrace_depth(), 16);
    uint32_t ids[2];
    volatile int times = 2; /* a real loop: one call site for both captures */
    for (int i = 0; i < times; i++) ids[i] = capture_via(0);
    uint32_t a1 = ids[0], a2 = ids[1], b1 = capture_via(1);
    assert_int_not_equal(a1, 0);
    assert_int_equal(a1, a2); /* same call site: interned once */
    assert_int_not_equal(a1, b1);
    const uintptr_t *fr;
    int depth = ledger_stack_frames(a1, &fr);
    assert_true(depth >= 3 && depth <= 16);
    symbolizer_t *sym = symbolize_open(1);
    assert_non_null(sym);
    symbolize_frame_t f0, f1;
    symbolize_lookup(sym, fr[0], &f0);
    symbolize_lookup(sym, fr[1], &f1);
    print_message("# frame0 %s %s:%d module %s +%#lx build-id %s\n", f0.function, f0.file, f0.line,
                  f0.module, (unsigned long)f0.offset, f0.build_id ? f0.build_id : "-");
    assert_non_null(f0.function);
    assert_string_equal(f0.function, "capture_site_a"); /* static, no -rdynamic: from .symtab */
    assert_string_equal(f1.function, "capture_via");
    assert_non_null(f0.module);
    assert_non_null(strstr(f0.module, "test_report_symbolize"));
    assert_non_null(f0.build_id);
    assert_true(strlen(f0.build_id) >= 16);
    if (symbolize_have_libdw()) {
        assert_non_null(f0.file);
        assert_non_null(strstr(f0.file, "test_report_symbolize.c"));
        assert_int_equal(f0.line, line_a);
    }
    /* The module-relative offset is the call site: module base + offset + 1 == the return address. */
    symbolize_frame_t again;
    symbolize_lookup(sym, fr[0], &again);
    assert_int_equal(again.offset, f0.offset);
    symbolize_close(sym);
    /* Names off: module/offset/build id only. */
    sym = symbolize_open(0);
    symbolize_lookup(sym, fr[0], &f0);
    assert_null(f0.function);
    assert_null(f0.file);
    assert_non_null(f0.module);
    symbolize_close(sym);
    (void)line_b;
    /* Depth is honoured, and 0 turns capture off. */
    ledger_init(&(ledger_config_t){.backtrace_depth = 2});
    uint32_t shallow = capture_via(0);
    assert_int_equal(ledger_stack_frames(shallow, &fr), 2);
    ledger_init(&(ledger_config_t){.backtrace_depth = 0});
    assert_int_equal(capture_via(0), 0);
    ledger_init(&(ledger_config_t){.backtrace_depth = 16});
    check_ledger();
}

__attribute__((noipa)) static uint32_t capture_skip(int skip)
{
    uint32_t id = ledger_stack_capture(skip);
    __asm__ volatile("" ::: "memory");
    return id;
}

__attribute__((noipa)) static void pair_captures(uint32_t *plain, uint32_t *skipped)
{
    *plain = capture_skip(0);
    *skipped = capture_skip(1);
    __asm__ volatile("" ::: "memory");
}

/* skip=1 drops capture_skip's frame: the stack starts in pair_captures and shares the rest. */
static void test_skip(void **state)
{
    (void)state;
    ledger_init(&(ledger_config_t){.backtrace_depth = 16});
    uint32_t a, b;
    pair_captures(&a, &b);
    const uintptr_t *fa, *fb;
    int na = ledger_stack_frames(a, &fa), nb = ledger_stack_frames(b, &fb);
    assert_true(na >= 3 && nb >= 2);
    assert_int_equal(nb, na - 1);
    assert_memory_equal(fb + 1, fa + 2, (size_t)(nb - 1) * sizeof *fb);
    symbolizer_t *sym = symbolize_open(1);
    symbolize_frame_t f;
    symbolize_lookup(sym, fb[0], &f);
    assert_non_null(f.function);
    assert_string_equal(f.function, "pair_captures");
    symbolize_lookup(sym, fa[0], &f);
    assert_string_equal(f.function, "capture_skip");
    symbolize_close(sym);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_capture_and_symbolize, setup_empty_ledger),
        cmocka_unit_test_setup(test_skip, setup_empty_ledger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
