/* base/addrmap.c — open-addressing address → u64 map (see addrmap.h for the contract).
 *
 * Algorithm: linear probing over a power-of-two table; the home slot is the top bits of
 * key * 2^64/phi (Fibonacci hashing), so 64-byte aligned keys still spread over every slot.
 * Deletion in the current table is backward-shift (no tombstones), so probe lengths stay short
 * however long the map lives.
 *
 * The load is kept at most 1/4 (a backward-shift delete scans to the end of its cluster, and
 * clusters stay ~1 entry long at that load; 16 bytes a slot makes this 64 bytes per entry).
 *
 * Growth without a latency spike: when an insert would push the load above 1/4, a table twice
 * as large is calloc'ed (large tables come from mmap, so this costs no zeroing up front) and
 * becomes current; the previous table is kept as `old` and drained ADDRMAP_MIG_STEP slots per
 * later put/del.  Lookups search the current table, then `old`.  Deletions in `old` leave a
 * tombstone (a backward shift could move an entry behind the migration cursor).  With the step
 * of 8, migration finishes after old_slots/8 mutations, during which the new table's load stays
 * below 1/8 + 1/16 < 1/4, so a second grow never starts while one is in progress (if it did,
 * the remaining migration is finished first).  Cost per operation: O(1) expected plus at most
 * ADDRMAP_MIG_STEP slot moves; the only pause is the calloc/free of a table (mmap/munmap
 * once per doubling).
 *
 * Invariants (addrmap_check): count == new_count + old_count == occupied slots; every entry is
 * found by probing from its home slot; no key is in both tables.
 * Locking: none; the caller serialises.
 */
#include "addrmap.h"

#include <stdlib.h>

#define ADDRMAP_MIN_SLOTS 16u
#define ADDRMAP_MIG_STEP 8u
#define SLOT_EMPTY ((uintptr_t)0)
#define SLOT_TOMB ((uintptr_t)1)
#define FIB_MUL 0x9E3779B97F4A7C15ull

static inline uintptr_t key_encode(uintptr_t key) { return ~key; }
static inline uintptr_t key_decode(uintptr_t stored) { return ~stored; }
static inline int key_is_reserved(uintptr_t key) { return key >= UINTPTR_MAX - 1; }

static inline size_t slot_home(uintptr_t key, unsigned shift)
{
    return (size_t)(((uint64_t)key * FIB_MUL) >> shift);
}

static unsigned log2_of(size_t pow2) { return (unsigned)__builtin_ctzll((unsigned long long)pow2); }

/* Index of the slot holding `key` in the table, or -1. */
static ptrdiff_t table_find(const addrmap_slot_t *t, size_t mask, unsigned shift, uintptr_t key)
{
    uintptr_t want = key_encode(key);
    size_t i = slot_home(key, shift);
    for (;;) {
        uintptr_t k = t[i].key;
        if (k == want) return (ptrdiff_t)i;
        if (k == SLOT_EMPTY) return -1;
        i = (i + 1) & mask;
    }
}

/* pre: key absent, table has an empty slot. */
static void table_insert(addrmap_slot_t *t, size_t mask, unsigned shift, uintptr_t key,
                         uint64_t val)
{
    size_t i = slot_home(key, shift);
    while (t[i].key != SLOT_EMPTY) i = (i + 1) & mask;
    t[i].key = key_encode(key);
    t[i].val = val;
}

/* Backward-shift deletion of slot i (current table only: it never holds tombstones). */
static void table_remove_at(addrmap_slot_t *t, size_t mask, unsigned shift, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        uintptr_t k = t[j].key;
        if (k == SLOT_EMPTY) break;
        size_t home = slot_home(key_decode(k), shift);
        /* Entry j may move to the hole i when i lies cyclically in [home, j). */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t[i] = t[j];
            i = j;
        }
    }
    t[i].key = SLOT_EMPTY;
    t[i].val = 0;
}

static void old_release(addrmap_t *m)
{
    free(m->old);
    m->old = NULL;
    m->old_mask = 0;
    m->old_shift = 0;
    m->old_count = 0;
    m->mig_pos = 0;
}

/* Move up to `budget` slots of the old table into the current one. */
static void migrate_step_slow(addrmap_t *m, size_t budget)
{
    size_t old_slots = m->old_mask + 1;
    while (budget-- > 0 && m->mig_pos < old_slots && m->old_count > 0) {
        addrmap_slot_t *s = &m->old[m->mig_pos++];
        if (s->key > SLOT_TOMB) {
            table_insert(m->slots, m->mask, m->shift, key_decode(s->key), s->val);
            s->key = SLOT_TOMB;
            m->old_count--;
            m->new_count++;
        }
    }
    if (m->old_count == 0 || m->mig_pos >= old_slots) old_release(m);
}

static inline void migrate_step(addrmap_t *m, size_t budget)
{
    if (__builtin_expect(m->old != NULL, 0)) migrate_step_slow(m, budget);
}

int addrmap_init(addrmap_t *m, size_t expected)
{
    size_t slots = ADDRMAP_MIN_SLOTS;
    while (slots / ADDRMAP_LOAD_DIV < expected && slots < ((size_t)1 << 60)) slots <<= 1;
    *m = (addrmap_t){0};
    m->slots = calloc(slots, sizeof *m->slots);
    if (!m->slots) return -1;
    m->mask = slots - 1;
    m->shift = 64u - log2_of(slots);
    return 0;
}

