/* report/monitor.c — pool-use thresholds: a warning line and report when a device's pool use
 * crosses NPUPOOL_WARN_RATIO or NPUPOOL_CRITICAL_RATIO upwards.
 *
 * Owns: one monitor per device (NPUPOOL_MAX_DEVICES), the growth-rate samples, and the crossing
 * each monitor still owes a report for.
 * Lock-free: the allocation path calls report_usage_changed (a few loads and compares unless a
 * level changes).  Per device, `level` moves up by compare-and-swap; the winner prints the line
 * and writes the `threshold` report at once, on its own thread, so that the report shows the pool
 * at the crossing; when another report holds the report lock it records the crossing and wakes
 * the reporter thread instead (monitor_write_pending), never waiting.  Samples for the growth rate are taken at most once a second by the
 * caller that wins the `last_sample_ns` exchange.  A level re-arms once use falls
 * MON_HYSTERESIS below it.
 * Growth rate (after the seed's MemoryMonitor): allocated bytes now minus the oldest sample of
 * the last minute, over the time between them (since the monitors started when there is no older
 * sample); predicted time to OOM = (reserved - allocated) / rate, none when not growing, and
 * neither when the window is shorter than MON_RATE_MIN_NS (10 s).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "fmt.h"
#include "log.h"
#include "report_internal.h"

#define MON_RING 64                          /* growth-rate samples kept per device */
#define MON_SAMPLE_NS 1000000000ull          /* at most one sample a second */
#define MON_HYSTERESIS 0.05                  /* a level re-arms when use falls this far below it */
#define MON_RATE_MIN_NS (10 * MON_SAMPLE_NS) /* no growth rate from less history than this */

typedef struct monitor {
    _Atomic int level;                   /* highest level announced since re-armed: 0, 1, 2 */
    _Atomic int pending;                 /* 1: the reporter thread owes a threshold report */
    _Atomic uint64_t last_sample_ns;     /* coarse time of the newest sample (the cheap gate) */
    _Atomic uint64_t sample_t[MON_RING]; /* sample times, clock_mono_ns() (0 = empty) */
    _Atomic uint64_t sample_a[MON_RING]; /* allocated bytes at those times */
    _Atomic uint32_t sample_next;        /* ring position of the next sample */
    _Atomic uint64_t x_alloc;            /* allocated bytes at the last crossing */
    _Atomic uint64_t x_reserved;         /* reserved bytes at the last crossing */
    _Atomic uint64_t x_rate_bits;   /* growth rate at the crossing (double bits, NAN = unknown) */
    _Atomic uint64_t x_window_bits; /* the rate's window in seconds (double bits) */
    _Atomic int x_level;            /* level of the last crossing */
} monitor_t;

static _Atomic int thresholds_on;             /* 1 when a ratio is configured */
static _Atomic uint64_t warn_bits, crit_bits; /* the ratios as double bits (read lock-free) */
static _Atomic uint64_t quiet_below;          /* floor(1024 x the lowest ratio): a device at no
                                                 level whose allocated * 1024 < reserved * this
                                                 is below every threshold (0 = no such test) */
static _Atomic uint64_t mon_start_ns;         /* monitors' time origin */
static monitor_t monitors[NPUPOOL_MAX_DEVICES];

static double bits_to_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t double_to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

REPORT_HIDDEN void monitor_configure(double warn_ratio, double critical_ratio)
{
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&mon_start_ns, &zero, clock_mono_ns());
    atomic_store(&warn_bits, double_to_bits(warn_ratio));
    atomic_store(&crit_bits, double_to_bits(critical_ratio));
    double lowest = warn_ratio > 0 && (critical_ratio <= 0 || warn_ratio < critical_ratio)
                        ? warn_ratio
                        : critical_ratio;
    atomic_store(&quiet_below, lowest > 0 ? (uint64_t)(lowest * 1024.0) : 0);
    atomic_store(&thresholds_on, warn_ratio > 0 || critical_ratio > 0);
}

int report_usage_watched(void)
{
    return atomic_load_explicit(&thresholds_on, memory_order_relaxed);
}

REPORT_HIDDEN void monitor_reset(void)
{
    for (int d = 0; d < NPUPOOL_MAX_DEVICES; d++) {
        atomic_store(&monitors[d].level, 0);
        atomic_store(&monitors[d].pending, 0);
    }
}

/* coarse: clock_coarse_ns() (a few ns); the precise clock is read only when a sample is taken. */
static __attribute__((noinline)) void monitor_take_sample(monitor_t *m, uint64_t last,
                                                          uint64_t coarse, size_t allocated)
{
    if (!atomic_compare_exchange_strong(&m->last_sample_ns, &last, coarse)) return;
    uint32_t i = atomic_fetch_add_explicit(&m->sample_next, 1, memory_order_relaxed) % MON_RING;
    atomic_store_explicit(&m->sample_a[i], allocated, memory_order_relaxed);
    atomic_store_explicit(&m->sample_t[i], clock_mono_ns(), memory_order_release);
}

