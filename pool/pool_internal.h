/* pool/pool_internal.h — what the files of pool/ share and nobody else uses.
 *
 * Owns: the host block descriptor (pblock_t) and its storage (pdesc_*, desc.c), the TLSF large
 * heap (pheap_*, tlsf.h/tlsf.c), the size-class slabs (pclass/ppage/pgran, slab.h/slab.c) and
 * the pool object itself (struct pool, pool.c).
 *
 * Layout of a pool over [base, base+size):
 *   [base, ubase)  unusable alignment head      [uend, base+size)  unusable tail
 *   [ubase, uend)  tiled exactly by the LARGE heap's blocks, in address order through
 *                  phys_prev/phys_next (NULL at both ends).  A large block is FREE, LIVE
 *                  (an allocation, in the address map) or PAGE (a slab page: carved out to
 *                  hold the slots of one size class).
 *   a PAGE         tiled exactly by nslots slots of one size (no tail: its size is
 *                  nslots * slot); a slot is free or live (bitmap), live slots record their
 *                  granted and requested bytes (32-bit records).  Pages are found from an
 *                  address through the granule table (slab.h), never through the address map.
 * Descriptor lifetime: merge keeps the lower-address descriptor, so the block at ubase
 * (pool->large_first) is never replaced.
 *
 * Locking: everything here runs under pool->lock except pool_contains (reads immutable
 * base/size only).  Internal symbols are hidden so the preload library does not export them.
 */
#ifndef NPUPOOL_POOL_INTERNAL_H
#define NPUPOOL_POOL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "addrmap.h"
#include "pool.h"

#define PL_API __attribute__((visibility("hidden")))

/* ---- tunables --------------------------------------------------------------------------- */
#define PL_GRAN_SHIFT 6u    /* block granularity: 64 bytes = POOL_ALIGN */
#define PL_PROBE 8u         /* exact-class list entries probed on a miss */
#define PL_DESC_BLOCKS 256u /* descriptors per descriptor page (16 KiB) */
#define PL_MAP_INITIAL 64u  /* large live blocks the map holds before growing */

/* Size-class slabs (slab.h).  Every granted size up to PL_SLAB_MAX is served from a slot of
 * its class: 64-byte steps up to 1 KiB (16 classes), then 8 classes per power of two
 * (internal waste < 12.5 %), 80 classes in all.  Larger requests go to the TLSF heap, which
 * rounds to 64 bytes only (a 256 KiB limit measured better minimum pools on the shipped
 * traces than 1 MiB, at the same medians in bench_pool). */
#define PL_SLAB_MAX ((size_t)1 << 18)            /* largest granted size served by a slab */
#define PL_NCLASSES 80u                          /* classes 0..79, the last one 256 KiB */
#define PL_PAGE_SHIFT 18u                        /* granule of the page table: 256 KiB */
#define PL_PAGE_MIN ((size_t)1 << PL_PAGE_SHIFT) /* no page is smaller than one granule */
#define PL_PAGE_MAX ((size_t)4 << 20)            /* pages of 32+ slots, capped at 4 MiB */
#define PL_PAGE_SLOTS 32u                        /* slots of a full-grown page, at least */
#define PL_PAGE_GROW 4u                          /* a new page: class live slots / 4 slots */
#define PL_CACHE_PAGES 2u                        /* empty pages a class keeps for reuse */
#define PL_PAGE_MAX_SLOTS 4096u                  /* 64 bitmap words: one summary word */
#define PL_PAGE_ID_MAX 0xfffffffeu               /* page ids 1..PL_PAGE_ID_MAX (0 = none) */

static inline size_t pl_align_up(size_t n)
{
    return (n + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1);
}

/* User buckets: inclusive upper bounds 1 KiB, 16 KiB, 256 KiB, 1 MiB, 16 MiB, 256 MiB, 1 GiB;
 * bucket 7 is everything larger.  pool_bucket_limit[] is built from PL_BUCKET_LIMITS; the
 * hot-path lookup below goes through ceil(log2(size)), which works because every limit is a
 * power of two (test_pool checks that both agree at every boundary). */
