/* shim/init.c — start-up and shut-down of the preload library.
 *
 * Owns: the one-time initialisation (shim_ensure_init), fork handlers and the exit hook.
 * Initialisation may be reached before the constructor runs (another library's constructor
 * calling aclrtMalloc or dlsym), so every hook calls shim_ensure_init(); it is a pthread_once and
 * never calls back into a hook.  Fork handlers take every npupool lock (devices and pools,
 * foreign map, observers) so a child never inherits a lock held by a thread that no longer
 * exists; see shim_register_device_atfork for why the device handlers are registered late.
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

static void atfork_prepare(void)
{
    observe_atfork_prepare();
    foreign_atfork_prepare();
}

static void atfork_parent(void)
{
    foreign_atfork_parent();
    observe_atfork_parent();
}

static void atfork_child(void)
{
    foreign_atfork_child();
    observe_atfork_child();
}

/* The device handlers lock shim_devices_lock, which is held across runtime calls (reservation,
 * reset).  The runtime may take its own lock in its fork handler, so ours must run BEFORE it, and
 * prepare handlers run in reverse order of registration: register only once the runtime is
 * loaded and about to be used (the first reservation), i.e. after the runtime registered its own,
 * even when the program dlopen()s libascendcl.so long after npupool was loaded. */
static pthread_once_t device_atfork_once = PTHREAD_ONCE_INIT;
static void register_device_atfork(void)
{
    pthread_atfork(device_atfork_prepare, device_atfork_parent, device_atfork_child);
}
void shim_register_device_atfork(void) { pthread_once(&device_atfork_once, register_device_atfork); }

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
