/* ledger/ledger.h — the allocation ledger: every live device allocation with the stack that made it.
 *
 * Owns: two process-wide tables.
 *   - The stack table (ledger/stack.c): interned call stacks.  A stack is captured with libunwind's
 *     unw_backtrace (UNW_LOCAL_ONLY), hashed over its return addresses and stored once; its id
 *     (1, 2, ...; 0 = no stack) never changes and its frames are never freed, so readers need no
 *     lock.  Memory grows with the number of distinct call sites only.
 *   - The live-record table (ledger/ledger.c): one 48-byte record per live allocation, keyed by
 *     address, in LEDGER_SHARDS shards (a thread records in its own group of shards, the shard
 *     named by the address; a free or lookup finds the record in any group), each with its own
 *     lock, its own open-addressing index of 32-bit record numbers and its own record slab.
 *   With NPUPOOL_LEDGER_FILE both are mirrored into a file mapped shared (ledger_file.h), which
 *   outlives the process however it dies (`npupool recover`).
 *
 * Contract:
 *   - ledger_stack_capture() takes no npupool lock and must be called BEFORE the caller takes any
 *     lock on the allocation path: unwinding may wait for the dynamic loader's lock, and a thread
 *     inside dlopen() that holds the loader lock may itself be waiting for an npupool lock (a
 *     library constructor that allocates).  Interning afterwards takes a mutex only for a stack
 *     seen for the first time and never unwinds or calls the loader under it.
 *   - Frees take no backtrace.  No function here calls the ACL runtime or allocates through it;
 *     host memory comes from libc (malloc/calloc), counted in ledger_memory().
 *   - libunwind is dlopen()ed RTLD_LOCAL at ledger_init(): Debian's libunwind.a is not PIC and
 *     libunwind.so exports `backtrace` and the `_Unwind_*` family, which would interpose on the host
 *     program's C++ exception handling if they entered the global scope.  A local handle keeps them
 *     out of it (tests/cases/ledger_unwind_binding.sh checks this with LD_DEBUG=bindings).
 *   - Thread-safe throughout.  Fork: call the three ledger_atfork_* handlers from pthread_atfork
 *     (they lock every shard and the stack table around fork()).
 *
 * Host memory: at most 64 bytes per live allocation (48-byte record + a 4-byte index slot at a load
 * factor of 0.35..0.7 + slab rounding), plus the interned stacks (16 + 8 * depth bytes each, plus
 * a 4-byte hash slot), plus a first 12 KiB record chunk and 1 KiB index in each shard in use
 * (16 per thread group: 208 KiB for a process with one allocating thread, 1.6 MiB with all 8
 * groups).  tests/unit/test_ledger.c and bench/bench_ledger.c measure it.
 */
#ifndef NPUPOOL_LEDGER_H
#define NPUPOOL_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LEDGER_DEFAULT_DEPTH 16 /* frames kept per stack when NPUPOOL_BACKTRACE_DEPTH is unset */
#define LEDGER_MAX_DEPTH 128    /* largest accepted depth */
#define LEDGER_SHARDS 128       /* live-record table shards: 8 thread groups of 16 (ledger.c) */

/* glibc's dlsym for handles npupool opened itself.  Inside libnpupool.so a plain call to dlsym
 * binds to the shim's exported dlsym (which answers for the application), so the shim passes the
 * real one down; NULL = the plain dlsym (the ledger linked without the shim: tests, tools). */
typedef void *(*ledger_dlsym_fn)(void *handle, const char *name);

typedef struct ledger_config {
    int backtrace_depth;     /* frames kept per stack, 0 = capture off (NPUPOOL_BACKTRACE_DEPTH) */
    int python_frames;       /* 1: Python frames too when an interpreter is found (ledger_py.h) */
    ledger_dlsym_fn dlsym;   /* see above */
    const char *file;        /* NPUPOOL_LEDGER_FILE: the ledger file's path pattern (%p %r %t),
                                NULL/"" = in memory only (ledger_file.h); must stay valid */
    const char *file_config; /* the options as "NAME=VALUE\n" text for the file's header */
} ledger_config_t;

