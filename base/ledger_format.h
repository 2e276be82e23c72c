/* base/ledger_format.h — the ledger file ("npupool-ledger/2"): what a process that may die at any
 * instruction leaves for `npupool recover`, defined once for its writer (ledger/ledger_file.c)
 * and its reader (tools/ledger_read.c).  Names: lfmt_* / LFMT_*.
 *
 * Owns: the layout of every chunk, the commit words and the one hash both sides compute, and the
 * values a stack may hold besides return addresses (Python frames and the mark, LFMT_PY_*: the
 * ledger keeps them in memory as the file does, ledger/ledger_py.h).
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
 *   - append chunks (stacks, modules, Python frames) hold entries {size, tag, payload, check}:
 *     check = lfmt_entry_check() of everything before it, stored last; entries are appended in
 *     order under one lock, so only the last can be torn and a zero size ends the chunk;
 *   - device figures are double-buffered: the inactive copy is written and checked, then
 *     `current` flips to it, so the current copy is always complete;
 *   - the identity of a library (lfmt_library_t: which npupool wrote the file, which runtime it
 *     served) is written at most once per file, its check word last with release order: 0 = not
 *     known (yet), lfmt_library_check() of the fields = complete, anything else = torn.
 * A reader of a running process's file reads each check word before and after the fields.
 * Everything is in the writer's byte order (the magic tells) with natural alignment.
 *
 * Versions: "npupool-ledger/2" added the header's identity (version, libnpupool.so, the runtime)
 * and the Python frame entries; a reader refuses any other format name.
 */
#ifndef NPUPOOL_BASE_LEDGER_FORMAT_H
#define NPUPOOL_BASE_LEDGER_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LFMT_FORMAT "npupool-ledger/2" /* header.format */
#define LFMT_CHUNK_MAGIC 0x434c504eu   /* "NPLC" in the writer's byte order */
#define LFMT_ALIGN 64u                 /* chunk alignment and size unit, bytes */
#define LFMT_GROUP 64u                 /* record slots per group (the writer's lookup unit) */
#define LFMT_MAX_DEPTH 128u            /* most frames in one stack entry */
#define LFMT_MAX_BUILD_ID 64u          /* most bytes of a GNU build id */
#define LFMT_MAX_PATH 4096u            /* most bytes of a module path */
#define LFMT_MAX_PY_NAME 1024u         /* most bytes of a Python file or function name */
#define LFMT_MAX_VERSION 64u           /* most bytes of npupool's version text, NUL included */
#define LFMT_MAX_COUNTERS 32u          /* device counters kept (base/wire.h WIRE_COUNTERS order) */
#define LFMT_MAX_BUCKETS 16u           /* pool size classes kept */
#define LFMT_DEVICE_SLOTS 65u          /* devices 0..63 (vocab.h) and the unknown device (-1) */

#define LFMT_CHECK_FREE 0u    /* record slot: no record */
#define LFMT_CHECK_WRITING 1u /* record slot: a write began and has not been committed */

