/* bench/peers/ptimer.c — calibration of the region timer (ptimer.h). */
#include "ptimer.h"

#include <stdlib.h>
#include <time.h>

ptimer_cal_t ptimer_cal = {PTIMER_SOURCE, 1.0, 0.0, 1.0};

double ptimer_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

double ptimer_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_ticks(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void ptimer_sort(uint64_t *v, size_t n) { qsort(v, n, sizeof *v, cmp_ticks); }

void ptimer_calibrate(void)
{
    double w0 = ptimer_wall_ns(), w1;
    uint64_t c0 = ptimer_begin();
    do w1 = ptimer_wall_ns();
    while (w1 - w0 < 200e6);
    uint64_t c1 = ptimer_end();
    ptimer_cal.ns_per_tick = (w1 - w0) / (double)(c1 - c0);

    enum { EMPTY = 200000, STEPS = 20000 };
    uint64_t *v = malloc(EMPTY * sizeof *v);
    if (v) {
        for (size_t i = 0; i < EMPTY; i++) {
            uint64_t a = ptimer_begin();
            v[i] = ptimer_end() - a;
        }
        ptimer_sort(v, EMPTY);
        ptimer_cal.overhead_ticks = (double)v[EMPTY / 2];
        free(v);
    }
    uint64_t step = UINT64_MAX;
    for (int i = 0; i < STEPS; i++) {
        uint64_t a = ptimer_begin(), b;
        while ((b = ptimer_begin()) == a) {
        }
        if (b - a < step) step = b - a;
    }
    ptimer_cal.resolution_ticks = (double)step;
}

double ptimer_ns(uint64_t ticks)
{
    double t = (double)ticks - ptimer_cal.overhead_ticks;
    return t > 0 ? t * ptimer_cal.ns_per_tick : 0.0;
}
