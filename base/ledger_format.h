/* base/ledger_format.h — the ledger file ("npupool-ledger/1"): what a process that may die at any
 * instruction leaves for `npupool recover`, defined once for its writer (ledger/ledger_file.c)
 * and its reader (tools/ledger_read.c).  Names: lfmt_* / LFMT_*.
 *
 * Owns: the layout of every chunk, the commit words and the one hash both sides compute.
 *
 * The file is a sequence of self-describing chunks, each starting with an lfmt_chunk_t (magic,
 * kind, version, size, its own offset, kind-specific arguments, a check word over the header),
 * 64-byte aligned, back to back from offset 0 up to header.chunk_end; a reader needs no index and
 * skips kinds it does not know by their size.  The first chunk is the header (LFMT_KIND_HEADER).
 * The writer maps the file shared and only ever stores into space reserved (fallocate) ahead of
 * use, so the kernel keeps every completed store whatever kills the process.
 *
 * Commit rules (a store that did not happen at death must never read as data):
 *   - a chunk header is complete before header.chunk_end is advanced past it;
 *   - a record slot (lfmt_record_t) holds a check word, stored last with release order:
 *     LFMT_CHECK_FREE (0) = no record; LFMT_CHECK_WRITING = being written (stored first, before
 *     any field changes); any other value = committed iff it equals lfmt_record_check() of the
 *     fields.  A free stores LFMT_CHECK_FREE.  So a slot is free, live, or torn (WRITING, or a
 *     check that does not match: caught between two stores);
 *   - append chunks (stacks, modules, and any later interned table such as Python frames) hold
 *     entries {size, tag, payload, check}: check = lfmt_entry_check() of everything before it,
 *     stored last; entries are appended in order under one lock, so only the last can be torn and
 *     a zero size ends the chunk;
 *   - device figures are double-buffered: the inactive copy is written and checked, then
 *     `current` flips to it, so the current copy is always complete.
 * A reader of a running process's file reads each check word before and after the fields.
 * Everything is in the writer's byte order (the magic tells) with natural alignment.
 */
#ifndef NPUPOOL_BASE_LEDGER_FORMAT_H
#define NPUPOOL_BASE_LEDGER_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LFMT_FORMAT "npupool-ledger/1" /* header.format */
#define LFMT_CHUNK_MAGIC 0x434c504eu   /* "NPLC" in the writer's byte order */
#define LFMT_ALIGN 64u                 /* chunk alignment and size unit, bytes */
#define LFMT_GROUP 64u                 /* record slots per group (the writer's lookup unit) */
#define LFMT_MAX_DEPTH 128u            /* most frames in one stack entry */
#define LFMT_MAX_BUILD_ID 64u          /* most bytes of a GNU build id */
#define LFMT_MAX_PATH 4096u            /* most bytes of a module path */
#define LFMT_MAX_COUNTERS 32u          /* device counters kept (base/wire.h WIRE_COUNTERS order) */
#define LFMT_MAX_BUCKETS 16u           /* pool size classes kept */
#define LFMT_DEVICE_SLOTS 65u          /* devices 0..63 (vocab.h) and the unknown device (-1) */

#define LFMT_CHECK_FREE 0u    /* record slot: no record */
#define LFMT_CHECK_WRITING 1u /* record slot: a write began and has not been committed */

/* Chunk kinds.  A later interned table (e.g. Python frames) is one more append kind. */
enum lfmt_kind {
    LFMT_KIND_HEADER = 1,  /* lfmt_header_t, at offset 0 only */
    LFMT_KIND_RECORDS = 2, /* lfmt_record_t slots; arg: shard, first record number, slots */
    LFMT_KIND_STACKS = 3,  /* append entries: tag = stack id, payload lfmt_stack_t */
    LFMT_KIND_MODULES = 4, /* append entries: tag = first stack id, payload lfmt_module_t */
    LFMT_KIND_DEVICE = 5,  /* lfmt_device_chunk_t; arg[0] = device id + 1 (0 = unknown) */
    LFMT_KIND_PAD = 6,     /* unused space up to the end of a mapped segment */
};

/* header.flags */
#define LFMT_F_INCOMPLETE 1u /* space ran out: allocations after that may be missing */
#define LFMT_F_EXITED 2u     /* the process went through its exit hook */
#define LFMT_F_FORK_CHILD 4u /* written by a fork child: only its own allocations are here */

typedef struct lfmt_chunk {
    uint32_t magic;   /* LFMT_CHUNK_MAGIC */
    uint16_t kind;    /* enum lfmt_kind */
    uint16_t version; /* layout version of the kind (1) */
    uint64_t size;    /* bytes of the chunk, this header included; a multiple of LFMT_ALIGN */
    uint64_t offset;  /* where the chunk starts in the file (a moved chunk is caught) */
    uint64_t arg[4];  /* kind-specific (enum lfmt_kind) */
    uint64_t check;   /* lfmt_chunk_check() of the 56 bytes above */
} lfmt_chunk_t;
_Static_assert(sizeof(lfmt_chunk_t) == LFMT_ALIGN, "a chunk header is 64 bytes");