/* Chunk kinds.  A later interned table is one more append kind. */
enum lfmt_kind {
    LFMT_KIND_HEADER = 1,   /* lfmt_header_t, at offset 0 only */
    LFMT_KIND_RECORDS = 2,  /* lfmt_record_t slots; arg: shard, first record number, slots */
    LFMT_KIND_STACKS = 3,   /* append entries: tag = stack id, payload lfmt_stack_t */
    LFMT_KIND_MODULES = 4,  /* append entries: tag = first stack id, payload lfmt_module_t */
    LFMT_KIND_DEVICE = 5,   /* lfmt_device_chunk_t; arg[0] = device id + 1 (0 = unknown) */
    LFMT_KIND_PAD = 6,      /* unused space up to the end of a mapped segment */
    LFMT_KIND_PYFRAMES = 7, /* append entries: tag = Python frame id, payload lfmt_pyframe_t */
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

/* Which object: a loaded library's path and GNU build id, as reports print them. */
typedef struct lfmt_library {
    uint64_t check;                           /* see the commit rules; 0 = not known */
    char build_id[2 * LFMT_MAX_BUILD_ID + 8]; /* lowercase hex, NUL-terminated, "" = none */
    char path[LFMT_MAX_PATH];                 /* NUL-terminated (a longer path is not stored) */
} lfmt_library_t;
_Static_assert(sizeof(lfmt_library_t) % 8 == 0, "a library identity is whole words");

/* The header chunk.  The fields above `file_bytes` are written once, at creation, except
 * `runtime` (written once, when the runtime is first known: often after creation, because the
 * shim learns it at the first allocation; its check word commits it); the ones from `file_bytes`
 * on with atomic stores while the process runs. */
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
    char version[LFMT_MAX_VERSION]; /* npupool's version (base/version.h), never empty */
    lfmt_library_t npupool;         /* libnpupool.so, the writer (also a module entry) */
    lfmt_library_t runtime;         /* mutable, once: the real aclrtMalloc's object, 0 = unknown */
    uint64_t file_bytes;            /* mutable: bytes reserved so far */
    uint64_t chunk_end;             /* mutable: offset after the last complete chunk */
    uint64_t flags;                 /* mutable: LFMT_F_* */
    uint64_t death_signal;          /* mutable: the fatal signal npupool's handler saw, 0 = none */
    uint64_t death_mono_ns;         /* mutable: when (CLOCK_MONOTONIC_COARSE), 0 = none */
    uint64_t exit_mono_ns;          /* mutable: when the exit hook ran, 0 = not yet */
    uint64_t updated_mono_ns;       /* mutable: last device-figure refresh */
    uint64_t unmirrored;            /* mutable: allocations that found no slot (space ran out) */
    uint64_t stacks_lost;           /* mutable: stacks that found no room (space ran out) */
    uint64_t live_at_exit;          /* mutable: live allocations of the process at its exit hook */
    uint64_t pyframes_lost;         /* mutable: Python frames that found no room (space ran out) */
    uint64_t reserved[5];           /* zero */
} lfmt_header_t;

/* Append entries: {lfmt_entry_t, payload padded to 8 bytes, uint64_t check}; size counts all. */
typedef struct lfmt_entry {
    uint32_t size; /* bytes of the entry, check word included; a multiple of 8; 0 = end */
    uint32_t tag;  /* stacks: the stack id; modules: the first stack id it applies to; Python
                      frames: the frame id */
} lfmt_entry_t;

/* STACKS payload. */
typedef struct lfmt_stack {
    uint32_t depth;    /* frames, 1..LFMT_MAX_DEPTH */
    uint32_t reserved; /* zero */
    /* uint64_t frames[depth]: innermost first, each a return address or an LFMT_PY_* value */
} lfmt_stack_t;

/* PYFRAMES payload: one interned Python frame, appended once, before any stack that holds it
 * (ids rise from 1, in the order the ledger interned them). */
typedef struct lfmt_pyframe {
    uint32_t line;         /* line being executed, 0 = unknown */
    uint16_t file_len;     /* bytes of the file name that follows, 1..LFMT_MAX_PY_NAME */
    uint16_t function_len; /* bytes of the function name after it, 1..LFMT_MAX_PY_NAME */
    /* char file[file_len]; char function[function_len]; UTF-8, no terminators */
} lfmt_pyframe_t;

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

/* ---- stack values that are not return addresses ----------------------------------------------
 * A Python frame is LFMT_PY_TAG | id (id >= 1 in the low 32 bits: its PYFRAMES entry); a stack
 * captured while an interpreter was in the process ends with one mark, LFMT_PY_TAG | LFMT_PY_MARK
 * | seen (what its capture could see, LFMT_PY_SEEN's order from 1: that number is stored).
 * Neither is a user-space address on x86-64 or aarch64 (the top bit is set). */
