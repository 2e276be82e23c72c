/* pool/tlsf.c — one TLSF heap: class lists, bitmaps, split and coalesce of desc_t blocks (find,
 * insert and remove are static inline in tlsf.h, which says why).
 *
 * Algorithm: two-level segregated fit (Masmano et al., "TLSF: a new dynamic memory allocator
 * for real-time systems", ECRTS 2004).  Sizes are counted in 64-byte units u.  Units below 32
 * map to first level 0, one class per unit (exact); larger u map to first level
 * fl = log2(u) - 4 and second level sl = the next 5 bits, i.e. 32 classes per power of two,
 * each class [lo, lo + lo/32) wide.  fl_bitmap has bit fl set iff sl_bitmap[fl] != 0;
 * sl_bitmap[fl] has bit sl set iff head[fl][sl] != NULL.
 *
 * tlsf_find(size):
 *   1. the best fit among the first TLSF_FIT_SCAN blocks of size's own class (reuses an
 *      exact-size hole);
 *   2. good fit: round size up to the next class boundary so that every block of the class
 *      found fits, then the first non-empty class at or above it via two find-first-set, and
 *      the best fit among the first TLSF_FIT_SCAN blocks of its list;
 *   3. on a miss, the rest of size's own class list (after the blocks step 1 scanned), to
 *      its end.
 * Steps 1 and 2 are O(1) (TLSF_FIT_SCAN blocks at most).  Step 3 runs only when no class
 * above size's own one holds a block, i.e. for a request within 1/32 of the largest free
 * blocks; it makes the search exact (NULL only when no listed block is large enough), which
 * is what lets a request for exactly the whole free range succeed and what the refusal
 * classifier (pool_stats.c) relies on: a request is refused iff no free run is large enough.  (It used to stop after 8 entries,
 * which could refuse a request while a block up to ~3 % larger sat further down the list.)
 * Its length is the number of free blocks in that one class, all within 1/32 of each other.
 * Split returns the remainder (>= 64 bytes by granularity) to the lists; coalesce merges a
 * freed block with its FREE physical neighbours at once, so no two FREE blocks are ever
 * physical neighbours.  Both are O(1).
 *
 * Invariants (checked by pool_check): bitmaps <=> non-empty lists; every listed block is in
 * the heap's state and sits in the list of tlsf_mapping(size); free_bytes/free_blocks/bucket_*
 * (and whole_bytes) equal the sums over listed blocks; no two blocks of the heap's state are
 * physical neighbours.
 * Locking: caller holds pool->lock.
 */
#include <string.h>

#include "tlsf.h"

void tlsf_init(tlsf_t *h, enum desc_state state, unsigned chunk_shift)
{
    memset(h, 0, sizeof *h);
    h->state = (uint32_t)state;
    h->chunk_shift = chunk_shift;
}

desc_t *tlsf_split(tlsf_t *h, desc_store_t *s, desc_t *b, size_t size, int from_top)
{
    debug_assert_internal(size > 0 && size % POOL_ALIGN == 0 && b->size >= size);
    debug_assert_internal(b->free_prev == NULL && b->free_next == NULL);
    debug_assert_expensive(!tlsf_is_listed(h, b));
    if (b->size == size) return b;
    desc_t *r = desc_get(s);
    r->state = h->state;
    r->phys_prev = b;
    r->phys_next = b->phys_next;
    if (r->phys_next) r->phys_next->phys_prev = r;
    b->phys_next = r;
    if (!from_top) {
        r->addr = b->addr + size;
        r->size = b->size - size;
        b->size = size;
        tlsf_insert(h, r);
        return b;
    }
    r->addr = b->addr + b->size - size;
    r->size = size;
    r->state = b->state;
    b->size -= size;
    b->state = h->state;
    tlsf_insert(h, b);
    return r;
}

desc_t *tlsf_coalesce(tlsf_t *h, desc_store_t *s, desc_t *b)
{
    debug_assert_internal(b->state != h->state && b->state != DESC_UNUSED);
    debug_assert_internal(!b->phys_next || b->phys_next->phys_prev == b);
    debug_assert_internal(!b->phys_prev || b->phys_prev->phys_next == b);
    b->state = h->state;
    b->page = NULL;
    b->free_prev = b->free_next = NULL; /* they shared storage with granted/requested */
    desc_t *n = b->phys_next;
    if (n && n->state == h->state) {
        tlsf_remove(h, n);
        b->size += n->size;
        b->phys_next = n->phys_next;
        if (b->phys_next) b->phys_next->phys_prev = b;
        desc_put(s, n);
    }
    desc_t *p = b->phys_prev;
    if (p && p->state == h->state) {
        tlsf_remove(h, p);
        p->size += b->size;
        p->phys_next = b->phys_next;
        if (p->phys_next) p->phys_next->phys_prev = p;
        desc_put(s, b);
        b = p;
    }
    return b;
}

size_t tlsf_largest(const tlsf_t *h)
{
    if (!h->fl_bitmap) return 0;
    unsigned fl = tlsf_msb64(h->fl_bitmap);
    unsigned sl = 31u - (unsigned)__builtin_clz(h->sl_bitmap[fl]);
    size_t best = 0;
    for (const desc_t *b = h->head[fl][sl]; b; b = b->free_next)
        if (b->size > best) best = b->size;
    return best;
}
