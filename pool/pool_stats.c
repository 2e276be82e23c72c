/* pool/pool_stats.c — what a pool says about its free space: the summary, statistics, the
 * address-order walk and snapshots of both.
 *
 * Owns: pool_bucket_limit[], pool_bucket_of(), the free-space summary (pool_summarize),
 * pool_get_stats(), pool_walk(), pool_snapshot(), and the refusal classifier built on the
 * summary (pool_classify, pool_explain, pool_refusal_name, pool_refusal_describe).
 *
 * Two kinds of free extent (pool.h, enum pool_extent):
 *   FREE   a maximal run of FREE large-heap blocks and cached empty slab pages side by side.
 *          Any request of up to its size can be given memory there: a large-heap search that
 *          misses gives the cached pages back (slab.c), and they coalesce with the blocks
 *          around them.  No two FREE blocks are neighbours, so a run alternates between at
 *          most one FREE block and one or more empty pages.
 *   SLOTS  a maximal run of free slots inside one page that holds live slots.  Only requests
 *          of the page's class or smaller can use it, so it is never merged across the page's
 *          edges nor with a FREE run (it used to be, which made largest_free_bytes promise
 *          large blocks that no large request could get).
 * largest_free_bytes is the longest FREE run; fragmentation = 1 - largest / free, so free
 * slots count as fragmentation; free_blocks and the per-bucket free counts count both kinds,
 * exactly as pool_walk reports them (pool_check verifies the three against its own walk).  A
 * live block or slot is reported with its granted size; the rest of it is overhead, which is
 * what the conservation law leaves: reserved - allocated - free.
 *
 * Cost of the summary: the heap keeps its free counters (tlsf.c), the slabs their free bytes
 * (slab.h), so without pages it is O(1) plus tlsf_largest's scan of the top class list.  With
 * pages, slab_refresh_runs recounts the pages changed since the last call (O(pages + their
 * bitmap words)) and keeps the sum of every page's runs; a cached page's one run is moved from
 * the SLOTS sums into the FREE run it belongs to, which is followed through the tiling from
 * its lowest cached page (O(cached pages) <= SLAB_NCLASSES * SLAB_CACHE_PAGES steps).
 * Refusals: pool_classify states in one place what pool_alloc's search does (pool.c): the
 * largest block a request of a given size could be given is the longest FREE run, or for a
 * slab-sized request also the slot of the largest class at or above its own with a free slot
 * (a partial or cached page).  It costs one summary: it runs on refusals and on request only.
 * The sentence (pool_refusal_describe) is the one both the stderr line and the report use.
 * Locking: every public function takes pool->lock once; a walk callback must not call into
 * the same pool.  pool_summarize and pool_walk_locked run under it.
 */
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "pool_internal.h"

const size_t pool_bucket_limit[POOL_NBUCKETS - 1] = BUCKET_LIMITS;

int pool_bucket_of(size_t size) { return bucket_of(size); }

/* ---- summary ------------------------------------------------------------------------------- */
static inline int is_empty_page(const desc_t *b)
{
    return b->state == DESC_PAGE && b->page->live == 0;
}

/* b (FREE or an empty page) belongs to a FREE run: take it out of the counts it was in. */
static void run_consume(const pool_t *p, pool_summary_t *o, const desc_t *b)
{
    int k = bucket_of(b->size);
    if (b->state == DESC_FREE) { /* counted as a run of its own from the heap's counters */
        o->free_runs--;
        if (p->large.chunk_shift)
            o->whole_bytes -= tlsf_whole(b->addr, b->size, p->large.chunk_shift);
    } else { /* counted as one SLOTS run from the pages' run sums */
        debug_assert_internal(b->page->runs.runs == 1 && !b->page->dirty);
        o->slot_runs--;
        o->slab_free_bytes -= b->size;
    }
    o->bucket_blocks[k]--;
    o->bucket_bytes[k] -= b->size;
}