/* Once at start-up (idempotent; a second call only changes the depth and the Python switch).
 * depth 0 = capture off.  With cfg->file, the first call also makes the ledger file
 * (ledger_file.h).  Opens libunwind (dlopen of libunwind.so.8, RTLD_LOCAL) and unwinds once so
 * that its caches and lazy bindings are warm before the first allocation.  When libunwind cannot
 * be loaded, capture stays off and one `npupool:` line says so.  With python_frames, looks for a
 * CPython interpreter in the process (ledger_py.h). */
void ledger_init(const ledger_config_t *cfg);
/* The dlsym the ledger was given (never NULL after ledger_init): the report layer opens libdw
 * with it too. */
ledger_dlsym_fn ledger_dlsym(void);
int ledger_backtrace_depth(void); /* depth in effect (0 = off) */

/* Capture the caller's stack and intern it; returns its id, 0 when capture is off or failed.
 * Frames are return addresses; leading frames inside the npupool shared object itself are dropped,
 * then `skip` more (use it when npupool is linked statically, e.g. in unit tests), then at most
 * `depth` frames are kept.  pre: the caller holds no npupool lock (see the contract above). */
uint32_t ledger_stack_capture(int skip);
/* Intern an explicit stack (tests, benchmarks, replays); same id for the same frames. */
uint32_t ledger_stack_intern(const uintptr_t *frames, int depth);
/* Frames of stack `id`: returns the depth and sets *frames (stable for the process lifetime);
 * 0 for id 0 or an unknown id. */
int ledger_stack_frames(uint32_t id, const uintptr_t **frames);
uint32_t ledger_stack_count(void); /* distinct stacks interned so far */

/* Record a live allocation.  granted >= requested; device = a vocab_device() id (-1 = unknown).
 * When `addr` is already recorded (the runtime reused an address whose free npupool never saw)
 * the old record is replaced. */
void ledger_record_alloc(uintptr_t addr, int device, size_t requested, size_t granted,
                         enum vocab_entry entry, enum vocab_origin origin, uint32_t stack_id);
/* The same with the allocation's time given (clock_coarse_ns(), read once by the caller for
 * everything it records about the allocation). */
void ledger_record_alloc_at(uintptr_t addr, int device, size_t requested, size_t granted,
                            enum vocab_entry entry, enum vocab_origin origin, uint32_t stack_id,
                            uint64_t time_ns);
/* Forget a live allocation: 1 if it was recorded, 0 if unknown.  Call it before the memory is
 * handed back, so the address cannot be handed out and recorded again in between.  Finds
 * tagged records too, through the resolver. */
int ledger_record_free(uintptr_t addr);

/* Tagged records: for blocks whose allocator keeps a 32-bit word beside each block (the pool's
 * tag, pool_alloc_tagged).  The record goes in no address index: the caller stores the handle
 * returned (never 0; 0 = not recorded: host memory ran out) in the block's tag and gives it
 * back to forget the record, so neither call hashes or probes.  An address must not be live in
 * a tagged and an untagged record at once (the allocator's blocks never overlap the runtime's).
 * The record's number and group are those of ledger_record_alloc_at. */
uint32_t ledger_record_alloc_tagged(uintptr_t addr, int device, size_t requested, size_t granted,
                                    enum vocab_entry entry, enum vocab_origin origin,
                                    uint32_t stack_id, uint64_t time_ns);
/* Forget the tagged record `handle` of addr: 1 when it was the live tagged record of addr, else 0
 * and nothing changes (a stale or repeated handle).  The address is checked through 16 bits of
 * its hash, not read from the record (ledger.c says why): a live handle given with another
 * block's address is refused but for one chance in 32,768.  Call it before the block can be
 * handed out again (the shim defers it past the pool lock for large blocks: shim/entry.c). */
