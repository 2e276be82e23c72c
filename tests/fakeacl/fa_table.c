/* tests/fakeacl/fa_table.c — the fake runtime's records and its address → record hash table.
 *
 * Owns: struct fa_table operations, and the records' storage (fa_rec_new, fa_rec_free).
 * Table: separate chaining over a power-of-two array of chain heads, doubled when the load passes
 * 1 (a failed growth keeps the old array: slower, still correct).  Keys are addresses or handle
 * values; the hash is a Fibonacci multiply of the key.  The table only links records.
 * Records come from a free list refilled with mmap, FA_REC_SLAB at a time, never from malloc: a
 * child of fork() then never allocates a record through an allocator lock that another thread
 * of its parent held at the fork (glibc's malloc is fork-safe; the sanitizers' allocators in
 * this toolchain are not, and a child stuck in one was seen).  Slabs are kept until exit.
 * Locking: the table: every caller holds fa_g.lock.  The records: fa_recs_lock, a leaf (taken
 * with or without fa_g.lock, never the other way round); the fork handlers take it after
 * fa_g.lock.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fa_internal.h"

#define FA_REC_SLAB 256u /* records per mmap of the record storage */

pthread_mutex_t fa_recs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fa_rec *fa_recs_free; /* unused records, linked by `next`; under fa_recs_lock */

struct fa_rec *fa_rec_new(void)
{
    pthread_mutex_lock(&fa_recs_lock);
    if (fa_recs_free == NULL) {
        struct fa_rec *slab = mmap(NULL, FA_REC_SLAB * sizeof *slab, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (slab != MAP_FAILED)
            for (unsigned i = 0; i < FA_REC_SLAB; i++) {
                slab[i].next = fa_recs_free;
                fa_recs_free = &slab[i];
            }
    }
    struct fa_rec *r = fa_recs_free;
    if (r != NULL) fa_recs_free = r->next;
    pthread_mutex_unlock(&fa_recs_lock);
    if (r != NULL) memset(r, 0, sizeof *r);
    return r;
}

void fa_rec_free(struct fa_rec *r)
{
    if (r == NULL) return;
    pthread_mutex_lock(&fa_recs_lock);
    r->next = fa_recs_free;
    fa_recs_free = r;
    pthread_mutex_unlock(&fa_recs_lock);
}

#define FA_TABLE_MIN_SLOTS 1024u

static size_t slot_of(uintptr_t key, size_t nslot)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (nslot - 1);
}

static void table_grow(struct fa_table *t)
{
    size_t n = t->nslot ? t->nslot * 2 : FA_TABLE_MIN_SLOTS;
    struct fa_rec **s = calloc(n, sizeof(*s));
    if (s == NULL) return; /* keep the old array: chains get longer, lookups stay correct */
    for (size_t i = 0; i < t->nslot; i++) {
        struct fa_rec *r = t->slot[i];
        while (r != NULL) {
            struct fa_rec *next = r->next;
            size_t j = slot_of(r->key, n);
            r->next = s[j];
            s[j] = r;
            r = next;
        }
    }
    free(t->slot);
    t->slot = s;
    t->nslot = n;
}

struct fa_rec *fa_table_find(const struct fa_table *t, uintptr_t key)
{
    if (t->nslot == 0) return NULL;
    for (struct fa_rec *r = t->slot[slot_of(key, t->nslot)]; r != NULL; r = r->next)
        if (r->key == key) return r;
    return NULL;
}

int fa_table_insert(struct fa_table *t, struct fa_rec *r)
{
    if (t->count >= t->nslot) table_grow(t);
    if (t->nslot == 0) return -1;
    size_t i = slot_of(r->key, t->nslot);
    r->next = t->slot[i];
    t->slot[i] = r;
    t->count++;
    return 0;
}

struct fa_rec *fa_table_remove(struct fa_table *t, uintptr_t key)
{
    if (t->nslot == 0) return NULL;
    struct fa_rec **pp = &t->slot[slot_of(key, t->nslot)];
    for (; *pp != NULL; pp = &(*pp)->next) {
        struct fa_rec *r = *pp;
        if (r->key == key) {
            *pp = r->next;
            r->next = NULL;
            t->count--;
            return r;
        }
    }
    return NULL;
}

void fa_table_walk(struct fa_table *t, fa_visit_fn fn, void *ctx)
{
    for (size_t i = 0; i < t->nslot; i++) {
        struct fa_rec **pp = &t->slot[i];
        while (*pp != NULL) {
            struct fa_rec *r = *pp;
            struct fa_rec *next = r->next; /* read before the visitor may take r */
            if (fn(r, ctx)) {              /* r may be freed already: do not touch it */
                *pp = next;
                t->count--;
            } else {
                pp = &r->next;
            }
        }
    }
}

size_t fa_table_chained(const struct fa_table *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nslot; i++)
        for (const struct fa_rec *r = t->slot[i]; r != NULL; r = r->next) n++;
    return n;
}
