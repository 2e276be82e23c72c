/* base/clock.c — see clock.h. */
#include "clock.h"

#include <time.h>

static uint64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t clock_mono_ns(void) { return read_ns(CLOCK_MONOTONIC); }
uint64_t clock_coarse_ns(void) { return read_ns(CLOCK_MONOTONIC_COARSE); }

double clock_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
