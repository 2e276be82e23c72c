/* pool/pool.c — the public pool API: create/destroy, alloc/free, lookups, locking; routing
 * between the size-class slabs and the large heap (and, for a vmm pool, to the slow path that
 * maps chunks: pool_vmm.c).
 *
 * Algorithm (bounds are per call, independent of the number of live blocks):
 *   alloc(granted): need = granted rounded up to 64.
 *     need <= SLAB_MAX (512 KiB): class c = class_of(need) (slab.h).
 *       0. fast path (classes below SLAB_CACHE_CLASSES): the top of the calling thread's
 *          magazine for c (pool_cache.c), no lock; an empty magazine is refilled under the
 *          lock from steps 1-3 (at most CACHE_REFILL_MAX slots).
 *       1. the head page of c's partial list -> lowest free slot (two find-first-set).
 *          Nothing else is touched: no hash, no descriptor, no heap.
 *       2. one of c's cached empty pages, if any, goes back on the partial list -> 1.
 *       3. carve a new page for c from the top of a large free block (slab.c) -> 1; not for a
 *          class with fewer than SLAB_PAGE_MIN_LIVE live blocks (those go to 4).
 *       4. no page could be carved (large heap exhausted even after giving back the cached
 *          pages, pool smaller than a page, host OOM): serve the request from the large heap
 *          directly (a LIVE large block of exactly `need` bytes, in the address map);
 *       5. else a free slot of the next larger class that has one (scan of < SLAB_NCLASSES
 *          classes): the price of never refusing a request that some free slot could hold.
 *       A slot whose granted - requested does not fit its 32-bit record takes one req_map
 *       entry, reserved before anything changes (never for ACL's rounding).
 *     need > SLAB_MAX: large heap (TLSF, tlsf.h), cut from the bottom of the block found;
 *       on a miss the cached empty pages are given back and the search is repeated once.
 *       Then one insert into the address map (expected O(1)).  Everything that could fail
 *       for lack of host memory (3 descriptors, 1 map slot) is reserved before anything
 *       changes.
 *     vmm pool, nothing found: pool_vmm_make_room maps a fresh range (a page of the class, or
 *       the block), releasing the lock while the backing runs, then the search is repeated.
 *       Only this path calls the backing; the fast paths above are the block pool's.
 *   free(addr): the granule table names the slab page holding addr, if any (O(1), slab.h):
 *     then addr must be the start of a live slot (else POOL_ENOTLIVE, nothing changed); a slot
 *     of a cached class goes on top of the caller's magazine without the lock (a full one
 *     gives CACHE_FLUSH(cap) back under it), any other slot's bit is set again under the lock,
 *     and a page whose last slot was freed is cached or given back (slab.c).  Otherwise:
 *     address map lookup (expected O(1)), unmap, coalesce with the physical neighbours in the
 *     large heap (O(1)).  When no slot or block is taken any more (none live, none in a cache),
 *     every cached page is given back, so an empty pool is one free block over [ubase, uend).
 * Bound: slab alloc/free = O(1) (a handful of loads and stores in the class, the page's hot
 *   line, one bitmap word and one slot record); a page carve/release adds the O(1) large-heap
 *   work and <= 17 granule-table stores; giving back the cache is <= SLAB_NCLASSES *
 *   SLAB_CACHE_PAGES page releases.  Large alloc = at most 2 tlsf_find (each two
 *   find-first-set and the best of at most TLSF_FIT_SCAN blocks of a list, plus a walk of the
 *   request's own class list when no larger class holds a block: tlsf.c) + 1 split + one hash
 *   insert; large free = one hash delete + 1 coalesce.
 * Refusals: a request is refused iff no free run (FREE blocks and cached pages, which a miss
 *   gives back) is large enough and, for a slab-sized one, no class at or above its own has a
 *   free slot; the TLSF search is exact (tlsf.c), so pool_classify (pool_stats.c), which
 *   states that rule, agrees with this file in every state.  It runs only on a refusal and
 *   only when the caller asked why.
 * Tags (pool_alloc_tagged, pool_free_tagged, pool_block_tag): every block has a 32-bit word its
 *   caller owns while it is live (the shim's ledger keeps its record's handle there): a slot's
 *   after its page's slot records (a thread cache's entry carries a pointer to it, so the fast
 *   path stores nothing more), a large block's in its descriptor.  pool_free_tagged reads it
 *   where the free finds the block live and hands it to a callback before the block can be
 *   handed out again; pool_block_tag finds it as the free would (no lock for a cached slot).
 * Invariants: see pool_internal.h (tiling), slab.h (pages) and pool_check.c.
 * Statistics: pool_walk() reports a live block or slot with its granted size (what the caller
 * owns), free memory as free runs and runs of free slots (pool_stats.c); slot - granted (or
 * block size - granted) is the overhead of the conservation law.
 * Locking: one lock per pool (base/lock.h: spins, then sleeps) around every call except
 * pool_contains, which compares against the immutable range only, and the thread caches' fast
 * paths (pool_cache.c: the busy window, stopped under the lock by pool_cache_stop).
 * pool_lock/pool_unlock exist for fork handlers.
 */
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

