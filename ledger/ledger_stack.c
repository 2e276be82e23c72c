/* ledger/ledger_stack.c — stack capture and interning.
 *
 * Owns: the capture path (the fork gate, dropping npupool's own frames) and the stack table (see
 * ledger.h).  The walk itself is ledger_unwind.c's (libunwind, loaded privately and guarded).
 *
 * Capture: leading frames inside the npupool shared object (its PT_LOAD range, found once at
 * init) are dropped, then `skip` more, then at most `depth` frames are interned.  The fork gate
 * covers the walk, the interning and the ledger file's look at the module map (ledger_file.h:
 * it may enter the loader, which a fork must not find held).
 * When an interpreter is in the process, ledger_py.c merges the thread's Python frames into what is left
 * and appends its mark (ledger_py.h) before interning; the table here only sees uintptr_t values.
 *
 * Interning: a stack is {hash, depth, id, frames[]} in an append-only arena.  The directory maps
 * an id to its stack: DIR_CHUNKS chunks of DIR_CHUNK atomic pointers, allocated on demand and never
 * moved or freed.  The hash table is open addressing over 32-bit ids (linear probing, load <= 1/2),
 * published through one atomic pointer.  Lookups are lock-free: acquire-load the table, acquire-load
 * each slot, acquire-load the directory entry; a writer fills the stack, publishes it in the
 * directory (release), then stores the slot (release).  Inserting takes `stack_lock`, re-checks the
 * current table, inserts, and grows the table by doubling (the old table is kept on a retired list
 * and never freed, because a lock-free reader may still be probing it; the retired tables add up to
 * less than the current one).  A reader that probed a retired table and missed falls into the
 * locked path, which finds the stack in the current table: an id is never issued twice for the same
 * frames.  A capture first compares its frames with the last STACK_MEMO stacks its thread interned
 * (t_memo): a loop allocating from one place skips the hash and the probe (bench_shim, 1,000 live,
 * default depth: a pair's median 330 -> 270 ns; docs/bench.md, "Measured changes").
 *
 * Locking: stack_lock guards the arena, the id counter, the directory chunk allocation and table
 * growth.  Nothing under it unwinds or calls the dynamic loader.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf_dyn.h"
#include "ledger.h"
#include "ledger_file.h"
#include "ledger_internal.h"
#include "ledger_py.h"
#include "loader.h"
#include "log.h"

#define DIR_CHUNK 1024u         /* stack pointers per directory chunk */
#define DIR_CHUNKS 16384u       /* directory chunks: at most 16M distinct stacks */
#define ARENA_CHUNK (64u << 10) /* bytes per arena chunk */
#define ITAB_MIN 1024u          /* initial hash table slots */
#define SELF_MAX 16             /* most of npupool's own frames a capture walks past */
#define PY_NATIVE_SLACK 8       /* native frames walked beyond `depth` when Python frames are on */

typedef struct stack_rec {
    uint64_t hash;      /* hash of depth and frames */
    uint32_t depth;     /* number of frames */
    uint32_t id;        /* this stack's id */
    uintptr_t frames[]; /* return addresses, innermost first */
} stack_rec_t;

typedef struct itab {
    struct itab *retired_next; /* older tables (kept for lock-free readers) */
    uint32_t mask;             /* slots - 1 */
    _Atomic uint32_t slot[];   /* stack id, 0 = empty */
} itab_t;

