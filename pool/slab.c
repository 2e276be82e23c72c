/* pool/slab.c — size-class slabs: class geometry, page carve and release, the empty-page
 * cache, the granule and id tables, the pages' free-run summaries.  (The alloc/free path is
 * inline in slab.h, whose header states what the slabs own, the algorithm and the invariants.)
 *
 * Pages: a page of class c holds n slots of slot(c) bytes (no tail), n = the class's live
 * slots / SLAB_PAGE_GROW (4), clamped to [min_slots, max_slots]: min_slots = ceil(256 KiB /
 * slot) (a page is at least one granule; 1 for the 256 KiB class), max_slots = max(32,
 * min_slots), cut so a page stays <= 4 MiB (classes above 128 KiB: 16..28) and <= 4096 slots.
 * So a class with few live slots gets small pages: the free slots stranded in a class's
 * newest page are at most ~1/4 of its live slots (or one minimum page), while a busy class
 * gets pages of up to 4096 slots / 4 MiB.  A page is carved from the TOP of a large free
 * block (tlsf_split from_top; large blocks are cut from the bottom of theirs, so pages and
 * large blocks grow towards each other instead of interleaving).  Its host metadata (cold
 * fields, hot header + bitmap, 4-byte slot records) is one 64-byte aligned block of a power
 * of two bytes, from the spare lists of released pages' memory (kept until slab_destroy: a
 * racing lock-free lookup may still read it) or a new aligned_alloc.  The
 * granule table (16 bytes per 256 KiB of pool) has two levels: a directory allocated with
 * the pool (8 bytes per 64 MiB) and 4 KiB leaves allocated when a page first lands in their
 * 64 MiB, kept until slab_destroy.  (A flat MAP_NORESERVE table cost 3.3 MB of address space
 * per 51 GiB pool; the shim keeps the metadata of pools retired by aclrtResetDevice, and a
 * reset loop ran out of mappings under TSan.)
 * Empty pages: when a page's last live slot is freed it joins its class's cached list; a
 * class keeps at most SLAB_CACHE_PAGES (2) of them: when the list is full, the lowest-addressed
 * of the cached pages and the new one is given back to the large heap (coalesced there; pages
 * stack downwards, so the lowest is the one that can merge into the free space below).
 * Cached pages count as free memory and serve the class's next page needs; all of them are
 * given back when a large-heap search misses (then the search is repeated once) and, by
 * pool.c, when no slot or block is taken any more, so an empty pool is one free block over
 * [ubase, uend) and a cached page never causes a refusal.
 * Run summaries: slab_page_runs counts a page's maximal runs of free slots (per user bucket);
 * each page keeps its last count with a `dirty` flag set by every slot change, and run_sums
 * holds the sum over all pages, updated when a page is recounted or released.
 * Bounds: page carve = one tlsf_find (+ at most one release of every cached page and a
 * second find), one split, <= 17 granule entries, one spare-list pop (or aligned_alloc),
 * nwords bitmap stores; page release = <= 17 granule entries, one coalesce, one spare-list
 * push; caching a page scans <=
 * SLAB_CACHE_PAGES pages; releasing the cache is at most SLAB_NCLASSES * SLAB_CACHE_PAGES page
 * releases.  All independent of the number of live blocks.
 * Locking: caller holds pool->lock (slab_geom_init is pthread_once).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "slab.h"

slab_geom_t slab_geom[SLAB_NCLASSES];
static pthread_once_t geom_once = PTHREAD_ONCE_INIT;

static void geom_build(void)
{
    for (unsigned c = 0; c < SLAB_NCLASSES; c++) {
        size_t units;
        if (c < SLAB_LINEAR) {
            units = c + 1;
        } else {
            unsigned k = c - SLAB_LINEAR, m = SLAB_STEP_LOG2 + 1 + k / SLAB_STEPS,
                     j = k % SLAB_STEPS;
            units = ((size_t)1 << m) + ((size_t)(j + 1) << (m - SLAB_STEP_LOG2));
        }
        size_t slot = units << DESC_GRAN_SHIFT;
        size_t lo = (SLAB_PAGE_MIN + slot - 1) / slot, hi = lo;
        if (hi < SLAB_PAGE_SLOTS) hi = SLAB_PAGE_SLOTS;
        if (hi * slot > SLAB_PAGE_MAX) hi = SLAB_PAGE_MAX / slot;
        if (hi > SLAB_PAGE_MAX_SLOTS) hi = SLAB_PAGE_MAX_SLOTS;
        if (lo > hi) lo = hi;
        slab_geom[c] = (slab_geom_t){
            .slot = (uint32_t)slot,
            .min_slots = (uint32_t)lo,
            .max_slots = (uint32_t)hi,
            .inv = (uint32_t)((((uint64_t)1 << 31) + units - 1) / units),
        };
    }
}

void slab_geom_init(void) { pthread_once(&geom_once, geom_build); }

int slab_init(slab_t *s, uintptr_t ubase, size_t usable, tlsf_t *heap, desc_store_t *desc)
{
    memset(s, 0, sizeof *s);
    slab_geom_init();
    s->ubase = ubase;
    s->min_live = SLAB_PAGE_MIN_LIVE;
    s->heap = heap;
    s->desc = desc;
    if (addrmap_init(&s->req_map, 16) != 0) return -1;
    if (usable < SLAB_PAGE_MIN)
        return 0; /* no page ever fits: every request goes to the large heap */
    s->ngran = (usable + SLAB_PAGE_MIN - 1) >> SLAB_PAGE_SHIFT;
    s->gran_dir =
        calloc((s->ngran + SLAB_GRAN_LEAF - 1) >> SLAB_GRAN_LEAF_SHIFT, sizeof(slab_gran_t *));
    if (!s->gran_dir) {
        s->ngran = 0;
        return -1;
    }
    s->id_top = 1;
    return 0;
}

