/* pool/pool_vmm.c — the virtual-memory backing of a pool: chunks mapped into a reserved address
 * range, growth, stitching, give-back, release.
 *
 * Owns: pool_create_vmm, pool_grow, pool_give_back, pool_release_backing, the slow path
 * pool_alloc takes for a vmm pool when no free run can hold a request (pool_vmm_make_room), and
 * the simulated backing of replay and the benchmarks (pool_sim_backing).
 *
 * Model.  The range [base, base+size) is cut into chunks of `chunk` bytes (a power of two); a
 * chunk is mapped (a physical handle of the backing is mapped there) or not.  The tiling of the
 * range (pool_internal.h) has two more block states: VOID (unmapped, chunk aligned, maximal,
 * listed in vmm->voids, a TLSF heap of its own) and TRANSIT (taken by a slow path in flight).
 * FREE, LIVE and PAGE blocks lie in mapped chunks only.  At most `limit` bytes are mapped.
 * The large heap keeps whole_bytes: the free bytes in chunks that lie inside one FREE block, i.e.
 * the physical memory that can be unmapped without touching a live block.
 *
 * Every change of mapping follows one pattern, so that no pool lock is held while the backing
 * (the runtime) runs:
 *   1. plan, under the lock: carve the chunks to unmap out of FREE blocks and the stretch to map
 *      out of a VOID block, as TRANSIT blocks nobody else will touch; copy their handles;
 *      reserve the fresh physical memory to take in pending_grow; reserve every descriptor and
 *      host array the commit needs (host OOM fails the plan before anything changed);
 *   2. run, without the lock: unmap the source chunks (their handles become spare), take fresh
 *      physical memory, map spare handles into the stretch, free what is left over.  Each part
 *      stops at its first failure, so each TRANSIT block ends as "a prefix done, the rest not";
 *   3. commit, under the lock: the done prefix of a source becomes VOID, the rest FREE again; the
 *      mapped prefix of the stretch becomes FREE, the rest VOID (each coalesced with its
 *      neighbours); mapped, pending_grow and the chunk table follow.
 *   Meanwhile other threads allocate and free as usual: TRANSIT blocks coalesce with nothing.
 *
 * Uses of the pattern:
 *   grow       (pool_grow; shim: the first chunks at creation) fresh physical memory mapped into
 *              an unmapped stretch;
 *   make room  (pool_alloc, nothing found): a fresh stretch of K = ALIGN_UP(need, chunk) bytes
 *              in the best-fitting VOID block, mapped with fresh physical memory as far as the
 *              limit allows (growth), the rest with chunks unmapped from FREE blocks (stitching:
 *              the free space of many holes becomes one contiguous range, the idea of PyTorch's
 *              expandable segments and of GMLake's virtual-memory stitching).  Planned iff the
 *              rule of pool_vmm_can_stitch holds, which the refusal classifier states as well.
 *              If the backing refused fresh memory, a second round stitches only.  The request
 *              is then searched again (it finds the new range unless a backing call failed);
 *              for a small block the room asked for is a whole page of its class;
 *   give back  (pool_give_back) chunks unmapped from FREE blocks and freed;
 *   release    (pool_release_backing) everything unmapped and freed, no commit.
 * Sources are taken from the smallest FREE blocks that hold whole chunks first (the holes
 * between live blocks: the fragments stitching is for; the large free runs stay), each from its
 * top end.
 * Bounds: only slow paths come here.  A plan costs O(FREE blocks of at least one chunk visited
 * + chunks moved), the run one backing call per chunk moved, the commit O(chunks moved).
 * Invariants (pool_check): see pool_internal.h and the checker's item 8.
 * Locking: plan and commit under p->lock; the run with no lock held.
 */
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

/* ---- chunk table ------------------------------------------------------------------------- */
static inline size_t chunk_index(const pool_t *p, uintptr_t addr)
{
    return (size_t)((addr - p->base) >> p->vmm->chunk_shift);
}

static inline void chunk_set(pool_vmm_t *v, size_t i, int mapped, uint64_t handle)
{
    if (mapped) {
        v->mapped_bits[i >> 6] |= 1ull << (i & 63);
        v->handle[i] = handle;
    } else {
        v->mapped_bits[i >> 6] &= ~(1ull << (i & 63));
    }
}