static struct {
    pthread_mutex_t lock;                    /* see the header comment */
    _Atomic(itab_t *) table;                 /* current hash table */
    uint32_t count;                          /* stacks interned (ids 1..count) */
    _Atomic(stack_rec_t *) *dir[DIR_CHUNKS]; /* id -> stack, chunks published atomically */
    char *arena;                             /* current arena chunk */
    size_t arena_used;                       /* bytes used in it */
    size_t bytes;                            /* all stack-table host memory, bytes */
    _Atomic uint64_t dropped;                /* stacks not interned (no memory / no ids) */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Fork gate: no thread may be inside the unwinder when fork() copies the process (a lock libunwind
 * holds there would stay held in the child forever).  Captures count themselves in a striped
 * counter (one cache line per stripe: threads do not bounce one line); the prepare handler closes
 * the gate, then waits for the count to drain; a capture that finds the gate closed returns 0
 * instead of waiting (it may hold the loader lock, which an in-flight unwinder may be waiting for). */
#define GATE_STRIPES 16
static struct {
    _Atomic long n; /* captures in flight on this stripe */
    char pad[64 - sizeof(long)];
} in_flight[GATE_STRIPES];
static _Atomic int fork_gate;        /* 1 while a fork is being prepared */
static _Atomic unsigned next_stripe; /* stripe assignment */
static __thread int t_stripe __attribute__((tls_model("initial-exec"))) = -1; /* this thread's */

/* The stacks this thread interned last: a capture whose frames equal one of them takes its id
 * without hashing or probing the table (a loop that allocates from one call site, the common
 * case, captures the same stack every time).  Interned stacks never move or go away, so a
 * pointer is all a thread keeps (STACK_MEMO * 8 bytes of static TLS); a miss replaces the
 * entries in turn. */
#define STACK_MEMO 4u
static __thread const stack_rec_t *t_memo[STACK_MEMO] __attribute__((tls_model("initial-exec")));
static __thread uint8_t t_memo_next __attribute__((tls_model("initial-exec")));
_Static_assert(256u % STACK_MEMO == 0, "the 8-bit t_memo_next wraps with the ring");

static _Atomic int g_depth;        /* frames kept, 0 = off */
static uintptr_t self_lo, self_hi; /* npupool's own mapped range, 0/0 when not a DSO */
/* npupool's own frames on top of a captured stack: the most any capture has found (at most
 * SELF_MAX).  They are the same few on every path into the ledger, so a walk goes that many
 * frames past them and `depth` more, no further (it went a fixed 6 past them: at the default
 * depth, 3 frames more than the shim's paths need).  A capture that finds more of them raises
 * the count and walks again, once, if its walk stopped short of the frames it keeps. */
static _Atomic int self_frames;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

/* ---- hashing ------------------------------------------------------------------------------- */

/* Each frame, offset by its position, is multiplied and folded on its own, so the frames' products
 * do not wait for each other (a chain of ledger_mix64 over the frames, two dependent multiplies
 * a frame, cost a 16-frame intern 59 ns against 25, all hits); one finalizer mixes their sum.  A
 * stack that differs from another in one frame hashes differently (each frame's term is a
 * bijection of it); interning compares the frames anyway. */
static uint64_t stack_hash(const uintptr_t *frames, int depth)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL * (uint64_t)(depth + 1);
    for (int i = 0; i < depth; i++) {
        uint64_t x = (frames[i] + (uint64_t)i * 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
        h += x ^ (x >> 31);
    }
    return ledger_mix64(h);
}

/* ---- directory ----------------------------------------------------------------------------- */

static const stack_rec_t *stack_get(uint32_t id)
{
    if (id == 0) return NULL;
    uint32_t c = (id - 1) / DIR_CHUNK;
    if (c >= DIR_CHUNKS) return NULL;
    _Atomic(stack_rec_t *) *chunk = __atomic_load_n(&st.dir[c], __ATOMIC_ACQUIRE);
    if (!chunk) return NULL;
    return atomic_load_explicit(&chunk[(id - 1) % DIR_CHUNK], memory_order_acquire);
}

/* pre: stack_lock held.  0 on success. */
static int dir_publish_locked(uint32_t id, stack_rec_t *rec)
{
    uint32_t c = (id - 1) / DIR_CHUNK;
    if (c >= DIR_CHUNKS) return -1;
    _Atomic(stack_rec_t *) *chunk = __atomic_load_n(&st.dir[c], __ATOMIC_RELAXED);
    if (!chunk) {
        chunk = calloc(DIR_CHUNK, sizeof *chunk);
        if (!chunk) return -1;
        st.bytes += DIR_CHUNK * sizeof *chunk;
        __atomic_store_n(&st.dir[c], chunk, __ATOMIC_RELEASE);
    }
    atomic_store_explicit(&chunk[(id - 1) % DIR_CHUNK], rec, memory_order_release);
    return 0;
}

/* ---- hash table ---------------------------------------------------------------------------- */

static uint32_t itab_find(const itab_t *t, uint64_t h, const uintptr_t *frames, int depth)
{
    if (!t) return 0;
    for (uint32_t i = (uint32_t)h & t->mask;; i = (i + 1) & t->mask) {
        uint32_t id = atomic_load_explicit(&((itab_t *)t)->slot[i], memory_order_acquire);
        if (id == 0) return 0;
        const stack_rec_t *r = stack_get(id);
        if (r && r->hash == h && r->depth == (uint32_t)depth &&
            memcmp(r->frames, frames, (size_t)depth * sizeof frames[0]) == 0)
            return id;
    }
}

static void itab_put(itab_t *t, uint64_t h, uint32_t id)
{
    uint32_t i = (uint32_t)h & t->mask;
    while (atomic_load_explicit(&t->slot[i], memory_order_relaxed)) i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slot[i], id, memory_order_release);
}