/* Growth of allocated bytes per second over the last minute: now minus the oldest sample of the
 * last minute (or the monitors' start, when nothing was allocated before it), over the time
 * between them.  NAN when that window is shorter than MON_RATE_MIN_NS: a rate measured over a
 * burst of milliseconds predicts nothing. */
static double monitor_rate(monitor_t *m, uint64_t now, size_t allocated, double *window_s)
{
    uint64_t best_t = 0, best_a = 0;
    for (int i = 0; i < MON_RING; i++) {
        uint64_t t = atomic_load_explicit(&m->sample_t[i], memory_order_acquire);
        if (!t || t >= now || now - t > 60 * MON_SAMPLE_NS) continue;
        if (!best_t || t < best_t) {
            best_t = t;
            best_a = atomic_load_explicit(&m->sample_a[i], memory_order_relaxed);
        }
    }
    uint64_t start = atomic_load(&mon_start_ns);
    if ((!best_t || now - best_t < MON_RATE_MIN_NS) && start && now - start <= 60 * MON_SAMPLE_NS) {
        best_t = start; /* the start of the process's monitoring: nothing was allocated before */
        best_a = 0;
    }
    *window_s = best_t && now > best_t ? (double)(now - best_t) * 1e-9 : 0.0;
    if (!best_t || now - best_t < MON_RATE_MIN_NS) return NAN;
    return ((double)allocated - (double)best_a) / ((double)(now - best_t) * 1e-9);
}

static const char *human_duration(double s, char *buf, size_t len)
{
    if (s < 0)
        snprintf(buf, len, "never (not growing)");
    else if (s < 10)
        snprintf(buf, len, "~%.1f s", s);
    else if (s < 120)
        snprintf(buf, len, "~%.0f s", s);
    else if (s < 7200)
        snprintf(buf, len, "~%.0f min", s / 60);
    else if (s < 172800)
        snprintf(buf, len, "~%.1f h", s / 3600);
    else
        snprintf(buf, len, "~%.1f days", s / 86400);
    return buf;
}

void report_usage_changed(int device, size_t allocated, size_t reserved)
{
    if (!atomic_load_explicit(&thresholds_on, memory_order_relaxed) || reserved == 0) return;
    report_usage_changed_at(device, allocated, reserved, clock_coarse_ns());
}

/* A level may have been crossed (pre: thresholds on, device known, reserved > 0).  Out of
 * line: its frame (six saved registers) cost every allocation when the quick test below shared
 * a function with it. */
static __attribute__((noinline)) void usage_levels(int device, monitor_t *m, size_t allocated,
                                                   size_t reserved)
{
    double warn = bits_to_double(atomic_load_explicit(&warn_bits, memory_order_relaxed));
    double crit = bits_to_double(atomic_load_explicit(&crit_bits, memory_order_relaxed));
    double u = (double)allocated / (double)reserved;
    int level = (crit > 0 && u >= crit) ? 2 : (warn > 0 && u >= warn) ? 1 : 0;
    int cur = atomic_load_explicit(&m->level, memory_order_relaxed);
    if (level == cur) return;
    if (level < cur) {
        /* Re-arm a level only once use is clearly (MON_HYSTERESIS) below it. */
        int target = (crit > 0 && u >= crit - MON_HYSTERESIS)   ? 2
                     : (warn > 0 && u >= warn - MON_HYSTERESIS) ? 1
                                                                : 0;
        if (target < cur) atomic_compare_exchange_strong(&m->level, &cur, target);
        return;
    }
    if (!atomic_compare_exchange_strong(&m->level, &cur, level)) return;
    double window_s;
    double rate = monitor_rate(m, clock_mono_ns(), allocated, &window_s);
    double remaining = (double)(reserved - (allocated < reserved ? allocated : reserved));
    double eta = isnan(rate) ? NAN : rate > 0 ? remaining / rate : -1.0;
    char a[FMT_BYTES_LEN], r[FMT_BYTES_LEN], g[128];
    fmt_bytes(a, allocated);
    fmt_bytes(r, reserved);
    if (isnan(rate)) {
        snprintf(g, sizeof g, "growth rate not known yet (%.1f s of history, %.0f s needed)",
                 window_s, (double)MON_RATE_MIN_NS * 1e-9);
    } else {
        char gb[FMT_BYTES_LEN], d[48];
        human_duration(eta, d, sizeof d);
        snprintf(g, sizeof g, "growing %s/s over %.0f s, OOM in %s",
                 fmt_bytes(gb, rate > 0 ? (uint64_t)rate : 0), window_s, d);
    }
    if (level == 2)
        log_error("device %d pool use %.1f%% crossed the critical threshold (%.0f%%): %s of %s "
                  "allocated, %s",
                  device, u * 100, crit * 100, a, r, g);
    else
        log_warn("device %d pool use %.1f%% crossed the warning threshold (%.0f%%): %s of %s "
                 "allocated, %s",
                 device, u * 100, warn * 100, a, r, g);
    /* The report of the crossing: written now, on this thread, so that it shows the pool as it
     * is at the crossing; when another report holds the report lock, the reporter thread writes
     * it as soon as it can (from the figures kept here). */
    report_threshold_info_t t = {
        .device = device,
        .level = level,
        .usage_ratio = u,
        .threshold_ratio = level >= 2 ? crit : warn,
        .allocated_bytes = allocated,
        .reserved_bytes = reserved,
        .growth_bytes_per_s = rate,
        .predicted_oom_s = eta,
        .rate_window_s = window_s,
    };
    if (report_write_threshold_now(&t)) return;
    atomic_store(&m->x_alloc, allocated);
    atomic_store(&m->x_reserved, reserved);
    atomic_store(&m->x_rate_bits, double_to_bits(rate));
    atomic_store(&m->x_window_bits, double_to_bits(window_s));
    atomic_store(&m->x_level, level);
    atomic_store(&m->pending, 1);
    reporter_wake(REPORTER_WAKE_THRESHOLD);
}

