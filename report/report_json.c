/* report/report_json.c — building one "npupool-report/1" document (docs/report.md).
 *
 * Owns: the document's layout.  A device's pool figures and maps come from ONE pool_snapshot
 * (one hold of the pool lock): the figures are the pool's own free-space summary (the one
 * pool_get_stats and pool_check use), the maps the walk of the same instant, so allocated + free
 * + overhead = reserved, fragmentation = 1 - largest_free / free, and largest_free = the largest
 * free run of the free map hold exactly.
 * The free map lists free runs ([offset, size]: memory any request can be given) and runs of free
 * slots inside small-block pages ([offset, size, 1]: usable by small requests of that class
 * only).  It is capped at NPUPOOL_REPORT_FREE_MAP entries: free runs are kept before slots and
 * large before small (so the largest free block is always listed), in address order; the rest is
 * counted.
 *
 * Frames arrays are written as JSON text (escaped here) and embedded as raw cJSON items: they are
 * the bulk of a large report and this keeps the document to a few cJSON items per site.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report_cjson.h"
#include "buildid.h"
#include "clock.h"
#include "fmt.h"
#include "ledger_py.h"
#include "rank.h"
#include "symbolize.h"
#include "version.h"

/* ISO 8601 UTC with milliseconds ("2024-05-01T12:00:00.123Z"). */
static void iso_time(double epoch_s, char *buf, size_t len)
{
    time_t t = (time_t)epoch_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    int ms = (int)((epoch_s - (double)t) * 1000.0);
    if (ms < 0) ms = 0;
    if (ms > 999) ms = 999;
    char head[32];
    strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", head, ms);
}

/* cJSON helpers: NULL-safe adds that count failures. */
typedef struct jb {
    int oom; /* 1 once any cJSON allocation failed */
} jb_t;

static cJSON *add(jb_t *b, cJSON *obj, const char *name, cJSON *item)
{
    if (!item) {
        b->oom = 1;
        return NULL;
    }
    if (obj && !cJSON_AddItemToObject(obj, name, item)) {
        cJSON_Delete(item);
        b->oom = 1;
        return NULL;
    }
    return item;
}
static void push(jb_t *b, cJSON *arr, cJSON *item)
{
    if (!item || !cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        b->oom = 1;
    }
}
static void num(jb_t *b, cJSON *o, const char *n, double v) { add(b, o, n, cJSON_CreateNumber(v)); }

/* An unsigned integer, exact up to 2^64 - 1: a double holds every integer below 2^53 and cJSON
 * prints those in full up to 15 digits; larger ones are written as the decimal text itself. */
static cJSON *unum_item(uint64_t v)
{
    if (v < UINT64_C(1000000000000000)) return cJSON_CreateNumber((double)v);
    char text[24];
    text[fmt_u64(text, v)] = 0;
    return cJSON_CreateRaw(text);
}

static void unum(jb_t *b, cJSON *o, const char *n, uint64_t v) { add(b, o, n, unum_item(v)); }
static void str(jb_t *b, cJSON *o, const char *n, const char *v)
{
    add(b, o, n, v ? cJSON_CreateString(v) : cJSON_CreateNull());
}
static void ref(jb_t *b, cJSON *o, const char *n, const char *v)
{
    add(b, o, n, v ? cJSON_CreateStringReference(v) : cJSON_CreateNull());
}

/* ---- process ----------------------------------------------------------------------------------- */

static cJSON *build_process(jb_t *b, const report_input_t *in)
{
    cJSON *p = cJSON_CreateObject();
    if (!p) return NULL;
    unum(b, p, "pid", getpid());
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    str(b, p, "exe", exe);
    cJSON *argv = add(b, p, "cmdline", cJSON_CreateArray());
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f && argv) {
        char buf[8192];
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        buf[len] = 0;
        for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
            push(b, argv, cJSON_CreateString(buf + i));
    }
    if (f) fclose(f);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    str(b, p, "hostname", host);
    int rank = rank_get();
    num(b, p, "rank", rank < 0 ? 0 : rank);
    char t[64];
    iso_time(in->start_wall_s, t, sizeof t);
    str(b, p, "start_time", t);
    iso_time(in->now_wall_s, t, sizeof t);
    str(b, p, "dump_time", t);
    num(b, p, "uptime_s", in->now_wall_s - in->start_wall_s);
    return p;
}

/* ---- npupool and the runtime ------------------------------------------------------------------- */