pool_t *pool_create_vmm(uintptr_t base, size_t size, size_t chunk, size_t limit,
                        const pool_backing_t *backing)
{
    if (!backing || !backing->phys_alloc || !backing->phys_free || !backing->map || !backing->unmap)
        return NULL;
    if (chunk < ((size_t)64 << 10) || (chunk & (chunk - 1)) || base % chunk || size % chunk ||
        size == 0)
        return NULL;
    limit &= ~(chunk - 1);
    if (limit == 0 || limit > size) return NULL;
    unsigned shift = (unsigned)__builtin_ctzll((unsigned long long)chunk);
    pool_t *p = pool_new(base, size, shift);
    if (!p) return NULL;
    pool_vmm_t *v = calloc(1, sizeof *v);
    size_t n = size >> shift;
    if (v) {
        p->vmm = v; /* pool_destroy frees it from here on */
        v->mapped_bits = calloc((n + 63) / 64, sizeof *v->mapped_bits);
        v->handle = malloc(n * sizeof *v->handle);
    }
    if (!v || !v->mapped_bits || !v->handle) {
        pool_destroy(p);
        return NULL;
    }
    v->ops = *backing;
    v->chunk = chunk;
    v->chunk_shift = shift;
    v->nchunks = n;
    v->limit = limit;
    tlsf_init(&v->voids, DESC_VOID, 0);
    p->large_first->state = DESC_VOID;
    tlsf_insert(&v->voids, p->large_first);
    return p;
}

size_t pool_vmm_headroom(const pool_t *p)
{
    const pool_vmm_t *v = p->vmm;
    size_t used = v->mapped + v->pending_grow;
    return used < v->limit ? v->limit - used : 0;
}

int pool_vmm_can_stitch(const pool_t *p, size_t need, size_t headroom, size_t whole_bytes)
{
    const pool_vmm_t *v = p->vmm;
    size_t k = (need + v->chunk - 1) & ~(v->chunk - 1);
    if (k < need || k > v->limit) return 0;
    return headroom / v->chunk + whole_bytes / v->chunk >= k / v->chunk &&
           tlsf_largest(&v->voids) >= k;
}

/* ---- plans ------------------------------------------------------------------------------- */
typedef struct src_run {
    desc_t *blk;    /* TRANSIT block carved out of a FREE block: whole mapped chunks */
    uintptr_t addr; /* its first byte (copied: the run reads it without the lock) */
    size_t chunks;  /* its chunks */
    size_t done;    /* of them, unmapped by the run (a prefix) */
} src_run_t;

typedef struct plan {
    desc_t *dst;           /* TRANSIT block carved out of a VOID block, or NULL */
    uintptr_t dst_addr;    /* its first byte */
    size_t dst_chunks;     /* its chunks */
    size_t dst_done;       /* of them, mapped by the run (a prefix) */
    uint64_t *dst_handles; /* [dst_chunks] what the run mapped there */
    src_run_t *src;        /* chunks to unmap, run by run */
    size_t nsrc;           /* runs */
    size_t src_cap;        /* capacity of src */
    size_t src_chunks;     /* chunks in all runs */
    uint64_t *src_handles; /* [src_chunks] their handles, run after run */
    size_t grow;           /* chunks of fresh physical memory to take (in pending_grow) */
    size_t grown;          /* of them, taken by the run */
    uint64_t *spare;       /* [src_chunks + grow] handles mapped nowhere, as a stack */
    size_t nspare;         /* entries on spare */
    size_t freed;          /* bytes the run gave back (phys_free) */
    uint64_t failures;     /* backing calls that failed */
    int grow_refused;      /* the backing refused fresh physical memory */
    int all_or_nothing;    /* make room: a stretch that cannot be mapped whole is not started */
    desc_t *cuts;          /* descriptors held for the commit's cuts (linked by phys_next) */
    size_t ncuts;          /* how many */
} plan_t;

static void plan_free(plan_t *pl)
{
    free(pl->src);
    free(pl->src_handles); /* one allocation with dst_handles and spare */
    memset(pl, 0, sizeof *pl);
}

