/* pool/pool_cache.c — per-thread caches of small blocks: the cold half (the fast paths are in
 * pool.c, the types and the busy window in pool_internal.h).
 *
 * Owns: each thread's table of caches (one cache per pool it uses, CACHE_POOLS at most), cache
 * creation and release, refill and flush (under the pool lock), stopping the fast paths
 * (pool_cache_stop), the summed statistics, the thread-exit destructor, the fork handlers,
 * dropping the caches of a destroyed pool, and pool_drain_caches().
 *
 * What a cache is.  For each size class below the 256 KiB one (79 classes), a magazine: a stack
 * of up to cap(c) = clamp(CACHE_CLASS_BYTES / slot, CACHE_MAG_MIN, CACHE_MAG_MAX) slots taken
 * from their pages.  For the pool such a slot is taken (its bit is clear, its page cannot be
 * released); for the application it is free (its record says SLAB_SLOT_CACHED, the statistics
 * and pool_walk count it as a free slot, never as live).  The owner pops and pushes without the
 * pool lock; a magazine that is empty is refilled under the lock with up to cap/2 (rounded up,
 * at most CACHE_REFILL_MAX) slots of its class (from the class's partial pages, or at most one
 * page made for it; within a page from the lane it took from last, slab.h: lanes), a full one
 * gives its oldest CACHE_FLUSH(cap) back (their lines asked for as it filled: cache_flush_ahead),
 * and a cache about to pass CACHE_BYTES_MAX (32 MiB) of slots gives half of its magazines back,
 * one after the other, until it would not.  So one thread hoards at most 32 MiB of one pool.
 * Statistics of small blocks are kept in the cache of the thread that allocated or freed them and
 * summed when read.
 *
 * Stopping the fast paths (asymmetric Dekker).  The owner opens a busy window by storing
 * busy = 1, then (a compiler barrier only) reads the pool's stw; a stopper, holding the pool
 * lock, increments stw, calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) — every running
 * thread of the process executes a full barrier — and waits until every other thread's busy is
 * 0.  Either the owner's busy store was visible before the barrier (the stopper waits for the
 * window to close) or the owner's stw load came after it (the owner sees the stop, closes its
 * window and takes the lock, which the stopper holds).  The fast path thus costs two plain
 * stores and one load more than no protection, and a stop costs one system call, only when
 * another thread has a cache for the pool.  Without membarrier (old kernels, valgrind) the
 * owners execute a real fence instead (pool_cache_fenced).  Readers that need an instant (the
 * statistics, pool_snapshot, pool_check) and slow paths that need every free block (a refusal,
 * pool_explain, give-back and stitching of a vmm pool, pool_drain_caches) stop the fast paths;
 * all but the first kind then give every cache's blocks back to their pages.
 *
 * Lifetimes.  cache_lock (process-wide, taken rarely) guards the list of every cache, the list
 * of pools that have caches, and a cache's `pool` field; order: cache_lock before any pool
 * lock.  A cache is made by its thread (cache_lock, then the pool lock, to link it) and freed
 * by its thread: when evicted from its table, or by the thread's key destructor at exit, which
 * first gives its blocks back and folds its figures into the pool's own (both locks).
 * pool_destroy (its caller guarantees that no thread is inside the pool) sets `pool` to NULL
 * in every cache of the pool under cache_lock; a thread never touches such a cache's magazines
 * again (its table entry names the pool's id, which is never reused) and only frees it.  The
 * key and the fork handlers are created at the first cache, so a process that never allocates
 * from a pool does not notice them.
 * Fork.  prepare takes cache_lock and stops every pool's fast paths (the shim's handlers, run
 * after these, then take the pool locks); the parent resumes them.  In the child only the
 * forking thread exists: the other threads' caches are marked orphans, and the pool's next
 * locked operation gives their blocks back and folds their figures (pool_cache_reap), so
 * pool_check holds in the child and nothing is lost.
 * Locking: see each function; the magazines of a cache are touched by its owner in its busy
 * window, or by anyone holding the pool lock while the owner is not in a window (the owner
 * itself in a locked path, or a stopper).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "barrier.h"
#include "pool_internal.h"

__thread cache_thread_t *pool_cache_self __attribute__((tls_model("initial-exec")));
int pool_cache_fenced;
void (*pool_free_race_hook)(pool_t *p, uintptr_t addr);

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_t *all_caches; /* every cache of the process, through gnext (cache_lock) */
static pool_t *cache_pools; /* pools with caches, through reg_next (cache_lock) */
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static pthread_key_t cache_key;
static int cache_key_ok;
static uint32_t mag_cap[SLAB_CACHE_CLASSES]; /* cap(c) */
static size_t mag_total;                     /* sum of cap(c): entries of one cache */
static char *barrier_page;                   /* mprotect fallback of the heavy barrier */
/* What a thread's table points at once its key destructor ran: no new caches. */
static cache_thread_t cache_exited = {.exiting = 1};