/* Which npupool wrote the report: its version, and the build id and path of the object this code
 * is in (libnpupool.so; a test program when linked statically). */
static cJSON *build_npupool(jb_t *b)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    char bid[BUILDID_HEX_MAX], path[4096];
    buildid_of_address((const void *)&report_json_build, bid, sizeof bid, path, sizeof path);
    ref(b, o, "version", version_string());
    str(b, o, "build_id", bid[0] ? bid : NULL);
    str(b, o, "library", path[0] ? path : NULL);
    return o;
}

/* Which runtime library served the process (the source knows; null when not known). */
static cJSON *build_runtime(jb_t *b, const report_input_t *in)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const char *library = NULL, *build_id = NULL;
    if (in->src && in->src->runtime) in->src->runtime(in->src->ctx, &library, &build_id);
    str(b, o, "library", library);
    str(b, o, "build_id", build_id);
    return o;
}

/* ---- config ------------------------------------------------------------------------------------ */

typedef struct opt_ctx {
    jb_t *b;
    cJSON *obj;
} opt_ctx_t;

static void option_cb(void *ctx, const char *name, const char *value)
{
    opt_ctx_t *c = ctx;
    if (!name || cJSON_GetObjectItemCaseSensitive(c->obj, name)) return;
    str(c->b, c->obj, name, value ? value : "");
}

static cJSON *build_config(jb_t *b, const report_input_t *in)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    opt_ctx_t c = {b, o};
    if (in->src && in->src->for_each_option) in->src->for_each_option(in->src->ctx, option_cb, &c);
    return o;
}

/* ---- pool figures ------------------------------------------------------------------------------ */

typedef struct free_ent {
    uintptr_t addr; /* extent start */
    size_t size;    /* extent bytes */
    int slots;      /* free map: 1 = free slots inside a small-block page, 0 = a free run */
} free_ent_t;

/* The maps of one device, filled by the walk of pool_snapshot (the figures come from the same
 * snapshot's statistics: the pool's one free-space summary). */
typedef struct walk_acc {
    free_ent_t *heap;      /* min-heap of the free extents kept (free runs rank above slots) */
    size_t nheap, capheap; /* used / capacity (= the free-map cap) */
    uint64_t omitted;      /* free extents left out of the heap */
    size_t omitted_bytes;  /* their bytes */
    free_ent_t *lheap;     /* the same for live blocks (the live map), by size */
    size_t nlheap, caplheap;
    uint64_t lomitted;     /* live blocks left out */
    size_t lomitted_bytes; /* their bytes */
} walk_acc_t;

/* The order of "which to keep": a free run before free slots (the largest free block is always
 * listed), then by size. */
static int ent_less(const free_ent_t *a, const free_ent_t *b)
{
    if (a->slots != b->slots) return a->slots > b->slots;
    return a->size < b->size || (a->size == b->size && a->addr > b->addr);
}

static void heap_sift_down(free_ent_t *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ent_less(&h[l], &h[m])) m = l;
        if (r < n && ent_less(&h[r], &h[m])) m = r;
        if (m == i) return;
        free_ent_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Keep the `cap` first entries by ent_less in a min-heap; count what falls out. */
