/* pool/bucket.h — the user-facing size buckets of the statistics (after the seed's 1K/16K/256K
 * split): which bucket a size falls in, in O(1).
 *
 * Owns: BUCKET_LIMITS (inclusive upper bounds 1 KiB, 16 KiB, 256 KiB, 1 MiB, 16 MiB, 256 MiB,
 * 1 GiB; bucket 7 is everything larger), from which pool_stats.c builds the public
 * pool_bucket_limit[], and bucket_of(), the lookup the heap, the slabs and the statistics use.
 * bucket_of goes through ceil(log2(size)), which works because every limit is a power of two
 * (test_pool checks that it agrees with pool_bucket_limit[] at every boundary).
 */
#ifndef NPUPOOL_BUCKET_H
#define NPUPOOL_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"

#define BUCKET_LIMITS                                                                            \
    {                                                                                            \
        (size_t)1 << 10, (size_t)16 << 10, (size_t)256 << 10, (size_t)1 << 20, (size_t)16 << 20, \
            (size_t)256 << 20, (size_t)1 << 30                                                   \
    }

/* 0..POOL_NBUCKETS-1: the first bucket whose limit is >= size. */
static inline int bucket_of(size_t size)
{
    /* bucket of a size whose ceil(log2) is the index: size <= 2^10 -> 0, <= 2^14 -> 1, ... */
    static const uint8_t by_log2[65] = {
        [0 ... 10] = 0,  [11 ... 14] = 1, [15 ... 18] = 2, [19 ... 20] = 3,
        [21 ... 24] = 4, [25 ... 28] = 5, [29 ... 30] = 6, [31 ... 64] = 7,
    };
    unsigned c = size <= 1 ? 0 : 64u - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
    return by_log2[c];
}

#endif /* NPUPOOL_BUCKET_H */
