/* shim/pin.c — hazard-pointer pins (see pin.h for the contract).
 *
 * Owns: the registry of pin slots (a list, newest first, of cache-line sized slots; slots are
 * never freed, a slot whose thread exited is reused by the next thread that needs one), this
 * thread's slot, and the overflow slot for threads that could not get one.
 * Invariants:
 *   - a slot with owned == 0 has held == NULL;
 *   - between pin_load returning p != NULL and the next pin_load/pin_release of that thread,
 *     its slot's held == p, and p was still published after held was set (the seq_cst store
 *     and re-load in pin_load against the unpublish + seq_cst scan in pin_wait_unheld: either
 *     the pinning thread sees the pointer gone, or the waiting thread sees the pin).
 */
#define _GNU_SOURCE
#include "pin.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

typedef struct pin_slot {
    void *held;            /* the pinned object, NULL = none (atomic) */
    int owned;             /* 1 while a live thread has the slot (atomic) */
    struct pin_slot *next; /* older slots; written once before the slot is published */
} __attribute__((aligned(64))) pin_slot_t;

static pin_slot_t *registry; /* newest first (atomic head) */
static __thread pin_slot_t *t_slot __attribute__((tls_model("initial-exec")));
static __thread int t_overflow __attribute__((tls_model("initial-exec"))); /* holds overflow */

/* A thread without a slot of its own pins through this one, one thread at a time. */
static pin_slot_t overflow_slot;
static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

static void slot_free_at_exit(void *arg)
{
    pin_slot_t *s = arg;
    __atomic_store_n(&s->held, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&s->owned, 0, __ATOMIC_RELEASE);
}

static void exit_key_create(void)
{
    exit_key_ok = pthread_key_create(&exit_key, slot_free_at_exit) == 0;
}

/* This thread's slot: a free one from the registry, else a new one; NULL when host memory is
 * exhausted (the caller uses the overflow slot). */
static pin_slot_t *slot_claim(void)
{
    pthread_once(&exit_key_once, exit_key_create);
    pin_slot_t *s;
    for (s = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); s; s = s->next) {
        int free_slot = 0;
        if (__atomic_compare_exchange_n(&s->owned, &free_slot, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            break;
    }
    if (!s) {
        if (posix_memalign((void **)&s, sizeof *s, sizeof *s) != 0) return NULL;
        s->held = NULL;
        s->owned = 1;
        s->next = __atomic_load_n(&registry, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&registry, &s->next, s, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED)) {
        }
    }
    /* Without the key the slot stays owned after the thread exits: it is never reused, which
     * costs one cache line per thread and nothing else (held is NULL between operations). */
    if (exit_key_ok) pthread_setspecific(exit_key, s);
    return s;
}

static pin_slot_t *my_slot(void)
{
    if (t_overflow) return &overflow_slot;
    pin_slot_t *s = t_slot;
    if (__builtin_expect(s != NULL, 1)) return s;
    s = t_slot = slot_claim();
    if (s) return s;
    pthread_mutex_lock(&overflow_lock);
    t_overflow = 1;
    return &overflow_slot;
}

void *pin_load(void **shared)
{
    pin_slot_t *s = my_slot();
    for (;;) {
        void *p = __atomic_load_n(shared, __ATOMIC_ACQUIRE);
        __atomic_store_n(&s->held, p, __ATOMIC_SEQ_CST);
        if (p == NULL || __atomic_load_n(shared, __ATOMIC_SEQ_CST) == p) {
            if (p == NULL) pin_release();
            return p;
        }
    }
}

void pin_release(void)
{
    if (t_overflow) {
        __atomic_store_n(&overflow_slot.held, NULL, __ATOMIC_RELEASE);
        t_overflow = 0;
        pthread_mutex_unlock(&overflow_lock);
        return;
    }
    pin_slot_t *s = t_slot;
    if (s) __atomic_store_n(&s->held, NULL, __ATOMIC_RELEASE);
}

static int held_anywhere(const void *obj)
{
    if (__atomic_load_n(&overflow_slot.held, __ATOMIC_SEQ_CST) == obj) return 1;
    for (pin_slot_t *s = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); s; s = s->next)
        if (__atomic_load_n(&s->held, __ATOMIC_SEQ_CST) == obj) return 1;
    return 0;
}

void pin_wait_unheld(const void *obj)
{
    /* A pool operation takes microseconds, a vmm slow path a few runtime calls: yield first,
     * then sleep in growing steps up to 1 ms. */
    if (obj == NULL) return; /* every free slot "holds" NULL */
    long sleep_ns = 1000;
    for (int round = 0; held_anywhere(obj); round++) {
        if (round < 8) {
            sched_yield();
            continue;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
}

void pin_fork_child(void)
{
    for (pin_slot_t *s = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); s; s = s->next) {
        if (s == t_slot) continue;
        __atomic_store_n(&s->held, NULL, __ATOMIC_RELAXED);
        __atomic_store_n(&s->owned, 0, __ATOMIC_RELAXED);
    }
    if (!t_overflow) {
        __atomic_store_n(&overflow_slot.held, NULL, __ATOMIC_RELAXED);
        pthread_mutex_init(&overflow_lock, NULL);
    }
}
