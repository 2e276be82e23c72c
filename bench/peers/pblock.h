/* bench/peers/pblock.h — the host-side block tiling the arena peers share (pblock.c).
 *
 * Owns: the metadata that an in-memory allocator keeps in boundary tags, kept on the host
 * instead, because the managed range is device memory that must not be touched:
 *   - one descriptor (pblock_t, 64 bytes) per block; the blocks tile [0, range) exactly and are
 *     doubly linked in address order (prev/next): the "previous physical block" pointer and
 *     the "next block = this + size" arithmetic of a boundary-tag heap become two pointers;
 *   - a hash map (base/addrmap) from the offset of each LIVE block to its descriptor: where an
 *     in-memory heap finds the header just below the pointer being freed, this finds it with
 *     one expected-O(1) lookup (the same map npupool's pool uses, so the comparison is fair);
 *   - descriptor storage: chunks of PBLOCK_CHUNK descriptors, never returned before destroy,
 *     unused ones on a free list, so steady state calls no malloc.
 * Each peer keeps its own index of the FREE blocks (segregated lists, a tree) in the link[] and
 * key fields; this file never reads them except through the callbacks it is given.
 * Invariants (pblock_check): the blocks tile [0, range) in order; no two FREE blocks touch;
 * the live map holds exactly the LIVE blocks; the index holds exactly the FREE blocks.
 * Hot operations (split, join, coalesce, the live map) are inline here: every peer's alloc
 * and free runs them, and an index callback passed as a constant is inlined at the call.
 */
#ifndef NPUPOOL_BENCH_PBLOCK_H
#define NPUPOOL_BENCH_PBLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "addrmap.h"
#include "peer.h"

#define PBLOCK_CHUNK 1024u /* descriptors per storage chunk (64 KiB) */

typedef struct pblock pblock_t;
struct pblock {
    size_t off;        /* first byte, offset from the range start; a multiple of PEER_GRAN */
    size_t size;       /* bytes, a multiple of PEER_GRAN, > 0 */
    pblock_t *prev;    /* address neighbour below, NULL for the block at offset 0 */
    pblock_t *next;    /* address neighbour above, NULL for the last block */
    pblock_t *link[3]; /* FREE: the peer's index (list prev/next, tree children); UNUSED:
                            link[0] is the next spare descriptor */
    uint32_t key;      /* FREE: the peer's index key (list number, tree priority) */
    uint8_t free;      /* 1: FREE (in the index), 0: LIVE (in the live map) */
    uint8_t mark;      /* pblock_check's scratch, 0 outside it */
    uint8_t pad[2];    /* unused */
};
_Static_assert(sizeof(pblock_t) == 64, "one descriptor, one cache line");

typedef struct pblock_heap {
    size_t range;       /* bytes managed: [0, range), a multiple of PEER_GRAN */
    pblock_t *first;    /* the block at offset 0 */
    addrmap_t live;     /* offset -> pblock_t * of every LIVE block */
    pblock_t *spare;    /* unused descriptors (through link[0]) */
    void **chunks;      /* descriptor storage chunks, freed by pblock_heap_destroy */
    size_t nchunks;     /* chunks in use */
    size_t chunks_cap;  /* entries of `chunks` */
    size_t live_blocks; /* LIVE blocks */
} pblock_heap_t;

/* Set up h over [0, range rounded down to PEER_GRAN) as one FREE block, returned (not yet in
 * any index); NULL when range < PEER_GRAN or on host out of memory (h is then empty). */
pblock_t *pblock_heap_init(pblock_heap_t *h, size_t range);
void pblock_heap_destroy(pblock_heap_t *h);

/* Add a chunk of spare descriptors.  0, or -1 on host out of memory. */
int pblock_grow(pblock_heap_t *h);

/* Make sure one spare descriptor and one live-map entry are available, so that the next
 * split and pblock_set_live cannot fail.  0, or -1 on host out of memory. */
static inline int pblock_reserve(pblock_heap_t *h)
{
    if (!h->spare && pblock_grow(h) != 0) return -1;
    return addrmap_reserve(&h->live, 1);
}

/* The peers' common entry points.  A peer's struct starts with its pblock_heap_t, so the peer
 * pointer is the heap pointer.  create: calloc(peer_bytes), set up the heap over [0, range)
 * and hand the one FREE block to `index` (the peer's list or tree insert); NULL on bad range
 * or host out of memory. */
typedef void (*pblock_index_fn)(void *index, pblock_t *b);
void *pblock_peer_create(size_t peer_bytes, size_t range, pblock_index_fn index);
void pblock_peer_destroy(void *peer);
size_t pblock_peer_block_size(void *peer, uintptr_t at);

/* One index's self-check: walk the index, report what is wrong with it (keys, bitmaps, order)
 * through pblock_violation, and call pblock_note_indexed for each block found. */
typedef struct pblock_checker pblock_checker_t;
typedef void (*pblock_index_check_fn)(void *index, pblock_checker_t *c);
/* Record that the index holds b; returns 1 (a violation, described) when b is not FREE, is
 * not a block of the tiling, or was already recorded. */
