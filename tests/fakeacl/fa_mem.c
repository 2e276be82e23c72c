/* tests/fakeacl/fa_mem.c — device memory of the fake runtime: the aclrtMalloc family, aclrtFree,
 * host memory, aclrtMemcpy / aclrtMemset and aclrtGetMemInfo, plus the HBM charging rules.
 *
 * Owns: fa_g.blocks (device blocks) and fa_g.hosts (aclrtMallocHost areas), and per-device
 * `charged` / `live` for blocks.
 *
 * A device block is its own anonymous mmap (PROT_READ|PROT_WRITE, MAP_NORESERVE) of the block
 * rounded up to the host page, so a 51 GiB block costs nothing until touched and its address is
 * page (hence 64-byte) aligned.  Block bytes, as CANN counts them:
 *     aclrtMalloc / aclrtMallocCached / aclrtMallocWithCfg   ALIGN_UP(size, 32) + 32
 *     aclrtMallocAlign32                                      ALIGN_UP(size, 32)
 * and the HBM charge by the policy's low byte:
 *     HUGE_FIRST(_P2P)   block > 1 MiB: 2 MiB units; else normal pages
 *     HUGE_ONLY(_P2P)    2 MiB units
 *     NORMAL_ONLY(_P2P)  normal pages (4 KiB: a guess, CANN does not document the normal page)
 *     HUGE1G_ONLY(_P2P)  1 GiB units
 * other low bytes -> 100000; the flag bits above the low byte are ignored.
 *
 * Check order of every allocation: NULL out-pointer / size 0 -> 100000, bad policy -> 100000,
 * device (cfg id -> 107001, no current device -> 107002), then fa_charge_locked(): fault
 * injection, then the budget -> 207001.  A refused call leaves *devPtr unchanged.
 * aclrtFree needs no current device (the block names its device); an unknown or interior
 * pointer -> 207002 and nothing changes.  aclrtFree does not synchronize; aclrtFreeWithDevSync
 * counts one synchronization (`sync`, not the aclrtSynchronizeDevice entry counter), then frees.
 * aclrtGetMemInfo: HBM attributes (1, 4, 5, 8-17) report the current device's budget as total
 * and budget - charged as free; DDR attributes (0, 2, 3, 6, 7) report 0 and 0 (the fake models
 * an HBM-only device); attr > 17 -> 100000.
 * Locking: fa_g.lock around tables and budgets; mmap/munmap of blocks happen under it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fa_internal.h"

#define FA_MAX_REQUEST ((size_t)1 << 62) /* larger requests are refused as out of memory */

static int policy_is_valid(unsigned policy)
{
    return (policy & 0xffu) <= ACL_MEM_MALLOC_HUGE1G_ONLY_P2P;
}

static size_t charge_of(size_t block, unsigned policy)
{
    switch (policy & 0xffu) {
    case ACL_MEM_MALLOC_HUGE_FIRST:
    case ACL_MEM_MALLOC_HUGE_FIRST_P2P:
        return block > FA_HUGE_FIRST_LIMIT ? ACL_ALIGN_UP(block, FA_HUGE_PAGE)
                                           : ACL_ALIGN_UP(block, FA_NORMAL_PAGE);
    case ACL_MEM_MALLOC_HUGE_ONLY:
    case ACL_MEM_MALLOC_HUGE_ONLY_P2P: return ACL_ALIGN_UP(block, FA_HUGE_PAGE);
    case ACL_MEM_MALLOC_NORMAL_ONLY:
    case ACL_MEM_MALLOC_NORMAL_ONLY_P2P: return ACL_ALIGN_UP(block, FA_NORMAL_PAGE);
    default: /* HUGE1G_ONLY(_P2P); callers checked policy_is_valid */
        return ACL_ALIGN_UP(block, FA_HUGE1G_PAGE);
    }
}

