/* pool/tlsf.h — one TLSF heap: class lists, bitmaps, split and coalesce of pblock_t.
 *
 * The operations are static inline (they run several times per alloc/free; pool.c is the
 * only hot caller); tlsf.c holds the cold ones (init, largest).
 *
 * Algorithm: two-level segregated fit (Masmano et al., "TLSF: a new dynamic memory allocator
 * for real-time systems", ECRTS 2004).  Sizes are counted in 64-byte units u.  Units below 32
 * map to first level 0, one class per unit (exact); larger u map to first level
 * fl = log2(u) - 4 and second level sl = the next 5 bits, i.e. 32 classes per power of two,
 * each class [lo, lo + lo/32) wide.  fl_bitmap has bit fl set iff sl_bitmap[fl] != 0;
 * sl_bitmap[fl] has bit sl set iff head[fl][sl] != NULL.
 *
 * pheap_find(size), every step O(1) and independent of the number of blocks:
 *   1. the head of size's own class, if it is large enough (reuses an exact-size hole);
 *   2. good fit: round size up to the next class boundary so that every block of the class
 *      found fits, then the first non-empty class at or above it via two find-first-set;
 *   3. on a miss, probe at most PL_PROBE blocks of size's own class (this is what lets a
 *      request for exactly the whole free range succeed).
 * A miss is therefore possible only when no block >= size exists, or when every block that
 * fits sits in size's own class beyond the first PL_PROBE entries (a class spans 1/32 of a
 * power of two, so such a block is at most ~3% larger than the request).
 * Split returns the remainder (>= 64 bytes by granularity) to the lists; coalesce merges a
 * freed block with its FREE physical neighbours at once, so no two FREE blocks are ever
 * physical neighbours.  Both are O(1).
 *
 * Invariants (checked by pool_check): bitmaps <=> non-empty lists; every listed block is FREE
 * and sits in the list of pheap_mapping(size); free_bytes/free_blocks/bucket_* equal the sums
 * over listed blocks.
 * Locking: caller holds pool->lock.
 */
#ifndef NPUPOOL_TLSF_H
#define NPUPOOL_TLSF_H

#include "pool_internal.h"

static inline unsigned pheap_msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

static inline void pheap_mapping_units(size_t u, unsigned *fl, unsigned *sl)
{
    if (u < PH_SL_COUNT) {
        *fl = 0;
        *sl = (unsigned)u;
    } else {
        unsigned m = pheap_msb64(u);
        *fl = m - PH_SL_LOG2 + 1;
        *sl = (unsigned)(u >> (m - PH_SL_LOG2)) - PH_SL_COUNT;
    }
}

static inline void pheap_mapping(size_t size, unsigned *fl, unsigned *sl)
{
    pheap_mapping_units(size >> PL_GRAN_SHIFT, fl, sl);
}

static inline void pheap_insert(pheap_t *h, pblock_t *b)
{
    unsigned fl, sl;
    pheap_mapping(b->size, &fl, &sl);
    pblock_t *head = h->head[fl][sl];
    b->free_prev = NULL;
    b->free_next = head;
    if (head) head->free_prev = b;
    h->head[fl][sl] = b;
    h->sl_bitmap[fl] |= 1u << sl;
    h->fl_bitmap |= 1ull << fl;
    h->free_bytes += b->size;
    h->free_blocks++;
    int k = pl_bucket_of(b->size);
    h->bucket_free_blocks[k]++;
    h->bucket_free_bytes[k] += b->size;
}

static inline void pheap_remove(pheap_t *h, pblock_t *b)
{
    unsigned fl, sl;
    pheap_mapping(b->size, &fl, &sl);
    if (b->free_prev)
        b->free_prev->free_next = b->free_next;
    else
        h->head[fl][sl] = b->free_next;
    if (b->free_next) b->free_next->free_prev = b->free_prev;
    if (!h->head[fl][sl]) {
        h->sl_bitmap[fl] &= ~(1u << sl);
        if (!h->sl_bitmap[fl]) h->fl_bitmap &= ~(1ull << fl);
    }
    b->free_prev = b->free_next = NULL;
    h->free_bytes -= b->size;
    h->free_blocks--;
    int k = pl_bucket_of(b->size);
    h->bucket_free_blocks[k]--;
    h->bucket_free_bytes[k] -= b->size;
}

/* First block of the first non-empty class at or above (fl, sl). */
static inline pblock_t *pheap_find_suitable(const pheap_t *h, unsigned fl, unsigned sl)
{
    uint32_t slm = h->sl_bitmap[fl] & (~0u << sl);
    if (!slm) {
        uint64_t flm = fl + 1 < 64 ? h->fl_bitmap & (~0ull << (fl + 1)) : 0;
        if (!flm) return NULL;
        fl = (unsigned)__builtin_ctzll(flm);
        slm = h->sl_bitmap[fl];
    }
    return h->head[fl][(unsigned)__builtin_ctz(slm)];
}

static inline pblock_t *pheap_find(const pheap_t *h, size_t size)
{
    size_t u = size >> PL_GRAN_SHIFT;
    unsigned f0, s0;
    pheap_mapping_units(u, &f0, &s0);
    pblock_t *own = h->head[f0][s0];
    if (own && own->size >= size) return own; /* step 1 */
    size_t ur = u;
    if (u >= PH_SL_COUNT) ur = u + ((size_t)1 << (pheap_msb64(u) - PH_SL_LOG2)) - 1;
    unsigned f, s;
    pheap_mapping_units(ur, &f, &s);
    if (f < PH_FL_COUNT) {
        pblock_t *b = pheap_find_suitable(h, f, s); /* step 2 */
        if (b) return b;
    }
    if (own) { /* step 3 */
        unsigned probes = 1;
        for (pblock_t *b = own->free_next; b && probes < PL_PROBE; b = b->free_next, probes++)
            if (b->size >= size) return b;
    }
    return NULL;
}

static inline pblock_t *pheap_split(pheap_t *h, pdesc_t *s, pblock_t *b, size_t size, int from_top)
{
    if (b->size == size) return b;
    pblock_t *r = pdesc_get(s);
    r->state = PB_FREE;
    r->phys_prev = b;
    r->phys_next = b->phys_next;
    if (r->phys_next) r->phys_next->phys_prev = r;
    b->phys_next = r;
    if (!from_top) {
        r->addr = b->addr + size;
        r->size = b->size - size;
        b->size = size;
        pheap_insert(h, r);
        return b;
    }
    r->addr = b->addr + b->size - size;
    r->size = size;
    b->size -= size;
    b->state = PB_FREE;
    pheap_insert(h, b);
    return r;
}

static inline pblock_t *pheap_coalesce(pheap_t *h, pdesc_t *s, pblock_t *b)
{
    b->state = PB_FREE;
    pblock_t *n = b->phys_next;
    if (n && n->state == PB_FREE) {
        pheap_remove(h, n);
        b->size += n->size;
        b->phys_next = n->phys_next;
        if (b->phys_next) b->phys_next->phys_prev = b;
        pdesc_put(s, n);
    }
    pblock_t *p = b->phys_prev;
    if (p && p->state == PB_FREE) {
        pheap_remove(h, p);
        p->size += b->size;
        p->phys_next = b->phys_next;
        if (p->phys_next) p->phys_next->phys_prev = p;
        pdesc_put(s, b);
        b = p;
    }
    return b;
}

#endif /* NPUPOOL_TLSF_H */
