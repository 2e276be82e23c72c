/* pool/pool_check.c — pool_check(): the executable statement of every pool invariant.
 *
 * Walks, under pool->lock, in O(blocks + pages + slots + classes + map slots):
 *   1. the large heap in address order: blocks tile [ubase, uend) exactly (no gap, no
 *      overlap), phys links are mutual, sizes/addresses are 64-aligned and non-zero, no FREE
 *      block has a FREE neighbour, every LIVE block has size == ALIGN_UP(granted, 64),
 *      requested <= granted, and is in the address map pointing at itself; every PAGE block
 *      names a page that names it back with the same address and span;
 *   2. every page: its id maps to it, it was reached by the tiling walk, geometry fits its
 *      class (slot, reciprocal, min_slots <= nslots <= max_slots, span >= one granule), bits
 *      past nslots are clear, summary bit w <=> bits[w] != 0, free bits == nslots - live,
 *      every live slot has granted <= slot and requested <= granted (an escaped record has its
 *      req_map entry, and only then), the granule table names it for each granule it spans
 *      (cover or start entry) and the lookup finds it from its first and last byte; a clean
 *      run summary equals a fresh one;
 *   3. every class: its partial list holds exactly its pages with 0 < live < nslots, its
 *      cached list exactly its pages with no live slot, at most SLAB_CACHE_PAGES (mutual
 *      links, no cycle, no page on two lists), its page and live-slot counts; the cached-page
 *      count; the id tables (used + released ids == handed out, released ids unused); the
 *      number of non-zero granule fields equals what the pages need, so no entry is stray
 *      (with the per-page check this pins the whole table down);
 *   4. every class list of the large heap: bitmap bits <=> non-empty lists, mutual list links,
 *      each member FREE and in the class its size maps to, and reached by the walk; every FREE
 *      block of the walk is listed exactly once;
 *   5. counters: heap free bytes/blocks/buckets equal the list sums; slab free bytes equal the
 *      free slots; live count, allocated and requested bytes and buckets equal the walk's sums
 *      over live blocks and slots; the map holds exactly the LIVE large blocks and req_map
 *      exactly the escaped slots (addrmap_check of both); descriptors in use + free == total;
 *      nothing cached and no page while nothing is live;
 *   6. free extents: step 1 also works out, independently (slot by slot), the FREE runs (FREE
 *      blocks and empty pages side by side) and SLOTS runs (free slots of one page holding
 *      live slots, cut at its edges); the summary behind the statistics (pool_summarize) and
 *      what pool_walk reports must both equal them: counts, bytes, largest run, free slot
 *      bytes, buckets.  pool_walk's extents must be in address order, no FREE extent next to
 *      another, every SLOTS extent inside one page that holds live slots and maximal in it,
 *      its live extents the live blocks with their granted bytes; the pages' run summaries and
 *      their sums must be fresh after pool_summarize;
 *   7. conservation: allocated + free + overhead == reserved, overhead = sum over live blocks
 *      of (size - granted) + sum over live slots of (slot - granted) + alignment head + tail
 *      (free counts the blocks in threads' caches);
 *   9. thread caches (with the fast paths stopped): every magazine entry is the start of a
 *      slot of its class whose record says SLAB_SLOT_CACHED, at the record, tag word and page
 *      it names, no two entries the same; the records saying so are exactly as many as the
 *      entries, so each such slot is in exactly one magazine; a cache's counts and bytes equal
 *      its magazines', within their bounds; the statistics are the sums of the pool's and the
 *      caches' figures.
 *   8. vmm pools: every FREE, LIVE and PAGE block lies in mapped chunks, every VOID block is
 *      chunk aligned, in unmapped chunks only and never next to another VOID block; the void
 *      heap's lists as in 4; the chunk table's mapped chunks times the chunk size equal
 *      `mapped`, which with the growth planned stays within the limit; the law of 7 with
 *      reserved = mapped and the mapped bytes of TRANSIT blocks as overhead, so that (the
 *      blocks tiling the range) every byte of a mapped chunk is live, free or overhead and no
 *      byte of an unmapped chunk is; the large heap's whole_bytes equals the whole chunks of
 *      its blocks, and the summary's whole_bytes those of the FREE runs found in 6; with no
 *      slow path in flight there is no TRANSIT block, no planned growth, no held descriptor.
 * Returns the number of violations; the first one's text goes to `why`.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

typedef struct sums {
    uint64_t live_blocks;                       /* live blocks and slots seen */
    uint64_t large_live;                        /* of them, LIVE large blocks */
    size_t granted;                             /* their granted bytes */
    size_t requested;                           /* their requested bytes */
    size_t slack;                               /* block or slot size - granted */
    uint64_t bucket_live_blocks[POOL_NBUCKETS]; /* per bucket of granted */
    uint64_t bucket_live_bytes[POOL_NBUCKETS];  /* granted bytes per bucket */
    uint64_t free_blocks;                       /* FREE large blocks seen */
    size_t free_bytes;                          /* their bytes */
    size_t slab_free_bytes;                     /* free slot bytes */
    uint64_t pages;                             /* PAGE blocks seen */
    uint64_t descriptors;                       /* descriptors reached by the walk */
    uint64_t gran_refs;                         /* granule fields the pages need */
    uint64_t escaped;                           /* live slots whose requested is in req_map */
    uint64_t cached;                            /* slots whose record says SLAB_SLOT_CACHED */
    size_t cached_bytes;                        /* their bytes */
    size_t transit_mapped;                      /* vmm: mapped bytes of TRANSIT blocks */
    uint64_t transit;                           /* vmm: TRANSIT blocks */
    size_t void_bytes;                          /* vmm: bytes of VOID blocks */
} sums_t;

