/* tests/fakeacl/fa_vmm.c — the virtual-memory API of the fake runtime (what torch_npu's
 * expandable segments use): reserve / release address ranges, allocate / free physical memory,
 * map / unmap, allocation granularity.
 *
 * Owns: fa_g.resvs (reserved ranges), fa_g.physs (physical handles), fa_g.mappings.
 *
 * The granularity is 2 MiB (both options).  A reservation is a PROT_NONE MAP_NORESERVE anonymous
 * range (not charged) of a granularity multiple, aligned to the requested power-of-two alignment
 * (0 = the granularity); expectPtr is honoured when that exact range is free
 * (MAP_FIXED_NOREPLACE), else ignored.  A physical handle is a granularity multiple of bytes
 * charged to prop->location.id's HBM (the same budget and fault injection as device blocks, plus
 * its own: FAKEACL_FAIL_PHYSICAL_NTH), backed by a range of its device's physical-memory file:
 * one sparse memfd per device (so tens of thousands of handles cost no file descriptors); the
 * range is never reused and its pages are punched out when the handle is freed.  The handle's
 * value is an opaque, never reused number that faults if dereferenced.  aclrtMapMem maps the
 * handle's range MAP_SHARED|MAP_FIXED over part of one reservation, so data written through a
 * mapping is in the handle and readable through any other mapping of it; aclrtUnmapMem puts
 * PROT_NONE reserved space back.  aclrtGetMemInfo (fa_mem.c) counts handles as charged.
 *
 * Fork: device memory belongs to one process.  The child handler remaps each mapping
 * MAP_PRIVATE from the same file range and gives every device a new file for the child's own
 * handles; a handle the child inherited keeps the parent's file, is mapped privately there too
 * and is never punched out by the child.  So the child's writes are its own and it cannot free
 * the parent's pages.  Where this differs from sharing nothing, as a real runtime would: a page
 * the child has not written since the fork may still show the parent's later writes (a private
 * file mapping copies a page at its first write), and in the child two mappings of one inherited
 * handle do not see each other's writes.
 *
 * Errors: NULL / size 0 -> 100000.  Reserve or allocate a size that is not a granularity
 * multiple -> 107000.  Map: virPtr, size, offset not granularity multiples, unknown handle, range
 * outside the handle, not inside one reservation, or overlapping a mapping -> 107000; an injected
 * map failure (FAKEACL_FAIL_MAP_NTH) -> 207001, nothing mapped; an injected reservation failure
 * (FAKEACL_FAIL_RESERVE_NTH) -> 207001.  Unmap / release / free of an
 * unknown address or handle -> 207002.  Releasing a reservation or freeing a handle that still
 * has mappings -> 107000 (nothing changes; unmap first).  Physical location type other than
 * DEVICE -> 100000; bad location id -> 107001.  With FAKEACL_VMM=0 every call of this file
 * answers 207000 (feature not supported), as a runtime without the API; so does a process with
 * a file-size limit (`ulimit -f`, fa_core.c), which would cut the physical-memory file short.
 * Locking: fa_g.lock around everything, mmap calls included.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fa_internal.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define FA_HANDLE_TAG 0xFA00000000000000ull /* non-canonical: a dereferenced handle faults */
#define FA_MAX_REQUEST ((size_t)1 << 62)

static const int fa_anon_none = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

/* FAKEACL_VMM=0: the answer of every call here. */
#define NO_VMM_CHECK()                                        \
    do {                                                      \
        if (fa_g.no_vmm) return FA_ERROR_FEATURE_NOT_SUPPORT; \
    } while (0)

/* pre: lock held.  Device dev's physical-memory file, created on first use; -1 on failure. */
static int hbm_file_locked(int dev)
{
    struct fa_dev *d = &fa_g.dev[dev];
    if (d->hbm_fd >= 0) return d->hbm_fd;
    int fd = memfd_create("fakeacl-hbm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)FA_HBM_FILE_BYTES) != 0) {
        fa_err("the physical-memory file of device %d could not be made", dev);
        if (fd >= 0) close(fd);
        return -1;
    }
    d->hbm_fd = fd;
    return fd;
}

