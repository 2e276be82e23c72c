/* pool/pool_stats.c — statistics and the address-order walk of a pool.
 *
 * Owns: pool_bucket_limit[], pool_bucket_of(), pool_get_stats(), pool_walk() and the
 * free-space summary (pool_free_summary), built on the pages' run summaries (slab.c).
 *
 * What a "free block" is: a maximal run of free bytes in address order, whatever holds them:
 * a FREE large-heap block, free slots of a slab page (free slots count as free memory, cached
 * empty pages too), or several of these side by side (a page's free last slots, the FREE
 * block above it, the free first slots of the page above that, ...).  pool_walk reports
 * exactly these runs, so no free block it reports has a free neighbour, and free_blocks /
 * largest_free_bytes / the per-bucket free counts of pool_get_stats describe the same runs
 * (pool_check verifies both against each other).  A live block or slot is reported with its
 * granted size; the rest of its block or slot is overhead.
 *
 * Cost: live-side counters and free bytes are kept incrementally (pool.c, tlsf.c, slab.h).
 * Without slab pages the free side is O(1) (the heap's counters plus a scan of its top class
 * list for the exact largest block).  With pages, pool_free_summary recomputes the run summary
 * of every page changed since the last call (O(bitmap words + runs) each, `dirty` flag; the
 * pool keeps the sums of the pages' inner runs, updated then), then joins edge runs across
 * page boundaries in one pass over the pages (O(pages), a few loads each): every run
 * that touches a page edge is counted once, from its lowest page piece (the free last slots
 * of a page that is not all free, or the free first slots of a page with no free-tailed page
 * below it, directly or across one FREE block), and followed upwards.
 * fragmentation = 1 - largest_free / free_bytes (0 when nothing is free); overhead is what the
 * conservation law leaves: reserved - allocated - free.
 * Locking: both public functions take pool->lock; a walk callback must not call into the same
 * pool.  pool_free_summary runs under the lock (it updates the page run caches).
 */
#include <string.h>

#include "pool_internal.h"

const size_t pool_bucket_limit[POOL_NBUCKETS - 1] = BUCKET_LIMITS;

int pool_bucket_of(size_t size) { return bucket_of(size); }

static void run_record(pool_freesum_t *o, size_t len)
{
    int k = bucket_of(len);
    o->free_blocks++;
    o->bucket_blocks[k]++;
    o->bucket_bytes[k] += len;
    if (len > o->largest) o->largest = len;
}

/* A FREE large block that is part of a run through a page edge: not a run of its own. */
static void run_consume(pool_freesum_t *o, const desc_t *f)
{
    int k = bucket_of(f->size);
    o->free_blocks--;
    o->bucket_blocks[k]--;
    o->bucket_bytes[k] -= f->size;
}

/* pg's free last slots (len bytes so far, up to pg's end) continue upwards: through a FREE
 * block, into the free first slots of the page above, and on while those pages are all free. */
static void run_up(pool_freesum_t *o, const slab_page_t *pg, size_t len)
{
    for (;;) {
        const desc_t *y = pg->blk->phys_next;
        if (y && y->state == DESC_FREE) {
            len += y->size;
            run_consume(o, y);
            y = y->phys_next;
        }
        if (y && y->state == DESC_PAGE && y->page->runs.head) {
            const slab_page_t *q = y->page;
            len += (size_t)q->runs.head * q->slot;
            if (q->runs.head == q->nslots) {
                pg = q;
                continue;
            }
        }
        break;
    }
    run_record(o, len);
}

void pool_free_summary(pool_t *p, pool_freesum_t *o)
{
    memset(o, 0, sizeof *o);
    o->free_bytes = p->large.free_bytes + p->slab.free_bytes;
    o->free_blocks = p->large.free_blocks;
    o->largest = tlsf_largest(&p->large);
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        o->bucket_blocks[k] = p->large.bucket_free_blocks[k];
        o->bucket_bytes[k] = p->large.bucket_free_bytes[k];
    }
    if (!p->slab.pages) return;
    slab_refresh_runs(&p->slab);
    for (uint32_t id = 1; id < p->slab.id_top; id++) {
        const slab_page_t *pg = p->slab.page_by_id[id];
        if (!pg) continue;
        if ((size_t)pg->runs.inner_max * pg->slot > o->largest)
            o->largest = (size_t)pg->runs.inner_max * pg->slot;
    }
    o->free_blocks += p->slab.inner_runs;
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        o->bucket_blocks[k] += p->slab.inner_blocks[k];
        o->bucket_bytes[k] += p->slab.inner_bytes[k];
    }
    for (uint32_t id = 1; id < p->slab.id_top; id++) {
        const slab_page_t *pg = p->slab.page_by_id[id];
        if (!pg) continue;
        const slab_runs_t *r = &pg->runs;
        int all_free = r->head == pg->nslots;
        if (r->tail && !all_free) run_up(o, pg, (size_t)r->tail * pg->slot);
        if (!r->head) continue;
        const desc_t *x = pg->blk->phys_prev, *f = NULL;
        if (x && x->state == DESC_FREE) {
            f = x;
            x = x->phys_prev;
        }
        if (x && x->state == DESC_PAGE && x->page->runs.tail)
            continue; /* the run starts in the page below and is followed up from there */
        size_t len = (size_t)r->head * pg->slot;
        if (f) {
            len += f->size;
            run_consume(o, f);
        }
        if (all_free)
            run_up(o, pg, len);
        else
            run_record(o, len);
    }
}

