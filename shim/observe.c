/* shim/observe.c — the shim's observers (see observe.h): the ledger (ledger/ledger.h), the trace
 * recorder (shim/trace.h) and the report writer (ledger/report.h).
 *
 * Order that matters: a free is forgotten by the ledger and written to the trace BEFORE the block
 * goes back to the pool (observe_forget), so that another thread cannot be handed the same
 * address, and record it, while the old record still exists.
 * Locks: report_* functions take their own locks and the pools' and the ledger's; they are called
 * with no npupool lock held.
 */
#include "observe.h"

#include <stdio.h>

#include "ledger.h"
#include "fmt.h"
#include "log.h"
#include "options.h"
#include "report.h"
#include "trace.h"

static void for_each_device(void *ctx,
                            void (*cb)(void *cbctx, int device, pool_t *pool,
                                       const struct shim_counters *counters),
                            void *cbctx)
{
    (void)ctx;
    for (int dev = 0; dev < SHIM_MAX_DEVICES; dev++) {
        shim_device_t *d = &shim_devices[dev];
        pool_t *pool = device_pool_peek(dev);
        int active = pool || counters_get(&d->counters, allocs) ||
                     counters_get(&d->counters, real_allocs) ||
                     counters_get(&d->counters, invalid_frees) || ledger_live_count(dev) > 0;
        if (active) cb(cbctx, dev, pool, &d->counters);
    }
}

static void for_each_option(void *ctx, void (*cb)(void *cbctx, const char *name, const char *value),
                            void *cbctx)
{
    (void)ctx;
    options_for_each(cb, cbctx);
}

void observe_init(void)
{
    ledger_init(npupool_opt.backtrace_depth);
    trace_open_from_env();
    report_source_t src = {.for_each_device = for_each_device, .for_each_option = for_each_option};
    report_init(&src);
    report_start_background();
}

uint32_t observe_capture_stack(void) { return ledger_capture_stack(0); }

void observe_alloc(uintptr_t addr, int device, size_t requested, size_t granted, enum shim_entry e,
                   enum observe_origin origin, uint32_t stack)
{
    static const enum ledger_origin origins[] = {
        [OBSERVE_POOL] = LEDGER_FROM_POOL,
        [OBSERVE_FALLBACK] = LEDGER_FROM_FALLBACK,
        [OBSERVE_PASSTHROUGH] = LEDGER_FROM_PASSTHROUGH,
    };
    static const enum ledger_entry entries[] = {
        [SHIM_MALLOC] = LEDGER_MALLOC,
        [SHIM_MALLOC_ALIGN32] = LEDGER_MALLOC_ALIGN32,
        [SHIM_MALLOC_CACHED] = LEDGER_MALLOC_CACHED,
        [SHIM_MALLOC_WITH_CFG] = LEDGER_MALLOC_WITH_CFG,
    };
    ledger_record_alloc(addr, device < 0 ? 0 : device, requested, granted, entries[e],
                        origins[origin], stack);
    trace_alloc(device, addr, requested);
}

void observe_vmm(enum observe_vmm_kind kind, uintptr_t addr, int device, size_t size,
                 uint32_t stack)
{
    ledger_record_alloc(addr, device < 0 ? 0 : device, size, size,
                        kind == OBSERVE_VMM_PHYSICAL ? LEDGER_MALLOC_PHYSICAL : LEDGER_MAP_MEM,
                        LEDGER_FROM_PASSTHROUGH, stack);
}

int observe_forget(uintptr_t addr, int device, int traced)
{
    int known = ledger_record_free(addr);
    if (known && traced) trace_free(device, addr);
    return known;
}

void observe_usage(int device, size_t allocated, size_t reserved)
{
    report_usage_changed(device, allocated, reserved);
}

void observe_oom(enum shim_entry e, int device, size_t requested, size_t granted, pool_t *pool,
                 uint32_t stack)
{
    char want[32], free_s[32], largest_s[32];
    fmt_bytes(want, granted);
    pool_stats_t st = {0};
    if (pool) pool_get_stats(pool, &st);
    if (!pool) {
        log_warn("%s(%zu bytes) on device %d refused with %d: no pool on this device%s",
                 shim_entry_name(e), requested, device, 207001,
                 npupool_opt.fallback ? " and the runtime refused too" : "");
    } else {
        fmt_bytes(free_s, st.free_bytes);
        fmt_bytes(largest_s, st.largest_free_bytes);
        log_warn(
            "%s(%zu bytes) on device %d refused with %d (%s): needs %s (%zu B), pool has %s free, "
            "largest free block %s (%zu B)%s",
            shim_entry_name(e), requested, device, 207001,
            st.free_bytes >= granted ? "fragmentation" : "exhausted", want, granted, free_s,
            largest_s, st.largest_free_bytes,
            npupool_opt.fallback ? "; the runtime refused the fallback too" : "");
    }
    report_oom_info_t info = {
        .requested_bytes = requested,
        .granted_bytes = granted,
        .device = device,
        .entry_point = shim_entry_name(e),
        .free_bytes = st.free_bytes,
        .largest_free_bytes = st.largest_free_bytes,
        .stack_id = stack,
    };
    report_oom(&info);
}

void observe_before_reset(int device)
{
    if (ledger_live_count(device) > 0) report_write(REPORT_RESET, device);
}

void observe_after_reset(int device) { ledger_drop_device(device); }

void observe_before_finalize(void) { report_at_finalize(); }

void observe_at_exit(void)
{
    trace_flush();
    report_at_exit();
}

void observe_atfork_prepare_capture(void) { ledger_atfork_prepare_capture(); }
void observe_atfork_prepare_reports(void) { report_atfork_prepare(); }
void observe_atfork_parent_reports(void) { report_atfork_parent(); }
void observe_atfork_child_reports(void) { report_atfork_child(); }

void observe_atfork_prepare(void)
{
    ledger_atfork_prepare();
    trace_atfork_prepare();
}

void observe_atfork_parent(void)
{
    trace_atfork_parent();
    ledger_atfork_parent();
}

void observe_atfork_child(void)
{
    trace_atfork_child();
    ledger_atfork_child();
}
