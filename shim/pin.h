/* shim/pin.h — pins: an object a thread is using is never destroyed under it (hazard pointers).
 *
 * A thread pins the object a shared pointer names (pin_load), uses it, and lets it go
 * (pin_release).  Whoever retires an object first unpublishes it (the shared pointer no longer
 * names it) and then calls pin_wait_unheld: it returns once no thread holds the object, after
 * which nobody can reach it and it may be destroyed.  The shim pins pools this way, so that
 * aclrtResetDevice and aclFinalize never free a pool's metadata while another thread is inside
 * pool_alloc, pool_free or a report's snapshot of it (a slow path of a vmm pool may run for
 * milliseconds with no lock held).
 *
 * One pin per thread: a thread holds at most one object at a time; pin_load replaces what it
 * held.  Cost on the fast path: a store and two loads to pin, one release store to let go, no
 * shared cache line written; no fence follows the store when the retirer can make every thread
 * fence for it (membarrier, pin_init), else a full fence does (pin.c says why either is
 * enough).
 * Threads pin through their per-thread record (tstate.h, reused after the thread exits); a thread
 * that cannot get one (host memory exhausted) shares one overflow slot under a mutex, so pinning
 * never fails.
 * Locking: pin_wait_unheld takes no lock and must be called with no npupool lock held that a
 * pinned thread might wait for.  Fork: pin_fork_child forgets the pins of the parent's other
 * threads (they do not exist in the child).
 */
#ifndef NPUPOOL_SHIM_PIN_H
#define NPUPOOL_SHIM_PIN_H

/* Once, before any thread pins (start-up): use membarrier for the pinning threads' fence when
 * the kernel offers it.  1 when it does.  Without this call pins use fences of their own. */
int pin_init(void);

/* Pin what *shared names now and return it (NULL: nothing, and nothing is pinned).  While
 * pinned, the object is not destroyed even if *shared changes.  Replaces this thread's pin. */
void *pin_load(void **shared);

/* Let go of this thread's pin (none held: no effect). */
void pin_release(void);

/* What this thread holds pinned now (NULL: nothing).  Never blocks. */
void *pin_current(void);

/* Wait until no thread holds obj.  pre: obj is no longer reachable through any shared pointer. */
void pin_wait_unheld(const void *obj);

/* In a fork child: only the forking thread exists; its pin (if any) stays.  Calls
 * tstate_fork_child. */
void pin_fork_child(void);

#endif /* NPUPOOL_SHIM_PIN_H */