static itab_t *itab_new(uint32_t slots)
{
    itab_t *t = calloc(1, sizeof *t + (size_t)slots * sizeof(uint32_t));
    if (!t) return NULL;
    t->mask = slots - 1;
    st.bytes += sizeof *t + (size_t)slots * sizeof(uint32_t);
    return t;
}

/* pre: stack_lock held.  Makes room for one more id; 0 on success. */
static int itab_reserve_locked(void)
{
    itab_t *old = atomic_load_explicit(&st.table, memory_order_relaxed);
    uint32_t slots = old ? old->mask + 1 : 0;
    if (old && (uint64_t)(st.count + 1) * 2 <= slots) return 0;
    uint32_t nslots = slots ? slots * 2 : ITAB_MIN;
    if (nslots == 0) return -1;
    itab_t *t = itab_new(nslots);
    if (!t) return -1;
    for (uint32_t id = 1; id <= st.count; id++) {
        const stack_rec_t *r = stack_get(id);
        if (r) itab_put(t, r->hash, id);
    }
    t->retired_next = old;
    atomic_store_explicit(&st.table, t, memory_order_release);
    return 0;
}

/* pre: stack_lock held. */
static stack_rec_t *arena_alloc_locked(size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if (!st.arena || st.arena_used + bytes > ARENA_CHUNK) {
        size_t sz = bytes > ARENA_CHUNK ? bytes : ARENA_CHUNK;
        char *chunk = malloc(sz);
        if (!chunk) return NULL;
        st.bytes += sz;
        st.arena = chunk;
        st.arena_used = 0;
    }
    stack_rec_t *r = (stack_rec_t *)(st.arena + st.arena_used);
    st.arena_used += bytes;
    return r;
}