#define PL_BUCKET_LIMITS                                                                         \
    {                                                                                            \
        (size_t)1 << 10, (size_t)16 << 10, (size_t)256 << 10, (size_t)1 << 20, (size_t)16 << 20, \
            (size_t)256 << 20, (size_t)1 << 30                                                   \
    }

static inline int pl_bucket_of(size_t size)
{
    /* bucket of a size whose ceil(log2) is the index: size <= 2^10 -> 0, <= 2^14 -> 1, ... */
    static const uint8_t by_log2[65] = {
        [0 ... 10] = 0,  [11 ... 14] = 1, [15 ... 18] = 2, [19 ... 20] = 3,
        [21 ... 24] = 4, [25 ... 28] = 5, [29 ... 30] = 6, [31 ... 64] = 7,
    };
    unsigned c = size <= 1 ? 0 : 64u - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
    return by_log2[c];
}

/* ---- block descriptor ------------------------------------------------------------------- */
enum pblock_state {
    PB_UNUSED = 0, /* on the descriptor free list */
    PB_FREE = 1,   /* free, listed in the large heap's class list */
    PB_LIVE = 2,   /* an allocation, in the address map */
    PB_PAGE = 3,   /* a slab page (its ppage_t in `page`) */
};

typedef struct pblock pblock_t;
typedef struct ppage ppage_t;
/* 64 bytes, one cache line (descriptor pages are 64-byte aligned).  The free-list links and
 * the live-block sizes share storage: a block is never FREE and LIVE at once. */
struct pblock {
    uintptr_t addr;      /* first byte (absolute address), POOL_ALIGN aligned */
    size_t size;         /* bytes, a multiple of POOL_ALIGN, > 0 */
    pblock_t *phys_prev; /* block just below, NULL at ubase */
    pblock_t *phys_next; /* block just above, NULL at uend */
    union {
        struct {
            pblock_t *free_prev; /* FREE: previous in its class list (NULL = list head) */
            pblock_t *free_next; /* FREE: next in its class list; UNUSED: next on free list */
        };
        struct {
            size_t granted;   /* LIVE: bytes the caller's contract gives it (<= size) */
            size_t requested; /* LIVE: bytes the application asked for (statistics) */
        };
    };
    ppage_t *page;  /* PAGE: its slab page; NULL in every other state */
    uint32_t state; /* enum pblock_state */
    uint32_t mark;  /* scratch for pool_check (epoch stamp) */
};
_Static_assert(sizeof(pblock_t) == 64, "pblock_t is one cache line");

/* ---- descriptor storage (desc.c) -------------------------------------------------------- */
typedef struct pdesc_page pdesc_page_t;
typedef struct pdesc {
    pdesc_page_t *pages; /* every descriptor page, for destroy */
    pblock_t *free;      /* UNUSED descriptors, linked through free_next */
    size_t free_count;   /* length of `free` */
    size_t total;        /* descriptors in all pages */
} pdesc_t;

PL_API void pdesc_init(pdesc_t *s);
PL_API void pdesc_destroy(pdesc_t *s);
/* Make sure `n` descriptors can be taken without allocating.  0 ok, -1 host OOM. */
PL_API int pdesc_grow(pdesc_t *s, size_t n);
static inline int pdesc_reserve(pdesc_t *s, size_t n)
{
    return s->free_count >= n ? 0 : pdesc_grow(s, n);
}
/* pre: pdesc_reserve() guaranteed one.  Returns a zeroed descriptor. */
static inline pblock_t *pdesc_get(pdesc_t *s)
{
    pblock_t *b = s->free;
    s->free = b->free_next;
    s->free_count--;
    *b = (pblock_t){0};
    return b;
}

static inline void pdesc_put(pdesc_t *s, pblock_t *b)
{
    *b = (pblock_t){0};
    b->state = PB_UNUSED;
    b->free_next = s->free;
    s->free = b;
    s->free_count++;
}