/* The FREE run holding the empty page pg, counted once: from the lowest empty page in it. */
static void run_through(const pool_t *p, pool_summary_t *o, const slab_page_t *pg)
{
    const desc_t *x = pg->blk->phys_prev;
    if (x && x->state == DESC_FREE) x = x->phys_prev;
    if (x && is_empty_page(x)) return; /* the run was followed from that page */
    const desc_t *b = pg->blk->phys_prev;
    if (!b || b->state != DESC_FREE) b = pg->blk;
    uintptr_t start = b->addr;
    size_t len = 0;
    for (; b && (b->state == DESC_FREE || is_empty_page(b)); b = b->phys_next) {
        len += b->size;
        run_consume(p, o, b);
    }
    if (p->large.chunk_shift) o->whole_bytes += tlsf_whole(start, len, p->large.chunk_shift);
    int k = bucket_of(len);
    o->free_runs++;
    o->bucket_blocks[k]++;
    o->bucket_bytes[k] += len;
    if (len > o->largest) o->largest = len;
}

void pool_summarize(pool_t *p, const pool_counts_t *n, pool_summary_t *o)
{
    memset(o, 0, sizeof *o);
    o->free_bytes = p->large.free_bytes + p->slab.free_bytes;
    o->whole_bytes = p->large.whole_bytes;
    o->free_runs = p->large.free_blocks;
    o->largest = tlsf_largest(&p->large);
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        o->bucket_blocks[k] = p->large.bucket_free_blocks[k];
        o->bucket_bytes[k] = p->large.bucket_free_bytes[k];
    }
    if (!p->slab.pages) return;
    slab_refresh_runs(&p->slab);
    const slab_runs_t *r = &p->slab.run_sums;
    /* a block in a thread's cache: one SLOTS extent of its slot's bytes */
    o->free_bytes += n->cached_bytes;
    o->slot_runs = r->runs + n->cached_blocks;
    o->slab_free_bytes = p->slab.free_bytes + n->cached_bytes;
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        o->bucket_blocks[k] += r->blocks[k] + n->cached_bucket_blocks[k];
        o->bucket_bytes[k] += r->bytes[k] + n->cached_bucket_bytes[k];
    }
    for (unsigned c = 0; c < SLAB_NCLASSES && p->slab.cached_pages; c++)
        for (const slab_page_t *pg = p->slab.cls[c].cached; pg; pg = pg->next)
            run_through(p, o, pg);
}

/* ---- statistics ---------------------------------------------------------------------------- */
/* pre: lock held, fast paths stopped. */
static void stats_locked(pool_t *p, pool_stats_t *out)
{
    pool_counts_t n;
    pool_summary_t fs;
    pool_cache_sum(p, &n);
    pool_summarize(p, &n, &fs);
    memset(out, 0, sizeof *out);
    const pool_vmm_t *v = p->vmm;
    size_t held = v ? v->mapped : p->size;
    out->base = p->base;
    out->reserved_bytes = held;
    out->allocated_bytes = n.allocated;
    out->requested_bytes = n.requested;
    out->peak_allocated_bytes = n.peak;
    out->free_bytes = fs.free_bytes;
    out->largest_free_bytes = fs.largest;
    out->slab_free_bytes = fs.slab_free_bytes;
    out->cached_bytes = n.cached_bytes;
    out->cached_blocks = n.cached_blocks;
    out->overhead_bytes = held - n.allocated - out->free_bytes;
    out->fragmentation =
        out->free_bytes ? 1.0 - (double)out->largest_free_bytes / (double)out->free_bytes : 0.0;
    out->live_blocks = n.live_blocks;
    out->free_blocks = fs.free_runs + fs.slot_runs;
    out->allocs = n.allocs;
    out->frees = n.frees;
    out->failed_allocs = p->failed_allocs;
    out->invalid_frees = p->invalid_frees;
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        out->buckets[k].live_blocks = n.bucket_blocks[k];
        out->buckets[k].live_bytes = n.bucket_bytes[k];
        out->buckets[k].free_blocks = fs.bucket_blocks[k];
        out->buckets[k].free_bytes = fs.bucket_bytes[k];
    }
    out->backing = v ? POOL_BACKING_VMM : POOL_BACKING_BLOCK;
    out->va_bytes = p->size;
    out->limit_bytes = v ? v->limit : p->size;
    if (v) {
        out->chunk_bytes = v->chunk;
        out->whole_chunk_free_bytes = fs.whole_bytes;
        out->va_largest_unmapped = tlsf_largest(&v->voids);
        out->chunks_mapped = v->chunks_mapped;
        out->chunks_unmapped = v->chunks_unmapped;
        out->grows = v->grows;
        out->stitches = v->stitches;
        out->give_backs = v->give_backs;
        out->given_back_bytes = v->given_back;
        out->backing_failures = v->failures;
    }
}

