/* pool/pool.h — the device-memory pool: bucketed suballocation of one reserved address range.
 *
 * Owns: the public contract of pool/.  A pool manages the address range [base, base+size) of
 * one device reservation.  It never reads or writes that memory: every piece of metadata lives
 * in host memory (libc malloc), so the same code runs over real HBM, over the fake runtime, or
 * over a made-up range in `npupool replay` and the unit tests.
 *
 * Two backings:
 *   block  (pool_create)      the range is one runtime allocation, all of it usable, for good.
 *   vmm    (pool_create_vmm)  the range is a reserved virtual address range; physical memory
 *                             is mapped into it in chunks through a pool_backing_t (the
 *                             runtime's virtual-memory calls, or a simulation), at most
 *                             limit_bytes at once.  The pool maps chunks on slow paths only:
 *                             to grow back to its limit, and to stitch (a request larger than
 *                             every free run is given a fresh part of the range, mapped with
 *                             chunks unmapped from free space elsewhere); it gives chunks that
 *                             hold no live block back on request (pool_give_back).  It never
 *                             holds its lock while it calls the backing (see pool_vmm.c).
 *
 * Contract (every function):
 *   - Thread-safe: each pool has its own lock; pool_lock/pool_unlock exist only for fork
 *     handlers (lock every pool before fork, unlock in parent and child).
 *   - Addresses handed out are POOL_ALIGN (64) byte aligned; block sizes are multiples of 64.
 *   - pool_alloc(granted) returns a block of at least `granted` bytes that overlaps no other
 *     live block.  `granted` is what the caller's contract says belongs to the block (for ACL:
 *     ALIGN_UP(size,32)+32); `requested` is what the application asked for (statistics only).
 *   - Time: alloc and free are O(1) (TLSF-style two-level bitmaps, size-class slabs) plus one
 *     expected-O(1) hash lookup; they do not depend on the number of live blocks.  The one
 *     exception: a large request whose size class is the highest that holds free blocks
 *     searches that class's list (blocks within 1/32 of each other) to its end, so that a
 *     request is refused only when no free block could hold it.
 *   - Freed neighbours are coalesced at once.
 *   - A refusal is explained by one classifier (pool_refusal_t, pool_explain): pool_alloc
 *     succeeds iff it says POOL_REFUSAL_NONE.
 *   - Conservation, checked by pool_check():
 *       allocated_bytes (sum of granted) + free_bytes + overhead_bytes == reserved_bytes
 *     where overhead = rounding of granted up to the block size + unusable alignment head/tail
 *     (+ for vmm: mapped chunks held by a slow path in progress).  For vmm, reserved_bytes is
 *     the mapped bytes, and the law holds chunk by chunk: every byte of a mapped chunk is live,
 *     free or overhead; no byte of an unmapped chunk is.
 */
#ifndef NPUPOOL_POOL_H
#define NPUPOOL_POOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define POOL_ALIGN 64u

typedef struct pool pool_t;

/* The shape of a vmm pool as npupool makes it (the shim for a device, `npupool replay` for a
 * trace), so that a replay answers for the live pool: chunks of POOL_VMM_CHUNK_DEFAULT bytes
 * unless configured (NPUPOOL_CHUNK_BYTES: the option table's default is checked against this),
 * an address range of POOL_VMM_VA_RATIO times the physical limit (shim/device.c says why). */
#define POOL_VMM_CHUNK_DEFAULT ((size_t)2 << 20)
#define POOL_VMM_VA_RATIO 4

/* How a pool's range is backed by memory (pool_stats_t.backing). */
enum pool_backing_kind {
    POOL_BACKING_BLOCK = 0, /* one runtime allocation (pool_create) */
    POOL_BACKING_VMM = 1,   /* a virtual range with physical chunks mapped (pool_create_vmm) */
};