int fa_handle_inherited(const struct fa_rec *handle)
{
    return handle->fd != fa_g.dev[handle->dev].hbm_fd;
}

/* pre: lock held.  Map `size` bytes of handle ph from `offset` at addr, over what is there: shared
 * with every other mapping of it, or privately when the handle is inherited (a fork child). */
static int map_handle_locked(void *addr, size_t size, const struct fa_rec *ph, size_t offset)
{
    int share = fa_handle_inherited(ph) ? MAP_PRIVATE : MAP_SHARED;
    void *p = mmap(addr, size, PROT_READ | PROT_WRITE, share | MAP_FIXED, ph->fd,
                   (off_t)(ph->offset + offset));
    return p == MAP_FAILED ? -1 : 0;
}

/* pre: lock held.  Release the host pages of a freed handle's range (its offsets stay unused);
 * an inherited handle's pages are the parent's. */
static void hbm_release_locked(const struct fa_rec *r)
{
    if (fa_handle_inherited(r)) return;
    if (fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)r->offset,
                  (off_t)r->size) != 0)
        fa_err("punching out %zu bytes of physical memory failed", r->size);
}

/* ---- reservations --------------------------------------------------------------------------------- */
static void *reserve_range(size_t len, size_t align, void *expect)
{
    if (expect != NULL && (uintptr_t)expect % align == 0) {
        void *q = mmap(expect, len, PROT_NONE, fa_anon_none | MAP_FIXED_NOREPLACE, -1, 0);
        if (q == expect) return q;
        if (q != MAP_FAILED)
            munmap(q, len); /* an old kernel took the flag as a hint and placed it elsewhere */
    }
    size_t extra = align - fa_g.page;
    if (len > SIZE_MAX - extra) return NULL;
    char *q = mmap(NULL, len + extra, PROT_NONE, fa_anon_none, -1, 0);
    if (q == MAP_FAILED) return NULL;
    char *a = (char *)ACL_ALIGN_UP((uintptr_t)q, align);
    size_t head = (size_t)(a - q);
    size_t tail = extra - head;
    if (head != 0) munmap(q, head);
    if (tail != 0) munmap(a + len, tail);
    return a;
}

aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                uint64_t flags)
{
    (void)flags;
    fa_init();
    fa_count(FA_C_aclrtReserveMemAddress);
    NO_VMM_CHECK();
    if (virPtr == NULL || size == 0 || (alignment & (alignment - 1)) != 0)
        return ACL_ERROR_INVALID_PARAM;
    if (size > FA_MAX_REQUEST) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (size % FA_HUGE_PAGE != 0) return ACL_ERROR_RT_PARAM_INVALID;
    fa_lock();
    int injected = fa_g.fail_resv_countdown != 0 && --fa_g.fail_resv_countdown == 0;
    fa_unlock();
    if (injected) {
        fa_count(FA_C_injected_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    size_t align = alignment == 0 ? FA_HUGE_PAGE : alignment;
    if (align < fa_g.page) align = fa_g.page;
    size_t len = ACL_ALIGN_UP(size, fa_g.page);
    struct fa_rec *r = fa_rec_new();
    if (r == NULL) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    void *p = reserve_range(len, align, expectPtr);
    if (p == NULL) {
        fa_rec_free(r);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    r->key = (uintptr_t)p;
    r->size = len;
    r->maplen = len;
    r->dev = -1;
    r->fd = -1;
    fa_lock();
    int ok = fa_table_insert(&fa_g.resvs, r) == 0;
    fa_unlock();
    if (!ok) {
        munmap(p, len);
        fa_rec_free(r);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *virPtr = p;
    return ACL_SUCCESS;
}

/* Remove the record `key` from `t` when nothing is mapped through it.  pre: fa_lock held.
 * NULL with *rc = 207002 (unknown) or 107000 (still mapped) otherwise; nothing changes then. */
static struct fa_rec *take_unmapped_locked(struct fa_table *t, uintptr_t key, aclError *rc)
{
    struct fa_rec *r = fa_table_find(t, key);
    if (r == NULL) {
        *rc = ACL_ERROR_RT_MEMORY_FREE;
        return NULL;
    }
    if (r->nmaps != 0) {
        *rc = ACL_ERROR_RT_PARAM_INVALID;
        return NULL;
    }
    return fa_table_remove(t, key);
}

aclError aclrtReleaseMemAddress(void *virPtr)
{
    fa_init();
    fa_count(FA_C_aclrtReleaseMemAddress);
    NO_VMM_CHECK();
    if (virPtr == NULL) return ACL_ERROR_INVALID_PARAM;
    fa_lock();
    aclError rc = ACL_ERROR_RT_MEMORY_FREE;
    struct fa_rec *r = take_unmapped_locked(&fa_g.resvs, (uintptr_t)virPtr, &rc);
    if (r == NULL) {
        fa_unlock();
        return rc;
    }
    if (munmap((void *)r->key, r->maplen) != 0)
        fa_err("munmap(%p, %zu) of a reservation failed", (void *)r->key, r->maplen);
    fa_unlock();
    if (r->gbits != NULL) munmap(r->gbits, r->gbits_len);
    fa_rec_free(r);
    return ACL_SUCCESS;
}

/* ---- physical memory ------------------------------------------------------------------------------ */
aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                             const aclrtPhysicalMemProp *prop, uint64_t flags)
{
    (void)flags;
    fa_init();
    fa_count(FA_C_aclrtMallocPhysical);
    NO_VMM_CHECK();
    if (handle == NULL || prop == NULL || size == 0 ||
        prop->location.type != ACL_MEM_LOCATION_TYPE_DEVICE)
        return ACL_ERROR_INVALID_PARAM;
    if (prop->location.id >= (uint32_t)fa_g.ndev) return ACL_ERROR_RT_INVALID_DEVICEID;
    int dev = (int)prop->location.id;
    if (size > FA_MAX_REQUEST) {
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    if (size % FA_HUGE_PAGE != 0) return ACL_ERROR_RT_PARAM_INVALID;
    struct fa_rec *r = fa_rec_new();
    if (r == NULL) {
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    fa_lock();
    aclError rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (fa_g.fail_phys_countdown != 0 && --fa_g.fail_phys_countdown == 0) {
        fa_count(FA_C_alloc_failures);
        fa_count(FA_C_injected_failures);
    } else {
        rc = fa_charge_locked(dev, size, size);
    }
    if (rc != ACL_SUCCESS) {
        fa_unlock();
        fa_rec_free(r);
        return rc;
    }
    struct fa_dev *d = &fa_g.dev[dev];
    int fd = hbm_file_locked(dev);
    if (fd < 0 || size > FA_HBM_FILE_BYTES - d->hbm_next) {
        if (fd >= 0) fa_err("device %d: its physical-memory file is used up", dev);
        fa_uncharge_locked(dev, size);
        fa_unlock();
        fa_rec_free(r);
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    r->key = (uintptr_t)(FA_HANDLE_TAG | fa_g.next_handle++);
    r->size = size;
    r->charged = size;
    r->dev = dev;
    r->fd = fd;
    r->offset = d->hbm_next;
    if (fa_table_insert(&fa_g.physs, r) != 0) {
        fa_uncharge_locked(dev, size);
        fa_unlock();
        fa_rec_free(r);
        fa_count(FA_C_alloc_failures);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    d->hbm_next += size;
    fa_unlock();
    fa_count(FA_C_physical_allocs);
    fa_count_n(FA_C_bytes_charged, size);
    *handle = (aclrtDrvMemHandle)r->key;
    return ACL_SUCCESS;
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle)
{
    fa_init();
    fa_count(FA_C_aclrtFreePhysical);
    NO_VMM_CHECK();
    if (handle == NULL) return ACL_ERROR_INVALID_PARAM;
    fa_lock();
    aclError rc = ACL_ERROR_RT_MEMORY_FREE;
    struct fa_rec *r = take_unmapped_locked(&fa_g.physs, (uintptr_t)handle, &rc);
    if (r == NULL) {
        fa_unlock();
        return rc;
    }
    hbm_release_locked(r);
    fa_uncharge_locked(r->dev, r->charged);
    fa_unlock();
    fa_rec_free(r);
    fa_count(FA_C_physical_frees);
    return ACL_SUCCESS;
}

/* ---- mappings ------------------------------------------------------------------------------------- */
struct resv_find {
    uintptr_t lo, hi;     /* wanted range [lo, hi) */
    struct fa_rec *found; /* the reservation holding it, or NULL */
};

static int resv_contains(struct fa_rec *r, void *ctx)
{
    struct resv_find *f = ctx;
    if (f->lo >= r->key && f->hi <= r->key + r->size) f->found = r;
    return 0;
}

/* pre: lock held.  The reservation holding [f->lo, f->hi) into f->found, or NULL.  The last one
 * found is tried first, if it is still in the table under its own address: a pool maps its
 * chunks one call each (26,214 for 51.2 GiB in 2 MiB chunks), and a walk of the table's 1,024
 * chain heads at every call was 40 % of the instructions of a short process in front of the
 * shim (callgrind). */
static void resv_find_locked(struct resv_find *f)
{
    static struct fa_rec *last; /* under the lock; a record is never given back to malloc */
    f->found = NULL;
    if (last && fa_table_find(&fa_g.resvs, last->key) == last && f->lo >= last->key &&
        f->hi <= last->key + last->size) {
        f->found = last;
        return;
    }
    fa_table_walk(&fa_g.resvs, resv_contains, f);
    last = f->found;
}

/* pre: lock held.  Set (on = 1) or clear the granule bits of [lo, lo+size) in reservation rv;
 * with on = -1 only test: 1 when any of them is set. */
static int granules_locked(struct fa_rec *rv, uintptr_t lo, size_t size, int on)
{
    size_t g0 = (lo - rv->key) / FA_HUGE_PAGE, g1 = g0 + size / FA_HUGE_PAGE;
    for (size_t g = g0; g < g1; g++) {
        uint64_t bit = 1ull << (g & 63);
        if (on < 0) {
            if (rv->gbits[g >> 6] & bit) return 1;
        } else if (on) {
            rv->gbits[g >> 6] |= bit;
        } else {
            rv->gbits[g >> 6] &= ~bit;
        }
    }
    return 0;
}

/* pre: lock held.  Puts PROT_NONE reserved space back over mapping m and unlinks it from its
 * reservation and handle (not from fa_g.mappings).  O(1) + its granules. */
static void mapping_undo_locked(struct fa_rec *m)
{
    void *p = mmap((void *)m->key, m->size, PROT_NONE, fa_anon_none | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED)
        fa_err("restoring reserved space at %p (%zu bytes) failed", (void *)m->key, m->size);
    struct fa_rec *rv = m->resv, *ph = m->phys;
    if (m->sib_prev)
        m->sib_prev->sib = m->sib;
    else
        rv->maps = m->sib;
    if (m->sib) m->sib->sib_prev = m->sib_prev;
    if (m->psib_prev)
        m->psib_prev->psib = m->psib;
    else
        ph->pmaps = m->psib;
    if (m->psib) m->psib->psib_prev = m->psib_prev;
    granules_locked(rv, m->key, m->size, 0);
    rv->nmaps--;
    ph->nmaps--;
}

aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags)
{
    (void)flags;
    fa_init();
    fa_count(FA_C_aclrtMapMem);
    NO_VMM_CHECK();
    if (virPtr == NULL || size == 0 || handle == NULL) return ACL_ERROR_INVALID_PARAM;
    if (((uintptr_t)virPtr | size | offset) % FA_HUGE_PAGE != 0) return ACL_ERROR_RT_PARAM_INVALID;
    struct fa_rec *m = fa_rec_new();
    if (m == NULL) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    uintptr_t lo = (uintptr_t)virPtr;
    aclError rc = ACL_ERROR_RT_PARAM_INVALID;
    fa_lock();
    struct fa_rec *ph = fa_table_find(&fa_g.physs, (uintptr_t)handle);
    if (ph == NULL || offset > ph->size || size > ph->size - offset || lo > UINTPTR_MAX - size)
        goto out;
    struct resv_find f = {lo, lo + size, NULL};
    resv_find_locked(&f);
    if (f.found == NULL) goto out;
    if (f.found->gbits == NULL) { /* mmap, not malloc: see fa_table.c */
        size_t len = ((f.found->size / FA_HUGE_PAGE + 63) / 64 * sizeof(uint64_t) + fa_g.page - 1) /
                     fa_g.page * fa_g.page;
        void *bits = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (bits == MAP_FAILED) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            goto out;
        }
        f.found->gbits = bits;
        f.found->gbits_len = len;
    }
    if (granules_locked(f.found, lo, size, -1)) goto out; /* over or across a mapping */
    if (fa_g.fail_map_countdown != 0 && --fa_g.fail_map_countdown == 0) {
        fa_count(FA_C_map_failures);
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
        goto out;
    }
    if (map_handle_locked(virPtr, size, ph, offset) != 0) {
        fa_err("mmap of a physical handle at %p (%zu bytes) failed", virPtr, size);
        rc = ACL_ERROR_RT_INTERNAL_ERROR;
        goto out;
    }
    m->key = lo;
    m->size = size;
    m->offset = offset;
    m->dev = ph->dev;
    m->fd = -1;
    m->resv = f.found;
    m->phys = ph;
    m->sib = f.found->maps;
    if (m->sib) m->sib->sib_prev = m;
    f.found->maps = m;
    m->psib = ph->pmaps;
    if (m->psib) m->psib->psib_prev = m;
    ph->pmaps = m;
    granules_locked(f.found, lo, size, 1);
    f.found->nmaps++;
    ph->nmaps++;
    if (fa_table_insert(&fa_g.mappings, m) != 0) {
        mapping_undo_locked(m);
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
        goto out;
    }
    m = NULL;
    rc = ACL_SUCCESS;
out:
    fa_unlock();
    fa_rec_free(m);
    if (rc == ACL_SUCCESS) fa_count(FA_C_maps);
    return rc;
}

aclError aclrtUnmapMem(void *virPtr)
{
    fa_init();
    fa_count(FA_C_aclrtUnmapMem);
    NO_VMM_CHECK();
    if (virPtr == NULL) return ACL_ERROR_INVALID_PARAM;
    fa_lock();
    struct fa_rec *m = fa_table_remove(&fa_g.mappings, (uintptr_t)virPtr);
    if (m == NULL) {
        fa_unlock();
        return ACL_ERROR_RT_MEMORY_FREE;
    }
    mapping_undo_locked(m);
    fa_unlock();
    fa_rec_free(m);
    fa_count(FA_C_unmaps);
    return ACL_SUCCESS;
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                          aclrtMemGranularityOptions option, size_t *granularity)
{
    fa_init();
    fa_count(FA_C_aclrtMemGetAllocationGranularity);
    NO_VMM_CHECK();
    if (prop == NULL || granularity == NULL ||
        (unsigned)option > ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return ACL_ERROR_INVALID_PARAM;
    *granularity = FA_HUGE_PAGE;
    return ACL_SUCCESS;
}

/* ---- device reset ----------------------------------------------------------------------------------- */
static int release_handle_if_dev(struct fa_rec *r, void *ctx)
{
    if (r->dev != *(const int *)ctx) return 0;
    while (r->pmaps != NULL) {
        struct fa_rec *m = fa_table_remove(&fa_g.mappings, r->pmaps->key);
        mapping_undo_locked(m);
        fa_rec_free(m);
    }
    hbm_release_locked(r);
    fa_uncharge_locked(r->dev, r->charged);
    fa_count(FA_C_reset_released);
    fa_rec_free(r);
    return 1;
}

void fa_release_device_handles_locked(int dev)
{
    fa_table_walk(&fa_g.physs, release_handle_if_dev, &dev);
}

/* ---- fork ----------------------------------------------------------------------------------------- */
/* After fa_vmm_fork_child_locked gave the devices new files, every handle is inherited. */
static int remap_private(struct fa_rec *m, void *ctx)
{
    (void)ctx;
    if (map_handle_locked((void *)m->key, m->size, m->phys, m->offset) != 0)
        fa_err("fork child: a mapping at %#lx stays shared with the parent", (unsigned long)m->key);
    return 0;
}

void fa_vmm_fork_child_locked(void)
{
    fa_g.forked = 1;
    for (int dev = 0; dev < FA_MAX_DEVICES; dev++) fa_g.dev[dev].hbm_fd = -1; /* a new file */
    fa_table_walk(&fa_g.mappings, remap_private, NULL);
}