/* ---- memory ------------------------------------------------------------------------------ */
/* Caches, thread tables and transfer caches are mapped, never taken from malloc: a fork child's
 * first allocation makes a cache, and a malloc there can deadlock in an allocator that does not
 * lock itself around fork() (GCC 12's AddressSanitizer: shim_fork hung).  Zero-filled. */
static void *cache_mem(size_t bytes)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}
static void cache_mem_free(void *m, size_t bytes)
{
    if (m) munmap(m, bytes);
}
static void cache_free(cache_t *c) { cache_mem_free(c, c->mem_bytes); }

void pool_cache_xfer_free(pool_t *p)
{
    cache_mem_free(p->xfer, p->xfer_bytes);
    p->xfer = NULL;
}

/* ---- the heavy side of the barrier --------------------------------------------------------- */
/* After it returns, every thread of the process that was running has executed a full memory
 * barrier (the owners' side of the Dekker is a compiler barrier only). */
static void heavy_barrier(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (pool_cache_fenced) return; /* the owners fence themselves */
    if (barrier_all() == 0) return;
    /* Unexpected refusal: changing a page's protection interrupts every CPU that runs this
     * process to flush its TLB, which serializes it (the technique before membarrier). */
    char *pg = __atomic_load_n(&barrier_page, __ATOMIC_ACQUIRE);
    if (pg) {
        mprotect(pg, 4096, PROT_READ | PROT_WRITE);
        __atomic_store_n(pg, 0, __ATOMIC_RELAXED); /* stoppers of two pools may both be here */
        mprotect(pg, 4096, PROT_READ);
    }
}

/* Wait until c's owner is outside its busy window (it never blocks inside one). */
static void wait_idle(const cache_t *c)
{
    for (unsigned spins = 0; __atomic_load_n(&c->busy, __ATOMIC_ACQUIRE); spins++)
        if (spins < 128)
            cpu_relax();
        else
            sched_yield();
}

void pool_cache_stop(pool_t *p)
{
    if (p->stopped++) return;
    p->stop_raised = 0;
    const cache_thread_t *me = pool_cache_self;
    const cache_t *c;
    for (c = p->caches; c; c = c->pnext)
        if (c->owner != me && !c->orphan) break;
    if (!c) return; /* no other thread can be in a window of p: it would need a cache */
    __atomic_add_fetch(&p->stw, 1, __ATOMIC_SEQ_CST);
    heavy_barrier();
    for (c = p->caches; c; c = c->pnext)
        if (c->owner != me && !c->orphan) wait_idle(c);
    p->stop_raised = 1;
}

void pool_cache_go(pool_t *p)
{
    debug_assert_internal(p->stopped > 0);
    if (--p->stopped) return;
    if (p->stop_raised) __atomic_sub_fetch(&p->stw, 1, __ATOMIC_RELEASE);
    p->stop_raised = 0;
}