/* The device behind a vmm pool: the runtime's virtual-memory calls, or a simulation (replay,
 * tests).  Contract, for every function:
 *   - called with no pool lock held, possibly from several threads at once (for different
 *     chunks), never for a chunk another call is working on;
 *   - phys_alloc(ctx, bytes, &handle): take `bytes` (the chunk size) of physical memory; 0 and
 *     *handle set, or non-zero (refused: nothing taken, *handle untouched);
 *   - phys_free(ctx, handle): give one back (it is mapped nowhere);
 *   - map(ctx, va, bytes, handle): map the whole handle at va (chunk aligned, inside the pool's
 *     range, nothing mapped there); 0 ok, else nothing mapped;
 *   - unmap(ctx, va): unmap the chunk mapped at va; 0 ok (its handle is mapped nowhere now),
 *     else it stays mapped.
 * Handles are opaque to the pool (0 is a valid value). */
typedef struct pool_backing {
    void *ctx;                                                          /* passed to every call */
    int (*phys_alloc)(void *ctx, size_t bytes, uint64_t *handle);       /* take physical memory */
    void (*phys_free)(void *ctx, uint64_t handle);                      /* give it back */
    int (*map)(void *ctx, uintptr_t va, size_t bytes, uint64_t handle); /* map it at va */
    int (*unmap)(void *ctx, uintptr_t va);                              /* unmap the chunk at va */
} pool_backing_t;

/* Result codes (negative = error). */
enum {
    POOL_OK = 0,
    POOL_ENOMEM = -1,    /* no free block large enough (pool_alloc's `why` says why) */
    POOL_EINVAL = -2,    /* size 0, or larger than the pool could ever hold */
    POOL_ENOTOWNED = -3, /* address outside [base, base+size): not this pool's */
    POOL_ENOTLIVE = -4,  /* inside the range but not the start of a live block:
                            double free or interior pointer; nothing was changed */
};

/* User-facing size classes ("buckets", after the seed's 1K/16K/256K split) for statistics. */
#define POOL_NBUCKETS 8
/* Upper bounds (inclusive) of buckets 0..6 in bytes; bucket 7 is everything larger. */
extern const size_t pool_bucket_limit[POOL_NBUCKETS - 1];
int pool_bucket_of(size_t size); /* 0..POOL_NBUCKETS-1 */

typedef struct pool_bucket_stats {
    uint64_t live_blocks; /* live allocations whose granted size falls in this bucket */
    uint64_t live_bytes;  /* sum of their granted bytes */
    uint64_t free_blocks; /* free extents (runs and slot runs) whose size falls in this bucket */
    uint64_t free_bytes;  /* sum of their sizes */
} pool_bucket_stats_t;

/* Free memory comes in two kinds (pool_walk reports both, see enum pool_extent):
 *   free runs   maximal runs of FREE large-heap blocks together with cached empty slab pages:
 *               memory any request can be given (the pool gives cached pages back on a miss);
 *   free slots  maximal runs of free slots inside one slab page that holds live slots: only a
 *               request of that page's size class or a smaller one can use them. */
