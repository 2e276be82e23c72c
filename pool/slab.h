/* pool/slab.h — size-class slabs: small blocks as slots of slab pages carved from the large heap.
 *
 * Owns: the class geometry, the slab state of a pool (slab_t: classes, pages, the granule
 * table, the page ids, the escaped slot records), the slot operations (inline here: the alloc
 * and free path of small blocks) and the address -> page lookup; slab.c holds the cold
 * operations (geometry table, page carve and release, the empty-page cache, the granule and
 * id tables' memory, the pages' free-run summaries).
 *
 * Layout: a page is one DESC_PAGE block of the large tiling, tiled exactly by nslots slots of
 * one size (no tail: span = nslots * slot); a slot is free or live (bitmap), live slots record
 * their granted and requested bytes (32-bit records).  Pages are found from an address through
 * the granule table, never through the pool's address map.
 *
 * Algorithm:
 *   class_of(need)   need = granted rounded up to 64 B, <= SLAB_MAX (256 KiB).  u = need/64
 *                    units: u <= 16 -> class u-1 (64-byte steps up to 1 KiB); above, 8 classes
 *                    per power of two: m = floor(log2(u-1)), k = ((u-1) >> (m-3)) - 8, class
 *                    16 + 8(m-4) + k, slot = 2^m + (k+1) 2^(m-3) units.  Internal waste
 *                    < 12.5 %.  O(1).
 *   page_of(addr)    granule g = (addr - ubase) >> 18 (256 KiB); its entry holds the page that
 *                    covers the granule's first byte and the page that starts inside it (with
 *                    its offset), so pages need no alignment beyond 64 B: every page is at
 *                    least one granule long, hence at most one page starts inside a granule.
 *                    The table has two levels (a directory of 4 KiB leaves, so a pool that
 *                    never had a page far away costs no table memory there).  Two table
 *                    reads, one page-header read (the bound check).  O(1), no hash.
 *   slot_take(page)  find-first-set in the summary word, then in that bitmap word (a page has
 *                    at most 4096 slots = 64 words).  O(1).
 *   slot index       offset/64 * inv >> 31 (inv = ceil(2^31 / slot units)), exact for every
 *                    offset inside a page (offset/64 < 2^16, slot units <= 2^12; test_pool
 *                    checks every class exhaustively); the address must equal the slot's start
 *                    and the slot must be live, else POOL_ENOTLIVE and nothing changes.
 *   slot record      32 bits: granted - 1 and granted - requested; a difference that does not
 *                    fit is kept in req_map (expected O(1)).
 * Cache behaviour (the reason for this layout): a free touches the granule entry, the page's
 * geometry line (never written while the page lives, so threads freeing into one page do not
 * bounce it) and one 4-byte slot record; an alloc under the lock the class, the head page's
 * state line (live count, summary, the first 6 bitmap words), one bitmap word and one record;
 * a thread's cache touches only the record of the slot it hands out or takes back (and its tag,
 * beside it on the same line).  The records start a cache line, a page has at least 4 lanes
 * (slots whose records share a line: 8, or fewer on a small page, below), and a thread cache's
 * refill takes slots from a lane of its own while the page has untouched lanes
 * (slab_lane_pick), so the fast paths of two threads allocating from one page do not write one
 * line (two threads, each with 1,000 blocks of 64 B - 64 KiB on shared pages: the load of the
 * freed slot's record took 60 % of a free's perf samples when refills took the lowest free
 * slots).
 * Invariants (pool_check): a page's bitmap has nslots - live bits set and none past nslots;
 * summary bit w <=> bits[w] != 0; a page is on its class's partial list iff 0 < live < nslots;
 * a page with live == 0 exists only on its class's cached list (<= SLAB_CACHE_PAGES); every
 * live slot has granted <= slot and requested <= granted; the granule table names exactly the
 * pages; free_bytes is the sum of the free slots; every page's incarnation (gen) is even.
 * Locking: caller holds pool->lock (slab_geom_init is pthread_once), except the lock-free
 * readers of pool.c, which find a slot's record with slab_rec_find (a sequence lock over the
 * page's incarnation) and take a live slot only with slab_record_claim (a compare-and-swap),
 * as does every free under the lock.
 */
#ifndef NPUPOOL_SLAB_H
#define NPUPOOL_SLAB_H

#include "addrmap.h"
#include "bucket.h"
#include "desc.h"
#include "tlsf.h"

#pragma GCC visibility push(hidden) /* module internals: never exported by the preload library */

/* ---- tunables ----------------------------------------------------------------------------- */
/* Every granted size up to SLAB_MAX is served from a slot of its class: 64-byte steps up to
 * 1 KiB (16 classes), then 8 classes per power of two (internal waste < 12.5 %), 88 classes in
 * all.  Larger requests go to the TLSF heap, which rounds to 64 bytes only.  512 KiB rather
 * than 256 (docs/bench.md, "Measured changes": the shim's pair at 1,000 live of 512 B - 1 MiB
 * 80 -> 70 ns, with every fragmentation trace still at or below best fit) or 1 MiB (the mixed
 * and RMM traces then above best fit; "Tried and dropped").  (Earlier, a 256 KiB limit
 * measured better minimum pools on the shipped traces than 1 MiB, at the same medians in
 * bench_pool). */