/* ---- magazines ----------------------------------------------------------------------------- */
/* The slot of entry e back to its page (pre: lock held). */
static void give_back(pool_t *p, cache_ent_t e)
{
    debug_assert_internal(e.pg == slab_page_of(&p->slab, e.addr) && *e.rec == SLAB_SLOT_CACHED);
    slab_slot_give(&p->slab, e.pg, slab_rec_slot(e.pg, e.rec));
}

/* Blocks given back together (a flush, a trim, a drain) were freed at random times into
 * random pages: with many live blocks each give misses the CPU caches on the page's geometry
 * line, its state line, the bitmap word and the record, one after the other.  Ask for all
 * of those lines first, so that the misses of the n gives overlap: the geometry, state and
 * record lines at once (their addresses need no load: the entry names its page), then the
 * bitmap words (their index needs the geometry line, on its way by then).  Pairs whose free
 * flushed (pool/ alone, one thread, 300,000 timed pairs, three runs each, interleaved):
 * 100,000 live of 512 B..256 KiB median 150..170 -> 120 ns, p99 410..480 -> 350..380;
 * 1,000,000 live of 64 B..64 KiB median 440..460 -> 370..510 (noisy). */
static void give_back_prefetch(const cache_ent_t *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) cache_ent_prefetch(&e[i]);
    for (uint32_t i = 0; i < n; i++) {
        size_t idx = slab_rec_slot(e[i].pg, e[i].rec);
        __builtin_prefetch(&e[i].pg->bits[idx >> 6], 1);
    }
}

/* Entries e[0..n) back to their pages (pre: lock held), GIVE_BATCH at a time: as many misses
 * as a core keeps in flight, about. */
#define GIVE_BATCH 8u
static void give_back_all(pool_t *p, const cache_ent_t *e, uint32_t n)
{
    for (uint32_t at = 0; at < n; at += GIVE_BATCH) {
        uint32_t m = n - at < GIVE_BATCH ? n - at : GIVE_BATCH;
        give_back_prefetch(e + at, m);
        for (uint32_t i = 0; i < m; i++) give_back(p, e[at + i]);
    }
}

/* Every entry of class k's transfer cache back to its page (pre: lock held, stopped, or no
 * other thread has a cache). */
static void xfer_flush(pool_t *p, unsigned k)
{
    cache_xfer_t *x = &p->xfer[k];
    give_back_all(p, x->ent, x->n);
    __atomic_sub_fetch(&p->xfer_blocks, x->n, __ATOMIC_RELAXED);
    __atomic_store_n(&x->n, 0, __ATOMIC_RELAXED);
}

static void xfer_flush_all(pool_t *p)
{
    for (unsigned k = 0;
         p->xfer && k < SLAB_CACHE_CLASSES && __atomic_load_n(&p->xfer_blocks, __ATOMIC_RELAXED);
         k++)
        if (p->xfer[k].n) xfer_flush(p, k);
}

/* The `count` oldest blocks of magazine k back to their pages. */
static void flush_oldest(pool_t *p, cache_t *c, unsigned k, uint32_t count)
{
    cache_mag_t *m = &c->mag[k];
    debug_assert_internal(count <= m->n);
    give_back_all(p, m->ent, count);
    memmove(m->ent, m->ent + count, (m->n - count) * sizeof *m->ent);
    m->n -= count;
    c->ncached -= count;
    c->bytes -= (size_t)count * slab_geom[k].slot;
}

uint32_t pool_cache_flush(pool_t *p, cache_t *c)
{
    uint32_t n = c->ncached;
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES && c->ncached; k++)
        if (c->mag[k].n) flush_oldest(p, c, k, c->mag[k].n);
    debug_assert_internal(c->ncached == 0 && c->bytes == 0);
    return n;
}

/* The cache would pass CACHE_BYTES_MAX with `more` bytes: half (rounded up) of the
 * magazines, class after class from where the last trim stopped, until it would not.  The
 * work per call stays small as long as most magazines are not full (the bound is above what
 * the classes hold on average). */
