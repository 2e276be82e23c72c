/* pool/pool_internal.h — the pool object and what pool.c, pool_stats.c and pool_check.c share.
 *
 * Files and prefixes of pool/ (each file's functions carry its name; statics have none):
 *   bucket.h            bucket_     user size buckets of the statistics
 *   desc.h, desc.c      desc_       block descriptors of the large tiling and their storage
 *   tlsf.h, tlsf.c      tlsf_       the TLSF large heap over those blocks
 *   slab.h, slab.c      slab_       size-class slab pages carved from the large heap
 *   pool.h              pool_       the public API (pool.c, pool_stats.c, pool_check.c)
 *   pool_internal.h     pool_       struct pool and the internals the pool_*.c files share
 * Dependencies point one way: pool_*.c -> slab -> tlsf -> desc -> bucket, pool.h (and base/).
 *
 * Layout of a pool over [base, base+size):
 *   [base, ubase)  unusable alignment head      [uend, base+size)  unusable tail
 *   [ubase, uend)  tiled exactly by the LARGE heap's blocks (desc_t), in address order through
 *                  phys_prev/phys_next (NULL at both ends).  A large block is FREE (listed in
 *                  the TLSF heap), LIVE (an allocation, in the address map `live`) or PAGE (a
 *                  slab page: carved out to hold the slots of one size class, slab.h).
 * Descriptor lifetime: merge keeps the lower-address descriptor, so the block at ubase
 * (large_first) is never replaced.
 *
 * Locking: everything here runs under pool->lock except pool_contains (reads immutable
 * base/size only) and pool_free's prefetch of the granule entry (slab.h).
 */
#ifndef NPUPOOL_POOL_INTERNAL_H
#define NPUPOOL_POOL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "addrmap.h"
#include "debug.h"
#include "desc.h"
#include "pool.h"
#include "slab.h"
#include "tlsf.h"

#pragma GCC visibility push(hidden) /* module internals: never exported by the preload library */

#define POOL_MAP_INITIAL 64u /* large live blocks the address map holds before growing */

struct pool {
    uintptr_t base;              /* start of the managed range (immutable) */
    size_t size;                 /* bytes of the managed range (immutable) */
    uintptr_t ubase;             /* first usable byte: base rounded up to POOL_ALIGN (immutable) */
    uintptr_t uend;              /* end of usable bytes: base+size rounded down (immutable) */
    pthread_mutex_t lock;        /* guards everything below */
    uint32_t check_epoch;        /* pool_check's mark generation */
    slab_t slab;                 /* size-class slabs (their pages are PAGE blocks of `large`) */
    tlsf_t large;                /* the FREE blocks of the tiling of [ubase, uend) */
    desc_store_t desc;           /* descriptor storage */
    addrmap_t live;              /* LIVE large-heap block address -> desc_t * */
    desc_t *large_first;         /* block at ubase */
    size_t allocated_bytes;      /* sum of granted over live blocks and slots */
    size_t allocated_mirror;     /* allocated_bytes, stored atomically after each change: read
                                    without the lock by pool_allocated_bytes */
    size_t requested_bytes;      /* sum of requested over them */
    size_t peak_allocated_bytes; /* high-water mark of allocated_bytes */
    uint64_t live_blocks;        /* live blocks and slots */
    uint64_t allocs;             /* successful pool_alloc calls */
    uint64_t frees;              /* successful pool_free calls */
    uint64_t failed_allocs;      /* pool_alloc answered POOL_ENOMEM */
    uint64_t invalid_frees;      /* pool_free answered ENOTOWNED / ENOTLIVE */
    uint64_t bucket_live_blocks[POOL_NBUCKETS]; /* live blocks/slots per bucket of granted */
    uint64_t bucket_live_bytes[POOL_NBUCKETS];  /* their granted bytes */
};

/* ---- free-space summary and walk (pool_stats.c) ------------------------------------------ */
/* Free memory as pool_walk reports it (pool.h: enum pool_extent): FREE runs (FREE blocks and
 * cached empty pages side by side) and SLOTS runs (free slots inside one page holding live
 * slots).  The one computation behind pool_get_stats, pool_snapshot and the refusal
 * classifier; pool_check verifies it against its own walk. */
typedef struct pool_summary {
    size_t free_bytes;                     /* all free bytes (FREE + SLOTS extents) */
    size_t largest;                        /* longest FREE run, 0 if none */
    size_t slab_free_bytes;                /* bytes of the SLOTS extents */
    uint64_t free_runs;                    /* FREE extents */
    uint64_t slot_runs;                    /* SLOTS extents */
    uint64_t bucket_blocks[POOL_NBUCKETS]; /* FREE and SLOTS extents per user bucket (by size) */
    uint64_t bucket_bytes[POOL_NBUCKETS];  /* their bytes */
} pool_summary_t;
/* pre: pool->lock held (it refreshes the pages' run summaries).  O(1) without slab pages,
 * else O(pages + bitmap words of the pages changed since the last call + cached pages). */
void pool_summarize(pool_t *p, pool_summary_t *out);
/* pool_explain without the lock (pre: held): the refusal classifier (pool.h). */
void pool_classify(pool_t *p, size_t granted, pool_refusal_t *out);
/* pool_walk without the lock (pre: held), stopping after `limit` large-heap blocks (a guard
 * against a broken chain when pool_check calls it). */
int pool_walk_locked(const pool_t *p, pool_walk_fn cb, void *ctx, uint64_t limit);

#pragma GCC visibility pop
#endif /* NPUPOOL_POOL_INTERNAL_H */
