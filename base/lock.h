/* base/lock.h — a mutex for short critical sections contended by a few threads: it spins a while
 * before it sleeps.
 *
 * Owns: lock_t and its three operations.
 *   lock_acquire   one compare-and-swap when free; otherwise spins (reading the word, cpu_relax)
 *                  up to LOCK_SPINS times, then sleeps on a futex until woken.
 *   lock_release   one exchange; a futex wake only when a thread sleeps on the lock.
 *   lock_init      the word to 0 (a zeroed lock_t is a free lock; a fork child re-inits).
 * Why not a pthread mutex: a glibc default mutex sleeps at the first failed attempt, so a lock
 * held for a few hundred nanoseconds and wanted by two threads costs each contended acquisition
 * a futex wait, a wake and two context switches (on a VM, an inter-processor interrupt too):
 * bench_shim's threads table with blocks above 256 KiB (taken under the pool lock) spent more
 * time in the scheduler than in the allocator.  glibc's adaptive mutex spins, but measured
 * erratic here (one run in two collapsed to a quarter of the throughput).
 * States (Drepper, "Futexes are tricky", mutex 2): 0 free, 1 held, 2 held and a thread may
 * sleep on it.  Acquire and release are an acquire CAS/exchange and a release exchange, so
 * ThreadSanitizer sees the lock's happens-before through the atomics.  Not recursive, no owner:
 * releasing from another thread (a fork child releasing what its parent's prepare handler took)
 * is allowed.
 */
#ifndef NPUPOOL_BASE_LOCK_H
#define NPUPOOL_BASE_LOCK_H

typedef struct lock {
    int word; /* atomic: 0 free, 1 held, 2 held with (possible) sleepers */
} lock_t;

void lock_acquire_slow(lock_t *l);
void lock_wake(lock_t *l);

static inline void lock_init(lock_t *l) { __atomic_store_n(&l->word, 0, __ATOMIC_RELAXED); }

static inline void lock_acquire(lock_t *l)
{
    int free_word = 0;
    if (__builtin_expect(!__atomic_compare_exchange_n(&l->word, &free_word, 1, 0, __ATOMIC_ACQUIRE,
                                                      __ATOMIC_RELAXED),
                         0))
        lock_acquire_slow(l);
}

static inline void lock_release(lock_t *l)
{
    if (__builtin_expect(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2, 0)) lock_wake(l);
}

#endif