typedef struct chk {
    pool_t *p;           /* pool under check */
    int bad;             /* violations so far */
    char *why;           /* first violation's text, or NULL */
    size_t why_len;      /* bytes at why */
    uint32_t seen;       /* mark of a block/page reached by the walk */
    uint32_t listed;     /* mark of a block/page also found in a list */
    uint64_t limit;      /* more blocks than this in any chain means a cycle */
    sums_t s;            /* sums from the walk */
    pool_summary_t ext;  /* free extents as the walk finds them (item 6) */
    pool_counts_t n;     /* the pool's and its caches' figures summed */
    size_t run;          /* bytes of the FREE run the walk is in, 0 = none */
    uintptr_t run_start; /* its first byte */
} chk_t;

__attribute__((format(printf, 2, 3))) static void viol(chk_t *c, const char *fmt, ...)
{
    if (c->bad == 0 && c->why && c->why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, c->why_len, fmt, ap);
        va_end(ap);
    }
    c->bad++;
}

static void ext_record(pool_summary_t *e, size_t len)
{
    int k = bucket_of(len);
    e->free_bytes += len;
    e->bucket_blocks[k]++;
    e->bucket_bytes[k] += len;
}

/* The walk leaves a FREE run (a live block, a page with live slots, or the end). */
static void ext_flush(chk_t *c)
{
    if (!c->run) return;
    ext_record(&c->ext, c->run);
    if (c->p->vmm) c->ext.whole_bytes += tlsf_whole(c->run_start, c->run, c->p->vmm->chunk_shift);
    c->ext.free_runs++;
    if (c->run > c->ext.largest) c->ext.largest = c->run;
    c->run = 0;
}

/* 1 when slot i of pg is in a thread's cache. */
static int slot_cached(const slab_page_t *pg, uint32_t i)
{
    return pg->cls < SLAB_CACHE_CLASSES && !(pg->bits[i >> 6] >> (i & 63) & 1) &&
           *slab_rec(pg, i) == SLAB_SLOT_CACHED;
}

/* 1 when entry e (of a magazine or transfer cache of class cl) starts a cached slot of that
 * class and is exactly the entry cache_ent_of makes for it: its record, tag word and page. */
static int ent_names_cached_slot(const pool_t *p, cache_ent_t e, unsigned cl)
{
    slab_page_t *pg = slab_page_of(&p->slab, e.addr);
    long idx = pg ? slab_slot_index(pg, e.addr) : -1;
    if (idx < 0 || pg->cls != cl || !slot_cached(pg, (uint32_t)idx)) return 0;
    cache_ent_t want = cache_ent_of(pg, idx, e.addr);
    return e.rec == want.rec && e.pg == want.pg;
}

static void ext_slot_run(chk_t *c, size_t bytes)
{
    ext_record(&c->ext, bytes);
    c->ext.slot_runs++;
    c->ext.slab_free_bytes += bytes;
}

/* The SLOTS extents of a page holding taken slots, read slot by slot: runs of free slots, and
 * each slot in a thread's cache on its own. */
static void ext_slots(chk_t *c, const slab_page_t *pg)
{
    size_t cur = 0;
    for (uint32_t i = 0; i <= pg->nslots; i++) {
        if (i < pg->nslots && (pg->bits[i >> 6] >> (i & 63) & 1)) {
            cur += pg->slot;
            continue;
        }
        if (cur) ext_slot_run(c, cur);
        cur = 0;
        if (i < pg->nslots && slot_cached(pg, i)) ext_slot_run(c, pg->slot);
    }
}

static void count_live(chk_t *c, size_t granted, size_t requested, size_t size)
{
    int k = bucket_of(granted);
    c->s.live_blocks++;
    c->s.granted += granted;
    c->s.requested += requested;
    c->s.slack += size - granted;
    c->s.bucket_live_blocks[k]++;
    c->s.bucket_live_bytes[k] += granted;
}

static void check_live(chk_t *c, const desc_t *b)
{
    if (b->granted == 0 || b->requested > b->granted || b->size != desc_align(b->granted))
        viol(c, "live block %#lx: size %zu granted %zu requested %zu", (unsigned long)b->addr,
             b->size, b->granted, b->requested);
    uint64_t v;
    if (!addrmap_get(&c->p->live, b->addr, &v) || (const desc_t *)(uintptr_t)v != b)
        viol(c, "live block %#lx missing from the address map", (unsigned long)b->addr);
    c->s.large_live++;
    count_live(c, b->granted, b->requested, b->size);
}

/* The granule entries of one page, and its share of gran_refs. */
static void check_gran(chk_t *c, const slab_page_t *pg)
{
    pool_t *p = c->p;
    size_t off = pg->addr - p->ubase;
    size_t g0 = off >> SLAB_PAGE_SHIFT, g1 = (off + pg->span - 1) >> SLAB_PAGE_SHIFT;
    if (!p->slab.gran_dir || g1 >= p->slab.ngran) {
        viol(c, "page %#lx lies outside the granule table", (unsigned long)pg->addr);
        return;
    }
    for (size_t g = g0; g <= g1; g++)
        if (!p->slab.gran_dir[g >> SLAB_GRAN_LEAF_SHIFT]) {
            viol(c, "page %#lx: no granule leaf for granule %zu", (unsigned long)pg->addr, g);
            return;
        }
#define GRAN(g) (p->slab.gran_dir[(g) >> SLAB_GRAN_LEAF_SHIFT][(g) & (SLAB_GRAN_LEAF - 1)])
    size_t in = off & (SLAB_PAGE_MIN - 1);
    int ok = in == 0 ? GRAN(g0).cover == pg
                     : GRAN(g0).start == ((uint64_t)(uintptr_t)pg |
                                          (uint64_t)(in >> DESC_GRAN_SHIFT) << SLAB_START_PTR_BITS);
    for (size_t g = g0 + 1; g <= g1; g++) ok &= GRAN(g).cover == pg;
#undef GRAN
    c->s.gran_refs += g1 - g0 + 1;
    if (!ok) {
        viol(c, "page %#lx: granule table entries do not name it", (unsigned long)pg->addr);
        return;
    }
    /* The entries are right (and gran_refs shows there are no others): the lookup finds the
     * page from its first and last byte. */
    if (slab_page_of(&p->slab, pg->addr) != pg ||
        slab_page_of(&p->slab, pg->addr + pg->span - 1) != pg)
        viol(c, "page %#lx: address lookup does not find it", (unsigned long)pg->addr);
}

