/* tests/fakeacl/fa_internal.h — what the files of the fake runtime share (never installed).
 *
 * Owns: the one global state (`fa_g`), its record type and hash table, the counters, the options,
 * and the hidden helpers the files call each other with.  The fake is libascendcl.so for tests: it
 * implements include/acl/acl.h over host memory (see fa_device.c, fa_mem.c, fa_vmm.c) and exports
 * a test-control API (fakeacl_ctl.h, fa_ctl.c).
 *
 * Naming: `acl*` = the exported runtime ABI, `fakeacl_*` = exported test control, `fa_*` = hidden
 * internals shared between the files (FA_HIDDEN), `static` for the rest.  No file ever calls an
 * exported `acl*` or `fakeacl_*` function: such a call would go through the PLT and an LD_PRELOAD
 * interposer would see it as a second call by the application.
 *
 * Locking: one mutex, fa_g.lock, guards every field of fa_g (tables, budgets, fault settings).
 * Counters are separate relaxed atomics and need no lock.  The current device is thread-local.
 * Functions whose names end in `_locked` require the caller to hold fa_g.lock.
 *
 * Invariants (checked by fa_check_locked(), exported as fakeacl_check()):
 *   - for each device d: dev[d].charged == sum of `charged` over device blocks and physical
 *     handles of d, and dev[d].live == their number;
 *   - every mapping lies inside its reservation and inside its handle; resv->nmaps and
 *     phys->nmaps equal the number of mappings that name them, which are exactly those on their
 *     lists; a reservation's granule bits are set exactly under its mappings (so mappings of a
 *     reservation do not overlap);
 *   - each table's `count` equals the number of records chained in it.
 */
#ifndef FAKEACL_FA_INTERNAL_H
#define FAKEACL_FA_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"

#define FA_HIDDEN __attribute__((visibility("hidden")))

/* CANN codes the fake returns that include/acl/acl.h does not name (values from CANN's acl_base.h). */
#define FA_ERROR_REPEAT_INITIALIZE 100002
#define FA_ERROR_REPEAT_FINALIZE 100037
#define FA_ERROR_FEATURE_NOT_SUPPORT 207000 /* ACL_ERROR_RT_FEATURE_NOT_SUPPORT */

#define FA_MAX_DEVICES 64 /* FAKEACL_DEVICES may be 0..64 */
#define FA_DEFAULT_DEVICES 2
#define FA_DEFAULT_HBM ((size_t)64 << 30)     /* 64 GiB per device */
#define FA_NORMAL_PAGE ((size_t)4 << 10)      /* guess: device normal page 4 KiB */
#define FA_HUGE_PAGE ((size_t)2 << 20)        /* 2 MiB huge page = VMM granularity */
#define FA_HUGE1G_PAGE ((size_t)1 << 30)      /* 1 GiB page */
#define FA_HUGE_FIRST_LIMIT ((size_t)1 << 20) /* HUGE_FIRST: blocks <= 1 MiB use normal pages */
#define FA_HBM_FILE_BYTES ((size_t)1 << 46)   /* a device's physical-memory file (sparse) */

/* ---- counters ------------------------------------------------------------------------------ */
/* X(name): one counter per exported entry point (calls, success or not), then derived ones. */
// clang-format off
#define FA_ENTRY_POINTS(X) \
    X(aclInit) \
    X(aclFinalize) \
    X(aclrtSetDevice) \
    X(aclrtResetDevice) \
    X(aclrtGetDevice) \
    X(aclrtGetDeviceCount) \
    X(aclrtSynchronizeDevice) \
    X(aclrtCreateContext) \
    X(aclrtDestroyContext) \
    X(aclrtSetCurrentContext) \
    X(aclrtGetCurrentContext) \
    X(aclrtMalloc) \
    X(aclrtMallocAlign32) \
    X(aclrtMallocCached) \
    X(aclrtMallocWithCfg) \
    X(aclrtFree) \
    X(aclrtFreeWithDevSync) \
    X(aclrtMallocHost) \
    X(aclrtFreeHost) \
    X(aclrtMemcpy) \
    X(aclrtMemset) \
    X(aclrtGetMemInfo) \
    X(aclrtReserveMemAddress) \
    X(aclrtReleaseMemAddress) \
    X(aclrtMallocPhysical) \
    X(aclrtFreePhysical) \
    X(aclrtMapMem) \
    X(aclrtUnmapMem) \
    X(aclrtMemGetAllocationGranularity)
