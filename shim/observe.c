/* shim/observe.c — the shim's observers (see observe.h): the ledger (ledger/ledger.h) and its
 * file (ledger/ledger_file.h), the trace recorder (report/trace.h) and the report writer
 * (report/report.h).
 * The ledger file gets from here what only the shim knows: the options (as text, once), each
 * device's pool figures and counters (at most once a second per device, on the allocating or
 * freeing thread, with no lock held; and at exit), and the runtime library in use, named with
 * the first figures after it is known (the same answer the reports' "runtime" section gives).
 *
 * Order that matters: a free is written to the trace BEFORE the block goes back to the pool
 * (observe_forget; for a pool block observe_pool_forget, which pool_free_tagged's callback calls
 * once the block is found live, or observe_pool_freed under the pool lock), so that another
 * thread cannot be handed the same address, and trace its allocation, before the free.  A block
 * the runtime gave is forgotten by the ledger then too (its record is found by address).  A pool
 * block's record is forgotten by handle, never by address, so its forget may come later: it is
 * parked (ledger.h: ledger_release_tagged_later) and completed at the thread's next pool free or
 * by the ledger's next reader, whichever comes first; meanwhile no reader sees it.
 * A pool block's record is tagged (ledger.h): its handle lives in the block's tag in the pool,
 * so recording and forgetting it probe no index; ledger_lookup finds it from an address through
 * device_resolve_tag, a report's live map through ledger_lookup_sorted.
 * Locks: report_* functions take their own locks and the pools' and the ledger's; they are called
 * with no npupool lock held.
 */
#include "observe.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "buildid.h"
#include "elf_lookup.h"
#include "fmt.h"
#include "clock.h"
#include "ledger.h"
#include "ledger_file.h"
#include "log.h"
#include "options.h"
#include "real.h"
#include "report.h"
#include "trace.h"
#include "tstate.h"
#include "version.h"

static void for_each_device(void *ctx,
                            void (*cb)(void *cbctx, int device, pool_t *pool,
                                       const wire_counters_t *counters),
                            void *cbctx)
{
    (void)ctx;
    for (int dev = 0; dev < NPUPOOL_MAX_DEVICES; dev++) {
        wire_counters_t c;
        device_counters(dev, &c);            /* per-thread counts summed */
        pool_t *pool = device_pool_pin(dev); /* not destroyed by a reset meanwhile */
        int active =
            pool || c.allocs || c.real_allocs || c.invalid_frees || ledger_live_count(dev) > 0;
        if (active) cb(cbctx, dev, pool, &c);
        if (pool) device_pool_unpin();
    }
    wire_counters_t *u = &shim_unknown_device_counters;
    if (wire_counter_get(u, real_allocs) || wire_counter_get(u, invalid_frees) ||
        ledger_live_count(VOCAB_DEVICE_UNKNOWN) > 0)
        cb(cbctx, VOCAB_DEVICE_UNKNOWN, NULL, u);
}

static void for_each_option(void *ctx, void (*cb)(void *cbctx, const char *name, const char *value),
                            void *cbctx)
{
    (void)ctx;
    options_for_each(cb, cbctx);
}

/* The object that defines the real aclrtMalloc, its path and build id: looked for until found
 * (a report before the runtime is loaded says null), then kept.  Callers: the report writer and
 * the ledger file's figures (any thread): the first finder publishes (state 0 -> 1 -> 2), the
 * others wait the few stores it takes; no lock (buildid_of_address takes the loader's).  pre: no
 * npupool lock held. */