/* pre: thresholds on, device known, reserved > 0.  The test whether a level may have been
 * crossed: exactly and without a division, use clearly below the lowest ratio and no level
 * announced (allocated / reserved < quiet_below / 1024 <= the ratio) is the common case. */
static inline int usage_quiet(monitor_t *m, size_t allocated, size_t reserved)
{
    uint64_t quiet = atomic_load_explicit(&quiet_below, memory_order_relaxed);
    return quiet && atomic_load_explicit(&m->level, memory_order_relaxed) == 0 &&
           (unsigned __int128)allocated * 1024 < (unsigned __int128)reserved * quiet;
}

/* A sample is due (at most one a MON_SAMPLE_NS): take it, then test the levels. */
static __attribute__((noinline)) void usage_sampled(int device, monitor_t *m, size_t allocated,
                                                    size_t reserved, uint64_t last,
                                                    uint64_t coarse_ns)
{
    monitor_take_sample(m, last, coarse_ns, allocated);
    if (!usage_quiet(m, allocated, reserved)) usage_levels(device, m, allocated, reserved);
}

/* Every allocation's call: a few loads and compares, and calls only in their tail, so that the
 * common case saves no register. */
void report_usage_changed_at(int device, size_t allocated, size_t reserved, uint64_t coarse_ns)
{
    if (!atomic_load_explicit(&thresholds_on, memory_order_relaxed) || reserved == 0 ||
        !vocab_device_known(device))
        return;
    monitor_t *m = &monitors[device];
    uint64_t last = atomic_load_explicit(&m->last_sample_ns, memory_order_relaxed);
    if (!last || coarse_ns - last >= MON_SAMPLE_NS) {
        usage_sampled(device, m, allocated, reserved, last, coarse_ns);
        return;
    }
    if (!usage_quiet(m, allocated, reserved)) usage_levels(device, m, allocated, reserved);
}

REPORT_HIDDEN void monitor_write_pending(void)
{
    for (int d = 0; d < NPUPOOL_MAX_DEVICES; d++) {
        monitor_t *m = &monitors[d];
        if (!atomic_exchange(&m->pending, 0)) continue;
        report_threshold_info_t t;
        t.device = d;
        t.level = atomic_load(&m->x_level);
        t.allocated_bytes = atomic_load(&m->x_alloc);
        t.reserved_bytes = atomic_load(&m->x_reserved);
        t.usage_ratio =
            t.reserved_bytes ? (double)t.allocated_bytes / (double)t.reserved_bytes : 0.0;
        t.threshold_ratio = bits_to_double(atomic_load(t.level >= 2 ? &crit_bits : &warn_bits));
        t.growth_bytes_per_s = bits_to_double(atomic_load(&m->x_rate_bits));
        t.rate_window_s = bits_to_double(atomic_load(&m->x_window_bits));
        t.predicted_oom_s =
            isnan(t.growth_bytes_per_s) ? NAN
            : t.growth_bytes_per_s > 0
                ? (double)(t.reserved_bytes - t.allocated_bytes) / t.growth_bytes_per_s
                : -1.0;
        report_write_background(WIRE_TRIGGER_THRESHOLD, d, &t);
    }
}
