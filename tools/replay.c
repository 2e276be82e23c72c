/* tools/replay.c — the replay engine declared in replay.h.
 *
 * Per slot (allocation number) one word says where the allocation lives: its block address in
 * the allocator (>= REPLAY_BASE), SLOT_FALLBACK, or SLOT_NONE (refused, or not yet allocated).
 * Live byte counts are kept exactly at every event; allocator statistics (free bytes, largest
 * free block) are sampled every `stats_stride` events and at every refusal, because they cost
 * more than the allocation itself.
 * Time: O(events) allocator calls; memory: 8 bytes per allocation of the trace.
 */
#include "replay.h"

#include "clock.h"
#include "pool.h"
#include "tools.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_BASE ((uintptr_t)1 << 40) /* made-up start of every device's range */
#define SLOT_NONE ((uintptr_t)0)         /* refused or never allocated */
#define SLOT_FALLBACK ((uintptr_t)1)     /* served outside the pool */
#define MIN_POOL_MAX ((uint64_t)1 << 50) /* the largest pool replay_min_pool tries */

/* ---- npupool's pool behind the allocator table -------------------------------------------- */

static void *pa_create(uintptr_t base, size_t size, const replay_opts_t *o)
{
    (void)o;
    return pool_create(base, size);
}
static void pa_destroy(void *a) { pool_destroy(a); }
static int pa_alloc(void *a, size_t requested, size_t granted, uintptr_t *out)
{
    return pool_alloc(a, requested, granted, out, NULL) == POOL_OK ? 0 : -1;
}
static int pa_free(void *a, uintptr_t addr)
{
    return pool_free(a, addr, NULL, NULL) == POOL_OK ? 0 : -1;
}
static void pa_stats(void *a, uint64_t *allocated, uint64_t *free_bytes, uint64_t *largest)
{
    pool_stats_t st;
    pool_get_stats(a, &st);
    *allocated = st.allocated_bytes;
    *free_bytes = st.free_bytes;
    *largest = st.largest_free_bytes;
}
static int pa_check(void *a) { return pool_check(a, NULL, 0); }

const replay_allocator_t replay_pool_allocator = {
    .name = "pool",
    .align = POOL_ALIGN,
    .create = pa_create,
    .destroy = pa_destroy,
    .alloc = pa_alloc,
    .free = pa_free,
    .stats = pa_stats,
    .check = pa_check,
    .backing = NULL,
};

/* ---- the same pool on a simulated virtual-memory backing ----------------------------------- */

typedef struct vmm_replay {
    pool_t *pool;         /* the vmm pool */
    pool_sim_t sim;       /* its simulated backing */
    uint64_t va_refusals; /* refusals for want of an unmapped stretch */
} vmm_replay_t;

static uint64_t chunk_of(const replay_opts_t *o)
{
    return o && o->chunk_bytes ? o->chunk_bytes : POOL_VMM_CHUNK_DEFAULT;
}

static void *va_create(uintptr_t base, size_t size, const replay_opts_t *o)
{
    size_t chunk = (size_t)chunk_of(o), limit = size & ~(chunk - 1);
    if (limit == 0 || limit > SIZE_MAX / POOL_VMM_VA_RATIO) return NULL;
    vmm_replay_t *a = calloc(1, sizeof *a);
    if (a == NULL) return NULL;
    pool_backing_t ops = pool_sim_backing(&a->sim);
    a->pool = pool_create_vmm(base, limit * POOL_VMM_VA_RATIO, chunk, limit, &ops);
    if (a->pool == NULL || pool_grow(a->pool, limit) != limit) {
        pool_destroy(a->pool);
        free(a);
        return NULL;
    }
    return a;
}
static void va_destroy(void *p)
{
    vmm_replay_t *a = p;
    pool_destroy(a->pool);
    free(a);
}
static int va_alloc(void *p, size_t requested, size_t granted, uintptr_t *out)
{
    vmm_replay_t *a = p;
    pool_refusal_t why;
    if (pool_alloc(a->pool, requested, granted, out, &why) == POOL_OK) return 0;
    if (why.kind == POOL_REFUSAL_FRAGMENTED && why.remappable_bytes >= why.stitch_bytes)
        a->va_refusals++;
    return -1;
}
static int va_free(void *p, uintptr_t addr) { return pa_free(((vmm_replay_t *)p)->pool, addr); }
static void va_stats(void *p, uint64_t *allocated, uint64_t *free_bytes, uint64_t *largest)
{
    pa_stats(((vmm_replay_t *)p)->pool, allocated, free_bytes, largest);
}
static int va_check(void *p) { return pool_check(((vmm_replay_t *)p)->pool, NULL, 0); }
static void va_backing(void *p, replay_dev_t *d)
{
    vmm_replay_t *a = p;
    pool_stats_t st;
    pool_get_stats(a->pool, &st);
    d->vmm = 1;
    d->stitches = st.stitches;
    d->chunks_moved = st.chunks_unmapped;
    d->va_refusals = a->va_refusals;
}

