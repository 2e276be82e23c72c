/* tools/replay.h — running a parsed trace through an allocator (npupool's pool, or a baseline).
 *
 * Owns: the replay engine behind `npupool replay`: one allocator instance per device of the trace
 * over a made-up address range (nothing is ever read or written there), the bookkeeping of what
 * each allocation got (pool block, fallback, refused) and the figures printed.  The pool is the
 * very code of pool/ (libnpupool_pool.a), not a copy, in either backing: a block pool, or a vmm
 * pool shaped as the shim makes it (POOL_VMM_VA_RATIO, the chunk size) over a simulated
 * backing that never refuses (maps and unmaps are counted, not made).
 * Invariants: within one run, slot s is live in at most one place; a free of a refused allocation
 * is ignored (the application never got the memory); refused allocations are not retried.
 */
#ifndef NPUPOOL_TOOLS_REPLAY_H
#define NPUPOOL_TOOLS_REPLAY_H

#include "cli.h"
#include "trace_read.h"

#include <stddef.h>
#include <stdint.h>

struct replay_opts;
struct replay_dev;

/* The allocator under test.  alloc returns 0 or -1 (cannot serve); free returns 0 or -1. */
typedef struct replay_allocator {
    const char *name; /* "pool", "firstfit" */
    uint64_t align;   /* bytes a block size is rounded to */
    /* NULL on bad size / no memory; o: the replay's options (the vmm pool's chunk size) */
    void *(*create)(uintptr_t base, size_t size, const struct replay_opts *o);
    void (*destroy)(void *a);
    int (*alloc)(void *a, size_t requested, size_t granted, uintptr_t *out);
    int (*free)(void *a, uintptr_t addr);
    /* allocated = sum of block sizes in use; free = sum of free bytes; largest = largest free block */
    void (*stats)(void *a, uint64_t *allocated, uint64_t *free_bytes, uint64_t *largest_free);
    int (*check)(void *a); /* invariant violations (0 = consistent); may be NULL */
    /* at the end of a run: the backing's figures into d (may be NULL) */
    void (*backing)(void *a, struct replay_dev *d);
} replay_allocator_t;

extern const replay_allocator_t replay_pool_allocator;     /* npupool's pool (pool/), a block */
extern const replay_allocator_t replay_pool_vmm_allocator; /* the same, vmm backing */
extern const replay_allocator_t replay_firstfit_allocator; /* the seed's first fit (firstfit.h) */

enum replay_rounding {
    REPLAY_ROUND_ACL = 0,     /* aclrtMalloc / Cached: ALIGN_UP(size, 32) + 32 */
    REPLAY_ROUND_ALIGN32 = 1, /* aclrtMallocAlign32: ALIGN_UP(size, 32) */
    REPLAY_ROUND_NONE = 2,    /* the requested size as is */
};

/* The state after one replayed event, for an observer (replay_opts_t.observe). */
typedef struct replay_point {
    size_t event;          /* index of the event in the trace */
    int device;            /* its device index */
    int action;            /* enum trace_action */
    int refused;           /* TRACE_ALLOC: the allocator refused it */
    int failure_served;    /* TRACE_FAIL: this allocator could have served it */
    uint64_t size;         /* requested bytes of the event */
    uint64_t allocated;    /* bytes: live granted bytes in the allocator */
    uint64_t reserved;     /* bytes: the pool + live fallback (granted) bytes */
    uint64_t requested;    /* bytes: live requested bytes, pool and fallback */
    uint64_t free_bytes;   /* bytes free in the pool */
    uint64_t largest_free; /* bytes: the largest free block */
} replay_point_t;

typedef struct replay_opts {
    const replay_allocator_t *alloc; /* allocator under test */
    uint64_t pool_bytes;             /* size of each device's pool (vmm: its limit, rounded down
                                        to chunks) */
    uint64_t chunk_bytes;            /* vmm: bytes per chunk, 0 = POOL_VMM_CHUNK_DEFAULT */
    int fallback;                    /* 1: a refused request is served outside the pool */
    int rounding;                    /* enum replay_rounding */
    int only_device;                 /* device index to replay, -1 = all */
    int stop_on_refusal;             /* stop at the first refusal (min-pool probing) */
    int check_every_op;              /* call alloc->check after every event (tests) */
    uint64_t stats_stride;           /* sample fragmentation every N events (0 = auto) */
    /* Called after every event of a replayed device with the allocator's figures then (NULL:
     * never); costs one stats call per event. */
    void (*observe)(void *ctx, const replay_point_t *pt);
    void *observe_ctx; /* its first argument */
} replay_opts_t;