pool_t *pool_new(uintptr_t base, size_t size, unsigned chunk_shift)
{
    if (size == 0 || base > UINTPTR_MAX - size) return NULL;
    uintptr_t ubase = (base + POOL_ALIGN - 1) & ~(uintptr_t)(POOL_ALIGN - 1);
    uintptr_t uend = (base + size) & ~(uintptr_t)(POOL_ALIGN - 1);
    if (ubase < base || uend <= ubase) return NULL; /* not even one aligned block fits */
    slab_geom_init();
    pool_cache_barrier_setup();
    pool_t *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63); /* its lines: pool_internal.h */
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    static uint64_t last_id;
    p->id = __atomic_add_fetch(&last_id, 1, __ATOMIC_RELAXED);
    p->base = base;
    p->size = size;
    p->ubase = ubase;
    p->uend = uend;
    tlsf_init(&p->large, DESC_FREE, chunk_shift);
    desc_store_init(&p->desc);
    lock_init(&p->lock);
    if (addrmap_init(&p->live, POOL_MAP_INITIAL) != 0 || desc_reserve(&p->desc, 1) != 0 ||
        slab_init(&p->slab, ubase, uend - ubase, &p->large, &p->desc) != 0) {
        pool_destroy(p);
        return NULL;
    }
    desc_t *b = desc_get(&p->desc); /* the one block of the tiling: the caller sets its state */
    b->addr = ubase;
    b->size = uend - ubase;
    p->large_first = b;
    return p;
}

pool_t *pool_create(uintptr_t base, size_t size)
{
    pool_t *p = pool_new(base, size, 0);
    if (!p) return NULL;
    p->large_first->state = DESC_FREE;
    tlsf_insert(&p->large, p->large_first);
    return p;
}

void pool_destroy(pool_t *p)
{
    if (!p) return;
    pool_cache_forget(p); /* other threads' caches of p are dropped, never touched again */
    pool_cache_xfer_free(p);
    slab_destroy(&p->slab);
    addrmap_destroy(&p->live);
    desc_store_destroy(&p->desc);
    if (p->vmm) {
        free(p->vmm->mapped_bits);
        free(p->vmm->handle);
        free(p->vmm);
    }
    free(p);
}

static inline int in_range(const pool_t *p, uintptr_t addr)
{
    return addr - p->base < p->size; /* wraps for addr < base */
}

int pool_contains(const pool_t *p, uintptr_t addr) { return p && in_range(p, addr); }

__thread uint64_t pool_mirror_writes __attribute__((tls_model("initial-exec")));

uint64_t pool_thread_mirror_writes(void) { return pool_mirror_writes; }

size_t pool_allocated_bytes(const pool_t *p)
{
    return p ? __atomic_load_n(&p->allocated_mirror, __ATOMIC_RELAXED) : 0;
}

size_t pool_size(const pool_t *p) { return p ? p->size : 0; }

size_t pool_capacity(const pool_t *p)
{
    if (!p) return 0;
    return p->vmm ? p->vmm->limit : p->size;
}

void pool_lock(pool_t *p) { lock_acquire(&p->lock); }
void pool_unlock(pool_t *p) { lock_release(&p->lock); }

