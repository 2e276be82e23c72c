/* base/barrier.h — waiting and fencing across threads: the pieces npupool's lock-free paths share.
 *
 * Owns:
 *   cpu_relax              one spin-wait hint (x86 pause, aarch64 yield; nothing elsewhere).
 *   barrier_register       registers the process for expedited private membarrier (checked
 *                          with MEMBARRIER_CMD_QUERY first); 1 when barrier_all may be used.
 *                          Idempotent; costs an RCU grace period in a process with threads.
 *   barrier_all            membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): on return every running
 *                          thread of the process has executed a full memory barrier.  0 on
 *                          success; -1 where not registered or not available.
 *   barrier_light          the other side of such a fence, between a thread's store and its
 *                          load: a compiler barrier where the heavy side runs barrier_all, else
 *                          a full fence.
 *   futex_wait             sleeps while the 32-bit word holds `value` (or until timeout_ns
 *                          passes; UINT64_MAX: no limit); may return early (a wake, a signal).
 *   futex_wake             wakes up to n threads sleeping on the word.
 *                          Both are process-private and leave errno as it was (they run inside
 *                          the application's calls).
 * Users: the ledger's shard spin locks (cpu_relax), the pool's thread caches and the shim's pins
 * (both sides of their asymmetric fences), the pool lock (base/lock.c) and the reporter
 * thread (futexes).  No state: callers keep whether they registered.
 */
#ifndef NPUPOOL_BASE_BARRIER_H
#define NPUPOOL_BASE_BARRIER_H

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

int barrier_register(void);
int barrier_all(void);

/* The light side of an asymmetric fence (the store -> load order of a Dekker whose other side
 * calls barrier_all): `fenced` 0, the heavy side makes this thread's CPU fence, so only the
 * compiler must keep the order; 1 (no membarrier: an old kernel, seccomp, TSan builds), a full
 * fence (MFENCE, DMB ISH).  Never a seq_cst store then a seq_cst load instead: qemu-user does
 * not keep that pair in order (shim/pin.c), and the aarch64 tests run under it. */
static inline void barrier_light(int fenced)
{
    if (__builtin_expect(fenced, 0))
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    else
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

#include <stdint.h>
void futex_wait(void *word, uint32_t value, uint64_t timeout_ns);
void futex_wake(void *word, int n);

#endif
