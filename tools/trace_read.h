/* tools/trace_read.h — reading allocation traces into a compact event array (for `replay`).
 *
 * Owns: the parsed form of a trace.  Two formats are read (detected from the first line):
 *   - npupool's own (docs/trace.md): "# npupool-trace/1 ...", then
 *     "thread,time_ns,action,pointer,size,device", then alloc/free lines;
 *   - RAPIDS RMM logging_resource_adaptor CSV: "Thread,Time,Action,Pointer,Size,Stream", actions
 *     "allocate", "free" ("deallocate" too) and "allocate failure"; everything is device 0.
 * Pointers are resolved while reading: each allocation gets a dense slot number and its free
 * carries the same slot, so a replay needs no pointer lookup and no sizes on free lines.
 * Invariants of a loaded trace: every TRC_FREE event's slot was TRC_ALLOC'ed earlier and is freed
 * once; slot numbers are 0..nallocs-1 in allocation order; device < ndevices.
 */
#ifndef NPUPOOL_TOOLS_TRACE_READ_H
#define NPUPOOL_TOOLS_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

enum trc_action {
    TRC_ALLOC = 0, /* a served allocation */
    TRC_FREE = 1,  /* the free of an earlier TRC_ALLOC (same slot) */
    TRC_FAIL = 2,  /* RMM "allocate failure": requested, refused by the recorded system */
};

enum trc_format { TRC_FMT_NPUPOOL = 1, TRC_FMT_RMM = 2 };

#define TRC_MAX_DEVICES 64 /* distinct device ids one trace may use */

typedef struct trc_event {
    uint64_t size;   /* requested bytes (a free carries its allocation's size) */
    uint32_t slot;   /* allocation number; unused for TRC_FAIL */
    uint8_t action;  /* enum trc_action */
    uint8_t device;  /* index into trace_t.device_ids */
    uint16_t unused; /* padding, 0 */
} trc_event_t;

typedef struct trace {
    char path[512];                   /* file name for messages */
    int format;                       /* enum trc_format */
    trc_event_t *ev;                  /* events in file order */
    size_t nev;                       /* number of events */
    size_t cap;                       /* allocated entries of ev */
    uint32_t nallocs;                 /* TRC_ALLOC events = slots used */
    uint64_t nfrees;                  /* TRC_FREE events */
    uint64_t nfails;                  /* TRC_FAIL events */
    uint64_t unknown_frees;           /* frees of pointers not live in the trace (skipped) */
    uint64_t live_at_end;             /* allocations never freed */
    uint64_t lines;                   /* lines read */
    int ndevices;                     /* distinct devices */
    long device_ids[TRC_MAX_DEVICES]; /* device id of each index */
} trace_t;

/* Read a whole file ("-" = stdin).  Returns 0, or 2 after printing one "npupool: FILE:LINE: ..."
 * message (bad line, unknown format, I/O error).  On error *t is left empty (trace_release ok). */
int trace_load(const char *path, trace_t *t);

/* The same from a buffer (`name` for messages).  Used by trace_load and the fuzz target.
 * `quiet` suppresses the message (the fuzzer).  Returns 0 or 2. */
int trace_parse(const char *name, const char *buf, size_t len, trace_t *t, int quiet);

void trace_release(trace_t *t);

#endif /* NPUPOOL_TOOLS_TRACE_READ_H */
