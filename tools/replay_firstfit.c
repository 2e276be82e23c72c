/* tools/replay_firstfit.c — the first-fit baseline (bench/firstfit.c) behind replay's allocator
 * table, for `npupool replay --allocator firstfit` and the comparison table in docs/tools.md.
 * Built with -DHAVE_FIRSTFIT when bench/firstfit.c exists (tools/tools.mk); otherwise this build
 * has no baseline and replay says so.  The baseline works in offsets; addresses are base + offset.
 */
#include "replay.h"

#ifdef HAVE_FIRSTFIT
#include "firstfit.h"

#include <stdlib.h>

typedef struct ffa {
    ff_pool_t *ff;  /* the baseline pool */
    uintptr_t base; /* made-up start address */
    size_t size;    /* pool bytes */
} ffa_t;

static void *ffa_create(uintptr_t base, size_t size)
{
    ffa_t *a = malloc(sizeof *a);
    if (a == NULL) return NULL;
    a->ff = ff_create(size);
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
    ff_destroy(a->ff);
    free(a);
}

static int ffa_alloc(void *p, size_t requested, size_t granted, uintptr_t *out)
{
    ffa_t *a = p;
    size_t off;
    (void)requested;
    if (ff_alloc(a->ff, granted, &off) != 0) return -1;
    *out = a->base + off;
    return 0;
}

static int ffa_free(void *p, uintptr_t addr)
{
    ffa_t *a = p;
    return ff_free(a->ff, (size_t)(addr - a->base));
}

static void ffa_stats(void *p, uint64_t *allocated, uint64_t *free_bytes, uint64_t *largest)
{
    ffa_t *a = p;
    *free_bytes = ff_free_bytes(a->ff);
    *allocated = a->size - *free_bytes;
    *largest = ff_largest_physical(a->ff);
}

static const replay_allocator_t firstfit = {
    .name = "firstfit",
    .align = 32, /* the seed rounds every size up to 32 bytes */
    .create = ffa_create,
    .destroy = ffa_destroy,
    .alloc = ffa_alloc,
    .free = ffa_free,
    .stats = ffa_stats,
    .check = NULL,
};
const replay_allocator_t *const replay_firstfit_allocator = &firstfit;
#else
const replay_allocator_t *const replay_firstfit_allocator = NULL;
#endif