const replay_allocator_t replay_pool_vmm_allocator = {
    .name = "pool",
    .align = POOL_ALIGN,
    .create = va_create,
    .destroy = va_destroy,
    .alloc = va_alloc,
    .free = va_free,
    .stats = va_stats,
    .check = va_check,
    .backing = va_backing,
};

/* ---- engine --------------------------------------------------------------------------------- */

typedef unsigned __int128 wide_t; /* sums of sizes */

/* v, or UINT64_MAX when it does not fit */
static uint64_t narrow(wide_t v) { return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v; }

uint64_t replay_granted(uint64_t size, int rounding)
{
    if (size > UINT64_MAX - 64) return UINT64_MAX; /* no pool can hold it: refused, never wrapped */
    uint64_t a32 = (size + 31) & ~(uint64_t)31;
    switch (rounding) {
    case REPLAY_ROUND_ALIGN32: return a32 ? a32 : 32;
    case REPLAY_ROUND_NONE: return size ? size : 1;
    default: return a32 + 32;
    }
}

static double now_s(void) { return (double)clock_mono_ns() * 1e-9; }

static void sample(const replay_allocator_t *A, void *a, replay_dev_t *d, uint64_t ev)
{
    uint64_t alloc, fr, largest;
    A->stats(a, &alloc, &fr, &largest);
    double frag = fr ? 1.0 - (double)largest / (double)fr : 0.0;
    if (frag > d->worst_frag) {
        d->worst_frag = frag;
        d->worst_frag_event = ev;
    }
}

