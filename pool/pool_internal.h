/* pool/pool_internal.h — the pool object and what pool.c, pool_stats.c and pool_check.c share.
 *
 * Files and prefixes of pool/ (each file's functions carry its name; statics have none):
 *   bucket.h            bucket_     user size buckets of the statistics
 *   desc.h, desc.c      desc_       block descriptors of the large tiling and their storage
 *   tlsf.h, tlsf.c      tlsf_       the TLSF large heap over those blocks
 *   slab.h, slab.c      slab_       size-class slab pages carved from the large heap
 *   pool.h              pool_       the public API (pool.c, pool_stats.c, pool_check.c,
 *                                   pool_vmm.c)
 *   pool_internal.h     pool_       struct pool and the internals the pool_*.c files share
 * Dependencies point one way: pool_*.c -> slab -> tlsf -> desc -> bucket, pool.h (and base/).
 *
 * Layout of a pool over [base, base+size):
 *   [base, ubase)  unusable alignment head      [uend, base+size)  unusable tail
 *   [ubase, uend)  tiled exactly by the LARGE heap's blocks (desc_t), in address order through
 *                  phys_prev/phys_next (NULL at both ends).  A large block is FREE (listed in
 *                  the TLSF heap), LIVE (an allocation, in the address map `live`) or PAGE (a
 *                  slab page: carved out to hold the slots of one size class, slab.h); in a
 *                  vmm pool also VOID (no memory mapped; listed in vmm->voids) or TRANSIT
 *                  (taken by a slow path in progress, pool_vmm.c).  A vmm pool has no head or
 *                  tail (base and size are chunk multiples); FREE, LIVE and PAGE blocks lie in
 *                  mapped chunks only, VOID blocks are chunk aligned and lie in unmapped ones.
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

/* The virtual-memory backing of a vmm pool (pool_vmm.c); a block pool has none. */
typedef struct pool_vmm {
    pool_backing_t ops;       /* the device's calls (immutable) */
    size_t chunk;             /* bytes per chunk, a power of two (immutable) */
    unsigned chunk_shift;     /* log2(chunk) (immutable) */
    size_t nchunks;           /* chunks in [base, base+size) (immutable) */
    size_t limit;             /* most bytes mapped at once, a chunk multiple (immutable) */
    uint64_t *mapped_bits;    /* [ceil(nchunks/64)] bit i: chunk i is mapped */
    uint64_t *handle;         /* [nchunks] the backing's handle of each mapped chunk */
    size_t mapped;            /* bytes of mapped chunks (= popcount(mapped_bits) * chunk) */
    size_t pending_grow;      /* bytes of fresh physical memory planned by slow paths in flight */
    uint64_t in_flight;       /* slow paths between their plan and their commit */
    size_t held_desc;         /* descriptors those slow paths hold for their commits */
    tlsf_t voids;             /* the VOID blocks (unmapped, chunk aligned, maximal) */
    uint64_t chunks_mapped;   /* chunk mappings made */
    uint64_t chunks_unmapped; /* chunk mappings removed */
    uint64_t grows;           /* slow paths that took fresh physical memory */
    uint64_t stitches;        /* slow paths that remapped free chunks */
    uint64_t give_backs;      /* pool_give_back calls that freed something */
    size_t given_back;        /* physical bytes freed */
    uint64_t failures;        /* backing calls that failed */
    int released;             /* pool_release_backing ran: nothing is mapped any more */
} pool_vmm_t;

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
    pool_vmm_t *vmm;             /* virtual-memory backing (immutable pointer), NULL: block */
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

/* pool.c: a pool over [base, base+size) whose tiling is one descriptor over [ubase, uend) in
 * no state yet (the caller makes it FREE or VOID and lists it); the large heap counts whole
 * chunks of 2^chunk_shift bytes (0: none).  NULL on bad arguments or host OOM. */
pool_t *pool_new(uintptr_t base, size_t size, unsigned chunk_shift);

/* ---- free-space summary and walk (pool_stats.c) ------------------------------------------ */
/* Free memory as pool_walk reports it (pool.h: enum pool_extent): FREE runs (FREE blocks and
 * cached empty pages side by side) and SLOTS runs (free slots inside one page holding live
 * slots).  The one computation behind pool_get_stats, pool_snapshot and the refusal
 * classifier; pool_check verifies it against its own walk. */
typedef struct pool_summary {
    size_t free_bytes;                     /* all free bytes (FREE + SLOTS extents) */
    size_t whole_bytes;                    /* vmm: bytes of FREE extents in whole chunks */
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
/* pool_explain without the lock (pre: held): the refusal classifier (pool.h).  grow_refused:
 * the backing has just refused fresh physical memory to this request (no headroom counted). */
void pool_classify(pool_t *p, size_t granted, int grow_refused, pool_refusal_t *out);

/* ---- virtual-memory backing (pool_vmm.c) --------------------------------------------------- */
/* Bytes of fresh physical memory a vmm pool may still map: limit - mapped - pending, or 0. */
size_t pool_vmm_headroom(const pool_t *p);
/* 1 when a stitch of ALIGN_UP(need, chunk) bytes can be planned now with that headroom and
 * whole_bytes free bytes in whole chunks (the FREE runs' whole chunks, cached pages included):
 * the rule pool_vmm_make_room plans by and pool_classify states. */
int pool_vmm_can_stitch(const pool_t *p, size_t need, size_t headroom, size_t whole_bytes);
/* The slow path of pool_alloc for a vmm pool after the synchronous search failed: plan a
 * fresh mapped range of ALIGN_UP(room, chunk) bytes (or of need when room cannot be had),
 * release the lock, run the backing, take the lock again and commit, then run `retry`.
 * pre and post: p->lock held.  Returns what retry returned, 0 when nothing could be planned;
 * *grow_refused is set when the backing refused fresh physical memory. */
int pool_vmm_make_room(pool_t *p, size_t room, size_t need, int (*retry)(pool_t *p, void *ctx),
                       void *ctx, int *grow_refused);
/* pool_walk without the lock (pre: held), stopping after `limit` large-heap blocks (a guard
 * against a broken chain when pool_check calls it). */
int pool_walk_locked(const pool_t *p, pool_walk_fn cb, void *ctx, uint64_t limit);

#pragma GCC visibility pop
#endif /* NPUPOOL_POOL_INTERNAL_H */
