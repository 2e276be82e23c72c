/* tools/ledger_read.h — reading a ledger file ("npupool-ledger/2", base/ledger_format.h) into
 * memory.  Names: ledger_read_*.
 *
 * Owns: the validated, typed view of one ledger file that `npupool recover` turns into a report:
 * the header's facts (which npupool wrote it, which runtime it served), the live records, the
 * stacks, the Python frames they hold, the module map and the device figures, and what could not
 * be trusted — torn record slots, append entries and a runtime identity (written when the
 * process died, or being written while a running process was read) are counted and never used.
 * Reading: bounded (input.h: NPUPOOL_INPUT_MAX), the whole file into memory, then one walk over
 * the chunks from offset 0 to the header's chunk_end.  Every chunk header must carry the magic,
 * its own offset, a size that stays inside the chunks and a matching check word; every committed
 * entry must be well formed (a stack of 1..LFMT_MAX_DEPTH frames, stack and Python frame ids
 * rising, a module with lo < hi, names no longer than the format allows ...).  The first violation, or a file shorter than its chunks, is damage: one message
 * naming the file and the offset, and TOOLS_BAD — or, with `salvage`, a warning, and everything
 * read before the damage is kept (`damaged` says where).
 * Every field is read once into a copy before it is checked and used, so a file that changes
 * while it is read (a running process) cannot make the reader step outside its buffer.
 */
#ifndef NPUPOOL_TOOLS_LEDGER_READ_H
#define NPUPOOL_TOOLS_LEDGER_READ_H

#include <stddef.h>
#include <stdint.h>

#include "ledger_format.h"

typedef struct ledger_read_record {
    uint64_t addr;      /* device address */
    uint64_t requested; /* bytes asked for */
    uint64_t granted;   /* bytes of the block */
    uint64_t seq;       /* allocation sequence number */
    uint64_t time_ns;   /* CLOCK_MONOTONIC_COARSE at allocation (the writer's clock) */
    uint32_t stack_id;  /* stack, 0 = none */
    uint32_t tid;       /* allocating thread */
    int device;         /* -1 = unknown */
    unsigned entry;     /* enum vocab_entry (out of range = unknown) */
    unsigned origin;    /* enum vocab_origin (out of range read as pool) */
} ledger_read_record_t;

typedef struct ledger_read_stack {
    uint32_t id;    /* stack id */
    uint32_t depth; /* frames */
    size_t first;   /* index of its first frame in ledger_read_t.frames */
} ledger_read_stack_t;

typedef struct ledger_read_pyframe {
    uint32_t id;    /* Python frame id (a stack value LFMT_PY_TAG | id) */
    uint32_t line;  /* line, 0 = unknown */
    char *file;     /* co_filename, UTF-8, malloc'ed (a NUL inside ends it) */
    char *function; /* qualified name, UTF-8, malloc'ed */
} ledger_read_pyframe_t;

typedef struct ledger_read_module {
    uint64_t base;        /* load bias */
    uint64_t lo, hi;      /* mapped range */
    uint32_t first_stack; /* stacks with this id or a later one may refer to it */
    char build_id[2 * LFMT_MAX_BUILD_ID + 1]; /* lowercase hex, "" = none */
    char *path;                               /* malloc'ed */
} ledger_read_module_t;

typedef struct ledger_read {
    char name[512];                            /* the file, for messages */
    uint64_t file_size;                        /* bytes read */
    lfmt_header_t hdr;                         /* a copy of the header chunk (texts ended) */
    int have_npupool;                          /* 1: hdr.npupool is committed */
    int have_runtime;                          /* 1: hdr.runtime is committed */
    ledger_read_record_t *recs;                /* live records, file order */
    size_t nrecs;                              /* entries in recs */
    uint64_t torn_records;                     /* slots being written (or mixed) when read */
    uint64_t torn_entries;                     /* append entries (and the runtime's identity)
                                                  being written when read */
    uint64_t torn_devices;                     /* devices whose figures could not be read */
    ledger_read_stack_t *stacks;               /* by id, ascending */
    size_t nstacks;                            /* entries in stacks */
    uint64_t *frames;                          /* every stack's frames */
    size_t nframes;                            /* entries in frames */
    ledger_read_pyframe_t *pyframes;           /* Python frames by id, ascending */
    size_t npyframes;                          /* entries in pyframes */
    ledger_read_module_t *mods;                /* module entries, file order */
    size_t nmods;                              /* entries in mods */
    int have_dev[LFMT_DEVICE_SLOTS];           /* 1 when figures of that device were read */
    lfmt_device_figs_t dev[LFMT_DEVICE_SLOTS]; /* device d at d, the unknown device at 64 */
    uint64_t chunks;                           /* chunks walked */
    uint64_t unknown_chunks;                   /* of a kind this reader does not know (skipped) */
    uint64_t record_bytes;                     /* bytes of record chunks */
    uint64_t stack_bytes;                      /* bytes of stack chunks */
    int damaged;                               /* 1: the walk stopped at damage (salvage only) */
    char why[256];                             /* what the damage was */
} ledger_read_t;

/* Read and check a file.  TOOLS_OK, or TOOLS_BAD after one message.  With `salvage`, damage is
 * one warning and TOOLS_OK with r->damaged set. */
int ledger_read_file(const char *path, int salvage, ledger_read_t *r);
/* The same from a buffer (`name` for messages; `quiet` = no message, for the fuzzer). */
int ledger_read_buffer(const char *name, const unsigned char *buf, size_t len, int salvage,
                       int quiet, ledger_read_t *r);
void ledger_read_release(ledger_read_t *r);

/* The stack with this id, NULL when the file has none. */
const ledger_read_stack_t *ledger_read_stack(const ledger_read_t *r, uint32_t id);
/* The Python frame with this id, NULL when the file has none. */
const ledger_read_pyframe_t *ledger_read_pyframe(const ledger_read_t *r, uint32_t id);
/* The module a frame of stack `stack_id` at return address `pc` lies in (pc - 1 in [lo, hi),
 * the latest entry whose first stack is <= stack_id), NULL when none. */
const ledger_read_module_t *ledger_read_module_of(const ledger_read_t *r, uint32_t stack_id,
                                                  uint64_t pc);

#endif /* NPUPOOL_TOOLS_LEDGER_READ_H */
