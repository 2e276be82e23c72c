/* pool/slab.h — size-class slabs: the hot path (inline) of small allocations.
 *
 * Owns: the slot operations of slab pages, the 32-bit slot records and the address -> page
 * lookup; slab.c holds the cold operations (class geometry, page carve/release, the empty-page
 * cache, the granule table's memory).
 *
 * Algorithm:
 *   class_of(need)   need = granted rounded up to 64 B, <= PL_SLAB_MAX (256 KiB).  u = need/64
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
 *   slot record      32 bits: granted - 1 and granted - requested (pool_internal.h); a
 *                    difference that does not fit is kept in req_map (expected O(1)).
 * Cache behaviour (the reason for this layout): a free touches the granule entry, the page's
 * first hot cache line (header + the first 3 bitmap words) and one 4-byte slot record; an
 * alloc the class, the head page's hot line, one bitmap word and one slot record.
 * Invariants (pool_check): a page's bitmap has nslots - live bits set and none past nslots;
 * summary bit w <=> bits[w] != 0; a page is on its class's partial list iff 0 < live < nslots;
 * a page with live == 0 exists only on its class's cached list (<= PL_CACHE_PAGES); every
 * live slot has granted <= slot and requested <= granted; the granule table names exactly the
 * pages.
 * Locking: caller holds pool->lock.
 */
#ifndef NPUPOOL_SLAB_H
#define NPUPOOL_SLAB_H

#include "pool_internal.h"

static inline unsigned pl_class_of(size_t need)
{
    size_t u = need >> PL_GRAN_SHIFT;
    if (u <= 16) return (unsigned)u - 1;
    unsigned m = 63u - (unsigned)__builtin_clzll((unsigned long long)(u - 1));
    return 16u + (m - 4u) * 8u + (unsigned)((u - 1) >> (m - 3u)) - 8u;
}

/* The page holding addr, or NULL.  pre: addr inside [base, base+size). */
static inline ppage_t *pl_page_of(const pool_t *p, uintptr_t addr)
{
    size_t off = addr - p->ubase; /* wraps for addr < ubase: then >= ngran granules */
    size_t g = off >> PL_PAGE_SHIFT;
    if (g >= p->ngran) return NULL;
    const pgran_t *leaf = p->gran_dir[g >> PL_GRAN_LEAF_SHIFT];
    if (!leaf) return NULL;
    pgran_t e = leaf[g & (PL_GRAN_LEAF - 1)];
    ppage_t *pg = e.cover;
    if (e.start && ((off & (PL_PAGE_MIN - 1)) >> PL_GRAN_SHIFT) >= (e.start >> PL_START_PTR_BITS))
        pg = (ppage_t *)(uintptr_t)(e.start & (((uint64_t)1 << PL_START_PTR_BITS) - 1));
    if (!pg) return NULL;
    return addr - pg->addr < pg->span ? pg : NULL;
}

static inline void pl_list_push(ppage_t **head, ppage_t *pg)
{
    pg->prev = NULL;
    pg->next = *head;
    if (*head) (*head)->prev = pg;
    *head = pg;
}

static inline void pl_list_remove(ppage_t **head, ppage_t *pg)
{
    if (pg->prev)
        pg->prev->next = pg->next;
    else
        *head = pg->next;
    if (pg->next) pg->next->prev = pg->prev;
    pg->prev = pg->next = NULL;
}

static inline void pl_partial_push(pclass_t *c, ppage_t *pg) { pl_list_push(&c->partial, pg); }
static inline void pl_partial_remove(pclass_t *c, ppage_t *pg) { pl_list_remove(&c->partial, pg); }

/* Move c's first cached page to its partial list (pre: c->cached).  Returns it. */
static inline ppage_t *pl_uncache(pool_t *p, pclass_t *c)
{
    ppage_t *pg = c->cached;
    pl_list_remove(&c->cached, pg);
    c->ncached--;
    p->cached_pages--;
    pl_partial_push(c, pg);
    return pg;
}

static inline size_t pl_slot_granted(pslot_t s)
{
    return (size_t)(s & ((1u << PL_SLOT_GBITS) - 1)) + 1;
}

/* 1 when a slot of these sizes needs an entry in req_map. */
static inline int pl_slot_escapes(size_t granted, size_t requested)
{
    return granted - requested >= PL_REQ_ESCAPE;
}

