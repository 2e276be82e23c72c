/* ledger/ledger_file.h — the ledger file: the live records, the interned stacks and what is needed
 * to read them later, mirrored into a file mapped shared, so that `npupool recover` can tell what
 * a process held when it died in any way (SIGKILL, the OOM killer, a fault, a hang).
 * Format: base/ledger_format.h ("npupool-ledger/2").  Names: ledger_file_*.
 *
 * Contract:
 *   - Off unless ledger_init() gets a pattern (NPUPOOL_LEDGER_FILE): then every hook below costs
 *     one relaxed load and a branch, and nothing else happens.
 *   - On, the in-memory ledger stays the truth and the file is its mirror: an allocation is 64
 *     plain stores into a mapped slot and a check word; a free is one store.  No system call
 *     per allocation: space is reserved (fallocate) ahead of use, on the slow path where a
 *     shard carves records past the slots it has, or a stack table chunk fills.
 *   - The file never harms the process: never written past what was reserved (no SIGBUS), never
 *     grown past RLIMIT_FSIZE (no SIGXFSZ), no descriptor kept (each growth opens the file by
 *     path, checks it is still the same file, maps, closes).  When space runs out, one line, the
 *     header says INCOMPLETE, and what has slots stays exact while the rest lives in memory only.
 *   - Fork: the child never writes the parent's mapping (its fork handler unmaps it).  When the
 *     pattern gives the child another path (%p), the child starts its own file at its first
 *     allocation, with the stacks and modules but none of the parent's records; else it has none.
 *   - Exit (ledger_file_at_exit): nothing live, the file is removed; else it stays, one line.
 *   - Identity: the header names the npupool that wrote it (version, libnpupool.so) from the
 *     start, and the runtime library once the shim names it (ledger_file_runtime).
 *   - Python frames: every frame the Python frame table interns is appended once (its own
 *     entry kind), so a stack's Python frames are named in the file as in memory.
 * Locking: the file lock guards the file (segments, chunks, appends, modules, device figures,
 * identity).  It is a leaf: taken under the stack table's lock, the Python frame table's lock and
 * a shard's lock, never the other way.  A shard's slot table (which slots are mapped) is guarded by that shard's lock.
 */
#ifndef NPUPOOL_LEDGER_FILE_H
#define NPUPOOL_LEDGER_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ledger.h"
#include "ledger_format.h"

#define LEDGER_FILE_HIDDEN __attribute__((visibility("hidden")))

/* 1 while the file is mirrored (or a fork child's file is pending): the hooks' one load. */
extern int ledger_file_mirroring LEDGER_FILE_HIDDEN;

static inline int ledger_file_on(void)
{
    return __atomic_load_n(&ledger_file_mirroring, __ATOMIC_RELAXED);
}

/* ---- from ledger_init and the ledger's own files ------------------------------------------- */

/* Create the file when cfg->file is a pattern and none is open (ledger_init).  1 when it made one
 * (the caller then writes the records already live); failure costs one line and leaves the ledger
 * in memory. */
LEDGER_FILE_HIDDEN int ledger_file_open(const ledger_config_t *cfg);
/* A shard's slots (guarded by the shard's lock; ledger_file.c grows them). */
typedef struct ledger_file_shard {
    lfmt_record_t **grp; /* group g -> its LFMT_GROUP slots */
    uint32_t grp_cap;    /* entries allocated in grp */
    uint32_t mapped;     /* records n < mapped have a slot */
    uint32_t next_slots; /* slots of the next record chunk (0 = the first size) */
} ledger_file_shard_t;
extern ledger_file_shard_t ledger_file_shards[LEDGER_SHARDS] LEDGER_FILE_HIDDEN;

/* The slot of record n when it has none yet: carves record chunks (a fork child's file is made
 * here).  NULL when there is no space (counted in the header). */
LEDGER_FILE_HIDDEN lfmt_record_t *ledger_file_slot_slow(unsigned shard, uint32_t n);

/* Record n of shard `shard` now holds these fields (pre: that shard's lock held).  Inline: the
 * allocation path's cost is a table load, the stores and the check word.  WRITING first: a death
 * between it and the check word leaves a torn slot (counted), not a free one; what survives a
 * death is what was stored in program order, so keeping the compiler from moving the field
 * stores above it is enough (a reader of a running process does not depend on it: a check that
 * does not match the fields is torn whatever it saw). */