/* The pool's own share of a live block (pre: lock held): large blocks, and small ones of a
 * thread without a cache.  sum_sync follows (the peak and the lock-free mirror). */
static void count_live(pool_t *p, size_t granted, size_t requested, int sign)
{
    int k = bucket_of(granted);
    if (sign > 0) {
        p->allocated_bytes += granted;
        p->requested_bytes += requested;
        p->live_blocks++;
        p->allocs++;
        p->bucket_live_blocks[k]++;
        p->bucket_live_bytes[k] += granted;
        p->sum_sync += granted;
        if (p->sum_sync > p->peak_allocated_bytes) p->peak_allocated_bytes = p->sum_sync;
    } else {
        /* No lower bound to assert: this is the pool's own share only.  A thread that exits
         * folds its cache's net figures into it (pool_cache.c: fold), and a thread that freed
         * other threads' blocks has a negative net, so a share may pass below zero (modular
         * arithmetic) while the sum over the pool and the caches stays exact; pool_check
         * verifies the sums against the blocks. */
        p->allocated_bytes -= granted;
        p->requested_bytes -= requested;
        p->live_blocks--;
        p->frees++;
        p->bucket_live_blocks[k]--;
        p->bucket_live_bytes[k] -= granted;
        p->sum_sync -= granted;
    }
    pool_mirror_store(p);
}

/* A LIVE large-heap block of exactly `need` bytes, cut from the bottom of a free block and
 * entered in the address map.  0 when nothing fits (or host OOM). */
static int large_alloc(pool_t *p, size_t need, size_t granted, size_t requested, uintptr_t *out,
                       uint32_t **tag)
{
    if (desc_reserve(&p->desc, 3) != 0 || addrmap_reserve(&p->live, 1) != 0) return 0;
    desc_t *b = slab_large_find(&p->slab, need);
    if (!b) return 0;
    debug_assert_internal(b->state == DESC_FREE && b->size >= need);
    tlsf_remove(&p->large, b);
    b = tlsf_split(&p->large, &p->desc, b, need, 0);
    b->state = DESC_LIVE;
    b->granted = granted;
    b->requested = requested;
    if (addrmap_put_new(&p->live, b->addr, (uint64_t)(uintptr_t)b) != 0) {
        /* Cannot happen after addrmap_reserve; undo rather than leak the block. */
        tlsf_insert(&p->large, tlsf_coalesce(&p->large, &p->desc, b));
        return 0;
    }
    *out = b->addr;
    *tag = &b->tag;
    return 1;
}

/* Steps 2-5 of a slab request (see the header). */
static int small_slow(pool_t *p, unsigned c, size_t need, size_t granted, size_t requested,
                      uintptr_t *out, uint32_t **tag)
{
    slab_class_t *cl = &p->slab.cls[c];
    if (cl->cached) {
        *out = slab_slot_take(&p->slab, slab_uncache(&p->slab, cl), granted, requested);
        return 1;
    }
    if (desc_reserve(&p->desc, 3) != 0) return 0;
    slab_page_t *pg = slab_page_new(&p->slab, c);
    if (pg) {
        *out = slab_slot_take(&p->slab, pg, granted, requested);
        return 1;
    }
    if (large_alloc(p, need, granted, requested, out, tag)) {
        cl->outside++; /* counted until it is freed (free_locked) */
        return 1;
    }
    for (unsigned k = c + 1; k < SLAB_NCLASSES; k++) {
        slab_class_t *d = &p->slab.cls[k];
        if (!d->partial && d->cached) slab_uncache(&p->slab, d);
        if (d->partial) {
            *out = slab_slot_take(&p->slab, d->partial, granted, requested);
            return 1;
        }
    }
    return 0;
}

/* A request on its way through pool_alloc. */
typedef struct alloc_req {
    size_t need;      /* granted rounded up to POOL_ALIGN */
    size_t granted;   /* the caller's contract */
    size_t requested; /* statistics */
    uintptr_t addr;   /* the block, once found */
    uint32_t *tag;    /* its tag word when it is a large-heap block (else found from addr) */
} alloc_req_t;