int ledger_release_tagged(uint32_t handle, uintptr_t addr);
/* Parked forgets: the forget of a tagged record completed by the next one (the shim's frees of
 * pool blocks).  Forgetting reads and writes the record's line, which at 100,000 live belongs to
 * a block allocated long ago and has left the CPU caches: waiting for it was the largest single
 * cost of a pair through the shim (perf: 27 % of the samples, in the check word's load).
 * ledger_release_tagged_later asks for that line (a prefetch), parks the handle in `slot`, and
 * forgets the handle parked there before, whose line has arrived meanwhile.  It parks only in
 * a large ledger (ledger_set_park_min_chunks); in a small one, whose lines stay in the CPU
 * caches, the forget is immediate.
 * `slot`: the caller's memory, zeroed before its first use, never freed, used by one thread at a
 * time (the shim's per-thread records); the ledger links it into its list at its first use.  A
 * parked record still counts as live, so every reader of this header (ledger_lookup,
 * ledger_lookup_sorted, the counts, ledger_collect_sites, ledger_memory, ledger_check) and
 * ledger_drop_device and ledger_clear forget every parked record first: their answers are those
 * of immediate forgets.  (ledger_record_free, on every free the runtime serves, does not.)  The
 * handle is checked when it is forgotten, as ledger_release_tagged checks it (a stale one
 * changes nothing).  NULL slot, or a ledger file on: the forget is immediate (a killed job's
 * file must not list a freed block as live). */
typedef struct ledger_parked {
    uint64_t word;              /* check word << 32 | handle of the parked record, 0 = none
                                   (atomic; replaced under the parked record's shard lock) */
    struct ledger_parked *next; /* the ledger's list of slots (written once, before linking) */
    int linked;                 /* 1 once in the list (the owner's) */
} ledger_parked_t;
void ledger_release_tagged_later(ledger_parked_t *slot, uint32_t handle, uintptr_t addr);
/* Forget every parked record now (each reader above calls it). */
void ledger_release_parked(void);
/* A forget parks only when its record's shard has carved at least `chunks` chunks of records
 * (ledger.c: where the record's line is likely cold; LEDGER_PARK_MIN_CHUNKS by default).  0:
 * always (tests). */
#define LEDGER_PARK_MIN_CHUNKS 4u
void ledger_set_park_min_chunks(uint32_t chunks);
/* How ledger_lookup, ledger_record_free and ledger_check find a tagged record from its address:
 * 1 and *handle = the tag of the live block at addr, 0 when addr is no tagged block.  It is
 * called with no ledger lock held and may take its allocator's locks (which come before the
 * ledger's); it must never call into the ledger.  NULL (the default): tagged records are found
 * only through their handles.  ledger_check compares every tagged record with its block's tag
 * after it let go of the shards: call it when no thread allocates or frees. */
typedef int (*ledger_resolve_fn)(uintptr_t addr, uint32_t *handle);
void ledger_set_resolver(ledger_resolve_fn fn);
/* Forget every record of `device` (aclrtResetDevice released its memory); -1 = the records of
 * unknown devices. */
void ledger_drop_device(int device);
/* Forget every record (tests). */
void ledger_clear(void);
/* Number of live records of `device` (-1 = of unknown devices). */
size_t ledger_live_count(int device);
/* Number of live records of every device. */
size_t ledger_live_total(void);

/* A mark: every allocation recorded from now on gets a sequence number above the one returned
 * (0 = none recorded yet).  Numbers rise along each thread and, across threads, are ordered to
 * within a block of 64 (ledger.c); an allocation that runs at the same time as the mark may
 * fall on either side. */
uint64_t ledger_last_seq(void);
/* Live records with a sequence number above `seq` (made after ledger_last_seq() returned it). */
size_t ledger_live_count_since(uint64_t seq);