void slab_destroy(slab_t *s)
{
    for (uint32_t id = 1; id < s->id_top; id++) free(s->page_by_id[id]);
    for (unsigned o = 0; o < SLAB_MEM_ORDERS; o++)
        while (s->spare[o]) {
            slab_page_t *pg = s->spare[o];
            s->spare[o] = pg->next;
            free(pg);
        }
    if (s->gran_dir)
        for (size_t i = 0; i < (s->ngran + SLAB_GRAN_LEAF - 1) >> SLAB_GRAN_LEAF_SHIFT; i++)
            free(s->gran_dir[i]);
    free(s->gran_dir);
    free(s->page_by_id);
    free(s->free_ids);
    addrmap_destroy(&s->req_map);
    s->gran_dir = NULL;
    s->ngran = 0;
    s->page_by_id = NULL;
    s->free_ids = NULL;
}

static inline slab_gran_t *gran_at(slab_t *s, size_t g)
{
    return &s->gran_dir[g >> SLAB_GRAN_LEAF_SHIFT][g & (SLAB_GRAN_LEAF - 1)];
}

/* Make sure the leaves for a page over [addr, addr+span) exist.  0 ok, -1 host OOM (leaves
 * made so far stay: they are empty and harmless).  Leaves are kept until slab_destroy; the
 * directory slot is written with an atomic store because pool_free reads it before taking the
 * lock (to prefetch the entry). */
static int gran_leaves(slab_t *s, uintptr_t addr, size_t span)
{
    size_t off = addr - s->ubase;
    size_t l0 = (off >> SLAB_PAGE_SHIFT) >> SLAB_GRAN_LEAF_SHIFT;
    size_t l1 = ((off + span - 1) >> SLAB_PAGE_SHIFT) >> SLAB_GRAN_LEAF_SHIFT;
    for (size_t l = l0; l <= l1; l++) {
        if (s->gran_dir[l]) continue;
        slab_gran_t *leaf = calloc(SLAB_GRAN_LEAF, sizeof *leaf);
        if (!leaf) return -1;
        __atomic_store_n(&s->gran_dir[l], leaf, __ATOMIC_RELEASE);
    }
    return 0;
}

/* Point the granule entries of pg's span at pg (set = 1) or clear them (set = 0).
 * pre: gran_leaves() made the leaves. */
