/* tools/report_read.h — reading an npupool report (WIRE_REPORT_SCHEMA, docs/report.md) into
 * memory.  Names: types report_*, functions report_read_*.
 *
 * Owns: the validated, typed view of one report that every subcommand reads.  Strings point into
 * the cJSON tree (`root`), which lives as long as the report; frames keep their cJSON node so
 * `symbolize` can rewrite them in place.
 * Reading: bounded (input.h) and checked byte by byte as it arrives (jsonscan.h), so what cannot
 * be a JSON object is refused at its first bad byte.  Integers are exact up to 2^64 - 1: a number
 * literal a double may not hold exactly keeps its text (jsonscan.h).
 * Validation: required fields must be present with the right type; optional fields, when present,
 * must have the right type too; byte counts, addresses and counts are exact non-negative
 * integers; device ids are VOCAB_DEVICE_UNKNOWN or 0..NPUPOOL_MAX_DEVICES-1 (base/vocab.h).  The
 * first violation stops the load with one message naming the file and the JSON path
 * ("$.devices[0].pool.free_bytes: expected an unsigned integer"), or the line and column of a
 * JSON syntax error.
 */
#ifndef NPUPOOL_TOOLS_REPORT_READ_H
#define NPUPOOL_TOOLS_REPORT_READ_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

typedef struct report_frame {
    const char *function; /* symbol name, NULL when unknown */
    const char *module;   /* path of the ELF module, NULL when unknown */
    const char *file;     /* source file, NULL when unknown */
    const char *build_id; /* hex build id, NULL when unknown */
    uint64_t offset;      /* bytes from the module's load address (valid when has_offset) */
    uint64_t line;        /* source line, 0 when unknown */
    int has_offset;       /* 1 when "offset" was present */
    int python;           /* 1: a Python frame ("python": true): function, file, line, no module */
    cJSON *node;          /* the frame object in the tree */
} report_frame_t;

typedef struct report_leak {
    long device;               /* device id */
    uint64_t count;            /* live allocations of this stack */
    uint64_t bytes;            /* sum of their requested bytes */
    uint64_t granted;          /* sum of their granted bytes (0 when absent) */
    double oldest_age_s;       /* seconds since the oldest of them (0 when absent) */
    char stack_id[32];         /* as written (number or string), "" when absent */
    int has_growth;            /* 1 when "growth" was present */
    int64_t growth_count;      /* allocations gained since the previous report */
    int64_t growth_bytes;      /* bytes gained since the previous report */
    report_frame_t *frames;    /* innermost (the allocation call site) first */
    size_t nframes;            /* entries in frames */
    const char *python_frames; /* which Python frames the capture saw ("gil_held", ...), NULL */
} report_leak_t;

typedef struct report_bucket {
    uint64_t lo, hi;      /* size range in bytes, hi = UINT64_MAX for "and larger" */
    int has_range;        /* 1 when a range was given */
    const char *label;    /* label as written, if any */
    uint64_t live_blocks; /* live allocations in this class */
    uint64_t live_bytes;  /* their bytes */
    uint64_t free_blocks; /* free blocks in this class */
    uint64_t free_bytes;  /* their bytes */
} report_bucket_t;

typedef struct report_counter {
    const char *name; /* counter name (WIRE_COUNTERS, or one this reader does not know) */
    uint64_t value;   /* value */
} report_counter_t;

typedef struct report_extent {
    uint64_t offset; /* bytes from the pool's start */
    uint64_t size;   /* bytes */
    long site;       /* live map: index into report.leaks (-1 = unknown); free map: -1 */
    int slots;       /* free map: 1 = free slots inside a small-block page ([offset, size, 1]),
                        0 = a free run any request can use */
} report_extent_t;

typedef struct report_device {
    long device;                     /* device id */
    int has_pool;                    /* 0 when "pool" is null (live records but no pool) */
    uint64_t reserved;               /* pool.reserved_bytes */
    uint64_t allocated;              /* pool.allocated_bytes (granted, live) */
    uint64_t requested;              /* pool.requested_bytes */
    uint64_t peak_allocated;         /* pool.peak_allocated_bytes */
    uint64_t free_bytes;             /* pool.free_bytes */
    uint64_t largest_free;           /* pool.largest_free_bytes */
    uint64_t free_blocks;            /* pool.free_blocks */
    uint64_t overhead;               /* pool.overhead_bytes */
    uint64_t base;                   /* pool.base (device address of the pool), 0 when absent */
    double fragmentation;            /* pool.fragmentation, 0..1 */
    report_bucket_t *buckets;        /* size classes */
    size_t nbuckets;                 /* entries in buckets */
    report_extent_t *free_map;       /* free runs and free slots, offset order as written */
    size_t nfree_map;                /* entries in free_map */
    uint64_t free_map_omitted;       /* free blocks left out of free_map */
    uint64_t free_map_omitted_bytes; /* their bytes */
    report_extent_t *live_map;       /* live blocks when the report lists them ("live_map") */
    size_t nlive_map;                /* entries in live_map */
    report_counter_t *counters;      /* counters in written order */
    size_t ncounters;                /* entries in counters */
} report_device_t;

typedef struct report_oom {
    int present;             /* 1 when the report has an "oom" object */
    uint64_t requested;      /* bytes asked for */
    long device;             /* device id */
    const char *entry_point; /* e.g. "aclrtMalloc" */
    uint64_t free_bytes;     /* pool free bytes at the time */
    uint64_t largest_free;   /* largest free block at the time */
    const char *reason;      /* one-line explanation */
    double written_after_ms; /* the report written this long after the refusal; -1 = not said */
    report_frame_t *frames;  /* call site */
    size_t nframes;          /* entries in frames */
} report_oom_t;

typedef struct report {
    char path[512];           /* file name for messages */
    cJSON *root;              /* the parsed document */
    const char *schema;       /* "npupool-report/1" */
    const char *trigger;      /* exit, finalize, signal, interval, oom, reset, threshold */
    long pid;                 /* process.pid */
    long rank;                /* process.rank (0 when absent) */
    const char *exe;          /* process.exe, "" when absent */
    const char *hostname;     /* process.hostname, "" when absent */
    char cmdline[256];        /* process.cmdline (an array is joined with spaces) */
    char start_time[40];      /* process.start_time as text */
    char dump_time[40];       /* process.dump_time as text */
    double dump_time_s;       /* process.dump_time when numeric, else 0 */
    double uptime_s;          /* process.uptime_s (seconds since start), -1 when absent */
    long sequence;            /* "sequence" (report number in the process), -1 when absent */
    cJSON *config;            /* "config" object or NULL */
    report_device_t *devices; /* per device */
    size_t ndevices;          /* entries in devices */
    report_leak_t *leaks;     /* live allocations grouped by stack */
    size_t nleaks;            /* entries in leaks */
    uint64_t leaks_omitted;   /* sites left out of "leaks" when the report says so */
    report_oom_t oom;         /* the oom post-mortem, when present */
} report_t;

/* Load and validate a file ("-" = stdin).  Returns 0, or 2 after one message. */
int report_read_file(const char *path, report_t *r);
/* The same from a buffer (`name` for messages; `quiet` = no message, for the fuzzer). */
int report_read_buffer(const char *name, const char *buf, size_t len, report_t *r, int quiet);
/* Before r->root is printed with cJSON: every number a double may not hold exactly is printed as
 * it was written (as a raw item; the typed view stays valid, the tree is no longer read). */
void report_read_keep_literals(report_t *r);
void report_read_release(report_t *r);

#endif /* NPUPOOL_TOOLS_REPORT_READ_H */