/* One live record as stored (for tests and tools). */
typedef struct ledger_record {
    uintptr_t addr;           /* device address (handle for VOCAB_MALLOC_PHYSICAL) */
    int device;               /* device id, -1 = unknown */
    size_t requested;         /* bytes the application asked for */
    size_t granted;           /* bytes that belong to the block */
    uint64_t seq;             /* allocation sequence number, 1-based, process-wide */
    uint32_t tid;             /* kernel thread id of the allocating thread */
    uint64_t time_ns;         /* clock_coarse_ns() at allocation */
    uint32_t stack_id;        /* interned stack, 0 = none */
    enum vocab_entry entry;   /* entry point */
    enum vocab_origin origin; /* who served it */
} ledger_record_t;
int ledger_lookup(uintptr_t addr, ledger_record_t *out); /* 1 found, 0 not */
/* Many lookups in one walk of the records (a report's live map): addrs sorted ascending, no
 * duplicates; found[i] = 1 and out[i] set for each address with a live record (the newest, in
 * the moment a freed large block's record outlives its free: shim/entry.c).  Returns the number
 * found.  Never calls the resolver, so it takes no allocator lock. */
size_t ledger_lookup_sorted(const uintptr_t *addrs, size_t n, ledger_record_t *out, uint8_t *found);

/* Live allocations grouped by (device, stack): what a report lists under "leaks". */
typedef struct ledger_site {
    int device;                             /* device id, -1 = unknown */
    uint32_t stack_id;                      /* interned stack, 0 = none */
    uint64_t count;                         /* live allocations */
    uint64_t requested_bytes;               /* sum of requested sizes */
    uint64_t granted_bytes;                 /* sum of granted sizes */
    uint64_t oldest_time_ns;                /* allocation time of the oldest, clock_coarse_ns() */
    uint64_t oldest_seq;                    /* its sequence number */
    uint64_t by_origin[VOCAB_ORIGIN_COUNT]; /* count per enum vocab_origin */
    uint8_t entry;                          /* enum vocab_entry of the oldest */
} ledger_site_t;
/* Group the live records made after sequence number `after_seq` (0 = every live record; each
 * shard locked in turn, briefly).  *out is malloc'ed (free() it); returns the number of sites, or
 * (size_t)-1 when host memory ran out. */
size_t ledger_collect_sites(ledger_site_t **out, uint64_t after_seq);

/* Host memory the ledger holds. */
typedef struct ledger_memory {
    size_t live_records;     /* live allocations recorded */
    size_t record_bytes;     /* record slabs + index tables + shard headers */
    size_t stacks;           /* interned stacks */
    size_t stack_bytes;      /* stack arena + stack hash tables + directory */
    uint64_t stacks_dropped; /* captures that could not be interned (out of memory or ids) */
} ledger_memory_t;
void ledger_memory(ledger_memory_t *out);

/* Consistency checker: index <-> records <-> free lists of every shard, live counts, stack table.
 * Returns the number of violations; the first is described in why (if non-NULL). */
int ledger_check(char *why, size_t why_len);

/* Fork (shim/fork.c runs these from its one lock-order table):
 *   ledger_stack_fork_gate_close  FIRST in prepare, before any npupool lock: waits until no thread is
 *                           inside the unwinder (libunwind's internal locks must not be copied
 *                           into the child held) and makes captures return 0 until the gate
 *                           opens.  It comes first because an unwinding thread may be waiting for
 *                           the loader lock, held by a thread in dlopen() that then needs an
 *                           npupool lock.
 *   ledger_stack_fork_gate_open   parent: captures work again.
 *   ledger_stack_fork_gate_child  child: capture stays off for good (a loader lock held by a parent
 *                           thread at fork() would hang the unwinder), the gate is reset.
 *   ledger_fork_lock        locks the stack table and every shard (leaves: after the report and
 *                           pool locks, which are held while shard locks are taken);
 *   ledger_fork_unlock      parent: unlocks them;
 *   ledger_fork_reinit      child: re-initialises them (the child keeps the parent's records). */
void ledger_stack_fork_gate_close(void);
void ledger_stack_fork_gate_open(void);
void ledger_stack_fork_gate_child(void);
void ledger_fork_lock(void);
void ledger_fork_unlock(void);
void ledger_fork_reinit(void);

#ifdef __cplusplus
}
#endif
#endif /* NPUPOOL_LEDGER_H */