static void trim(pool_t *p, cache_t *c, size_t more)
{
    for (unsigned i = 0; i < SLAB_CACHE_CLASSES && c->bytes + more > CACHE_BYTES_MAX; i++) {
        unsigned k = c->scan;
        c->scan = c->scan + 1 < SLAB_CACHE_CLASSES ? c->scan + 1 : 0;
        if (c->mag[k].n) flush_oldest(p, c, k, (c->mag[k].n + 1) / 2);
    }
}

int pool_cache_refill(pool_t *p, cache_t *c, unsigned k, size_t granted, size_t requested,
                      uintptr_t *out, uint32_t **tag_out)
{
    cache_mag_t *m = &c->mag[k];
    size_t slot = slab_geom[k].slot;
    if (m->n == 0) {
        slab_class_t *cl = &p->slab.cls[k];
        uint32_t want = (m->cap + 1) / 2;
        if (want > CACHE_REFILL_MAX) want = CACHE_REFILL_MAX;
        size_t room = c->bytes < CACHE_BYTES_MAX ? (CACHE_BYTES_MAX - c->bytes) / slot : 0;
        if (want > room) want = room ? (uint32_t)room : 1;
        if (want > m->cap) want = m->cap;
        while (m->n < want) {
            slab_page_t *pg = cl->partial;
            if (!pg) {
                if (m->n) break; /* no page is made to fill a magazine, only to serve */
                if (cl->cached) {
                    pg = slab_uncache(&p->slab, cl);
                } else {
                    if (desc_reserve(&p->desc, 3) != 0) break;
                    pg = slab_page_new(&p->slab, k);
                    if (!pg) break;
                }
            }
            /* a lane of this cache's own (slab.h: lanes) */
            uint32_t idx = slab_lane_pick(pg, pg == m->lane_pg ? m->lane : SLAB_LANE_NONE);
            uintptr_t a = slab_slot_take_cached(&p->slab, pg, idx);
            m->lane_pg = pg;
            m->lane = idx / slab_lane_width(pg);
            m->ent[m->n++] = cache_ent_of(pg, idx, a);
        }
        if (m->n == 0) return 0;
        /* lowest address on top: the next allocations come from the bottom of the pages */
        for (uint32_t i = 0, j = m->n - 1; i < j; i++, j--) {
            cache_ent_t t = m->ent[i];
            m->ent[i] = m->ent[j];
            m->ent[j] = t;
        }
        c->ncached += m->n;
        c->bytes += (size_t)m->n * slot;
    }
    cache_ent_t e = m->ent[--m->n];
    c->ncached--;
    c->bytes -= slot;
    slab_record_set(e.rec, slab_slot_record(granted, requested));
    pool_cache_count(c, k, granted, requested, +1);
    *out = e.addr;
    if (tag_out) *tag_out = slab_rec_tag(e.rec);
    return 1;
}

void pool_cache_push(pool_t *p, cache_t *c, slab_page_t *pg, uint32_t idx, uintptr_t addr)
{
    unsigned k = pg->cls;
    cache_mag_t *m = &c->mag[k];
    debug_assert_internal(k < SLAB_CACHE_CLASSES);
    if (m->n == m->cap) flush_oldest(p, c, k, CACHE_FLUSH(m->cap));
    if (c->bytes + pg->slot > CACHE_BYTES_MAX) trim(p, c, pg->slot); /* pg keeps the slot */
    slab_slot_t *rec = slab_rec(pg, idx);
    slab_record_set(rec, SLAB_SLOT_CACHED);
    m->ent[m->n++] = cache_ent_rec(pg, rec, addr);
    c->ncached++;
    c->bytes += pg->slot;
}

/* ---- statistics ---------------------------------------------------------------------------- */
void pool_cache_sync(pool_t *p, cache_t *c)
{
    p->sum_sync += c->alloc_bytes - c->synced;
    c->synced = c->alloc_bytes;
    c->base = p->sum_sync - c->alloc_bytes;
    if (c->hw > p->peak_allocated_bytes) p->peak_allocated_bytes = c->hw;
    if (p->sum_sync > p->peak_allocated_bytes) p->peak_allocated_bytes = p->sum_sync;
    c->hw = 0;
    pool_mirror_store(p);
}

