/* tools/ledger_read.c — reading and checking a ledger file (see ledger_read.h).
 *
 * Algorithm: the file is loaded whole (input_load: bounded); the header chunk is checked (magic
 * and byte order, check word, format name, record size) and copied; then the chunks are walked
 * from the end of the header to its chunk_end, each header copied and checked before its size is
 * believed.  Record chunks: each 64-byte slot copied, then free (check 0), live (check = hash of
 * the copy) or torn (anything else).  Append chunks (stacks, modules, Python frames): entries
 * copied one by one; a zero size ends the chunk, a check that does not match is the torn last
 * entry.  Device chunks: the current copy, else the other one, each with its check.  The header's
 * identities (npupool, the runtime): used when their check words match (the runtime's may be
 * caught being written: torn).
 * Damage stops the walk at the first violation (fail()); what was read before it stays.
 */
#include "ledger_read.h"

#include "input.h"
#include "tools.h"
#include "vocab.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd {
    ledger_read_t *r;         /* the view being filled */
    const unsigned char *buf; /* the file */
    size_t len;               /* its bytes */
    int quiet;                /* no messages */
    size_t cap_recs;          /* allocated entries of r->recs */
    size_t cap_stacks;        /* ... of r->stacks */
    size_t cap_frames;        /* ... of r->frames */
    size_t cap_mods;          /* ... of r->mods */
    size_t cap_py;            /* ... of r->pyframes */
    int oom;                  /* host memory ran out */
} rd_t;

