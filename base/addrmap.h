/* base/addrmap.h — open-addressing hash map from an address (uintptr_t) to a 64-bit value.
 *
 * Owns: a generic "live address" table.  The pool keys it by block start address (value = the
 * host block descriptor); the shim reuses it to remember allocations it forwarded to the real
 * runtime (value = size or a tag).
 *
 * Contract:
 *   - Not thread-safe: the caller serialises every call (the pool holds its mutex).
 *   - Keys UINTPTR_MAX and UINTPTR_MAX-1 are reserved (the empty and tombstone markers); every
 *     other value, 0 included, is a valid key.
 *   - Expected O(1) per operation; the table never shrinks and does not allocate in steady state.
 *   - Growth is incremental (no stop-the-world rehash): see addrmap.c.
 *   - addrmap_reserve(m, n) guarantees that the next n inserts of new keys do not allocate and
 *     therefore cannot fail.
 */
#ifndef NPUPOOL_ADDRMAP_H
#define NPUPOOL_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

#define ADDRMAP_API __attribute__((visibility("hidden")))
#define ADDRMAP_LOAD_DIV 4u /* at most 1/4 of the slots hold an entry */

typedef struct addrmap_slot {
    uintptr_t key; /* stored key: ~user key; 0 = empty, 1 = tombstone (old table only) */
    uint64_t val;  /* user value */
} addrmap_slot_t;

typedef struct addrmap {
    addrmap_slot_t *slots; /* current table, `mask + 1` slots (power of two) */
    size_t mask;           /* slot count - 1 */
    unsigned shift;        /* 64 - log2(slot count): the hash keeps the product's top bits */
    size_t count;          /* live entries in both tables together */
    size_t new_count;      /* live entries in `slots` */
    addrmap_slot_t *old;   /* table being drained by incremental growth, or NULL */
    size_t old_mask;       /* slot count - 1 of `old` */
    unsigned old_shift;    /* `shift` of `old` */
    size_t old_count;      /* live entries still in `old` */
    size_t mig_pos;        /* next slot of `old` to migrate */
} addrmap_t;

/* Initialise for about `expected` entries without growth.  0 on success, -1 on host OOM. */
ADDRMAP_API int addrmap_init(addrmap_t *m, size_t expected);
ADDRMAP_API void addrmap_destroy(addrmap_t *m);

/* Make room for `extra` more entries (may start an incremental grow).  0 ok, -1 host OOM. */
ADDRMAP_API int addrmap_grow(addrmap_t *m, size_t extra);
static inline int addrmap_reserve(addrmap_t *m, size_t extra)
{
    return m->count + extra <= (m->mask + 1) / ADDRMAP_LOAD_DIV ? 0 : addrmap_grow(m, extra);
}

/* Insert or replace.  Returns 0 when inserted, 1 when an existing key's value was replaced,
 * -1 on host OOM or a reserved key (nothing changed). */
ADDRMAP_API int addrmap_put(addrmap_t *m, uintptr_t key, uint64_t val);

/* Insert a key the caller knows is absent (no duplicate search).  0 ok, -1 host OOM or a
 * reserved key.  pre: !addrmap_get(m, key, NULL). */
ADDRMAP_API int addrmap_put_new(addrmap_t *m, uintptr_t key, uint64_t val);

/* 1 and *val (if non-NULL) when found, else 0. */
ADDRMAP_API int addrmap_get(const addrmap_t *m, uintptr_t key, uint64_t *val);

/* Remove; 1 and *val (if non-NULL) when it was there, else 0. */
ADDRMAP_API int addrmap_del(addrmap_t *m, uintptr_t key, uint64_t *val);

static inline size_t addrmap_count(const addrmap_t *m) { return m->count; }

/* Call cb for every entry (order unspecified) until it returns non-zero (which is returned).
 * cb must not modify the map. */
typedef int (*addrmap_fn)(void *ctx, uintptr_t key, uint64_t val);
ADDRMAP_API int addrmap_foreach(const addrmap_t *m, addrmap_fn cb, void *ctx);

/* Internal consistency: counts match the occupied slots, every entry is reachable by its own
 * probe sequence, no key is stored twice.  Returns the number of violations. */
ADDRMAP_API int addrmap_check(const addrmap_t *m);

#endif /* NPUPOOL_ADDRMAP_H */
