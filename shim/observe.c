/* shim/observe.c — the shim's observers (see observe.h). */
#include "observe.h"

#include <stdio.h>

#include "log.h"
#include "options.h"

void observe_init(void) {}

uint32_t observe_capture_stack(void) { return 0; }

void observe_alloc(uintptr_t addr, int device, size_t requested, size_t granted, enum shim_entry e,
                   enum observe_origin origin, uint32_t stack)
{
    (void)addr; (void)device; (void)requested; (void)granted; (void)e; (void)origin; (void)stack;
}

void observe_vmm(enum observe_vmm_kind kind, uintptr_t addr, int device, size_t size, uint32_t stack)
{
    (void)kind; (void)addr; (void)device; (void)size; (void)stack;
}

int observe_forget(uintptr_t addr) { (void)addr; return 0; }
void observe_freed(uintptr_t addr, int device) { (void)addr; (void)device; }
void observe_usage(int device, pool_t *pool) { (void)device; (void)pool; }

void observe_oom(enum shim_entry e, int device, size_t requested, size_t granted, pool_t *pool,
                 uint32_t stack)
{
    (void)stack;
    char want[32], free_s[32], largest_s[32];
    log_format_bytes(want, sizeof want, granted);
    if (!pool) {
        log_warn("%s(%zu bytes) on device %d refused with %d: no pool on this device%s", shim_entry_name(e),
                 requested, device, 207001, npupool_opt.fallback ? " and the runtime refused too" : "");
        return;
    }
    pool_stats_t st;
    pool_get_stats(pool, &st);
    log_format_bytes(free_s, sizeof free_s, st.free_bytes);
    log_format_bytes(largest_s, sizeof largest_s, st.largest_free_bytes);
    const char *why = st.free_bytes >= granted ? "fragmentation" : "exhausted";
    log_warn("%s(%zu bytes) on device %d refused with %d (%s): needs %s (%zu B), pool has %s free, "
             "largest free block %s (%zu B)%s",
             shim_entry_name(e), requested, device, 207001, why, want, granted, free_s, largest_s,
             st.largest_free_bytes,
             npupool_opt.fallback ? "; the runtime refused the fallback too" : "");
}

void observe_before_reset(int device) { (void)device; }
void observe_after_reset(int device) { (void)device; }
void observe_before_finalize(void) {}
void observe_at_exit(void) {}
void observe_atfork_prepare(void) {}
void observe_atfork_parent(void) {}
void observe_atfork_child(void) {}
