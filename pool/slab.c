/* pool/slab.c — size-class slabs: class geometry, page carve and release, the empty-page
 * cache, the granule and id tables.  (The alloc/free path is inline in slab.h, whose header
 * states the algorithm and the invariants.)
 *
 * Pages: a page of class c holds n slots of slot(c) bytes (no tail), n = the class's live
 * slots / PL_PAGE_GROW (4), clamped to [min_slots, max_slots]: min_slots = ceil(256 KiB /
 * slot) (a page is at least one granule; 1 for the 256 KiB class), max_slots = max(32,
 * min_slots), cut so a page stays <= 4 MiB (classes above 128 KiB: 16..28) and <= 4096 slots.
 * So a class with few live slots gets small pages: the free slots stranded in a class's
 * newest page are at most ~1/4 of its live slots (or one minimum page), while a busy class
 * gets pages of up to 4096 slots / 4 MiB.  A page is carved from the TOP of a large free
 * block (pheap_split from_top; large blocks are cut from the bottom of theirs, so pages and
 * large blocks grow towards each other instead of interleaving).  Its host metadata (cold
 * fields, hot header + bitmap, 4-byte slot records) is one 64-byte aligned malloc.  The
 * granule table (16 bytes per 256 KiB of pool) has two levels: a directory allocated with
 * the pool (8 bytes per 64 MiB) and 4 KiB leaves allocated when a page first lands in their
 * 64 MiB, kept until pool_destroy.  (A flat MAP_NORESERVE table cost 3.3 MB of address space
 * per 51 GiB pool; the shim keeps the metadata of pools retired by aclrtResetDevice, and a
 * reset loop ran out of mappings under TSan.)
 * Empty pages: when a page's last live slot is freed it joins its class's cached list; a
 * class keeps at most PL_CACHE_PAGES (2) of them: when the list is full, the lowest-addressed
 * of the cached pages and the new one is given back to the large heap (coalesced there; pages
 * stack downwards, so the lowest is the one that can merge into the free space below).
 * Cached pages count as free memory and serve the class's next page needs; all of them are
 * given back when a large-heap search misses (then the search is repeated once) and when the
 * pool holds no live block any more, so an empty pool is one free block over [ubase, uend)
 * and a cached page never causes a refusal.
 * Bounds: page carve = one pheap_find (+ at most one release of every cached page and a
 * second find), one split, <= 17 granule entries, one malloc, nwords bitmap stores; page
 * release = <= 17 granule entries, one coalesce, one free; caching a page scans <=
 * PL_CACHE_PAGES pages; releasing the cache is at most PL_NCLASSES * PL_CACHE_PAGES page
 * releases.  All independent of the number of live blocks.
 * Locking: caller holds pool->lock (pl_classes_init is pthread_once).
 */
#include <stdlib.h>
#include <string.h>

#include "slab.h"
#include "tlsf.h"

pclass_geom_t pl_class_geom[PL_NCLASSES];
static pthread_once_t classes_once = PTHREAD_ONCE_INIT;

static void classes_build(void)
{
    for (unsigned c = 0; c < PL_NCLASSES; c++) {
        size_t units;
        if (c < 16) {
            units = c + 1;
        } else {
            unsigned k = c - 16, m = 4 + k / 8, j = k % 8;
            units = ((size_t)1 << m) + ((size_t)(j + 1) << (m - 3));
        }
        size_t slot = units << PL_GRAN_SHIFT;
        size_t lo = (PL_PAGE_MIN + slot - 1) / slot, hi = lo;
        if (hi < PL_PAGE_SLOTS) hi = PL_PAGE_SLOTS;
        if (hi * slot > PL_PAGE_MAX) hi = PL_PAGE_MAX / slot;
        if (hi > PL_PAGE_MAX_SLOTS) hi = PL_PAGE_MAX_SLOTS;
        if (lo > hi) lo = hi;
        pl_class_geom[c] = (pclass_geom_t){
            .slot = (uint32_t)slot,
            .min_slots = (uint32_t)lo,
            .max_slots = (uint32_t)hi,
            .inv = (uint32_t)((((uint64_t)1 << 31) + units - 1) / units),
        };
    }
}

void pl_classes_init(void) { pthread_once(&classes_once, classes_build); }

