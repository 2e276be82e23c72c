/* base/vocab.h — npupool's vocabulary: devices, entry points and origins, one list each.
 *
 * Owns: the device-id limit and the names that the shim records, the ledger stores, the reports
 * write and the tools read.  Every name table is generated from the lists below, so an entry
 * point or origin added here is known everywhere at once.
 *   - Devices: ids 0 .. NPUPOOL_MAX_DEVICES-1 are tracked per device; any other id (the runtime
 *     would not know it, or an id the shim could not learn) is VOCAB_DEVICE_UNKNOWN (-1) from the
 *     hook to the report.
 *   - Entry points: the ACL calls whose allocations the ledger records.
 *   - Origins: who served an allocation.  The ledger keeps an origin in 2 bits: at most 4.
 */
#ifndef NPUPOOL_BASE_VOCAB_H
#define NPUPOOL_BASE_VOCAB_H

#define NPUPOOL_MAX_DEVICES 64    /* device ids 0..63 have per-device state */
#define VOCAB_DEVICE_UNKNOWN (-1) /* every other device id */

static inline int vocab_device_known(int device)
{
    return device >= 0 && device < NPUPOOL_MAX_DEVICES;
}
/* The id to record for `device`: itself when known, else VOCAB_DEVICE_UNKNOWN. */
static inline int vocab_device(int device)
{
    return vocab_device_known(device) ? device : VOCAB_DEVICE_UNKNOWN;
}

/* X(ENUM, "name"): the recorded entry points, in a fixed order (it is part of no file format:
 * files carry the names). */
#define VOCAB_ENTRIES(X)                      \
    X(MALLOC, "aclrtMalloc")                  \
    X(MALLOC_ALIGN32, "aclrtMallocAlign32")   \
    X(MALLOC_CACHED, "aclrtMallocCached")     \
    X(MALLOC_WITH_CFG, "aclrtMallocWithCfg")  \
    X(MALLOC_PHYSICAL, "aclrtMallocPhysical") \
    X(MAP_MEM, "aclrtMapMem")

enum vocab_entry {
#define VOCAB_ENTRY_ENUM(e, name) VOCAB_##e,
    VOCAB_ENTRIES(VOCAB_ENTRY_ENUM)
#undef VOCAB_ENTRY_ENUM
        VOCAB_ENTRY_COUNT
};

/* X(ENUM, "name"): who served an allocation. */
#define VOCAB_ORIGINS(X)                                                                       \
    X(POOL, "pool")               /* npupool's pool */                                         \
    X(FALLBACK, "fallback")       /* the runtime, because the pool could not */                \
    X(PASSTHROUGH, "passthrough") /* the runtime, because the pool does not serve this kind */ \
    X(OBSERVED, "observed")       /* the runtime, because npupool only observes (NPUPOOL_MODE) */

enum vocab_origin {
#define VOCAB_ORIGIN_ENUM(e, name) VOCAB_FROM_##e,
    VOCAB_ORIGINS(VOCAB_ORIGIN_ENUM)
#undef VOCAB_ORIGIN_ENUM
        VOCAB_ORIGIN_COUNT
};
_Static_assert(VOCAB_ORIGIN_COUNT <= 4, "the ledger stores an origin in 2 bits");

static inline const char *vocab_entry_name(enum vocab_entry e)
{
    static const char *const names[] = {
#define VOCAB_ENTRY_NAME(e, name) name,
        VOCAB_ENTRIES(VOCAB_ENTRY_NAME)
#undef VOCAB_ENTRY_NAME
    };
    return (unsigned)e < VOCAB_ENTRY_COUNT ? names[e] : "unknown";
}

static inline const char *vocab_origin_name(enum vocab_origin o)
{
    static const char *const names[] = {
#define VOCAB_ORIGIN_NAME(e, name) name,
        VOCAB_ORIGINS(VOCAB_ORIGIN_NAME)
#undef VOCAB_ORIGIN_NAME
    };
    return (unsigned)o < VOCAB_ORIGIN_COUNT ? names[o] : "unknown";
}

#endif