static void runtime_library(void *ctx, const char **library, const char **build_id)
{
    static char path[4096], bid[BUILDID_HEX_MAX];
    static int state; /* atomic: 0 not found, 1 being published, 2 found */
    (void)ctx;
    int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (st == 0) {
        void *fn = real_get(REAL_aclrtMalloc);
        char p[sizeof path] = "", b[sizeof bid] = "";
        if (fn) buildid_of_address(fn, b, sizeof b, p, sizeof p);
        if (p[0] &&
            __atomic_compare_exchange_n(&state, &st, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
            memcpy(path, p, sizeof path);
            memcpy(bid, b, sizeof bid);
            __atomic_store_n(&state, 2, __ATOMIC_RELEASE);
        }
    }
    while ((st = __atomic_load_n(&state, __ATOMIC_ACQUIRE)) == 1) sched_yield();
    *library = st == 2 ? path : NULL;
    *build_id = st == 2 && bid[0] ? bid : NULL;
}

/* Name the runtime in the ledger file's header once it is known.  pre: no npupool lock held. */
static void file_runtime(void)
{
    if (ledger_file_runtime_known()) return;
    const char *library, *build_id;
    runtime_library(NULL, &library, &build_id);
    if (library) ledger_file_runtime(library, build_id);
}

static void *glibc_dlsym(void *handle, const char *name)
{
    elf_dlsym_fn f = elf_glibc_dlsym();
    return f ? f(handle, name) : NULL;
}

/* The options as "NAME=VALUE\n" lines, for the ledger file's header. */
typedef struct config_text {
    char buf[4096]; /* the text */
    size_t n;       /* bytes used */
} config_text_t;

static void config_line(void *ctx, const char *name, const char *value)
{
    config_text_t *t = ctx;
    int w = snprintf(t->buf + t->n, sizeof t->buf - t->n, "%s=%s\n", name, value ? value : "");
    if (w > 0 && (size_t)w < sizeof t->buf - t->n) t->n += (size_t)w;
    t->buf[t->n] = 0; /* a line that does not fit is left out whole */
}

_Static_assert(POOL_NBUCKETS <= LFMT_MAX_BUCKETS, "the ledger file keeps every size class");

/* One device's figures into the ledger file.  pre: no npupool lock held (takes the pool's). */
static void file_figures(int device)
{
    lfmt_device_figs_t f;
    memset(&f, 0, sizeof f);
    f.mono_ns = clock_coarse_ns();
    f.device = device;
    pool_t *pool = vocab_device_known(device) ? device_pool_peek(device) : NULL;
    if (pool) {
        pool_stats_t st;
        pool_get_stats(pool, &st);
        f.has_pool = 1;
        f.pool_base = st.base;
        f.reserved_bytes = st.reserved_bytes;
        f.allocated_bytes = st.allocated_bytes;
        f.requested_bytes = st.requested_bytes;
        f.peak_allocated_bytes = st.peak_allocated_bytes;
        f.free_bytes = st.free_bytes;
        f.largest_free_bytes = st.largest_free_bytes;
        f.slab_free_bytes = st.slab_free_bytes;
        f.overhead_bytes = st.overhead_bytes;
        f.free_blocks = st.free_blocks;
        f.live_blocks = st.live_blocks;
        f.pool_allocs = st.allocs;
        f.pool_frees = st.frees;
        f.failed_allocs = st.failed_allocs;
        f.invalid_frees = st.invalid_frees;
        for (int k = 0; k < POOL_NBUCKETS; k++) {
            f.buckets[k] = (lfmt_bucket_t){.max_bytes = k < POOL_NBUCKETS - 1 ? pool_bucket_limit[k]
                                                                              : UINT64_MAX,
                                           .live_blocks = st.buckets[k].live_blocks,
                                           .live_bytes = st.buckets[k].live_bytes,
                                           .free_blocks = st.buckets[k].free_blocks,
                                           .free_bytes = st.buckets[k].free_bytes};
        }
        f.nbuckets = POOL_NBUCKETS;
    }
    wire_counters_t snap, *c = &snap;
    device_counters(device, &snap);
#define FILE_COUNTER(field, meaning) \
    if (f.ncounters < LFMT_MAX_COUNTERS) f.counters[f.ncounters++] = wire_counter_get(c, field);
    WIRE_COUNTERS(FILE_COUNTER)
#undef FILE_COUNTER
    ledger_file_device_put(&f);
    file_runtime(); /* the first figures come after the device's first allocation */
}

static void file_figures_cb(void *ctx, int device, pool_t *pool, const wire_counters_t *counters)
{
    (void)ctx, (void)pool, (void)counters;
    file_figures(device);
}

void observe_init(void)
{
    if (log_level_threshold >= LOG_INFO) { /* which npupool this is (phase 2: the loader's lock) */
        char bid[BUILDID_HEX_MAX], path[4096];
        buildid_of_address((const void *)&observe_init, bid, sizeof bid, path, sizeof path);
        log_info("npupool %s, %s (build id %s)", version_string(), path, bid[0] ? bid : "none");
    }
    npupool_config.ledger.dlsym = glibc_dlsym;
    static config_text_t config; /* the ledger copies it */
    options_for_each(config_line, &config);
    npupool_config.ledger.file_config = config.buf;
    ledger_init(&npupool_config.ledger);
    ledger_set_resolver(device_resolve_tag); /* pool blocks' records: through their tags */
    trace_open(npupool_config.trace);
    report_source_t src = {.for_each_device = for_each_device,
                           .for_each_option = for_each_option,
                           .runtime = runtime_library};
    report_init(&npupool_config.report, &src);
    report_start_background();
}

/* The depth test first, where it inlines: the capture itself never does (its frame count is
 * part of what it skips), and with backtraces off its call was all it cost. */
uint32_t observe_capture_stack(void)
{
    return ledger_backtrace_depth() > 0 ? ledger_stack_capture(0) : 0;
}

void observe_alloc(uintptr_t addr, int device, size_t requested, size_t granted, enum vocab_entry e,
                   enum vocab_origin origin, uint32_t stack)
{
    ledger_record_alloc(addr, device, requested, granted, e, origin, stack);
    if (e != VOCAB_MALLOC_PHYSICAL && e != VOCAB_MAP_MEM) trace_alloc(device, addr, requested);
    if (ledger_file_device_due(device)) file_figures(device);
}

uint32_t observe_pool_record(uintptr_t addr, int device, size_t requested, size_t granted,
                             enum vocab_entry e, uint32_t stack, uint64_t now)
{
    return ledger_record_alloc_tagged(addr, device, requested, granted, e, VOCAB_FROM_POOL, stack,
                                      now);
}

void observe_pool_alloc(uintptr_t addr, int device, size_t requested, size_t allocated,
                        size_t reserved, uint64_t now)
{
    trace_alloc(device, addr, requested);
    report_usage_changed_at(device, allocated, reserved, now);
    if (ledger_file_device_due(device)) file_figures(device);
}

/* The record's forget is parked (ledger.h): completed at this thread's next pool free, or by
 * the next reader of the ledger, whichever comes first. */
static void forget_parked(uint32_t tag, uintptr_t addr)
{
    tstate_t *t = tstate_self();
    ledger_release_tagged_later(t ? &t->parked : NULL, tag, addr);
}

void observe_pool_forget(uint32_t tag, uintptr_t addr, int device)
{
    if (tag) trace_free(device, addr); /* 0: the allocation was never recorded */
    forget_parked(tag, addr);
}

uint32_t observe_pool_freed(uint32_t tag, uintptr_t addr, int device)
{
    if (tag) trace_free(device, addr); /* 0: the allocation was never recorded */
    return tag;
}

void observe_pool_forget_deferred(uint32_t tag, uintptr_t addr) { forget_parked(tag, addr); }

int observe_forget(uintptr_t addr, int device, int traced)
{
    int known = ledger_record_free(addr);
    if (known && traced) trace_free(device, addr);
    return known;
}

void observe_usage(int device, size_t allocated, size_t reserved)
{
    report_usage_changed(device, allocated, reserved);        /* (reserved 0: no figures) */
    if (ledger_file_device_due(device)) file_figures(device); /* frees too */
}

void observe_oom(enum vocab_entry e, int device, size_t requested, size_t granted,
                 const pool_refusal_t *why, uint32_t stack)
{
    char reason[320];
    const char *kind;
    if (why) {
        kind = pool_refusal_name(why->kind);
        pool_refusal_describe(why, reason, sizeof reason);
    } else if (npupool_config.mode == NPUPOOL_MODE_OBSERVE) {
        kind = "runtime";
        snprintf(reason, sizeof reason,
                 "runtime: the runtime refused the request (observe mode: npupool holds no pool)");
    } else {
        kind = "no pool";
        snprintf(reason, sizeof reason,
                 "no pool: device %d has no pool (its reservation was refused) and the runtime "
                 "refused the request too",
                 device);
    }
    log_warn("%s(%zu bytes) on device %d refused with 207001: %s%s", vocab_entry_name(e), requested,
             device, reason,
             why && npupool_config.fallback ? "; the runtime refused the fallback too" : "");
    report_oom_info_t info = {
        .requested_bytes = requested,
        .granted_bytes = granted,
        .device = device,
        .entry = e,
        .stack_id = stack,
        .kind = kind,
        .reason = reason,
        .free_bytes = why ? why->free_bytes : 0,
        .largest_free_bytes = why ? why->usable_largest : 0,
    };
    report_oom(&info);
}

void observe_before_reset(int device)
{
    if (ledger_live_count(device) > 0) report_write(WIRE_TRIGGER_RESET, device);
}

void observe_after_reset(int device) { ledger_drop_device(device); }

void observe_before_finalize(void) { report_at_finalize(); }

void observe_at_exit(void)
{
    trace_flush();
    report_at_exit();
    if (ledger_file_path()) {
        for_each_device(NULL, file_figures_cb, NULL); /* the figures at exit */
        ledger_file_at_exit();
    }
}