/* ---- walk ---------------------------------------------------------------------------------- */
typedef struct walker {
    pool_walk_fn cb;    /* user callback */
    void *ctx;          /* its context */
    uintptr_t run_addr; /* start of the pending FREE run */
    size_t run_len;     /* its bytes, 0 = none pending */
} walker_t;

static int walk_flush(walker_t *w)
{
    if (!w->run_len) return 0;
    size_t len = w->run_len;
    w->run_len = 0;
    return w->cb(w->ctx, w->run_addr, len, POOL_EXTENT_FREE);
}

static void walk_free(walker_t *w, uintptr_t addr, size_t len)
{
    if (!w->run_len) w->run_addr = addr;
    w->run_len += len; /* the tiling is contiguous: a pending run always ends at addr */
}

/* A page holding live slots: its live slots and runs of free slots, in address order. */
static int walk_page(walker_t *w, const slab_page_t *pg)
{
    int r = walk_flush(w);
    uint32_t n = pg->nslots;
    for (uint32_t i = 0; i < n && !r;) {
        uintptr_t a = pg->addr + (uintptr_t)i * pg->slot;
        if (pg->bits[i >> 6] >> (i & 63) & 1) {
            uint32_t j = slab_next_live(pg, i);
            r = w->cb(w->ctx, a, (size_t)(j - i) * pg->slot, POOL_EXTENT_SLOTS);
            i = j;
        } else if (pg->cls < SLAB_CACHE_CLASSES && *slab_rec(pg, i) == SLAB_SLOT_CACHED) {
            r = w->cb(w->ctx, a, pg->slot, POOL_EXTENT_SLOTS); /* free for the application */
            i++;
        } else {
            r = w->cb(w->ctx, a, slab_slot_granted(*slab_rec(pg, i)), POOL_EXTENT_LIVE);
            i++;
        }
    }
    return r;
}

int pool_walk_locked(const pool_t *p, pool_walk_fn cb, void *ctx, uint64_t limit)
{
    walker_t w = {.cb = cb, .ctx = ctx};
    int r = 0;
    uint64_t n = 0;
    for (const desc_t *b = p->large_first; b && !r && n++ < limit; b = b->phys_next) {
        if (b->state == DESC_FREE || (b->state == DESC_PAGE && b->page && b->page->live == 0)) {
            walk_free(&w, b->addr, b->size);
        } else if (b->state == DESC_LIVE) {
            r = walk_flush(&w);
            if (!r) r = cb(ctx, b->addr, b->granted, POOL_EXTENT_LIVE);
        } else if (b->state == DESC_PAGE && b->page) {
            r = walk_page(&w, b->page);
        } else { /* VOID or TRANSIT: no memory the pool can hand out */
            r = walk_flush(&w);
        }
    }
    if (!r) r = walk_flush(&w);
    return r;
}