static void heap_push(free_ent_t *heap, size_t *n, size_t cap, uint64_t *omitted,
                      size_t *omitted_bytes, free_ent_t e)
{
    if (*n < cap) {
        size_t i = (*n)++;
        heap[i] = e;
        while (i > 0 && ent_less(&heap[i], &heap[(i - 1) / 2])) {
            free_ent_t t = heap[i];
            heap[i] = heap[(i - 1) / 2];
            heap[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        return;
    }
    (*omitted)++;
    if (cap && ent_less(&heap[0], &e)) {
        *omitted_bytes += heap[0].size;
        heap[0] = e;
        heap_sift_down(heap, *n, 0);
    } else {
        *omitted_bytes += e.size;
    }
}

/* Runs under the pool lock: no allocation, no calls out. */
static int walk_cb(void *ctx, uintptr_t addr, size_t size, enum pool_extent kind)
{
    walk_acc_t *a = ctx;
    free_ent_t e = {addr, size, kind == POOL_EXTENT_SLOTS};
    if (kind == POOL_EXTENT_LIVE)
        heap_push(a->lheap, &a->nlheap, a->caplheap, &a->lomitted, &a->lomitted_bytes, e);
    else
        heap_push(a->heap, &a->nheap, a->capheap, &a->omitted, &a->omitted_bytes, e);
    return 0;
}

static int ent_by_addr(const void *x, const void *y)
{
    const free_ent_t *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

typedef struct site_key {
    int device;        /* device id */
    uint32_t stack_id; /* stack */
    size_t index;      /* position in "leaks" */
} site_key_t;

static int site_key_cmp(const void *x, const void *y)
{
    const site_key_t *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static void build_pool(jb_t *b, cJSON *dev, int device, pool_t *pool, const report_input_t *in,
                       const site_key_t *keys)
{
    const report_config_t *cfg = in->cfg;
    size_t cap = cfg->free_map_max > 0 ? (size_t)cfg->free_map_max : 0;
    size_t lcap = cfg->live_map_max > 0 ? (size_t)cfg->live_map_max : 0;
    walk_acc_t a = {0};
    a.heap = cap ? malloc(cap * sizeof *a.heap) : NULL;
    a.lheap = lcap ? malloc(lcap * sizeof *a.lheap) : NULL;
    a.capheap = a.heap ? cap : 0;
    a.caplheap = a.lheap ? lcap : 0;
    pool_stats_t st;
    pool_snapshot(pool, &st, walk_cb, &a); /* figures and maps of one instant */
    cJSON *p = add(b, dev, "pool", cJSON_CreateObject());
    if (p) {
        char base[32];
        snprintf(base, sizeof base, "0x%lx", (unsigned long)st.base);
        str(b, p, "base", base);
        unum(b, p, "reserved_bytes", st.reserved_bytes);
        unum(b, p, "allocated_bytes", st.allocated_bytes);
        unum(b, p, "requested_bytes", st.requested_bytes);
        unum(b, p, "peak_allocated_bytes", st.peak_allocated_bytes);
        unum(b, p, "free_bytes", st.free_bytes);
        unum(b, p, "largest_free_bytes", st.largest_free_bytes);
        unum(b, p, "slab_free_bytes", st.slab_free_bytes);
        num(b, p, "fragmentation", st.fragmentation);
        unum(b, p, "free_blocks", st.free_blocks);
        unum(b, p, "live_blocks", st.live_blocks);
        unum(b, p, "overhead_bytes", st.overhead_bytes);
        num(b, p, "usage_ratio",
            st.reserved_bytes ? (double)st.allocated_bytes / (double)st.reserved_bytes : 0.0);
        unum(b, p, "pool_allocs", st.allocs);
        unum(b, p, "pool_frees", st.frees);
        unum(b, p, "failed_allocs", st.failed_allocs);
        unum(b, p, "invalid_frees", st.invalid_frees);
        add(b, p, "snapshot_consistent", cJSON_CreateBool(1));
    }
    /* How the pool is backed: one block, or chunks mapped into an address range (pool.h). */
    str(b, dev, "backing", st.backing == POOL_BACKING_VMM ? "vmm" : "block");
    cJSON *v = add(b, dev, "vmm",
                   st.backing == POOL_BACKING_VMM ? cJSON_CreateObject() : cJSON_CreateNull());
    if (v && st.backing == POOL_BACKING_VMM) {
        unum(b, v, "chunk_bytes", st.chunk_bytes);
        unum(b, v, "va_bytes", st.va_bytes);
        unum(b, v, "limit_bytes", st.limit_bytes);
        unum(b, v, "mapped_bytes", st.reserved_bytes);
        unum(b, v, "whole_chunk_free_bytes", st.whole_chunk_free_bytes);
        unum(b, v, "va_largest_unmapped_bytes", st.va_largest_unmapped);
        unum(b, v, "chunks_mapped", st.chunks_mapped);
        unum(b, v, "chunks_unmapped", st.chunks_unmapped);
        unum(b, v, "grows", st.grows);
        unum(b, v, "stitches", st.stitches);
        unum(b, v, "give_backs", st.give_backs);
        unum(b, v, "given_back_bytes", st.given_back_bytes);
        unum(b, v, "backing_failures", st.backing_failures);
    }
    cJSON *bk = add(b, dev, "buckets", cJSON_CreateArray());
    for (int k = 0; bk && k < POOL_NBUCKETS; k++) {
        cJSON *e = cJSON_CreateObject();
        if (!e) {
            b->oom = 1;
            break;
        }
        unum(b, e, "min_bytes", k == 0 ? 0 : (uint64_t)pool_bucket_limit[k - 1] + 1);
        if (k < POOL_NBUCKETS - 1)
            unum(b, e, "max_bytes", pool_bucket_limit[k]);
        else
            add(b, e, "max_bytes", cJSON_CreateNull());
        unum(b, e, "live_blocks", st.buckets[k].live_blocks);
        unum(b, e, "live_bytes", st.buckets[k].live_bytes);
        unum(b, e, "free_blocks", st.buckets[k].free_blocks);
        unum(b, e, "free_bytes", st.buckets[k].free_bytes);
        push(b, bk, e);
    }
    if (a.nheap > 1) qsort(a.heap, a.nheap, sizeof *a.heap, ent_by_addr);
    /* Free map: [offset, size] for a free run, [offset, size, 1] for free slots of a page. */
    cJSON *fm = add(b, dev, "free_map", cJSON_CreateArray());
    for (size_t i = 0; fm && i < a.nheap; i++) {
        cJSON *pair = cJSON_CreateArray();
        if (pair) {
            push(b, pair, unum_item(a.heap[i].addr - st.base));
            push(b, pair, unum_item(a.heap[i].size));
            if (a.heap[i].slots) push(b, pair, cJSON_CreateNumber(1));
        }
        push(b, fm, pair);
    }
    unum(b, dev, "free_map_omitted", a.omitted);
    unum(b, dev, "free_map_omitted_bytes", a.omitted_bytes);
    /* Live map: [offset, size, index of its site in "leaks"] (site omitted when unknown, e.g. a
     * block freed between the walk and the lookup). */
    if (a.nlheap > 1) qsort(a.lheap, a.nlheap, sizeof *a.lheap, ent_by_addr);
    /* their records, in one walk of the ledger (never a pool lock per block) */
    uintptr_t *addrs = keys && a.nlheap ? malloc(a.nlheap * sizeof *addrs) : NULL;
    ledger_record_t *recs = addrs ? malloc(a.nlheap * sizeof *recs) : NULL;
    uint8_t *found = recs ? malloc(a.nlheap) : NULL;
    if (found) {
        for (size_t i = 0; i < a.nlheap; i++) addrs[i] = a.lheap[i].addr;
        ledger_lookup_sorted(addrs, a.nlheap, recs, found);
    }
    cJSON *lm = add(b, dev, "live_map", cJSON_CreateArray());
    for (size_t i = 0; lm && i < a.nlheap; i++) {
        cJSON *e = cJSON_CreateArray();
        if (e) {
            push(b, e, unum_item(a.lheap[i].addr - st.base));
            push(b, e, unum_item(a.lheap[i].size));
            const ledger_record_t *rr = found && found[i] ? &recs[i] : NULL;
            if (rr && rr->device == device) {
                const ledger_record_t r = *rr;
                site_key_t k = {device, r.stack_id, 0};
                const site_key_t *hit = bsearch(&k, keys, in->nsites, sizeof k, site_key_cmp);
                if (hit) push(b, e, cJSON_CreateNumber((double)hit->index));
            }
        }
        push(b, lm, e);
    }
    unum(b, dev, "live_map_omitted", a.lomitted);
    unum(b, dev, "live_map_omitted_bytes", a.lomitted_bytes);
    free(a.heap);
    free(a.lheap);
    free(addrs);
    free(recs);
    free(found);
}

/* ---- devices ----------------------------------------------------------------------------------- */

typedef struct dev_ctx {
    jb_t *b;
    cJSON *arr; /* "devices" */
    const report_input_t *in;
    const site_key_t *keys; /* sites sorted by (device, stack) with their "leaks" index */
    uint64_t seen;          /* bit d: device d listed (NPUPOOL_MAX_DEVICES = 64) */
    int seen_unknown;       /* the unknown device (-1) listed */
} dev_ctx_t;

static void live_figures(jb_t *b, cJSON *dev, const report_input_t *in, int device)
{
    uint64_t count = 0, bytes = 0, granted = 0;
    for (size_t i = 0; i < in->nsites; i++) {
        if (in->sites[i].device != device) continue;
        count += in->sites[i].count;
        bytes += in->sites[i].requested_bytes;
        granted += in->sites[i].granted_bytes;
    }
    unum(b, dev, "live_allocations", count);
    unum(b, dev, "live_bytes", bytes);
    unum(b, dev, "live_granted_bytes", granted);
}

_Static_assert(NPUPOOL_MAX_DEVICES <= 64, "dev_ctx_t.seen has a bit per device");

static int dev_listed(const dev_ctx_t *c, int device)
{
    return vocab_device_known(device) ? (int)((c->seen >> device) & 1) : c->seen_unknown;
}

static void device_cb(void *ctx, int device, pool_t *pool, const wire_counters_t *counters)
{
    dev_ctx_t *c = ctx;
    jb_t *b = c->b;
    if (dev_listed(c, device)) return;
    if (vocab_device_known(device))
        c->seen |= 1ull << device;
    else
        c->seen_unknown = 1;
    cJSON *d = cJSON_CreateObject();
    if (!d) {
        b->oom = 1;
        return;
    }
    num(b, d, "device", device);
    if (pool) {
        build_pool(b, d, device, pool, c->in, c->keys);
    } else {
        add(b, d, "pool", cJSON_CreateNull());
        add(b, d, "backing", cJSON_CreateNull());
        add(b, d, "vmm", cJSON_CreateNull());
        add(b, d, "buckets", cJSON_CreateArray());
        add(b, d, "free_map", cJSON_CreateArray());
        num(b, d, "free_map_omitted", 0);
        num(b, d, "free_map_omitted_bytes", 0);
        add(b, d, "live_map", cJSON_CreateArray());
        num(b, d, "live_map_omitted", 0);
        num(b, d, "live_map_omitted_bytes", 0);
    }
    cJSON *cn = add(b, d, "counters", cJSON_CreateObject());
    if (cn && counters) {
#define COUNTER(field, meaning) unum(b, cn, #field, wire_counter_get(counters, field));
        WIRE_COUNTERS(COUNTER)
#undef COUNTER
    }
    live_figures(b, d, c->in, device);
    push(b, c->arr, d);
}

static cJSON *build_devices(jb_t *b, const report_input_t *in)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return NULL;
    site_key_t *keys = in->nsites ? malloc(in->nsites * sizeof *keys) : NULL;
    for (size_t i = 0; keys && i < in->nsites; i++)
        keys[i] = (site_key_t){in->sites[i].device, in->sites[i].stack_id, i};
    if (keys && in->nsites > 1) qsort(keys, in->nsites, sizeof *keys, site_key_cmp);
    dev_ctx_t c = {.b = b, .arr = arr, .in = in, .keys = keys};
    if (in->src && in->src->for_each_device) in->src->for_each_device(in->src->ctx, device_cb, &c);
    /* Devices with live records the source did not list (no pool, e.g. after a reset). */
    for (size_t i = 0; i < in->nsites; i++) {
        int d = in->sites[i].device;
        if (!dev_listed(&c, d)) device_cb(&c, d, NULL, NULL);
    }
    free(keys);
    return arr;
}

/* ---- stacks ------------------------------------------------------------------------------------ */

/* A growable text buffer for the frames arrays. */
typedef struct tbuf {
    char *p;    /* text, NUL-terminated */
    size_t n;   /* length */
    size_t cap; /* allocated */
    int oom;    /* 1 once an allocation failed */
} tbuf_t;

static void tb_put(tbuf_t *t, const char *s, size_t len)
{
    if (t->oom) return;
    if (t->n + len + 1 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 4096;
        while (ncap < t->n + len + 1) ncap *= 2;
        char *np = realloc(t->p, ncap);
        if (!np) {
            t->oom = 1;
            return;
        }
        t->p = np;
        t->cap = ncap;
    }
    memcpy(t->p + t->n, s, len);
    t->n += len;
    t->p[t->n] = 0;
}

static void tb_str(tbuf_t *t, const char *s) { tb_put(t, s, strlen(s)); }

/* A JSON string literal (or null). */
static void tb_json_string(tbuf_t *t, const char *s)
{
    if (!s) {
        tb_put(t, "null", 4);
        return;
    }
    tb_put(t, "\"", 1);
    const char *run = s;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c >= 0x20 && *c != '"' && *c != '\\') continue;
        tb_put(t, run, (size_t)((const char *)c - run));
        char esc[8];
        switch (*c) {
        case '"': tb_put(t, "\\\"", 2); break;
        case '\\': tb_put(t, "\\\\", 2); break;
        case '\n': tb_put(t, "\\n", 2); break;
        case '\t': tb_put(t, "\\t", 2); break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", *c);
            tb_put(t, esc, 6);
            break;
        }
        run = (const char *)c + 1;
    }
    tb_str(t, run);
    tb_put(t, "\"", 1);
}

/* The "frames" array of a stack as JSON text, one frame object per line.  Frames are the bulk of
 * a large report (10,000 stacks x 16 frames); writing them as text and embedding them as raw cJSON
 * items keeps the document to a few items per site (time and host memory of the report). */
/* The "frames" array of a stack; *suppressed (when not NULL) is set to 1 when a frame matches
 * one of the suppression patterns `sup`. */
static cJSON *build_frames_checked(jb_t *b, symbolizer_t *sym, uint32_t stack_id, tbuf_t *t,
                                   const suppress_list_t *sup, int *suppressed)
{
    const uintptr_t *pcs;
    int depth = ledger_stack_frames(stack_id, &pcs);
    t->n = 0;
    t->oom = 0;
    tb_put(t, "[", 1);
    int written = 0;
    for (int i = 0; i < depth; i++) {
        if (ledger_py_is_mark(pcs[i])) continue; /* said by "python_frames" */
        symbolize_frame_t f;
        if (sym) {
            symbolize_lookup(sym, pcs[i], &f);
        } else {
            memset(&f, 0, sizeof f);
            f.pc = pcs[i];
            f.offset = pcs[i] - 1;
        }
        /* a Python frame's file stands where a native frame's module does for "module:" rules */
        if (sup && suppressed && !*suppressed &&
            suppress_match(sup, f.function, f.python ? f.file : f.module) >= 0)
            *suppressed = 1;
        char num[64];
        tb_str(t, written++ ? ",\n{\"function\": " : "\n{\"function\": ");
        tb_json_string(t, f.function);
        if (f.python) {
            tb_str(t, ", \"module\": null, \"offset\": null, \"file\": ");
            tb_json_string(t, f.file);
            if (f.line > 0)
                snprintf(num, sizeof num, ", \"line\": %d, ", f.line);
            else
                snprintf(num, sizeof num, ", \"line\": null, ");
            tb_str(t, num);
            tb_str(t, "\"build_id\": null, \"address\": null, \"python\": true}");
            continue;
        }
        tb_str(t, ", \"module\": ");
        tb_json_string(t, f.module);
        snprintf(num, sizeof num, ", \"offset\": %lu, \"file\": ", (unsigned long)f.offset);
        tb_str(t, num);
        tb_json_string(t, f.file);
        if (f.line > 0)
            snprintf(num, sizeof num, ", \"line\": %d, \"build_id\": ", f.line);
        else
            snprintf(num, sizeof num, ", \"line\": null, \"build_id\": ");
        tb_str(t, num);
        tb_json_string(t, f.build_id);
        snprintf(num, sizeof num, ", \"address\": \"0x%lx\"}", (unsigned long)f.pc);
        tb_str(t, num);
    }
    tb_put(t, "]", 1);
    if (t->oom) {
        b->oom = 1;
        return NULL;
    }
    return cJSON_CreateRaw(t->p);
}

static int base_cmp(const void *k, const void *e)
{
    const report_baseline_entry_t *a = k, *b = e;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static const report_baseline_entry_t *baseline_find(const report_input_t *in, int device,
                                                    uint32_t stack)
{
    report_baseline_entry_t key = {device, stack, 0, 0};
    return in->nbase ? bsearch(&key, in->base, in->nbase, sizeof key, base_cmp) : NULL;
}

/* "python_frames": which Python frames the capture of a stack could see (absent when the process
 * had no interpreter then, or Python frames were off). */
static void python_frames(jb_t *b, cJSON *o, uint32_t stack_id)
{
    const uintptr_t *pcs;
    int depth = ledger_stack_frames(stack_id, &pcs);
    const char *seen = ledger_py_seen_name(ledger_py_stack_seen(pcs, depth));
    if (seen) ref(b, o, "python_frames", seen);
}

static cJSON *build_frames(jb_t *b, symbolizer_t *sym, uint32_t stack_id, tbuf_t *t)
{
    return build_frames_checked(b, sym, stack_id, t, NULL, NULL);
}

static cJSON *build_leaks(jb_t *b, const report_input_t *in, symbolizer_t *sym, tbuf_t *t,
                          report_json_result_t *res)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return NULL;
    for (size_t i = 0; i < in->nsites && !b->oom; i++) {
        const ledger_site_t *s = &in->sites[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            b->oom = 1;
            break;
        }
        num(b, o, "device", s->device);
        unum(b, o, "count", s->count);
        unum(b, o, "bytes", s->requested_bytes);
        unum(b, o, "granted_bytes", s->granted_bytes);
        double age = in->now_mono_ns > s->oldest_time_ns
                         ? (double)(in->now_mono_ns - s->oldest_time_ns) * 1e-9
                         : 0.0;
        num(b, o, "oldest_age_s", age);
        num(b, o, "stack_id", s->stack_id);
        ref(b, o, "entry_point", vocab_entry_name((enum vocab_entry)s->entry));
        cJSON *orig = add(b, o, "origins", cJSON_CreateObject());
        for (int k = 0; orig && k < VOCAB_ORIGIN_COUNT; k++)
            unum(b, orig, vocab_origin_name((enum vocab_origin)k), s->by_origin[k]);
        const report_baseline_entry_t *prev = baseline_find(in, s->device, s->stack_id);
        cJSON *g = add(b, o, "growth", cJSON_CreateObject());
        if (g) {
            num(b, g, "count", (double)s->count - (prev ? (double)prev->count : 0.0));
            num(b, g, "bytes", (double)s->requested_bytes - (prev ? (double)prev->bytes : 0.0));
        }
        int suppressed = 0;
        add(b, o, "frames",
            build_frames_checked(b, sym, s->stack_id, t, in->suppress, &suppressed));
        python_frames(b, o, s->stack_id);
        if (in->suppress) add(b, o, "suppressed", cJSON_CreateBool(suppressed));
        if (suppressed)
            res->suppressed_bytes += s->requested_bytes;
        else
            res->unsuppressed_sites++;
        push(b, arr, o);
    }
    return arr;
}

/* ---- the sections of special triggers ---------------------------------------------------------- */

static cJSON *build_oom(jb_t *b, const report_input_t *in, symbolizer_t *sym, tbuf_t *t)
{
    const report_oom_info_t *o = in->oom;
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    size_t need = o->granted_bytes > o->requested_bytes ? o->granted_bytes : o->requested_bytes;
    unum(b, j, "requested_bytes", o->requested_bytes);
    unum(b, j, "granted_bytes", need);
    num(b, j, "device", o->device);
    str(b, j, "entry_point", vocab_entry_name(o->entry));
    unum(b, j, "free_bytes", o->free_bytes);
    unum(b, j, "largest_free_bytes", o->largest_free_bytes);
    str(b, j, "kind", o->kind ? o->kind : "unknown");
    str(b, j, "reason", o->reason ? o->reason : "");
    num(b, j, "stack_id", o->stack_id);
    unum(b, j, "reports_suppressed", in->oom_suppressed);
    /* The sections beside this one describe the moment of writing: say how long after the
     * refusal that was (a report handed to the reporter thread is written later). */
    uint64_t now = clock_mono_ns();
    num(b, j, "written_after_refusal_ms",
        o->refused_ns && now > o->refused_ns ? (double)(now - o->refused_ns) / 1e6 : 0.0);
    add(b, j, "frames", build_frames(b, sym, o->stack_id, t));
    python_frames(b, j, o->stack_id);
    return j;
}

static cJSON *build_threshold(jb_t *b, const report_threshold_info_t *t)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    num(b, j, "device", t->device);
    str(b, j, "level", t->level >= 2 ? "critical" : "warning");
    num(b, j, "usage_ratio", t->usage_ratio);
    num(b, j, "threshold_ratio", t->threshold_ratio);
    unum(b, j, "allocated_bytes", t->allocated_bytes);
    unum(b, j, "reserved_bytes", t->reserved_bytes);
    num(b, j, "rate_window_s", t->rate_window_s);
    if (isnan(t->growth_bytes_per_s)) /* less history than a rate needs */
        add(b, j, "growth_bytes_per_s", cJSON_CreateNull());
    else
        num(b, j, "growth_bytes_per_s", t->growth_bytes_per_s > 0 ? t->growth_bytes_per_s : 0.0);
    if (t->predicted_oom_s >= 0)
        num(b, j, "predicted_oom_s", t->predicted_oom_s);
    else
        add(b, j, "predicted_oom_s", cJSON_CreateNull());
    return j;
}

