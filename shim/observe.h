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

void observe_init(void); /* from the constructor, after options_init */
uint32_t observe_capture_stack(void);
void observe_alloc(uintptr_t addr, int device, size_t requested, size_t granted, enum shim_entry e,
                   enum observe_origin origin, uint32_t stack);
void observe_vmm(enum observe_vmm_kind kind, uintptr_t addr, int device, size_t size,
                 uint32_t stack);
/* Forget addr in the ledger and, when `traced` and it was recorded, write its free to the trace.
 * Call it BEFORE the memory can be reused.  Returns 1 if it was recorded. */
int observe_forget(uintptr_t addr, int device, int traced);
/* The pool of `device` now has `allocated` of `reserved` bytes in use (threshold monitor). */
void observe_usage(int device, size_t allocated, size_t reserved);
/* A request is being refused with 207001: stderr line, counters, post-mortem report. */
void observe_oom(enum shim_entry e, int device, size_t requested, size_t granted, pool_t *pool,
                 uint32_t stack);
void observe_before_reset(int device);
void observe_after_reset(int device);
void observe_before_finalize(void);
void observe_at_exit(void);

/* Fork: the report writer's lock comes before the pools' (the reporter thread holds it while it
 * reads pools), the ledger's and the trace recorder's after them. */
void observe_atfork_prepare_capture(void); /* before any lock: waits out stack captures */
void observe_atfork_prepare_reports(void);
void observe_atfork_parent_reports(void);
void observe_atfork_child_reports(void);
void observe_atfork_prepare(void);
void observe_atfork_parent(void);
void observe_atfork_child(void);

#endif
