/* shim/observe.h — what the shim tells the ledger, the trace recorder and the report writer.
 *
 * Owns: the boundary between the allocation paths (entry.c) and everything that watches them, so
 * entry.c stays a thin contract layer.  Every function is cheap when its feature is off.
 * Stack capture happens before any lock (observe_capture_stack); symbolisation, JSON and
 * aggregation never happen here, only at report time.
 */
#ifndef NPUPOOL_SHIM_OBSERVE_H
#define NPUPOOL_SHIM_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "shim.h"

/* From shim_ensure_init, after options_init: the ledger, the trace and the reports start. */
void observe_init(void);
uint32_t observe_capture_stack(void);
/* A successful allocation: ledger record and trace line.  device: a vocab_device() id. */
void observe_alloc(uintptr_t addr, int device, size_t requested, size_t granted, enum vocab_entry e,
                   enum vocab_origin origin, uint32_t stack);
/* A pool allocation, in two steps with one clock read (`now`, clock_coarse_ns()): its tagged
 * ledger record, whose handle the caller stores in the block's tag while it still pins the pool
 * (observe_pool_record), then its trace line and the threshold monitor (observe_pool_alloc, with
 * no pin held). */
uint32_t observe_pool_record(uintptr_t addr, int device, size_t requested, size_t granted,
                             enum vocab_entry e, uint32_t stack, uint64_t now);
void observe_pool_alloc(uintptr_t addr, int device, size_t requested, size_t allocated,
                        size_t reserved, uint64_t now);
/* Write the free of the pool block at addr, whose tag is `tag`, to the trace and park the
 * forget of its record (observe.c): from pool_free_tagged's callback on its lock-free path, so
 * BEFORE the block can be handed out again. */
void observe_pool_forget(uint32_t tag, uintptr_t addr, int device);
/* The same in two steps, for a callback under the pool lock: the trace line now (returns the
 * tag to forget), the record once the lock is let go (shim/entry.c: forget_tagged). */
uint32_t observe_pool_freed(uint32_t tag, uintptr_t addr, int device);
void observe_pool_forget_deferred(uint32_t tag, uintptr_t addr);
/* Forget addr in the ledger and, when `traced` and it was recorded, write its free to the trace.
 * Call it BEFORE the memory can be reused.  Returns 1 if it was recorded. */
int observe_forget(uintptr_t addr, int device, int traced);
/* The pool of `device` now has `allocated` of `reserved` bytes in use (threshold monitor);
 * reserved 0: the caller has no new figures (pool.h: pool_thread_mirror_writes). */
void observe_usage(int device, size_t allocated, size_t reserved);
/* A request is being refused with 207001: one stderr line and an `oom` report, both with the
 * pool's classification of the refusal (`why`, filled by pool_alloc under the lock that refused;
 * NULL when the device has no pool, or in observe mode, where the runtime refused it). */
void observe_oom(enum vocab_entry e, int device, size_t requested, size_t granted,
                 const pool_refusal_t *why, uint32_t stack);
void observe_before_reset(int device);
void observe_after_reset(int device);
void observe_before_finalize(void);
void observe_at_exit(void);

#endif