/* The tag word of the live slot at addr (pre: lock held, addr a live slot). */
static uint32_t *tag_word_locked(pool_t *p, uintptr_t addr)
{
    slab_page_t *pg = slab_page_of(&p->slab, addr);
    debug_assert_internal(pg != NULL);
    return slab_tag(pg, (size_t)slab_slot_index(pg, addr));
}

/* Everything but a thread cache, under the lock: 1 when a block was found. */
static int alloc_slow(pool_t *p, void *ctx)
{
    alloc_req_t *r = ctx;
    r->tag = NULL;
    if (r->need > SLAB_MAX)
        return large_alloc(p, r->need, r->granted, r->requested, &r->addr, &r->tag);
    unsigned c = slab_class_of(r->need);
    slab_page_t *pg = p->slab.cls[c].partial;
    if (pg) { /* the head page of the class: the lowest free slot */
        r->addr = slab_slot_take(&p->slab, pg, r->granted, r->requested);
        return 1;
    }
    return small_slow(p, c, r->need, r->granted, r->requested, &r->addr, &r->tag);
}

/* The search of pool_alloc without a thread cache (pre: lock held): 1 when found. */
static int alloc_search(pool_t *p, alloc_req_t *r, int *grow_refused)
{
    if (alloc_slow(p, r)) return 1;
    if (!p->vmm) return 0;
    /* map chunks: a page of the class, or the block itself */
    size_t room = r->need <= SLAB_MAX ? slab_page_span(&p->slab, slab_class_of(r->need)) : r->need;
    return pool_vmm_make_room(p, room, r->need, alloc_slow, r, grow_refused);
}

/* pool_alloc's locked path: a refill of the caller's cache (c non-NULL, class k cached), or
 * the search; then, before refusing, every thread's cache given back and the search again. */
static int alloc_locked(pool_t *p, cache_t *c, unsigned k, alloc_req_t *r, uintptr_t *out,
                        pool_refusal_t *why, uint32_t **tag_word)
{
    int grow_refused = 0, ok;
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    if (c && pool_cache_refill(p, c, k, r->granted, r->requested, out, tag_word)) {
        pool_cache_sync(p, c);
        pool_publish(p);
        lock_release(&p->lock);
        return POOL_OK;
    }
    if (r->need <= SLAB_MAX && slab_slot_escapes(r->granted, r->requested) &&
        addrmap_reserve(&p->slab.req_map, 1) != 0) {
        ok = 0; /* host OOM */
    } else {
        ok = alloc_search(p, r, &grow_refused);
        if (!ok) { /* the blocks in every thread's cache, then the cached pages, count too */
            pool_cache_drain_all(p);
            ok = alloc_search(p, r, &grow_refused);
        }
    }
    if (!ok) {
        p->failed_allocs++;
        if (why) { /* the state that refused: the caches are empty, the fast paths stopped */
            pool_cache_stop(p);
            pool_classify(p, r->granted, grow_refused, why);
            pool_cache_go(p);
        }
        pool_publish(p);
        lock_release(&p->lock);
        return POOL_ENOMEM;
    }
    debug_assert_internal(r->addr % POOL_ALIGN == 0 && r->addr >= p->ubase &&
                          p->uend - r->addr >= r->need);
    count_live(p, r->granted, r->requested, +1);
    if (c) pool_cache_sync(p, c);
    pool_publish(p);
    *out = r->addr;
    if (tag_word) *tag_word = r->tag ? r->tag : tag_word_locked(p, r->addr);
    lock_release(&p->lock);
    return POOL_OK;
}

