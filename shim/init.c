/* shim/init.c — start-up and shut-down of the preload library.
 *
 * Owns: the one-time initialisation (shim_ensure_init), fork handlers and the exit hook.
 * Initialisation may be reached before the constructor runs (another library's constructor
 * calling aclrtMalloc or dlsym), so every hook calls shim_ensure_init(); it is a pthread_once and
 * never calls back into a hook.  Fork handlers take every npupool lock, in the order shim.h
 * states, so a child never inherits a lock held by a thread that no longer exists.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "foreign.h"
#include "log.h"
#include "observe.h"
#include "options.h"
#include "real.h"
#include "shim.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* One handler set, registered at start-up, taking every npupool lock in the one global order
 * (shim.h).  The runtime's own fork handler may run before or after ours: npupool never holds a
 * lock while it calls the runtime, and the runtime never calls npupool, so the two never nest. */
static void atfork_prepare(void)
{
    observe_atfork_prepare_capture(); /* first: no thread may be inside libunwind at fork */
    device_atfork_prepare();
    observe_atfork_prepare_reports();
    device_atfork_prepare_pools();
    observe_atfork_prepare();
    foreign_atfork_prepare();
}

static void atfork_parent(void)
{
    foreign_atfork_parent();
    observe_atfork_parent();
    device_atfork_parent_pools();
    observe_atfork_parent_reports();
    device_atfork_parent();
}

static void atfork_child(void)
{
    foreign_atfork_child();
    observe_atfork_child();
    device_atfork_child_pools();
    observe_atfork_child_reports();
    device_atfork_child();
}

static void init_once_body(void)
{
    options_init();
    if (npupool_opt.disable) {
        log_info("NPUPOOL_DISABLE=1: pass-through only");
        return;
    }
    options_log_effective();
    real_dlsym(); /* find glibc's dlsym before anybody asks */
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    observe_init();
}

void shim_ensure_init(void) { pthread_once(&init_once, init_once_body); }

__attribute__((constructor)) static void npupool_constructor(void) { shim_ensure_init(); }

__attribute__((destructor)) static void npupool_destructor(void)
{
    if (!npupool_opt.disable) observe_at_exit();
}
