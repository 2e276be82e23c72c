/* tools/firstfit.h — the seed document's first-fit pool: the baseline `npupool replay --allocator
 * firstfit` and the benchmarks compare npupool's pool with.
 *
 * Owns: a C rendering of the behaviour the seed describes (not of its code): one list of free
 * (offset, size) spans in insertion order; alloc rounds the size up to 32 bytes, scans the list
 * from the front for the first span that is large enough, removes it from the list (shifting
 * the rest down, as a Python list.pop(i) does), appends the remainder at the end; free appends
 * the span at the end without merging; only when a scan fails is the list sorted by offset and
 * adjacent spans merged, then the scan is retried once.  Live blocks are found through a hash
 * map from offset (base/addrmap).  Cost: alloc O(list length) (plus O(n log n) on a failure),
 * free O(1).  Works in offsets from the pool start.  Not thread-safe.
 */
#ifndef NPUPOOL_TOOLS_FIRSTFIT_H
#define NPUPOOL_TOOLS_FIRSTFIT_H

#include <stddef.h>
#include <stdint.h>

#define FIRSTFIT_ALIGN 32 /* every size is rounded up to this many bytes */

typedef struct firstfit firstfit_t;

firstfit_t *firstfit_create(size_t pool_size); /* NULL on host OOM */
void firstfit_destroy(firstfit_t *p);
/* 0 and *off on success, -1 when no span fits even after merging. */
int firstfit_alloc(firstfit_t *p, size_t size, size_t *off);
/* 0 on success, -1 for an offset that is not a live block (ignored, as the seed does). */
int firstfit_free(firstfit_t *p, size_t off);
size_t firstfit_free_bytes(const firstfit_t *p);
/* Largest physically contiguous free range (adjacent listed spans counted as one); O(n log n),
 * does not change the pool. */
size_t firstfit_largest_free(firstfit_t *p);

#endif /* NPUPOOL_TOOLS_FIRSTFIT_H */