typedef struct replay_dev {
    uint64_t allocs;          /* allocation events replayed */
    uint64_t served;          /* served by the allocator */
    uint64_t refused;         /* the allocator could not serve */
    uint64_t refused_bytes;   /* requested bytes of those */
    uint64_t fallback;        /* refused ones served outside the pool (fallback on) */
    uint64_t frees;           /* frees replayed */
    uint64_t source_failures; /* RMM "allocate failure" events */
    uint64_t failures_served; /* of those, ones this allocator could serve */
    uint64_t peak_requested;  /* bytes: high-water mark of live requested bytes */
    uint64_t peak_allocated;  /* bytes: high-water mark of allocator bytes in use */
    uint64_t peak_fallback;   /* bytes: high-water mark of live fallback (granted) bytes */
    uint64_t peak_reserved;   /* bytes: pool size + peak_fallback */
    uint64_t live_requested;  /* bytes: live requested bytes at the end */
    uint64_t final_free;      /* bytes: free in the pool at the end */
    uint64_t final_largest;   /* bytes: largest free block at the end */
    double final_frag;        /* 1 - largest/free at the end */
    double worst_frag;        /* largest sampled 1 - largest/free (sampled, and at every refusal) */
    uint64_t worst_frag_event; /* event index where worst_frag was seen */
    uint64_t first_refusal;    /* event index of the first refusal (valid when refused > 0) */
    int vmm;                   /* the backing below was a vmm pool's */
    uint64_t stitches;         /* vmm: slow paths that remapped free chunks */
    uint64_t chunks_moved;     /* vmm: chunks unmapped and mapped again elsewhere */
    uint64_t va_refusals;      /* vmm: refusals for want of an unmapped stretch of the range */
} replay_dev_t;

typedef struct replay_result {
    int ndevices;                        /* = trace ndevices */
    replay_dev_t dev[TRACE_MAX_DEVICES]; /* per device index */
    uint64_t events;                     /* events replayed */
    double seconds;                      /* wall time of the replay loop */
    int stopped;                         /* 1 when stop_on_refusal ended it early */
    int violations;                      /* check() violations seen (check_every_op) */
} replay_result_t;

/* Bytes that belong to a block of `size` requested bytes under `rounding`. */
uint64_t replay_granted(uint64_t size, int rounding);

/* Run the trace.  Returns 0, or -1 when an allocator cannot be created (message printed). */
int replay_run(const trace_t *t, const replay_opts_t *o, replay_result_t *r);

/* Lower bound for any pool: high-water mark of live granted bytes, each rounded up to `align`. */
uint64_t replay_live_peak(const trace_t *t, int device, int rounding, uint64_t align);

/* The resolution the minimum-pool search works at: `resolution` (0: 64), rounded up to whole
 * chunks for a vmm pool (its limit is a chunk multiple). */
uint64_t replay_resolution(const replay_opts_t *o, uint64_t resolution);

/* Smallest pool size (a multiple of replay_resolution, >= 64) for which device `device`
 * replays with no refusal, by bisection between the live peak and the first feasible doubling.
 * Assumes feasibility is monotonic in the pool size (the answer is checked to be feasible).
 * Returns 0 when no pool up to 2^50 bytes works.  *probes receives the replays run. */
uint64_t replay_min_pool(const trace_t *t, int device, const replay_opts_t *o, uint64_t resolution,
                         int *probes);

/* The options that choose the pool a trace is replayed through, shared by the commands that
 * replay (replay, export): their cli.h table entries at the given indexes, in this order.  The
 * words of ROUNDING are enum replay_rounding in order; FALLBACK's are 0 and 1. */
