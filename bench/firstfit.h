/* bench/firstfit.h — the seed document's first-fit pool, as a baseline for the benchmarks.
 *
 * Owns: a C rendering of the behaviour the seed describes (not of its code): one list of free
 * (offset, size) spans in insertion order; alloc rounds the size up to 32 bytes, scans the list
 * from the front for the first span that is large enough, removes it from the list (shifting
 * the rest down, as a Python list.pop(i) does), appends the remainder at the end; free appends
 * the span at the end without merging; only when a scan fails is the list sorted by offset and
 * adjacent spans merged, then the scan is retried once.  Live blocks are found through a hash
 * map from offset.  Cost: alloc O(list length) (plus O(n log n) on a failure), free O(1).
 * Not thread-safe.
 */
#ifndef NPUPOOL_BENCH_FIRSTFIT_H
#define NPUPOOL_BENCH_FIRSTFIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct ff_pool ff_pool_t;

ff_pool_t *ff_create(size_t pool_size);
void ff_destroy(ff_pool_t *p);
/* 0 and *off on success, -1 when no span fits even after merging. */
int ff_alloc(ff_pool_t *p, size_t size, size_t *off);
/* 0 on success, -1 for an offset that is not a live block (ignored, as the seed does). */
int ff_free(ff_pool_t *p, size_t off);
size_t ff_free_bytes(const ff_pool_t *p);
size_t ff_list_len(const ff_pool_t *p);
/* Largest span as the list holds it (the seed's own stats() view). */
size_t ff_largest_listed(const ff_pool_t *p);
/* Largest physically contiguous free range (adjacent listed spans counted as one); O(n log n),
 * does not change the pool. */
size_t ff_largest_physical(ff_pool_t *p);
uint64_t ff_merges(const ff_pool_t *p);

#endif /* NPUPOOL_BENCH_FIRSTFIT_H */
