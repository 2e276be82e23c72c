/* pool/desc.c — storage for block descriptors (pblock_t) of the large heap.
 *
 * Owns: every pblock_t of a pool.  Descriptors come in pages of PL_DESC_BLOCKS taken with
 * malloc and kept until pool_destroy; unused ones sit on a singly linked free list (through
 * free_next), so steady-state alloc/free never calls malloc: pool_alloc reserves the (at most
 * three) descriptors it may need before it changes anything, and a failure there is the only
 * host-OOM path.  Invariant: free_count == length of `free`; total == pages * PL_DESC_BLOCKS.
 * Locking: caller holds pool->lock.
 */
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

struct pdesc_page {
    pblock_t blocks[PL_DESC_BLOCKS]; /* descriptors, 64-byte aligned (first member) */
    pdesc_page_t *next;              /* next page of this storage */
};

void pdesc_init(pdesc_t *s) { memset(s, 0, sizeof *s); }

void pdesc_destroy(pdesc_t *s)
{
    pdesc_page_t *p = s->pages;
    while (p) {
        pdesc_page_t *next = p->next;
        free(p);
        p = next;
    }
    memset(s, 0, sizeof *s);
}

int pdesc_grow(pdesc_t *s, size_t n)
{
    while (s->free_count < n) {
        pdesc_page_t *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
        if (!p) return -1;
        p->next = s->pages;
        s->pages = p;
        for (size_t i = PL_DESC_BLOCKS; i-- > 0;) {
            pblock_t *b = &p->blocks[i];
            memset(b, 0, sizeof *b);
            b->free_next = s->free;
            s->free = b;
        }
        s->free_count += PL_DESC_BLOCKS;
        s->total += PL_DESC_BLOCKS;
    }
    return 0;
}