/* Split the unlisted block b at offset `at` (0 < at < size) with one of the plan's held
 * descriptors: returns the upper piece, in b's state, unlisted. */
static desc_t *cut(plan_t *pl, desc_t *b, size_t at)
{
    debug_assert_internal(at > 0 && at < b->size && at % POOL_ALIGN == 0 && pl->cuts);
    desc_t *r = pl->cuts;
    pl->cuts = r->phys_next;
    pl->ncuts--;
    *r = (desc_t){0};
    r->addr = b->addr + at;
    r->size = b->size - at;
    r->state = b->state;
    r->phys_prev = b;
    r->phys_next = b->phys_next;
    if (r->phys_next) r->phys_next->phys_prev = r;
    b->phys_next = r;
    b->size = at;
    return r;
}

/* b (TRANSIT) goes to heap h's state, coalesced and listed. */
static void settle(pool_t *p, tlsf_t *h, desc_t *b)
{
    tlsf_insert(h, tlsf_coalesce(h, &p->desc, b));
}

/* Pick FREE blocks holding `want` whole chunks, the smallest first; appends them to pl->src
 * (blk = the FREE block, chunks = how many of its whole chunks to take; nothing carved yet).
 * 0, or -1 on host OOM. */
static int pick_sources(pool_t *p, plan_t *pl, size_t want)
{
    const pool_vmm_t *v = p->vmm;
    const tlsf_t *h = &p->large;
    unsigned f0, s0;
    tlsf_mapping(v->chunk, &f0, &s0);
    for (unsigned fl = f0; fl < TLSF_FL_COUNT && want; fl++) {
        if (!(h->fl_bitmap >> fl & 1)) continue;
        for (unsigned sl = fl == f0 ? s0 : 0; sl < TLSF_SL_COUNT && want; sl++) {
            for (desc_t *b = h->head[fl][sl]; b && want; b = b->free_next) {
                size_t w = tlsf_whole(b->addr, b->size, v->chunk_shift) >> v->chunk_shift;
                if (!w) continue;
                if (pl->nsrc == pl->src_cap) {
                    size_t cap = pl->src_cap ? 2 * pl->src_cap : 16;
                    src_run_t *a = realloc(pl->src, cap * sizeof *a);
                    if (!a) return -1;
                    pl->src = a;
                    pl->src_cap = cap;
                }
                size_t take = w < want ? w : want;
                pl->src[pl->nsrc++] = (src_run_t){.blk = b, .chunks = take};
                pl->src_chunks += take;
                want -= take;
            }
        }
    }
    return 0;
}

/* Carve the top `chunks` whole chunks out of FREE block b as a TRANSIT block.  pre: b listed,
 * two descriptors reserved. */
static desc_t *carve_source(pool_t *p, desc_t *b, size_t chunks)
{
    const pool_vmm_t *v = p->vmm;
    uintptr_t top = (b->addr + b->size) & ~(uintptr_t)(v->chunk - 1);
    uintptr_t x = top - (chunks << v->chunk_shift);
    debug_assert_internal(x >= b->addr && top > x);
    tlsf_remove(&p->large, b);
    desc_t *m = b;
    if (x > b->addr) m = tlsf_split(&p->large, &p->desc, b, b->addr + b->size - x, 1);
    if (m->size > top - x) tlsf_split(&p->large, &p->desc, m, top - x, 0);
    m->state = DESC_TRANSIT;
    return m;
}

/* Build a plan: map a fresh stretch of dst_chunks chunks (0: none) with `grow` chunks of fresh
 * physical memory and `reclaim` chunks unmapped from FREE blocks; with dst_chunks == 0 the
 * reclaimed chunks are freed (give-back).  pre: lock held; grow <= headroom, reclaim <= whole
 * chunks of the large heap, a VOID block of dst_chunks exists.  0, or -1 on host OOM (nothing
 * changed). */
