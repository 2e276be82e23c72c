/* shim/current.h — the device the calling thread's allocations go to, known without asking the
 * runtime on every allocation.
 *
 * Owns: each thread's known device and the process-wide epoch that invalidates them.
 * A thread's current device changes only through runtime calls: aclrtSetDevice, and the context
 * calls (aclrtCreateContext binds the new context, aclrtSetCurrentContext binds one, whose device
 * becomes the thread's; aclrtDestroyContext unbinds it from every thread bound to it), and a
 * device reset or aclFinalize ends contexts.  The shim hooks all of them (entry.c); after each
 * one, successful or not, the calling thread asks the runtime once (aclrtGetDevice) and keeps
 * the answer (current_observed): the device is then the runtime's own answer, however the
 * context was made (a context made by other means than aclrtCreateContext, e.g. by a library
 * calling the layer below ACL, is handled the same way once the thread binds it with an observed
 * call).  Calls that may change OTHER threads' devices (aclrtResetDevice, aclrtDestroyContext,
 * aclFinalize, and a fork child) bump the epoch: every thread's known device is stale until the
 * runtime confirms it (current_device asks once more, and keeps the answer only if it is the
 * known device).
 * Never a guess: a thread that made no observed call, or whose device the runtime answered
 * otherwise than known, asks the runtime on every allocation until its next observed call, as
 * does every thread with NPUPOOL_DEVICE_CACHE=0.  What stays out of sight: a library that
 * switches the thread's device below ACL (rtSetDevice, rtCtxSetCurrent) after an observed call,
 * and an ACL device call the shim does not define (a runtime's other variants, e.g. a forced
 * reset); NPUPOOL_DEVICE_CACHE=0 covers those cases (docs/architecture.md, README "Limits").
 * The epoch is 32 bits: a thread's known device would be trusted wrongly only if exactly 2^32
 * invalidations happened between two of its allocations.
 * Threads: current_mine is written by its own thread only; current_epoch is the only shared
 * word (an atomic increment by invalidators, loads by everyone).  Fork: the child's one thread
 * keeps its current_mine, and device_fork_child bumps the epoch, so it confirms it once.
 * Cost: one thread-local load and one relaxed load of the (read-mostly) epoch per allocation.
 */
#ifndef NPUPOOL_SHIM_CURRENT_H
#define NPUPOOL_SHIM_CURRENT_H

#include <stdint.h>

#include "acl/acl.h"

typedef struct current {
    int32_t device; /* known device (>= 0), or -1: ask the runtime */
    uint32_t epoch; /* current_epoch when it was last known true */
} current_t;

extern __thread current_t current_mine __attribute__((tls_model("initial-exec")));
extern uint32_t current_epoch; /* bumped by current_invalidate_all (atomic) */

/* The runtime's answer for this thread when the known device is stale or unknown. */
aclError current_device_slow(int32_t *device);

/* The calling thread's current device: ACL_SUCCESS and *device, or the runtime's error (then
 * *device is untouched). */
static inline aclError current_device(int32_t *device)
{
    current_t c = current_mine;
    if (__builtin_expect(
            c.device >= 0 && c.epoch == __atomic_load_n(&current_epoch, __ATOMIC_RELAXED), 1)) {
        *device = c.device;
        return ACL_SUCCESS;
    }
    return current_device_slow(device);
}

/* After an observed call on this thread that may have changed its device: ask the runtime once
 * and keep its answer (nothing when NPUPOOL_DEVICE_CACHE=0). */
void current_observed(void);

/* After a call that may have changed other threads' devices (a reset, a destroyed context,
 * aclFinalize, a fork child): every thread confirms its device with the runtime once. */
void current_invalidate_all(void);

#endif /* NPUPOOL_SHIM_CURRENT_H */