typedef struct pool_stats {
    uintptr_t base;              /* start of the managed range */
    size_t reserved_bytes;       /* memory the pool holds: block: the range; vmm: mapped bytes */
    size_t allocated_bytes;      /* sum of granted bytes of live blocks */
    size_t requested_bytes;      /* sum of requested bytes of live blocks */
    size_t peak_allocated_bytes; /* high-water mark of allocated_bytes */
    size_t free_bytes;           /* all free bytes: free runs + free slots */
    size_t largest_free_bytes;   /* the largest free run: the largest block a request above the
                                    slab limit can be given (pool_explain: any request) */
    size_t slab_free_bytes;      /* free slots (part of free_bytes; in no free run), the
                                    blocks in threads' caches included */
    size_t cached_bytes;         /* of slab_free_bytes, slots in threads' caches */
    uint64_t cached_blocks;      /* how many */
    size_t overhead_bytes;       /* reserved - allocated - free */
    double fragmentation;        /* 1 - largest_free/free (0 when free == 0): free slots count */
    uint64_t live_blocks;        /* number of live allocations */
    uint64_t free_blocks;        /* free runs + runs of free slots (pool_walk's free extents) */
    uint64_t allocs;             /* successful pool_alloc calls */
    uint64_t frees;              /* successful pool_free calls */
    uint64_t failed_allocs;      /* pool_alloc calls answered POOL_ENOMEM */
    uint64_t invalid_frees;      /* pool_free calls answered ENOTOWNED/ENOTLIVE */
    pool_bucket_stats_t buckets[POOL_NBUCKETS];
    /* backing (vmm figures are 0 for a block pool, but va_bytes = limit_bytes = the range) */
    int backing;                   /* enum pool_backing_kind */
    size_t chunk_bytes;            /* vmm: bytes per chunk */
    size_t va_bytes;               /* size of the managed address range */
    size_t limit_bytes;            /* most bytes the pool holds (vmm: may map) */
    size_t whole_chunk_free_bytes; /* vmm: free bytes in whole chunks (could be unmapped) */
    size_t va_largest_unmapped;    /* vmm: the longest unmapped stretch of the range */
    uint64_t chunks_mapped;        /* vmm: chunk mappings made (growth and stitching) */
    uint64_t chunks_unmapped;      /* vmm: chunk mappings removed (stitching and give-back) */
    uint64_t grows;                /* vmm: slow paths that took fresh physical memory */
    uint64_t stitches;             /* vmm: slow paths that remapped free chunks into one range */
    uint64_t give_backs;           /* vmm: pool_give_back calls that freed something */
    size_t given_back_bytes;       /* vmm: physical bytes freed (give-back, failed stitches) */
    uint64_t backing_failures;     /* vmm: backing calls that failed (runtime refusals included) */
} pool_stats_t;

/* Create a pool over [base, base+size).  Returns NULL on bad arguments (size too small to hold
 * one aligned block) or host out of memory.  No device call is made. */
pool_t *pool_create(uintptr_t base, size_t size);
/* Create a vmm pool over the reserved address range [base, base+size) with nothing mapped.
 * chunk: a power of two >= 64 KiB dividing base and size; limit: the most bytes mapped at once
 * (rounded down to chunks, at least one chunk, at most size).  *backing is copied.  NULL on bad
 * arguments or host out of memory.  No backing call is made: pool_grow maps the first chunks. */
pool_t *pool_create_vmm(uintptr_t base, size_t size, size_t chunk, size_t limit,
                        const pool_backing_t *backing);
/* Destroy the host metadata.  A vmm pool's mapped chunks are not touched (pool_release_backing
 * first, or let the runtime release them: aclrtResetDevice). */
void pool_destroy(pool_t *pool);

/* A simulated device for a vmm pool (replay, benchmarks): every call succeeds, nothing is
 * mapped; `calls` counts them, handles are 1, 2, 3...  The returned table's ctx is s. */
typedef struct pool_sim {
    uint64_t calls;       /* backing calls made */
    uint64_t next_handle; /* the last handle handed out */
} pool_sim_t;
pool_backing_t pool_sim_backing(pool_sim_t *s);

/* vmm: map up to `bytes` (rounded up to chunks, within the limit) of fresh physical memory into
 * the lowest unmapped stretch large enough.  Returns the bytes mapped (fewer when the backing
 * refused; 0 for a block pool).  Runs the backing with the lock released. */
size_t pool_grow(pool_t *pool, size_t bytes);
/* vmm: unmap and free up to `bytes` (rounded up to chunks) of chunks that hold no live block
 * (the smallest free runs first).  Returns the physical bytes freed (0 for a block pool or
 * when every chunk holds something).  The pool may grow back later, up to its limit, when its
 * own requests need it. */
size_t pool_give_back(pool_t *pool, size_t bytes);
/* vmm: unmap and free every mapped chunk (aclFinalize); the pool must not be used afterwards
 * except by pool_destroy.  Returns the number of backing calls that failed. */
int pool_release_backing(pool_t *pool);