static int plan_make(pool_t *p, plan_t *pl, size_t dst_chunks, size_t grow, size_t reclaim)
{
    pool_vmm_t *v = p->vmm;
    memset(pl, 0, sizeof *pl);
    if (reclaim && pick_sources(p, pl, reclaim) != 0) goto oom;
    debug_assert_internal(pl->src_chunks == reclaim);
    size_t n = dst_chunks + pl->src_chunks + pl->src_chunks + grow;
    pl->src_handles = malloc((n ? n : 1) * sizeof *pl->src_handles);
    if (!pl->src_handles || desc_reserve(&p->desc, 3 * (pl->nsrc + 1)) != 0) goto oom;
    pl->dst_handles = pl->src_handles + pl->src_chunks;
    pl->spare = pl->dst_handles + dst_chunks;
    /* Nothing can fail from here on. */
    if (dst_chunks) {
        size_t bytes = dst_chunks << v->chunk_shift;
        desc_t *b = tlsf_find(&v->voids, bytes);
        debug_assert_internal(b != NULL);
        tlsf_remove(&v->voids, b);
        b = tlsf_split(&v->voids, &p->desc, b, bytes, 0);
        b->state = DESC_TRANSIT;
        pl->dst = b;
        pl->dst_addr = b->addr;
        pl->dst_chunks = dst_chunks;
    }
    size_t h = 0;
    for (size_t i = 0; i < pl->nsrc; i++) {
        src_run_t *r = &pl->src[i];
        r->blk = carve_source(p, r->blk, r->chunks);
        r->addr = r->blk->addr;
        size_t c0 = chunk_index(p, r->addr);
        for (size_t j = 0; j < r->chunks; j++) pl->src_handles[h++] = v->handle[c0 + j];
    }
    /* The commit cuts each block at most once: hold those descriptors now, since other threads
     * take from the store while the lock is released. */
    for (size_t i = 0; i < pl->nsrc + 1; i++) {
        desc_t *d = desc_get(&p->desc);
        d->phys_next = pl->cuts;
        pl->cuts = d;
        pl->ncuts++;
    }
    v->held_desc += pl->ncuts;
    pl->grow = grow;
    v->pending_grow += grow << v->chunk_shift;
    v->in_flight++;
    return 0;
oom:
    plan_free(pl);
    return -1;
}

/* The backing calls of a plan.  No lock held: touches only the plan and the immutable ops.
 * Fresh memory first: when the backing refuses it and the plan is all-or-nothing, nothing is
 * unmapped or mapped (the caller may plan a stitch without growth instead). */
static void plan_run(const pool_vmm_t *v, plan_t *pl)
{
    const pool_backing_t *o = &v->ops;
    for (; pl->grown < pl->grow; pl->grown++) {
        uint64_t handle;
        if (o->phys_alloc(o->ctx, v->chunk, &handle) != 0) {
            pl->failures++;
            pl->grow_refused = 1;
            break;
        }
        pl->spare[pl->nspare++] = handle;
    }
    if (!pl->grow_refused || !pl->all_or_nothing) {
        size_t h = 0;
        for (size_t i = 0; i < pl->nsrc; i++) {
            src_run_t *r = &pl->src[i];
            for (size_t j = 0; j < r->chunks; j++) {
                if (o->unmap(o->ctx, r->addr + (j << v->chunk_shift)) != 0) {
                    pl->failures++;
                    break; /* this chunk and the rest of the run stay mapped */
                }
                pl->spare[pl->nspare++] = pl->src_handles[h + j];
                r->done++;
            }
            h += r->chunks;
        }
        for (; pl->dst_done < pl->dst_chunks && pl->nspare; pl->dst_done++) {
            uint64_t handle = pl->spare[--pl->nspare];
            uintptr_t va = pl->dst_addr + (pl->dst_done << v->chunk_shift);
            if (o->map(o->ctx, va, v->chunk, handle)) {
                pl->failures++;
                pl->nspare++;
                break;
            }
            pl->dst_handles[pl->dst_done] = handle;
        }
    }
    while (pl->nspare) { /* unmapped sources nothing took, fresh memory that could not be mapped */
        o->phys_free(o->ctx, pl->spare[--pl->nspare]);
        pl->freed += v->chunk;
    }
}

/* The done prefix of b goes to heap `done_to`, the rest to `rest_to`.  pre: lock held. */
static void settle_split(pool_t *p, plan_t *pl, desc_t *b, size_t done_bytes, tlsf_t *done_to,
                         tlsf_t *rest_to)
{
    if (done_bytes == 0) {
        settle(p, rest_to, b);
    } else if (done_bytes == b->size) {
        settle(p, done_to, b);
    } else {
        desc_t *hi = cut(pl, b, done_bytes);
        settle(p, done_to, b);
        settle(p, rest_to, hi);
    }
}