static inline void ledger_file_record(unsigned shard, uint32_t n, const lfmt_record_t *v)
{
    const ledger_file_shard_t *m = &ledger_file_shards[shard];
    lfmt_record_t *s =
        n < m->mapped ? m->grp[n / LFMT_GROUP] + n % LFMT_GROUP : ledger_file_slot_slow(shard, n);
    if (!s) return;
    __atomic_store_n(&s->check, (uint64_t)LFMT_CHECK_WRITING, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(s, v, offsetof(lfmt_record_t, check));
    __atomic_store_n(&s->check, lfmt_record_check(v), __ATOMIC_RELEASE);
}

/* Record n of shard `shard` is free (pre: that shard's lock held): one store. */
static inline void ledger_file_clear(unsigned shard, uint32_t n)
{
    const ledger_file_shard_t *m = &ledger_file_shards[shard];
    if (n < m->mapped)
        __atomic_store_n(&m->grp[n / LFMT_GROUP][n % LFMT_GROUP].check, 0, __ATOMIC_RELEASE);
}
/* Every record of the shard was forgotten (ledger_clear; pre: its lock held). */
LEDGER_FILE_HIDDEN void ledger_file_shard_clear(unsigned shard);
/* Violations of: record n of the shard is exactly *r (NULL = free) in the file (ledger_check;
 * pre: its lock held).  0 when it agrees or has no slot. */
LEDGER_FILE_HIDDEN int ledger_file_check_slot(unsigned shard, uint32_t n, const ledger_record_t *r);
/* Stack `id` was interned (pre: the stack table's lock held): appended to the file. */
LEDGER_FILE_HIDDEN void ledger_file_stack_added(uint32_t id, const uintptr_t *frames, int depth);
/* A capture returned stack `id`: the first time a stack is seen after an object was loaded or
 * unloaded, the module map is brought up to date (dl_iterate_phdr).  pre: no npupool lock held,
 * inside the capture gate (the loader is not entered during fork). */
LEDGER_FILE_HIDDEN void ledger_file_stack_seen(uint32_t id);
LEDGER_FILE_HIDDEN extern uint32_t ledger_file_modules_checked; /* stacks <= it were checked */
/* Python frame `id` was interned (pre: the Python frame table's lock held, the frame published,
 * ids in rising order): appended to the file. */
LEDGER_FILE_HIDDEN void ledger_file_pyframe_added(uint32_t id, const char *file,
                                                  const char *function, uint32_t line);

static inline void ledger_file_captured(uint32_t id)
{
    if (ledger_file_on() && id > __atomic_load_n(&ledger_file_modules_checked, __ATOMIC_RELAXED))
        ledger_file_stack_seen(id);
}

/* ---- for the shim ---------------------------------------------------------------------------- */

/* The runtime library in use (the object defining the real aclrtMalloc: its path and GNU build
 * id as hex, NULL = none) for the header; only the first call with a library counts, and it is
 * kept for a fork child's file.  pre: no npupool lock held (takes the file lock). */
void ledger_file_runtime(const char *library, const char *build_id);
/* 1 once ledger_file_runtime named the runtime (the shim's one load before it asks). */
int ledger_file_runtime_known(void);
/* Path of the file being written, NULL when none.  Async-signal-safe. */
const char *ledger_file_path(void);
/* The process is dying of `sig` (a fatal-signal handler): noted in the header.  AS-safe. */
void ledger_file_note_death(int sig);
/* 1 when the figures of `device` (-1 = unknown) are due (none written in the last second): the
 * caller then takes them and calls ledger_file_device_put.  One relaxed load when off. */
int ledger_file_device_due_slow(int device);
static inline int ledger_file_device_due(int device)
{
    return ledger_file_on() && ledger_file_device_due_slow(device);
}
/* Write the figures of one device (pre: no ledger lock held). */
void ledger_file_device_put(const lfmt_device_figs_t *figs);
/* The exit hook: nothing live, the file is removed; else it stays and one line names it.  pre: no
 * npupool lock held. */
void ledger_file_at_exit(void);
/* Unmap and forget the file, removing it when `remove` (tests, benchmarks; single-threaded). */
void ledger_file_close(int remove);

/* Host memory the mirror holds (slot tables, module list), bytes. */
size_t ledger_file_host_bytes(void);

/* Fork (shim/fork.c's table, right after the ledger: the file lock is a leaf). */
void ledger_file_fork_prepare(void);
void ledger_file_fork_parent(void);
void ledger_file_fork_child(void);

#endif /* NPUPOOL_LEDGER_FILE_H */
