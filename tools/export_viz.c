/* tools/export_viz.c — a PyTorch memory snapshot from a trace (export.h: export_viz_write).
 *
 * The snapshot (the dict torch.cuda.memory._snapshot() returns, which pytorch.org/memory_viz and
 * torch.cuda._memory_viz read):
 *   {"segments": [segment...], "device_traces": [[entry...] for device 0, 1, ...]}
 * Mapping:
 *   - one segment per device for the pool: the report's pool range (base, reserved_bytes) when
 *     the stacks report has a pool for that device that holds at least one of the trace's
 *     addresses, else the span of the addresses the trace uses on that device.  An allocation
 *     outside the report's pool (a fallback allocation the runtime served) is a segment of its
 *     own, with segment_alloc / segment_free entries around it, as torch's own segments are.
 *   - the segment's blocks are the snapshot's end state: the trace's allocations still live at
 *     its end, in address order, with the gaps between them as inactive blocks, so that the
 *     blocks tile the segment (the viewer takes block addresses from the running sum of sizes).
 *     A block's size is the requested size (a trace has no granted size).
 *   - entries, in trace order: one segment_alloc for the pool before the device's first event;
 *     an allocation is "alloc"; a free is "free_requested" then "free_completed" (the viewer
 *     folds the pair into one free, as for torch's own synchronous frees); an RMM "allocate
 *     failure" is "oom" with device_free = the segment's bytes not held by live allocations.
 *     Every entry has stream 0 and time_us (the trace's clock).
 *   - frames: an allocation live at the end of the trace whose address is a live block of the
 *     stacks report (live_map, at base + offset, granted size >= requested) gets that block's
 *     stack ({filename, line, name}: file or module, line or 0, function or module+offset), on
 *     its block and on its alloc entry.  Everything else has no frames (a trace records none).
 * Devices with a negative id have no index in device_traces and are left out (counted).
 * Cost: O(events + live blocks log live blocks); memory: 9 bytes per allocation.
 */
#include "export.h"

#include "pickle.h"
#include "tools.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define VIZ_MAX_DEVICE 4096 /* a device id above this gets no device_traces entry */

typedef struct viz_dev {
    int used;                  /* the trace has this device id (index into device_traces) */
    int di;                    /* trace device index */
    uint64_t seg_addr;         /* the pool segment */
    uint64_t seg_size;         /* its bytes */
    int from_report;           /* 1: the report's pool range; 0: the trace's span */
    const report_device_t *rd; /* the stacks report's device, when it matched */
} viz_dev_t;

typedef struct viz {
    const export_in_t *in; /* what to write */
    pickle_t p;            /* the writer */
    uint8_t *live;         /* per slot: 1 while live (after the end-state pass: live at end) */
    int32_t *site;         /* per slot: index into stacks->leaks of its stack, -1 none */
    viz_dev_t dev[TRACE_MAX_DEVICES]; /* by trace device index */
    long max_id;                      /* the largest usable device id, -1 when none */
    export_viz_stats_t *st;           /* counts */
} viz_t;

/* 1 when [addr, addr+size) lies in d's pool segment (a block of 0 bytes: addr does). */
static int inside(const viz_dev_t *d, uint64_t addr, uint64_t size)
{
    return addr >= d->seg_addr && addr - d->seg_addr < d->seg_size &&
           size <= d->seg_size - (addr - d->seg_addr);
}

/* Bytes of a segment of its own for an allocation of `size` (the viewer needs at least 1). */
static uint64_t own_size(uint64_t size) { return size ? size : 1; }

