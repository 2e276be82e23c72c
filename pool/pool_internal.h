/* pool/pool_internal.h — the pool object and what pool.c, pool_stats.c and pool_check.c share.
 *
 * Files and prefixes of pool/ (each file's functions carry its name; statics have none):
 *   bucket.h            bucket_     user size buckets of the statistics
 *   desc.h, desc.c      desc_       block descriptors of the large tiling and their storage
 *   tlsf.h, tlsf.c      tlsf_       the TLSF large heap over those blocks
 *   slab.h, slab.c      slab_       size-class slab pages carved from the large heap
 *   pool.h              pool_       the public API (pool.c, pool_stats.c, pool_check.c,
 *                                   pool_vmm.c)
 *   pool_cache.c        pool_cache_ the per-thread caches of small blocks (cold half; the fast
 *                                   paths are in pool.c)
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
 * base/size only) and the thread caches' fast paths in pool.c (pool_alloc and pool_free,
 * inside the owner's busy window; pool_cache.c says how pool_cache_stop keeps them out).
 */
#ifndef NPUPOOL_POOL_INTERNAL_H
#define NPUPOOL_POOL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "addrmap.h"
#include "barrier.h"
#include "debug.h"
#include "desc.h"
#include "lock.h"
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

/* ---- thread caches (pool_cache.c) ---------------------------------------------------------- */
/* A thread's cache for one pool: per size class, a magazine (a stack) of slots taken from
 * their pages and free for the application, plus the thread's share of the statistics.  The
 * owner thread pushes and pops without the pool lock inside a "busy" window (pool.c); anyone
 * else touches a cache only holding the pool lock with the fast paths stopped (pool_cache_stop).
 * Bounds: class c holds at most cap(c) = clamp(CACHE_CLASS_BYTES / slot, CACHE_MAG_MIN,
 * CACHE_MAG_MAX) blocks, and a cache at most CACHE_BYTES_MAX bytes of slots. */
/* Bytes of slots one class holds, at most (but see CACHE_MAG_MIN).  256 KiB rather than 128:
 * the classes of 32 KiB and up held 1..4 blocks, so their frees took the lock to flush nearly
 * every time (1,000 live of 512 B..1 MiB, large blocks included: 32 % of pairs took the lock
 * with 128 KiB, 28 % with 256).  One process per build, interleaved, untimed mean per pair:
 * 1,000 live 74.6 -> 70.2 ns, 100,000 live of 512 B..256 KiB 161 -> 88 ns (best of 5); 512 KiB
 * no better (71.5, 91.4), 1 MiB and up worse (the cache's CACHE_BYTES_MAX, then 8 MiB, trims). */
#define CACHE_CLASS_BYTES ((size_t)256 << 10)
#define CACHE_MAG_MAX 64u /* blocks one class holds, at most */
/* Blocks one class holds, at least, whatever its slot size.  With one block (slots above
 * 128 KiB) or two, a class's magazine was empty or full at nearly every call, and those refills
 * and flushes were 95 % of the small blocks' locked calls (1,000 live of 512 B..256 KiB, counted
 * by class); at least 8, with flushes of half a magazine, the pairs that took the lock for a
 * small block fell from 13.5 % to 3.1 % at 1,000 live of 512 B..1 MiB and from 22 % to 5.8 % at
 * 100,000 live of 512 B..256 KiB (a process of pool/ alone, one thread, 1,000,000 timed pairs).
 * The price is memory: the largest classes may hold 8 blocks of up to 256 KiB, so a thread may
 * hold twice as much as before (CACHE_BYTES_MAX), all of it given back before a refusal. */
#define CACHE_MAG_MIN 8u
/* Bytes of slots one cache holds, at most.  Passing it trims the cache (pool_cache.c), and
 * those trims are slow pairs: bench_peers p99.9 at 100,000 live was 330 ns with 4 MiB, 190-200
 * with 8, when classes held at most 256 KiB each (13.6 MiB for the 79 classes).  With
 * CACHE_MAG_MIN the classes may hold 28.6 MiB in all; 16 MiB kept trims rare.  With the slab
 * limit at 512 KiB the eight classes above 256 KiB may hold 8 blocks each, 29 MiB more: at 16
 * MiB the share of pairs that took the lock at 1,000 live of 512 B..1 MiB went from 3.1 % to
 * 11.5 % and the p99.9 from 240 to 560-590 ns (bench_peers, two runs); at 32 MiB 4.0 % and
 * 230-280.  Every cache is given back before a refusal (pool_cache_drain_all), so the bound costs
 * no allocation. */
