/* shim/init.c — start-up and shut-down of the preload library.
 *
 * Owns: the one-time initialisation (shim_ensure_init: shim.h's inline check, then
 * shim_init_slow) and the exit hook.
 * Nothing before the first ACL call: the library has no constructor.  A process that inherits
 * LD_PRELOAD and never calls ACL (a launcher, a shell, a compiler, setpriv) gets no thread, no
 * descriptor, no signal handler, no fork handler, no file and no line from npupool.  Every hook
 * calls shim_ensure_init() first.  It has two phases:
 *   1. options, the pins' fence (pin_init) and fork handlers (a pthread_once; the pools'
 *      thread caches set up theirs here too, in pool mode): parsing the environment takes no
 *      lock anybody else holds, and pthread_atfork only glibc's fork-handler lock, which a fork
 *      holds only while it runs the handlers already registered (never ours yet), so every
 *      thread may wait for this phase.  The fork handlers must be in place before any thread can
 *      hold an npupool lock: a fork() racing with start-up would copy a held pool lock into the
 *      child;
 *   2. the observers: the ledger (which dlopen()s libunwind: the loader lock) and its file,
 *      the trace file, the reports (their thread and signal handler when configured), the
 *      fatal-signal line when the ledger is in a file (crash.c).  The first
 *      thread runs it; a thread that finds it running does NOT wait and goes on (its allocation is
 *      served and recorded, without a stack until libunwind is in).  Waiting could deadlock: the
 *      thread running phase 2 may be waiting for the loader lock, held by a thread inside
 *      dlopen() whose library constructor is the one calling ACL.
 * The exit hook does something only in a process whose phase 2 completed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "observe.h"
#include "options.h"
#include "pin.h"
#include "pool.h"
#include "real.h"
#include "shim.h"

static pthread_once_t options_once = PTHREAD_ONCE_INIT;
static int observers_state; /* 0 not started, 1 starting, 2 running (atomic) */
int shim_ready;             /* 1 once phase 2 completed, or npupool is disabled (atomic) */

static void log_option(void *ctx, const char *name, const char *value)
{
    (void)ctx;
    log_info("option %s=%s", name, value);
}

static void options_phase(void)
{
    options_init();
    if (npupool_config.disable) {
        log_info("NPUPOOL_DISABLE=1: pass-through only");
        __atomic_store_n(&shim_ready, 1, __ATOMIC_RELEASE);
        return;
    }
    if (log_level_threshold >= LOG_INFO) options_for_each(log_option, NULL);
    /* Before any pin (pin.h): the fence of the pinning threads is chosen once. */
    int asym = pin_init();
    log_info("pins: %s", asym ? "membarrier (no fence on the allocation path)"
                              : "sequentially consistent stores (membarrier not available)");
    fork_register();
    /* the pools' thread caches: set up now, before the program's threads make their first ones
     * (a fork during that set-up would leave it half done in the child), and their fork
     * handlers registered after the shim's, so that their prepare handler runs first */
    if (npupool_config.mode == NPUPOOL_MODE_POOL) pool_threads_prepare();
}

static void observers_phase(void)
{
    real_dlsym(); /* find glibc's dlsym before anybody asks */
    observe_init();
    crash_install();
}

void shim_init_slow(void)
{
    pthread_once(&options_once, options_phase);
    if (__atomic_load_n(&observers_state, __ATOMIC_ACQUIRE) == 2 || npupool_config.disable) return;
    int expected = 0;
    if (__atomic_compare_exchange_n(&observers_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        observers_phase();
        __atomic_store_n(&observers_state, 2, __ATOMIC_RELEASE);
        __atomic_store_n(&shim_ready, 1, __ATOMIC_RELEASE);
    }
    /* else another thread is starting the observers: go on without waiting (see above) */
}

__attribute__((destructor)) static void npupool_destructor(void)
{
    if (__atomic_load_n(&observers_state, __ATOMIC_ACQUIRE) == 2) observe_at_exit();
}
