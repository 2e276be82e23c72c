/* shim/tstate.h — per-thread records of the shim: what each thread that calls in keeps apart from
 * the others, so that the allocation path writes no cache line another thread writes.
 *
 * Owns: the registry of records (a list, newest first, of cache-line aligned records, never
 * freed: a record whose thread exited is reused by the next thread that needs one, its counts
 * kept, so that a sum over the registry stays exact after threads exit) and this thread's record.
 * What a record holds:
 *   - the thread's pin (pin.c): the object it is using, read by retirers;
 *   - its event counts per device, the two that every pool allocation and free moves (allocs,
 *     frees of base/wire.h): written by the owning thread only, with a relaxed load and store (no
 *     locked instruction), read by tstate_sum, which adds every record's.  Other counters are
 *     rare and stay shared atomics (shim.h);
 *   - the slot of its last pool free's parked forget (ledger.h: ledger_release_tagged_later),
 *     which the next thread to take the record, or any reader of the ledger, completes.
 * A thread gets its record at its first call (tstate_self) and gives it back when it exits (a
 * thread-specific-data destructor, which also forgets the pointer, so that a call the thread makes
 * from a later destructor claims a record again instead of writing one another thread may own).
 * A thread that cannot get a record (host memory exhausted) gets NULL: pin.c then uses its
 * overflow slot, and the counts go to the shared atomics.
 * Fork: tstate_fork_child gives back the records of the parent's other threads (they do not exist
 * in the child; their counts stay, as the parent's counts stay in a child).
 */
#ifndef NPUPOOL_SHIM_TSTATE_H
#define NPUPOOL_SHIM_TSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "ledger.h"
#include "vocab.h"

typedef struct tstate {
    void *pin_held;                       /* pin.c: the pinned object, NULL = none (atomic) */
    int owned;                            /* 1 while a live thread has the record (atomic) */
    struct tstate *next;                  /* older records; written once, before publication */
    uint64_t allocs[NPUPOOL_MAX_DEVICES]; /* pool allocations made by its threads (atomic) */
    uint64_t frees[NPUPOOL_MAX_DEVICES];  /* pool frees made by its threads (atomic) */
    ledger_parked_t parked;               /* its frees' parked forget (observe.c, ledger.h) */
} __attribute__((aligned(64))) tstate_t;

extern __thread tstate_t *tstate_mine __attribute__((tls_model("initial-exec")));

/* This thread's record, claimed now if it has none; NULL when host memory is exhausted. */
tstate_t *tstate_claim(void);
static inline tstate_t *tstate_self(void)
{
    tstate_t *t = tstate_mine;
    return __builtin_expect(t != NULL, 1) ? t : tstate_claim();
}

/* Add n to a count of this thread's own record (single writer: no locked instruction). */
static inline void tstate_add(uint64_t *count, uint64_t n)
{
    __atomic_store_n(count, __atomic_load_n(count, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* The newest record (walk on with ->next, acquire-loaded by this call only for the head). */
tstate_t *tstate_first(void);

/* The counts of `device` (0..NPUPOOL_MAX_DEVICES-1) summed over every record. */
void tstate_sum(int device, uint64_t *allocs, uint64_t *frees);

/* In a fork child: only the calling thread exists; every other record is free (pins dropped). */
void tstate_fork_child(void);

#endif /* NPUPOOL_SHIM_TSTATE_H */