/* c's figures into the pool's own, c's blocks back (pre: lock held; c is going away). */
static void fold(pool_t *p, cache_t *c)
{
    pool_cache_flush(p, c);
    pool_cache_sync(p, c);
    p->allocated_bytes += c->alloc_bytes;
    p->requested_bytes += c->req_bytes;
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++) {
        const cache_mag_t *m = &c->mag[k];
        int b = bucket_of(m->slot);
        p->allocs += m->allocs;
        p->frees += m->frees;
        p->live_blocks += m->allocs - m->frees;
        p->bucket_live_blocks[b] += m->allocs - m->frees;
        p->bucket_live_bytes[b] += m->live_bytes;
    }
    /* sum_sync is unchanged: c's share moved from its `synced` into allocated_bytes. */
}

void pool_cache_sum(const pool_t *p, pool_counts_t *o)
{
    memset(o, 0, sizeof *o);
    o->allocs = p->allocs;
    o->frees = p->frees;
    o->live_blocks = p->live_blocks;
    o->allocated = p->allocated_bytes;
    o->requested = p->requested_bytes;
    o->peak = p->peak_allocated_bytes;
    for (int k = 0; k < POOL_NBUCKETS; k++) {
        o->bucket_blocks[k] = p->bucket_live_blocks[k];
        o->bucket_bytes[k] = p->bucket_live_bytes[k];
    }
    for (const cache_t *c = p->caches; c; c = c->pnext) {
        o->allocated += c->alloc_bytes;
        o->requested += c->req_bytes;
        if (c->hw > o->peak) o->peak = c->hw;
        o->cached_blocks += c->ncached;
        o->cached_bytes += c->bytes;
        for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++) {
            const cache_mag_t *m = &c->mag[k];
            int b = bucket_of(m->slot);
            o->allocs += m->allocs;
            o->frees += m->frees;
            o->live_blocks += m->allocs - m->frees;
            o->bucket_blocks[b] += m->allocs - m->frees;
            o->bucket_bytes[b] += m->live_bytes;
            o->cached_bucket_blocks[b] += m->n;
            o->cached_bucket_bytes[b] += (uint64_t)m->n * m->slot;
        }
    }
    for (unsigned k = 0; p->xfer && k < SLAB_CACHE_CLASSES; k++) {
        uint32_t n = p->xfer[k].n;
        if (!n) continue;
        int b = bucket_of(slab_geom[k].slot);
        o->cached_blocks += n;
        o->cached_bytes += (size_t)n * slab_geom[k].slot;
        o->cached_bucket_blocks[b] += n;
        o->cached_bucket_bytes[b] += (uint64_t)n * slab_geom[k].slot;
    }
    if (o->allocated > o->peak) o->peak = o->allocated;
}

/* ---- lifetimes ----------------------------------------------------------------------------- */
/* Mark the pool's only cache as such (pre: lock held, after the list changed). */
static void mark_alone(pool_t *p)
{
    cache_t *c = p->caches;
    if (!c) return;
    __atomic_store_n(&c->alone, c->pnext == NULL, __ATOMIC_RELAXED);
    if (c->pnext) __atomic_store_n(&c->pnext->alone, 0, __ATOMIC_RELAXED);
}

static void cache_unlink_pool(pool_t *p, cache_t *c)
{
    if (c->pprev)
        c->pprev->pnext = c->pnext;
    else
        p->caches = c->pnext;
    if (c->pnext) c->pnext->pprev = c->pprev;
    c->pnext = c->pprev = NULL;
    mark_alone(p);
}

void pool_cache_empty(pool_t *p, cache_t *c)
{
    /* the only cache: no other thread can reach the transfer caches, which held only halves
     * of magazines handed over while there were several */
    if (p->caches == c && !c->pnext && __atomic_load_n(&p->xfer_blocks, __ATOMIC_RELAXED))
        xfer_flush_all(p);
    if (!pool_cache_holds_all(p, c)) return;
    pool_cache_flush(p, c);
    release_if_empty(p);
    pool_publish(p);
}

