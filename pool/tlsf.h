/* pool/tlsf.h — one TLSF heap over the blocks of one state in a tiling of desc_t (tlsf.c).
 *
 * Owns: the class lists and bitmaps of the blocks of the heap's state (DESC_FREE for the pool's
 * large heap; DESC_VOID for the unmapped address ranges of a virtual-memory pool), the heap's
 * counters, and the block operations that keep them (insert, remove, find, split, coalesce).
 * The tiling itself (the phys links) belongs to whoever made the blocks (pool.c, slab.c,
 * pool_vmm.c); this file only cuts and joins blocks that are neighbours in it.
 * Whole chunks: a heap with chunk_shift != 0 also keeps whole_bytes, the bytes of its blocks
 * that fill whole aligned chunks of 2^chunk_shift bytes (a chunk that lies inside one listed
 * block): for the FREE heap of a virtual-memory pool, the physical memory that could be
 * unmapped without touching a live block (O(1) per insert and remove).
 * Algorithm, bounds and invariants: see tlsf.c, which holds the code except the three
 * operations every large alloc/free runs (find, insert, remove: several calls per alloc or
 * free, from pool.c and slab.c), kept static inline here.  Measured (free+alloc pairs of 1,000
 * live blocks of 256 KiB..1 MiB, all in this heap, medians of 6 runs): 68.9 ns with everything
 * inline, 72.5 ns with everything in tlsf.c (+5 %), 70.1 ns with these three inline (+1.7 %,
 * about the run-to-run spread); bench_pool's medians and p99 were the same in all three.
 * Locking: caller holds pool->lock.
 */
#ifndef NPUPOOL_TLSF_H
#define NPUPOOL_TLSF_H

#include "bucket.h"
#include "debug.h"
#include "desc.h"

#pragma GCC visibility push(hidden) /* module internals: never exported by the preload library */

#define TLSF_SL_LOG2 5u
#define TLSF_SL_COUNT (1u << TLSF_SL_LOG2) /* 32 second-level classes per power of two */
#define TLSF_FL_COUNT 56u                  /* covers every 64-byte-granular size_t */
#ifndef TLSF_FIT_SCAN
#define TLSF_FIT_SCAN 16u /* blocks of a class list compared for the best fit (tlsf.c) */
#endif

typedef struct tlsf {
    uint32_t state;                             /* enum desc_state of the listed blocks */
    uint32_t chunk_shift;                       /* log2 chunk bytes for whole_bytes; 0 = none */
    size_t whole_bytes;                         /* bytes of whole chunks inside listed blocks */
    uint64_t fl_bitmap;                         /* bit f: sl_bitmap[f] != 0 */
    uint32_t sl_bitmap[TLSF_FL_COUNT];          /* bit s of [f]: head[f][s] != NULL */
    desc_t *head[TLSF_FL_COUNT][TLSF_SL_COUNT]; /* FREE blocks of each class, LIFO */
    size_t free_bytes;                          /* sum of listed block sizes */
    uint64_t free_blocks;                       /* number of listed blocks */
    uint64_t bucket_free_blocks[POOL_NBUCKETS]; /* listed blocks per user bucket (by size) */
    uint64_t bucket_free_bytes[POOL_NBUCKETS];  /* their bytes */
    desc_t *scratch; /* where a link to a missing neighbour is written: never read (below) */
} tlsf_t;

/* An empty heap of blocks in `state` (DESC_FREE or DESC_VOID); chunk_shift 0 or the log2 of
 * the chunk size whole_bytes counts in. */
void tlsf_init(tlsf_t *h, enum desc_state state, unsigned chunk_shift);
/* Cut a block of exactly `size` bytes out of b.  pre: b is not listed, b->size >= size > 0,
 * one descriptor reserved in s.  Returns that block, not listed: from_top = 0: b itself, the
 * rest above becomes a new block of the heap's state; from_top = 1: a new descriptor at the top
 * of b's span, b keeps the rest below, in the heap's state.  The rest (if any) is listed
 * (not coalesced: b's neighbour on that side must not be in the heap's state). */