static void gran_set(slab_t *s, slab_page_t *pg, int set)
{
    size_t off = pg->addr - s->ubase;
    size_t g0 = off >> SLAB_PAGE_SHIFT, g1 = (off + pg->span - 1) >> SLAB_PAGE_SHIFT;
    size_t in = off & (SLAB_PAGE_MIN - 1);
    debug_assert_internal(g1 < s->ngran);
    /* Release stores: the lock-free lookup (slab_page_of) reads a page's header after it. */
    if (in == 0)
        __atomic_store_n(&gran_at(s, g0)->cover, set ? pg : NULL, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&gran_at(s, g0)->start,
                         set ? (uint64_t)(uintptr_t)pg | (uint64_t)(in >> DESC_GRAN_SHIFT)
                                                             << SLAB_START_PTR_BITS
                             : 0,
                         __ATOMIC_RELEASE);
    for (size_t g = g0 + 1; g <= g1; g++)
        __atomic_store_n(&gran_at(s, g)->cover, set ? pg : NULL, __ATOMIC_RELEASE);
    if (set)
        s->gran_refs += g1 - g0 + 1;
    else
        s->gran_refs -= g1 - g0 + 1;
}

/* A page id, or 0 when they ran out (or host OOM growing the tables).  Not yet used. */
static uint32_t id_peek(slab_t *s)
{
    if (s->nfree_ids) return s->free_ids[s->nfree_ids - 1];
    if (s->id_top > SLAB_PAGE_ID_MAX) return 0;
    if (s->id_top >= s->id_cap) {
        uint32_t cap = s->id_cap ? 2 * s->id_cap : 64;
        if (cap > SLAB_PAGE_ID_MAX + 1) cap = SLAB_PAGE_ID_MAX + 1;
        slab_page_t **a = realloc(s->page_by_id, cap * sizeof *a);
        if (!a) return 0;
        s->page_by_id = a;
        memset(a + s->id_cap, 0, (cap - s->id_cap) * sizeof *a);
        uint32_t *f = realloc(s->free_ids, cap * sizeof *f);
        if (!f) return 0;
        s->free_ids = f;
        s->id_cap = cap;
    }
    return s->id_top;
}

static void id_take(slab_t *s, uint32_t id)
{
    if (s->nfree_ids && s->free_ids[s->nfree_ids - 1] == id)
        s->nfree_ids--;
    else
        s->id_top++;
}

/* Add (sign 1) or take away (sign -1) a page's stored runs to/from run_sums. */
static void runs_account(slab_t *s, const slab_page_t *pg, int sign)
{
    const slab_runs_t *r = &pg->runs;
    slab_runs_t *t = &s->run_sums;
    t->runs += (uint64_t)(int64_t)sign * r->runs;
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        t->blocks[k] += (uint64_t)(int64_t)sign * r->blocks[k];
        t->bytes[k] += (uint64_t)(int64_t)sign * r->bytes[k];
    }
}

desc_t *slab_large_find(slab_t *s, size_t need)
{
    desc_t *b = tlsf_find(s->heap, need);
    if (!b && s->cached_pages) {
        slab_release_cached(s);
        b = tlsf_find(s->heap, need);
    }
    return b;
}

static uint32_t page_slots(const slab_t *s, unsigned c)
{
    const slab_geom_t *g = &slab_geom[c];
    uint64_t want = s->cls[c].live / SLAB_PAGE_GROW;
    return want < g->min_slots ? g->min_slots : want > g->max_slots ? g->max_slots : (uint32_t)want;
}

size_t slab_page_span(const slab_t *s, unsigned c)
{
    return (size_t)page_slots(s, c) * slab_geom[c].slot;
}

/* Page memory: one 64-byte aligned block of a power of two (>= SLAB_MEM_MIN) bytes, kept on
 * its size's spare list when the page is released and reused by the next page that fits it;
 * given back to the C library only by slab_destroy.  So the lock-free lookup never reads freed
 * memory (slab.h: slab_page_of), at the price of at most twice the pages' host metadata. */