/* pre: cache_lock held. */
static void cache_unlink_all(cache_t *c)
{
    if (c->gprev)
        c->gprev->gnext = c->gnext;
    else
        all_caches = c->gnext;
    if (c->gnext) c->gnext->gprev = c->gprev;
    c->gnext = c->gprev = NULL;
}

/* Free the caches nobody owns any more: orphans flushed by pool_cache_reap, and orphans of a
 * destroyed pool.  pre: cache_lock held. */
static void sweep(void)
{
    for (cache_t *c = all_caches, *next; c; c = next) {
        next = c->gnext;
        if (__atomic_load_n(&c->reaped, __ATOMIC_ACQUIRE) || (c->orphan && !c->pool)) {
            cache_unlink_all(c);
            cache_free(c);
        }
    }
}

static void pool_unregister(pool_t *p)
{
    if (!p->registered) return;
    if (p->reg_prev)
        p->reg_prev->reg_next = p->reg_next;
    else
        cache_pools = p->reg_next;
    if (p->reg_next) p->reg_next->reg_prev = p->reg_prev;
    p->reg_next = p->reg_prev = NULL;
    p->registered = 0;
}

/* Give c's blocks back, fold its figures, free it.  pre: no lock held; c's owner calls. */
static void cache_release(cache_t *c)
{
    pthread_mutex_lock(&cache_lock);
    pool_t *p = c->pool;
    if (p) {
        lock_acquire(&p->lock);
        pool_cache_locked(p);
        fold(p, c);
        cache_unlink_pool(p, c);
        if (__atomic_load_n(&p->xfer_blocks, __ATOMIC_RELAXED) &&
            (!p->caches || !p->caches->pnext)) {
            /* one cache left at most, which no longer uses the transfer caches: their blocks
             * go back (once its owner is out of a window that may have started before) */
            pool_cache_stop(p);
            xfer_flush_all(p);
            pool_cache_go(p);
        }
        release_if_empty(p);
        pool_publish(p);
        lock_release(&p->lock);
    }
    cache_unlink_all(c);
    cache_free(c);
    sweep();
    pthread_mutex_unlock(&cache_lock);
}

static void thread_exit(void *arg)
{
    cache_thread_t *t = arg;
    pool_cache_self = &cache_exited;
    for (unsigned i = 0; i < CACHE_POOLS; i++)
        if (t->ent[i].cache) cache_release(t->ent[i].cache);
    cache_mem_free(t, sizeof *t);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&cache_lock);
    for (pool_t *p = cache_pools; p; p = p->reg_next)
        __atomic_add_fetch(&p->stw, 1, __ATOMIC_SEQ_CST);
    if (cache_pools) heavy_barrier(); /* no pool has a cache: no window to close */
    const cache_thread_t *me = pool_cache_self;
    for (const cache_t *c = all_caches; c; c = c->gnext)
        if (c->pool && c->owner != me && !c->orphan) wait_idle(c);
}

static void fork_parent(void)
{
    for (pool_t *p = cache_pools; p; p = p->reg_next)
        __atomic_sub_fetch(&p->stw, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&cache_lock);
}

static void fork_child(void)
{
    /* The registration belongs to the parent's address space. */
    if (!pool_cache_fenced && !barrier_register()) pool_cache_fenced = 1;
    const cache_thread_t *me = pool_cache_self;
    for (cache_t *c = all_caches; c; c = c->gnext) {
        if (c->owner == me) continue;
        c->orphan = 1;
        __atomic_store_n(&c->busy, 0, __ATOMIC_RELAXED); /* its thread is not here */
        if (c->pool) c->pool->has_orphans = 1;
    }
    sweep();
    for (pool_t *p = cache_pools; p; p = p->reg_next)
        __atomic_sub_fetch(&p->stw, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&cache_lock);
}

