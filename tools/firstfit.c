/* tools/firstfit.c — the seed's first-fit pool (see firstfit.h for the behaviour and cost).
 * Invariants: listed spans never overlap each other or a live block; free_bytes is the sum of
 * listed sizes.  The live map is base/addrmap (offset -> aligned size).
 */
#include "firstfit.h"

#include <stdlib.h>
#include <string.h>

#include "addrmap.h"

typedef struct span {
    size_t off;  /* offset from the pool start, bytes */
    size_t size; /* bytes */
} span_t;

struct firstfit {
    size_t pool_size;   /* bytes */
    span_t *list;       /* free spans, insertion order */
    size_t n;           /* spans in list */
    size_t cap;         /* capacity of list */
    size_t free_bytes;  /* sum of listed sizes */
    addrmap_t live;     /* offset -> size of live blocks */
    span_t *scratch;    /* copy used by firstfit_largest_free */
    size_t scratch_cap; /* its capacity */
};

static int list_append(firstfit_t *p, size_t off, size_t size)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 1024;
        span_t *l = realloc(p->list, cap * sizeof *l);
        if (!l) return -1;
        p->list = l;
        p->cap = cap;
    }
    p->list[p->n++] = (span_t){off, size};
    return 0;
}

void firstfit_destroy(firstfit_t *p);

firstfit_t *firstfit_create(size_t pool_size)
{
    firstfit_t *p = calloc(1, sizeof *p);
    if (!p || addrmap_init(&p->live, 1024) != 0) {
        free(p);
        return NULL;
    }
    p->pool_size = pool_size;
    if (list_append(p, 0, pool_size) != 0) {
        firstfit_destroy(p);
        return NULL;
    }
    p->free_bytes = pool_size;
    return p;
}

void firstfit_destroy(firstfit_t *p)
{
    if (!p) return;
    addrmap_destroy(&p->live);
    free(p->list);
    free(p->scratch);
    free(p);
}

static int span_cmp(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Sort by offset and merge touching spans, in place. */
static size_t sort_merge(span_t *v, size_t n)
{
    if (n < 2) return n;
    qsort(v, n, sizeof *v, span_cmp);
    size_t w = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[w].off + v[w].size == v[i].off)
            v[w].size += v[i].size;
        else
            v[++w] = v[i];
    }
    return w + 1;
}

static int first_fit(firstfit_t *p, size_t need, size_t *off)
{
    for (size_t i = 0; i < p->n; i++) {
        if (p->list[i].size < need) continue;
        span_t s = p->list[i];
        memmove(&p->list[i], &p->list[i + 1], (p->n - i - 1) * sizeof *p->list);
        p->n--;
        if (s.size > need) list_append(p, s.off + need, s.size - need);
        p->free_bytes -= need;
        *off = s.off;
        return 0;
    }
    return -1;
}

int firstfit_alloc(firstfit_t *p, size_t size, size_t *off)
{
    size_t need = (size + FIRSTFIT_ALIGN - 1) & ~(size_t)(FIRSTFIT_ALIGN - 1);
    if (need == 0) return -1;
    if (first_fit(p, need, off) != 0) {
        p->n = sort_merge(p->list, p->n);
        if (first_fit(p, need, off) != 0) return -1;
    }
    if (addrmap_put(&p->live, *off, need) < 0) {
        list_append(p, *off, need);
        p->free_bytes += need;
        return -1;
    }
    return 0;
}

int firstfit_free(firstfit_t *p, size_t off)
{
    uint64_t size;
    if (!addrmap_del(&p->live, off, &size)) return -1;
    if (list_append(p, off, size) != 0) return -1;
    p->free_bytes += size;
    return 0;
}

size_t firstfit_free_bytes(const firstfit_t *p) { return p->free_bytes; }

/* Largest span as the list holds it (the seed's own stats() view). */
static size_t largest_listed(const firstfit_t *p)
{
    size_t best = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->list[i].size > best) best = p->list[i].size;
    return best;
}

size_t firstfit_largest_free(firstfit_t *p)
{
    if (p->scratch_cap < p->n) {
        free(p->scratch);
        p->scratch_cap = p->cap;
        p->scratch = malloc(p->scratch_cap * sizeof *p->scratch);
        if (!p->scratch) {
            p->scratch_cap = 0;
            return largest_listed(p);
        }
    }
    memcpy(p->scratch, p->list, p->n * sizeof *p->list);
    size_t n = sort_merge(p->scratch, p->n);
    size_t best = 0;
    for (size_t i = 0; i < n; i++)
        if (p->scratch[i].size > best) best = p->scratch[i].size;
    return best;
}