#define SLAB_MAX POOL_SLAB_MAX /* largest granted size served by a slab (512 KiB) */
#ifndef SLAB_STEP_LOG2
#define SLAB_STEP_LOG2 3u /* 2^3 = 8 classes per power of two (internal waste < 12.5 %) */
#endif
#define SLAB_STEPS (1u << SLAB_STEP_LOG2) /* classes per power of two */
#define SLAB_LINEAR (2u * SLAB_STEPS)     /* classes of 64-byte steps (to 1 KiB for 8) */
/* classes: the linear ones, then SLAB_STEPS per power of two from SLAB_LINEAR * 64 B to
 * SLAB_MAX (2^19 / 64 = 2^13 units): 88 for 8 steps */
#define SLAB_NCLASSES (SLAB_LINEAR + SLAB_STEPS * (13u - (SLAB_STEP_LOG2 + 1u)))
#define SLAB_PAGE_SHIFT 18u                          /* granule of the page table: 256 KiB */
#define SLAB_PAGE_MIN ((size_t)1 << SLAB_PAGE_SHIFT) /* no page is smaller than one granule */
#define SLAB_PAGE_MAX ((size_t)4 << 20)              /* pages of 32+ slots, capped at 4 MiB */
#define SLAB_PAGE_SLOTS 32u                          /* slots of a full-grown page, at least */
#ifndef SLAB_PAGE_GROW
#define SLAB_PAGE_GROW 4u /* a new page: class live slots / 4 slots */
#endif
#define SLAB_CACHE_PAGES 2u /* empty pages a class keeps for reuse */
#ifndef SLAB_PAGE_MIN_LIVE
#define SLAB_PAGE_MIN_LIVE 8u /* a class gets a new page only with this many live blocks */
#endif
#define SLAB_PAGE_MAX_SLOTS 4096u    /* 64 bitmap words: one summary word */
#define SLAB_PAGE_ID_MAX 0xfffffffeu /* page ids 1..SLAB_PAGE_ID_MAX (0 = none) */
#define SLAB_MEM_MIN_ORDER 8u        /* page metadata blocks: 256 B .. */
#define SLAB_MEM_ORDERS 17u          /* .. 64 KiB (4096 slots take 33 KiB) */

/* ---- types -------------------------------------------------------------------------------- */
/* Geometry of one class, the same for every pool (slab.c builds the table once). */
typedef struct slab_geom {
    uint32_t slot;      /* bytes per slot, a multiple of 64 */
    uint32_t min_slots; /* slots of the smallest page: ceil(SLAB_PAGE_MIN / slot) */
    uint32_t max_slots; /* slots of the largest page: >= 32 unless that passes 4 MiB,
                           <= SLAB_PAGE_MAX_SLOTS */
    uint32_t inv;       /* ceil(2^31 / (slot/64)): slot index = (off/64 * inv) >> 31 */
} slab_geom_t;
extern slab_geom_t slab_geom[SLAB_NCLASSES];
void slab_geom_init(void); /* idempotent, thread-safe (pthread_once) */

typedef struct slab_page slab_page_t;

/* Per-pool state of one class. */
typedef struct slab_class {
    slab_page_t *partial; /* pages with 0 < live < nslots, doubly linked, LIFO */
    slab_page_t *cached;  /* pages with no live slot kept for reuse, doubly linked */
    uint32_t ncached;     /* length of `cached`, <= SLAB_CACHE_PAGES */
    uint32_t pad;         /* unused */
    uint64_t pages;       /* pages of this class (partial + full + cached) */
    uint64_t live;        /* slots taken in them (live, or in a thread's cache) */
    uint64_t outside;     /* live blocks of this class's sizes in the large heap (pool.c) */
} slab_class_t;

/* The sizes of a live slot in 32 bits (at 8 bytes the slot records of 100,000 live blocks
 * missed the L2 cache on most frees): granted - 1 in the low 19 bits (granted <= SLAB_MAX),
 * granted - requested in the high 13 bits; SLAB_REQ_ESCAPE there means the difference does not
 * fit and requested is in slab_t.req_map under the slot's address.  (For ACL the difference is
 * 32..63 bytes: the map stays empty.) */
typedef uint32_t slab_slot_t;
#define SLAB_SLOT_GBITS 19u
#define SLAB_REQ_ESCAPE 0x1fffu
_Static_assert(SLAB_MAX == (size_t)1 << SLAB_SLOT_GBITS, "granted - 1 fits the low bits");
/* The record of a slot that is not live, in a page of a class below SLAB_CACHE_CLASSES: a free
 * slot (its bit set) is SLAB_SLOT_FREE, a slot held in a thread's cache (pool_cache.c: taken
 * from the page, free for the application) SLAB_SLOT_CACHED.  Their granted fields (0x7fffe,
 * 0x7ffff) exceed every slot of those classes, so no live record looks like them; the
 * lock-free free path (pool.c) tells a live slot from the rest by its record alone.  The
 * 512 KiB class (granted up to 2^19) is never cached and its records are read with the bitmap,
 * as before. */
#define SLAB_SLOT_FREE 0xffffffffu
#define SLAB_SLOT_CACHED 0xfffffffeu
#define SLAB_CACHE_CLASSES (SLAB_NCLASSES - 1u) /* classes a thread cache may hold */