/* Why a request is refused, or would be (pool_explain).  One classification for every
 * consumer (the shim's stderr line, the JSON report), built on the largest block a request of
 * that size could actually be given:
 *   usable_largest   need > slab limit (256 KiB): the largest free run (pool_stats_t's
 *                    largest_free_bytes: FREE blocks and cached empty pages side by side);
 *                    a slab-sized need: the larger of that and the slot size of the largest
 *                    class at or above the request's class that has a free slot (what
 *                    pool_alloc's slow path tries).
 *   vmm only         stitch_bytes = ALIGN_UP(need, chunk); remappable_bytes = free bytes in
 *                    whole chunks + headroom (limit - mapped, 0 when the runtime has just
 *                    refused to grow); the request can be stitched iff remappable_bytes >=
 *                    stitch_bytes and the range has an unmapped stretch of stitch_bytes.
 *   kind             TOO_LARGE if granted is more than the pool's usable range (vmm: its
 *                    limit); else NONE if usable_largest >= need or it can be stitched; else
 *                    EXHAUSTED if free_bytes + headroom < need; else FRAGMENTED (vmm: the free
 *                    space that could serve it lies in pieces smaller than a chunk, or no
 *                    unmapped stretch of the range is long enough).
 * Guarantee (test_pool_random checks it after every operation): pool_alloc succeeds iff the
 * kind is NONE, except when host memory for the pool's own metadata runs out (then pool_alloc
 * answers POOL_ENOMEM with kind NONE). */
enum pool_refusal_kind {
    POOL_REFUSAL_NONE = 0,       /* it fits now */
    POOL_REFUSAL_EXHAUSTED = 1,  /* free bytes < need */
    POOL_REFUSAL_FRAGMENTED = 2, /* enough bytes free, no block a request of this size can be
                                    given */
    POOL_REFUSAL_TOO_LARGE = 3,  /* more than the pool could ever hold */
};

typedef struct pool_refusal {
    enum pool_refusal_kind kind; /* see above */
    size_t need;                 /* bytes the block needs: granted rounded up to POOL_ALIGN */
    size_t free_bytes;           /* all free bytes (pool_stats_t.free_bytes) */
    size_t usable_largest;       /* the largest block a request of THIS size could be given now */
    size_t slab_free_bytes;      /* of free_bytes, free slots (pool_stats_t.slab_free_bytes) */
    size_t reserved_bytes;       /* size of the managed range (vmm: the limit) */
    int backing;                 /* enum pool_backing_kind */
    size_t chunk_bytes;          /* vmm: bytes per chunk */
    size_t stitch_bytes;         /* vmm: need rounded up to chunks */
    size_t remappable_bytes;     /* vmm: free bytes in whole chunks + headroom */
    size_t headroom_bytes;       /* vmm: of remappable_bytes, unmapped physical within the limit */
    size_t va_largest;           /* vmm: the longest unmapped stretch of the range */
} pool_refusal_t;

/* "none", "exhausted", "fragmentation", "too large" ("unknown" for anything else). */
const char *pool_refusal_name(enum pool_refusal_kind kind);

/* The one human sentence for a refusal, e.g.
 *   fragmentation: 9.8 MiB free, but the largest block a 400.4 KiB request can be given is
 *   97.7 KiB (7.6 MiB of the free space is free slots in small-block pages)
 *   fragmentation: 3.0 MiB free, but the largest block a 2.0 MiB request can be given is
 *   1.0 MiB, and only 0 B of the free space fills whole 2.0 MiB chunks that could be remapped
 *   into one range (the rest lies in pieces smaller than a chunk, beside live blocks)
 *   exhausted: 1.2 MiB free, 2.0 GiB needed
 *   too large: 80.0 GiB needed, more than the pool can ever hold (64.0 GiB)
 * Writes at most len bytes with the terminating NUL (buf may be NULL when len is 0); returns
 * the sentence's length, as snprintf does.  Reads only *r: no lock. */