desc_t *tlsf_split(tlsf_t *h, desc_store_t *s, desc_t *b, size_t size, int from_top);
/* Put b in the heap's state and merge it with its physical neighbours in that state
 * (unlisting them, their descriptors back to s).  pre: b is in another state and not listed.
 * Returns the merged block, not listed. */
desc_t *tlsf_coalesce(tlsf_t *h, desc_store_t *s, desc_t *b);
/* Size of the largest listed block (scans the top non-empty class list), 0 if none. */
size_t tlsf_largest(const tlsf_t *h);

/* ---- hot operations, inline (see the header for why) ------------------------------------- */
static inline unsigned tlsf_msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* Bytes of [addr, addr+size) that fill whole aligned chunks of 2^shift bytes (shift > 0). */
static inline size_t tlsf_whole(uintptr_t addr, size_t size, unsigned shift)
{
    uintptr_t mask = ((uintptr_t)1 << shift) - 1;
    uintptr_t lo = (addr + mask) & ~mask, hi = (addr + size) & ~mask;
    return hi > lo ? hi - lo : 0;
}

static inline void tlsf_mapping_units(size_t u, unsigned *fl, unsigned *sl)
{
    if (u < TLSF_SL_COUNT) {
        *fl = 0;
        *sl = (unsigned)u;
    } else {
        unsigned m = tlsf_msb64(u);
        *fl = m - TLSF_SL_LOG2 + 1;
        *sl = (unsigned)(u >> (m - TLSF_SL_LOG2)) - TLSF_SL_COUNT;
    }
}

/* Class (fl, sl) a FREE block of `size` bytes is listed under. */
static inline void tlsf_mapping(size_t size, unsigned *fl, unsigned *sl)
{
    tlsf_mapping_units(size >> DESC_GRAN_SHIFT, fl, sl);
}

#if NPUPOOL_DEBUG >= 3
/* 1 when b is on the list of its class (O(list): level-3 assertions only). */
static inline int tlsf_is_listed(const tlsf_t *h, const desc_t *b)
{
    unsigned fl, sl;
    tlsf_mapping(b->size, &fl, &sl);
    for (const desc_t *x = h->head[fl][sl]; x; x = x->free_next)
        if (x == b) return 1;
    return 0;
}
#endif

/* List b.  pre: b->state == h->state, b is not listed. */
static inline void tlsf_insert(tlsf_t *h, desc_t *b)
{
    unsigned fl, sl;
    tlsf_mapping(b->size, &fl, &sl);
    desc_t *head = h->head[fl][sl];
    debug_assert_internal(b->state == h->state && b->size > 0 && b->size % POOL_ALIGN == 0);
    debug_assert_internal(head != b);
    debug_assert_expensive(!tlsf_is_listed(h, b));
    b->free_prev = NULL;
    b->free_next = head;
    desc_t **back = head ? &head->free_prev : &h->scratch; /* a conditional move, no branch */
    *back = b;
    h->head[fl][sl] = b;
    h->sl_bitmap[fl] |= 1u << sl;
    h->fl_bitmap |= 1ull << fl;
    h->free_bytes += b->size;
    h->free_blocks++;
    if (h->chunk_shift) h->whole_bytes += tlsf_whole(b->addr, b->size, h->chunk_shift);
    int k = bucket_of(b->size);
    h->bucket_free_blocks[k]++;
    h->bucket_free_bytes[k] += b->size;
}