#define CACHE_BYTES_MAX ((size_t)32 << 20)
#define CACHE_POOLS 4u /* pools a thread caches for at once */
/* Blocks a full magazine gives back to their pages at once: half of it, at most
 * CACHE_FLUSH_MAX (each may miss the CPU cache three times: a flush is a tail latency).  Half
 * rather than an eighth (the earlier rule): a magazine of 8 that gave back one block was full
 * again at the next free half the time.  Refills take half a magazine too, at most
 * CACHE_REFILL_MAX blocks: a refill is the pair that waits for it (bench_peers, 1,000 live:
 * p99.9 220 -> 190 ns with 8 rather than up to 32; 100,000 live: 500 -> 360; the mean and the
 * threads table unchanged).  4 rather than 8, with the lines of a full magazine's oldest
 * entries asked for ahead (cache_flush_ahead): at 1,000,000 live of 64 B..64 KiB the locked
 * pairs are 2 % of all, so their p95 is the table's p99.9, and a locked pair cost 550..650 ns
 * at its median with 8 (bench_peers, BENCH_PEERS_ONLY=o1heap, five interleaved runs each:
 * npupool's p99.9 at 1,000,000 live 1,613..1,964 -> 1,052..1,733 ns, median 1,793 -> 1,242;
 * at 1,000 live 220..241 -> 200..331, median 230 -> 210; at 100,000 live median 561 -> 511;
 * medians and means unchanged; the locked share at 1,000,000 live 1.9 % -> 2.4 %). */
#define CACHE_FLUSH_MAX 4u
#define CACHE_FLUSH(cap) ((cap) / 2u < CACHE_FLUSH_MAX ? (cap) / 2u : CACHE_FLUSH_MAX)
_Static_assert(CACHE_MAG_MIN >= 2, "a full magazine gives at least one block back");
#define CACHE_REFILL_MAX 4u

/* A cached slot.  Everything but addr follows from it (cache_ent_of); it is kept so that the
 * fast paths and the flushes never read the page's geometry to find it, and pool_check
 * compares each entry with what cache_ent_of makes. */
typedef struct cache_ent {
    uintptr_t addr;   /* the slot's address */
    slab_slot_t *rec; /* its record (SLAB_SLOT_CACHED while here; its tag follows it) */
    slab_page_t *pg;  /* its page (live while the slot is cached: the page counts the slot) */
} cache_ent_t;
/* The entry of the slot of pg at addr whose record is rec. */
static inline cache_ent_t cache_ent_rec(slab_page_t *pg, slab_slot_t *rec, uintptr_t addr)
{
    return (cache_ent_t){addr, rec, pg};
}
/* The entry of slot idx of pg (at addr). */
static inline cache_ent_t cache_ent_of(slab_page_t *pg, long idx, uintptr_t addr)
{
    return cache_ent_rec(pg, slab_rec(pg, (size_t)idx), addr);
}

/* Ask for the lines that giving entry e back to its page reads and writes first: the page's
 * geometry and state lines and the slot's record (their addresses need no load: the entry
 * names them); the bitmap word's index needs the geometry line (pool_cache.c). */
static inline void cache_ent_prefetch(const cache_ent_t *e)
{
    __builtin_prefetch(&e->pg->addr, 0);
    __builtin_prefetch(&e->pg->live, 1);
    __builtin_prefetch(e->rec, 1);
}

/* One class of a cache, on a cache line of its own: the magazine and the thread's share of
 * the class's statistics (the user buckets are unions of whole classes: bucket_of(slot)). */
typedef struct cache_mag {
    _Alignas(64) uint32_t n;    /* blocks held: ent[0..n) (oldest first) */
    uint32_t cap;               /* most blocks held */
    uint32_t slot;              /* bytes per slot of the class (immutable) */
    uint32_t lane;              /* the lane of lane_pg the last refill took from (a hint) */
    cache_ent_t *ent;           /* [cap] */
    uint64_t allocs;            /* allocations of the class counted here */
    uint64_t frees;             /* frees counted here (live here = allocs - frees, may wrap) */
    size_t live_bytes;          /* granted bytes allocated - freed here (wraps) */
    const slab_page_t *lane_pg; /* that page; only compared, never read (may be gone) */
} cache_mag_t;
_Static_assert(sizeof(cache_mag_t) == 64, "a magazine's line holds all of it");