/* "refusals": how many requests were refused, how many got a report of their own, and the last
 * one (written in every report, so the refusal a process died of is never lost). */
static cJSON *build_refusals(jb_t *b, const report_input_t *in, symbolizer_t *sym, tbuf_t *t)
{
    const report_refusals_t *r = in->refusals;
    const report_oom_info_t *o = &r->last.info;
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    unum(b, j, "total", r->total);
    unum(b, j, "reported", r->reported);
    unum(b, j, "suppressed", r->suppressed);
    cJSON *last = add(b, j, "last", cJSON_CreateObject());
    if (last) {
        unum(b, last, "requested_bytes", o->requested_bytes);
        unum(b, last, "granted_bytes", o->granted_bytes);
        num(b, last, "device", o->device);
        str(b, last, "entry_point", vocab_entry_name(o->entry));
        str(b, last, "kind", r->last.kind);
        str(b, last, "reason", r->last.reason);
        char when[64];
        iso_time(r->last.wall_s, when, sizeof when);
        str(b, last, "time", when);
        add(b, last, "reported", cJSON_CreateBool(r->last.reported));
        unum(b, last, "stack_id", o->stack_id);
        add(b, last, "frames", build_frames(b, sym, o->stack_id, t));
        python_frames(b, last, o->stack_id);
    }
    return j;
}