/* ---- TLSF heap (tlsf.h, tlsf.c) -------------------------------------------------------------- */
#define PH_SL_LOG2 5u
#define PH_SL_COUNT (1u << PH_SL_LOG2) /* 32 second-level classes per power of two */
#define PH_FL_COUNT 56u                /* covers every 64-byte-granular size_t */

typedef struct pheap {
    uint64_t fl_bitmap;                         /* bit f: sl_bitmap[f] != 0 */
    uint32_t sl_bitmap[PH_FL_COUNT];            /* bit s of [f]: head[f][s] != NULL */
    pblock_t *head[PH_FL_COUNT][PH_SL_COUNT];   /* FREE blocks of each class, LIFO */
    size_t free_bytes;                          /* sum of listed block sizes */
    uint64_t free_blocks;                       /* number of listed blocks */
    uint64_t bucket_free_blocks[POOL_NBUCKETS]; /* listed blocks per user bucket (by size) */
    uint64_t bucket_free_bytes[POOL_NBUCKETS];  /* their bytes */
} pheap_t;

PL_API void pheap_init(pheap_t *h);
/* Size of the largest listed block (scans the top non-empty class list), 0 if none. */
PL_API size_t pheap_largest(const pheap_t *h);
/* The operations used on the alloc/free path are inline in tlsf.h:
 *   pheap_mapping(size, &fl, &sl)  class a free block of `size` bytes is listed under
 *   pheap_insert(h, b)             pre: b->state == PB_FREE and b is not listed
 *   pheap_remove(h, b)             pre: b is listed in h
 *   pheap_find(h, size)            a listed block of >= size bytes (multiple of 64) or NULL;
 *                                  changes nothing
 *   pheap_split(h, s, b, size, from_top)
 *                                  pre: b not listed, b->size >= size.  Returns the block of
 *                                  exactly `size` bytes, not listed: from_top = 0: b itself,
 *                                  the rest above becomes a new FREE block; from_top = 1: a new
 *                                  descriptor at the top of b's span, b keeps the rest below,
 *                                  FREE.  The rest (if any) is listed.  Needs one reserved
 *                                  descriptor.
 *   pheap_coalesce(h, s, b)        marks b FREE, merges it with FREE physical neighbours
 *                                  (unlisting them, their descriptors back to storage);
 *                                  returns the merged block, not listed. */

/* ---- size-class slabs (slab.h, slab.c) -------------------------------------------------- */
/* Geometry of one class, the same for every pool (slab.c builds the table once). */
typedef struct pclass_geom {
    uint32_t slot;      /* bytes per slot, a multiple of 64 */
    uint32_t min_slots; /* slots of the smallest page: ceil(PL_PAGE_MIN / slot) */
    uint32_t max_slots; /* slots of the largest page: >= 32 unless that passes 4 MiB,
                                <= PL_PAGE_MAX_SLOTS */
    uint32_t inv;       /* ceil(2^31 / (slot/64)): slot index = (off/64 * inv) >> 31 */
} pclass_geom_t;
PL_API extern pclass_geom_t pl_class_geom[PL_NCLASSES];
PL_API void pl_classes_init(void); /* idempotent, thread-safe (pthread_once) */

/* Per-pool state of one class. */
typedef struct pclass {
    ppage_t *partial; /* pages with 0 < live < nslots, doubly linked, LIFO */
    ppage_t *cached;  /* pages with no live slot kept for reuse, doubly linked */
    uint32_t ncached; /* length of `cached`, <= PL_CACHE_PAGES */
    uint32_t pad;     /* unused */
    uint64_t pages;   /* pages of this class (partial + full + cached) */
    uint64_t live;    /* live slots in them */
} pclass_t;

/* The sizes of a live slot in 32 bits (at 8 bytes the slot records of 100,000 live blocks
 * missed the L2 cache on most frees): granted - 1 in the low 18 bits (granted <=
 * PL_SLAB_MAX), granted - requested in the high 14 bits; PL_REQ_ESCAPE there means the
 * difference does not fit and requested is in pool->req_map under the slot's address.  (For
 * ACL the difference is 32..63 bytes: the map stays empty.) */
