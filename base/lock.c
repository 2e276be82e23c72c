/* base/lock.c — the slow paths of base/lock.h: spinning, sleeping, waking. */
#include <stdint.h>

#include "barrier.h"
#include "lock.h"

#ifndef LOCK_SPINS
#define LOCK_SPINS 100 /* reads of a held word before sleeping (100..2000 measured alike) */
#endif

void lock_wake(lock_t *l) { futex_wake(&l->word, 1); }

void lock_acquire_slow(lock_t *l)
{
    for (unsigned spins = 0; spins < LOCK_SPINS; spins++) {
        int w = __atomic_load_n(&l->word, __ATOMIC_RELAXED);
        if (w == 0 &&
            __atomic_compare_exchange_n(&l->word, &w, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        if (w == 2) break; /* somebody sleeps already: queue behind it */
        cpu_relax();
    }
    /* From here on the word says 2 whenever this thread may sleep, so a release wakes one. */
    while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
        futex_wait(&l->word, 2, UINT64_MAX);
}