static void check_page(chk_t *c, const desc_t *b)
{
    slab_page_t *pg = b->page;
    pool_t *p = c->p;
    c->s.pages++;
    if (!pg || pg->blk != b || pg->addr != b->addr || pg->span != b->size) {
        viol(c, "page block %#lx and its page disagree", (unsigned long)b->addr);
        return;
    }
    if (pg->id == 0 || pg->id >= p->slab.id_top || p->slab.page_by_id[pg->id] != pg)
        viol(c, "page %#lx: id %u does not map to it", (unsigned long)pg->addr, pg->id);
    pg->mark = c->seen;
    if (pg->cls >= SLAB_NCLASSES) {
        viol(c, "page %#lx: class %u", (unsigned long)pg->addr, pg->cls);
        return;
    }
    const slab_geom_t *g = &slab_geom[pg->cls];
    if (pg->slot != g->slot || pg->nslots < g->min_slots || pg->nslots > g->max_slots ||
        pg->inv != g->inv || pg->nwords != (pg->nslots + 63) / 64 ||
        pg->recw != slab_rec_words(pg->nwords) || pg->rshift != slab_rec_shift(pg->nslots) ||
        pg->span != (size_t)g->slot * pg->nslots || pg->span < SLAB_PAGE_MIN) {
        viol(c, "page %#lx: geometry differs from class %u", (unsigned long)pg->addr, pg->cls);
        return;
    }
    if (pg->gen & 1u) /* slab_page_new finished with it: no page is being rewritten now */
        viol(c, "page %#lx: incarnation %u is odd", (unsigned long)pg->addr, pg->gen);
    uint32_t free_bits = 0;
    for (uint32_t w = 0; w < pg->nwords; w++) {
        uint64_t word = pg->bits[w];
        uint32_t left = pg->nslots - w * 64;
        if (left < 64 && word >> left)
            viol(c, "page %#lx: free bits past the last slot", (unsigned long)pg->addr);
        if (((pg->summary >> w) & 1) != (word != 0))
            viol(c, "page %#lx: summary bit %u disagrees with its word", (unsigned long)pg->addr,
                 w);
        free_bits += (uint32_t)__builtin_popcountll(word);
        for (uint64_t f = word; f && pg->cls < SLAB_CACHE_CLASSES; f &= f - 1) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(f);
            if (*slab_rec(pg, i) != SLAB_SLOT_FREE)
                viol(c, "slot %#lx: free, but its record says %#x",
                     (unsigned long)(pg->addr + (uintptr_t)i * pg->slot), *slab_rec(pg, i));
        }
        uint64_t live = ~word & (left >= 64 ? ~0ull : (1ull << left) - 1);
        for (; live; live &= live - 1) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(live);
            slab_slot_t s = *slab_rec(pg, i);
            uintptr_t a = pg->addr + (uintptr_t)i * pg->slot;
            if (slot_cached(pg, i)) { /* free for the application: item 9 */
                c->s.cached++;
                c->s.cached_bytes += pg->slot;
                continue;
            }
            if (pg->cls < SLAB_CACHE_CLASSES && !slab_record_live(s)) {
                viol(c, "slot %#lx: taken, but its record %#x is neither live nor cached",
                     (unsigned long)a, s);
                continue;
            }
            size_t g = slab_slot_granted(s), r = g - (s >> SLAB_SLOT_GBITS);
            if ((s >> SLAB_SLOT_GBITS) == SLAB_REQ_ESCAPE) {
                uint64_t v;
                c->s.escaped++;
                if (!addrmap_get(&p->slab.req_map, a, &v)) {
                    viol(c, "slot %#lx: escaped record without a req_map entry", (unsigned long)a);
                    v = 0;
                } else if (!slab_slot_escapes(g, (size_t)v)) {
                    viol(c, "slot %#lx: req_map entry for a record that fits", (unsigned long)a);
                }
                r = (size_t)v;
            }
            if (g > pg->slot || r > g)
                viol(c, "slot %#lx: granted %zu requested %zu slot %u", (unsigned long)a, g, r,
                     pg->slot);
            count_live(c, g, r, pg->slot);
        }
    }
    if (pg->nwords < 64 && pg->summary >> pg->nwords)
        viol(c, "page %#lx: summary bits past the last word", (unsigned long)pg->addr);
    if (free_bits + pg->live != pg->nslots)
        viol(c, "page %#lx: %u free bits + %u live != %u slots", (unsigned long)pg->addr, free_bits,
             pg->live, pg->nslots);
    c->s.slab_free_bytes += (size_t)free_bits * pg->slot;
    if (pg->live == 0) {
        if (!c->run) c->run_start = pg->addr;
        c->run += pg->span; /* an empty (cached) page is part of a FREE run */
    } else {
        ext_flush(c);
        ext_slots(c, pg);
    }
    if (!pg->dirty) {
        slab_runs_t fresh;
        slab_page_runs(pg, &fresh);
        if (memcmp(&fresh, &pg->runs, sizeof fresh) != 0)
            viol(c, "page %#lx: stale run summary", (unsigned long)pg->addr);
    }
    check_gran(c, pg);
}