static void plan_commit(pool_t *p, plan_t *pl)
{
    pool_vmm_t *v = p->vmm;
    for (size_t i = 0; i < pl->nsrc; i++) {
        src_run_t *r = &pl->src[i];
        size_t c0 = chunk_index(p, r->addr);
        for (size_t j = 0; j < r->done; j++) chunk_set(v, c0 + j, 0, 0);
        v->mapped -= r->done << v->chunk_shift;
        v->chunks_unmapped += r->done;
        settle_split(p, pl, r->blk, r->done << v->chunk_shift, &v->voids, &p->large);
    }
    if (pl->dst) {
        size_t c0 = chunk_index(p, pl->dst_addr);
        for (size_t j = 0; j < pl->dst_done; j++) chunk_set(v, c0 + j, 1, pl->dst_handles[j]);
        v->mapped += pl->dst_done << v->chunk_shift;
        v->chunks_mapped += pl->dst_done;
        settle_split(p, pl, pl->dst, pl->dst_done << v->chunk_shift, &p->large, &v->voids);
    }
    v->held_desc -= pl->nsrc + 1; /* what plan_make took, used or not */
    while (pl->cuts) {
        desc_t *d = pl->cuts;
        pl->cuts = d->phys_next;
        pl->ncuts--;
        desc_unget(&p->desc, d);
    }
    v->pending_grow -= pl->grow << v->chunk_shift;
    v->in_flight--;
    v->failures += pl->failures;
    v->given_back += pl->freed;
    if (pl->grown) v->grows++;
    if (pl->nsrc && pl->dst_done) v->stitches++;
    debug_assert_internal(v->mapped + v->pending_grow <= v->limit);
}

/* Plan, run without the lock, commit.  pre and post: lock held. */
static void plan_execute(pool_t *p, plan_t *pl)
{
    lock_release(&p->lock);
    plan_run(p->vmm, pl);
    lock_acquire(&p->lock);
    plan_commit(p, pl);
}

/* A stretch of ALIGN_UP(bytes, chunk), funded by growth (when allowed) then by stitching.
 * 1 planned, 0 not possible (or host OOM). */
static int plan_room(pool_t *p, plan_t *pl, size_t bytes, int allow_grow)
{
    pool_vmm_t *v = p->vmm;
    size_t headroom = allow_grow ? pool_vmm_headroom(p) : 0;
    if (!pool_vmm_can_stitch(p, bytes, headroom, p->large.whole_bytes)) return 0;
    size_t k = (bytes + v->chunk - 1) >> v->chunk_shift, g = headroom >> v->chunk_shift;
    if (g > k) g = k;
    if (plan_make(p, pl, k, g, k - g) != 0) return 0;
    pl->all_or_nothing = 1;
    return 1;
}

int pool_vmm_make_room(pool_t *p, size_t room, size_t need, int (*retry)(pool_t *p, void *ctx),
                       void *ctx, int *grow_refused)
{
    for (int round = 0; round < 2 && !p->vmm->released; round++) {
        /* A FREE run holding cached pages becomes one FREE block: its whole chunks count. */
        slab_release_cached(&p->slab);
        plan_t pl;
        int allow_grow = !*grow_refused;
        if (!plan_room(p, &pl, room, allow_grow) &&
            (room == need || !plan_room(p, &pl, need, allow_grow)))
            return 0;
        size_t grow = pl.grow;
        plan_execute(p, &pl);
        if (pl.grow_refused) *grow_refused = 1;
        plan_free(&pl);
        if (retry(p, ctx)) return 1;
        if (!*grow_refused || grow == 0) return 0; /* only stitching alone is left to try */
    }
    return 0;
}

/* ---- the simulated backing ---------------------------------------------------------------- */
static int sim_phys_alloc(void *ctx, size_t bytes, uint64_t *handle)
{
    pool_sim_t *s = ctx;
    (void)bytes;
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_RELAXED);
    *handle = __atomic_add_fetch(&s->next_handle, 1, __ATOMIC_RELAXED);
    return 0;
}