/* Magazine m just became full, so the next free of its class gives its oldest CACHE_FLUSH(cap)
 * entries back under the lock (pool_cache_push), unless an allocation comes first.  Ask for
 * their lines now: by the time of that flush they are in the CPU's caches, where each would
 * otherwise have missed them, with the lock held. */
static inline void cache_flush_ahead(const cache_mag_t *m)
{
    for (uint32_t i = 0; i < CACHE_FLUSH(m->cap); i++) cache_ent_prefetch(&m->ent[i]);
}

/* A pool's transfer cache of one class: a stack of slots (taken from their pages, records
 * SLAB_SLOT_CACHED) that threads' magazines hand over and take back in halves, under a
 * try-lock, without the pool lock (tcmalloc's transfer cache).  Used only while the pool has
 * caches of several threads; touched by an owner in its busy window (the try-lock orders the
 * owners), or by a stopper (pool lock held, fast paths stopped). */
typedef struct cache_xfer {
    _Alignas(64) unsigned lock; /* atomic: 1 while an owner moves entries (never waited for) */
    uint32_t n;                 /* entries held: ent[0..n) (atomic: read before the lock) */
    uint32_t cap;               /* most entries (immutable) */
    uint32_t batch;             /* entries moved at once: half a magazine (immutable) */
    cache_ent_t *ent;           /* [cap] */
} cache_xfer_t;
#define CACHE_XFER_BATCHES 4u                /* a transfer cache holds that many halves... */
#define CACHE_XFER_BYTES ((size_t)256 << 10) /* ... and at most this (at least one half) */

typedef struct cache_thread cache_thread_t;
typedef struct cache cache_t;
struct cache {
    /* the owner's, hot (one line): written in the busy window or under the pool lock */
    _Alignas(64) unsigned busy;          /* atomic: 1 while the owner is in a fast path */
    uint32_t ncached;                    /* blocks in the magazines */
    size_t bytes;                        /* their slot bytes, <= CACHE_BYTES_MAX */
    size_t alloc_bytes;                  /* granted bytes allocated - freed here (wraps) */
    size_t req_bytes;                    /* requested bytes allocated - freed here (wraps) */
    size_t base;                         /* the rest of the pool's allocated bytes at the last sync
                                   (peak estimate: base + alloc_bytes) */
    size_t hw;                           /* high-water of base + alloc_bytes since the sync */
    int alone;                           /* atomic: the pool's only cache (pool lock) */
    uint32_t scan;                       /* next class to trim when over CACHE_BYTES_MAX */
    size_t synced;                       /* alloc_bytes at the last sync */
    cache_mag_t mag[SLAB_CACHE_CLASSES]; /* one magazine per cached class */
    /* cold */
    pool_t *pool;           /* its pool; NULL once the pool is destroyed (cache_lock) */
    uint64_t pool_id;       /* its pool's id (immutable) */
    cache_thread_t *owner;  /* the owner thread's table (immutable) */
    cache_t *pnext, *pprev; /* the pool's caches (pool lock; cache_lock too to link/unlink) */
    cache_t *gnext, *gprev; /* every cache of the process (cache_lock) */
    int orphan;             /* fork child: its owner thread does not exist here (pool lock) */
    int reaped;             /* atomic: an orphan flushed and unlinked: free it (cache_lock) */
    size_t mem_bytes;       /* its mapping's length (cache_mem: never malloc) */
    cache_ent_t ents[];     /* the magazines' storage */
};

