/* bench/peers/peer_tlsf.c — "tlsf": two-level segregated fit after Masmano, Ripoll, Crespo and
 * Real, "TLSF: a new dynamic memory allocator for real-time systems" (ECRTS 2004), written for
 * this bench from that description; it is not mattconte's implementation.
 *
 * Classes: sizes count in granules u (PEER_GRAN = 64 B).  A FREE block of u granules is listed
 * under (fl, sl): u < 2^SL_LOG2 -> fl = 0, sl = u (exact classes); above, fl = msb(u) - SL_LOG2
 * + 1 and sl = the SL_LOG2 bits below the most significant one (32 classes per power of two,
 * each 1/32 of it wide).  fl_bitmap bit f <=> sl_bitmap[f] != 0; sl_bitmap[f] bit s <=> list
 * (f, s) is not empty.
 * alloc (O(1)): good fit.  The request is rounded up to the next class boundary, so that every
 *   block of the first non-empty class at or above it is large enough; that class is found
 *   with two find-first-set steps; its head block is taken, the rest above the request (if
 *   any) is split off and listed.  Consequence of good fit: a request can be refused while
 *   its own class holds a block that would have fitted (TLSF trades that for the O(1) bound).
 * free (O(1)): the block is found in the live map (an in-memory TLSF finds its header just
 *   below the pointer), merged at once with FREE address neighbours, listed at its class head.
 * Metadata: host descriptors and the live map of pblock.h: boundary tags cannot be written
 * into device memory.
 */
#include <stdlib.h>

#include "pblock.h"
#include "peer.h"

#define SL_LOG2 5u
#define SL_COUNT (1u << SL_LOG2) /* second-level classes per power of two */
#define FL_COUNT 56u             /* covers every granule count of a size_t */

typedef struct tlsf_peer {
    pblock_heap_t h;                    /* first: the tiling (pblock.h) */
    uint64_t fl_bitmap;                 /* bit f: sl_bitmap[f] != 0 */
    uint32_t sl_bitmap[FL_COUNT];       /* bit s of [f]: head[f][s] != NULL */
    pblock_t *head[FL_COUNT][SL_COUNT]; /* FREE blocks of each class, LIFO */
} tlsf_peer_t;

static inline unsigned msb(size_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* Class of u granules, as key = fl * SL_COUNT + sl. */
static inline uint32_t class_of_units(size_t u)
{
    if (u < SL_COUNT) return (uint32_t)u;
    unsigned m = msb(u);
    return (m - SL_LOG2 + 1) * SL_COUNT + (uint32_t)(u >> (m - SL_LOG2)) - SL_COUNT;
}

static uint32_t class_of_size(size_t size) { return class_of_units(size / PEER_GRAN); }

static void index_insert(void *index, pblock_t *b)
{
    tlsf_peer_t *t = index;
    uint32_t key = class_of_units(b->size / PEER_GRAN);
    unsigned fl = key / SL_COUNT, sl = key % SL_COUNT;
    b->key = key;
    pblock_list_push(&t->head[fl][sl], b);
    t->fl_bitmap |= 1ull << fl;
    t->sl_bitmap[fl] |= 1u << sl;
}

static void index_remove(void *index, pblock_t *b)
{
    tlsf_peer_t *t = index;
    unsigned fl = b->key / SL_COUNT, sl = b->key % SL_COUNT;
    pblock_list_remove(&t->head[fl][sl], b);
    if (!t->head[fl][sl]) {
        t->sl_bitmap[fl] &= ~(1u << sl);
        if (!t->sl_bitmap[fl]) t->fl_bitmap &= ~(1ull << fl);
    }
}

/* The head of the first non-empty class at or above `key`, or NULL: a class of the same
 * power of two from sl_bitmap[fl], else the lowest class of the next non-empty one. */
static inline pblock_t *find_at_or_above(const tlsf_peer_t *t, uint32_t key)
{
    unsigned fl = key / SL_COUNT;
    uint32_t same = t->sl_bitmap[fl] >> (key % SL_COUNT) << (key % SL_COUNT);
    if (same) return t->head[fl][__builtin_ctz(same)];
    uint64_t above = t->fl_bitmap & (~1ull << fl); /* fl < FL_COUNT < 64 */
    if (!above) return NULL;
    fl = (unsigned)__builtin_ctzll(above);
    return t->head[fl][__builtin_ctz(t->sl_bitmap[fl])];
}

static int tlsf_alloc(void *peer, size_t size, uintptr_t *out)
{
    tlsf_peer_t *t = peer;
    size_t need = pblock_round(size);
    if (need == 0 || need > t->h.range || pblock_reserve(&t->h) != 0) return -1;
    size_t u = need / PEER_GRAN;
    if (u >= SL_COUNT) u += ((size_t)1 << (msb(u) - SL_LOG2)) - 1; /* up to the next class */
    uint32_t key = class_of_units(u);
    if (key >= FL_COUNT * SL_COUNT) return -1;
    pblock_t *b = find_at_or_above(t, key);
    if (!b) return -1;
    *out = pblock_hand_out(&t->h, b, need, index_remove, index_insert, t);
    return 0;
}

static int tlsf_free(void *peer, uintptr_t at)
{
    return pblock_take_back(peer, at, index_remove, index_insert, peer);
}

static void index_check(void *index, pblock_checker_t *c)
{
    tlsf_peer_t *t = index;
    for (unsigned fl = 0; fl < FL_COUNT; fl++) {
        if (!!(t->fl_bitmap >> fl & 1) != !!t->sl_bitmap[fl])
            pblock_violation(c, "fl_bitmap bit %u disagrees with sl_bitmap[%u]", fl, fl);
        for (unsigned sl = 0; sl < SL_COUNT; sl++) {
            if (!!(t->sl_bitmap[fl] >> sl & 1) != !!t->head[fl][sl])
                pblock_violation(c, "sl_bitmap[%u] bit %u disagrees with its list", fl, sl);
            pblock_list_check(c, t->head[fl][sl], fl * SL_COUNT + sl, class_of_size);
        }
    }
}

static int tlsf_check(void *peer, peer_stats_t *st, char *why, size_t why_len)
{
    return pblock_check(peer, index_check, peer, st, why, why_len);
}

static void *tlsf_create(size_t range)
{
    return pblock_peer_create(sizeof(tlsf_peer_t), range, index_insert);
}

const peer_ops_t peer_tlsf = {
    .name = "tlsf",
    .about = "tlsf (two-level segregated fit after Masmano et al. 2004, written for this bench; "
             "SL_LOG2 5, good fit, immediate coalescing, host metadata)",
    .arena = 1,
    .create = tlsf_create,
    .destroy = pblock_peer_destroy,
    .alloc = tlsf_alloc,
    .free = tlsf_free,
    .block_size = pblock_peer_block_size,
    .check = tlsf_check,
};