/* The live_map entry of d at `offset`, or NULL (live_map is in offset order). */
static const report_extent_t *live_block(const report_device_t *d, uint64_t offset)
{
    size_t lo = 0, hi = d->nlive_map;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->live_map[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->nlive_map && d->live_map[lo].offset == offset ? &d->live_map[lo] : NULL;
}

/* Segments, live-at-end slots and their stacks. */
static int prepare(viz_t *v)
{
    const trace_t *t = v->in->t;
    const report_t *rep = v->in->stacks;
    v->live = calloc(t->nallocs ? t->nallocs : 1, 1);
    v->site = malloc((t->nallocs ? t->nallocs : 1) * sizeof *v->site);
    if (v->live == NULL || v->site == NULL) return -1;
    uint64_t lo[TRACE_MAX_DEVICES], hi[TRACE_MAX_DEVICES];
    for (int i = 0; i < TRACE_MAX_DEVICES; i++) lo[i] = UINT64_MAX, hi[i] = 0;
    for (size_t e = 0; e < t->nev; e++) {
        const trace_event_t *ev = &t->ev[e];
        if (ev->action == TRACE_ALLOC) {
            uint64_t a = t->addr[ev->slot], n = own_size(ev->size);
            uint64_t end = a + n < a ? UINT64_MAX : a + n;
            if (a < lo[ev->device]) lo[ev->device] = a;
            if (end > hi[ev->device]) hi[ev->device] = end;
            v->live[ev->slot] = 1;
        } else if (ev->action == TRACE_FREE) {
            v->live[ev->slot] = 0;
        }
    }
    v->max_id = -1;
    for (int i = 0; i < t->ndevices; i++) {
        viz_dev_t *d = &v->dev[i];
        long id = t->device_ids[i];
        if (id < 0 || id > VIZ_MAX_DEVICE) {
            v->st->skipped_devices++;
            continue;
        }
        d->used = 1;
        d->di = i;
        if (id > v->max_id) v->max_id = id;
        d->seg_addr = lo[i] == UINT64_MAX ? 0 : lo[i];
        d->seg_size = hi[i] > d->seg_addr ? hi[i] - d->seg_addr : 0;
        for (size_t k = 0; rep && k < rep->ndevices; k++) {
            const report_device_t *rd = &rep->devices[k];
            if (rd->device != id || !rd->has_pool || rd->reserved == 0) continue;
            viz_dev_t cand = {.seg_addr = rd->base, .seg_size = rd->reserved};
            int holds = 0; /* a report of another run would put every block outside */
            for (size_t e = 0; e < t->nev && !holds; e++)
                holds = t->ev[e].action == TRACE_ALLOC && t->ev[e].device == i &&
                        inside(&cand, t->addr[t->ev[e].slot], t->ev[e].size);
            if (!holds) continue;
            d->seg_addr = rd->base;
            d->seg_size = rd->reserved;
            d->from_report = 1;
            d->rd = rd;
        }
    }
    for (uint32_t s = 0; s < t->nallocs; s++) v->site[s] = -1;
    for (size_t e = 0; e < t->nev; e++) {
        const trace_event_t *ev = &t->ev[e];
        const viz_dev_t *d = &v->dev[ev->device];
        if (ev->action != TRACE_ALLOC || !v->live[ev->slot] || d->rd == NULL) continue;
        uint64_t a = t->addr[ev->slot];
        if (!inside(d, a, ev->size)) continue;
        const report_extent_t *b = live_block(d->rd, a - d->seg_addr);
        if (b && b->site >= 0 && (size_t)b->site < rep->nleaks && b->size >= ev->size)
            v->site[ev->slot] = (int32_t)b->site;
    }
    return 0;
}

static void put_frames(viz_t *v, int32_t site)
{
    pickle_t *p = &v->p;
    pickle_str_memo(p, "frames");
    pickle_list_begin(p);
    const report_leak_t *l = site >= 0 ? &v->in->stacks->leaks[site] : NULL;
    for (size_t i = 0; l && i < l->nframes; i++) {
        const report_frame_t *f = &l->frames[i];
        char name[600];
        if (f->function)
            snprintf(name, sizeof name, "%s", f->function);
        else if (f->module && f->has_offset)
            snprintf(name, sizeof name, "%s+0x%" PRIx64, f->module, f->offset);
        else
            snprintf(name, sizeof name, "??");
        pickle_dict_begin(p);
        pickle_key_str(p, "filename", f->file ? f->file : f->module ? f->module : "??");
        pickle_key_uint(p, "line", f->line);
        pickle_key_str(p, "name", name);
        pickle_dict_end(p);
    }
    pickle_list_end(p);
}

static void put_block(viz_t *v, uint64_t addr, uint64_t size, int active, int32_t site)
{
    pickle_t *p = &v->p;
    pickle_dict_begin(p);
    pickle_key_uint(p, "address", addr);
    pickle_key_uint(p, "size", size);
    pickle_key_uint(p, "requested_size", active ? size : 0);
    pickle_str_memo(p, "state");
    pickle_str_memo(p, active ? "active_allocated" : "inactive");
    put_frames(v, site);
    pickle_dict_end(p);
}

static void put_segment_head(viz_t *v, long id, uint64_t addr, uint64_t size, uint64_t active)
{
    pickle_t *p = &v->p;
    pickle_key_int(p, "device", id);
    pickle_key_uint(p, "address", addr);
    pickle_key_uint(p, "total_size", size);
    pickle_key_uint(p, "allocated_size", active);
    pickle_key_uint(p, "active_size", active);
    pickle_key_uint(p, "requested_size", active);
    pickle_key_int(p, "stream", 0);
    pickle_str_memo(p, "segment_type");
    pickle_str_memo(p, "large");
    pickle_str_memo(p, "is_expandable");
    pickle_bool(p, 0);
    v->st->segments++;
}

/* Slots live at the end of device index di, inside or outside its pool segment. */
typedef struct slot_ref {
    uint64_t addr; /* recorded pointer */
    uint64_t size; /* requested bytes */
    uint32_t slot; /* allocation number */
} slot_ref_t;

static int by_addr(const void *a, const void *b)
{
    const slot_ref_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int put_segments(viz_t *v)
{
    const trace_t *t = v->in->t;
    slot_ref_t *refs = malloc((t->nallocs ? t->nallocs : 1) * sizeof *refs);
    if (refs == NULL) return -1;
    pickle_t *p = &v->p;
    pickle_str_memo(p, "segments");
    pickle_list_begin(p);
    for (int i = 0; i < t->ndevices; i++) {
        viz_dev_t *d = &v->dev[i];
        if (!d->used) continue;
        size_t n = 0;
        for (size_t e = 0; e < t->nev; e++) {
            const trace_event_t *ev = &t->ev[e];
            if (ev->action == TRACE_ALLOC && ev->device == i && v->live[ev->slot])
                refs[n++] = (slot_ref_t){t->addr[ev->slot], ev->size, ev->slot};
        }
        qsort(refs, n, sizeof *refs, by_addr);
        uint64_t active = 0;
        for (size_t k = 0; k < n; k++)
            if (inside(d, refs[k].addr, refs[k].size)) active += refs[k].size;
        pickle_dict_begin(p);
        put_segment_head(v, t->device_ids[i], d->seg_addr, d->seg_size, active);
        pickle_str_memo(p, "blocks");
        pickle_list_begin(p);
        uint64_t at = d->seg_addr, end = d->seg_addr + d->seg_size;
        for (size_t k = 0; k < n; k++) {
            const slot_ref_t *r = &refs[k];
            if (!inside(d, r->addr, r->size) || r->addr < at || r->size == 0) continue;
            if (r->addr > at) put_block(v, at, r->addr - at, 0, -1);
            put_block(v, r->addr, r->size, 1, v->site[r->slot]);
            v->st->live_blocks++;
            v->st->with_frames += v->site[r->slot] >= 0;
            at = r->addr + r->size;
        }
        if (at < end) put_block(v, at, end - at, 0, -1);
        pickle_list_end(p);
        pickle_dict_end(p);
        /* live allocations outside the pool: a segment each */
        for (size_t k = 0; k < n; k++) {
            const slot_ref_t *r = &refs[k];
            if (inside(d, r->addr, r->size)) continue;
            pickle_dict_begin(p);
            put_segment_head(v, t->device_ids[i], r->addr, own_size(r->size), r->size);
            pickle_str_memo(p, "blocks");
            pickle_list_begin(p);
            put_block(v, r->addr, r->size, 1, -1);
            if (r->size == 0) put_block(v, r->addr, 1, 0, -1);
            v->st->live_blocks++;
            pickle_list_end(p);
            pickle_dict_end(p);
        }
    }
    pickle_list_end(p);
    free(refs);
    return 0;
}

/* One trace entry (a dict); `frames_site` >= 0 adds that stack, -1 an empty list. */
static void put_entry(viz_t *v, const char *action, int has_addr, uint64_t addr, uint64_t size,
                      uint64_t time_ns, int32_t frames_site)
{
    pickle_t *p = &v->p;
    pickle_dict_begin(p);
    pickle_str_memo(p, "action");
    pickle_str_memo(p, action);
    if (has_addr) pickle_key_uint(p, "addr", addr);
    pickle_key_uint(p, "size", size);
    pickle_key_int(p, "stream", 0);
    pickle_key_uint(p, "time_us", time_ns / 1000);
    put_frames(v, frames_site);
    pickle_dict_end(p);
    v->st->events++;
}

static void put_device_trace(viz_t *v, int di)
{
    const trace_t *t = v->in->t;
    viz_dev_t *d = &v->dev[di];
    pickle_t *p = &v->p;
    pickle_list_begin(p);
    int first = 1;
    uint64_t live_in = 0; /* requested bytes live inside the pool segment */
    for (size_t e = 0; e < t->nev; e++) {
        const trace_event_t *ev = &t->ev[e];
        if (ev->device != di) continue;
        uint64_t now = t->time_ns ? t->time_ns[e] : 0;
        if (first) {
            put_entry(v, "segment_alloc", 1, d->seg_addr, d->seg_size, now, -1);
            first = 0;
        }
        if (ev->action == TRACE_FAIL) {
            pickle_dict_begin(p);
            pickle_str_memo(p, "action");
            pickle_str_memo(p, "oom");
            pickle_key_uint(p, "size", ev->size);
            pickle_key_uint(p, "device_free", d->seg_size > live_in ? d->seg_size - live_in : 0);
            pickle_key_int(p, "stream", 0);
            pickle_key_uint(p, "time_us", now / 1000);
            put_frames(v, -1);
            pickle_dict_end(p);
            v->st->events++;
            continue;
        }
        uint64_t a = t->addr[ev->slot];
        int in = inside(d, a, ev->size);
        if (ev->action == TRACE_ALLOC) {
            if (!in) {
                put_entry(v, "segment_alloc", 1, a, own_size(ev->size), now, -1);
                v->st->outside++;
            }
            put_entry(v, "alloc", 1, a, ev->size, now, v->live[ev->slot] ? v->site[ev->slot] : -1);
            if (in) live_in += ev->size;
        } else {
            put_entry(v, "free_requested", 1, a, ev->size, now, -1);
            put_entry(v, "free_completed", 1, a, ev->size, now, -1);
            if (!in) put_entry(v, "segment_free", 1, a, own_size(ev->size), now, -1);
            if (in) live_in -= ev->size;
        }
    }
    pickle_list_end(p);
}

int export_viz_write(const export_in_t *in, FILE *f, export_viz_stats_t *st)
{
    viz_t *v = calloc(1, sizeof *v);
    if (v == NULL) return -1;
    memset(st, 0, sizeof *st);
    v->in = in;
    v->st = st;
    int rc = prepare(v);
    if (rc == 0) {
        pickle_begin(&v->p, f);
        pickle_dict_begin(&v->p);
        rc = put_segments(v);
        pickle_str_memo(&v->p, "device_traces");
        pickle_list_begin(&v->p);
        for (long id = 0; rc == 0 && id <= v->max_id; id++) {
            int di = -1;
            for (int i = 0; i < in->t->ndevices; i++)
                if (v->dev[i].used && in->t->device_ids[i] == id) di = i;
            if (di >= 0) {
                put_device_trace(v, di);
            } else {
                pickle_list_begin(&v->p);
                pickle_list_end(&v->p);
            }
        }
        pickle_list_end(&v->p);
        pickle_dict_end(&v->p);
        if (pickle_end(&v->p) != 0) rc = -1;
    }
    free(v->live);
    free(v->site);
    free(v);
    return rc;
}
