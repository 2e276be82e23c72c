/* bench/peers/ptrace.h — allocation traces for the fragmentation tables of bench_peers
 * (ptrace.c), and the pseudo-random numbers the peers' bench and test share.
 *
 * Owns: one compact trace form (allocation i has a requested size; events say "allocate i" or
 * "free i", in order) and its three sources:
 *   ptrace_tensor  the tensor scenario of bench/bench_frag.c, generated anew with its
 *                  parameters: fp32 tensors [b, s, 4096], b in {1,2,4,8,16,32}, s in
 *                  {128,...,2048}, ACL size ALIGN_UP(bytes, 32) + 32; lifetime in steps 90 %
 *                  log-uniform 1..32, 10 % log-uniform 100..2000; at step t the tensors whose
 *                  lifetime ends are freed (in random order), then tensor t is allocated;
 *   ptrace_mixed   small and large blocks together: `live` blocks log-uniform 512 B..8 MiB,
 *                  then `pairs` steps that free a uniformly chosen live block and allocate a
 *                  new one (few live blocks per size class: the mixed trace);
 *   ptrace_load    a trace file (npupool's format or RMM's CSV, tools/trace_read.h).
 * Every source records peak_live: the largest sum of requested bytes live at once.
 */
#ifndef NPUPOOL_BENCH_PTRACE_H
#define NPUPOOL_BENCH_PTRACE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ptrace_event {
    uint32_t id;   /* allocation number, 0..nallocs-1 */
    uint32_t free; /* 1: free allocation id; 0: allocate it */
} ptrace_event_t;

typedef struct ptrace {
    char name[64];      /* label for tables */
    size_t nallocs;     /* allocations */
    size_t *size;       /* [nallocs] requested bytes */
    ptrace_event_t *ev; /* events in order */
    size_t nev;         /* events */
    size_t peak_live;   /* largest sum of requested bytes live at once */
} ptrace_t;

/* 0, or -1 on host out of memory (*t is then empty). */
int ptrace_tensor(ptrace_t *t, size_t nallocs, uint64_t seed);
int ptrace_mixed(ptrace_t *t, size_t live, size_t pairs, uint64_t seed);
/* 0, or -1 when the file cannot be read (the reader printed why). */
int ptrace_load(ptrace_t *t, const char *path, const char *name);
void ptrace_release(ptrace_t *t);

/* ---- pseudo-random numbers (wyrand: one 64x64->128 multiply per number) -------------------- */
static inline uint64_t ptrace_rand(uint64_t *s)
{
    *s += 0xa0761d6478bd642full;
    __uint128_t m = (__uint128_t)*s * (*s ^ 0xe7037ed1a0b428dbull);
    return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

/* Uniform in [0, 1). */
static inline double ptrace_unit(uint64_t *s) { return (double)(ptrace_rand(s) >> 11) * 0x1p-53; }

/* Log-uniform integer in [lo, hi]. */
static inline size_t ptrace_log_uniform(uint64_t *s, size_t lo, size_t hi)
{
    double l = log((double)lo), h = log((double)hi + 1.0);
    size_t v = (size_t)exp(l + ptrace_unit(s) * (h - l));
    return v < lo ? lo : v > hi ? hi : v;
}

#endif /* NPUPOOL_BENCH_PTRACE_H */