/* ---- refusals ------------------------------------------------------------------------------ */
void pool_classify(pool_t *p, size_t granted, int grow_refused, pool_refusal_t *out)
{
    const pool_vmm_t *v = p->vmm;
    size_t usable = v ? v->limit : p->uend - p->ubase;
    if (granted == 0) granted = 1;
    pool_counts_t n;
    pool_summary_t fs;
    pool_cache_sum(p, &n);
    pool_summarize(p, &n, &fs);
    memset(out, 0, sizeof *out);
    out->need = granted > SIZE_MAX - (POOL_ALIGN - 1) ? granted : desc_align(granted);
    out->free_bytes = fs.free_bytes;
    out->slab_free_bytes = fs.slab_free_bytes;
    out->reserved_bytes = v ? v->limit : p->size;
    /* What pool_alloc would try: a free run (large heap, cached pages given back on a miss);
     * for a slab-sized request also a free slot of its class or a larger one (pool.c). */
    size_t best = fs.largest;
    if (out->need <= SLAB_MAX && p->slab.pages) {
        for (unsigned k = SLAB_NCLASSES; k-- > slab_class_of(out->need);) {
            const slab_class_t *c = &p->slab.cls[k];
            if (c->partial || c->cached) {
                if (slab_geom[k].slot > best) best = slab_geom[k].slot;
                break;
            }
        }
    }
    out->usable_largest = best;
    /* vmm: then a fresh range mapped with fresh memory or remapped whole free chunks
     * (pool_vmm.c, the same rule as its planner). */
    int stitch = 0;
    size_t headroom = 0;
    if (v) {
        headroom = grow_refused || v->released ? 0 : pool_vmm_headroom(p);
        out->backing = POOL_BACKING_VMM;
        out->chunk_bytes = v->chunk;
        out->stitch_bytes = out->need > SIZE_MAX - v->chunk
                                ? out->need
                                : (out->need + v->chunk - 1) & ~(v->chunk - 1);
        out->headroom_bytes = headroom;
        out->remappable_bytes = fs.whole_bytes + headroom;
        out->va_largest = tlsf_largest(&v->voids);
        stitch = granted <= usable && !v->released &&
                 pool_vmm_can_stitch(p, out->need, headroom, fs.whole_bytes);
    }
    if (granted > usable)
        out->kind = POOL_REFUSAL_TOO_LARGE;
    else if (best >= out->need || stitch)
        out->kind = POOL_REFUSAL_NONE;
    else if (fs.free_bytes + headroom < out->need)
        out->kind = POOL_REFUSAL_EXHAUSTED;
    else
        out->kind = POOL_REFUSAL_FRAGMENTED;
}

const char *pool_refusal_name(enum pool_refusal_kind kind)
{
    switch (kind) {
    case POOL_REFUSAL_NONE: return "none";
    case POOL_REFUSAL_EXHAUSTED: return "exhausted";
    case POOL_REFUSAL_FRAGMENTED: return "fragmentation";
    case POOL_REFUSAL_TOO_LARGE: return "too large";
    }
    return "unknown";
}

/* Two figures that differ but print alike ("32.0 MiB free, 32.0 MiB needed": the request's
 * padding) are printed as exact byte counts too.  Buffers: EXACT_LEN bytes. */
#define EXACT_LEN (FMT_BYTES_LEN + 32)
static void exact_if_alike(char *a, uint64_t av, char *b, uint64_t bv)
{
    if (av == bv || strcmp(a, b) != 0) return;
    char t[FMT_BYTES_LEN];
    memcpy(t, a, sizeof t);
    snprintf(a, EXACT_LEN, "%s (%llu bytes)", t, (unsigned long long)av);
    snprintf(b, EXACT_LEN, "%s (%llu bytes)", t, (unsigned long long)bv);
}

