/* tools/trace_read.h — reading allocation traces into a compact event array (for `replay`).
 * Names: types and constants trace_* / TRACE_*, functions trace_read_*.
 *
 * Owns: the parsed form of a trace.  Two formats are read (detected from the first line):
 *   - npupool's own (docs/trace.md, base/wire.h): WIRE_TRACE_HEADER ("# npupool-trace/1 ..."),
 *     then WIRE_TRACE_COLUMNS, then alloc/free lines;
 *   - RAPIDS RMM logging_resource_adaptor CSV: TRACE_RMM_COLUMNS, actions "allocate", "free"
 *     ("deallocate" too) and "allocate failure"; everything is device 0.
 * Sizes and pointers are exact up to 2^64 - 1.  Input is bounded and read as it arrives
 * (input.h); the first line that is not a header, a comment or an event stops it.
 * Pointers are resolved while reading: each allocation gets a dense slot number and its free
 * carries the same slot, so a replay needs no pointer lookup and no sizes on free lines.
 * On request (TRACE_KEEP_*) the reader also keeps each event's time and each allocation's
 * recorded pointer, for the exports (`npupool export`); `replay` keeps neither (16 bytes an
 * event).
 * Invariants of a loaded trace: every TRACE_FREE event's slot was TRACE_ALLOC'ed earlier and is freed
 * once; slot numbers are 0..nallocs-1 in allocation order; device < ndevices.
 */
#ifndef NPUPOOL_TOOLS_TRACE_READ_H
#define NPUPOOL_TOOLS_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

enum trace_action {
    TRACE_ALLOC = 0, /* a served allocation */
    TRACE_FREE = 1,  /* the free of an earlier TRACE_ALLOC (same slot) */
    TRACE_FAIL = 2,  /* RMM "allocate failure": requested, refused by the recorded system */
};

enum trace_format { TRACE_FMT_NPUPOOL = 1, TRACE_FMT_RMM = 2 };

#define TRACE_MAX_DEVICES 64 /* distinct device ids one trace may use */
#define TRACE_KEEP_TIME 1u   /* keep trace_t.time_ns */
#define TRACE_KEEP_ADDR 2u   /* keep trace_t.addr */
/* The header line of RMM's logging_resource_adaptor CSV (traces/gen.c writes it too). */
#define TRACE_RMM_COLUMNS "Thread,Time,Action,Pointer,Size,Stream"

typedef struct trace_event {
    uint64_t size;   /* requested bytes (a free carries its allocation's size) */
    uint32_t slot;   /* allocation number; unused for TRACE_FAIL */
    uint8_t action;  /* enum trace_action */
    uint8_t device;  /* index into trace_t.device_ids */
    uint16_t unused; /* padding, 0 */
} trace_event_t;

typedef struct trace {
    char path[512];                     /* file name for messages */
    int format;                         /* enum trace_format */
    trace_event_t *ev;                  /* events in file order */
    size_t nev;                         /* number of events */
    size_t cap;                         /* allocated entries of ev */
    uint32_t nallocs;                   /* TRACE_ALLOC events = slots used */
    uint64_t nfrees;                    /* TRACE_FREE events */
    uint64_t nfails;                    /* TRACE_FAIL events */
    uint64_t unknown_frees;             /* frees of pointers not live in the trace (skipped) */
    uint64_t live_at_end;               /* allocations never freed */
    uint64_t lines;                     /* lines read */
    int ndevices;                       /* distinct devices */
    long device_ids[TRACE_MAX_DEVICES]; /* device id of each index */
    long pid;                           /* the header's pid=, 0 when absent (RMM logs) */
    uint64_t *time_ns; /* TRACE_KEEP_TIME: each event's time in ns (npupool: CLOCK_MONOTONIC;
                           RMM: since midnight, from Time; an unreadable Time repeats the one
                           before), else NULL */
    uint64_t *addr;    /* TRACE_KEEP_ADDR: each allocation's recorded pointer, by slot */
    size_t addr_cap;   /* allocated entries of addr */
} trace_t;

/* Read a whole file ("-" = stdin).  Returns 0, or 2 after printing one "npupool: FILE:LINE: ..."
 * message (bad line, unknown format, I/O error).  On error *t is left empty (trace_read_release ok). */
int trace_read_file(const char *path, trace_t *t);

/* The same from a buffer (`name` for messages).  Used by trace_read_file and the fuzz target.
 * `quiet` suppresses the message (the fuzzer).  Returns 0 or 2. */
int trace_read_buffer(const char *name, const char *buf, size_t len, trace_t *t, int quiet);

/* The same, keeping what `keep` (TRACE_KEEP_TIME | TRACE_KEEP_ADDR) asks for. */
int trace_read_file_keep(const char *path, unsigned keep, trace_t *t);
int trace_read_buffer_keep(const char *name, const char *buf, size_t len, unsigned keep, trace_t *t,
                           int quiet);

void trace_read_release(trace_t *t);

#endif /* NPUPOOL_TOOLS_TRACE_READ_H */