static unsigned mem_order(size_t bytes)
{
    unsigned o = SLAB_MEM_MIN_ORDER;
    while (((size_t)1 << o) < bytes) o++;
    return o;
}

/* Memory for a page of `bytes`: a spare of its order, or a new one; its order into *order.
 * A spare is marked as being rewritten at once (its incarnation made odd: slab.h,
 * slab_rec_find), before anything of it changes; a new block starts at incarnation 0. */
static slab_page_t *page_mem_get(slab_t *s, size_t bytes, unsigned *order)
{
    unsigned o = *order = mem_order(bytes);
    if (o >= SLAB_MEM_ORDERS) return NULL;
    slab_page_t *pg = s->spare[o];
    if (pg) {
        s->spare[o] = pg->next;
        __atomic_store_n(&pg->gen, pg->gen + 1u, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE); /* odd before any other store */
        return pg;
    }
    pg = aligned_alloc(64, (size_t)1 << o);
    if (pg) __atomic_store_n(&pg->gen, 0u, __ATOMIC_RELAXED);
    return pg;
}

static void page_mem_put(slab_t *s, slab_page_t *pg)
{
    unsigned o = pg->mem_order;
    pg->next = s->spare[o];
    s->spare[o] = pg;
}

slab_page_t *slab_page_new(slab_t *s, unsigned c)
{
    debug_assert_internal(c < SLAB_NCLASSES && s->desc->free_count >= 1);
    if (!s->gran_dir) return NULL;
    /* A class with few live blocks gets no page: its blocks go to the large heap, where they
     * take their size rounded to 64 B instead of pinning a page of >= 256 KiB. */
    if (s->cls[c].live + s->cls[c].outside + 1 < s->min_live) return NULL;
    const slab_geom_t *g = &slab_geom[c];
    uint32_t n = page_slots(s, c);
    uint32_t nwords = (n + 63) / 64;
    size_t span = (size_t)n * g->slot;
    /* Pages stack downwards from the top of the range: the free block just below the last
     * page made, if it holds this one, else the best fit (whose top end is taken). */
    desc_t *f = NULL;
    const slab_page_t *last = s->last_addr ? slab_page_of(s, s->last_addr) : NULL;
    if (last && last->addr == s->last_addr) {
        desc_t *below = last->blk->phys_prev;
        if (below && below->state == DESC_FREE && below->size >= span) f = below;
    }
    if (!f) f = slab_large_find(s, span);
    if (!f || gran_leaves(s, f->addr + f->size - span, span) != 0) return NULL;
    uint32_t id = id_peek(s);
    if (!id) return NULL;
    uint32_t recw = slab_rec_words(nwords), rshift = slab_rec_shift(n);
    size_t rec_bytes = slab_rec_bytes(n, rshift); /* the tags included */
    size_t bytes = sizeof(slab_page_t) + recw * sizeof(uint64_t) + rec_bytes;
    unsigned order;
    slab_page_t *pg = page_mem_get(s, bytes, &order);
    if (!pg) return NULL;
    if ((uint64_t)(uintptr_t)pg >> SLAB_START_PTR_BITS) { /* cannot be packed: no page */
        free(pg); /* (never a spare: every spare once passed this test) */
        return NULL;
    }
    debug_assert_internal(f->state == DESC_FREE && f->size >= span);
    id_take(s, id);
    tlsf_remove(s->heap, f);
    desc_t *blk = tlsf_split(s->heap, s->desc, f, span, 1);
    blk->state = DESC_PAGE;
    blk->page = pg;
    /* The geometry with relaxed atomic stores, the rest plainly (slab.h: SLAB_GEO). */
    memset(pg, 0, offsetof(slab_page_t, addr));
    memset(&pg->live, 0, sizeof *pg - offsetof(slab_page_t, live));
    pg->mem_order = (uint8_t)order;
    __atomic_store_n(&pg->addr, blk->addr, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->span, (uint32_t)span, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->slot, g->slot, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->inv, g->inv, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->nslots, n, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->cls, (uint16_t)c, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->nwords, (uint8_t)nwords, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->recw, (uint8_t)recw, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->rshift, (uint8_t)rshift, __ATOMIC_RELAXED);
    pg->dirty = 1; /* its runs (all zero) are in the sums as they are */
    pg->blk = blk;
    pg->id = id;
    for (uint32_t w = 0; w < nwords; w++) {
        uint32_t left = n - w * 64;
        pg->bits[w] = left >= 64 ? ~0ull : (1ull << left) - 1;
    }
    pg->summary = nwords == 64 ? ~0ull : (1ull << nwords) - 1;
    debug_assert_internal((uintptr_t)slab_rec(pg, 0) % 64 == 0);
    memset(slab_rec(pg, 0), 0xff, rec_bytes); /* records SLAB_SLOT_FREE, tags all ones */
    __atomic_store_n(&pg->gen, pg->gen + (pg->gen & 1u), __ATOMIC_RELEASE); /* even: written */
    s->page_by_id[id] = pg;
    s->last_addr = pg->addr;
    gran_set(s, pg, 1);
    s->pages++;
    s->cls[c].pages++;
    s->free_bytes += span;
    slab_list_push(&s->cls[c].partial, pg);
    return pg;
}

