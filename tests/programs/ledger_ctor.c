/* tests/programs/ledger_ctor.c — a library that unwinds (and allocates device memory) from its
 * constructor and destructor, i.e. while the dynamic loader's lock is held by dlopen/dlclose.
 *
 * Used by tests/unit/test_ledger_dlopen.c (which exports ledger_stack_capture) and by
 * tests/programs/dlopen_stress.c under the shim (aclrtMalloc/aclrtFree resolve to the shim's).
 * Both references are weak: whatever the loading program provides is exercised.
 */
#include <stddef.h>
#include <stdint.h>

extern uint32_t ledger_stack_capture(int skip) __attribute__((weak));
extern int aclrtMalloc(void **ptr, size_t size, int policy) __attribute__((weak));
extern int aclrtFree(void *ptr) __attribute__((weak));

_Atomic uint32_t ledger_ctor_last_stack; /* keeps the captures observable */

__attribute__((noipa)) static void exercise(void)
{
    for (int i = 0; i < 20; i++) {
        if (ledger_stack_capture) ledger_ctor_last_stack = ledger_stack_capture(0);
        if (aclrtMalloc && aclrtFree) {
            void *p = NULL;
            if (aclrtMalloc(&p, 4096 + (size_t)i * 64, 0) == 0) aclrtFree(p);
        }
    }
}

__attribute__((constructor)) static void on_load(void) { exercise(); }
__attribute__((destructor)) static void on_unload(void) { exercise(); }

/* Called by the loading program between dlopen and dlclose. */
int ledger_ctor_work(void)
{
    exercise();
    return (int)ledger_ctor_last_stack;
}
