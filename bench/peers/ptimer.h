/* bench/peers/ptimer.h — a cycle-counter timer for one short operation (ptimer.c), shared by the
 * benchmarks that time single free+malloc pairs.
 *
 * Owns: the read of the counter around a timed region and its conversion to nanoseconds.
 * Method (as bench/bench_pool.c): on x86-64 `lfence; rdtsc` opens the region (earlier loads
 * and stores are done before the read) and `rdtscp; lfence` closes it (the region's work is
 * done before, nothing later starts before); on aarch64 `isb; mrs cntvct_el0`; elsewhere
 * CLOCK_MONOTONIC.  ptimer_calibrate()
 * measures the tick rate against CLOCK_MONOTONIC (200 ms), the cost of an empty region (the
 * median of 200,000, subtracted from every sample by ptimer_ns) and the smallest step the
 * counter makes (virtual machines may advance it coarsely).
 */
#ifndef NPUPOOL_BENCH_PTIMER_H
#define NPUPOOL_BENCH_PTIMER_H

#include <stddef.h>
#include <stdint.h>

typedef struct ptimer_cal {
    const char *source;      /* "rdtsc" or "clock_gettime" */
    double ns_per_tick;      /* from the calibration against CLOCK_MONOTONIC */
    double overhead_ticks;   /* median empty region */
    double resolution_ticks; /* smallest counter step seen */
} ptimer_cal_t;

extern ptimer_cal_t ptimer_cal;

/* Fill ptimer_cal (about 0.3 s). */
void ptimer_calibrate(void);

/* Ticks of a region, less the empty region's cost, in ns (never below 0). */
double ptimer_ns(uint64_t ticks);

/* CLOCK_MONOTONIC in ns. */
double ptimer_wall_ns(void);

/* The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) in ns. */
double ptimer_thread_cpu_ns(void);

/* The q-quantile (0..1) of n samples sorted ascending (the sample at index floor(q n)). */
static inline uint64_t ptimer_quantile(const uint64_t *sorted, size_t n, double q)
{
    size_t i = (size_t)(q * (double)n);
    return sorted[i < n ? i : n - 1];
}

/* Sort n tick samples ascending. */
void ptimer_sort(uint64_t *v, size_t n);

#if defined(__x86_64__)
static inline uint64_t ptimer_begin(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}
static inline uint64_t ptimer_end(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    return (uint64_t)hi << 32 | lo;
}
#define PTIMER_SOURCE "rdtsc"
#elif defined(__aarch64__)
/* The generic timer's virtual count; isb keeps the read from moving across the region. */
static inline uint64_t ptimer_begin(void)
{
    uint64_t v;
    __asm__ volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v)::"memory");
    return v;
}
static inline uint64_t ptimer_end(void) { return ptimer_begin(); }
#define PTIMER_SOURCE "cntvct_el0"
#else
static inline uint64_t ptimer_begin(void) { return (uint64_t)ptimer_wall_ns(); }
static inline uint64_t ptimer_end(void) { return ptimer_begin(); }
#define PTIMER_SOURCE "clock_gettime"
#endif

#endif /* NPUPOOL_BENCH_PTIMER_H */