struct pool {
    /* read by the fast paths: this line and the slab's first are written only by stops */
    _Alignas(64) uintptr_t base; /* start of the managed range (immutable) */
    size_t size;                 /* bytes of the managed range (immutable) */
    uintptr_t ubase;             /* first usable byte: base rounded up to POOL_ALIGN (immutable) */
    uintptr_t uend;              /* end of usable bytes: base+size rounded down (immutable) */
    uint64_t id;                 /* unique in the process, never reused (immutable) */
    pool_vmm_t *vmm;             /* virtual-memory backing (immutable pointer), NULL: block */
    unsigned stw;                /* atomic: stops in progress; while non-zero, fast paths lock */
    slab_t slab;                 /* size-class slabs (their pages are PAGE blocks of `large`) */
    lock_t lock;                 /* guards everything below, and the slab's mutable part */
    uint32_t check_epoch;        /* pool_check's mark generation */
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
    /* The figures above are the pool's own share: large blocks, small blocks of threads
     * without a cache, and what caches folded in when they went away; a cache keeps its
     * thread's share (cache_t), and readers sum both with the fast paths stopped. */
    size_t sum_sync;  /* allocated_bytes + every cache's alloc_bytes as of its last sync:
                             the allocated bytes as the pool last knew them (peak, mirror) */
    unsigned stopped; /* pool_cache_stop depth (lock) */
    int stop_raised;  /* the outermost stop raised stw (lock) */
    int has_orphans;  /* a cache of a thread the fork did not copy is linked (lock) */
    /* Taken slots + live large blocks, stored (relaxed) after each locked change, read without
     * the lock by the one thread that has a cache of the pool: when its cache holds every
     * taken block, nothing is live and it gives them back (pool.c: an empty pool is one free
     * block).  On a line of its own: written at every locked operation. */
    _Alignas(64) uint64_t in_use;
    _Alignas(64) cache_t *caches; /* this pool's caches (lock; cache_lock too to link/unlink) */
    cache_xfer_t *xfer;           /* [SLAB_CACHE_CLASSES] transfer caches, made with the first cache
                            (lock; then immutable until pool_destroy) */
    size_t xfer_bytes;            /* their mapping's length */
    uint64_t xfer_blocks;         /* atomic: entries in all transfer caches */
    pool_t *reg_next;             /* pools with caches (cache_lock) */
    pool_t *reg_prev;             /* pools with caches (cache_lock) */
    int registered;               /* on that list (cache_lock) */
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
typedef struct pool_counts pool_counts_t;
/* pre: pool->lock held, fast paths stopped (it refreshes the pages' run summaries); n: the
 * summed counts (pool_cache_sum), whose cached blocks are SLOTS extents of one slot each.
 * O(1) without slab pages, else O(pages + bitmap words of the pages changed since the last
 * call + cached pages). */
void pool_summarize(pool_t *p, const pool_counts_t *n, pool_summary_t *out);
/* pool_explain without the lock (pre: held, fast paths stopped): the refusal classifier
 * (pool.h).  grow_refused:
 * the backing has just refused fresh physical memory to this request (no headroom counted). */
void pool_classify(pool_t *p, size_t granted, int grow_refused, pool_refusal_t *out);

/* ---- thread caches (pool_cache.c) ---------------------------------------------------------- */
/* The calling thread's table of caches: NULL until it first uses a pool. */
struct cache_thread {
    struct {
        pool_t *pool;   /* a pool this thread caches for (maybe destroyed since) */
        uint64_t id;    /* that pool's id when the cache was made */
        cache_t *cache; /* the cache */
    } ent[CACHE_POOLS]; /* most recently used first */
    int exiting;        /* the thread's key destructor ran: no new caches */
    int disabled;       /* pool_cache_thread_enable(0): no caches for this thread */
};
extern __thread cache_thread_t *pool_cache_self __attribute__((tls_model("initial-exec")));
extern int pool_cache_fenced; /* 1: no membarrier: the fast paths fence (pool_cache.c) */
/* Tests only (NULL otherwise): called by the lock-free free between finding a slot's record
 * and reading it, the window in which another incarnation of the page may take its memory
 * (slab.h: slab_rec_find); a test makes that happen in it.  It is read next to
 * pool_cache_fenced, on a line the fast paths read anyway. */
extern void (*pool_free_race_hook)(pool_t *p, uintptr_t addr);

/* The calling thread's cache for p, made (or brought to the front) on first use; NULL when the
 * thread has none and cannot get one (exiting, host OOM): then everything takes the lock.
 * pre: p->lock not held. */
cache_t *pool_cache_lookup(pool_t *p);
static inline cache_t *pool_cache_get(pool_t *p)
{
    cache_thread_t *t = pool_cache_self;
    if (__builtin_expect(t != NULL && t->ent[0].pool == p && t->ent[0].id == p->id, 1))
        return t->ent[0].cache;
    return pool_cache_lookup(p);
}
/* Caches for the calling thread on (1, the default) or off (0: its caches are given back and
 * every call of this thread takes the lock, as without caches; the white-box tests of the
 * slab layer use it).  pre: no pool lock held. */
void pool_cache_thread_enable(int on);
/* The calling thread's cache for p if it has one; never makes one (any lock may be held). */
static inline cache_t *pool_cache_peek(const pool_t *p)
{
    cache_thread_t *t = pool_cache_self;
    for (unsigned i = 0; t && i < CACHE_POOLS; i++)
        if (t->ent[i].pool == p && t->ent[i].id == p->id) return t->ent[i].cache;
    return NULL;
}
/* Open the owner's busy window: 0 when a stop is in progress (the window is closed again and
 * the caller takes the lock).  The store-load order between `busy` and `stw` is the asymmetric
 * Dekker of pool_cache.c: barrier_light here, membarrier() on the stopper's side. */
static inline int pool_cache_enter(pool_t *p, cache_t *c)
{
    __atomic_store_n(&c->busy, 1, __ATOMIC_RELAXED);
    barrier_light(pool_cache_fenced);
    if (__builtin_expect(__atomic_load_n(&p->stw, __ATOMIC_ACQUIRE) == 0, 1)) return 1;
    __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
    return 0;
}
static inline void pool_cache_leave(cache_t *c) { __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE); }