size_t pool_refusal_describe(const pool_refusal_t *r, char *buf, size_t len)
{
    debug_assert(r != NULL && (buf != NULL || len == 0));
    char need[EXACT_LEN], free_s[EXACT_LEN], best[EXACT_LEN], x[FMT_BYTES_LEN];
    fmt_bytes(need, r->need);
    fmt_bytes(free_s, r->free_bytes);
    fmt_bytes(best, r->usable_largest);
    if (r->kind == POOL_REFUSAL_EXHAUSTED)
        exact_if_alike(free_s, r->free_bytes, need, r->need);
    else
        exact_if_alike(best, r->usable_largest, need, r->need);
    const char *name = pool_refusal_name(r->kind);
    int n;
    switch (r->kind) {
    case POOL_REFUSAL_NONE:
        n = snprintf(buf, len, "%s: a %s request fits (the largest block it can be given is %s)",
                     name, need, best);
        break;
    case POOL_REFUSAL_EXHAUSTED:
        if (r->backing == POOL_BACKING_VMM && r->headroom_bytes)
            n = snprintf(buf, len, "%s: %s free and %s more the pool may still map, %s needed",
                         name, free_s, fmt_bytes(x, r->headroom_bytes), need);
        else
            n = snprintf(buf, len, "%s: %s free, %s needed", name, free_s, need);
        break;
    case POOL_REFUSAL_FRAGMENTED:
        n = snprintf(buf, len, "%s: %s free, but the largest block a %s request can be given is %s",
                     name, free_s, need, best);
        if (n >= 0 && r->backing == POOL_BACKING_VMM) {
            char chunk[FMT_BYTES_LEN], whole[FMT_BYTES_LEN], stitch[FMT_BYTES_LEN];
            fmt_bytes(chunk, r->chunk_bytes);
            fmt_bytes(whole, r->remappable_bytes);
            fmt_bytes(stitch, r->stitch_bytes);
            size_t at = (size_t)n < len ? (size_t)n : len ? len - 1 : 0;
            int m;
            if (r->remappable_bytes >= r->stitch_bytes) /* the physical memory is there */
                m = snprintf(len ? buf + at : NULL, len - at,
                             ", and no unmapped stretch of the address range is %s long "
                             "(the longest is %s)",
                             stitch, fmt_bytes(x, r->va_largest));
            else
                m = snprintf(len ? buf + at : NULL, len - at,
                             ", and only %s of the free space fills whole %s chunks that could "
                             "be remapped into one range (the rest lies in pieces smaller than a "
                             "chunk, beside live blocks)",
                             whole, chunk);
            n = m < 0 ? m : n + m;
        } else if (n >= 0 && r->slab_free_bytes) {
            size_t at = (size_t)n < len ? (size_t)n : len ? len - 1 : 0;
            int m = snprintf(len ? buf + at : NULL, len - at,
                             " (%s of the free space is free slots in small-block pages)",
                             fmt_bytes(x, r->slab_free_bytes));
            n = m < 0 ? m : n + m;
        }
        break;
    case POOL_REFUSAL_TOO_LARGE:
        fmt_bytes(x, r->reserved_bytes);
        if (strcmp(need, x) == 0) /* "64.0 MiB needed ... (64.0 MiB)": say it in bytes */
            n = snprintf(buf, len, "%s: %zu B needed, more than the pool can ever hold (%zu B)",
                         name, r->need, r->reserved_bytes);
        else
            n = snprintf(buf, len, "%s: %s needed, more than the pool can ever hold (%s)", name,
                         need, x);
        break;
    default: n = snprintf(buf, len, "%s", name);
    }
    return n < 0 ? 0 : (size_t)n;
}

/* ---- public -------------------------------------------------------------------------------- */
void pool_explain(pool_t *p, size_t granted, pool_refusal_t *out)
{
    debug_assert(p != NULL && out != NULL);
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    /* As pool_alloc before it refuses: every thread's cached blocks back to their pages (the
     * drain's own stop nests in this one: one barrier). */
    pool_cache_stop(p);
    pool_cache_drain_all(p);
    pool_classify(p, granted, 0, out);
    pool_cache_go(p);
    lock_release(&p->lock);
}

int pool_snapshot(pool_t *p, pool_stats_t *stats, pool_walk_fn cb, void *ctx)
{
    if (!p) {
        if (stats) memset(stats, 0, sizeof *stats);
        return 0;
    }
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    pool_cache_stop(p); /* one instant: no thread is in a fast path until pool_cache_go */
    if (stats) stats_locked(p, stats);
    int r = cb ? pool_walk_locked(p, cb, ctx, UINT64_MAX) : 0;
    pool_cache_go(p);
    lock_release(&p->lock);
    return r;
}

void pool_get_stats(pool_t *p, pool_stats_t *out) { pool_snapshot(p, out, NULL, NULL); }

int pool_walk(pool_t *p, pool_walk_fn cb, void *ctx)
{
    return cb ? pool_snapshot(p, NULL, cb, ctx) : 0;
}