/* One record slot: a live device allocation (ledger.h's ledger_record_t). */
typedef struct lfmt_record {
    uint64_t addr;      /* device address */
    uint64_t requested; /* bytes asked for */
    uint64_t granted;   /* bytes of the block */
    uint64_t seq;       /* allocation sequence number of the process, 1-based */
    uint64_t time_ns;   /* CLOCK_MONOTONIC_COARSE at allocation */
    uint32_t stack_id;  /* interned stack (a STACKS entry), 0 = none */
    uint32_t tid;       /* kernel thread id of the allocating thread */
    int16_t device;     /* device id, -1 = unknown */
    uint8_t entry;      /* enum vocab_entry */
    uint8_t origin;     /* enum vocab_origin */
    uint32_t aux;       /* zero (reserved) */
    uint64_t check;     /* see the commit rules */
} lfmt_record_t;
_Static_assert(sizeof(lfmt_record_t) == 64, "a record slot is 64 bytes");

/* The header chunk.  The fields above `file_bytes` are written once, at creation; the ones from
 * it on with atomic stores while the process runs. */
typedef struct lfmt_header {
    lfmt_chunk_t chunk;       /* kind LFMT_KIND_HEADER */
    char format[32];          /* LFMT_FORMAT, NUL-padded */
    uint32_t record_size;     /* sizeof(lfmt_record_t) */
    uint32_t page_size;       /* the writer's page size */
    uint32_t shards;          /* ledger shards (record chunks name theirs) */
    uint32_t backtrace_depth; /* frames kept per stack, 0 = none */
    int64_t pid;              /* the writer */
    int64_t ppid;             /* its parent */
    int64_t rank;             /* RANK / LOCAL_RANK, -1 = unknown */
    uint64_t start_mono_ns;   /* CLOCK_MONOTONIC_COARSE when the file was created */
    uint64_t start_wall_ns;   /* CLOCK_REALTIME at the same moment, ns since the epoch */
    uint64_t fork_seq;        /* fork child: the parent's last sequence number at the fork */
    char boot_id[40];         /* /proc/sys/kernel/random/boot_id (monotonic times comparable) */
    char hostname[64];        /* gethostname */
    char exe[1024];           /* /proc/self/exe */
    char cmdline[1024];       /* /proc/self/cmdline: NUL-separated arguments (truncated) */
    char path[1024];          /* this file's path as created */
    char config[4096];        /* effective options, "NAME=VALUE\n" each */
    uint64_t file_bytes;      /* mutable: bytes reserved so far */
    uint64_t chunk_end;       /* mutable: offset after the last complete chunk */
    uint64_t flags;           /* mutable: LFMT_F_* */
    uint64_t death_signal;    /* mutable: the fatal signal npupool's handler saw, 0 = none */
    uint64_t death_mono_ns;   /* mutable: when (CLOCK_MONOTONIC_COARSE), 0 = none */
    uint64_t exit_mono_ns;    /* mutable: when the exit hook ran, 0 = not yet */
    uint64_t updated_mono_ns; /* mutable: last device-figure refresh */
    uint64_t unmirrored;      /* mutable: allocations that found no slot (space ran out) */
    uint64_t stacks_lost;     /* mutable: stacks that found no room (space ran out) */
    uint64_t live_at_exit;    /* mutable: live allocations of the process at its exit hook */
    uint64_t reserved[6];     /* zero */
} lfmt_header_t;

/* Append entries: {lfmt_entry_t, payload padded to 8 bytes, uint64_t check}; size counts all. */
typedef struct lfmt_entry {
    uint32_t size; /* bytes of the entry, check word included; a multiple of 8; 0 = end */
    uint32_t tag;  /* stacks: the stack id; modules: the first stack id it applies to */
} lfmt_entry_t;

/* STACKS payload. */
typedef struct lfmt_stack {
    uint32_t depth;    /* frames, 1..LFMT_MAX_DEPTH */
    uint32_t reserved; /* zero */
    /* uint64_t frames[depth]: return addresses, innermost first */
} lfmt_stack_t;

/* MODULES payload: one loaded object.  A frame of stack S at address A belongs to the module with
 * lo <= A - 1 < hi and the greatest tag <= S (an object unloaded and another loaded at the same
 * place is told apart by the stacks made after it). */
typedef struct lfmt_module {
    uint64_t base;         /* load bias (dl_phdr_info.dlpi_addr) */
    uint64_t lo, hi;       /* mapped range of its PT_LOAD segments */
    uint32_t path_len;     /* bytes of the path that follows (no terminator) */
    uint32_t build_id_len; /* bytes of the GNU build id before the path, 0..LFMT_MAX_BUILD_ID */
    /* uint8_t build_id[build_id_len]; char path[path_len]; */
} lfmt_module_t;

