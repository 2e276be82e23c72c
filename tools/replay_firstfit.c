/* tools/replay_firstfit.c — the first-fit baseline (firstfit.c) behind replay's allocator table,
 * for `npupool replay --allocator firstfit` and the comparison table in docs/tools.md.
 * The baseline works in offsets; addresses are base + offset.
 */
#include "replay.h"

#include "firstfit.h"

#include <stdlib.h>

typedef struct ffa {
    firstfit_t *ff; /* the baseline pool */
    uintptr_t base; /* made-up start address */
    size_t size;    /* pool bytes */
} ffa_t;

static void *ffa_create(uintptr_t base, size_t size, const replay_opts_t *o)
{
    (void)o;
    ffa_t *a = malloc(sizeof *a);
    if (a == NULL) return NULL;
    a->ff = firstfit_create(size);
    if (a->ff == NULL) {
        free(a);
        return NULL;
    }
    a->base = base;
    a->size = size;
    return a;
}

static void ffa_destroy(void *p)
{
    ffa_t *a = p;
    firstfit_destroy(a->ff);
    free(a);
}

static int ffa_alloc(void *p, size_t requested, size_t granted, uintptr_t *out)
{
    ffa_t *a = p;
    size_t off;
    (void)requested;
    if (firstfit_alloc(a->ff, granted, &off) != 0) return -1;
    *out = a->base + off;
    return 0;
}

static int ffa_free(void *p, uintptr_t addr)
{
    ffa_t *a = p;
    return firstfit_free(a->ff, (size_t)(addr - a->base));
}

static void ffa_stats(void *p, uint64_t *allocated, uint64_t *free_bytes, uint64_t *largest)
{
    ffa_t *a = p;
    *free_bytes = firstfit_free_bytes(a->ff);
    *allocated = a->size - *free_bytes;
    *largest = firstfit_largest_free(a->ff);
}

const replay_allocator_t replay_firstfit_allocator = {
    .name = "firstfit",
    .align = FIRSTFIT_ALIGN, /* the seed rounds every size up to 32 bytes */
    .create = ffa_create,
    .destroy = ffa_destroy,
    .alloc = ffa_alloc,
    .free = ffa_free,
    .stats = ffa_stats,
    .check = NULL,
    .backing = NULL,
};
