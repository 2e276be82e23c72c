/* base/splitmix.h — SplitMix64 (Steele, Lea and Flood, 2014): the seeded pseudo-random sequence
 * that the tests, the benchmarks and the trace generator share, so that one seed names one
 * sequence everywhere (the shipped traces and the benchmarks' operation sequences depend on it:
 * changing it changes them).  Statistically good enough for workloads; never for secrets.
 *
 * Owns: splitmix_next (the next 64 random bits; the state advances by the golden-ratio step)
 * and splitmix_unit (a double uniform in [0, 1), from the top 53 bits).  Header only.
 */
#ifndef NPUPOOL_BASE_SPLITMIX_H
#define NPUPOOL_BASE_SPLITMIX_H

#include <stdint.h>

static inline uint64_t splitmix_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double splitmix_unit(uint64_t *state)
{
    return (double)(splitmix_next(state) >> 11) / 9007199254740992.0; /* / 2^53 */
}

#endif