int pl_slab_init(pool_t *p)
{
    size_t usable = p->uend - p->ubase;
    if (usable < PL_PAGE_MIN)
        return 0; /* no page ever fits: every request goes to the large heap */
    p->ngran = (usable + PL_PAGE_MIN - 1) >> PL_PAGE_SHIFT;
    p->gran_dir = calloc((p->ngran + PL_GRAN_LEAF - 1) >> PL_GRAN_LEAF_SHIFT, sizeof(pgran_t *));
    if (!p->gran_dir) {
        p->ngran = 0;
        return -1;
    }
    p->id_top = 1;
    return 0;
}

void pl_slab_destroy(pool_t *p)
{
    for (uint32_t id = 1; id < p->id_top; id++) free(p->page_by_id[id]);
    if (p->gran_dir)
        for (size_t i = 0; i < (p->ngran + PL_GRAN_LEAF - 1) >> PL_GRAN_LEAF_SHIFT; i++)
            free(p->gran_dir[i]);
    free(p->gran_dir);
    free(p->page_by_id);
    free(p->free_ids);
    p->gran_dir = NULL;
    p->ngran = 0;
    p->page_by_id = NULL;
    p->free_ids = NULL;
}

static inline pgran_t *gran_at(pool_t *p, size_t g)
{
    return &p->gran_dir[g >> PL_GRAN_LEAF_SHIFT][g & (PL_GRAN_LEAF - 1)];
}

/* Make sure the leaves for a page over [addr, addr+span) exist.  0 ok, -1 host OOM (leaves
 * made so far stay: they are empty and harmless).  Leaves are kept until pool_destroy; the
 * directory slot is written with an atomic store because pool_free reads it before taking the
 * lock (to prefetch the entry). */
static int gran_leaves(pool_t *p, uintptr_t addr, size_t span)
{
    size_t off = addr - p->ubase;
    size_t l0 = (off >> PL_PAGE_SHIFT) >> PL_GRAN_LEAF_SHIFT;
    size_t l1 = ((off + span - 1) >> PL_PAGE_SHIFT) >> PL_GRAN_LEAF_SHIFT;
    for (size_t l = l0; l <= l1; l++) {
        if (p->gran_dir[l]) continue;
        pgran_t *leaf = calloc(PL_GRAN_LEAF, sizeof *leaf);
        if (!leaf) return -1;
        __atomic_store_n(&p->gran_dir[l], leaf, __ATOMIC_RELEASE);
    }
    return 0;
}

/* Point the granule entries of pg's span at pg (set = 1) or clear them (set = 0).
 * pre: gran_leaves() made the leaves. */
static void gran_set(pool_t *p, ppage_t *pg, int set)
{
    size_t off = pg->addr - p->ubase;
    size_t g0 = off >> PL_PAGE_SHIFT, g1 = (off + pg->span - 1) >> PL_PAGE_SHIFT;
    size_t in = off & (PL_PAGE_MIN - 1);
    if (in == 0)
        gran_at(p, g0)->cover = set ? pg : NULL;
    else
        gran_at(p, g0)->start = set ? (uint64_t)(uintptr_t)pg | (uint64_t)(in >> PL_GRAN_SHIFT)
                                                                    << PL_START_PTR_BITS
                                    : 0;
    for (size_t g = g0 + 1; g <= g1; g++) gran_at(p, g)->cover = set ? pg : NULL;
    if (set)
        p->gran_refs += g1 - g0 + 1;
    else
        p->gran_refs -= g1 - g0 + 1;
}

/* A page id, or 0 when they ran out (or host OOM growing the tables).  Not yet used. */
static uint32_t id_peek(pool_t *p)
{
    if (p->nfree_ids) return p->free_ids[p->nfree_ids - 1];
    if (p->id_top > PL_PAGE_ID_MAX) return 0;
    if (p->id_top >= p->id_cap) {
        uint32_t cap = p->id_cap ? 2 * p->id_cap : 64;
        if (cap > PL_PAGE_ID_MAX + 1) cap = PL_PAGE_ID_MAX + 1;
        ppage_t **a = realloc(p->page_by_id, cap * sizeof *a);
        if (!a) return 0;
        p->page_by_id = a;
        memset(a + p->id_cap, 0, (cap - p->id_cap) * sizeof *a);
        uint32_t *f = realloc(p->free_ids, cap * sizeof *f);
        if (!f) return 0;
        p->free_ids = f;
        p->id_cap = cap;
    }
    return p->id_top;
}

static void id_take(pool_t *p, uint32_t id)
{
    if (p->nfree_ids && p->free_ids[p->nfree_ids - 1] == id)
        p->nfree_ids--;
    else
        p->id_top++;
}