/* vmm: 1 when every chunk overlapping [addr, addr+size) is mapped (want 1) / unmapped (0). */
static int chunks_are(const pool_t *p, uintptr_t addr, size_t size, int want)
{
    const pool_vmm_t *v = p->vmm;
    size_t c0 = (addr - p->base) >> v->chunk_shift;
    size_t c1 = (addr + size - 1 - p->base) >> v->chunk_shift;
    if (c1 >= v->nchunks) return 0;
    for (size_t i = c0; i <= c1; i++) {
        uint64_t w = v->mapped_bits[i >> 6];
        if (want ? w == ~0ull : w == 0) { /* a whole word agrees: skip to its end */
            i |= 63;
            continue;
        }
        if ((int)(w >> (i & 63) & 1) != want) return 0;
    }
    return 1;
}

/* vmm: mapped bytes of [addr, addr+size). */
static size_t mapped_part(const pool_t *p, uintptr_t addr, size_t size)
{
    const pool_vmm_t *v = p->vmm;
    size_t total = 0;
    uintptr_t end = addr + size;
    while (addr < end) {
        size_t i = (addr - p->base) >> v->chunk_shift;
        uintptr_t cend = p->base + ((i + 1) << v->chunk_shift);
        uintptr_t e = cend < end ? cend : end;
        if (i < v->nchunks && v->mapped_bits[i >> 6] >> (i & 63) & 1) total += e - addr;
        addr = e;
    }
    return total;
}

static void check_vmm_block(chk_t *c, const desc_t *b, const desc_t *prev)
{
    pool_t *p = c->p;
    if (!p->vmm) {
        if (b->state == DESC_VOID || b->state == DESC_TRANSIT)
            viol(c, "block %#lx: state %u in a block pool", (unsigned long)b->addr, b->state);
        return;
    }
    const pool_vmm_t *v = p->vmm;
    switch (b->state) {
    case DESC_FREE:
    case DESC_LIVE:
    case DESC_PAGE:
        if (!chunks_are(p, b->addr, b->size, 1))
            viol(c, "block %#lx (state %u) lies in an unmapped chunk", (unsigned long)b->addr,
                 b->state);
        break;
    case DESC_VOID:
        if ((b->addr | b->size) & (v->chunk - 1))
            viol(c, "void block %#lx of %zu bytes is not chunk aligned", (unsigned long)b->addr,
                 b->size);
        if (prev && prev->state == DESC_VOID)
            viol(c, "void blocks %#lx and %#lx are neighbours", (unsigned long)prev->addr,
                 (unsigned long)b->addr);
        if (!chunks_are(p, b->addr, b->size, 0))
            viol(c, "void block %#lx lies in a mapped chunk", (unsigned long)b->addr);
        c->s.void_bytes += b->size;
        break;
    case DESC_TRANSIT:
        c->s.transit++;
        c->s.transit_mapped += mapped_part(p, b->addr, b->size);
        break;
    default: break;
    }
}

static void walk_tiling(chk_t *c)
{
    pool_t *p = c->p;
    uintptr_t expect = p->ubase;
    const desc_t *prev = NULL;
    uint64_t n = 0;
    for (desc_t *b = p->large_first; b; prev = b, b = b->phys_next) {
        if (++n > c->limit) {
            viol(c, "cycle in the large heap's block chain");
            return;
        }
        if (b->addr != expect)
            viol(c, "block %#lx where %#lx was expected (gap or overlap)", (unsigned long)b->addr,
                 (unsigned long)expect);
        if (b->phys_prev != prev)
            viol(c, "block %#lx: phys_prev does not point at the block below",
                 (unsigned long)b->addr);
        if (b->size == 0 || b->size % POOL_ALIGN || b->addr % POOL_ALIGN)
            viol(c, "block %#lx: size %zu or address not 64-aligned", (unsigned long)b->addr,
                 b->size);
        if (b->state != DESC_PAGE && b->state != DESC_LIVE && b->page)
            viol(c, "block %#lx points at a page", (unsigned long)b->addr);
        c->s.descriptors++;
        check_vmm_block(c, b, prev);
        switch (b->state) {
        case DESC_FREE:
            if (prev && prev->state == DESC_FREE)
                viol(c, "free blocks %#lx and %#lx are neighbours", (unsigned long)prev->addr,
                     (unsigned long)b->addr);
            c->s.free_blocks++;
            c->s.free_bytes += b->size;
            if (!c->run) c->run_start = b->addr;
            c->run += b->size;
            break;
        case DESC_LIVE:
            ext_flush(c);
            check_live(c, b);
            break;
        case DESC_PAGE: check_page(c, b); break;
        case DESC_VOID:
        case DESC_TRANSIT: ext_flush(c); break;
        default: viol(c, "block %#lx: bad state %u", (unsigned long)b->addr, b->state);
        }
        b->mark = c->seen;
        expect = b->addr + b->size;
    }
    ext_flush(c);
    if (!p->large_first || expect != p->uend)
        viol(c, "blocks end at %#lx, usable range at %#lx", (unsigned long)expect,
             (unsigned long)p->uend);
}