/* pool_alloc and pool_alloc_tagged (tag_word NULL: no tag wanted). */
static inline int alloc_any(pool_t *p, size_t requested, size_t granted, uintptr_t *out,
                            pool_refusal_t *why, uint32_t **tag_word)
{
    if (!p || !out || granted == 0 || requested > granted) {
        if (why) memset(why, 0, sizeof *why); /* kind NONE: the arguments, not the pool */
        return POOL_EINVAL;
    }
    alloc_req_t r = {.need = desc_align(granted), .granted = granted, .requested = requested};
    cache_t *c = NULL;
    unsigned k = 0;
    /* (granted, not need: desc_align wraps for a size near SIZE_MAX; the pool's limit is checked
     * after the fast path, which only holds slots the pool has room for) */
    if (granted <= SLAB_MAX && (k = slab_class_of(r.need)) < SLAB_CACHE_CLASSES && p->slab.ngran &&
        !slab_slot_escapes(granted, requested) && (c = pool_cache_get(p))) {
        /* the fast path: the top of the class's magazine, no lock */
        cache_mag_t *m = &c->mag[k];
        if (pool_cache_enter(p, c)) {
            uint32_t n = m->n;
            if (n == 0 && !__atomic_load_n(&c->alone, __ATOMIC_RELAXED) &&
                pool_cache_xfer_take(p, c, k))
                n = m->n; /* half a magazine another thread handed over */
            if (__builtin_expect(n != 0, 1)) {
                cache_ent_t e = m->ent[n - 1];
                m->n = n - 1;
                c->ncached--;
                c->bytes -= m->slot;
                slab_record_set(e.rec, slab_slot_record(granted, requested));
                pool_cache_count(c, k, granted, requested, +1);
                pool_cache_leave(c);
                *out = e.addr;
                if (tag_word) *tag_word = slab_rec_tag(e.rec);
                return POOL_OK;
            }
            pool_cache_leave(c);
        }
    }
    if (granted > (p->vmm ? p->vmm->limit : p->uend - p->ubase)) {
        if (why) pool_explain(p, granted, why); /* POOL_REFUSAL_TOO_LARGE */
        return POOL_EINVAL;
    }
    return alloc_locked(p, c, k, &r, out, why, tag_word);
}

int pool_alloc(pool_t *p, size_t requested, size_t granted, uintptr_t *out, pool_refusal_t *why)
{
    return alloc_any(p, requested, granted, out, why, NULL);
}

int pool_alloc_tagged(pool_t *p, size_t requested, size_t granted, uintptr_t *out,
                      pool_refusal_t *why, uint32_t **tag_word)
{
    if (!tag_word) return POOL_EINVAL;
    return alloc_any(p, requested, granted, out, why, tag_word);
}

/* pool_free's locked path: the authoritative lookup; a live slot of a cached class goes to the
 * caller's cache (c), any other block back to the pool.  tell (if not NULL) gets the block's
 * tag once it is found live, before it is given back. */
static int free_locked(pool_t *p, cache_t *c, uintptr_t addr, size_t *granted_out,
                       size_t *requested_out, pool_tag_fn tell, void *ctx)
{
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    int rc = POOL_OK;
    slab_page_t *pg;
    uint64_t v;
    if (!in_range(p, addr)) {
        rc = POOL_ENOTOWNED;
    } else if ((pg = slab_page_of(&p->slab, addr)) != NULL) {
        long idx = slab_slot_live(pg, addr);
        if (idx < 0) {
            rc = POOL_ENOTLIVE;
        } else {
            slab_slot_t *rec = slab_rec(pg, (size_t)idx),
                        s = __atomic_load_n(rec, __ATOMIC_RELAXED);
            size_t g = slab_slot_granted(s), r = g - (s >> SLAB_SLOT_GBITS);
            int escaped = (s >> SLAB_SLOT_GBITS) == SLAB_REQ_ESCAPE;
            if (pg->cls < SLAB_CACHE_CLASSES && !slab_record_claim(rec, s)) {
                rc = POOL_ENOTLIVE; /* a lock-free free of another thread took it meanwhile */
            } else {
                if (escaped) {
                    uint64_t q = 0;
                    addrmap_del(&p->slab.req_map, addr, &q);
                    r = (size_t)q;
                }
                if (granted_out) *granted_out = g;
                if (requested_out) *requested_out = r;
                if (tell) tell(ctx, __atomic_load_n(slab_rec_tag(rec), __ATOMIC_RELAXED), 1);
                if (c && pg->cls < SLAB_CACHE_CLASSES && !escaped) {
                    pool_cache_push(p, c, pg, (uint32_t)idx, addr);
                    pool_cache_count(c, slab_class_of(desc_align(g)), g, r, -1);
                } else {
                    count_live(p, g, r, -1);
                    slab_slot_give(&p->slab, pg, (uint32_t)idx);
                }
            }
        }
    } else if (!addrmap_del(&p->live, addr, &v)) {
        rc = POOL_ENOTLIVE;
    } else {
        desc_t *b = (desc_t *)(uintptr_t)v;
        debug_assert_internal(b->state == DESC_LIVE && b->addr == addr);
        if (granted_out) *granted_out = b->granted;
        if (requested_out) *requested_out = b->requested;
        if (tell) tell(ctx, __atomic_load_n(&b->tag, __ATOMIC_RELAXED), 1);
        if (b->size <= SLAB_MAX) p->slab.cls[slab_class_of(b->size)].outside--;
        count_live(p, b->granted, b->requested, -1);
        tlsf_insert(&p->large, tlsf_coalesce(&p->large, &p->desc, b));
    }
    if (rc == POOL_OK) { /* empty pool: one free block */
        cache_t *own = c ? c : pool_cache_peek(p);
        if (own) pool_cache_empty(p, own);
        release_if_empty(p);
    } else {
        p->invalid_frees++;
    }
    if (c) pool_cache_sync(p, c);
    pool_publish(p);
    lock_release(&p->lock);
    return rc;
}

