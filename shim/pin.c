/* shim/pin.c — hazard-pointer pins (see pin.h for the contract).
 *
 * Owns: the pin protocol, the overflow slot for threads without a record of their own, and the
 * choice of fence.  A thread's pin is the pin_held field of its tstate record (tstate.h: the
 * registry of per-thread records, never freed, reused after a thread exits).
 * Invariants:
 *   - a record with owned == 0 has pin_held == NULL;
 *   - between pin_load returning p != NULL and the next pin_load/pin_release of that thread,
 *     its pin_held == p, and p was still published after pin_held was set: either the pinning
 *     thread sees the pointer gone, or the waiting thread sees the pin.
 * The fence that gives the second invariant (the pinning thread's store of pin_held must be
 * visible before it reloads the shared pointer; the retirer's unpublish before it scans):
 *   - asymmetric (pin_init found membarrier's MEMBARRIER_CMD_PRIVATE_EXPEDITED and registered
 *     for it): the pinning thread makes a plain store and a compiler barrier, and the retirer,
 *     after unpublishing, calls membarrier(), which runs a full barrier on every CPU running a
 *     thread of the process.  A pinning thread's reload then either came before that barrier
 *     (and its earlier store is visible to the scan that follows) or after it (and it sees the
 *     pointer gone).  The allocation path pays no fence; a retirer (aclrtResetDevice,
 *     aclFinalize) pays one system call.
 *   - symmetric (no membarrier: an old kernel, a seccomp filter; and in TSan builds, which do
 *     not model the system call): a plain store, a full fence (barrier_light, base/barrier.h:
 *     DMB ISH on aarch64, MFENCE on x86-64), then the reload; the retirer's unpublish is an
 *     atomic exchange and its scan loads are seq_cst.  Not a seq_cst store and a seq_cst load
 *     (STLR then LDAR on aarch64): the architecture orders that pair, and C11 says it is
 *     enough, but qemu-user translates it without the store -> load order (qemu 7.2 on
 *     x86-64: in a store-buffering litmus test, 1,419 and 1,730 of 500,000 rounds saw both
 *     loads miss both stores; with the fence, none did), and the aarch64 tests run under it.
 * The choice is made once by pin_init, at start-up, before any thread can pin (shim_ensure_init's
 * first phase) and never changes afterwards, except in a fork child (one thread: pin_fork_child
 * registers again, or falls back).
 * Measured: bench_shim (the README's "Benchmarks", "Through the shim").
 */
#define _GNU_SOURCE
#include "pin.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "barrier.h"
#include "tstate.h"

static int asymmetric; /* 1: membarrier does the pinning threads' fence (set by pin_init) */

static __thread int t_overflow __attribute__((tls_model("initial-exec"))); /* holds overflow */

/* A thread without a record of its own pins through this slot, one thread at a time. */
static void *overflow_held;
static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;

/* 1 when the process can use expedited private barriers from now on. */
static int membarrier_register(void)
{
#if defined(__SANITIZE_THREAD__)
    return 0;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return 0;
#endif
#endif
    return barrier_register();
}

int pin_init(void)
{
    if (!__atomic_load_n(&asymmetric, __ATOMIC_RELAXED) && membarrier_register())
        __atomic_store_n(&asymmetric, 1, __ATOMIC_RELEASE);
    return __atomic_load_n(&asymmetric, __ATOMIC_RELAXED);
}

/* The slot this thread pins through: its record's, else the overflow slot (locked until
 * pin_release). */
static void **my_slot(void)
{
    if (t_overflow) return &overflow_held;
    tstate_t *t = tstate_self();
    if (__builtin_expect(t != NULL, 1)) return &t->pin_held;
    pthread_mutex_lock(&overflow_lock);
    t_overflow = 1;
    return &overflow_held;
}

void *pin_load(void **shared)
{
    void **slot = my_slot();
    int asym = __atomic_load_n(&asymmetric, __ATOMIC_RELAXED);
    for (;;) {
        void *p = __atomic_load_n(shared, __ATOMIC_ACQUIRE);
        __atomic_store_n(slot, p, __ATOMIC_RELAXED);
        barrier_light(!asym); /* store -> load; with membarrier the retirer's is the CPU's */
        if (p == NULL || __atomic_load_n(shared, __ATOMIC_ACQUIRE) == p) {
            if (p == NULL) pin_release();
            return p;
        }
    }
}

void *pin_current(void)
{
    if (t_overflow) return __atomic_load_n(&overflow_held, __ATOMIC_RELAXED);
    tstate_t *t = tstate_self();
    return t ? __atomic_load_n(&t->pin_held, __ATOMIC_RELAXED) : NULL;
}

void pin_release(void)
{
    if (t_overflow) {
        __atomic_store_n(&overflow_held, NULL, __ATOMIC_RELEASE);
        t_overflow = 0;
        pthread_mutex_unlock(&overflow_lock);
        return;
    }
    tstate_t *t = tstate_mine;
    if (t) __atomic_store_n(&t->pin_held, NULL, __ATOMIC_RELEASE);
}

static int held_anywhere(const void *obj)
{
    if (__atomic_load_n(&overflow_held, __ATOMIC_SEQ_CST) == obj) return 1;
    for (tstate_t *t = tstate_first(); t; t = t->next)
        if (__atomic_load_n(&t->pin_held, __ATOMIC_SEQ_CST) == obj) return 1;
    return 0;
}

static void sleep_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

void pin_wait_unheld(const void *obj)
{
    if (obj == NULL) return; /* every free slot "holds" NULL */
    if (__atomic_load_n(&asymmetric, __ATOMIC_ACQUIRE) && barrier_all() != 0) {
        /* Registered, so it cannot fail; if it ever does, a pin stored just now may still sit in
         * a store buffer, which drains within microseconds: give it far more than that. */
        sleep_ns(10 * 1000 * 1000);
    }
    /* A pool operation takes microseconds, a vmm slow path a few runtime calls: yield first,
     * then sleep in growing steps up to 1 ms. */
    long step_ns = 1000;
    for (int round = 0; held_anywhere(obj); round++) {
        if (round < 8) {
            sched_yield();
            continue;
        }
        sleep_ns(step_ns);
        if (step_ns < 1000000) step_ns *= 2;
    }
}

void pin_fork_child(void)
{
    tstate_fork_child();
    if (!t_overflow) {
        __atomic_store_n(&overflow_held, NULL, __ATOMIC_RELAXED);
        pthread_mutex_init(&overflow_lock, NULL);
    }
    /* The registration is the parent's (a child has a new address space): ask again, and fall
     * back to fences if it is refused.  Only this thread exists, and it holds no pin here. */
    if (__atomic_load_n(&asymmetric, __ATOMIC_RELAXED) && !membarrier_register())
        __atomic_store_n(&asymmetric, 0, __ATOMIC_RELAXED);
}
