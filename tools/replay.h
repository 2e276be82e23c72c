/* tools/replay.h — running a parsed trace through an allocator (npupool's pool, or a baseline).
 *
 * Owns: the replay engine behind `npupool replay`: one allocator instance per device of the trace
 * over a made-up address range (nothing is ever read or written there), the bookkeeping of what
 * each allocation got (pool block, fallback, refused) and the figures printed.  The pool is the
 * very code of pool/ (libnpupool_pool.a), not a copy.
 * Invariants: within one run, slot s is live in at most one place; a free of a refused allocation
 * is ignored (the application never got the memory); refused allocations are not retried.
 */
#ifndef NPUPOOL_TOOLS_REPLAY_H
#define NPUPOOL_TOOLS_REPLAY_H

#include "cli.h"
#include "trace_read.h"

#include <stddef.h>
#include <stdint.h>

/* The allocator under test.  alloc returns 0 or -1 (cannot serve); free returns 0 or -1. */
typedef struct replay_allocator {
    const char *name;                             /* "pool", "firstfit" */
    uint64_t align;                               /* bytes a block size is rounded to */
    void *(*create)(uintptr_t base, size_t size); /* NULL on bad size / no memory */
    void (*destroy)(void *a);
    int (*alloc)(void *a, size_t requested, size_t granted, uintptr_t *out);
    int (*free)(void *a, uintptr_t addr);
    /* allocated = sum of block sizes in use; free = sum of free bytes; largest = largest free block */
    void (*stats)(void *a, uint64_t *allocated, uint64_t *free_bytes, uint64_t *largest_free);
    int (*check)(void *a); /* invariant violations (0 = consistent); may be NULL */
} replay_allocator_t;

extern const replay_allocator_t replay_pool_allocator;     /* npupool's pool (pool/) */
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
    uint64_t pool_bytes;             /* size of each device's pool */
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

/* Smallest pool size (a multiple of `resolution`, >= 64) for which device `device` replays with
 * no refusal, by bisection between the live peak and the first feasible doubling.  Assumes
 * feasibility is monotonic in the pool size (the answer is checked to be feasible).
 * Returns 0 when no pool up to 2^50 bytes works.  *probes receives the replays run. */
uint64_t replay_min_pool(const trace_t *t, int device, const replay_opts_t *o, uint64_t resolution,
                         int *probes);

/* The options that choose the pool a trace is replayed through, shared by the commands that
 * replay (replay, export): their cli.h table entries at the given indexes, in this order.  The
 * words of ROUNDING are enum replay_rounding in order; FALLBACK's are 0 and 1. */
#define REPLAY_POOL_OPTS(POOL_BYTES, RATIO, DEVICE_BYTES, FALLBACK, ROUNDING)                 \
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
                  "align32 = ALIGN_UP(size,32) (aclrtMallocAlign32), none"}

/* The pool size those options give: --pool-bytes, else --ratio x --device-bytes (64-byte
 * multiple). */
uint64_t replay_pool_bytes(const cli_val_t *pool_bytes, const cli_val_t *ratio,
                           const cli_val_t *device_bytes);

#endif /* NPUPOOL_TOOLS_REPLAY_H */