/* Give an empty page (on no list, not cached) back to the large heap. */
static void page_release(slab_t *s, slab_page_t *pg)
{
    debug_assert_internal(pg->live == 0 && pg->prev == NULL && pg->next == NULL);
    desc_t *blk = pg->blk;
    runs_account(s, pg, -1);
    gran_set(s, pg, 0);
    s->page_by_id[pg->id] = NULL;
    s->free_ids[s->nfree_ids++] = pg->id;
    s->pages--;
    s->cls[pg->cls].pages--;
    s->free_bytes -= pg->span;
    page_mem_put(s, pg);
    blk->page = NULL;
    tlsf_insert(s->heap, tlsf_coalesce(s->heap, s->desc, blk));
}

unsigned slab_release_cached(slab_t *s)
{
    unsigned n = 0;
    for (unsigned c = 0; c < SLAB_NCLASSES && s->cached_pages; c++) {
        slab_class_t *cl = &s->cls[c];
        while (cl->cached) {
            slab_page_t *pg = cl->cached;
            slab_list_remove(&cl->cached, pg);
            cl->ncached--;
            s->cached_pages--;
            page_release(s, pg);
            n++;
        }
    }
    return n;
}

void slab_page_emptied(slab_t *s, slab_page_t *pg)
{
    slab_class_t *c = &s->cls[pg->cls];
    debug_assert_internal(pg->live == 0 && c->ncached <= SLAB_CACHE_PAGES);
    if (c->ncached == SLAB_CACHE_PAGES) {
        slab_page_t *low = pg;
        for (slab_page_t *q = c->cached; q; q = q->next)
            if (q->addr < low->addr) low = q;
        if (low == pg) {
            page_release(s, pg);
            return;
        }
        slab_list_remove(&c->cached, low);
        c->ncached--;
        s->cached_pages--;
        page_release(s, low);
    }
    slab_list_push(&c->cached, pg);
    c->ncached++;
    s->cached_pages++;
}

void slab_page_runs(const slab_page_t *pg, slab_runs_t *out)
{
    memset(out, 0, sizeof *out);
    uint32_t n = pg->nslots;
    for (uint32_t i = slab_next_free(pg, 0); i < n;) {
        uint32_t j = slab_next_live(pg, i);
        size_t bytes = (size_t)(j - i) * pg->slot;
        int k = bucket_of(bytes);
        out->runs++;
        out->blocks[k]++;
        out->bytes[k] += bytes;
        i = slab_next_free(pg, j);
    }
}

void slab_refresh_runs(slab_t *s)
{
    if (!s->pages) return;
    for (uint32_t id = 1; id < s->id_top; id++) {
        slab_page_t *pg = s->page_by_id[id];
        if (!pg || !pg->dirty) continue;
        runs_account(s, pg, -1);
        slab_page_runs(pg, &pg->runs);
        runs_account(s, pg, 1);
        pg->dirty = 0;
    }
}