int pblock_note_indexed(pblock_checker_t *c, const pblock_t *b);
/* Report a violation found by an index check (printf format); returns 1. */
int pblock_violation(pblock_checker_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Walk the tiling and the live map, run the index's check, and compare: returns the number of
 * violations, the first described in why; fills *st (if non-NULL). */
int pblock_check(pblock_heap_t *h, pblock_index_check_fn index_check, void *index, peer_stats_t *st,
                 char *why, size_t why_len);

/* ---- hot operations ------------------------------------------------------------------------ */
/* pre: pblock_reserve succeeded since the last descriptor was taken. */
static inline pblock_t *pblock_take_spare(pblock_heap_t *h)
{
    pblock_t *b = h->spare;
    h->spare = b->link[0];
    return b;
}

static inline void pblock_put_spare(pblock_heap_t *h, pblock_t *b)
{
    b->link[0] = h->spare;
    h->spare = b;
}

/* Cut b to `size` bytes; the rest above becomes a new FREE block (not in any index), which is
 * returned.  pre: b->size > size > 0, both multiples of PEER_GRAN, pblock_reserve done. */
static inline pblock_t *pblock_split(pblock_heap_t *h, pblock_t *b, size_t size)
{
    pblock_t *r = pblock_take_spare(h);
    r->off = b->off + size;
    r->size = b->size - size;
    r->prev = b;
    r->next = b->next;
    r->free = 1;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    return r;
}

/* Absorb hi (the block just above lo) into lo; hi's descriptor goes back to storage. */
static inline void pblock_join(pblock_heap_t *h, pblock_t *lo, pblock_t *hi)
{
    lo->size += hi->size;
    lo->next = hi->next;
    if (hi->next) hi->next->prev = lo;
    pblock_put_spare(h, hi);
}

/* b was LIVE and is now free: merge it with its FREE address neighbours (taking them out of
 * the index first) and return the merged block, FREE and not in the index. */
static inline pblock_t *pblock_coalesce(pblock_heap_t *h, pblock_t *b, pblock_index_fn unindex,
                                        void *index)
{
    b->free = 1;
    if (b->prev && b->prev->free) {
        pblock_t *lo = b->prev;
        unindex(index, lo);
        pblock_join(h, lo, b);
        b = lo;
    }
    if (b->next && b->next->free) {
        unindex(index, b->next);
        pblock_join(h, b, b->next);
    }
    return b;
}

/* Enter b (just cut from a FREE block) in the live map.  pre: pblock_reserve done. */
static inline void pblock_set_live(pblock_heap_t *h, pblock_t *b)
{
    b->free = 0;
    addrmap_put_new(&h->live, b->off, (uint64_t)(uintptr_t)b);
    h->live_blocks++;
}

/* The LIVE block at `off`, taken out of the live map, or NULL when there is none. */
static inline pblock_t *pblock_take_live(pblock_heap_t *h, size_t off)
{
    uint64_t v;
    if (!addrmap_del(&h->live, off, &v)) return NULL;
    h->live_blocks--;
    return (pblock_t *)(uintptr_t)v;
}

/* Size of the LIVE block at `off`, 0 when there is none. */
static inline size_t pblock_live_size(const pblock_heap_t *h, size_t off)
{
    uint64_t v;
    return addrmap_get(&h->live, off, &v) ? ((const pblock_t *)(uintptr_t)v)->size : 0;
}

/* The end of every peer's alloc: b is the FREE block its index chose for `need` bytes
 * (b->size >= need).  Takes b out of the index, splits off and indexes the rest, enters b in
 * the live map; returns b's offset.  pre: pblock_reserve done. */
static inline uintptr_t pblock_hand_out(pblock_heap_t *h, pblock_t *b, size_t need,
                                        pblock_index_fn unindex, pblock_index_fn index, void *ix)
{
    unindex(ix, b);
    if (b->size > need) index(ix, pblock_split(h, b, need));
    pblock_set_live(h, b);
    return b->off;
}

/* Every peer's free: the LIVE block at `at` leaves the live map, is merged with its FREE
 * neighbours and indexed.  0, or -1 (nothing changed) when `at` is not a LIVE block. */
static inline int pblock_take_back(pblock_heap_t *h, uintptr_t at, pblock_index_fn unindex,
                                   pblock_index_fn index, void *ix)
{
    pblock_t *b = pblock_take_live(h, at);
    if (!b) return -1;
    index(ix, pblock_coalesce(h, b, unindex, ix));
    return 0;
}

/* A request rounded up to whole granules; 0 when it would overflow. */
static inline size_t pblock_round(size_t size)
{
    return size > SIZE_MAX - (PEER_GRAN - 1) ? 0
                                             : (size + PEER_GRAN - 1) & ~(size_t)(PEER_GRAN - 1);
}

/* Doubly linked LIFO list through link[0] (prev) and link[1] (next): the segregated lists of
 * the TLSF and o1heap peers. */
static inline void pblock_list_push(pblock_t **head, pblock_t *b)
{
    b->link[0] = NULL;
    b->link[1] = *head;
    if (*head) (*head)->link[0] = b;
    *head = b;
}

static inline void pblock_list_remove(pblock_t **head, pblock_t *b)
{
    if (b->link[0])
        b->link[0]->link[1] = b->link[1];
    else
        *head = b->link[1];
    if (b->link[1]) b->link[1]->link[0] = b->link[0];
}

/* Check one list: back links, keys (every block carries want_key, and key_of(its size) is
 * want_key), and each block through pblock_note_indexed.  Returns violations. */
int pblock_list_check(pblock_checker_t *c, const pblock_t *head, uint32_t want_key,
                      uint32_t (*key_of)(size_t size));

#endif /* NPUPOOL_BENCH_PBLOCK_H */