static void check_classes(chk_t *c)
{
    pool_t *p = c->p;
    uint64_t pages = 0, cached = 0, used_ids = 0;
    for (unsigned k = 0; k < SLAB_NCLASSES; k++) {
        const slab_class_t *cl = &p->slab.cls[k];
        for (int list = 0; list < 2; list++) { /* 0: partial, 1: cached */
            uint64_t n = 0;
            const slab_page_t *prev = NULL;
            const char *name = list ? "cached" : "partial";
            for (slab_page_t *pg = list ? cl->cached : cl->partial; pg; prev = pg, pg = pg->next) {
                if (++n > p->slab.pages + 1) {
                    viol(c, "class %u: cycle in the %s list", k, name);
                    break;
                }
                if (pg->prev != prev)
                    viol(c, "class %u: broken back link at page %#lx", k, (unsigned long)pg->addr);
                if (pg->cls != k ||
                    (list ? pg->live != 0 : pg->live == 0 || pg->live >= pg->nslots))
                    viol(c, "class %u: page %#lx (class %u, %u/%u live) on the %s list", k,
                         (unsigned long)pg->addr, pg->cls, pg->live, pg->nslots, name);
                if (pg->mark == c->listed)
                    viol(c, "class %u: page %#lx listed twice", k, (unsigned long)pg->addr);
                else if (pg->mark != c->seen)
                    viol(c, "class %u: listed page %#lx is not in the tiling", k,
                         (unsigned long)pg->addr);
                pg->mark = c->listed;
            }
            if (list) {
                cached += n;
                if (n != cl->ncached || n > SLAB_CACHE_PAGES)
                    viol(c, "class %u: %llu cached pages, counter %u (limit %u)", k,
                         (unsigned long long)n, cl->ncached, SLAB_CACHE_PAGES);
            }
        }
    }
    uint64_t cls_pages[SLAB_NCLASSES] = {0}, cls_live[SLAB_NCLASSES] = {0};
    for (uint32_t id = 1; id < p->slab.id_top; id++) {
        slab_page_t *pg = p->slab.page_by_id[id];
        if (!pg) continue;
        used_ids++;
        pages++;
        if (pg->id != id || pg->mark == 0 || (pg->mark != c->seen && pg->mark != c->listed)) {
            viol(c, "page id %u names a page that is not in the tiling", id);
            continue;
        }
        cls_pages[pg->cls]++;
        cls_live[pg->cls] += pg->live;
        if (pg->live < pg->nslots && pg->mark != c->listed)
            viol(c, "page %#lx (%u/%u live) is on no list of its class", (unsigned long)pg->addr,
                 pg->live, pg->nslots);
        pg->mark = 0;
    }
    for (unsigned k = 0; k < SLAB_NCLASSES; k++)
        if (cls_pages[k] != p->slab.cls[k].pages || cls_live[k] != p->slab.cls[k].live)
            viol(c, "class %u: %llu pages / %llu live slots, counters say %llu / %llu", k,
                 (unsigned long long)cls_pages[k], (unsigned long long)cls_live[k],
                 (unsigned long long)p->slab.cls[k].pages, (unsigned long long)p->slab.cls[k].live);
    if (pages != p->slab.pages || pages != c->s.pages)
        viol(c, "pages: %llu by id, %llu in the tiling, counter %llu", (unsigned long long)pages,
             (unsigned long long)c->s.pages, (unsigned long long)p->slab.pages);
    if (cached != p->slab.cached_pages)
        viol(c, "cached pages: %llu, counter %llu", (unsigned long long)cached,
             (unsigned long long)p->slab.cached_pages);
    if (p->slab.id_top && used_ids + p->slab.nfree_ids != p->slab.id_top - 1)
        viol(c, "page ids: %llu used + %u released != %u handed out", (unsigned long long)used_ids,
             p->slab.nfree_ids, p->slab.id_top - 1);
    for (uint32_t i = 0; i < p->slab.nfree_ids; i++) {
        uint32_t id = p->slab.free_ids[i];
        if (id == 0 || id >= p->slab.id_top || p->slab.page_by_id[id]) {
            viol(c, "released page id %u is in use or out of range", id);
            continue;
        }
    }
    if (c->s.gran_refs != p->slab.gran_refs)
        viol(c, "granule table: %llu fields set, the pages need %llu",
             (unsigned long long)p->slab.gran_refs, (unsigned long long)c->s.gran_refs);
    if (p->slab.taken == 0 && c->s.large_live == 0 && (p->slab.pages || p->slab.cached_pages))
        viol(c, "%llu pages (%llu cached) kept while nothing is live or cached",
             (unsigned long long)p->slab.pages, (unsigned long long)p->slab.cached_pages);
}

/* The lists of heap h (the large heap: FREE blocks; a vmm pool's void heap: VOID blocks);
 * walk_blocks/walk_bytes: what the tiling walk found in h's state. */