void addrmap_destroy(addrmap_t *m)
{
    free(m->slots);
    free(m->old);
    *m = (addrmap_t){0};
}

int addrmap_grow(addrmap_t *m, size_t extra)
{
    size_t slots = m->mask + 1;
    if (m->count + extra <= slots / ADDRMAP_LOAD_DIV) return 0;
    /* A grow is due.  Finish any migration still running (rare: see the header). */
    if (m->old) migrate_step(m, (size_t)-1);
    size_t want = slots * 2;
    while (want / ADDRMAP_LOAD_DIV < m->count + extra) want <<= 1;
    addrmap_slot_t *t = calloc(want, sizeof *t);
    if (!t) return -1;
    m->old = m->slots;
    m->old_mask = m->mask;
    m->old_shift = m->shift;
    m->old_count = m->new_count;
    m->mig_pos = 0;
    m->slots = t;
    m->mask = want - 1;
    m->shift = 64u - log2_of(want);
    m->new_count = 0;
    if (m->old_count == 0) old_release(m);
    return 0;
}

int addrmap_get(const addrmap_t *m, uintptr_t key, uint64_t *val)
{
    if (key_is_reserved(key)) return 0;
    ptrdiff_t i = table_find(m->slots, m->mask, m->shift, key);
    if (i >= 0) {
        if (val) *val = m->slots[i].val;
        return 1;
    }
    if (m->old) {
        i = table_find(m->old, m->old_mask, m->old_shift, key);
        if (i >= 0) {
            if (val) *val = m->old[i].val;
            return 1;
        }
    }
    return 0;
}

int addrmap_put(addrmap_t *m, uintptr_t key, uint64_t val)
{
    if (key_is_reserved(key)) return -1;
    ptrdiff_t i = table_find(m->slots, m->mask, m->shift, key);
    if (i >= 0) {
        m->slots[i].val = val;
        return 1;
    }
    if (m->old) {
        i = table_find(m->old, m->old_mask, m->old_shift, key);
        if (i >= 0) {
            m->old[i].val = val;
            return 1;
        }
    }
    return addrmap_put_new(m, key, val);
}

int addrmap_put_new(addrmap_t *m, uintptr_t key, uint64_t val)
{
    if (key_is_reserved(key) || addrmap_reserve(m, 1) != 0) return -1;
    migrate_step(m, ADDRMAP_MIG_STEP);
    table_insert(m->slots, m->mask, m->shift, key, val);
    m->new_count++;
    m->count++;
    return 0;
}

int addrmap_del(addrmap_t *m, uintptr_t key, uint64_t *val)
{
    if (key_is_reserved(key)) return 0;
    int found = 0;
    ptrdiff_t i = table_find(m->slots, m->mask, m->shift, key);
    if (i >= 0) {
        if (val) *val = m->slots[i].val;
        table_remove_at(m->slots, m->mask, m->shift, (size_t)i);
        m->new_count--;
        found = 1;
    } else if (m->old) {
        i = table_find(m->old, m->old_mask, m->old_shift, key);
        if (i >= 0) {
            if (val) *val = m->old[i].val;
            m->old[i].key = SLOT_TOMB;
            m->old[i].val = 0;
            m->old_count--;
            found = 1;
        }
    }
    if (found) m->count--;
    migrate_step(m, ADDRMAP_MIG_STEP);
    return found;
}

int addrmap_foreach(const addrmap_t *m, addrmap_fn cb, void *ctx)
{
    for (size_t i = 0; i <= m->mask; i++) {
        if (m->slots[i].key > SLOT_TOMB) {
            int r = cb(ctx, key_decode(m->slots[i].key), m->slots[i].val);
            if (r) return r;
        }
    }
    if (m->old) {
        for (size_t i = 0; i <= m->old_mask; i++) {
            if (m->old[i].key > SLOT_TOMB) {
                int r = cb(ctx, key_decode(m->old[i].key), m->old[i].val);
                if (r) return r;
            }
        }
    }
    return 0;
}

static int table_check(const addrmap_slot_t *t, size_t mask, unsigned shift, int tombs_ok,
                       size_t *occupied)
{
    int bad = 0;
    size_t n = 0, empties = 0;
    for (size_t i = 0; i <= mask; i++) {
        uintptr_t k = t[i].key;
        if (k == SLOT_EMPTY) {
            empties++;
            continue;
        }
        if (k == SLOT_TOMB) {
            bad += !tombs_ok;
            continue;
        }
        n++;
        if (table_find(t, mask, shift, key_decode(k)) != (ptrdiff_t)i)
            bad++; /* unreachable from its home slot, or stored twice */
    }
    if (empties == 0) bad++; /* a full table would make probes endless */
    *occupied = n;
    return bad;
}

int addrmap_check(const addrmap_t *m)
{
    int bad = 0;
    size_t n_new = 0, n_old = 0;
    if (!m->slots) return 1;
    bad += table_check(m->slots, m->mask, m->shift, 0, &n_new);
    if (n_new != m->new_count) bad++;
    if (m->old) {
        bad += table_check(m->old, m->old_mask, m->old_shift, 1, &n_old);
        if (n_old != m->old_count) bad++;
        for (size_t i = 0; i <= m->old_mask; i++)
            if (m->old[i].key > SLOT_TOMB &&
                table_find(m->slots, m->mask, m->shift, key_decode(m->old[i].key)) >= 0)
                bad++; /* in both tables */
    } else if (m->old_count != 0) {
        bad++;
    }
    if (m->count != n_new + n_old) bad++;
    return bad;
}
