/* base/clock.h — the clocks npupool reads.
 *
 * Owns: one function per clock, so that "which clock" is decided here once.
 *   clock_mono_ns    CLOCK_MONOTONIC, ns: durations, rates, trace time stamps.
 *   clock_coarse_ns  CLOCK_MONOTONIC_COARSE, ns (a few ms of resolution, a few ns to read): ledger
 *                    record ages, where a read per allocation must be cheap.
 *   clock_wall_s     CLOCK_REALTIME, seconds since the epoch: times printed for people.
 * All are async-signal-safe (clock_gettime is).
 */
#ifndef NPUPOOL_BASE_CLOCK_H
#define NPUPOOL_BASE_CLOCK_H

#include <stdint.h>

uint64_t clock_mono_ns(void);
uint64_t clock_coarse_ns(void);
double clock_wall_s(void);

#endif