static void sim_phys_free(void *ctx, uint64_t handle)
{
    (void)handle;
    __atomic_add_fetch(&((pool_sim_t *)ctx)->calls, 1, __ATOMIC_RELAXED);
}

static int sim_map(void *ctx, uintptr_t va, size_t bytes, uint64_t handle)
{
    (void)va, (void)bytes, (void)handle;
    __atomic_add_fetch(&((pool_sim_t *)ctx)->calls, 1, __ATOMIC_RELAXED);
    return 0;
}

static int sim_unmap(void *ctx, uintptr_t va)
{
    (void)va;
    __atomic_add_fetch(&((pool_sim_t *)ctx)->calls, 1, __ATOMIC_RELAXED);
    return 0;
}

pool_backing_t pool_sim_backing(pool_sim_t *s)
{
    return (pool_backing_t){.ctx = s,
                            .phys_alloc = sim_phys_alloc,
                            .phys_free = sim_phys_free,
                            .map = sim_map,
                            .unmap = sim_unmap};
}

/* ---- public ------------------------------------------------------------------------------ */
size_t pool_grow(pool_t *p, size_t bytes)
{
    if (!p || !p->vmm || bytes == 0) return 0;
    pool_vmm_t *v = p->vmm;
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    size_t k = bytes > SIZE_MAX - v->chunk ? v->nchunks : (bytes + v->chunk - 1) >> v->chunk_shift;
    size_t room = pool_vmm_headroom(p) >> v->chunk_shift;
    size_t span = tlsf_largest(&v->voids) >> v->chunk_shift;
    if (k > room) k = room;
    if (k > span) k = span;
    size_t mapped = 0;
    plan_t pl;
    if (k && !v->released && plan_make(p, &pl, k, k, 0) == 0) {
        plan_execute(p, &pl);
        mapped = pl.dst_done << v->chunk_shift;
        plan_free(&pl);
    }
    lock_release(&p->lock);
    return mapped;
}

size_t pool_give_back(pool_t *p, size_t bytes)
{
    if (!p || !p->vmm || bytes == 0) return 0;
    pool_vmm_t *v = p->vmm;
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    /* A chunk whose blocks are all in threads' caches is free memory: they go back first. */
    pool_cache_drain_all(p);
    slab_release_cached(&p->slab);
    size_t k = bytes > SIZE_MAX - v->chunk ? v->nchunks : (bytes + v->chunk - 1) >> v->chunk_shift;
    size_t whole = p->large.whole_bytes >> v->chunk_shift;
    if (k > whole) k = whole;
    size_t freed = 0;
    plan_t pl;
    if (k && !v->released && plan_make(p, &pl, 0, 0, k) == 0) {
        plan_execute(p, &pl);
        freed = pl.freed;
        if (freed) v->give_backs++;
        plan_free(&pl);
    }
    lock_release(&p->lock);
    return freed;
}

int pool_release_backing(pool_t *p)
{
    if (!p || !p->vmm) return 0;
    pool_vmm_t *v = p->vmm;
    lock_acquire(&p->lock);
    v->released = 1;
    size_t n = 0, cap = v->mapped >> v->chunk_shift;
    struct {
        uintptr_t va;    /* chunk address */
        uint64_t handle; /* what is mapped there */
    } *m = cap ? malloc(cap * sizeof *m) : NULL;
    for (size_t i = 0; m && i < v->nchunks; i++) {
        if (!(v->mapped_bits[i >> 6] >> (i & 63) & 1)) continue;
        m[n].va = p->base + (i << v->chunk_shift);
        m[n++].handle = v->handle[i];
        chunk_set(v, i, 0, 0);
    }
    int failed = cap && !m; /* host OOM: the runtime takes everything back at finalize anyway */
    v->mapped -= n << v->chunk_shift;
    lock_release(&p->lock);
    for (size_t i = 0; i < n; i++) {
        if (v->ops.unmap(v->ops.ctx, m[i].va) != 0) {
            failed++;
            continue;
        }
        v->ops.phys_free(v->ops.ctx, m[i].handle);
    }
    free(m);
    return failed;
}