pblock_t *pl_large_find(pool_t *p, size_t need)
{
    pblock_t *b = pheap_find(&p->large, need);
    if (!b && p->cached_pages) {
        pl_release_cached(p);
        b = pheap_find(&p->large, need);
    }
    return b;
}

ppage_t *pl_page_new(pool_t *p, unsigned c)
{
    if (!p->gran_dir) return NULL;
    const pclass_geom_t *g = &pl_class_geom[c];
    uint64_t want = p->cls[c].live / PL_PAGE_GROW;
    uint32_t n = want < g->min_slots   ? g->min_slots
                 : want > g->max_slots ? g->max_slots
                                       : (uint32_t)want;
    uint32_t nwords = (n + 63) / 64;
    size_t span = (size_t)n * g->slot;
    pblock_t *f = pl_large_find(p, span);
    if (!f || gran_leaves(p, f->addr + f->size - span, span) != 0) return NULL;
    uint32_t id = id_peek(p);
    if (!id) return NULL;
    size_t bytes = sizeof(ppage_t) + nwords * sizeof(uint64_t) + n * sizeof(pslot_t);
    ppage_t *pg = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!pg) return NULL;
    if ((uint64_t)(uintptr_t)pg >> PL_START_PTR_BITS) { /* cannot be packed: no page */
        free(pg);
        return NULL;
    }
    id_take(p, id);
    pheap_remove(&p->large, f);
    pblock_t *blk = pheap_split(&p->large, &p->desc, f, span, 1);
    blk->state = PB_PAGE;
    blk->page = pg;
    memset(pg, 0, sizeof *pg);
    pg->addr = blk->addr;
    pg->span = (uint32_t)span;
    pg->slot = g->slot;
    pg->inv = g->inv;
    pg->nslots = n;
    pg->cls = (uint16_t)c;
    pg->dirty = 1;
    pg->nwords = (uint8_t)nwords;
    pg->blk = blk;
    pg->id = id;
    for (uint32_t w = 0; w < nwords; w++) {
        uint32_t left = n - w * 64;
        pg->bits[w] = left >= 64 ? ~0ull : (1ull << left) - 1;
    }
    pg->summary = nwords == 64 ? ~0ull : (1ull << nwords) - 1;
    p->page_by_id[id] = pg;
    gran_set(p, pg, 1);
    p->pages++;
    p->cls[c].pages++;
    p->slab_free_bytes += span;
    pl_partial_push(&p->cls[c], pg);
    return pg;
}

/* Give an empty page (on no list, not cached) back to the large heap. */
static void page_release(pool_t *p, ppage_t *pg)
{
    pblock_t *blk = pg->blk;
    pl_inner_account(p, pg, -1);
    gran_set(p, pg, 0);
    p->page_by_id[pg->id] = NULL;
    p->free_ids[p->nfree_ids++] = pg->id;
    p->pages--;
    p->cls[pg->cls].pages--;
    p->slab_free_bytes -= pg->span;
    free(pg);
    blk->page = NULL;
    pheap_insert(&p->large, pheap_coalesce(&p->large, &p->desc, blk));
}

unsigned pl_release_cached(pool_t *p)
{
    unsigned n = 0;
    for (unsigned c = 0; c < PL_NCLASSES && p->cached_pages; c++) {
        pclass_t *cl = &p->cls[c];
        while (cl->cached) {
            ppage_t *pg = cl->cached;
            pl_list_remove(&cl->cached, pg);
            cl->ncached--;
            p->cached_pages--;
            page_release(p, pg);
            n++;
        }
    }
    return n;
}

void pl_page_emptied(pool_t *p, ppage_t *pg)
{
    pclass_t *c = &p->cls[pg->cls];
    if (p->live_blocks == 0) {
        page_release(p, pg);
        pl_release_cached(p);
        return;
    }
    if (c->ncached == PL_CACHE_PAGES) {
        ppage_t *low = pg;
        for (ppage_t *q = c->cached; q; q = q->next)
            if (q->addr < low->addr) low = q;
        if (low == pg) {
            page_release(p, pg);
            return;
        }
        pl_list_remove(&c->cached, low);
        c->ncached--;
        p->cached_pages--;
        page_release(p, low);
    }
    pl_list_push(&c->cached, pg);
    c->ncached++;
    p->cached_pages++;
}
