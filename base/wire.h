/* base/wire.h — the file formats npupool writes and its tools read, defined once.
 *
 * Owns: the names and fixed texts of every format, and the lists both sides iterate:
 *   - reports ("npupool-report/1", docs/report.md, docs/report-schema.json): the schema name, the
 *     default path pattern, the triggers, the per-device counters (name and meaning, in report
 *     order);
 *   - allocation traces ("npupool-trace/1", docs/trace.md): the header line's start and the
 *     column line;
 *   - the ledger file ("npupool-ledger/1"): its own header, base/ledger_format.h.
 * The writers (report/, shim/) and the readers (tools/) include this header; a change here is a
 * change of the format and bumps its version.
 */
#ifndef NPUPOOL_BASE_WIRE_H
#define NPUPOOL_BASE_WIRE_H

#include <stdint.h>

/* ---- reports ------------------------------------------------------------------------------ */
#define WIRE_REPORT_SCHEMA "npupool-report/1"
#define WIRE_REPORT_DEFAULT_PATH "npupool-report-%p-%n.json"

/* X(ENUM, "name"): why a report was written. */
#define WIRE_TRIGGERS(X)      \
    X(EXIT, "exit")           \
    X(FINALIZE, "finalize")   \
    X(SIGNAL, "signal")       \
    X(INTERVAL, "interval")   \
    X(OOM, "oom")             \
    X(RESET, "reset")         \
    X(THRESHOLD, "threshold") \
    X(RECOVERED, "recovered") /* written by `npupool recover` from a ledger file */

enum wire_trigger {
#define WIRE_TRIGGER_ENUM(e, name) WIRE_TRIGGER_##e,
    WIRE_TRIGGERS(WIRE_TRIGGER_ENUM)
#undef WIRE_TRIGGER_ENUM
        WIRE_TRIGGER_COUNT
};

static inline const char *wire_trigger_name(enum wire_trigger t)
{
    static const char *const names[] = {
#define WIRE_TRIGGER_NAME(e, name) name,
        WIRE_TRIGGERS(WIRE_TRIGGER_NAME)
#undef WIRE_TRIGGER_NAME
    };
    return (unsigned)t < WIRE_TRIGGER_COUNT ? names[t] : "unknown";
}

/* X(field, "meaning"): the per-device event counters, in report order ("counters" object). */
#define WIRE_COUNTERS(X)                                                                    \
    X(allocs, "allocations served by the pool")                                             \
    X(frees, "pool blocks freed")                                                           \
    X(fallback_allocs, "requests the pool could not serve, served by the runtime")          \
    X(fallback_frees, "fallback allocations freed")                                         \
    X(fallback_bytes, "granted bytes of live fallback allocations")                         \
    X(passthrough_allocs, "requests the pool does not serve (policy, cfg, VMM), forwarded") \
    X(ooms, "requests answered 207001")                                                     \
    X(invalid_frees,                                                                        \
      "frees of a pointer that is not a live block (double free, interior, unknown)")       \
    X(forwarded_frees, "frees of pointers npupool never handed out, sent to the runtime")   \
    X(real_allocs, "allocation calls that reached the runtime (reservations included)")     \
    X(real_frees, "free calls that reached the runtime")                                    \
    X(pool_reservations, "pools created on the device (1 + one per reset)")                 \
    X(reservation_failures, "refused reservation attempts (each back-off step)")            \
    X(give_backs,                                                                           \
      "runtime refusals of requests outside the pool answered by giving free pool chunks "  \
      "back (the call was then retried once)")                                              \
    X(given_back_bytes, "bytes of free pool chunks unmapped and freed for them")            \
    X(give_back_rescues, "retried calls the runtime then served")

/* One device's counters: relaxed atomics, read field by field (a reader may see a set torn across
 * fields, never a torn field). */
typedef struct wire_counters {
#define WIRE_COUNTER_FIELD(field, meaning) uint64_t field;
    WIRE_COUNTERS(WIRE_COUNTER_FIELD)
#undef WIRE_COUNTER_FIELD
} wire_counters_t;

#define wire_counter_add(c, field, n) __atomic_fetch_add(&(c)->field, (n), __ATOMIC_RELAXED)
#define wire_counter_sub(c, field, n) __atomic_fetch_sub(&(c)->field, (n), __ATOMIC_RELAXED)
#define wire_counter_get(c, field) __atomic_load_n(&(c)->field, __ATOMIC_RELAXED)

/* Take n from a gauge (a counter that also goes down, e.g. fallback_bytes), never below 0: a
 * reset that zeroed it may race with a free that subtracts. */
static inline void wire_gauge_sub(uint64_t *gauge, uint64_t n)
{
    uint64_t cur = __atomic_load_n(gauge, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(gauge, &cur, cur > n ? cur - n : 0, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

/* ---- allocation traces ---------------------------------------------------------------------- */
#define WIRE_TRACE_FORMAT "npupool-trace/1"
#define WIRE_TRACE_HEADER "# " WIRE_TRACE_FORMAT /* first line starts so; key=value words follow */
#define WIRE_TRACE_COLUMNS "thread,time_ns,action,pointer,size,device"

#endif
