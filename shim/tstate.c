/* shim/tstate.c — the registry of per-thread records (see tstate.h for the contract).
 * Invariants: a record with owned == 0 has pin_held == NULL; tstate_mine of a live thread is
 * NULL or a record it owns; records are linked once and never unlinked.
 */
#define _GNU_SOURCE
#include "tstate.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

__thread tstate_t *tstate_mine __attribute__((tls_model("initial-exec")));

static tstate_t *registry; /* newest first (atomic head) */

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

static void release_at_exit(void *arg)
{
    tstate_t *t = arg;
    __atomic_store_n(&t->pin_held, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&t->owned, 0, __ATOMIC_RELEASE);
    tstate_mine = NULL;
}

static void exit_key_create(void)
{
    exit_key_ok = pthread_key_create(&exit_key, release_at_exit) == 0;
}

tstate_t *tstate_claim(void)
{
    pthread_once(&exit_key_once, exit_key_create);
    tstate_t *t;
    for (t = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); t; t = t->next) {
        int free_rec = 0;
        if (__atomic_compare_exchange_n(&t->owned, &free_rec, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            break;
    }
    if (!t) {
        if (posix_memalign((void **)&t, 64, sizeof *t) != 0) return NULL;
        memset(t, 0, sizeof *t);
        t->owned = 1;
        t->next = __atomic_load_n(&registry, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&registry, &t->next, t, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED)) {
        }
    }
    /* Without the key the record stays owned after the thread exits: it is never reused, which
     * costs its bytes and nothing else (its pin is NULL between operations). */
    if (exit_key_ok) pthread_setspecific(exit_key, t);
    tstate_mine = t;
    return t;
}

tstate_t *tstate_first(void) { return __atomic_load_n(&registry, __ATOMIC_ACQUIRE); }

void tstate_sum(int device, uint64_t *allocs, uint64_t *frees)
{
    uint64_t a = 0, f = 0;
    for (tstate_t *t = tstate_first(); t; t = t->next) {
        a += __atomic_load_n(&t->allocs[device], __ATOMIC_RELAXED);
        f += __atomic_load_n(&t->frees[device], __ATOMIC_RELAXED);
    }
    *allocs = a;
    *frees = f;
}

void tstate_fork_child(void)
{
    for (tstate_t *t = tstate_first(); t; t = t->next) {
        if (t == tstate_mine) continue;
        __atomic_store_n(&t->pin_held, NULL, __ATOMIC_RELAXED);
        __atomic_store_n(&t->owned, 0, __ATOMIC_RELAXED);
    }
}
