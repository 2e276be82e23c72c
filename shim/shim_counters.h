/* shim/shim_counters.h — per-device event counters kept by the shim.
 *
 * Owns: the counter struct the shim updates on its paths and the report writer reads.  Fields are
 * updated with relaxed atomic adds (counters_add) and read with relaxed loads; a reader may see a
 * slightly torn set across fields, never a torn field.
 */
#ifndef NPUPOOL_SHIM_COUNTERS_H
#define NPUPOOL_SHIM_COUNTERS_H

#include <stdint.h>

typedef struct shim_counters {
    uint64_t allocs;             /* allocations served by the pool */
    uint64_t frees;              /* pool blocks freed */
    uint64_t pool_bytes;         /* granted bytes of live pool blocks (threshold monitor) */
    uint64_t fallback_allocs;    /* pool could not serve: served by the real runtime */
    uint64_t fallback_frees;     /* fallback allocations freed */
    uint64_t fallback_bytes;     /* granted bytes of live fallback allocations */
    uint64_t passthrough_allocs; /* not poolable (policy/cfg/VMM): forwarded and recorded */
    uint64_t ooms;               /* requests answered 207001 */
    uint64_t invalid_frees;      /* double free, interior or unknown pointer */
    uint64_t forwarded_frees; /* frees of pointers npupool never handed out, sent to the runtime */
    uint64_t real_allocs;     /* allocation calls that reached the runtime (incl. reservations) */
    uint64_t real_frees;      /* free calls that reached the runtime */
    uint64_t pool_reservations;    /* pools created on this device (1 + one per reset) */
    uint64_t reservation_failures; /* refused reservation attempts (each back-off step) */
} shim_counters_t;

#define counters_add(c, field, n) __atomic_fetch_add(&(c)->field, (n), __ATOMIC_RELAXED)
#define counters_sub(c, field, n) __atomic_fetch_sub(&(c)->field, (n), __ATOMIC_RELAXED)
#define counters_get(c, field) __atomic_load_n(&(c)->field, __ATOMIC_RELAXED)

#endif
