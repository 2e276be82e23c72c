/* ledger/ledger_internal.h — what the files of ledger/ share with each other (never used outside).
 *
 * Owns: the stack table's (stack.c) share of ledger_memory(), ledger_check() and the fork
 * handlers, called by ledger.c.  All hidden: the preload library never exports them.
 */
#ifndef NPUPOOL_LEDGER_INTERNAL_H
#define NPUPOOL_LEDGER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define LEDGER_HIDDEN __attribute__((visibility("hidden")))

/* The stack table's share of ledger_memory(), ledger_check() and the fork handlers (stack.c). */
/* Capture on (depth > 0) or off; opens libunwind at the first call with depth > 0. */
LEDGER_HIDDEN void ledger_stack_init(int backtrace_depth);
LEDGER_HIDDEN void ledger_stack_memory(size_t *stacks, size_t *bytes, uint64_t *dropped);
LEDGER_HIDDEN int ledger_stack_check(char *why, size_t why_len);
LEDGER_HIDDEN void ledger_stack_fork_lock(void);
LEDGER_HIDDEN void ledger_stack_fork_unlock(void);
LEDGER_HIDDEN void ledger_stack_fork_reinit(void);

/* The unwinder (ledger_unwind.c). */
/* Load libunwind once (privately, with its descriptor guard).  1 when backtraces can be taken. */
LEDGER_HIDDEN int ledger_unwind_load(void);
LEDGER_HIDDEN int ledger_unwind_ready(void); /* 1 once loaded */
/* Return addresses of the caller's stack into buf (buf[0] is inside this function, buf[1] in its
 * caller, as unw_backtrace); at most want.  -1 when no stack can be taken now (not loaded, or no
 * host memory for a new thread's unwinder state: counted, said once). */
LEDGER_HIDDEN int ledger_unwind_backtrace(void **buf, int want);
LEDGER_HIDDEN uint64_t ledger_unwind_skipped(void); /* captures skipped for lack of memory */

#endif