/* The free-slot runs of one page (slab_page_runs), valid while the page's `dirty` is 0: a run
 * is a maximal sequence of free slots inside the page (never merged across its edges). */
typedef struct slab_runs {
    uint64_t runs;                  /* runs */
    uint64_t blocks[POOL_NBUCKETS]; /* runs per user bucket (by run bytes) */
    uint64_t bytes[POOL_NBUCKETS];  /* their bytes */
} slab_runs_t;

/* One slab page: one 64-byte aligned allocation.  The cold fields come first; the hot ones
 * (everything the alloc/free path reads) start a cache line and are followed at once by the
 * bitmap (3 words share that line) and then the slot records. */
struct slab_page {
    /* cold */
    slab_page_t *prev; /* partial or cached list of the class: previous (NULL = head) */
    slab_page_t *next; /* partial or cached list of the class: next */
    desc_t *blk;       /* its PAGE block in the large tiling */
    uint32_t id;       /* index in slab_t.page_by_id (the list of all pages) */
    uint32_t mark;     /* scratch for pool_check */
    uint8_t mem_order; /* log2 of the bytes of this block of host memory (slab.c) */
    slab_runs_t runs;  /* free-run summary for the statistics (as last computed) */
    /* geometry: read by every free, the lock-free ones included; never written while the page
     * lives, and alone on its line (a line other threads' refills write would bounce) */
    _Alignas(64) uintptr_t addr; /* first slot (absolute address) */
    uint32_t span;               /* bytes: nslots * slot */
    uint32_t slot;               /* bytes per slot */
    uint32_t inv;                /* class reciprocal (slab_geom_t.inv) */
    uint32_t nslots;             /* slots */
    uint16_t cls;                /* class index */
    uint8_t nwords;              /* bitmap words */
    uint8_t recw;                /* words from bits[] to the records (slab_rec_words) */
    uint8_t rshift;              /* log2 of the bytes from one slot's record (and tag) to the
                                    next: slab_rec_shift(nslots) */
    uint32_t gen;                /* incarnation of this memory: odd while slab_page_new rewrites
                                    it for a new page, +2 per reuse (slab_rec_find) */
    /* state, under the pool lock: the alloc path's line */
    _Alignas(64) uint32_t live; /* slots taken (live, or in a thread's cache) */
    uint8_t dirty;              /* 1: `runs` is stale (a slot changed since it was computed) */
    uint64_t summary;           /* bit w set iff bits[w] != 0 */
    uint64_t bits[];            /* [nwords] bit set = slot free; bits past nslots are 0; then,
                                    from the next cache line (recw words from bits), the sizes
                                    of the live slots (slab_rec), each followed by its tag
                                    (slab_tag, pool_alloc_tagged): slab_rec_bytes in all */
};

/* Lanes: the slots whose records (and tags) share one cache line: a page's records are
 * 2^rshift bytes apart, each followed at once by its 4-byte tag, so lane l is slots
 * [l w, l w + w) with w = 64 >> rshift slots.  w is as large as a line allows (8: a record and
 * its tag side by side, 8 bytes a slot) when the page has at least 4 x 8 slots; a smaller page
 * gets narrower lanes (its records spaced out), at least 4 of them while it has 4 slots: a page
 * of 16 slots of 16 KiB has 4 lanes of 4, one of 2 slots of 128 KiB 2 lanes of 1.  The records
 * start a line, so thread caches that refill from lanes of their own (pool_cache_refill,
 * slab_lane_pick) write lines no other thread's fast path writes.  Wider lanes keep one
 * thread's consecutive slots (a refill's) on fewer lines.  A tag beside its record: a tagged
 * free or allocation (the shim's) touches one line for both, where a tag array of its own cost a
 * second cold line (docs/bench.md, "Tags beside their records"). */
#define SLAB_REC_SHIFT_MIN 3u /* log2 of 8 bytes: a record and its tag side by side */
#define SLAB_LANE (64u >> SLAB_REC_SHIFT_MIN) /* the widest lane: 8 slots to a line */
_Static_assert(sizeof(slab_slot_t) + sizeof(uint32_t) == 1u << SLAB_REC_SHIFT_MIN,
               "a record and its tag fill the narrowest spacing");
#define SLAB_LANES_MIN 4u /* lanes a page gets at least, while it has that many slots */
/* log2 of the bytes from one slot's record to the next in a page of nslots slots: the widest
 * lanes (a power of two, at most SLAB_LANE slots) that still make SLAB_LANES_MIN of them. */
static inline uint32_t slab_rec_shift(uint32_t nslots)
{
    uint32_t w = SLAB_LANE, shift = SLAB_REC_SHIFT_MIN;
    while (w > 1u && nslots < w * SLAB_LANES_MIN) {
        w >>= 1;
        shift++;
    }
    return shift;
}
/* Slots per lane of pg. */
static inline uint32_t slab_lane_width(const slab_page_t *pg) { return 64u >> pg->rshift; }
/* Bytes of a page's records (and of its tags): whole lines. */
static inline size_t slab_rec_bytes(uint32_t nslots, uint32_t rshift)
{
    return (((size_t)nslots << rshift) + 63u) & ~(size_t)63u;
}
/* Words from bits[] to the records: nwords or more, so that the records start a cache line
 * (a page's memory is 64-byte aligned). */