static void cache_init(void)
{
    slab_geom_init(); /* the slot sizes: no pool may exist yet (pool_threads_prepare) */
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++) {
        size_t cap = CACHE_CLASS_BYTES / slab_geom[k].slot;
        mag_cap[k] = (uint32_t)(cap < CACHE_MAG_MIN   ? CACHE_MAG_MIN
                                : cap > CACHE_MAG_MAX ? CACHE_MAG_MAX
                                                      : cap);
        mag_total += mag_cap[k];
    }
    void *pg = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    __atomic_store_n(&barrier_page, pg == MAP_FAILED ? NULL : pg, __ATOMIC_RELEASE);
    if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) return;
    cache_key_ok = pthread_key_create(&cache_key, thread_exit) == 0;
}

void pool_threads_prepare(void) { pthread_once(&cache_once, cache_init); }

void pool_cache_barrier_setup(void)
{
    /* Not a pthread_once: registering takes an RCU grace period (milliseconds) in a process
     * with threads, and a fork in the middle of a once leaves it in progress in the child under
     * ThreadSanitizer.  Registering twice is harmless; pool_new runs this before its pool can
     * have a cache, so an owner reads pool_cache_fenced after it is final. */
    static int done;
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE)) return;
    if (!barrier_register()) __atomic_store_n(&pool_cache_fenced, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}

/* The calling thread's table, made on first use; NULL when it cannot have caches. */
static cache_thread_t *thread_table(void)
{
    cache_thread_t *t = pool_cache_self;
    if (t) return t->exiting ? NULL : t;
    pool_threads_prepare();
    if (!cache_key_ok) return NULL;
    t = cache_mem(sizeof *t);
    if (!t) return NULL;
    if (pthread_setspecific(cache_key, t) != 0) {
        cache_mem_free(t, sizeof *t);
        return NULL;
    }
    pool_cache_self = t;
    return t;
}

/* The transfer caches of p (pre: lock held).  0, or -1 on host OOM. */
static int xfer_make(pool_t *p)
{
    size_t total = 0;
    uint32_t cap[SLAB_CACHE_CLASSES], batch[SLAB_CACHE_CLASSES];
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++) {
        batch[k] = (mag_cap[k] + 1) / 2;
        size_t by_bytes = CACHE_XFER_BYTES / slab_geom[k].slot / batch[k] * batch[k];
        size_t c = (size_t)CACHE_XFER_BATCHES * batch[k];
        if (c > by_bytes) c = by_bytes;
        cap[k] = (uint32_t)(c < batch[k] ? batch[k] : c);
        total += cap[k];
    }
    size_t head = SLAB_CACHE_CLASSES * sizeof(cache_xfer_t);
    size_t xbytes = head + total * sizeof(cache_ent_t);
    cache_xfer_t *x = cache_mem(xbytes);
    if (!x) return -1;
    p->xfer_bytes = xbytes;
    cache_ent_t *e = (cache_ent_t *)(void *)((char *)x + head);
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++) {
        x[k].cap = cap[k];
        x[k].batch = batch[k];
        x[k].ent = e;
        e += cap[k];
    }
    p->xfer = x;
    return 0;
}

static cache_t *cache_new(pool_t *p, cache_thread_t *t)
{
    size_t bytes = sizeof(cache_t) + mag_total * sizeof(cache_ent_t);
    cache_t *c = cache_mem(bytes);
    if (!c) return NULL;
    c->mem_bytes = bytes;
    size_t at = 0;
    for (unsigned k = 0; k < SLAB_CACHE_CLASSES; k++) {
        c->mag[k].cap = mag_cap[k];
        c->mag[k].slot = slab_geom[k].slot;
        c->mag[k].ent = c->ents + at;
        at += mag_cap[k];
    }
    c->pool = p;
    c->pool_id = p->id;
    c->owner = t;
    pthread_mutex_lock(&cache_lock);
    sweep();
    lock_acquire(&p->lock);
    if (!p->xfer && xfer_make(p) != 0) {
        lock_release(&p->lock);
        pthread_mutex_unlock(&cache_lock);
        cache_free(c);
        return NULL;
    }
    c->pnext = p->caches;
    if (c->pnext) c->pnext->pprev = c;
    p->caches = c;
    mark_alone(p);
    c->base = p->sum_sync;
    lock_release(&p->lock);
    c->gnext = all_caches;
    if (c->gnext) c->gnext->gprev = c;
    all_caches = c;
    if (!p->registered) {
        p->reg_next = cache_pools;
        if (p->reg_next) p->reg_next->reg_prev = p;
        cache_pools = p;
        p->registered = 1;
    }
    pthread_mutex_unlock(&cache_lock);
    return c;
}

