/* shim/current.c — each thread's current device (see current.h for the contract).
 * Invariant: current_mine.device >= 0 only if the runtime answered that device to this thread
 * after its last observed call, and no other call of this thread that could change it has run
 * since (every such call is hooked and ends in current_observed); it is used only while no
 * invalidation happened since the runtime last said so (current_mine.epoch == current_epoch).
 * The epoch is read before the runtime is asked, so an invalidation racing with the question
 * leaves the answer stale, never the other way round.
 */
#include "current.h"

#include "options.h"
#include "real.h"

__thread current_t current_mine __attribute__((tls_model("initial-exec"))) = {-1, 0};
uint32_t current_epoch;

/* The runtime's aclrtGetDevice. */
static aclError ask_runtime(int32_t *device)
{
    return REAL(aclrtGetDevice) ? REAL(aclrtGetDevice)(device) : ACL_ERROR_UNINITIALIZE;
}

aclError current_device_slow(int32_t *device)
{
    uint32_t epoch = __atomic_load_n(&current_epoch, __ATOMIC_ACQUIRE);
    int32_t d = -1;
    aclError rc = ask_runtime(&d);
    current_t *c = &current_mine;
    if (rc == ACL_SUCCESS && c->device >= 0 && d == c->device)
        c->epoch = epoch; /* confirmed: known again */
    else
        c->device = -1; /* another answer, or none: ask until the next observed call */
    if (rc == ACL_SUCCESS) *device = d;
    return rc;
}

void current_observed(void)
{
    current_t *c = &current_mine;
    c->device = -1;
    if (!npupool_config.device_cache) return;
    uint32_t epoch = __atomic_load_n(&current_epoch, __ATOMIC_ACQUIRE);
    int32_t d = -1;
    if (ask_runtime(&d) == ACL_SUCCESS && d >= 0) {
        c->device = d;
        c->epoch = epoch;
    }
}

void current_invalidate_all(void) { __atomic_add_fetch(&current_epoch, 1, __ATOMIC_RELEASE); }