/* The fast free path found the caller's cache holding every taken block: check under the
 * lock and give them back. */
static void free_emptied(pool_t *p, cache_t *c)
{
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    pool_cache_empty(p, c);
    pool_cache_sync(p, c);
    lock_release(&p->lock);
}

/* pool_free and pool_free_tagged (tell NULL: nobody to tell). */
static inline int free_any(pool_t *p, uintptr_t addr, size_t *granted_out, size_t *requested_out,
                           pool_tag_fn tell, void *ctx)
{
    if (!p) return POOL_ENOTOWNED;
    /* The fast path: the granule table names the page, the record says the slot is live; it
     * goes on the top of the caller's magazine, no lock.  Anything unusual (not a slot start,
     * not live, escaped sizes, a full magazine, a stop) takes the locked path, which decides. */
    cache_thread_t *t = pool_cache_self; /* its loads overlap the page lookup's */
    cache_t *c = t && t->ent[0].pool == p && t->ent[0].id == p->id ? t->ent[0].cache : NULL;
    slab_found_t f;
    if (slab_rec_find(&p->slab, addr, &f)) {
        pool_tag_fn tell_any = tell; /* for a block of another incarnation of the page */
        slab_page_t *pg = f.pg;
        slab_slot_t *rec = f.rec;
        if (__builtin_expect(pool_free_race_hook != NULL, 0)) pool_free_race_hook(p, addr);
        slab_slot_t s = __atomic_load_n(rec, __ATOMIC_RELAXED);
        int live = slab_record_live(s) && (s >> SLAB_SLOT_GBITS) != SLAB_REQ_ESCAPE;
        if (live && tell) { /* still live: nobody else can be handed it yet */
            uint32_t tag = __atomic_load_n(slab_rec_tag(rec), __ATOMIC_RELAXED);
            if (slab_gen_same(pg, f.gen)) { /* else the locked path decides and tells */
                tell(ctx, tag, 0);
                tell = NULL;
            }
        }
        if (live && (c || (c = pool_cache_lookup(p)) != NULL) && pool_cache_enter(p, c)) {
            unsigned k = f.cls;
            cache_mag_t *m = &c->mag[k];
            size_t slot = m->slot;
            if (m->n == m->cap && !__atomic_load_n(&c->alone, __ATOMIC_RELAXED))
                pool_cache_xfer_put(p, c, k); /* half of it to the class, for other threads */
            if (__builtin_expect(m->n < m->cap && c->bytes + slot <= CACHE_BYTES_MAX, 1) &&
                __builtin_expect(slab_record_claim(rec, s), 1)) { /* else: another free won */
                if (__builtin_expect(!slab_gen_same(pg, f.gen), 0)) {
                    slab_record_unclaim(rec, s); /* it was another page's record by then */
                    pool_cache_leave(c);
                    return free_locked(p, c, addr, granted_out, requested_out, tell_any, ctx);
                }
                /* ours now: the slot keeps its page from being released */
                size_t g = slab_slot_granted(s), r = g - (s >> SLAB_SLOT_GBITS);
                m->ent[m->n++] = cache_ent_rec(pg, rec, addr);
                if (__builtin_expect(m->n == m->cap, 0)) cache_flush_ahead(m);
                c->ncached++;
                c->bytes += slot;
                /* counted in the class of its size (a request may have been served from a
                 * larger class's slot when its own had none: pool.c, step 5) */
                pool_cache_count(c, slab_class_of(desc_align(g)), g, r, -1);
                int all = __atomic_load_n(&c->alone, __ATOMIC_RELAXED) &&
                          c->ncached == __atomic_load_n(&p->in_use, __ATOMIC_RELAXED);
                pool_cache_leave(c);
                if (__builtin_expect(all, 0)) free_emptied(p, c); /* nothing live: tidy up */
                if (granted_out) *granted_out = g;
                if (requested_out) *requested_out = r;
                return POOL_OK;
            }
            pool_cache_leave(c);
        }
    }
    return free_locked(p, c, addr, granted_out, requested_out, tell, ctx);
}