static inline uint32_t slab_rec_words(uint32_t nwords)
{
    uint32_t at = (uint32_t)(offsetof(slab_page_t, bits) / sizeof(uint64_t)) + nwords;
    return nwords + ((8u - at % 8u) % 8u);
}

/* One entry of the granule table: granule g covers [ubase + g*256K, ubase + (g+1)*256K).
 * A page is at least one granule long, so at most one page starts strictly inside a granule
 * and at most one page covers its first byte. */
#define SLAB_START_PTR_BITS 52u /* page pointers below 2^52 (checked) */
#define SLAB_GRAN_LEAF_SHIFT 8u /* a leaf: 256 entries = 4 KiB, 64 MiB of pool */
#define SLAB_GRAN_LEAF (1u << SLAB_GRAN_LEAF_SHIFT)
typedef struct slab_gran {
    slab_page_t *cover; /* the page holding the granule's first byte, or NULL */
    uint64_t start;     /* the page starting strictly inside the granule: its pointer |
                           (offset/64 << SLAB_START_PTR_BITS), offset/64 in 1..4095; 0 = none */
} slab_gran_t;

/* The slab state of one pool.  Pages are carved from `heap` (the pool's large heap) and given
 * back to it; the fields pool_free reads before taking the lock (ubase, ngran, gran_dir)
 * never change after slab_init, and a leaf once made stays until slab_destroy. */
typedef struct slab {
    uintptr_t ubase;        /* origin of the granule table: the pool's first usable byte */
    slab_gran_t **gran_dir; /* granule table, two levels: [ngran / SLAB_GRAN_LEAF] leaves of
                                 SLAB_GRAN_LEAF entries, allocated when a page first needs one
                                 (NULL until then); NULL if no page fits the pool */
    size_t ngran;           /* granule entries the table covers */
    /* (the three fields above are read by the lock-free free path: nothing the locked paths
     * write shares their cache line) */
    _Alignas(64) size_t free_bytes; /* bytes of free slots (cached pages included) */
    uint64_t taken;                 /* slots taken from their pages: live, or in a thread's cache */
    uint64_t pages;                 /* slab pages */
    uint64_t cached_pages;          /* of them, empty ones kept by their classes */
    uint64_t gran_refs;             /* non-zero cover/start fields in the granule table */
    slab_page_t **page_by_id;       /* [id_cap] page of each id, NULL when the id is unused */
    uint32_t *free_ids;             /* [id_cap] stack of released ids */
    uint32_t id_cap;                /* entries in page_by_id / free_ids */
    uint32_t id_top;                /* ids 1..id_top-1 have been handed out */
    uint32_t nfree_ids;             /* entries on free_ids */
    uint32_t pad;                   /* unused */
    slab_runs_t run_sums;           /* sum of every page's `runs` (as last computed) */
    tlsf_t *heap;                   /* the large heap pages come from (the pool's) */
    desc_store_t *desc;             /* its descriptor storage */
    addrmap_t req_map;              /* live slot address -> requested, for escaped records */
    slab_page_t *spare[SLAB_MEM_ORDERS]; /* released pages' memory by log2 bytes (via next) */
    uintptr_t last_addr;                 /* address of the last page made (a hint, slab.c) */
    uint32_t min_live;                   /* SLAB_PAGE_MIN_LIVE (white-box tests set 1) */
    slab_class_t cls[SLAB_NCLASSES];     /* size classes */
} slab_t;

/* ---- hot path (inline) -------------------------------------------------------------------- */
static inline unsigned slab_class_of(size_t need)
{
    debug_assert_internal(need > 0 && need <= SLAB_MAX && need % POOL_ALIGN == 0);
    size_t u = need >> DESC_GRAN_SHIFT;
    /* m = max(log2(u - 1), SLAB_STEP_LOG2): the linear classes (u <= SLAB_LINEAR) come out of
     * the same formula as u - 1, with no branch on the size (sizes arrive in any order) */
    unsigned m = 63u - (unsigned)__builtin_clzll((unsigned long long)((u - 1) | SLAB_STEPS));
    return SLAB_LINEAR + (m - SLAB_STEP_LOG2 - 1u) * SLAB_STEPS +
           (unsigned)((u - 1) >> (m - SLAB_STEP_LOG2)) - SLAB_STEPS;
}

/* A field of a page's geometry.  The lock-free free path may read the geometry of a page that
 * is being released and its memory reused for another (slab_page_of, for an address that is
 * not that page's): the geometry is written (slab.c) and read with relaxed atomics, so such a
 * read sees one value or the other, and the bounds check then refuses the page. */
#define SLAB_GEO(pg, field) __atomic_load_n(&(pg)->field, __ATOMIC_RELAXED)

/* The record of slot idx; the geometry read with SLAB_GEO, so the lock-free paths may call it
 * on a page found for an address that is not live (pool_free). */
