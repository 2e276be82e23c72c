/* shim/fork.c — npupool's locks around fork(): one table, one order.
 *
 * Owns: the lock order of the whole library.  A child of fork() has only the forking thread; a
 * lock another thread held at that moment would stay held in the child forever.  So the prepare
 * handler takes every npupool lock, walking the table below forward, and the parent and child
 * handlers release (or re-initialise) them walking it backward.  The same order is the one any
 * code path must follow when it holds two of these locks at once (a lock is taken only after
 * the ones above it); docs/architecture.md repeats it.
 *   1. stack-capture gate   no thread may be inside libunwind at fork (its internal locks), and
 *                           an unwinding thread may wait for the loader lock, held by a thread in
 *                           dlopen() that then needs an npupool lock: so this comes first and
 *                           takes no lock, it waits for captures to drain.
 *   2. devices              shim_devices_lock (pool creation, reset, finalize)
 *   3. report writer        held while a report reads pools and the ledger
 *   4. pools                every device's pool lock
 *   5. ledger               the stack table, then every shard
 *   6. ledger file          the file lock (a leaf under the ledger's locks); the child unmaps
 *                           the parent's file and starts its own at its first allocation
 *   7. trace recorder       its buffer lock
 *   8. forwarded table      foreign.c's lock
 * npupool never holds one of these locks while it calls the runtime, and the runtime never calls
 * npupool, so the runtime's own fork handlers (registered before or after these: torch_npu
 * dlopen()s the runtime after npupool is loaded) never nest with them.
 */
#include <pthread.h>

#include "foreign.h"
#include "ledger.h"
#include "ledger_file.h"
#include "report.h"
#include "shim.h"
#include "trace.h"

typedef struct fork_step {
    const char *what; /* for the reader and a debugger */
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} fork_step_t;

static const fork_step_t fork_order[] = {
    {"stack-capture gate", ledger_stack_fork_gate_close, ledger_stack_fork_gate_open,
     ledger_stack_fork_gate_child},
    {"devices", device_fork_prepare, device_fork_parent, device_fork_child},
    {"report writer", report_fork_prepare, report_fork_parent, report_fork_child},
    {"pools", device_fork_prepare_pools, device_fork_parent_pools, device_fork_child_pools},
    {"ledger", ledger_fork_lock, ledger_fork_unlock, ledger_fork_reinit},
    {"ledger file", ledger_file_fork_prepare, ledger_file_fork_parent, ledger_file_fork_child},
    {"trace recorder", trace_fork_prepare, trace_fork_parent, trace_fork_child},
    {"forwarded table", foreign_fork_prepare, foreign_fork_parent, foreign_fork_child},
};
#define FORK_STEPS (sizeof fork_order / sizeof fork_order[0])

static void fork_prepare(void)
{
    for (size_t i = 0; i < FORK_STEPS; i++) fork_order[i].prepare();
}

static void fork_parent(void)
{
    for (size_t i = FORK_STEPS; i-- > 0;) fork_order[i].parent();
}

static void fork_child(void)
{
    for (size_t i = FORK_STEPS; i-- > 0;) fork_order[i].child();
}

void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }
