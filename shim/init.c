/* shim/init.c — start-up and shut-down of the preload library.
 *
 * Owns: the one-time initialisation (shim_ensure_init) and the exit hook.
 * Nothing before the first ACL call: the library has no constructor.  A process that inherits
 * LD_PRELOAD and never calls ACL (a launcher, a shell, a compiler, setpriv) gets no thread, no
 * descriptor, no signal handler, no fork handler, no file and no line from npupool.  Every hook
 * calls shim_ensure_init() first (a pthread_once that never calls back into a hook); it parses
 * the options and starts the ledger, the reports (and their thread and signal handler, when
 * configured), the trace and the fork handlers.  The exit hook does something only in a process
 * that was initialised.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "observe.h"
#include "options.h"
#include "real.h"
#include "shim.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int initialized; /* 1 once the observers run (atomic) */

static void log_option(void *ctx, const char *name, const char *value)
{
    (void)ctx;
    log_info("option %s=%s", name, value);
}

static void init_once_body(void)
{
    options_init();
    if (npupool_config.disable) {
        log_info("NPUPOOL_DISABLE=1: pass-through only");
        return;
    }
    if (log_level_threshold >= LOG_INFO) options_for_each(log_option, NULL);
    real_dlsym(); /* find glibc's dlsym before anybody asks */
    fork_register();
    observe_init();
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
}

void shim_ensure_init(void) { pthread_once(&init_once, init_once_body); }

__attribute__((destructor)) static void npupool_destructor(void)
{
    if (__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) observe_at_exit();
}