typedef uint32_t pslot_t;
#define PL_SLOT_GBITS 18u
#define PL_REQ_ESCAPE 0x3fffu
_Static_assert(PL_SLAB_MAX == (size_t)1 << PL_SLOT_GBITS, "granted - 1 fits the low bits");

/* The free-run summary of one page (pool_stats.c), valid while `dirty` is 0.  A run is a
 * maximal sequence of free slots inside the page; the edge runs (touching slot 0 or the last
 * slot) may merge with free memory outside the page, inner runs cannot. */
typedef struct pruns {
    uint32_t head;      /* free slots from slot 0 up (nslots when the page is all free) */
    uint32_t tail;      /* free slots from the last one down */
    uint32_t inner;     /* runs touching neither edge */
    uint32_t inner_max; /* slots in the longest of them */
    uint32_t inner_blocks[POOL_NBUCKETS]; /* inner runs per user bucket (by run bytes) */
    uint64_t inner_bytes[POOL_NBUCKETS];  /* their bytes */
} pruns_t;

/* One slab page: one 64-byte aligned allocation.  The cold fields come first; the hot ones
 * (everything the alloc/free path reads) start a cache line and are followed at once by the
 * bitmap (3 words share that line) and then the slot records. */
struct ppage {
    /* cold */
    ppage_t *prev; /* partial or cached list of the class: previous (NULL = head) */
    ppage_t *next; /* partial or cached list of the class: next */
    pblock_t *blk; /* its PAGE block in the large tiling */
    uint32_t id;   /* index in pool->page_by_id (the list of all pages) */
    uint32_t mark; /* scratch for pool_check */
    pruns_t runs;  /* free-run summary for the statistics */
    /* hot */
    _Alignas(64) uintptr_t addr; /* first slot (absolute address) */
    uint32_t span;               /* bytes: nslots * slot */
    uint32_t slot;               /* bytes per slot */
    uint32_t inv;                /* class reciprocal (pclass_geom_t.inv) */
    uint32_t nslots;             /* slots */
    uint32_t live;               /* live slots */
    uint16_t cls;                /* class index */
    uint8_t dirty;               /* 1: `runs` is stale (a slot changed since it was computed) */
    uint8_t nwords;              /* bitmap words */
    uint64_t summary;            /* bit w set iff bits[w] != 0 */
    uint64_t bits[];             /* [nwords] bit set = slot free; bits past nslots are 0; then
                                pslot_t[nslots], the sizes of the live slots */
};

static inline pslot_t *pl_slots(const ppage_t *pg)
{
    return (pslot_t *)(uintptr_t)(pg->bits + pg->nwords);
}

/* One entry of the granule table: granule g covers [ubase + g*256K, ubase + (g+1)*256K).
 * A page is at least one granule long, so at most one page starts strictly inside a granule
 * and at most one page covers its first byte. */
#define PL_START_PTR_BITS 52u /* page pointers below 2^52 (checked) */
#define PL_GRAN_LEAF_SHIFT 8u /* a leaf: 256 entries = 4 KiB, 64 MiB of pool */
#define PL_GRAN_LEAF (1u << PL_GRAN_LEAF_SHIFT)
typedef struct pgran {
    ppage_t *cover; /* the page holding the granule's first byte, or NULL */
    uint64_t start; /* the page starting strictly inside the granule: its pointer |
                                (offset/64 << PL_START_PTR_BITS), offset/64 in 1..4095; 0 = none */
} pgran_t;