/* X(field, "report key"): the pool figures of a device, named as in a report's "pool" object. */
// clang-format off
#define LFMT_POOL_FIGURES(X)                      \
    X(reserved_bytes, "reserved_bytes")           \
    X(allocated_bytes, "allocated_bytes")         \
    X(requested_bytes, "requested_bytes")         \
    X(peak_allocated_bytes, "peak_allocated_bytes") \
    X(free_bytes, "free_bytes")                   \
    X(largest_free_bytes, "largest_free_bytes")   \
    X(slab_free_bytes, "slab_free_bytes")         \
    X(overhead_bytes, "overhead_bytes")           \
    X(free_blocks, "free_blocks")                 \
    X(live_blocks, "live_blocks")                 \
    X(pool_allocs, "pool_allocs")                 \
    X(pool_frees, "pool_frees")                   \
    X(failed_allocs, "failed_allocs")             \
    X(invalid_frees, "invalid_frees")
// clang-format on

typedef struct lfmt_bucket {
    uint64_t max_bytes;   /* largest size of the class, UINT64_MAX = no bound */
    uint64_t live_blocks; /* live blocks of the class */
    uint64_t live_bytes;  /* their granted bytes */
    uint64_t free_blocks; /* free blocks of the class */
    uint64_t free_bytes;  /* their bytes */
} lfmt_bucket_t;

/* One copy of a device's figures. */
typedef struct lfmt_device_figs {
    uint64_t check;     /* lfmt_words_check() of everything after it */
    uint64_t mono_ns;   /* when taken, CLOCK_MONOTONIC_COARSE */
    int64_t device;     /* device id, -1 = unknown */
    uint64_t has_pool;  /* 1 when the device had a pool (the figures below are its own) */
    uint64_t pool_base; /* device address of the pool */
#define LFMT_FIGURE_FIELD(f, key) uint64_t f;
    LFMT_POOL_FIGURES(LFMT_FIGURE_FIELD)
#undef LFMT_FIGURE_FIELD
    uint64_t ncounters;                      /* entries used in counters */
    uint64_t counters[LFMT_MAX_COUNTERS];    /* the shim's counters, WIRE_COUNTERS order */
    uint64_t nbuckets;                       /* entries used in buckets */
    lfmt_bucket_t buckets[LFMT_MAX_BUCKETS]; /* size classes, smallest first */
} lfmt_device_figs_t;

typedef struct lfmt_device_chunk {
    lfmt_chunk_t chunk;         /* kind LFMT_KIND_DEVICE */
    uint64_t current;           /* figs[current & 1] is the complete copy; 0 = none written */
    uint64_t reserved[7];       /* zero */
    lfmt_device_figs_t figs[2]; /* the two copies */
} lfmt_device_chunk_t;

/* ---- the one hash -------------------------------------------------------------------------- */

static inline uint64_t lfmt_mix(uint64_t x)
{
    x ^= x >> 29;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

/* A check word is never FREE or WRITING. */
static inline uint64_t lfmt_check_word(uint64_t h)
{
    h = lfmt_mix(h);
    return h > LFMT_CHECK_WRITING ? h : h + 2;
}

/* Check of n 8-byte words (read with memcpy: any alignment), seeded by the kind. */
static inline uint64_t lfmt_words_check(const void *p, size_t nwords, uint64_t seed)
{
    uint64_t h = seed * 0x9e3779b97f4a7c15ull + nwords;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < nwords; i++) {
        uint64_t w;
        memcpy(&w, b + 8 * i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return lfmt_check_word(h);
}

static inline uint64_t lfmt_chunk_check(const lfmt_chunk_t *c)
{
    return lfmt_words_check(c, offsetof(lfmt_chunk_t, check) / 8, LFMT_CHUNK_MAGIC);
}

/* The check of an append entry of `size` bytes at p (everything before its check word). */
static inline uint64_t lfmt_entry_check(const void *p, uint32_t size, uint16_t kind)
{
    return lfmt_words_check(p, (size - 8u) / 8u, kind);
}

/* The check of a record slot's fields.  The hot path computes it on every allocation: seven
 * independent products (no chain of dependent multiplies), then one mix. */
static inline uint64_t lfmt_record_check(const lfmt_record_t *r)
{
    uint64_t w[7];
    memcpy(w, r, sizeof w);
    uint64_t h = w[0] * 0x9e3779b97f4a7c15ull + w[1] * 0xc2b2ae3d27d4eb4full +
                 w[2] * 0x165667b19e3779f9ull + w[3] * 0xd6e8feb86659fd93ull +
                 w[4] * 0xa0761d6478bd642full + w[5] * 0xe7037ed1a0b428dbull +
                 w[6] * 0x8ebc6af09c88c6e3ull + LFMT_KIND_RECORDS;
    return lfmt_check_word(h);
}

#endif /* NPUPOOL_BASE_LEDGER_FORMAT_H */
