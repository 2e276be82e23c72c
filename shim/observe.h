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
/* A pool allocation: observe_alloc (origin pool) and observe_usage at once, with one clock read
 * for the record and the threshold monitor. */
void observe_pool_alloc(uintptr_t addr, int device, size_t requested, size_t granted,
                        enum vocab_entry e, uint32_t stack, size_t allocated, size_t reserved);
/* Forget addr in the ledger and, when `traced` and it was recorded, write its free to the trace.
 * Call it BEFORE the memory can be reused.  Returns 1 if it was recorded. */
int observe_forget(uintptr_t addr, int device, int traced);
/* The pool of `device` now has `allocated` of `reserved` bytes in use (threshold monitor). */
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