static cJSON *build_ledger(jb_t *b, const report_input_t *in)
{
    ledger_memory_t m;
    ledger_memory(&m);
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    unum(b, j, "live_allocations", m.live_records);
    unum(b, j, "host_bytes", m.record_bytes);
    unum(b, j, "stacks", m.stacks);
    unum(b, j, "stack_bytes", m.stack_bytes);
    unum(b, j, "stacks_dropped", m.stacks_dropped);
    num(b, j, "backtrace_depth", in->backtrace_depth);
    ledger_py_status_t py;
    ledger_py_status(&py);
    cJSON *pj = add(b, j, "python", py.found ? cJSON_CreateObject() : cJSON_CreateNull());
    if (pj && py.found) {
        str(b, pj, "version", py.version);
        add(b, pj, "frames_read", cJSON_CreateBool(py.supported));
        unum(b, pj, "frames", py.frames);
        unum(b, pj, "strings", py.strings);
        unum(b, pj, "host_bytes", py.bytes);
        unum(b, pj, "frames_dropped", py.frames_dropped);
    }
    unum(b, j, "reports_written", in->stats->written);
    unum(b, j, "reports_failed", in->stats->failed);
    return j;
}

REPORT_HIDDEN cJSON *report_json_build(const report_input_t *in, struct symbolizer **sym_out,
                                       report_json_result_t *res)
{
    *sym_out = NULL;
    *res = (report_json_result_t){0};
    jb_t b = {0};
    cJSON *doc = cJSON_CreateObject();
    if (!doc) return NULL;
    symbolizer_t *sym = symbolize_open(in->cfg->symbols);
    str(&b, doc, "schema", WIRE_REPORT_SCHEMA);
    str(&b, doc, "trigger", wire_trigger_name(in->trigger));
    num(&b, doc, "trigger_device", in->device);
    unum(&b, doc, "sequence", in->seq);
    add(&b, doc, "npupool", build_npupool(&b));
    add(&b, doc, "runtime", build_runtime(&b, in));
    add(&b, doc, "process", build_process(&b, in));
    add(&b, doc, "config", build_config(&b, in));
    add(&b, doc, "ledger", build_ledger(&b, in));
    add(&b, doc, "devices", build_devices(&b, in));
    tbuf_t t = {0};
    add(&b, doc, "leaks", build_leaks(&b, in, sym, &t, res));
    if (in->leaks_after_report) /* the older leaks were listed in that report */
        unum(&b, doc, "leaks_since_report", in->leaks_after_report);
    if (in->trigger == WIRE_TRIGGER_OOM && in->oom) add(&b, doc, "oom", build_oom(&b, in, sym, &t));
    if (in->refusals && in->refusals->total)
        add(&b, doc, "refusals", build_refusals(&b, in, sym, &t));
    free(t.p);
    if (in->trigger == WIRE_TRIGGER_THRESHOLD && in->threshold)
        add(&b, doc, "threshold", build_threshold(&b, in->threshold));
    if (b.oom) {
        cJSON_Delete(doc);
        symbolize_close(sym);
        return NULL;
    }
    *sym_out = sym; /* its strings are referenced by the document: closed after printing */
    return doc;
}
