/* pool/tlsf.c — the cold TLSF heap operations (the hot ones are inline in tlsf.h, whose
 * header describes the algorithm and its invariants).
 * Locking: caller holds pool->lock.
 */
#include <string.h>

#include "tlsf.h"

void pheap_init(pheap_t *h) { memset(h, 0, sizeof *h); }

size_t pheap_largest(const pheap_t *h)
{
    if (!h->fl_bitmap) return 0;
    unsigned fl = pheap_msb64(h->fl_bitmap);
    unsigned sl = 31u - (unsigned)__builtin_clz(h->sl_bitmap[fl]);
    size_t best = 0;
    for (const pblock_t *b = h->head[fl][sl]; b; b = b->free_next)
        if (b->size > best) best = b->size;
    return best;
}