static void check_lists(chk_t *c, tlsf_t *h, uint64_t walk_blocks, size_t walk_bytes)
{
    uint64_t blocks = 0, bb[POOL_NBUCKETS] = {0}, bbytes[POOL_NBUCKETS] = {0};
    size_t bytes = 0, whole = 0;
    for (unsigned fl = TLSF_FL_COUNT; fl < 64; fl++)
        if (h->fl_bitmap >> fl & 1) viol(c, "fl bit %u beyond the class table", fl);
    for (unsigned fl = 0; fl < TLSF_FL_COUNT; fl++) {
        if (((h->fl_bitmap >> fl) & 1) != (h->sl_bitmap[fl] != 0))
            viol(c, "fl bit %u disagrees with its sl bitmap", fl);
        for (unsigned sl = 0; sl < TLSF_SL_COUNT; sl++) {
            desc_t *head = h->head[fl][sl];
            if (((h->sl_bitmap[fl] >> sl) & 1) != (head != NULL))
                viol(c, "sl bit %u/%u disagrees with its list", fl, sl);
            const desc_t *prev = NULL;
            uint64_t n = 0;
            for (desc_t *b = head; b; prev = b, b = b->free_next) {
                if (++n > c->limit) {
                    viol(c, "cycle in list %u/%u", fl, sl);
                    break;
                }
                unsigned f, s;
                tlsf_mapping(b->size, &f, &s);
                if (b->free_prev != prev)
                    viol(c, "broken back link at %#lx", (unsigned long)b->addr);
                if (b->state != h->state)
                    viol(c, "listed block %#lx is in state %u, its heap holds %u",
                         (unsigned long)b->addr, b->state, h->state);
                if (f != fl || s != sl)
                    viol(c, "block %#lx of %zu bytes in class %u/%u, not %u/%u",
                         (unsigned long)b->addr, b->size, fl, sl, f, s);
                if (b->mark == c->listed)
                    viol(c, "block %#lx listed twice", (unsigned long)b->addr);
                else if (b->mark != c->seen)
                    viol(c, "listed block %#lx is not in the tiling", (unsigned long)b->addr);
                b->mark = c->listed;
                blocks++;
                bytes += b->size;
                if (h->chunk_shift) whole += tlsf_whole(b->addr, b->size, h->chunk_shift);
                int k = bucket_of(b->size);
                bb[k]++;
                bbytes[k] += b->size;
            }
        }
    }
    if (blocks != h->free_blocks || bytes != h->free_bytes)
        viol(c, "lists hold %llu blocks/%zu bytes, counters say %llu/%zu",
             (unsigned long long)blocks, bytes, (unsigned long long)h->free_blocks, h->free_bytes);
    if (blocks != walk_blocks || bytes != walk_bytes)
        viol(c, "lists hold %llu blocks, the walk found %llu in state %u",
             (unsigned long long)blocks, (unsigned long long)walk_blocks, h->state);
    if (whole != h->whole_bytes)
        viol(c, "heap of state %u: whole chunks %zu bytes, counter %zu", h->state, whole,
             h->whole_bytes);
    for (int k = 0; k < POOL_NBUCKETS; k++)
        if (bb[k] != h->bucket_free_blocks[k] || bbytes[k] != h->bucket_free_bytes[k])
            viol(c, "bucket %d free counters wrong", k);
    uint64_t n = 0;
    for (const desc_t *b = c->p->large_first; b && n <= c->limit; b = b->phys_next, n++)
        if (b->state == h->state && b->mark != c->listed)
            viol(c, "block %#lx in state %u is in no class list", (unsigned long)b->addr, b->state);
}

/* ---- free extents: the checker's own walk vs pool_summarize vs pool_walk ------------------- */
typedef struct wsum {
    const pool_t *p;              /* pool walked */
    pool_summary_t fs;            /* free extents as pool_walk reports them */
    uintptr_t end;                /* end of the previous extent */
    int prev_kind;                /* kind of the previous extent, -1 before the first */
    const slab_page_t *prev_page; /* page of the previous SLOTS extent */
    uint64_t live;                /* live extents */
    size_t live_bytes;            /* their bytes */
    int order_bad;                /* extents out of order or overlapping */
    int adjacent_free;            /* two FREE extents side by side */
    int slots_bad;    /* a SLOTS extent outside one page with live slots, or not maximal */
    int prev_cached;  /* the previous SLOTS extent is a slot in a thread's cache */
    int free_in_page; /* a FREE extent starting inside a page with live slots */
    int kind_bad;     /* an unknown kind */
} wsum_t;

static int wsum_cb(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind)
{
    wsum_t *w = ctx;
    const slab_page_t *pg = slab_page_of(&w->p->slab, addr);
    if (addr < w->end) w->order_bad = 1;
    switch (kind) {
    case POOL_EXTENT_LIVE:
        w->live++;
        w->live_bytes += size;
        break;
    case POOL_EXTENT_FREE:
        if (w->prev_kind == POOL_EXTENT_FREE && addr == w->end) w->adjacent_free = 1;
        if (pg && pg->live) w->free_in_page = 1;
        ext_record(&w->fs, size);
        if (w->p->vmm) w->fs.whole_bytes += tlsf_whole(addr, size, w->p->vmm->chunk_shift);
        w->fs.free_runs++;
        if (size > w->fs.largest) w->fs.largest = size;
        break;
    case POOL_EXTENT_SLOTS: {
        /* a slot in a thread's cache is an extent of its own; runs of free slots are maximal */
        long i = pg ? slab_slot_index(pg, addr) : -1;
        int cached = i >= 0 && size == pg->slot && slot_cached(pg, (uint32_t)i);
        if (!pg || !pg->live || addr + size > pg->addr + pg->span ||
            (w->prev_kind == POOL_EXTENT_SLOTS && addr == w->end && w->prev_page == pg && !cached &&
             !w->prev_cached))
            w->slots_bad = 1;
        w->prev_cached = cached;
        ext_record(&w->fs, size);
        w->fs.slot_runs++;
        w->fs.slab_free_bytes += size;
        w->prev_page = pg;
        break;
    }
    default: w->kind_bad = 1;
    }
    w->prev_kind = (int)kind;
    w->end = addr + size;
    return 0;
}

static void compare_summary(chk_t *c, const char *who, const pool_summary_t *got)
{
    const pool_summary_t *e = &c->ext;
    if (got->whole_bytes != e->whole_bytes)
        viol(c, "%s: %zu free bytes in whole chunks, the blocks say %zu", who, got->whole_bytes,
             e->whole_bytes);
    if (got->free_bytes != e->free_bytes || got->largest != e->largest ||
        got->slab_free_bytes != e->slab_free_bytes || got->free_runs != e->free_runs ||
        got->slot_runs != e->slot_runs)
        viol(c,
             "%s: %llu free runs (largest %zu) + %llu slot runs (%zu B), %zu B free; the "
             "blocks say %llu (largest %zu) + %llu (%zu B), %zu B",
             who, (unsigned long long)got->free_runs, got->largest,
             (unsigned long long)got->slot_runs, got->slab_free_bytes, got->free_bytes,
             (unsigned long long)e->free_runs, e->largest, (unsigned long long)e->slot_runs,
             e->slab_free_bytes, e->free_bytes);
    for (int k = 0; k < POOL_NBUCKETS; k++)
        if (got->bucket_blocks[k] != e->bucket_blocks[k] ||
            got->bucket_bytes[k] != e->bucket_bytes[k])
            viol(c, "%s: free extents of bucket %d differ from the blocks", who, k);
}