// clang-format on
#define FA_DERIVED(X)                                                                            \
    X(device_allocs)     /* successful aclrtMalloc* (all four entry points) */                   \
    X(device_frees)      /* device blocks released by aclrtFree / aclrtFreeWithDevSync */        \
    X(bytes_charged)     /* bytes charged to HBM by successful device + physical allocations */  \
    X(alloc_failures)    /* HBM-charging calls refused with 207001 (budget or injected) */       \
    X(injected_failures) /* of those, refused by fault injection */                              \
    X(physical_allocs)   /* successful aclrtMallocPhysical */                                    \
    X(physical_frees)    /* successful aclrtFreePhysical */                                      \
    X(host_allocs)       /* successful aclrtMallocHost */                                        \
    X(host_frees)        /* successful aclrtFreeHost */                                          \
    X(maps)              /* successful aclrtMapMem */                                            \
    X(unmaps)            /* successful aclrtUnmapMem */                                          \
    X(map_failures)      /* aclrtMapMem refused by fault injection (207001) */                   \
    X(sync)              /* device synchronizations: aclrtSynchronizeDevice + FreeWithDevSync */ \
    X(reset_released)    /* blocks + handles released by aclrtResetDevice */

enum fa_counter {
#define FA_ENUM(n) FA_C_##n,
    FA_ENTRY_POINTS(FA_ENUM) FA_DERIVED(FA_ENUM)
#undef FA_ENUM
        FA_NCOUNTERS
};

FA_HIDDEN extern const char *const fa_counter_name[FA_NCOUNTERS];
FA_HIDDEN extern uint64_t fa_counter[FA_NCOUNTERS]; /* relaxed atomics */

static inline void fa_count(enum fa_counter c)
{
    __atomic_fetch_add(&fa_counter[c], 1, __ATOMIC_RELAXED);
}
static inline void fa_count_n(enum fa_counter c, uint64_t n)
{
    __atomic_fetch_add(&fa_counter[c], n, __ATOMIC_RELAXED);
}

/* ---- records and their hash table (fa_table.c) ------------------------------------------------ */
/* One record per live object.  Which fields mean something depends on the table holding it. */
struct fa_rec {
    struct fa_rec *next; /* hash-chain link */
    uintptr_t key;       /* address (block, host, reservation, mapping) or handle value */
    size_t size;         /* bytes: block (padded size), host request, reserved range, mapped
                             range, or physical handle size (granularity-rounded) */
    size_t maplen;       /* bytes actually mmapped for a block, reservation or host area */
    size_t charged;      /* bytes charged to `dev`'s HBM (blocks, handles), else 0 */
    size_t offset;       /* mapping: bytes into its handle; handle: bytes into its device's
                            physical-memory file */
    int dev;             /* device id of a block or handle, else -1 */
    int fd;              /* handle: its device's physical-memory file (fa_dev.hbm_fd, or in a fork
                            child the parent's: fa_handle_inherited), else -1 */
    uint32_t nmaps;      /* reservation / handle: live mappings naming it */
    struct fa_rec *resv; /* mapping: its enclosing reservation */
    struct fa_rec *phys; /* mapping: its backing handle */
    struct fa_rec *sib;  /* mapping: next mapping of the same reservation */
    struct fa_rec *sib_prev;  /* mapping: previous one (NULL: the list head) */
    struct fa_rec *psib;      /* mapping: next mapping of the same handle */
    struct fa_rec *psib_prev; /* mapping: previous one (NULL: the list head) */
    struct fa_rec *maps;      /* reservation: head of its mapping list (via sib) */
    struct fa_rec *pmaps;     /* handle: head of its mapping list (via psib) */
    uint64_t *gbits;          /* reservation: bit g set = granule g (2 MiB) is mapped; NULL
                                 until its first mapping (mmap'ed, gbits_len bytes) */
    size_t gbits_len;         /* reservation: bytes mapped for gbits */
};

struct fa_table {
    struct fa_rec **slot; /* nslot chain heads */
    size_t nslot;         /* power of two, 0 before first insert */
    size_t count;         /* records held */
};

/* Records: zeroed, or NULL when out of memory; given back with fa_rec_free (NULL is ignored).
 * Neither goes through malloc (fa_table.c says why).  fa_recs_lock: their leaf lock. */
FA_HIDDEN struct fa_rec *fa_rec_new(void);
FA_HIDDEN void fa_rec_free(struct fa_rec *r);
FA_HIDDEN extern pthread_mutex_t fa_recs_lock;

/* Visitor for fa_table_walk: return nonzero to unlink `r` (the visitor then owns it). */
typedef int (*fa_visit_fn)(struct fa_rec *r, void *ctx);

