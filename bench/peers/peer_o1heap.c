/* bench/peers/peer_o1heap.c — "o1heap": power-of-two segregated free lists with constant-time
 * alloc and free, after the design Pavel Kirienko published for o1heap (its README and
 * design notes); written for this bench, it is not o1heap's code.
 *
 * Bins: a FREE block of u granules (PEER_GRAN = 64 B) is listed in bin msb(u), so bin i holds
 * blocks of [2^i, 2^(i+1)) granules; `nonempty` bit i <=> bin i is not empty.
 * alloc (O(1)): the request is rounded up to a power of two, 2^k granules (o1heap rounds every
 *   fragment to a power of two: that is what makes one find-first-set enough); every block in
 *   bins k and above is large enough, so the lowest non-empty bin >= k is taken from
 *   nonempty & ~(2^k - 1) and its head block used.  The part above 2^k granules (any size, a
 *   multiple of the granule) is split off and binned by its own size.
 * free (O(1)): the block is found in the live map (o1heap keeps a header in front of each
 *   fragment; device memory cannot hold one), merged at once with FREE address neighbours and
 *   pushed on the head of its bin.
 * Waste: up to half of a block (power-of-two rounding), the price of the O(1) search.
 * Metadata: host descriptors and the live map of pblock.h.
 */
#include <stdlib.h>

#include "pblock.h"
#include "peer.h"

#define NBINS 64u /* bin i: blocks of [2^i, 2^(i+1)) granules */

typedef struct o1heap_peer {
    pblock_heap_t h;      /* first: the tiling (pblock.h) */
    uint64_t nonempty;    /* bit i: bin[i] != NULL */
    pblock_t *bin[NBINS]; /* FREE blocks of each bin, LIFO */
} o1heap_peer_t;

static inline unsigned msb(size_t x) { return 63u - (unsigned)__builtin_clzll(x); }

static uint32_t bin_of_size(size_t size) { return msb(size / PEER_GRAN); }

static void index_insert(void *index, pblock_t *b)
{
    o1heap_peer_t *o = index;
    b->key = bin_of_size(b->size);
    pblock_list_push(&o->bin[b->key], b);
    o->nonempty |= 1ull << b->key;
}

static void index_remove(void *index, pblock_t *b)
{
    o1heap_peer_t *o = index;
    pblock_list_remove(&o->bin[b->key], b);
    if (!o->bin[b->key]) o->nonempty &= ~(1ull << b->key);
}

static int o1heap_alloc(void *peer, size_t size, uintptr_t *out)
{
    o1heap_peer_t *o = peer;
    size_t units = pblock_round(size) / PEER_GRAN;
    if (units == 0 || units > o->h.range / PEER_GRAN || pblock_reserve(&o->h) != 0) return -1;
    unsigned k = units == 1 ? 0 : msb(units - 1) + 1; /* 2^k >= units */
    uint64_t candidates = k < 64 ? o->nonempty & (~0ull << k) : 0;
    if (!candidates) return -1;
    pblock_t *b = o->bin[__builtin_ctzll(candidates)];
    *out = pblock_hand_out(&o->h, b, (size_t)PEER_GRAN << k, index_remove, index_insert, o);
    return 0;
}

static int o1heap_free(void *peer, uintptr_t at)
{
    return pblock_take_back(peer, at, index_remove, index_insert, peer);
}

static void index_check(void *index, pblock_checker_t *c)
{
    o1heap_peer_t *o = index;
    for (unsigned i = 0; i < NBINS; i++) {
        if (!!(o->nonempty >> i & 1) != !!o->bin[i])
            pblock_violation(c, "nonempty bit %u disagrees with bin %u", i, i);
        pblock_list_check(c, o->bin[i], i, bin_of_size);
    }
}

static int o1heap_check(void *peer, peer_stats_t *st, char *why, size_t why_len)
{
    return pblock_check(peer, index_check, peer, st, why, why_len);
}

static void *o1heap_create(size_t range)
{
    return pblock_peer_create(sizeof(o1heap_peer_t), range, index_insert);
}

const peer_ops_t peer_o1heap = {
    .name = "o1heap",
    .about = "o1heap-style (power-of-two segregated free lists, O(1), after Kirienko's o1heap "
             "design, written for this bench; host metadata)",
    .arena = 1,
    .create = o1heap_create,
    .destroy = pblock_peer_destroy,
    .alloc = o1heap_alloc,
    .free = o1heap_free,
    .block_size = pblock_peer_block_size,
    .check = o1heap_check,
};