uint32_t ledger_stack_intern(const uintptr_t *frames, int depth)
{
    if (depth <= 0) return 0;
    if (depth > LEDGER_MAX_DEPTH) depth = LEDGER_MAX_DEPTH;
    uint64_t h = stack_hash(frames, depth);
    uint32_t id =
        itab_find(atomic_load_explicit(&st.table, memory_order_acquire), h, frames, depth);
    if (id) return id;

    pthread_mutex_lock(&st.lock);
    id = itab_find(atomic_load_explicit(&st.table, memory_order_relaxed), h, frames, depth);
    if (!id) {
        stack_rec_t *r = NULL;
        if (itab_reserve_locked() == 0)
            r = arena_alloc_locked(sizeof *r + (size_t)depth * sizeof frames[0]);
        if (r) {
            r->hash = h;
            r->depth = (uint32_t)depth;
            r->id = st.count + 1;
            memcpy(r->frames, frames, (size_t)depth * sizeof frames[0]);
            if (dir_publish_locked(r->id, r) == 0) {
                st.count++;
                id = r->id;
                itab_put(atomic_load_explicit(&st.table, memory_order_relaxed), h, id);
                ledger_file_stack_added(id, r->frames, depth); /* the file lock is a leaf */
            }
        }
        if (!id) atomic_fetch_add_explicit(&st.dropped, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&st.lock);
    return id;
}

int ledger_stack_frames(uint32_t id, const uintptr_t **frames)
{
    const stack_rec_t *r = stack_get(id);
    if (!r) {
        if (frames) *frames = NULL;
        return 0;
    }
    if (frames) *frames = r->frames;
    return (int)r->depth;
}

uint32_t ledger_stack_count(void)
{
    pthread_mutex_lock(&st.lock);
    uint32_t n = st.count;
    pthread_mutex_unlock(&st.lock);
    return n;
}

LEDGER_HIDDEN void ledger_stack_memory(size_t *stacks, size_t *bytes, uint64_t *dropped)
{
    pthread_mutex_lock(&st.lock);
    *stacks = st.count;
    *bytes = st.bytes;
    pthread_mutex_unlock(&st.lock);
    *dropped = atomic_load_explicit(&st.dropped, memory_order_relaxed);
}

/* Checks every id is found through the table.  Returns violations. */
LEDGER_HIDDEN int ledger_stack_check(char *why, size_t why_len)
{
    int bad = 0;
    pthread_mutex_lock(&st.lock);
    itab_t *t = atomic_load_explicit(&st.table, memory_order_relaxed);
    for (uint32_t id = 1; id <= st.count; id++) {
        const stack_rec_t *r = stack_get(id);
        if (!r || r->id != id || r->depth == 0 || r->depth > LEDGER_MAX_DEPTH ||
            r->hash != stack_hash(r->frames, (int)r->depth) ||
            itab_find(t, r->hash, r->frames, (int)r->depth) != id) {
            if (!bad && why)
                snprintf(why, why_len, "stack %u is malformed or not found by hash", id);
            bad++;
        }
    }
    pthread_mutex_unlock(&st.lock);
    char pwhy[160];
    int pbad = ledger_py_table_check(pwhy, sizeof pwhy);
    if (pbad && !bad && why) snprintf(why, why_len, "%s", pwhy);
    return bad + pbad;
}

/* ---- capture ------------------------------------------------------------------------------- */

/* Find the mapped range of the object that contains this file's code, unless that object is the
 * main program (npupool linked statically: nothing to skip by address). */
static int self_range_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    uintptr_t me = (uintptr_t)ctx;
    uintptr_t lo, hi;
    elf_load_range(info, &lo, &hi);
    if (me < lo || me >= hi) return 0;
    if (info->dlpi_name && info->dlpi_name[0]) { /* a shared object, not the main program */
        self_lo = lo;
        self_hi = hi;
    }
    return 1;
}

static void self_range_once(void)
{
    loader_iterate(self_range_cb, (void *)(uintptr_t)&ledger_stack_capture);
}

LEDGER_HIDDEN void ledger_stack_init(int backtrace_depth, int python_frames)
{
    if (backtrace_depth < 0) backtrace_depth = 0;
    if (backtrace_depth > LEDGER_MAX_DEPTH) backtrace_depth = LEDGER_MAX_DEPTH;
    if (backtrace_depth > 0) {
        pthread_once(&self_once, self_range_once);
        ledger_unwind_load();
    }
    ledger_py_init(backtrace_depth > 0 && python_frames);
    atomic_store_explicit(&g_depth, backtrace_depth, memory_order_release);
}

int ledger_backtrace_depth(void)
{
    if (!ledger_unwind_ready()) return 0;
    return atomic_load_explicit(&g_depth, memory_order_relaxed);
}

/* ledger_stack_intern through this thread's memo (t_memo). */
static uint32_t intern_memo(const uintptr_t *frames, int depth)
{
    size_t bytes = (size_t)depth * sizeof frames[0];
    for (unsigned k = 0; k < STACK_MEMO; k++) {
        const stack_rec_t *r = t_memo[k];
        if (r && r->depth == (uint32_t)depth && memcmp(r->frames, frames, bytes) == 0) return r->id;
    }
    uint32_t id = ledger_stack_intern(frames, depth);
    const stack_rec_t *r = stack_get(id);
    if (r) t_memo[t_memo_next++ % STACK_MEMO] = r; /* (t_memo_next wraps with the ring) */
    return id;
}

/* The first of buf[1..n) outside npupool's own code (buf[0] is inside ledger_stack_capture, where
 * the walk is inlined). */
static int self_frames_end(void *const *buf, int n)
{
    int i = 1;
    while (i < n && (uintptr_t)buf[i] >= self_lo && (uintptr_t)buf[i] < self_hi) i++;
    return i;
}

