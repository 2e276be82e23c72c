/* pool/desc.c — storage for block descriptors (desc_t): the cold half of desc.h, whose header
 * states what the storage owns, its invariants and its locking.
 */
#include <stdlib.h>
#include <string.h>

#include "desc.h"

struct desc_page {
    desc_t blocks[DESC_PER_PAGE]; /* descriptors, 64-byte aligned (first member) */
    desc_page_t *next;            /* next page of this storage */
};

void desc_store_init(desc_store_t *s) { memset(s, 0, sizeof *s); }

void desc_store_destroy(desc_store_t *s)
{
    desc_page_t *p = s->pages;
    while (p) {
        desc_page_t *next = p->next;
        free(p);
        p = next;
    }
    memset(s, 0, sizeof *s);
}

int desc_grow(desc_store_t *s, size_t n)
{
    while (s->free_count < n) {
        desc_page_t *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
        if (!p) return -1;
        p->next = s->pages;
        s->pages = p;
        for (size_t i = DESC_PER_PAGE; i-- > 0;) {
            desc_t *b = &p->blocks[i];
            memset(b, 0, sizeof *b);
            b->free_next = s->free;
            s->free = b;
        }
        s->free_count += DESC_PER_PAGE;
        s->total += DESC_PER_PAGE;
    }
    return 0;
}