/* requested of the live slot at addr with record s. */
static inline size_t pl_slot_requested(const pool_t *p, pslot_t s, uintptr_t addr)
{
    uint32_t d = s >> PL_SLOT_GBITS;
    uint64_t v = 0;
    if (d != PL_REQ_ESCAPE) return pl_slot_granted(s) - d;
    addrmap_get(&p->req_map, addr, &v);
    return (size_t)v;
}

/* Take the lowest free slot of pg (pre: pg is on its class's partial list, so it has one;
 * when pl_slot_escapes(granted, requested), one req_map entry is reserved); record the sizes.
 * Returns the slot's address.  A page that becomes full leaves the list. */
static inline uintptr_t pl_slot_take(pool_t *p, ppage_t *pg, size_t granted, size_t requested)
{
    unsigned w = (unsigned)__builtin_ctzll(pg->summary);
    uint64_t word = pg->bits[w];
    unsigned idx = w * 64u + (unsigned)__builtin_ctzll(word);
    word &= word - 1;
    pg->bits[w] = word;
    if (!word) pg->summary &= ~(1ull << w);
    uintptr_t addr = pg->addr + (uintptr_t)idx * pg->slot;
    uint32_t d = (uint32_t)(granted - requested);
    if (d >= PL_REQ_ESCAPE) {
        d = PL_REQ_ESCAPE;
        addrmap_put_new(&p->req_map, addr, requested); /* reserved by the caller */
    }
    pl_slots(pg)[idx] = (uint32_t)(granted - 1) | d << PL_SLOT_GBITS;
    pg->dirty = 1;
    p->slab_free_bytes -= pg->slot;
    p->cls[pg->cls].live++;
    if (++pg->live == pg->nslots) pl_partial_remove(&p->cls[pg->cls], pg);
    return addr;
}

/* Slot index of addr in pg if addr is the start of a live slot, else -1. */
static inline long pl_slot_live(const ppage_t *pg, uintptr_t addr)
{
    uintptr_t off = addr - pg->addr;
    if (off & (POOL_ALIGN - 1)) return -1;
    uint32_t u = (uint32_t)(off >> PL_GRAN_SHIFT);
    uint32_t idx = (uint32_t)(((uint64_t)u * pg->inv) >> 31);
    if ((uintptr_t)idx * pg->slot != off) return -1;
    if (pg->bits[idx >> 6] >> (idx & 63) & 1) return -1; /* free: double free */
    return (long)idx;
}

/* First free slot >= i, or nslots.  O(words skipped). */
static inline uint32_t pl_next_free(const ppage_t *pg, uint32_t i)
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
static inline uint32_t pl_next_live(const ppage_t *pg, uint32_t i)
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

PL_API void pl_page_emptied(pool_t *p, ppage_t *pg); /* slab.c: cache or give back */

/* Free live slot idx of pg.  May cache or release the page (then pg is gone). */
static inline void pl_slot_give(pool_t *p, ppage_t *pg, uint32_t idx)
{
    pg->bits[idx >> 6] |= 1ull << (idx & 63);
    pg->summary |= 1ull << (idx >> 6);
    pg->dirty = 1;
    p->slab_free_bytes += pg->slot;
    pclass_t *c = &p->cls[pg->cls];
    c->live--;
    uint32_t was = pg->live--;
    if (pg->live == 0) {
        if (was != pg->nslots) pl_partial_remove(c, pg);
        pl_page_emptied(p, pg);
    } else if (was == pg->nslots) {
        pl_partial_push(c, pg);
    }
}

/* ---- cold operations (slab.c) ------------------------------------------------------------ */
/* Granule table and id tables for a pool whose range is set.  0 ok, -1 host OOM. */
PL_API int pl_slab_init(pool_t *p);
PL_API void pl_slab_destroy(pool_t *p);
/* A fresh page of class c carved from the large heap (from the top of a free block), pushed on
 * the class's partial list; NULL when no free block is large enough (after giving back the
 * cached pages), when host memory or page ids run out.  pre: one descriptor reserved. */
PL_API ppage_t *pl_page_new(pool_t *p, unsigned c);
/* pheap_find in the large heap; on a miss with cached pages, give them back and search once
 * more.  Changes nothing else. */
PL_API pblock_t *pl_large_find(pool_t *p, size_t need);
/* Give every cached empty page back to the large heap.  Returns how many. */
PL_API unsigned pl_release_cached(pool_t *p);

#endif /* NPUPOOL_SLAB_H */