aclError fa_charge_locked(int dev, size_t block, size_t charge)
{
    int injected = 0;
    if (fa_g.fail_countdown != 0 && --fa_g.fail_countdown == 0)
        injected = 1;
    else if (fa_g.fail_above != 0 && block > fa_g.fail_above)
        injected = 1;
    struct fa_dev *d = &fa_g.dev[dev];
    size_t avail = d->budget > d->charged ? d->budget - d->charged : 0;
    if (injected || charge > avail) {
        fa_count(FA_C_alloc_failures);
        if (injected) fa_count(FA_C_injected_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    d->charged += charge;
    if (d->charged > d->peak) d->peak = d->charged;
    d->live++;
    return ACL_SUCCESS;
}

void fa_uncharge_locked(int dev, size_t charge)
{
    struct fa_dev *d = &fa_g.dev[dev];
    d->charged -= charge;
    d->live--;
}

/* pre: fa_g.lock held, r unlinked from fa_g.blocks.  Gives everything back and frees r. */
static void block_release_locked(struct fa_rec *r)
{
    if (munmap((void *)r->key, r->maplen) != 0)
        fa_err("munmap(%p, %zu) of a device block failed", (void *)r->key, r->maplen);
    fa_uncharge_locked(r->dev, r->charged);
    fa_rec_free(r);
}

static aclError block_alloc(void **devPtr, size_t size, unsigned policy, int padded, int cfg_dev)
{
    if (devPtr == NULL || size == 0 || !policy_is_valid(policy)) return ACL_ERROR_INVALID_PARAM;
    int dev = cfg_dev >= 0 ? cfg_dev : fa_current_device();
    if (dev < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    if (size > FA_MAX_REQUEST) {
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    size_t block = padded ? ACL_PADDED_SIZE(size) : ACL_ALIGN32_SIZE(size);
    size_t charge = charge_of(block, policy);
    struct fa_rec *r = fa_rec_new();
    if (r == NULL) {
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }

    fa_lock();
    aclError rc = fa_charge_locked(dev, block, charge);
    if (rc != ACL_SUCCESS) {
        fa_unlock();
        fa_rec_free(r);
        return rc;
    }
    size_t maplen = ACL_ALIGN_UP(block, fa_g.page);
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fa_uncharge_locked(dev, charge);
        fa_unlock();
        fa_rec_free(r);
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    r->key = (uintptr_t)p;
    r->size = block;
    r->maplen = maplen;
    r->charged = charge;
    r->dev = dev;
    r->fd = -1;
    if (fa_table_insert(&fa_g.blocks, r) != 0) {
        block_release_locked(r);
        fa_unlock();
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    fa_unlock();
    fa_count(FA_C_device_allocs);
    fa_count_n(FA_C_bytes_charged, charge);
    *devPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    fa_init();
    fa_count(FA_C_aclrtMalloc);
    return block_alloc(devPtr, size, (unsigned)policy, 1, -1);
}

aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    fa_init();
    fa_count(FA_C_aclrtMallocCached);
    return block_alloc(devPtr, size, (unsigned)policy, 1, -1);
}

aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    fa_init();
    fa_count(FA_C_aclrtMallocAlign32);
    return block_alloc(devPtr, size, (unsigned)policy, 0, -1);
}

aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy,
                            aclrtMallocConfig *cfg)
{
    fa_init();
    fa_count(FA_C_aclrtMallocWithCfg);
    if (devPtr == NULL || size == 0 || !policy_is_valid((unsigned)policy))
        return ACL_ERROR_INVALID_PARAM;
    int dev = -1;
    if (cfg != NULL) {
        if (cfg->numAttrs != 0 && cfg->attrs == NULL) return ACL_ERROR_INVALID_PARAM;
        for (size_t i = 0; i < cfg->numAttrs; i++) {
            const aclrtMallocAttribute *a = &cfg->attrs[i];
            switch (a->attr) {
            case ACL_RT_MEM_ATTR_DEVICE_ID:
                if (a->value.deviceId >= (uint32_t)fa_g.ndev) return ACL_ERROR_RT_INVALID_DEVICEID;
                dev = (int)a->value.deviceId;
                break;
            case ACL_RT_MEM_ATTR_RSV:
            case ACL_RT_MEM_ATTR_MODULE_ID:
            case ACL_RT_MEM_ATTR_VA_FLAG: break;
            default: return ACL_ERROR_INVALID_PARAM;
            }
        }
    }
    return block_alloc(devPtr, size, (unsigned)policy, 1, dev);
}

static aclError block_free(void *devPtr)
{
    fa_lock();
    struct fa_rec *r = fa_table_remove(&fa_g.blocks, (uintptr_t)devPtr);
    if (r == NULL) {
        fa_unlock();
        return ACL_ERROR_RT_MEMORY_FREE;
    }
    block_release_locked(r);
    fa_unlock();
    fa_count(FA_C_device_frees);
    return ACL_SUCCESS;
}

aclError aclrtFree(void *devPtr)
{
    fa_init();
    fa_count(FA_C_aclrtFree);
    if (devPtr == NULL) return ACL_ERROR_INVALID_PARAM;
    return block_free(devPtr);
}

aclError aclrtFreeWithDevSync(void *devPtr)
{
    fa_init();
    fa_count(FA_C_aclrtFreeWithDevSync);
    if (devPtr == NULL) return ACL_ERROR_INVALID_PARAM;
    if (fa_current_device() < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    fa_count(FA_C_sync); /* the device synchronization comes first, as in CANN */
    return block_free(devPtr);
}

static int release_if_dev(struct fa_rec *r, void *ctx)
{
    if (r->dev != *(const int *)ctx) return 0;
    if (munmap((void *)r->key, r->maplen) != 0)
        fa_err("munmap(%p, %zu) of a device block failed", (void *)r->key, r->maplen);
    fa_uncharge_locked(r->dev, r->charged);
    fa_count(FA_C_reset_released);
    fa_rec_free(r);
    return 1;
}

void fa_release_device_blocks_locked(int dev) { fa_table_walk(&fa_g.blocks, release_if_dev, &dev); }

/* ---- host memory ---------------------------------------------------------------------------------- */
aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    fa_init();
    fa_count(FA_C_aclrtMallocHost);
    if (hostPtr == NULL || size == 0) return ACL_ERROR_INVALID_PARAM;
    struct fa_rec *r = fa_rec_new();
    void *p = NULL;
    if (r == NULL || posix_memalign(&p, 64, size) != 0) {
        fa_rec_free(r);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    r->key = (uintptr_t)p;
    r->size = size;
    r->dev = -1;
    r->fd = -1;
    fa_lock();
    int ok = fa_table_insert(&fa_g.hosts, r) == 0;
    fa_unlock();
    if (!ok) {
        free(p);
        fa_rec_free(r);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    fa_count(FA_C_host_allocs);
    *hostPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void *hostPtr)
{
    fa_init();
    fa_count(FA_C_aclrtFreeHost);
    if (hostPtr == NULL) return ACL_ERROR_INVALID_PARAM;
    fa_lock();
    struct fa_rec *r = fa_table_remove(&fa_g.hosts, (uintptr_t)hostPtr);
    fa_unlock();
    if (r == NULL) return ACL_ERROR_RT_MEMORY_FREE;
    free((void *)r->key);
    fa_rec_free(r);
    fa_count(FA_C_host_frees);
    return ACL_SUCCESS;
}

/* ---- copies --------------------------------------------------------------------------------------- */
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    fa_init();
    fa_count(FA_C_aclrtMemcpy);
    if (dst == NULL || src == NULL || count > destMax || (unsigned)kind > ACL_MEMCPY_DEFAULT)
        return ACL_ERROR_INVALID_PARAM;
    if (fa_current_device() < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    memmove(dst, src, count);
    return ACL_SUCCESS;
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    fa_init();
    fa_count(FA_C_aclrtMemset);
    if (devPtr == NULL || count > maxCount) return ACL_ERROR_INVALID_PARAM;
    if (fa_current_device() < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    memset(devPtr, (unsigned char)value, count);
    return ACL_SUCCESS;
}

/* ---- memory information --------------------------------------------------------------------------- */
static int attr_is_ddr(unsigned attr)
{
    return attr == ACL_DDR_MEM || attr == ACL_DDR_MEM_HUGE || attr == ACL_DDR_MEM_NORMAL ||
           attr == ACL_DDR_MEM_P2P_HUGE || attr == ACL_DDR_MEM_P2P_NORMAL;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_bytes, size_t *total_bytes)
{
    fa_init();
    fa_count(FA_C_aclrtGetMemInfo);
    if (free_bytes == NULL || total_bytes == NULL || (unsigned)attr > ACL_MEM_P2P_HUGE1G)
        return ACL_ERROR_INVALID_PARAM;
    int dev = fa_current_device();
    if (dev < 0) return ACL_ERROR_RT_CONTEXT_NULL;
    if (attr_is_ddr((unsigned)attr)) {
        *free_bytes = 0;
        *total_bytes = 0;
        return ACL_SUCCESS;
    }
    fa_lock();
    const struct fa_dev *d = &fa_g.dev[dev];
    size_t total = d->budget;
    size_t avail = d->budget > d->charged ? d->budget - d->charged : 0;
    fa_unlock();
    *free_bytes = avail;
    *total_bytes = total;
    return ACL_SUCCESS;
}