#define LFMT_PY_TAG ((uint64_t)1 << 63)  /* a Python value, not a return address */
#define LFMT_PY_MARK ((uint64_t)1 << 62) /* with the tag: the mark of a stack */

/* X(ENUM, "word", meaning): which Python frames a capture could see (the report's
 * "python_frames"); stored as the position in this list, from 1: append only. */
// clang-format off
#define LFMT_PY_SEEN(X) \
    X(GIL_HELD, "gil_held", \
      "the thread held the GIL: its Python frames are in the stack") \
    X(GIL_RELEASED, "gil_released", \
      "the main thread had released the GIL in a call from Python (ctypes.CDLL, a torch " \
      "operator): its Python frames, unchanged until that call returns, are in the stack") \
    X(NOT_VISIBLE, "not_visible", \
      "a thread other than the main thread had released the GIL: native frames only (its " \
      "frames could be freed under npupool at interpreter shutdown)") \
    X(NO_THREAD_STATE, "no_thread_state", \
      "the thread has no Python thread state (a C or C++ thread): native frames only") \
    X(NOT_RUNNING, "not_running", \
      "the interpreter was not initialised yet or was finalizing: native frames only") \
    X(UNSUPPORTED, "unsupported", \
      "an interpreter npupool cannot read (it reads CPython 3.9 to 3.13 with a GIL): native " \
      "frames only")
// clang-format on

static inline int lfmt_py_is_frame(uint64_t v)
{
    return (v & (LFMT_PY_TAG | LFMT_PY_MARK)) == LFMT_PY_TAG;
}
static inline int lfmt_py_is_mark(uint64_t v)
{
    return (v & (LFMT_PY_TAG | LFMT_PY_MARK)) == (LFMT_PY_TAG | LFMT_PY_MARK);
}
/* The Python frame id of a stack value, 0 when it is none (an address, the mark, a malformed
 * value). */
static inline uint32_t lfmt_py_frame_id(uint64_t v)
{
    return lfmt_py_is_frame(v) && (v >> 32 & 0x3fffffffu) == 0 ? (uint32_t)v : 0;
}

enum lfmt_py_seen {
    LFMT_PY_SEEN_NONE = 0, /* no mark: no interpreter in the process, or Python frames off */
#define LFMT_PY_SEEN_ENUM(e, word, meaning) LFMT_PY_##e,
    LFMT_PY_SEEN(LFMT_PY_SEEN_ENUM)
#undef LFMT_PY_SEEN_ENUM
        LFMT_PY_SEEN_COUNT
};

/* What the capture of a stack whose last value is `last` could see; LFMT_PY_SEEN_NONE when
 * `last` is no mark or holds an unknown word. */
static inline enum lfmt_py_seen lfmt_py_seen_of(uint64_t last)
{
    uint64_t s = last & ~(LFMT_PY_TAG | LFMT_PY_MARK);
    return lfmt_py_is_mark(last) && s > 0 && s < LFMT_PY_SEEN_COUNT ? (enum lfmt_py_seen)s
                                                                    : LFMT_PY_SEEN_NONE;
}
/* "gil_held", "not_visible", ...; NULL for LFMT_PY_SEEN_NONE or an unknown value. */
static inline const char *lfmt_py_seen_name(enum lfmt_py_seen s)
{
    static const char *const names[] = {NULL,
#define LFMT_PY_SEEN_NAME(e, word, meaning) word,
                                        LFMT_PY_SEEN(LFMT_PY_SEEN_NAME)
#undef LFMT_PY_SEEN_NAME
    };
    return (unsigned)s < LFMT_PY_SEEN_COUNT ? names[s] : NULL;
}

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

/* The check of a library identity (everything after its check word). */
static inline uint64_t lfmt_library_check(const lfmt_library_t *l)
{
    return lfmt_words_check((const char *)l + 8, (sizeof *l - 8) / 8, LFMT_KIND_HEADER);
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