static inline slab_slot_t *slab_rec(const slab_page_t *pg, size_t idx)
{
    return (slab_slot_t *)(uintptr_t)((const char *)(pg->bits + SLAB_GEO(pg, recw)) +
                                      (idx << SLAB_GEO(pg, rshift)));
}
/* The slot whose record rec is (pre: rec is one of pg's). */
static inline uint32_t slab_rec_slot(const slab_page_t *pg, const slab_slot_t *rec)
{
    return (uint32_t)(((const char *)rec - (const char *)(pg->bits + pg->recw)) >> pg->rshift);
}
/* Store a slot record: a relaxed atomic, since the lock-free paths read records of slots other
 * threads are changing (pool_block_tag, a racing free); a plain store on every target. */
static inline void slab_record_set(slab_slot_t *rec, slab_slot_t v)
{
    __atomic_store_n(rec, v, __ATOMIC_RELAXED);
}
/* Take a live slot out of the live state: its record from `live` (the value just read) to
 * SLAB_SLOT_CACHED, one compare-and-swap.  Every free that finds a slot of a cached class live
 * (the lock-free path, and the locked one, which other threads' lock-free frees do not wait
 * for) claims it so before it changes anything, so of two threads freeing one block at once
 * exactly one wins and the other is refused (POOL_ENOTLIVE).  With the load and a plain store
 * both won: the slot went into two magazines and was handed out twice (two threads, 200,000
 * rounds of a racing double free: about 1 in 1,000 both accepted, pool_check failed). */
