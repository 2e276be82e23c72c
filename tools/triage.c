/* tools/triage.c — the leak listing of one or more reports (triage.h).
 *
 * Steps: (1) every stack of every report (and of the baseline) becomes an item with its match
 * key; (2) items are sorted by key and runs of one key merged into one stack (plain mode: no
 * merging, one stack per item), summing per report or per side (now / baseline) in 128 bits;
 * (3) since mode keeps the stacks that grew; (4) stacks with a frame that a pattern matches are
 * counted apart; (5) the rest are sorted by site key, then bytes, and grouped into sites, which
 * are sorted by bytes.  Sums that do not fit in 64 bits are shown at their limit.
 */
#include "triage.h"

#include "cli.h"
#include "site.h"
#include "tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef __int128 wide_t;

static uint64_t uclamp(wide_t v)
{
    return v < 0 ? 0 : v > (wide_t)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}
static int64_t sclamp(wide_t v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

typedef struct item {
    const report_leak_t *leak; /* the stack */
    char *key;                 /* its match key (malloc'd), NULL in the plain mode */
    size_t report;             /* index of its report; nreports = the baseline */
} item_t;

static int item_by_key(const void *a, const void *b)
{
    const item_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->report < y->report ? -1 : x->report > y->report;
}

/* The grouping key of a site: plain and since modes name the allocating call by its module path
 * and offset (or its function, file and line; a stack with Python frames by the Python frame that
 * names it), the ranks mode as stacks are matched. */
static void site_key(int mode, const report_leak_t *l, char *buf, size_t cap)
{
    const report_frame_t *py = site_python_frame(l);
    const report_frame_t *f = py ? py : l->nframes ? &l->frames[0] : NULL;
    if (mode == TRIAGE_RANKS)
        site_frame_key(l, SITE_KEY_BUILD_ID, buf, cap);
    else if (f == NULL)
        snprintf(buf, cap, "?");
    else if (f->python)
        snprintf(buf, cap, "py:%s:%" PRIu64 ":%s", f->file ? f->file : "", f->line,
                 f->function ? f->function : "?");
    else if (f->module && f->has_offset)
        snprintf(buf, cap, "%s+0x%" PRIx64, f->module, f->offset);
    else if (f->function)
        snprintf(buf, cap, "fn:%s:%s:%" PRIu64, f->function, f->file ? f->file : "", f->line);
    else
        snprintf(buf, cap, "?");
}

typedef struct keyed {
    triage_stack_t s; /* the stack */
    char site[160];   /* its site key */
    size_t order;     /* its place before sorting (ties) */
} keyed_t;

static int keyed_by_site(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    int c = strcmp(x->site, y->site);
    if (c) return c;
    if (x->s.bytes != y->s.bytes) return x->s.bytes < y->s.bytes ? 1 : -1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int site_by_bytes(const void *a, const void *b)
{
    const triage_site_t *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->key, y->key);
}

/* The index of the first pattern matching a frame of l, or -1. */
static int suppressed_by(const suppress_list_t *sup, const report_leak_t *l)
{
    if (sup == NULL || sup->n == 0) return -1;
    for (size_t i = 0; i < l->nframes; i++) {
        const report_frame_t *f = &l->frames[i]; /* a Python frame's file is its "module" */
        int r = suppress_match(sup, f->function, f->python ? f->file : f->module);
        if (r >= 0) return r;
    }
    return -1;
}

void triage_release(triage_t *t)
{
    for (size_t i = 0; t->stack && i < t->nstacks; i++) free(t->stack[i].key);
    free(t->stack);
    free(t->site);
    free(t->hits);
    free(t->stack_mem);
    free(t->site_mem);
    memset(t, 0, sizeof *t);
}

static void add_hits(triage_hits_t *h, uint64_t count, uint64_t bytes)
{
    h->stacks++;
    h->count = tools_add_sat(h->count, count);
    h->bytes = tools_add_sat(h->bytes, bytes);
}

/* Steps 1-3: the stacks before suppression into *out (malloc'd), their number returned, or
 * (size_t)-1 when out of memory. */
static size_t collect(const triage_in_t *in, int mode, triage_t *t, keyed_t **out)
{
    const size_t nr = in->nreports;
    size_t nitems = 0;
    for (size_t r = 0; r < nr; r++) nitems += in->reports[r].nleaks;
    if (in->base) nitems += in->base->nleaks;
    item_t *it = calloc(nitems ? nitems : 1, sizeof *it);
    keyed_t *k = calloc(nitems ? nitems : 1, sizeof *k);
    if (it == NULL || k == NULL) goto oom;
    const unsigned flags =
        mode == TRIAGE_SINCE ? SITE_KEY_DEVICE | SITE_KEY_BUILD_ID : SITE_KEY_BUILD_ID;
    size_t n = 0;
    for (size_t r = 0; r <= nr; r++) {
        const report_t *rep = r < nr ? &in->reports[r] : in->base;
        for (size_t i = 0; rep && i < rep->nleaks; i++) {
            const report_leak_t *l = &rep->leaks[i];
            if (in->have_device && l->device != in->device) continue;
            it[n].leak = l;
            it[n].report = r;
            if (mode != TRIAGE_PLAIN && (it[n].key = site_stack_key(l, flags)) == NULL) goto oom;
            n++;
            if (r == nr) t->base_stacks++;
        }
    }
    size_t m = 0;
    if (mode == TRIAGE_PLAIN) {
        for (size_t i = 0; i < n; i++, m++) {
            k[m].s.leak = it[i].leak;
            k[m].s.count = it[i].leak->count;
            k[m].s.bytes = it[i].leak->bytes;
        }
        free(it);
        *out = k;
        return m;
    }
    qsort(it, n, sizeof *it, item_by_key);
    if (mode == TRIAGE_RANKS) {
        size_t runs = 0;
        for (size_t i = 0; i < n; i++) runs += i == 0 || strcmp(it[i - 1].key, it[i].key) != 0;
        t->stack_mem = calloc(runs ? runs * nr * 2 : 1, sizeof *t->stack_mem);
        if (t->stack_mem == NULL) goto oom;
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        wide_t now_c = 0, now_b = 0, base_c = 0, base_b = 0;
        triage_stack_t *s = &k[m].s;
        s->key = it[i].key;
        it[i].key = NULL;
        if (mode == TRIAGE_RANKS) {
            s->rcount = t->stack_mem + m * nr * 2;
            s->rbytes = s->rcount + nr;
        }
        for (; j < n && (j == i || strcmp(it[j].key, s->key) == 0); j++) {
            const report_leak_t *l = it[j].leak;
            if (it[j].report == nr) {
                base_c += l->count, base_b += l->bytes, s->in_base = 1;
                continue;
            }
            if (s->leak == NULL) s->leak = l;
            now_c += l->count, now_b += l->bytes;
            if (s->rcount) {
                s->rcount[it[j].report] = tools_add_sat(s->rcount[it[j].report], l->count);
                s->rbytes[it[j].report] = tools_add_sat(s->rbytes[it[j].report], l->bytes);
            }
        }
        for (size_t q = i + 1; q < j; q++) free(it[q].key), it[q].key = NULL;
        i = j;
        if (mode == TRIAGE_SINCE) {
            wide_t db = now_b - base_b, dc = now_c - base_c;
            if (!(db > 0 || (db == 0 && dc > 0))) { /* no growth: not a row */
                free(s->key);
                memset(s, 0, sizeof *s);
                continue;
            }
            s->delta_count = sclamp(dc);
            s->count = uclamp(dc);
            s->bytes = uclamp(db);
            s->now_count = uclamp(now_c), s->now_bytes = uclamp(now_b);
            s->base_count = uclamp(base_c), s->base_bytes = uclamp(base_b);
        } else {
            s->count = uclamp(now_c);
            s->bytes = uclamp(now_b);
        }
        m++;
    }
    free(it);
    *out = k;
    return m;
oom:
    for (size_t i = 0; it && i < nitems; i++) free(it[i].key);
    free(it);
    free(k);
    return (size_t)-1;
}

int triage_build(const triage_in_t *in, triage_t *t)
{
    memset(t, 0, sizeof *t);
    const int mode = in->base ? TRIAGE_SINCE : in->nreports > 1 ? TRIAGE_RANKS : TRIAGE_PLAIN;
    const size_t nr = in->nreports;
    t->mode = mode;
    t->nreports = nr;
    keyed_t *k = NULL;
    size_t m = collect(in, mode, t, &k);
    if (m == (size_t)-1) goto oom;
    if (in->sup && in->sup->n > 0 &&
        (t->hits = calloc((size_t)in->sup->n, sizeof *t->hits)) == NULL) {
        for (size_t i = 0; i < m; i++) free(k[i].s.key);
        goto oom_k;
    }
    /* Step 4: suppression; step 5: site keys. */
    size_t shown = 0;
    for (size_t i = 0; i < m; i++) {
        int r = suppressed_by(in->sup, k[i].s.leak);
        if (r >= 0) {
            add_hits(&t->hidden, k[i].s.count, k[i].s.bytes);
            add_hits(&t->hits[r], k[i].s.count, k[i].s.bytes);
            free(k[i].s.key);
            continue;
        }
        k[shown] = k[i];
        k[shown].order = shown;
        site_key(mode, k[shown].s.leak, k[shown].site, sizeof k[shown].site);
        shown++;
    }
    qsort(k, shown, sizeof *k, keyed_by_site);
    t->stack = calloc(shown ? shown : 1, sizeof *t->stack);
    t->site = calloc(shown ? shown : 1, sizeof *t->site);
    if (t->stack == NULL || t->site == NULL) {
        for (size_t i = 0; i < shown; i++) free(k[i].s.key);
        goto oom_k;
    }
    size_t ns = 0;
    for (size_t i = 0; i < shown; i++) {
        t->stack[i] = k[i].s;
        t->nstacks++;
        if (ns == 0 || strcmp(t->site[ns - 1].key, k[i].site) != 0) {
            memcpy(t->site[ns].key, k[i].site, sizeof t->site[ns].key);
            t->site[ns].first = i;
            ns++;
        }
        triage_site_t *st = &t->site[ns - 1];
        st->count = tools_add_sat(st->count, k[i].s.count);
        st->bytes = tools_add_sat(st->bytes, k[i].s.bytes);
        st->nstacks++;
        t->count = tools_add_sat(t->count, k[i].s.count);
        t->bytes = tools_add_sat(t->bytes, k[i].s.bytes);
    }
    free(k);
    t->nsites = ns;
    if (mode == TRIAGE_RANKS) {
        t->site_mem = calloc(ns ? ns * nr * 2 : 1, sizeof *t->site_mem);
        if (t->site_mem == NULL) goto oom;
        for (size_t i = 0; i < ns; i++) {
            triage_site_t *st = &t->site[i];
            st->rcount = t->site_mem + i * nr * 2;
            st->rbytes = st->rcount + nr;
            for (size_t j = st->first; j < st->first + st->nstacks; j++)
                for (size_t r = 0; r < nr; r++) {
                    st->rcount[r] = tools_add_sat(st->rcount[r], t->stack[j].rcount[r]);
                    st->rbytes[r] = tools_add_sat(st->rbytes[r], t->stack[j].rbytes[r]);
                }
        }
    }
    /* Sites largest first; the per-report arrays move with them (they are pointers). */
    qsort(t->site, ns, sizeof *t->site, site_by_bytes);
    return 0;
oom_k:
    free(k);
oom:
    triage_release(t);
    tools_err("out of memory");
    return -1;
}

size_t triage_ranks(const report_t *reports, size_t nreports, long *ranks, size_t cap,
                    size_t *rank_index)
{
    size_t n = 0;
    for (size_t i = 0; i < nreports; i++) {
        size_t j = 0;
        while (j < n && ranks[j] < reports[i].rank) j++;
        if (j < n && ranks[j] == reports[i].rank) continue;
        if (n == cap) continue;
        memmove(&ranks[j + 1], &ranks[j], (n - j) * sizeof *ranks);
        ranks[j] = reports[i].rank;
        n++;
    }
    for (size_t i = 0; rank_index && i < nreports; i++) {
        rank_index[i] = 0;
        for (size_t j = 0; j < n; j++)
            if (ranks[j] == reports[i].rank) rank_index[i] = j;
    }
    return n;
}

size_t triage_present(const uint64_t *rcount, size_t nreports, const size_t *rank_index, size_t n)
{
    unsigned char seen[CLI_MAX_OPERANDS] = {0}; /* n <= reports <= CLI_MAX_OPERANDS */
    size_t k = 0;
    for (size_t r = 0; r < nreports; r++) {
        size_t i = rank_index[r];
        if (rcount[r] == 0 || i >= n || i >= sizeof seen || seen[i]) continue;
        seen[i] = 1;
        k++;
    }
    return k;
}

int triage_rank_notes(const report_t *r, size_t n)
{
    int notes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t same = 0, first = 1, one_pid = 1;
        for (size_t j = 0; j < n; j++) {
            if (r[j].rank != r[i].rank) continue;
            same++;
            first &= j >= i;
            one_pid &= r[j].pid == r[i].pid;
        }
        if (same < 2 || !first) continue;
        printf("note: rank %ld is in %zu reports (%s):", r[i].rank, same,
               one_pid ? "snapshots of one process" : "different processes");
        for (size_t j = i; j < n; j++)
            if (r[j].rank == r[i].rank)
                printf(" %s (pid %ld%s%s)", r[j].path, r[j].pid, r[j].dump_time[0] ? ", " : "",
                       r[j].dump_time);
        printf("; each counts in the totals\n");
        notes++;
    }
    return notes;
}