int pool_free(pool_t *p, uintptr_t addr, size_t *granted_out, size_t *requested_out)
{
    return free_any(p, addr, granted_out, requested_out, NULL, NULL);
}

int pool_free_tagged(pool_t *p, uintptr_t addr, size_t *granted_out, pool_tag_fn tell, void *ctx)
{
    return free_any(p, addr, granted_out, NULL, tell, ctx);
}

int pool_block_tag(pool_t *p, uintptr_t addr, uint32_t *tag)
{
    if (!pool_contains(p, addr)) return POOL_ENOTOWNED;
    /* A slot of a cached class: its record tells a live slot without the lock (pool_free), and
     * is written without it by the thread caches, so it is answered without the lock (a slot
     * that is not live may be changing hands, and either answer is true of some instant), unless
     * its page is being rewritten for another (slab_rec_find): then under the lock. */
    slab_found_t f;
    if (slab_rec_find(&p->slab, addr, &f)) {
        slab_slot_t s = __atomic_load_n(f.rec, __ATOMIC_RELAXED);
        uint32_t t = __atomic_load_n(slab_rec_tag(f.rec), __ATOMIC_RELAXED);
        if (slab_gen_same(f.pg, f.gen)) { /* else the page changed: ask under the lock */
            if (!slab_record_live(s)) return POOL_ENOTLIVE;
            *tag = t;
            return POOL_OK;
        }
    }
    slab_page_t *pg;
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    int rc = POOL_ENOTLIVE;
    uint64_t v;
    if ((pg = slab_page_of(&p->slab, addr)) != NULL) {
        long idx = slab_slot_live(pg, addr);
        if (idx >= 0) {
            *tag = __atomic_load_n(slab_tag(pg, (size_t)idx), __ATOMIC_RELAXED);
            rc = POOL_OK;
        }
    } else if (addrmap_get(&p->live, addr, &v)) {
        *tag = __atomic_load_n(&((const desc_t *)(uintptr_t)v)->tag, __ATOMIC_RELAXED);
        rc = POOL_OK;
    }
    lock_release(&p->lock);
    return rc;
}

int pool_block_size(pool_t *p, uintptr_t addr, size_t *granted, size_t *requested)
{
    if (!pool_contains(p, addr)) return POOL_ENOTOWNED;
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    int rc = POOL_ENOTLIVE;
    slab_page_t *pg = slab_page_of(&p->slab, addr);
    uint64_t v;
    if (pg) {
        long idx = slab_slot_live(pg, addr);
        if (idx >= 0) {
            slab_slot_t s = __atomic_load_n(slab_rec(pg, (size_t)idx), __ATOMIC_RELAXED);
            if (granted) *granted = slab_slot_granted(s);
            if (requested) *requested = slab_slot_requested(&p->slab, s, addr);
            rc = POOL_OK;
        }
    } else if (addrmap_get(&p->live, addr, &v)) {
        const desc_t *b = (const desc_t *)(uintptr_t)v;
        if (granted) *granted = b->granted;
        if (requested) *requested = b->requested;
        rc = POOL_OK;
    }
    lock_release(&p->lock);
    return rc;
}