/* A thread's share of one allocation (sign +1) or free (-1) of class k, with the peak
 * estimate. */
static inline void pool_cache_count(cache_t *c, unsigned k, size_t granted, size_t requested,
                                    int sign)
{
    cache_mag_t *m = &c->mag[k];
    if (sign > 0) {
        m->allocs++;
        m->live_bytes += granted;
        c->alloc_bytes += granted;
        c->req_bytes += requested;
        size_t now = c->base + c->alloc_bytes; /* a maximum without a branch (a cmov) */
        c->hw = now > c->hw ? now : c->hw;
    } else {
        m->frees++;
        m->live_bytes -= granted;
        c->alloc_bytes -= granted;
        c->req_bytes -= requested;
    }
}

/* No block is taken any more (nothing live, nothing in a cache): give the cached pages back,
 * so that an empty pool is one free block.  pre: lock held. */
static inline void release_if_empty(pool_t *p)
{
    if (p->slab.taken == 0 && p->slab.cached_pages && addrmap_count(&p->live) == 0)
        slab_release_cached(&p->slab);
}

/* The lock-free copy of the allocated bytes (pre: lock held), and the calling thread's count of
 * such stores (pool_thread_mirror_writes). */
extern __thread uint64_t pool_mirror_writes __attribute__((tls_model("initial-exec")));
static inline void pool_mirror_store(pool_t *p)
{
    __atomic_store_n(&p->allocated_mirror, p->sum_sync, __ATOMIC_RELAXED);
    pool_mirror_writes++;
}

/* Publish in_use (pre: lock held, at the end of a locked change). */
static inline void pool_publish(pool_t *p)
{
    __atomic_store_n(&p->in_use, p->slab.taken + addrmap_count(&p->live), __ATOMIC_RELAXED);
}
/* 1 when cache c holds every taken block of p and nothing large is live (pre: lock held). */
static inline int pool_cache_holds_all(const pool_t *p, const cache_t *c)
{
    return p->caches == c && !c->pnext && c->ncached == p->slab.taken &&
           addrmap_count(&p->live) == 0;
}
/* The caller's cache holds every taken block: give them back (pre: lock held). */
void pool_cache_empty(pool_t *p, cache_t *c);

/* In the busy window of c (class k): refill the empty magazine from the class's transfer
 * cache.  1 when it got blocks; 0 when there was none or another thread holds it. */
static inline int pool_cache_xfer_take(pool_t *p, cache_t *c, unsigned k)
{
    cache_xfer_t *x = &p->xfer[k];
    cache_mag_t *m = &c->mag[k];
    if (!__atomic_load_n(&x->n, __ATOMIC_RELAXED) ||
        __atomic_exchange_n(&x->lock, 1, __ATOMIC_ACQUIRE))
        return 0;
    uint32_t n = x->n, take = n < x->batch ? n : x->batch;
    if (c->bytes + (size_t)take * m->slot > CACHE_BYTES_MAX) take = 0;
    n -= take;
    __builtin_memcpy(m->ent, x->ent + n, take * sizeof *m->ent);
    __atomic_store_n(&x->n, n, __ATOMIC_RELAXED);
    __atomic_store_n(&x->lock, 0, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&p->xfer_blocks, take, __ATOMIC_RELAXED);
    m->n = take;
    c->ncached += take;
    c->bytes += (size_t)take * m->slot;
    return take != 0;
}
/* In the busy window of c (class k): hand the older half of the full magazine to the class's
 * transfer cache.  1 when done; 0 when it is full or another thread holds it. */