/* Unlist b (it keeps its state).  pre: b is listed in h. */
static inline void tlsf_remove(tlsf_t *h, desc_t *b)
{
    unsigned fl, sl;
    tlsf_mapping(b->size, &fl, &sl);
    debug_assert_internal(b->state == h->state);
    debug_assert_internal(b->free_prev ? b->free_prev->free_next == b : h->head[fl][sl] == b);
    debug_assert_internal(!b->free_next || b->free_next->free_prev == b);
    /* Whether b has list neighbours, and whether its class empties, depend on the heap's
     * contents, in no order a branch predictor learns: the links are chosen as addresses
     * (h->scratch standing in for a missing neighbour) and the bitmaps cleared by masks.
     * Large blocks alone, 1,000 live of 256 KiB - 1 MiB, pool/ alone, untimed mean per
     * free + malloc pair 93.5 -> 88.2 ns (three alternated runs; docs/bench.md). */
    desc_t *prev = b->free_prev, *next = b->free_next;
    desc_t **fwd = prev ? &prev->free_next : &h->head[fl][sl];
    desc_t **back = next ? &next->free_prev : &h->scratch;
    *fwd = next;
    *back = prev;
    uint32_t emptied = h->head[fl][sl] == NULL;
    h->sl_bitmap[fl] &= ~(emptied << sl);
    h->fl_bitmap &= ~((uint64_t)(h->sl_bitmap[fl] == 0) << fl);
    b->free_prev = b->free_next = NULL;
    h->free_bytes -= b->size;
    h->free_blocks--;
    if (h->chunk_shift) h->whole_bytes -= tlsf_whole(b->addr, b->size, h->chunk_shift);
    int k = bucket_of(b->size);
    h->bucket_free_blocks[k]--;
    h->bucket_free_bytes[k] -= b->size;
}

/* First block of the first non-empty class at or above (fl, sl). */
static inline desc_t *tlsf_find_suitable(const tlsf_t *h, unsigned fl, unsigned sl)
{
    uint32_t slm = h->sl_bitmap[fl] & (~0u << sl);
    if (!slm) {
        uint64_t flm = fl + 1 < 64 ? h->fl_bitmap & (~0ull << (fl + 1)) : 0;
        if (!flm) return NULL;
        fl = (unsigned)__builtin_ctzll(flm);
        slm = h->sl_bitmap[fl];
    }
    return h->head[fl][(unsigned)__builtin_ctz(slm)];
}

/* The smallest of the first TLSF_FIT_SCAN blocks of list b.. that hold size bytes (the lowest
 * address among equals), or NULL.  *rest (when rest is not NULL): the first block not scanned,
 * NULL when the scan reached the end of the list. */
static inline desc_t *tlsf_best_of(desc_t *b, size_t size, desc_t **rest)
{
    desc_t *best = NULL;
    unsigned n = 0;
    for (; b && n < TLSF_FIT_SCAN; b = b->free_next, n++) {
        if (b->size < size) continue;
        if (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr))
            best = b;
    }
    if (rest) *rest = b;
    return best;
}

/* A listed block of >= size bytes (size a multiple of 64, > 0); NULL only when no listed
 * block is that large (exact: see tlsf.c).  Changes nothing. */
static inline desc_t *tlsf_find(const tlsf_t *h, size_t size)
{
    debug_assert_internal(size > 0 && size % POOL_ALIGN == 0);
    size_t u = size >> DESC_GRAN_SHIFT;
    unsigned f0, s0;
    tlsf_mapping_units(u, &f0, &s0);
    desc_t *own = h->head[f0][s0];
    desc_t *rest = NULL;
    desc_t *b = tlsf_best_of(own, size, &rest); /* step 1 (an empty list: NULL, rest NULL) */
    if (b) return b;
    size_t ur = u;
    if (u >= TLSF_SL_COUNT) ur = u + ((size_t)1 << (tlsf_msb64(u) - TLSF_SL_LOG2)) - 1;
    unsigned f, s;
    tlsf_mapping_units(ur, &f, &s);
    if (f < TLSF_FL_COUNT) {
        desc_t *c = tlsf_find_suitable(h, f, s); /* step 2 */
        if (c) {
            b = tlsf_best_of(c, size, NULL);
            debug_assert_internal(b && b->size >= size);
            return b;
        }
    }
    for (desc_t *x = rest; x; x = x->free_next) /* step 3: the rest of size's own list */
        if (x->size >= size) return x;
    return NULL;
}

#pragma GCC visibility pop
#endif /* NPUPOOL_TLSF_H */