void pool_cache_thread_enable(int on)
{
    cache_thread_t *t = thread_table();
    if (!t) return;
    t->disabled = !on;
    for (unsigned i = 0; !on && i < CACHE_POOLS; i++)
        if (t->ent[i].cache) {
            cache_t *c = t->ent[i].cache;
            t->ent[i].cache = NULL;
            t->ent[i].pool = NULL;
            cache_release(c);
        }
}

cache_t *pool_cache_lookup(pool_t *p)
{
    cache_thread_t *t = thread_table();
    if (!t || t->disabled) return NULL;
    unsigned i;
    for (i = 0; i < CACHE_POOLS; i++)
        if (t->ent[i].pool == p && t->ent[i].id == p->id) break;
    if (i == CACHE_POOLS) {
        /* a new cache in the place of a stale entry for a pool at the same address (destroyed:
         * ids are never reused), else of the least recently used one */
        for (i = 0; i < CACHE_POOLS - 1; i++)
            if (t->ent[i].pool == p) break;
        if (t->ent[i].cache) {
            cache_t *old = t->ent[i].cache;
            t->ent[i].cache = NULL;
            t->ent[i].pool = NULL;
            cache_release(old);
        }
        cache_t *c = cache_new(p, t);
        if (!c) return NULL;
        t->ent[i].pool = p;
        t->ent[i].id = p->id;
        t->ent[i].cache = c;
    }
    if (i) { /* to the front */
        __typeof__(t->ent[0]) e = t->ent[i];
        memmove(&t->ent[1], &t->ent[0], i * sizeof t->ent[0]);
        t->ent[0] = e;
    }
    return t->ent[0].cache;
}

void pool_cache_reap(pool_t *p)
{
    p->has_orphans = 0;
    for (cache_t *c = p->caches, *next; c; c = next) {
        next = c->pnext;
        if (!c->orphan) continue;
        fold(p, c);
        cache_unlink_pool(p, c);
        __atomic_store_n(&c->reaped, 1, __ATOMIC_RELEASE); /* the next sweep frees it */
    }
    /* the child's one thread: nobody else can be in a window on the transfer caches */
    if (!p->caches || !p->caches->pnext) xfer_flush_all(p);
    release_if_empty(p);
    pool_publish(p);
}

void pool_cache_forget(pool_t *p)
{
    if (!p->registered) return; /* no cache was ever made for it */
    pthread_mutex_lock(&cache_lock);
    for (cache_t *c = p->caches; c; c = c->pnext) c->pool = NULL;
    p->caches = NULL;
    pool_unregister(p);
    sweep();
    pthread_mutex_unlock(&cache_lock);
}

void pool_cache_drain_all(pool_t *p)
{
    pool_cache_stop(p);
    for (cache_t *c = p->caches; c; c = c->pnext)
        if (c->ncached) pool_cache_flush(p, c);
    xfer_flush_all(p);
    pool_cache_go(p);
    release_if_empty(p);
    pool_publish(p);
}

/* ---- public -------------------------------------------------------------------------------- */
void pool_drain_caches(pool_t *p)
{
    if (!p) return;
    lock_acquire(&p->lock);
    pool_cache_locked(p);
    pool_cache_drain_all(p);
    lock_release(&p->lock);
}