static inline int pool_cache_xfer_put(pool_t *p, cache_t *c, unsigned k)
{
    cache_xfer_t *x = &p->xfer[k];
    cache_mag_t *m = &c->mag[k];
    if (__atomic_exchange_n(&x->lock, 1, __ATOMIC_ACQUIRE)) return 0;
    uint32_t n = x->n, put = x->batch;
    if (n + put > x->cap || put > m->n) {
        __atomic_store_n(&x->lock, 0, __ATOMIC_RELEASE);
        return 0;
    }
    __builtin_memcpy(x->ent + n, m->ent, put * sizeof *m->ent);
    __atomic_store_n(&x->n, n + put, __ATOMIC_RELAXED);
    __atomic_store_n(&x->lock, 0, __ATOMIC_RELEASE);
    __atomic_add_fetch(&p->xfer_blocks, put, __ATOMIC_RELAXED);
    __builtin_memmove(m->ent, m->ent + put, (m->n - put) * sizeof *m->ent);
    m->n -= put;
    c->ncached -= put;
    c->bytes -= (size_t)put * m->slot;
    return 1;
}

/* Register for membarrier once per process (else the owners fence: pool_cache_fenced); called
 * by pool_new, before the pool is seen by any thread. */
void pool_cache_barrier_setup(void);
/* The transfer caches' memory back (pool_destroy). */
void pool_cache_xfer_free(pool_t *p);
/* Stop the fast paths of p (pre: lock held; nests): when it returns no other thread is inside
 * a busy window of p and none enters one until pool_cache_go.  Costs nothing when no other
 * thread has a cache for p; else one membarrier() and a wait for the windows open now. */
void pool_cache_stop(pool_t *p);
void pool_cache_go(pool_t *p);
/* Under the lock (pre: held): flush the caches of threads the fork did not copy. */
void pool_cache_reap(pool_t *p);
static inline void pool_cache_locked(pool_t *p)
{
    if (__builtin_expect(p->has_orphans, 0)) pool_cache_reap(p);
}
/* Give every block of cache c back to its pages (pre: lock held, c's owner is the caller or
 * stopped).  Returns the blocks given back. */
uint32_t pool_cache_flush(pool_t *p, cache_t *c);
/* Every cache of p flushed (pre: lock held; stops the fast paths itself). */
void pool_cache_drain_all(pool_t *p);
/* Fold the figures of c into the pool's own and bring its peak estimate up to date (pre:
 * lock held; c's owner is the caller). */
void pool_cache_sync(pool_t *p, cache_t *c);
/* A small block for cache c of class k (pre: lock held, k < SLAB_CACHE_CLASSES): refill the
 * magazine from the class's pages (at most one page carved) and pop one; 0 when no page could
 * be had.  *out = its address; its record is set for granted/requested. */
int pool_cache_refill(pool_t *p, cache_t *c, unsigned k, size_t granted, size_t requested,
                      uintptr_t *out, uint32_t **tag_out);
/* Push the live slot idx of pg (addr) into cache c, making room first (pre: lock held). */
void pool_cache_push(pool_t *p, cache_t *c, slab_page_t *pg, uint32_t idx, uintptr_t addr);
/* Summed statistics (pre: lock held and fast paths stopped). */
struct pool_counts {
    uint64_t allocs, frees, live_blocks; /* calls, live blocks and slots */
    size_t allocated, requested, peak;   /* bytes */
    uint64_t bucket_blocks[POOL_NBUCKETS];
    uint64_t bucket_bytes[POOL_NBUCKETS];
    uint64_t cached_blocks;                       /* blocks in the caches */
    size_t cached_bytes;                          /* their slot bytes */
    uint64_t cached_bucket_blocks[POOL_NBUCKETS]; /* by slot size */
    uint64_t cached_bucket_bytes[POOL_NBUCKETS];
};
void pool_cache_sum(const pool_t *p, pool_counts_t *out);
/* pool_destroy's part: the caches of p are dropped (their threads free them later). */
void pool_cache_forget(pool_t *p);

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