int replay_run(const trace_t *t, const replay_opts_t *o, replay_result_t *r)
{
    const replay_allocator_t *A = o->alloc ? o->alloc : &replay_pool_allocator;
    memset(r, 0, sizeof *r);
    r->ndevices = t->ndevices;
    void *inst[TRACE_MAX_DEVICES] = {0};
    /* Live sums are wider than a size: a trace may hold several sizes near 2^64. */
    wide_t live_req[TRACE_MAX_DEVICES] = {0}, live_granted[TRACE_MAX_DEVICES] = {0},
           live_fb[TRACE_MAX_DEVICES] = {0};
    uintptr_t *where = calloc(t->nallocs ? t->nallocs : 1, sizeof *where);
    if (where == NULL) {
        tools_err("%s: out of memory for %u allocations", t->path, t->nallocs);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < t->ndevices; i++) {
        if (o->only_device >= 0 && i != o->only_device) continue;
        inst[i] = A->create(REPLAY_BASE, (size_t)o->pool_bytes, o);
        if (inst[i] == NULL) {
            rc = -1;
            goto out;
        }
    }
    uint64_t stride = o->stats_stride ? o->stats_stride : (t->nev / 100000 + 1);
    uint64_t next_sample = 0;
    double t0 = now_s();
    size_t e;
    for (e = 0; e < t->nev; e++) {
        const trace_event_t *ev = &t->ev[e];
        int di = ev->device;
        void *a = inst[di];
        if (a == NULL) continue; /* another device (only_device) */
        replay_dev_t *d = &r->dev[di];
        uint64_t granted = replay_granted(ev->size, o->rounding);
        int refused_now = 0, served_fail = 0; /* for the observer */
        if (ev->action == TRACE_ALLOC) {
            uintptr_t addr;
            d->allocs++;
            if (A->alloc(a, (size_t)ev->size, (size_t)granted, &addr) == 0) {
                where[ev->slot] = addr;
                d->served++;
                live_req[di] += ev->size;
                live_granted[di] += granted;
                if (live_granted[di] > d->peak_allocated)
                    d->peak_allocated = narrow(live_granted[di]);
            } else {
                if (d->refused == 0) d->first_refusal = e;
                d->refused++;
                refused_now = 1;
                d->refused_bytes = tools_add_sat(d->refused_bytes, ev->size);
                sample(A, a, d, e);
                if (o->stop_on_refusal) {
                    r->stopped = 1;
                    e++;
                    break;
                }
                if (o->fallback) {
                    where[ev->slot] = SLOT_FALLBACK;
                    d->fallback++;
                    live_req[di] += ev->size;
                    live_fb[di] += granted;
                    if (live_fb[di] > d->peak_fallback) d->peak_fallback = narrow(live_fb[di]);
                } else {
                    where[ev->slot] = SLOT_NONE;
                }
            }
            if (live_req[di] > d->peak_requested) d->peak_requested = narrow(live_req[di]);
        } else if (ev->action == TRACE_FREE) {
            uintptr_t w = where[ev->slot];
            where[ev->slot] = SLOT_NONE;
            d->frees++;
            if (w == SLOT_FALLBACK) {
                live_fb[di] -= granted;
                live_req[di] -= ev->size;
            } else if (w != SLOT_NONE) {
                if (A->free(a, w) != 0) {
                    tools_err("%s: internal error: the allocator refused to free a live block",
                              t->path);
                    rc = -1;
                    e++;
                    break;
                }
                live_granted[di] -= granted;
                live_req[di] -= ev->size;
            }
        } else { /* TRACE_FAIL: the recorded system refused it; would this allocator? */
            uintptr_t addr;
            d->source_failures++;
            if (A->alloc(a, (size_t)ev->size, (size_t)granted, &addr) == 0) {
                d->failures_served++;
                A->free(a, addr);
                served_fail = 1;
            }
        }
        if (o->observe) {
            replay_point_t pt = {
                .event = e,
                .device = di,
                .action = ev->action,
                .refused = refused_now,
                .failure_served = served_fail,
                .size = ev->size,
                .allocated = narrow(live_granted[di]),
                .reserved = tools_add_sat(o->pool_bytes, narrow(live_fb[di])),
                .requested = narrow(live_req[di]),
            };
            uint64_t in_use;
            A->stats(a, &in_use, &pt.free_bytes, &pt.largest_free);
            o->observe(o->observe_ctx, &pt);
        }
        if (o->check_every_op && A->check && A->check(a) != 0) r->violations++;
        if (e >= next_sample) {
            sample(A, a, d, e);
            next_sample = e + stride;
        }
    }
    r->seconds = now_s() - t0;
    r->events = e;
    for (int i = 0; i < t->ndevices; i++) {
        if (inst[i] == NULL) continue;
        replay_dev_t *d = &r->dev[i];
        uint64_t alloc, fr, largest;
        A->stats(inst[i], &alloc, &fr, &largest);
        d->final_free = fr;
        d->final_largest = largest;
        d->final_frag = fr ? 1.0 - (double)largest / (double)fr : 0.0;
        if (d->final_frag > d->worst_frag) d->worst_frag = d->final_frag, d->worst_frag_event = e;
        d->live_requested = narrow(live_req[i]);
        d->peak_reserved = tools_add_sat(o->pool_bytes, d->peak_fallback);
        if (A->backing) A->backing(inst[i], d);
    }
out:
    for (int i = 0; i < t->ndevices; i++)
        if (inst[i]) A->destroy(inst[i]);
    free(where);
    return rc;
}

uint64_t replay_live_peak(const trace_t *t, int device, int rounding, uint64_t align)
{
    wide_t live = 0, peak = 0;
    for (size_t e = 0; e < t->nev; e++) {
        const trace_event_t *ev = &t->ev[e];
        if (ev->device != device || ev->action == TRACE_FAIL) continue;
        wide_t g = ((wide_t)replay_granted(ev->size, rounding) + align - 1) / align * align;
        if (ev->action == TRACE_ALLOC) {
            live += g;
            if (live > peak) peak = live;
        } else {
            live -= g;
        }
    }
    return narrow(peak);
}

/* 1 when `device` runs the whole trace in a pool of `size` bytes with no refusal. */
static int feasible(const trace_t *t, int device, const replay_opts_t *base, uint64_t size,
                    int *probes)
{
    replay_opts_t o = *base;
    o.pool_bytes = size;
    o.fallback = 0;
    o.only_device = device;
    o.stop_on_refusal = 1;
    o.check_every_op = 0;
    o.stats_stride = UINT64_MAX / 2; /* no sampling while probing */
    replay_result_t *r = malloc(sizeof *r);
    if (r == NULL) return 0;
    (*probes)++;
    int ok = replay_run(t, &o, r) == 0 && r->dev[device].refused == 0;
    free(r);
    return ok;
}

uint64_t replay_resolution(const replay_opts_t *o, uint64_t resolution)
{
    if (resolution == 0) resolution = POOL_ALIGN;
    if (resolution > MIN_POOL_MAX) resolution = MIN_POOL_MAX;
    if (o->alloc == &replay_pool_vmm_allocator) {
        uint64_t c = chunk_of(o);
        resolution = (resolution + c - 1) / c * c;
    }
    return resolution;
}