FA_HIDDEN struct fa_rec *fa_table_find(const struct fa_table *t, uintptr_t key);
FA_HIDDEN int fa_table_insert(struct fa_table *t, struct fa_rec *r); /* 0, or -1: out of memory */
FA_HIDDEN struct fa_rec *fa_table_remove(struct fa_table *t, uintptr_t key);
FA_HIDDEN void fa_table_walk(struct fa_table *t, fa_visit_fn fn, void *ctx);
FA_HIDDEN size_t fa_table_chained(const struct fa_table *t); /* counts by walking (checker) */

/* ---- global state (fa_core.c) ------------------------------------------------------------------ */
struct fa_dev {
    size_t budget;   /* bytes of HBM this device has */
    size_t charged;  /* bytes charged now (blocks + physical handles) */
    size_t peak;     /* bytes: highest `charged` since start or fakeacl_reset_counts */
    uint64_t live;   /* blocks + physical handles alive */
    int hbm_fd;      /* physical memory of handles: one sparse memfd, -1 until first needed */
    size_t hbm_next; /* bytes: where the next handle starts in it (offsets are not reused) */
};

struct fa_state {
    pthread_mutex_t lock; /* guards everything below */
    int ndev;             /* device count (FAKEACL_DEVICES) */
    int initialized;      /* between aclInit and aclFinalize */
    struct fa_dev dev[FA_MAX_DEVICES];
    struct fa_table blocks;       /* device blocks, key = address */
    struct fa_table hosts;        /* aclrtMallocHost areas, key = address */
    struct fa_table resvs;        /* reserved VA ranges, key = start address */
    struct fa_table physs;        /* physical handles, key = handle value */
    struct fa_table mappings;     /* mappings, key = start address */
    uint64_t next_handle;         /* handle values are never reused */
    uint64_t fail_countdown;      /* HBM-charging calls until an injected failure; 0 = off */
    size_t fail_above;            /* bytes: fail every charge request above this; 0 = off */
    uint64_t fail_phys_countdown; /* aclrtMallocPhysical calls until an injected failure */
    uint64_t fail_map_countdown;  /* aclrtMapMem calls until an injected failure */
    uint64_t fail_resv_countdown; /* aclrtReserveMemAddress calls until an injected failure */
    int no_vmm;                   /* FAKEACL_VMM=0: an older runtime, the VMM calls answer 207000 */
    int forked;                   /* a fork child: handles may live in a parent's file (fa_vmm.c) */
    char stats_path[4096];        /* FAKEACL_STATS, "" = none */
    size_t page;                  /* host page size in bytes */
};

FA_HIDDEN extern struct fa_state fa_g;

FA_HIDDEN void fa_init(void); /* idempotent (pthread_once); every exported function calls it */
FA_HIDDEN void fa_lock(void);
FA_HIDDEN void fa_unlock(void);
FA_HIDDEN void fa_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
FA_HIDDEN int fa_parse_size(const char *s, size_t *out); /* K/M/G/T suffixes; 0 ok, -1 bad */

/* ---- devices and contexts (fa_device.c) ---------------------------------------------------------- */
FA_HIDDEN int fa_current_device(void); /* this thread's device (its context's), or -1 */
FA_HIDDEN int fa_device_valid(int32_t dev);
/* Bind a context to the calling thread (aclrtSetCurrentContext, fakeacl_bind_context). */
FA_HIDDEN aclError fa_bind_context(aclrtContext context);

/* ---- memory (fa_mem.c, fa_vmm.c) -------------------------------------------------------------- */
/* Decide whether an HBM charge of `charge` bytes (block / handle size `block`) may be taken from
 * device `dev`: fault injection first, then the budget.  On success the charge is taken. */
FA_HIDDEN aclError fa_charge_locked(int dev, size_t block, size_t charge);
FA_HIDDEN void fa_uncharge_locked(int dev, size_t charge);
FA_HIDDEN void fa_release_device_blocks_locked(int dev);  /* fa_mem.c: used by reset */
FA_HIDDEN void fa_release_device_handles_locked(int dev); /* fa_vmm.c: used by reset */
/* fa_vmm.c, from the fork child handler (lock held): the child's device memory becomes its own. */
FA_HIDDEN void fa_vmm_fork_child_locked(void);
/* A handle a fork child inherited: its pages live in the parent's file (pre: lock held). */
FA_HIDDEN int fa_handle_inherited(const struct fa_rec *handle);
FA_HIDDEN int fa_check_locked(void); /* fa_ctl.c: violations found */

#endif /* FAKEACL_FA_INTERNAL_H */