static int fail(rd_t *d, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(rd_t *d, uint64_t off, const char *fmt, ...)
{
    if (d->r->damaged) return -1;
    va_list ap;
    va_start(ap, fmt);
    char msg[200];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(d->r->why, sizeof d->r->why, "at offset %llu: %s", (unsigned long long)off, msg);
    d->r->damaged = 1;
    return -1;
}

/* Room for one more entry of `size` bytes in *arr (capacity *cap, used n). */
static int grow(rd_t *d, void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    void *p = realloc(*arr, nc * size);
    if (!p) {
        d->oom = 1;
        return -1;
    }
    *arr = p;
    *cap = nc;
    return 0;
}

/* ---- records ---------------------------------------------------------------------------------- */

static void read_slot(rd_t *d, const unsigned char *p)
{
    lfmt_record_t s;
    memcpy(&s, p, sizeof s);
    if (s.check == LFMT_CHECK_FREE) return;
    if (s.check == LFMT_CHECK_WRITING || s.check != lfmt_record_check(&s)) {
        d->r->torn_records++;
        return;
    }
    if (grow(d, (void **)&d->r->recs, &d->cap_recs, d->r->nrecs, sizeof *d->r->recs) != 0) return;
    ledger_read_record_t *o = &d->r->recs[d->r->nrecs++];
    *o = (ledger_read_record_t){
        .addr = s.addr,
        .requested = s.requested,
        .granted = s.granted,
        .seq = s.seq,
        .time_ns = s.time_ns,
        .stack_id = s.stack_id,
        .tid = s.tid,
        .device = vocab_device(s.device),
        .entry = s.entry < VOCAB_ENTRY_COUNT ? s.entry : VOCAB_ENTRY_COUNT,
        .origin = s.origin < VOCAB_ORIGIN_COUNT ? s.origin : 0,
    };
}

static int read_records(rd_t *d, uint64_t off, const lfmt_chunk_t *c)
{
    uint64_t slots = (c->size - LFMT_ALIGN) / sizeof(lfmt_record_t);
    if (c->arg[0] >= d->r->hdr.shards || c->arg[2] != slots || c->arg[1] % LFMT_GROUP)
        return fail(d, off,
                    "a record chunk for shard %llu, first record %llu, %llu slots does "
                    "not fit its size or the header",
                    (unsigned long long)c->arg[0], (unsigned long long)c->arg[1],
                    (unsigned long long)c->arg[2]);
    for (uint64_t i = 0; i < slots && !d->oom; i++)
        read_slot(d, d->buf + off + LFMT_ALIGN + i * sizeof(lfmt_record_t));
    d->r->record_bytes += c->size;
    return 0;
}

/* ---- append chunks ---------------------------------------------------------------------------- */

static int add_stack(rd_t *d, uint64_t at, uint32_t id, const unsigned char *payload, uint32_t len)
{
    lfmt_stack_t h;
    if (len < sizeof h) return fail(d, at, "a stack entry too short for its depth");
    memcpy(&h, payload, sizeof h);
    if (id == 0 || h.depth == 0 || h.depth > LFMT_MAX_DEPTH || len != sizeof h + 8u * h.depth)
        return fail(d, at, "stack %u: depth %u does not match its entry (or id 0)", id, h.depth);
    ledger_read_t *r = d->r;
    if (r->nstacks && r->stacks[r->nstacks - 1].id >= id)
        return fail(d, at, "stack %u after stack %u: ids must rise", id,
                    r->stacks[r->nstacks - 1].id);
    if (grow(d, (void **)&r->stacks, &d->cap_stacks, r->nstacks, sizeof *r->stacks) != 0) return -1;
    while (r->nframes + h.depth > d->cap_frames)
        if (grow(d, (void **)&r->frames, &d->cap_frames, d->cap_frames, sizeof *r->frames) != 0)
            return -1;
    memcpy(r->frames + r->nframes, payload + sizeof h, 8u * h.depth);
    r->stacks[r->nstacks++] = (ledger_read_stack_t){id, h.depth, r->nframes};
    r->nframes += h.depth;
    return 0;
}

/* The exact length of a payload padded to 8 bytes (`len`) whose fields say it holds `exact`:
 * `exact` when the padding fits, else `len` (the caller's size check then fails). */
static uint32_t unpadded(uint32_t len, uint64_t exact)
{
    return exact <= len && len - exact < 8 ? (uint32_t)exact : len;
}

/* A malloc'ed copy of n bytes as a string (a NUL inside ends it); NULL when memory ran out. */
static char *text_copy(rd_t *d, const unsigned char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) {
        d->oom = 1;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static int add_pyframe(rd_t *d, uint64_t at, uint32_t id, const unsigned char *payload,
                       uint32_t len)
{
    lfmt_pyframe_t h;
    if (len < sizeof h) return fail(d, at, "a Python frame entry too short");
    memcpy(&h, payload, sizeof h);
    len = unpadded(len, sizeof h + (uint64_t)h.file_len + h.function_len);
    if (id == 0 || h.file_len > LFMT_MAX_PY_NAME || h.function_len > LFMT_MAX_PY_NAME ||
        len != sizeof h + (uint32_t)h.file_len + h.function_len)
        return fail(d, at,
                    "Python frame %u: names of %u and %u bytes do not match its entry (or id 0)",
                    id, h.file_len, h.function_len);
    ledger_read_t *r = d->r;
    if (r->npyframes && r->pyframes[r->npyframes - 1].id >= id)
        return fail(d, at, "Python frame %u after Python frame %u: ids must rise", id,
                    r->pyframes[r->npyframes - 1].id);
    if (grow(d, (void **)&r->pyframes, &d->cap_py, r->npyframes, sizeof *r->pyframes) != 0)
        return -1;
    ledger_read_pyframe_t *f = &r->pyframes[r->npyframes];
    *f = (ledger_read_pyframe_t){.id = id, .line = h.line};
    f->file = text_copy(d, payload + sizeof h, h.file_len);
    f->function = f->file ? text_copy(d, payload + sizeof h + h.file_len, h.function_len) : NULL;
    if (!f->function) {
        free(f->file);
        return -1;
    }
    r->npyframes++;
    return 0;
}

static int add_module(rd_t *d, uint64_t at, uint32_t first, const unsigned char *payload,
                      uint32_t len)
{
    lfmt_module_t h;
    if (len < sizeof h) return fail(d, at, "a module entry too short");
    memcpy(&h, payload, sizeof h);
    len = unpadded(len, sizeof h + (uint64_t)h.build_id_len + h.path_len);
    if (h.build_id_len > LFMT_MAX_BUILD_ID || h.path_len == 0 || h.path_len > LFMT_MAX_PATH ||
        len != sizeof h + h.build_id_len + h.path_len || h.lo >= h.hi)
        return fail(d, at,
                    "a module entry with build id of %u bytes, path of %u, range "
                    "[%#llx, %#llx) does not match its size",
                    h.build_id_len, h.path_len, (unsigned long long)h.lo, (unsigned long long)h.hi);
    ledger_read_t *r = d->r;
    if (grow(d, (void **)&r->mods, &d->cap_mods, r->nmods, sizeof *r->mods) != 0) return -1;
    ledger_read_module_t *m = &r->mods[r->nmods];
    memset(m, 0, sizeof *m);
    m->base = h.base;
    m->lo = h.lo;
    m->hi = h.hi;
    m->first_stack = first;
    static const char hex[] = "0123456789abcdef";
    for (uint32_t i = 0; i < h.build_id_len; i++) {
        m->build_id[2 * i] = hex[payload[sizeof h + i] >> 4];
        m->build_id[2 * i + 1] = hex[payload[sizeof h + i] & 15];
    }
    m->path = text_copy(d, payload + sizeof h + h.build_id_len, h.path_len);
    if (!m->path) return -1;
    r->nmods++;
    return 0;
}

static int read_append(rd_t *d, uint64_t off, const lfmt_chunk_t *c)
{
    uint64_t end = off + c->size;
    unsigned char
        e[sizeof(lfmt_entry_t) + sizeof(lfmt_module_t) + LFMT_MAX_BUILD_ID + LFMT_MAX_PATH + 16];
    for (uint64_t p = off + LFMT_ALIGN; p + sizeof(lfmt_entry_t) <= end;) {
        lfmt_entry_t h;
        memcpy(&h, d->buf + p, sizeof h);
        if (h.size == 0) break; /* the end of the entries */
        if (h.size < sizeof h + 8 || h.size % 8 || h.size > sizeof e || h.size > end - p) {
            d->r->torn_entries++; /* a size caught being written, or nonsense: nothing after */
            break;
        }
        memcpy(e, d->buf + p, h.size);
        uint64_t check;
        memcpy(&check, e + h.size - 8, 8);
        if (check != lfmt_entry_check(e, h.size, c->kind)) {
            d->r->torn_entries++; /* the last entry, caught between its stores */
            break;
        }
        /* the payload is padded to 8 bytes: a module's or a Python frame's exact length comes
         * from its fields */
        uint32_t len = h.size - (uint32_t)sizeof h - 8;
        const unsigned char *payload = e + sizeof h;
        int rc = c->kind == LFMT_KIND_STACKS    ? add_stack(d, p, h.tag, payload, len)
                 : c->kind == LFMT_KIND_MODULES ? add_module(d, p, h.tag, payload, len)
                                                : add_pyframe(d, p, h.tag, payload, len);
        if (rc != 0) return -1;
        p += h.size;
    }
    if (c->kind == LFMT_KIND_STACKS) d->r->stack_bytes += c->size;
    return 0;
}

/* ---- devices ---------------------------------------------------------------------------------- */

static int figs_ok(const lfmt_device_figs_t *f, int64_t device)
{
    return f->check == lfmt_words_check(&f->mono_ns, (sizeof *f - 8) / 8, LFMT_KIND_DEVICE) &&
           f->device == device && f->ncounters <= LFMT_MAX_COUNTERS &&
           f->nbuckets <= LFMT_MAX_BUCKETS;
}

static int read_device(rd_t *d, uint64_t off, const lfmt_chunk_t *c)
{
    lfmt_device_chunk_t dc;
    if (c->size < sizeof dc || c->arg[0] > LFMT_DEVICE_SLOTS - 1)
        return fail(d, off, "a device chunk of %llu bytes for device %lld",
                    (unsigned long long)c->size, (long long)c->arg[0] - 1);
    memcpy(&dc, d->buf + off, sizeof dc);
    int64_t device = (int64_t)c->arg[0] - 1;
    unsigned slot = device < 0 ? LFMT_DEVICE_SLOTS - 1 : (unsigned)device;
    if (dc.current == 0) return 0; /* made, never written */
    const lfmt_device_figs_t *f = &dc.figs[dc.current & 1];
    if (!figs_ok(f, device)) f = &dc.figs[(dc.current + 1) & 1];
    if (!figs_ok(f, device)) {
        d->r->torn_devices++;
        return 0;
    }
    d->r->dev[slot] = *f;
    d->r->have_dev[slot] = 1;
    return 0;
}

/* ---- the walk --------------------------------------------------------------------------------- */

static int chunk_at(rd_t *d, uint64_t off, uint64_t end, lfmt_chunk_t *c)
{
    if (end - off < sizeof *c) return fail(d, off, "a chunk header is cut off by the end");
    memcpy(c, d->buf + off, sizeof *c);
    if (c->magic != LFMT_CHUNK_MAGIC)
        return fail(d, off,
                    c->magic ? "no chunk here (bad magic)"
                             : "no chunk here (zeros) before the end of the chunks");
    if (c->check != lfmt_chunk_check(c)) return fail(d, off, "a chunk header's check word differs");
    if (c->offset != off)
        return fail(d, off, "a chunk that says it is at offset %llu",
                    (unsigned long long)c->offset);
    if (c->size < LFMT_ALIGN || c->size % LFMT_ALIGN || c->size > end - off)
        return fail(d, off,
                    "a chunk of %llu bytes does not fit before the end of the chunks "
                    "(%llu)",
                    (unsigned long long)c->size, (unsigned long long)end);
    return 0;
}

static int walk(rd_t *d, uint64_t off, uint64_t end)
{
    while (off < end && !d->oom) {
        lfmt_chunk_t c;
        if (chunk_at(d, off, end, &c) != 0) return -1;
        d->r->chunks++;
        int rc = 0;
        switch (c.kind) {
        case LFMT_KIND_RECORDS: rc = read_records(d, off, &c); break;
        case LFMT_KIND_STACKS:
        case LFMT_KIND_MODULES:
        case LFMT_KIND_PYFRAMES: rc = read_append(d, off, &c); break;
        case LFMT_KIND_DEVICE: rc = read_device(d, off, &c); break;
        case LFMT_KIND_PAD: break;
        case LFMT_KIND_HEADER: rc = fail(d, off, "a second header"); break;
        default: d->r->unknown_chunks++; break; /* a later writer's kind: skipped */
        }
        if (rc != 0) return -1;
        off += c.size;
    }
    return 0;
}

/* 1 when an identity is committed (its check word matches), its texts then ended; else it is
 * cleared (not known, or torn). */
static int library_ok(lfmt_library_t *l)
{
    int ok = l->check && l->check == lfmt_library_check(l);
    if (!ok) memset(l, 0, sizeof *l);
    l->build_id[sizeof l->build_id - 1] = l->path[sizeof l->path - 1] = 0;
    for (char *p = l->build_id; *p; p++) /* hex only, as every report's build ids */
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            l->build_id[0] = 0;
            break;
        }
    return ok;
}

static int read_header(rd_t *d)
{
    ledger_read_t *r = d->r;
    lfmt_chunk_t c;
    if (d->len < sizeof(lfmt_header_t)) {
        uint32_t magic = 0;
        if (d->len >= 4) memcpy(&magic, d->buf, 4);
        return fail(d, 0,
                    magic == LFMT_CHUNK_MAGIC ? "truncated: %zu bytes, not even a header"
                                              : "not an npupool ledger file (%zu bytes)",
                    d->len);
    }
    memcpy(&c, d->buf, sizeof c);
    if (c.magic == __builtin_bswap32(LFMT_CHUNK_MAGIC))
        return fail(d, 0, "written on a machine of the other byte order");
    if (c.magic != LFMT_CHUNK_MAGIC || c.kind != LFMT_KIND_HEADER)
        return fail(d, 0, "not an npupool ledger file");
    if (c.check != lfmt_chunk_check(&c) || c.offset != 0 || c.size < sizeof(lfmt_header_t) ||
        c.size % LFMT_ALIGN)
        return fail(d, 0, "the header chunk is damaged");
    if (c.size > d->len)
        return fail(d, 0, "truncated: %zu bytes, not even its header (%llu)", d->len,
                    (unsigned long long)c.size);
    memcpy(&r->hdr, d->buf, sizeof r->hdr);
    lfmt_header_t *h = &r->hdr;
    if (memcmp(h->format, LFMT_FORMAT, sizeof LFMT_FORMAT) != 0) {
        char f[sizeof h->format + 1];
        memcpy(f, h->format, sizeof h->format);
        f[sizeof h->format] = 0;
        for (char *p = f; *p; p++)
            if (*p < 32 || *p > 126) *p = '?';
        return fail(d, 0, "format \"%s\": this npupool reads %s", f, LFMT_FORMAT);
    }
    if (h->record_size != sizeof(lfmt_record_t) || h->shards == 0 || h->shards > 65536)
        return fail(d, 0, "record size %u, %u shards: not this format's", h->record_size,
                    h->shards);
    /* the identities, checked as stored; the runtime's may be caught being written (torn) */
    int runtime_written = h->runtime.check != 0;
    r->have_npupool = library_ok(&h->npupool);
    r->have_runtime = library_ok(&h->runtime);
    if (runtime_written && !r->have_runtime) r->torn_entries++;
    /* the texts are written once, at creation: make sure each ends */
    h->boot_id[sizeof h->boot_id - 1] = h->hostname[sizeof h->hostname - 1] = 0;
    h->exe[sizeof h->exe - 1] = h->cmdline[sizeof h->cmdline - 1] = 0;
    h->path[sizeof h->path - 1] = h->config[sizeof h->config - 1] = 0;
    h->version[sizeof h->version - 1] = 0;
    return (int)c.size;
}

static int stack_cmp(const void *k, const void *e)
{
    uint32_t id = *(const uint32_t *)k;
    const ledger_read_stack_t *s = e;
    return id < s->id ? -1 : id > s->id;
}

const ledger_read_stack_t *ledger_read_stack(const ledger_read_t *r, uint32_t id)
{
    return r->nstacks ? bsearch(&id, r->stacks, r->nstacks, sizeof *r->stacks, stack_cmp) : NULL;
}

static int pyframe_cmp(const void *k, const void *e)
{
    uint32_t id = *(const uint32_t *)k;
    const ledger_read_pyframe_t *f = e;
    return id < f->id ? -1 : id > f->id;
}

const ledger_read_pyframe_t *ledger_read_pyframe(const ledger_read_t *r, uint32_t id)
{
    return r->npyframes ? bsearch(&id, r->pyframes, r->npyframes, sizeof *r->pyframes, pyframe_cmp)
                        : NULL;
}

const ledger_read_module_t *ledger_read_module_of(const ledger_read_t *r, uint32_t stack_id,
                                                  uint64_t pc)
{
    const ledger_read_module_t *best = NULL;
    uint64_t a = pc ? pc - 1 : 0;
    for (size_t i = 0; i < r->nmods; i++) {
        const ledger_read_module_t *m = &r->mods[i];
        if (a < m->lo || a >= m->hi || m->first_stack > stack_id) continue;
        if (!best || m->first_stack >= best->first_stack) best = m;
    }
    return best;
}

int ledger_read_buffer(const char *name, const unsigned char *buf, size_t len, int salvage,
                       int quiet, ledger_read_t *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->file_size = len;
    rd_t d = {.r = r, .buf = buf, .len = len, .quiet = quiet};
    int hsize = read_header(&d);
    int fatal = hsize < 0; /* nothing to salvage without a header */
    if (!fatal) {
        uint64_t end = r->hdr.chunk_end;
        if (end < (uint64_t)hsize || end % LFMT_ALIGN) {
            fail(&d, 0, "the header says the chunks end at %llu", (unsigned long long)end);
            fatal = 1;
        } else {
            if (end > len) {
                fail(&d, len, "truncated: %zu bytes, its chunks end at %llu", len,
                     (unsigned long long)end);
                end = len / LFMT_ALIGN * LFMT_ALIGN;
            }
            walk(&d, (uint64_t)hsize, end);
        }
    }
    if (d.oom) {
        if (!quiet) tools_err("%s: out of memory", name);
        ledger_read_release(r);
        return TOOLS_BAD;
    }
    if (r->damaged && (fatal || !salvage)) {
        if (!quiet) tools_err("%s: %s", name, r->why);
        ledger_read_release(r);
        return TOOLS_BAD;
    }
    if (r->damaged && !quiet)
        tools_err("%s: damaged %s; recovering what comes before it (--salvage)", name, r->why);
    return TOOLS_OK;
}

/* The first piece must start with a chunk magic: /dev/zero or a report is refused at once. */
static int first_bytes(void *ctx, const char *buf, size_t len)
{
    const char *path = ctx;
    uint32_t magic;
    if (len < sizeof magic) return 0;
    memcpy(&magic, buf, sizeof magic);
    if (magic == LFMT_CHUNK_MAGIC || magic == __builtin_bswap32(LFMT_CHUNK_MAGIC)) return 0;
    tools_err("%s: at offset 0: not an npupool ledger file", path);
    return TOOLS_BAD;
}

int ledger_read_file(const char *path, int salvage, ledger_read_t *r)
{
    char *buf;
    size_t len;
    memset(r, 0, sizeof *r);
    int rc = input_load(path, first_bytes, (void *)path, &buf, &len);
    if (rc != TOOLS_OK) return rc;
    rc = ledger_read_buffer(path, (const unsigned char *)buf, len, salvage, 0, r);
    free(buf);
    return rc;
}

void ledger_read_release(ledger_read_t *r)
{
    for (size_t i = 0; i < r->nmods; i++) free(r->mods[i].path);
    free(r->mods);
    for (size_t i = 0; i < r->npyframes; i++) {
        free(r->pyframes[i].file);
        free(r->pyframes[i].function);
    }
    free(r->pyframes);
    r->pyframes = NULL;
    r->npyframes = 0;
    free(r->recs);
    free(r->stacks);
    free(r->frames);
    r->mods = NULL;
    r->recs = NULL;
    r->stacks = NULL;
    r->frames = NULL;
    r->nmods = r->nrecs = r->nstacks = r->nframes = 0;
}