size_t pool_refusal_describe(const pool_refusal_t *r, char *buf, size_t len);

/* What pool_alloc(granted) would find now (granted 0 is taken as 1).  Changes nothing. */
void pool_explain(pool_t *pool, size_t granted, pool_refusal_t *out);

/* pre: granted > 0, requested <= granted (requested may be 0 when unknown).
 * vmm: a request no free run can hold may map chunks (pool_vmm.c: the lock is released while
 * the backing runs; the search is repeated after).
 * On POOL_OK *out is the block's start address.  On POOL_ENOMEM, and on POOL_EINVAL for a
 * request larger than the pool (kind TOO_LARGE), *why (if non-NULL) explains the refusal; on
 * POOL_ENOMEM it is computed under the same lock hold that refused, so it describes exactly
 * the state the request met; on POOL_EINVAL for bad arguments it is zeroed (kind NONE).  On
 * POOL_OK *why is not touched, so a caller need not clear it before the call. */
int pool_alloc(pool_t *pool, size_t requested, size_t granted, uintptr_t *out, pool_refusal_t *why);

/* Tagged allocation: pool_alloc, and on POOL_OK *tag_word points at the block's tag: a 32-bit
 * word the pool keeps beside the block for its caller (the shim's ledger writes its record's
 * handle there).  The word belongs to the caller while the block is live; its value is
 * undefined until the caller stores one, with a relaxed atomic store (__atomic_store_n): other
 * threads may read it at any time (pool_block_tag reads it back, atomically).  A block allocated
 * with pool_alloc has a tag of undefined value. */
int pool_alloc_tagged(pool_t *pool, size_t requested, size_t granted, uintptr_t *out,
                      pool_refusal_t *why, uint32_t **tag_word);

/* The tag of the live block starting at addr: POOL_OK and *tag, else POOL_ENOTLIVE or
 * POOL_ENOTOWNED and *tag untouched.  No lock for a slot of a thread-cached class (the lookup
 * of pool_free's fast path); the lock otherwise. */
int pool_block_tag(pool_t *pool, uintptr_t addr, uint32_t *tag);

/* Free the block starting at addr.  On POOL_OK, *granted_out / *requested_out (either may be
 * NULL) receive what the block was allocated with. */
int pool_free(pool_t *pool, uintptr_t addr, size_t *granted_out, size_t *requested_out);

/* pool_free that tells its caller the block's tag: tell(ctx, tag, locked) runs once the block
 * is found live and before it can be handed out again (so a record of the block can be
 * forgotten before another thread allocates the address), and not at all when the free is
 * refused, but for one case: when two threads free one live block at once, both may be told
 * (the lock-free path tells before it claims the slot) and one of them is then refused, so
 * what tell does must be harmless twice (the shim forgets a record by its handle, once).
 * locked = 0: no lock held (a slot of a thread-cached class, the fast path); 1: under the pool
 * lock (everything else), where the callback should be short (every thread's large blocks wait
 * for it), must not call into the pool, and may take only locks ordered after the pool's
 * (shim/fork.c). */
typedef void (*pool_tag_fn)(void *ctx, uint32_t tag, int locked);
int pool_free_tagged(pool_t *pool, uintptr_t addr, size_t *granted_out, pool_tag_fn tell,
                     void *ctx);

/* 1 when addr lies inside the managed range (live, free or interior), else 0.  Lock-free. */
int pool_contains(const pool_t *pool, uintptr_t addr);

/* Size of the live block starting at addr; POOL_ENOTLIVE / POOL_ENOTOWNED otherwise. */
int pool_block_size(pool_t *pool, uintptr_t addr, size_t *granted, size_t *requested);

void pool_get_stats(pool_t *pool, pool_stats_t *out);

/* What pool_walk reports, in address order, tiling [base rounded up to 64, the end rounded
 * down to 64) except the slack of live blocks and slots (size - granted) and, for vmm, the
 * unmapped stretches and the chunks a slow path is mapping or unmapping. */