static void check_summary(chk_t *c)
{
    pool_t *p = c->p;
    wsum_t w = {.p = p, .prev_kind = -1};
    pool_walk_locked(p, wsum_cb, &w, c->limit);
    pool_summary_t fs;
    pool_summarize(p, &c->n, &fs);
    compare_summary(c, "pool_summarize", &fs);
    compare_summary(c, "pool_walk", &w.fs);
    if (w.order_bad) viol(c, "pool_walk: extents out of address order");
    if (w.adjacent_free) viol(c, "pool_walk: two free runs side by side");
    if (w.slots_bad) viol(c, "pool_walk: free slots outside a page with live slots, or cut");
    if (w.free_in_page) viol(c, "pool_walk: a free run inside a page with live slots");
    if (w.kind_bad) viol(c, "pool_walk: unknown extent kind");
    if (w.live != c->n.live_blocks || w.live_bytes != c->n.allocated)
        viol(c, "pool_walk: %llu live extents of %zu B, %llu live of %zu B",
             (unsigned long long)w.live, w.live_bytes, (unsigned long long)c->n.live_blocks,
             c->n.allocated);
    /* pool_summarize refreshed every page: the clean summaries must equal fresh ones, and
     * run_sums their sums. */
    slab_runs_t sum;
    memset(&sum, 0, sizeof sum);
    for (uint32_t id = 1; id < p->slab.id_top; id++) {
        const slab_page_t *pg = p->slab.page_by_id[id];
        slab_runs_t fresh;
        if (!pg) continue;
        slab_page_runs(pg, &fresh);
        if (pg->dirty || memcmp(&fresh, &pg->runs, sizeof fresh) != 0)
            viol(c, "page %#lx: run summary not refreshed", (unsigned long)pg->addr);
        sum.runs += fresh.runs;
        for (int k = 0; k < POOL_NBUCKETS; k++) {
            sum.blocks[k] += fresh.blocks[k];
            sum.bytes[k] += fresh.bytes[k];
        }
    }
    if (memcmp(&sum, &p->slab.run_sums, sizeof sum) != 0)
        viol(c, "run sums: pages %llu runs, slabs %llu", (unsigned long long)sum.runs,
             (unsigned long long)p->slab.run_sums.runs);
}

static int ent_cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Item 9: the magazines against the pages' records (the walk counted the cached records). */
static void check_caches(chk_t *c)
{
    pool_t *p = c->p;
    uint64_t total = 0;
    for (const cache_t *k = p->caches; k; k = k->pnext) {
        uint64_t n = 0;
        size_t bytes = 0;
        if (k->pool != p || k->pool_id != p->id) viol(c, "a cache of the pool names another");
        for (unsigned cl = 0; cl < SLAB_CACHE_CLASSES; cl++) {
            const cache_mag_t *m = &k->mag[cl];
            if (m->n > m->cap) viol(c, "class %u: magazine holds %u > %u", cl, m->n, m->cap);
            n += m->n;
            bytes += (size_t)m->n * slab_geom[cl].slot;
        }
        if (n != k->ncached || bytes != k->bytes || bytes > CACHE_BYTES_MAX)
            viol(c, "cache: %llu blocks / %zu B in its magazines, it counts %u / %zu",
                 (unsigned long long)n, bytes, k->ncached, k->bytes);
        total += n;
    }
    uint64_t in_xfer = 0;
    for (unsigned cl = 0; p->xfer && cl < SLAB_CACHE_CLASSES; cl++) {
        const cache_xfer_t *x = &p->xfer[cl];
        if (x->n > x->cap || x->lock)
            viol(c, "class %u: transfer cache holds %u > %u, or is locked", cl, x->n, x->cap);
        in_xfer += x->n;
    }
    if (in_xfer != __atomic_load_n(&p->xfer_blocks, __ATOMIC_RELAXED))
        viol(c, "transfer caches hold %llu blocks, the pool counts %llu",
             (unsigned long long)in_xfer,
             (unsigned long long)__atomic_load_n(&p->xfer_blocks, __ATOMIC_RELAXED));
    total += in_xfer;
    uintptr_t *all = total ? malloc(total * sizeof *all) : NULL;
    uint64_t at = 0;
    for (const cache_t *k = p->caches; k; k = k->pnext)
        for (unsigned cl = 0; cl < SLAB_CACHE_CLASSES; cl++)
            for (uint32_t i = 0; i < k->mag[cl].n && i < k->mag[cl].cap; i++) {
                cache_ent_t e = k->mag[cl].ent[i];
                if (!ent_names_cached_slot(p, e, cl))
                    viol(c, "cached block %#lx (class %u) is not a cached slot of its class",
                         (unsigned long)e.addr, cl);
                if (all && at < total) all[at++] = e.addr;
            }
    for (unsigned cl = 0; p->xfer && cl < SLAB_CACHE_CLASSES; cl++)
        for (uint32_t i = 0; i < p->xfer[cl].n && i < p->xfer[cl].cap; i++) {
            cache_ent_t e = p->xfer[cl].ent[i];
            if (!ent_names_cached_slot(p, e, cl))
                viol(c, "transfer-cache block %#lx (class %u) is not a cached slot of its class",
                     (unsigned long)e.addr, cl);
            if (all && at < total) all[at++] = e.addr;
        }
    if (all) {
        qsort(all, at, sizeof *all, ent_cmp);
        for (uint64_t i = 1; i < at; i++)
            if (all[i] == all[i - 1])
                viol(c, "block %#lx is in two magazines", (unsigned long)all[i]);
        free(all);
    }
    if (total != c->s.cached || total != c->n.cached_blocks)
        viol(c, "%llu blocks in the magazines, %llu records say cached", (unsigned long long)total,
             (unsigned long long)c->s.cached);
}