#define REPLAY_POOL_OPTS(POOL_BYTES, RATIO, DEVICE_BYTES, FALLBACK, ROUNDING, BACKING,        \
                         CHUNK_BYTES)                                                         \
    [POOL_BYTES] = {"pool-bytes",                                                             \
                    0,                                                                        \
                    CLI_SIZE,                                                                 \
                    "N",                                                                      \
                    NULL,                                                                     \
                    CLI_POSITIVE,                                                             \
                    "pool size per device (suffixes K, M, G, T; e.g. 12G)"},                  \
    [RATIO] = {"ratio",                                                                       \
               0,                                                                             \
               CLI_FRACTION,                                                                  \
               "R",                                                                           \
               "0.8",                                                                         \
               CLI_ALT,                                                                       \
               "pool = R x --device-bytes, as NPUPOOL_RATIO"},                                \
    [DEVICE_BYTES] =                                                                          \
        {"device-bytes", 0, CLI_SIZE, "N", "64G", CLI_POSITIVE, "device memory for --ratio"}, \
    [FALLBACK] = {"fallback",                                                                 \
                  0,                                                                          \
                  CLI_CHOICE,                                                                 \
                  "0|1",                                                                      \
                  "1",                                                                        \
                  0,                                                                          \
                  "1: a request the pool cannot serve goes outside it;\n"                     \
                  "0: it is refused, as with NPUPOOL_FALLBACK=0"},                            \
    [ROUNDING] = {"rounding",                                                                 \
                  0,                                                                          \
                  CLI_CHOICE,                                                                 \
                  "acl|align32|none",                                                         \
                  "acl",                                                                      \
                  0,                                                                          \
                  "bytes that belong to a block: acl = ALIGN_UP(size,32)+32 (aclrtMalloc),\n" \
                  "align32 = ALIGN_UP(size,32) (aclrtMallocAlign32), none"},                  \
    [BACKING] = {"backing",                                                                   \
                 0,                                                                           \
                 CLI_CHOICE,                                                                  \
                 "vmm|block",                                                                 \
                 "vmm",                                                                       \
                 0,                                                                           \
                 "the pool's backing, as the shim's: vmm = chunks mapped into an address\n"   \
                 "range (NPUPOOL_VMM=1 where the runtime has the API; they stitch and\n"      \
                 "give back), block = one runtime allocation (NPUPOOL_VMM=0)"},               \
    [CHUNK_BYTES] = {"chunk-bytes",                                                           \
                     0,                                                                       \
                     CLI_SIZE,                                                                \
                     "N",                                                                     \
                     "2M",                                                                    \
                     CLI_POSITIVE,                                                            \
                     "vmm: bytes per chunk, as NPUPOOL_CHUNK_BYTES (a power of two)"}

/* The pool those options choose: o->alloc becomes the vmm pool where *pool_alloc is the block
 * pool and BACKING says vmm (its first word), o->chunk_bytes the chunk.  Returns TOOLS_OK, or
 * TOOLS_BAD after one line on stderr when the chunk is not a power of two from 64 KiB to 1 GiB. */
int replay_choose_backing(const cli_val_t *backing, const cli_val_t *chunk_bytes, replay_opts_t *o);

/* The pool size those options give: --pool-bytes, else --ratio x --device-bytes (64-byte
 * multiple). */
uint64_t replay_pool_bytes(const cli_val_t *pool_bytes, const cli_val_t *ratio,
                           const cli_val_t *device_bytes);

/* The minimum pool, verified: a larger pool can do worse (the largest free run depends on
 * where earlier blocks landed), so after the bisection `verify` larger sizes are replayed too:
 * evenly spaced (at the resolution) over (min, min + min/4], and a quarter as many over the
 * rest up to the first feasible doubling.  safe = min when all of them serve; else the
 * smallest checked size above every checked size that refused. */
typedef struct replay_min_pool_result {
    uint64_t min;           /* bisection's answer (0: no pool up to 2^50 serves) */
    uint64_t safe;          /* serves, and so does every checked larger size */
    uint64_t checked;       /* larger sizes replayed */
    uint64_t checked_to;    /* the largest of them */
    uint64_t refused;       /* of them, sizes that refused a request */
    uint64_t first_refused; /* the smallest such size */
    uint64_t last_refused;  /* the largest such size */
    int probes;             /* replays run in all */
} replay_min_pool_result_t;
void replay_min_pool_verified(const trace_t *t, int device, const replay_opts_t *o,
                              uint64_t resolution, int verify, replay_min_pool_result_t *r);

#endif /* NPUPOOL_TOOLS_REPLAY_H */