enum pool_extent {
    POOL_EXTENT_LIVE = 0,  /* a live block or slot; size = its granted bytes */
    POOL_EXTENT_FREE = 1,  /* a free run: FREE large blocks and cached empty slab pages side by
                              side, maximal (never next to another FREE extent) */
    POOL_EXTENT_SLOTS = 2, /* free slots of one slab page that holds live slots, maximal inside
                              the page; never merged across a page edge or with a FREE extent */
};
/* Walk callback: return non-zero to stop the walk (pool_walk then returns that value).  It runs
 * under the pool lock: it must not call into the same pool. */
typedef int (*pool_walk_fn)(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind);
int pool_walk(pool_t *pool, pool_walk_fn cb, void *ctx);

/* The statistics (if stats != NULL) and the walk (if cb != NULL) under ONE hold of the pool
 * lock, so both describe the same instant.  Returns what the walk returns (0 without cb). */
int pool_snapshot(pool_t *pool, pool_stats_t *stats, pool_walk_fn cb, void *ctx);

/* Invariant checker: walks every block, list, bitmap and counter; returns the number of
 * violations (0 = consistent).  The first violation's description goes to `why` if non-NULL. */
int pool_check(pool_t *pool, char *why, size_t why_len);

/* Granted bytes of live blocks now, without the lock (a relaxed atomic read of the figure the
 * last alloc or free left): for monitors that need it on every call.  A pool's own figure never
 * mixes with another pool's, so it cannot wrap when a pool is retired while frees race. */
size_t pool_allocated_bytes(const pool_t *pool);
/* How many times the calling thread changed any pool's figure for pool_allocated_bytes.  The
 * figure changes only under a pool's lock (the thread caches' fast paths leave it alone), so a
 * caller that watches it needs to read it only after its own calls that moved this count: the
 * call that moves the figure across a level is one of those (or, rarely, a thread's exit or a
 * drain of every cache, whose change the next such call sees).  The figure is on a line that
 * every thread's locked calls write; reading it at every call cost the shim's threads a
 * cache-line transfer each (bench_shim, 2 threads). */
uint64_t pool_thread_mirror_writes(void);
/* The slab limit: granted sizes up to it are served from size-class slots (and a thread's
 * cache), larger ones from the large heap, under the pool lock (slab.h: SLAB_MAX). */
#define POOL_SLAB_MAX_KIB 512 /* a bare number, so that a label can spell it (bench_peers) */
#define POOL_SLAB_MAX ((size_t)POOL_SLAB_MAX_KIB << 10)
/* Bytes of the managed range (immutable; a vmm pool's address range, mapped or not). */
size_t pool_size(const pool_t *pool);
/* Most bytes the pool can hold at once (immutable): its size for a block pool, its mapping
 * limit for a vmm pool.  The denominator of "pool use" (thresholds). */
size_t pool_capacity(const pool_t *pool);

/* Give the blocks of every thread's cache of this pool back to their pages (a thread cache
 * keeps up to 32 MiB of small blocks per pool: pool_cache.c).  Changes no figure an application
 * sees: a cached block is free memory either way.  pool_alloc does it before it refuses,
 * pool_explain and pool_give_back before they look. */
void pool_drain_caches(pool_t *pool);

/* Set up what thread caches need once per process (their thread-exit key, their fork handlers,
 * membarrier registration); idempotent, and done by the first cache otherwise.  A program that
 * forks while its threads make their first caches calls it first, from one thread: a fork in the
 * middle of the set-up would leave the child's copy of it in progress (glibc's pthread_once
 * restarts it in the child, ThreadSanitizer's does not), and fork handlers registered after the
 * caller's run before them (the shim registers its own first: its prepare takes the pool locks
 * after this one has stopped the caches). */
void pool_threads_prepare(void);

/* For fork handlers only. */
void pool_lock(pool_t *pool);
void pool_unlock(pool_t *pool);

#ifdef __cplusplus
}
#endif
#endif /* NPUPOOL_POOL_H */