void pool_get_stats(pool_t *p, pool_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    pool_freesum_t fs;
    pool_free_summary(p, &fs);
    out->base = p->base;
    out->reserved_bytes = p->size;
    out->allocated_bytes = p->allocated_bytes;
    out->requested_bytes = p->requested_bytes;
    out->peak_allocated_bytes = p->peak_allocated_bytes;
    out->free_bytes = fs.free_bytes;
    out->largest_free_bytes = fs.largest;
    out->overhead_bytes = p->size - p->allocated_bytes - out->free_bytes;
    out->fragmentation =
        out->free_bytes ? 1.0 - (double)out->largest_free_bytes / (double)out->free_bytes : 0.0;
    out->live_blocks = p->live_blocks;
    out->free_blocks = fs.free_blocks;
    out->allocs = p->allocs;
    out->frees = p->frees;
    out->failed_allocs = p->failed_allocs;
    out->invalid_frees = p->invalid_frees;
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        out->buckets[k].live_blocks = p->bucket_live_blocks[k];
        out->buckets[k].live_bytes = p->bucket_live_bytes[k];
        out->buckets[k].free_blocks = fs.bucket_blocks[k];
        out->buckets[k].free_bytes = fs.bucket_bytes[k];
    }
    pthread_mutex_unlock(&p->lock);
}

/* ---- walk ---------------------------------------------------------------------------------- */
typedef struct walker {
    pool_walk_fn cb;    /* user callback */
    void *ctx;          /* its context */
    uintptr_t run_addr; /* start of the pending free run */
    size_t run_len;     /* its bytes, 0 = none pending */
} walker_t;

static int walk_flush(walker_t *w)
{
    if (!w->run_len) return 0;
    size_t len = w->run_len;
    w->run_len = 0;
    return w->cb(w->ctx, w->run_addr, len, 1);
}

static void walk_free(walker_t *w, uintptr_t addr, size_t len)
{
    if (!w->run_len) w->run_addr = addr;
    w->run_len += len; /* the tiling is contiguous: a pending run always ends at addr */
}

static int walk_live(walker_t *w, uintptr_t addr, size_t granted)
{
    int r = walk_flush(w);
    return r ? r : w->cb(w->ctx, addr, granted, 0);
}

static int walk_page(walker_t *w, const slab_page_t *pg)
{
    uint32_t n = pg->nslots;
    for (uint32_t i = 0; i < n;) {
        uintptr_t a = pg->addr + (uintptr_t)i * pg->slot;
        if (pg->bits[i >> 6] >> (i & 63) & 1) {
            uint32_t j = slab_next_live(pg, i);
            walk_free(w, a, (size_t)(j - i) * pg->slot);
            i = j;
        } else {
            int r = walk_live(w, a, slab_slot_granted(slab_slots(pg)[i]));
            if (r) return r;
            i++;
        }
    }
    return 0;
}

int pool_walk_locked(const pool_t *p, pool_walk_fn cb, void *ctx, uint64_t limit)
{
    walker_t w = {.cb = cb, .ctx = ctx};
    int r = 0;
    uint64_t n = 0;
    for (const desc_t *b = p->large_first; b && !r && n++ < limit; b = b->phys_next) {
        if (b->state == DESC_FREE)
            walk_free(&w, b->addr, b->size);
        else if (b->state == DESC_LIVE)
            r = walk_live(&w, b->addr, b->granted);
        else if (b->state == DESC_PAGE && b->page)
            r = walk_page(&w, b->page);
    }
    if (!r) r = walk_flush(&w);
    return r;
}

int pool_walk(pool_t *p, pool_walk_fn cb, void *ctx)
{
    if (!p || !cb) return 0;
    pthread_mutex_lock(&p->lock);
    int r = pool_walk_locked(p, cb, ctx, UINT64_MAX);
    pthread_mutex_unlock(&p->lock);
    return r;
}
