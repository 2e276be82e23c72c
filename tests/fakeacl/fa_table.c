/* tests/fakeacl/fa_table.c — the fake runtime's address → record hash table.
 *
 * Owns: struct fa_table operations.  Separate chaining over a power-of-two array of chain heads,
 * doubled when the load passes 1 (a failed growth keeps the old array: slower, still correct).
 * Keys are addresses or handle values; the hash is a Fibonacci multiply of the key.
 * Records are allocated and freed by the callers; the table only links them.
 * Locking: none here; every caller holds fa_g.lock.
 */
#include <stdlib.h>

#include "fa_internal.h"

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