static void check_counters(chk_t *c)
{
    pool_t *p = c->p;
    const sums_t *s = &c->s;
    const pool_counts_t *n = &c->n;
    if (s->live_blocks != n->live_blocks || s->granted != n->allocated ||
        s->requested != n->requested)
        viol(c, "live counters: walk %llu blocks/%zu granted/%zu requested, pool %llu/%zu/%zu",
             (unsigned long long)s->live_blocks, s->granted, s->requested,
             (unsigned long long)n->live_blocks, n->allocated, n->requested);
    for (int k = 0; k < POOL_NBUCKETS; k++)
        if (s->bucket_live_blocks[k] != n->bucket_blocks[k] ||
            s->bucket_live_bytes[k] != n->bucket_bytes[k])
            viol(c, "bucket %d live counters wrong", k);
    if (n->peak < n->allocated) viol(c, "peak %zu below allocated %zu", n->peak, n->allocated);
    if (s->live_blocks + s->cached != p->slab.taken + s->large_live)
        viol(c, "%llu live + %llu cached blocks, the pool counts %llu taken slots + %llu large",
             (unsigned long long)s->live_blocks, (unsigned long long)s->cached,
             (unsigned long long)p->slab.taken, (unsigned long long)s->large_live);
    if (addrmap_count(&p->live) != s->large_live)
        viol(c, "address map holds %zu entries, %llu large blocks live", addrmap_count(&p->live),
             (unsigned long long)s->large_live);
    int mb = addrmap_check(&p->live);
    if (mb) viol(c, "address map: %d internal violations", mb);
    if (addrmap_count(&p->slab.req_map) != s->escaped)
        viol(c, "req_map holds %zu entries, %llu slot records escape",
             addrmap_count(&p->slab.req_map), (unsigned long long)s->escaped);
    mb = addrmap_check(&p->slab.req_map);
    if (mb) viol(c, "req_map: %d internal violations", mb);
    if (s->slab_free_bytes != p->slab.free_bytes)
        viol(c, "slab free bytes %zu, the pages hold %zu", p->slab.free_bytes, s->slab_free_bytes);
    const pool_vmm_t *v = p->vmm;
    size_t held_desc = v ? v->held_desc : 0;
    if (s->descriptors + p->desc.free_count + held_desc != p->desc.total)
        viol(c, "descriptors: %llu in use + %zu free + %zu held != %zu",
             (unsigned long long)s->descriptors, p->desc.free_count, held_desc, p->desc.total);
    size_t head = p->ubase - p->base, tail = p->base + p->size - p->uend;
    size_t free_bytes = p->large.free_bytes + p->slab.free_bytes + s->cached_bytes;
    size_t overhead = s->slack + head + tail + s->transit_mapped;
    size_t held = v ? v->mapped : p->size;
    if (n->allocated + free_bytes + overhead != held)
        viol(c, "conservation: allocated %zu + free %zu + overhead %zu != %s %zu", n->allocated,
             free_bytes, overhead, v ? "mapped" : "reserved", held);
    if (!v) return;
    size_t chunks = 0;
    for (size_t i = 0; i < (v->nchunks + 63) / 64; i++)
        chunks += (size_t)__builtin_popcountll(v->mapped_bits[i]);
    if (chunks << v->chunk_shift != v->mapped)
        viol(c, "chunk table: %zu chunks mapped, the pool counts %zu bytes", chunks, v->mapped);
    if (v->mapped + v->pending_grow > v->limit)
        viol(c, "mapped %zu + planned %zu bytes above the limit %zu", v->mapped, v->pending_grow,
             v->limit);
    if (head || tail) viol(c, "a vmm pool with an unusable head or tail");
    if (v->in_flight == 0 && (s->transit || v->pending_grow || v->held_desc))
        viol(c,
             "no slow path in flight, yet %llu transit blocks, %zu bytes planned, %zu "
             "descriptors held",
             (unsigned long long)s->transit, v->pending_grow, v->held_desc);
}

int pool_check(pool_t *p, char *why, size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    if (!p) {
        if (why && why_len) snprintf(why, why_len, "NULL pool");
        return 1;
    }
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    pool_cache_stop(p); /* the caches hold still: item 9 */
    chk_t c = {.p = p, .why = why, .why_len = why_len};
    pool_cache_sum(p, &c.n);
    p->check_epoch++;
    if (p->check_epoch == 0 || p->check_epoch > UINT32_MAX / 2 - 1) p->check_epoch = 1;
    c.seen = 2 * p->check_epoch;
    c.listed = c.seen + 1;
    c.limit = p->desc.total + 1;
    walk_tiling(&c);
    check_classes(&c);
    check_lists(&c, &p->large, c.s.free_blocks, c.s.free_bytes);
    if (p->vmm) {
        uint64_t voids = 0;
        uint64_t n = 0;
        for (const desc_t *b = p->large_first; b && n++ <= c.limit; b = b->phys_next)
            voids += b->state == DESC_VOID;
        check_lists(&c, &p->vmm->voids, voids, c.s.void_bytes);
    }
    check_counters(&c);
    if (c.bad == 0) check_caches(&c); /* the magazines point into pages vouched for above */
    if (c.bad == 0)                   /* the summary follows links the checks above vouch for */
        check_summary(&c);
    pool_cache_go(p);
    lock_release(&p->lock);
    return c.bad;
}
