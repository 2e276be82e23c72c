/* tests/fakeacl/fa_device.c — devices, threads and the runtime's lifetime: aclInit / aclFinalize,
 * aclrtSetDevice / GetDevice / ResetDevice / GetDeviceCount / SynchronizeDevice.
 *
 * Owns: the per-thread current device (thread-local, -1 = none; a new thread has none, as with
 * CANN, so device-memory calls there return 107002 until it sets one).
 *
 * Lifetime, as CANN's acl does it: aclInit twice -> 100002 (ACL_ERROR_REPEAT_INITIALIZE);
 * aclFinalize when not initialized (twice, or before any aclInit) -> 100037
 * (ACL_ERROR_REPEAT_FINALIZE).  The config path is not read.  Runtime calls do not require
 * aclInit (a guess that keeps test programs simple), and aclFinalize does not release device
 * memory: that is aclrtResetDevice's job (and the process exit's).
 *
 * aclrtResetDevice(d) releases every block and physical handle of d (charged bytes return to the
 * budget; mappings of its handles become PROT_NONE reserved space again) and clears the calling
 * thread's current device if it was d; other threads keep d as current and may allocate again.
 * Locking: fa_g.lock around the shared state; the current device needs none.
 */
#include "fa_internal.h"

static __thread int fa_cur_dev = -1; /* this thread's current device, -1 = none */

int fa_current_device(void) { return fa_cur_dev; }

int fa_device_valid(int32_t dev)
{
    /* fa_g.ndev is written once, in fa_init, before any caller can get here */
    return dev >= 0 && dev < fa_g.ndev;
}

aclError aclInit(const char *configPath)
{
    (void)configPath;
    fa_init();
    fa_count(FA_C_aclInit);
    fa_lock();
    int was = fa_g.initialized;
    fa_g.initialized = 1;
    fa_unlock();
    return was ? FA_ERROR_REPEAT_INITIALIZE : ACL_SUCCESS;
}

aclError aclFinalize(void)
{
    fa_init();
    fa_count(FA_C_aclFinalize);
    fa_lock();
    int was = fa_g.initialized;
    fa_g.initialized = 0;
    fa_unlock();
    return was ? ACL_SUCCESS : FA_ERROR_REPEAT_FINALIZE;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    fa_init();
    fa_count(FA_C_aclrtSetDevice);
    if (!fa_device_valid(deviceId)) return ACL_ERROR_RT_INVALID_DEVICEID;
    fa_cur_dev = deviceId;
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    fa_init();
    fa_count(FA_C_aclrtGetDevice);
    if (deviceId == NULL) return ACL_ERROR_INVALID_PARAM;
    if (fa_cur_dev < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    *deviceId = fa_cur_dev;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    fa_init();
    fa_count(FA_C_aclrtGetDeviceCount);
    if (count == NULL) return ACL_ERROR_INVALID_PARAM;
    *count = (uint32_t)fa_g.ndev;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    fa_init();
    fa_count(FA_C_aclrtResetDevice);
    if (!fa_device_valid(deviceId)) return ACL_ERROR_RT_INVALID_DEVICEID;
    fa_lock();
    fa_release_device_blocks_locked(deviceId);
    fa_release_device_handles_locked(deviceId);
    fa_unlock();
    if (fa_cur_dev == deviceId) fa_cur_dev = -1;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void)
{
    fa_init();
    fa_count(FA_C_aclrtSynchronizeDevice);
    if (fa_cur_dev < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    fa_count(FA_C_sync);
    return ACL_SUCCESS;
}