/* Bisection; *hi_out: the first feasible doubling (the top of the search). */
static uint64_t min_pool(const trace_t *t, int device, const replay_opts_t *o, uint64_t resolution,
                         int *probes, uint64_t *hi_out)
{
    *probes = 0;
    resolution = replay_resolution(o, resolution);
    const replay_allocator_t *A = o->alloc ? o->alloc : &replay_pool_allocator;
    uint64_t peak = replay_live_peak(t, device, o->rounding, A->align ? A->align : 1);
    if (peak < POOL_ALIGN) peak = POOL_ALIGN;
    if (peak > MIN_POOL_MAX) return 0;
    uint64_t lo = (peak + resolution - 1) / resolution * resolution;
    *hi_out = lo;
    if (feasible(t, device, o, lo, probes)) return lo;
    uint64_t hi = lo;
    do {
        lo = hi;
        hi *= 2;
        if (hi > MIN_POOL_MAX) return 0;
    } while (!feasible(t, device, o, hi, probes));
    *hi_out = hi;
    /* lo infeasible, hi feasible, both multiples of resolution. */
    while (hi - lo > resolution) {
        uint64_t mid = lo + (hi - lo) / resolution / 2 * resolution;
        if (feasible(t, device, o, mid, probes))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

int replay_choose_backing(const cli_val_t *backing, const cli_val_t *chunk_bytes, replay_opts_t *o)
{
    const uint64_t chunk = chunk_bytes->u;
    o->chunk_bytes = chunk;
    if (o->alloc != &replay_pool_allocator || backing->choice != 0) return TOOLS_OK;
    if (chunk & (chunk - 1) || chunk < ((uint64_t)64 << 10) || chunk > ((uint64_t)1 << 30)) {
        tools_err("--chunk-bytes %" PRIu64 " is not a power of two from 64 KiB to 1 GiB", chunk);
        return TOOLS_BAD;
    }
    o->alloc = &replay_pool_vmm_allocator;
    return TOOLS_OK;
}

uint64_t replay_pool_bytes(const cli_val_t *pool_bytes, const cli_val_t *ratio,
                           const cli_val_t *device_bytes)
{
    if (pool_bytes->given) return pool_bytes->u;
    return (uint64_t)((double)device_bytes->u * ratio->d) & ~(uint64_t)63;
}

uint64_t replay_min_pool(const trace_t *t, int device, const replay_opts_t *o, uint64_t resolution,
                         int *probes)
{
    uint64_t hi;
    return min_pool(t, device, o, resolution, probes, &hi);
}

/* Check one larger size (sizes come in ascending order): a refusal moves the safe figure to
 * the next size that serves. */
static void verify_one(const trace_t *t, int device, const replay_opts_t *o, uint64_t size,
                       replay_min_pool_result_t *r)
{
    r->checked++;
    if (size > r->checked_to) r->checked_to = size;
    if (feasible(t, device, o, size, &r->probes)) {
        if (r->safe == 0) r->safe = size;
        return;
    }
    if (r->refused == 0 || size < r->first_refused) r->first_refused = size;
    if (size > r->last_refused) r->last_refused = size;
    r->refused++;
    r->safe = 0;
}

void replay_min_pool_verified(const trace_t *t, int device, const replay_opts_t *o,
                              uint64_t resolution, int verify, replay_min_pool_result_t *r)
{
    memset(r, 0, sizeof *r);
    uint64_t hi = 0;
    resolution = replay_resolution(o, resolution);
    r->min = min_pool(t, device, o, resolution, &r->probes, &hi);
    r->safe = r->min;
    if (r->min == 0 || verify <= 0) return;
    /* Sizes in ascending order, so that "the smallest serving size above every refusal" is
     * the first serving one after the last refusal seen. */
    uint64_t near_top = r->min + r->min / 4, n_near = (uint64_t)verify, n_far = n_near / 4;
    uint64_t prev = r->min;
    for (int part = 0; part < 2; part++) {
        uint64_t from = part ? near_top : r->min, to = part ? hi : near_top;
        uint64_t n = part ? n_far : n_near;
        if (to <= from || n == 0) continue;
        for (uint64_t i = 1; i <= n; i++) {
            uint64_t size = from + (to - from) / n * i;
            if (i == n) size = to;
            size = size / resolution * resolution;
            if (size <= prev) continue;
            prev = size;
            verify_one(t, device, o, size, r);
        }
    }
    if (r->refused && r->safe == 0) { /* the top checked size refused: look above it */
        for (uint64_t size = prev + resolution; size <= MIN_POOL_MAX; size *= 2) {
            size = size / resolution * resolution;
            verify_one(t, device, o, size, r);
            if (r->safe) break;
        }
    }
}