__attribute__((noinline)) uint32_t ledger_stack_capture(int skip)
{
    int depth = atomic_load_explicit(&g_depth, memory_order_relaxed);
    if (depth <= 0 || !ledger_unwind_ready()) return 0;
    if (skip < 0) skip = 0;
    if (t_stripe < 0)
        t_stripe =
            (int)(atomic_fetch_add_explicit(&next_stripe, 1, memory_order_relaxed) % GATE_STRIPES);
    _Atomic long *mine = &in_flight[t_stripe].n;
    atomic_fetch_add(
        mine, 1); /* seq_cst: ordered before reading the gate (see ledger_stack_fork_gate_close) */
    if (atomic_load(&fork_gate)) {
        atomic_fetch_sub(mine, 1);
        return 0;
    }
    void *buf[LEDGER_MAX_DEPTH + 32 + PY_NATIVE_SLACK + SELF_MAX + 2];
    int python = ledger_py_active(); /* (it may look for an interpreter: before the walk) */
    /* this file's frame, the skip, and with Python the interpreter's own frames, which take
     * no place among the `depth` native frames kept (ledger_py_merge) */
    int above = 1 + (skip < 32 ? skip : 32) + (python ? PY_NATIVE_SLACK : 0);
    int guess = atomic_load_explicit(&self_frames, memory_order_relaxed);
    int want = depth + above + guess;
    int n = ledger_unwind_backtrace(buf, want);
    int i = self_frames_end(buf, n);
    int seen = i - 1 < SELF_MAX ? i - 1 : SELF_MAX;
    if (seen > guess) { /* more of npupool's frames than the walk allowed for */
        while (guess < seen &&
               !atomic_compare_exchange_weak_explicit(&self_frames, &guess, seen,
                                                      memory_order_relaxed, memory_order_relaxed)) {
        }
        if (n == want) { /* it stopped short of the frames kept: walk again, further */
            want = depth + above + seen;
            n = ledger_unwind_backtrace(buf, want);
            i = self_frames_end(buf, n);
        }
    }
    i += skip;
    uint32_t id = 0;
    if (i < n && python) { /* Python frames and the mark (no lock of the interpreter) */
        uintptr_t mixed[LEDGER_MAX_DEPTH];
        int m = ledger_py_splice((const uintptr_t *)&buf[i], n - i, depth, mixed, LEDGER_MAX_DEPTH);
        if (m > 0) id = intern_memo(mixed, m);
    }
    if (i < n && id == 0) {
        int keep = n - i < depth ? n - i : depth;
        id = intern_memo((const uintptr_t *)&buf[i], keep);
    }
    ledger_file_captured(id); /* may read the module map: still inside the gate */
    atomic_fetch_sub_explicit(mine, 1, memory_order_release);
    return id;
}

/* ---- fork ---------------------------------------------------------------------------------- */

void ledger_stack_fork_gate_close(void)
{
    atomic_store(&fork_gate, 1); /* seq_cst: ordered before reading the counters */
    for (int i = 0; i < GATE_STRIPES; i++) {
        while (atomic_load(&in_flight[i].n) > 0) sched_yield();
    }
}

void ledger_stack_fork_gate_open(void) { atomic_store(&fork_gate, 0); }

void ledger_stack_fork_gate_child(void)
{
    /* No stack capture in a fork child: unwinding walks the loaded objects with dl_iterate_phdr,
     * and a parent thread that held the loader's lock at fork() (a sanitizer runtime, a thread
     * starting up) leaves it locked forever in the child.  Allocations are still recorded, with
     * stack id 0; the child's reports show backtrace depth 0. */
    atomic_store(&g_depth, 0);
    for (int i = 0; i < GATE_STRIPES; i++)
        atomic_store(&in_flight[i].n, 0); /* other threads are gone */
    t_stripe = -1;
    atomic_store(&fork_gate, 0);
}

/* The stack table's lock, then the Python tables' (never held together elsewhere). */
LEDGER_HIDDEN void ledger_stack_fork_lock(void)
{
    pthread_mutex_lock(&st.lock);
    ledger_py_fork_lock();
}
LEDGER_HIDDEN void ledger_stack_fork_unlock(void)
{
    ledger_py_fork_unlock();
    pthread_mutex_unlock(&st.lock);
}
LEDGER_HIDDEN void ledger_stack_fork_reinit(void)
{
    pthread_mutex_init(&st.lock, NULL);
    ledger_py_fork_reinit();
}
