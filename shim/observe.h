/* shim/observe.h — what the shim tells the ledger, the trace recorder and the report writer.
 *
 * Owns: the boundary between the allocation paths (entry.c) and everything that watches them, so
 * entry.c stays a thin contract layer.  Every function is cheap when its feature is off.
 * Stack capture happens before any lock (observe_capture_stack); symbolisation, JSON and
 * aggregation never happen here, only at report time.
 */
#ifndef NPUPOOL_OBSERVE_H
#define NPUPOOL_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "shim.h"

enum observe_origin { OBSERVE_POOL, OBSERVE_FALLBACK, OBSERVE_PASSTHROUGH };
enum observe_vmm_kind { OBSERVE_VMM_PHYSICAL, OBSERVE_VMM_MAP };

void observe_init(void);             /* from the constructor, after options_init */
uint32_t observe_capture_stack(void);
void observe_alloc(uintptr_t addr, int device, size_t requested, size_t granted, enum shim_entry e,
                   enum observe_origin origin, uint32_t stack);
void observe_vmm(enum observe_vmm_kind kind, uintptr_t addr, int device, size_t size, uint32_t stack);
/* Forget addr in the ledger (before it can be reused); 1 if it was recorded. */
int observe_forget(uintptr_t addr);
/* addr was freed successfully (trace, usage monitor). */
void observe_freed(uintptr_t addr, int device);
/* The pool's use changed upward (threshold monitor). */
void observe_usage(int device, pool_t *pool);
/* A request is being refused with 207001: stderr line, counters, post-mortem report. */
void observe_oom(enum shim_entry e, int device, size_t requested, size_t granted, pool_t *pool,
                 uint32_t stack);
void observe_before_reset(int device);  /* caller holds shim_devices_lock */
void observe_after_reset(int device);
void observe_before_finalize(void);
void observe_at_exit(void);

void observe_atfork_prepare(void);
void observe_atfork_parent(void);
void observe_atfork_child(void);

#endif