static inline int slab_record_claim(slab_slot_t *rec, slab_slot_t live)
{
    return __atomic_compare_exchange_n(rec, &live, SLAB_SLOT_CACHED, 0, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}
/* Undo a claim that turned out to be of another incarnation of the page (pool.c): the record
 * back to `live` unless something changed it since. */
static inline void slab_record_unclaim(slab_slot_t *rec, slab_slot_t live)
{
    slab_slot_t mine = SLAB_SLOT_CACHED;
    __atomic_compare_exchange_n(rec, &mine, live, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
/* The tag word of the slot whose record is rec (pool_alloc_tagged): the 4 bytes after the
 * record, on its line (records are at least 8 bytes apart and start a line); no geometry read,
 * so the lock-free paths may call it. */
static inline uint32_t *slab_rec_tag(const slab_slot_t *rec)
{
    return (uint32_t *)(uintptr_t)(rec + 1);
}
static inline uint32_t *slab_tag(const slab_page_t *pg, size_t idx)
{
    return slab_rec_tag(slab_rec(pg, idx));
}

/* The page the granule table names for addr, or NULL: the page that may hold it (its bounds
 * not checked).  Lock-free (see slab_page_of).  Whether addr lies in the page that starts
 * inside the granule or in the one that covers its start depends on the address alone, so a
 * branch on it would mispredict about as often as frees land on either side: both words are
 * read (one line) and the choice is a mask.  With the branch-free class_of and peak below,
 * 13-15 % off the mean pair at 1,000 and 100,000 live, and the cache path's median at 1,000
 * live from 30 to 20 ns (docs/bench.md, "Branches that follow the data"). */
static inline slab_page_t *slab_page_named(const slab_t *s, uintptr_t addr)
{
    size_t off = addr - s->ubase; /* wraps for addr < ubase: then >= ngran granules */
    size_t g = off >> SLAB_PAGE_SHIFT;
    if (g >= s->ngran) return NULL;
    slab_gran_t *leaf = __atomic_load_n(&s->gran_dir[g >> SLAB_GRAN_LEAF_SHIFT], __ATOMIC_ACQUIRE);
    if (!leaf) return NULL;
    slab_gran_t *e = &leaf[g & (SLAB_GRAN_LEAF - 1)];
    uint64_t start = __atomic_load_n(&e->start, __ATOMIC_ACQUIRE);
    uint64_t cover = (uint64_t)(uintptr_t)__atomic_load_n(&e->cover, __ATOMIC_ACQUIRE);
    uint64_t unit = (off & (SLAB_PAGE_MIN - 1)) >> DESC_GRAN_SHIFT; /* addr's 64 B unit in it */
    uint64_t in_start = (uint64_t)(start != 0) & (uint64_t)(unit >= (start >> SLAB_START_PTR_BITS));
    uint64_t pick_start = (uint64_t)0 - in_start; /* all ones or zero */
    uint64_t start_page = start & (((uint64_t)1 << SLAB_START_PTR_BITS) - 1);
    return (slab_page_t *)(uintptr_t)((start_page & pick_start) | (cover & ~pick_start));
}

/* The page holding addr, or NULL (any address).  Safe without the lock (the lock-free free
 * path of pool.c): the directory never changes, a leaf stays until slab_destroy, entries are
 * read and written atomically (a page is published with release after its header is set), and
 * a released page's memory is kept for reuse until slab_destroy (slab.c), so a racing lookup of
 * an address that is not live reads stale but valid memory.  For the address of a live slot the
 * answer is exact: its page cannot go away and the entry that names it does not change.  A
 * lookup without the lock that goes on to a slot's record uses slab_rec_find instead. */
static inline slab_page_t *slab_page_of(const slab_t *s, uintptr_t addr)
{
    slab_page_t *pg = slab_page_named(s, addr);
    if (!pg) return NULL;
    return addr - SLAB_GEO(pg, addr) < SLAB_GEO(pg, span) ? pg : NULL;
}

/* Incarnations: a sequence lock over a page's geometry and records.  The memory of a released
 * page is kept and reused by a later page (slab.c), so a lock-free reader that found a page for
 * an address that is not live (a double free, a stale pointer) may read it while slab_page_new
 * rewrites it.  Such a reader could mix two pages' geometry (and compute a record address past
 * the memory), or take a record of the new page for the slot it looked for.  slab_page_new
 * makes gen odd before it rewrites reused memory and even again after (release); the reader
 * takes gen (acquire) before the geometry, checks it again before it reads the record it
 * computed, and once more after it has claimed the slot (pool.c), when the slot it holds keeps
 * the page from being released. */
static inline uint32_t slab_gen_begin(const slab_page_t *pg)
{
    return __atomic_load_n(&pg->gen, __ATOMIC_ACQUIRE);
}
/* 1 when pg is still the incarnation gen (everything read of it before this call belongs to
 * that incarnation). */
static inline int slab_gen_same(const slab_page_t *pg, uint32_t gen)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&pg->gen, __ATOMIC_RELAXED) == gen;
}

/* pre: pg is on no list. */
static inline void slab_list_push(slab_page_t **head, slab_page_t *pg)
{
    debug_assert_internal(pg->prev == NULL && pg->next == NULL && *head != pg);
    pg->prev = NULL;
    pg->next = *head;
    if (*head) (*head)->prev = pg;
    *head = pg;
}

/* pre: pg is on the list at *head. */
static inline void slab_list_remove(slab_page_t **head, slab_page_t *pg)
{
    debug_assert_internal(pg->prev ? pg->prev->next == pg : *head == pg);
    debug_assert_internal(!pg->next || pg->next->prev == pg);
    if (pg->prev)
        pg->prev->next = pg->next;
    else
        *head = pg->next;
    if (pg->next) pg->next->prev = pg->prev;
    pg->prev = pg->next = NULL;
}

/* Move c's first cached page to its partial list (pre: c->cached).  Returns it. */
static inline slab_page_t *slab_uncache(slab_t *s, slab_class_t *c)
{
    slab_page_t *pg = c->cached;
    debug_assert_internal(pg != NULL && c->ncached > 0 && pg->live == 0);
    slab_list_remove(&c->cached, pg);
    c->ncached--;
    s->cached_pages--;
    slab_list_push(&c->partial, pg);
    return pg;
}

static inline size_t slab_slot_granted(slab_slot_t r)
{
    return (size_t)(r & ((1u << SLAB_SLOT_GBITS) - 1)) + 1;
}

/* The record of a live slot of these sizes (pre: !slab_slot_escapes(granted, requested)). */
static inline slab_slot_t slab_slot_record(size_t granted, size_t requested)
{
    return (uint32_t)(granted - 1) | (uint32_t)(granted - requested) << SLAB_SLOT_GBITS;
}

/* 1 when record r (of a page of a class below SLAB_CACHE_CLASSES) is a live slot's. */
static inline int slab_record_live(slab_slot_t r)
{
    return (r & ((1u << SLAB_SLOT_GBITS) - 1)) < (SLAB_SLOT_CACHED & ((1u << SLAB_SLOT_GBITS) - 1));
}

/* 1 when a slot of these sizes needs an entry in req_map. */
static inline int slab_slot_escapes(size_t granted, size_t requested)
{
    return granted - requested >= SLAB_REQ_ESCAPE;
}

/* requested of the live slot at addr with record r. */
static inline size_t slab_slot_requested(const slab_t *s, slab_slot_t r, uintptr_t addr)
{
    uint32_t d = r >> SLAB_SLOT_GBITS;
    uint64_t v = 0;
    if (d != SLAB_REQ_ESCAPE) return slab_slot_granted(r) - d;
    addrmap_get(&s->req_map, addr, &v);
    return (size_t)v;
}

/* Take slot idx of pg (pre: it is free, so pg is on its class's partial list; when
 * slab_slot_escapes(granted, requested), one req_map entry is reserved); record the
 * sizes (granted 0: the slot goes to a thread cache, see below).  Returns the slot's address.
 * A page that becomes full leaves the list. */
static inline uintptr_t slab_slot_take_at(slab_t *s, slab_page_t *pg, uint32_t idx, size_t granted,
                                          size_t requested)
{
    debug_assert_internal(pg->live < pg->nslots && idx < pg->nslots);
    debug_assert_internal(pg->bits[idx / 64u] >> (idx % 64u) & 1);
    debug_assert_internal(granted <= pg->slot && requested <= granted);
    debug_assert_expensive(pg->prev ? pg->prev->next == pg : s->cls[pg->cls].partial == pg);
    unsigned w = idx / 64u;
    uint64_t word = pg->bits[w] & ~(1ull << (idx % 64u));
    pg->bits[w] = word;
    if (!word) pg->summary &= ~(1ull << w);
    uintptr_t addr = pg->addr + (uintptr_t)idx * pg->slot;
    uint32_t d = (uint32_t)(granted - requested);
    if (granted == 0) { /* for a thread cache (slab_slot_take_cached) */
        slab_record_set(slab_rec(pg, idx), SLAB_SLOT_CACHED);
    } else {
        if (d >= SLAB_REQ_ESCAPE) {
            d = SLAB_REQ_ESCAPE;
            addrmap_put_new(&s->req_map, addr, requested); /* reserved by the caller */
        }
        slab_record_set(slab_rec(pg, idx), (uint32_t)(granted - 1) | d << SLAB_SLOT_GBITS);
    }
    pg->dirty = 1;
    s->free_bytes -= pg->slot;
    s->taken++;
    s->cls[pg->cls].live++;
    if (++pg->live == pg->nslots) slab_list_remove(&s->cls[pg->cls].partial, pg);
    return addr;
}

/* Take the lowest free slot of pg, as slab_slot_take_at. */
static inline uintptr_t slab_slot_take(slab_t *s, slab_page_t *pg, size_t granted, size_t requested)
{
    debug_assert_internal(pg->live < pg->nslots && pg->summary != 0);
    unsigned w = (unsigned)__builtin_ctzll(pg->summary);
    return slab_slot_take_at(s, pg, w * 64u + (unsigned)__builtin_ctzll(pg->bits[w]), granted,
                             requested);
}

/* Take free slot idx of pg for a thread cache: its record says SLAB_SLOT_CACHED.
 * pre: as slab_slot_take_at; pg's class is below SLAB_CACHE_CLASSES. */
static inline uintptr_t slab_slot_take_cached(slab_t *s, slab_page_t *pg, uint32_t idx)
{
    debug_assert_internal(pg->cls < SLAB_CACHE_CLASSES);
    return slab_slot_take_at(s, pg, idx, 0, 0);
}

#define SLAB_LANE_NONE UINT32_MAX /* slab_lane_pick: no lane to go on with */
#define SLAB_LANE_SCAN 8u         /* bitmap words slab_lane_pick looks at for an untouched lane */
/* The free slot of pg a thread cache's refill takes next (pre: pg has one): the lowest of lane
 * `lane` (the lane the cache took from before; SLAB_LANE_NONE: none), else the first slot of a
 * lane of which no slot is taken (among the first SLAB_LANE_SCAN words with a free slot), else
 * the lowest free slot.  So threads refilling from one page take lanes of their own while the
 * page has free lanes, and their fast paths do not write each other's record lines.  O(1). */
static inline uint32_t slab_lane_pick(const slab_page_t *pg, uint32_t lane)
{
    uint32_t width = slab_lane_width(pg), first = lane * width; /* lanes never straddle words */
    if (lane != SLAB_LANE_NONE && first < pg->nslots) {
        uint64_t f = (pg->bits[first / 64u] >> (first % 64u)) & ((1ull << width) - 1);
        if (f) return first + (uint32_t)__builtin_ctzll(f);
    }
    /* lane starts: every width-th bit (0x0001000100010001 for 16) */
    uint64_t starts = ~0ull / ((1ull << width) - 1);
    uint64_t sum = pg->summary;
    for (unsigned n = 0; sum && n < SLAB_LANE_SCAN; n++, sum &= sum - 1) {
        uint32_t w = (uint32_t)__builtin_ctzll(sum);
        uint64_t x = pg->bits[w]; /* bit i of x: slots i..i+width-1 all free (past nslots: 0) */
        for (uint32_t k = 1; k < width; k <<= 1) x &= x >> k;
        x &= starts;
        if (x) return w * 64u + (uint32_t)__builtin_ctzll(x);
    }
    uint32_t w = (uint32_t)__builtin_ctzll(pg->summary);
    return w * 64u + (uint32_t)__builtin_ctzll(pg->bits[w]);
}

/* Slot index of addr in pg if addr is the start of a live slot, else -1. */
static inline long slab_slot_live(const slab_page_t *pg, uintptr_t addr)
{
    uintptr_t off = addr - pg->addr;
    if (off & (POOL_ALIGN - 1)) return -1;
    uint32_t u = (uint32_t)(off >> DESC_GRAN_SHIFT);
    uint32_t idx = (uint32_t)(((uint64_t)u * pg->inv) >> 31);
    if ((uintptr_t)idx * pg->slot != off) return -1;
    /* A slot of a thread-cached class: its record alone says (a free slot's is SLAB_SLOT_FREE,
     * one in a thread's cache SLAB_SLOT_CACHED; pool_check holds them to the bitmap), and the
     * free that asks has just read it, where the bitmap word would be one more miss. */
    if (pg->cls < SLAB_CACHE_CLASSES)
        return slab_record_live(__atomic_load_n(slab_rec(pg, idx), __ATOMIC_RELAXED)) ? (long)idx
                                                                                      : -1;
    if (pg->bits[idx >> 6] >> (idx & 63) & 1) return -1; /* free: double free */
    return (long)idx;
}

/* Slot index of addr in pg if addr is the start of a slot (live or not), else -1.  Reads only
 * the page's geometry (SLAB_GEO): the lock-free free path's first step.  An index below nslots
 * whose slot starts at addr puts addr inside the page: no other bound is needed. */
static inline long slab_slot_index(const slab_page_t *pg, uintptr_t addr)
{
    uintptr_t off = addr - SLAB_GEO(pg, addr);
    uint32_t idx =
        (uint32_t)(((uint64_t)(uint32_t)(off >> DESC_GRAN_SHIFT) * SLAB_GEO(pg, inv)) >> 31);
    if ((off & (POOL_ALIGN - 1)) || (uintptr_t)idx * SLAB_GEO(pg, slot) != off ||
        idx >= SLAB_GEO(pg, nslots))
        return -1;
    return (long)idx;
}

/* What slab_rec_find found: a slot's page, its record, the page's class and incarnation. */
typedef struct slab_found {
    slab_page_t *pg;
    slab_slot_t *rec;
    uint32_t gen;
    uint32_t cls;
} slab_found_t;

/* Without the lock: the record of the slot that starts at addr, in a page of a thread-cached
 * class, all of it read in one incarnation of the page.  0 when there is none (not in a page,
 * not a slot's start, the 256 KiB class, or the page is being rewritten): the caller takes the
 * locked path, which decides. */
__attribute__((always_inline)) static inline int slab_rec_find(const slab_t *s, uintptr_t addr,
                                                               slab_found_t *f)
{
    slab_page_t *pg = slab_page_named(s, addr);
    if (!pg) return 0;
    uint32_t gen = slab_gen_begin(pg);
    if (gen & 1u) return 0;
    uint32_t cls = SLAB_GEO(pg, cls);
    long idx;
    if (cls >= SLAB_CACHE_CLASSES || (idx = slab_slot_index(pg, addr)) < 0) return 0;
    slab_slot_t *rec = slab_rec(pg, (size_t)idx);
    if (!slab_gen_same(pg, gen)) return 0;
    *f = (slab_found_t){pg, rec, gen, cls};
    return 1;
}

/* First free slot >= i, or nslots.  O(words skipped). */
static inline uint32_t slab_next_free(const slab_page_t *pg, uint32_t i)
{
    while (i < pg->nslots) {
        uint32_t w = i >> 6;
        uint64_t m = pg->bits[w] & (~0ull << (i & 63));
        if (m) return w * 64u + (uint32_t)__builtin_ctzll(m); /* bits past nslots are 0 */
        i = (w + 1) * 64u;
    }
    return pg->nslots;
}

/* First live slot >= i, or nslots.  O(words skipped). */
static inline uint32_t slab_next_live(const slab_page_t *pg, uint32_t i)
{
    while (i < pg->nslots) {
        uint32_t w = i >> 6;
        uint64_t m = ~pg->bits[w] & (~0ull << (i & 63));
        if (m) {
            uint32_t r = w * 64u + (uint32_t)__builtin_ctzll(m);
            return r < pg->nslots ? r : pg->nslots;
        }
        i = (w + 1) * 64u;
    }
    return pg->nslots;
}

void slab_page_emptied(slab_t *s, slab_page_t *pg); /* slab.c: cache or give back */

/* Free live slot idx of pg (pre: slab_slot_live said so).  A page that empties is cached or
 * given back to the large heap (then pg is gone). */
static inline void slab_slot_give(slab_t *s, slab_page_t *pg, uint32_t idx)
{
    debug_assert_internal(idx < pg->nslots && pg->live > 0 && pg->live <= pg->nslots);
    debug_assert_internal(!(pg->bits[idx >> 6] >> (idx & 63) & 1));
    pg->bits[idx >> 6] |= 1ull << (idx & 63);
    pg->summary |= 1ull << (idx >> 6);
    slab_record_set(slab_rec(pg, idx), SLAB_SLOT_FREE);
    pg->dirty = 1;
    s->free_bytes += pg->slot;
    s->taken--;
    slab_class_t *c = &s->cls[pg->cls];
    c->live--;
    uint32_t was = pg->live--;
    if (pg->live == 0) {
        if (was != pg->nslots) slab_list_remove(&c->partial, pg);
        slab_page_emptied(s, pg);
    } else if (was == pg->nslots) {
        slab_list_push(&c->partial, pg);
    }
}

/* ---- cold operations (slab.c) ------------------------------------------------------------- */
/* Set up the slab state of a pool whose usable range is [ubase, ubase + usable), with pages
 * carved from `heap` (descriptors from `desc`).  0 ok, -1 host OOM (then slab_destroy). */
int slab_init(slab_t *s, uintptr_t ubase, size_t usable, tlsf_t *heap, desc_store_t *desc);
void slab_destroy(slab_t *s);
/* Bytes of the page slab_page_new would carve for class c now (it grows with the class's live
 * slots). */
size_t slab_page_span(const slab_t *s, unsigned c);
/* A fresh page of class c carved from the large heap (from the top of a free block), pushed on
 * the class's partial list; NULL when no free block is large enough (after giving back the
 * cached pages), when host memory or page ids run out.  pre: one descriptor reserved. */
slab_page_t *slab_page_new(slab_t *s, unsigned c);
/* tlsf_find in the large heap; on a miss with cached pages, give them back and search once
 * more.  Changes nothing else. */
desc_t *slab_large_find(slab_t *s, size_t need);
/* Give every cached empty page back to the large heap.  Returns how many. */
unsigned slab_release_cached(slab_t *s);
/* Recompute one page's run summary from its bitmap: O(nwords + runs). */
void slab_page_runs(const slab_page_t *pg, slab_runs_t *out);
/* Bring every page's run summary and run_sums up to date: O(pages + bitmap words of the pages
 * changed since the last call). */
void slab_refresh_runs(slab_t *s);

#pragma GCC visibility pop
#endif /* NPUPOOL_SLAB_H */