/* ---- the pool object (pool.c) ----------------------------------------------------------- */
struct pool {
    uintptr_t base;         /* start of the managed range (immutable) */
    size_t size;            /* bytes of the managed range (immutable) */
    uintptr_t ubase;        /* first usable byte: base rounded up to POOL_ALIGN */
    uintptr_t uend;         /* end of usable bytes: base+size rounded down */
    pthread_mutex_t lock;   /* guards everything below */
    pgran_t **gran_dir;     /* granule table, two levels: [ngran / PL_GRAN_LEAF] leaves
                                        of PL_GRAN_LEAF entries, allocated when a page first
                                        needs one (NULL until then); NULL if no page fits */
    size_t ngran;           /* granule entries the table covers */
    ppage_t **page_by_id;   /* [id_cap] page of each id, NULL when the id is unused */
    uint32_t *free_ids;     /* [id_cap] stack of released ids */
    uint32_t id_cap;        /* entries in page_by_id / free_ids */
    uint32_t id_top;        /* ids 1..id_top-1 have been handed out */
    uint32_t nfree_ids;     /* entries on free_ids */
    uint32_t check_epoch;   /* pool_check's mark generation */
    uint64_t pages;         /* slab pages */
    uint64_t cached_pages;  /* of them, empty ones kept by their classes */
    uint64_t gran_refs;     /* non-zero cover/start fields in gran */
    size_t slab_free_bytes; /* bytes of free slots (cached pages included) */
    uint64_t inner_runs;    /* sum of runs.inner over the pages (as last computed) */
    uint64_t inner_blocks[POOL_NBUCKETS]; /* sum of runs.inner_blocks over the pages */
    uint64_t inner_bytes[POOL_NBUCKETS];  /* sum of runs.inner_bytes over the pages */
    pclass_t cls[PL_NCLASSES];            /* size classes */
    pheap_t large;                        /* blocks tiling [ubase, uend) */
    pdesc_t desc;                         /* descriptor storage */
    addrmap_t live;                       /* LIVE large-heap block address -> pblock_t * */
    addrmap_t req_map;                    /* live slot address -> requested, for escaped records */
    pblock_t *large_first;                /* block at ubase */
    size_t allocated_bytes;               /* sum of granted over live blocks and slots */
    size_t requested_bytes;               /* sum of requested over them */
    size_t peak_allocated_bytes;          /* high-water mark of allocated_bytes */
    uint64_t live_blocks;                 /* live blocks and slots */
    uint64_t allocs;                      /* successful pool_alloc calls */
    uint64_t frees;                       /* successful pool_free calls */
    uint64_t failed_allocs;               /* pool_alloc answered POOL_ENOMEM */
    uint64_t invalid_frees;               /* pool_free answered ENOTOWNED / ENOTLIVE */
    uint64_t bucket_live_blocks[POOL_NBUCKETS]; /* live blocks/slots per bucket of granted */
    uint64_t bucket_live_bytes[POOL_NBUCKETS];  /* their granted bytes */
};

/* ---- free-space summary (pool_stats.c) -------------------------------------------------- */
/* Free memory as pool_walk reports it: maximal runs of free bytes in address order, whatever
 * holds them (large free blocks, free slots, cached pages). */
typedef struct pl_freesum {
    size_t free_bytes;                     /* all free bytes */
    size_t largest;                        /* longest run */
    uint64_t free_blocks;                  /* runs */
    uint64_t bucket_blocks[POOL_NBUCKETS]; /* runs per user bucket (by run bytes) */
    uint64_t bucket_bytes[POOL_NBUCKETS];  /* their bytes */
} pl_freesum_t;
/* pre: pool->lock held.  O(1) without pages, else O(pages + bitmap words of changed pages). */
PL_API void pl_free_summary(pool_t *p, pl_freesum_t *out);
/* pool_walk without the lock (pre: held), stopping after `limit` large-heap blocks (a guard
 * against a broken chain when pool_check calls it). */
PL_API int pl_walk_locked(const pool_t *p, pool_walk_fn cb, void *ctx, uint64_t limit);
/* Recompute one page's run summary from its bitmap: O(nwords + runs). */
PL_API void pl_page_runs(const ppage_t *pg, pruns_t *out);
/* Add (sign 1) or take away (sign -1) a page's stored inner runs to/from the pool's sums. */
PL_API void pl_inner_account(pool_t *p, const ppage_t *pg, int sign);

#endif /* NPUPOOL_POOL_INTERNAL_H */
