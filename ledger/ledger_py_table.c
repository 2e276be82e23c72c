/* ledger/ledger_py_table.c — the Python frame table: interned (file, function, line) -> id.
 *
 * Owns: the strings (file and function names as UTF-8) and the frames of ledger_py.h, nothing
 * about interpreters: ledger_py.c reads frames and hands names and lines to
 * ledger_py_table_intern; reports read them back by id.  Kept apart from the stack table and
 * reached only through the functions below, so both can move to another store together.
 *
 * Layout: strings live in append-only arena chunks (ARENA_CHUNK), frames in fixed chunks of
 * FRAME_CHUNK records; each has a directory of chunks (STR_CHUNKS, FRAME_CHUNKS) allocated on
 * demand and never moved or freed, an id counter (ids 1..n), and an open-addressing hash table of
 * ids (linear probing, load <= 1/2, doubled) that finds an existing entry.
 * Invariants (ledger_py_table_check): every frame names interned strings and is found by its key;
 * every string is found by its text; ids are never reused.
 * Mirror: a new frame is handed to the ledger file (ledger_file_pyframe_added) under table_lock,
 * after it is published, so the file gets every frame once and in id order.
 * Locking: table_lock guards the arenas, counters and hash tables.  Readers (get, stats) take no
 * lock: an entry is written, then published with release order (directory slot, then count),
 * and read after an acquire load of the count.  Nothing under the lock calls out of this file
 * except malloc/calloc and the ledger file's append (its lock is a leaf).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_file.h"
#include "ledger_internal.h"

#define STR_CHUNK 1024u         /* string pointers per directory chunk */
#define STR_CHUNKS 16384u       /* directory chunks: 16M strings */
#define FRAME_CHUNK 1024u       /* frame records per chunk */
#define FRAME_CHUNKS 16384u     /* chunks: 16M frames */
#define ARENA_CHUNK (16u << 10) /* bytes per string arena chunk (a name is at most 1 KiB) */

typedef struct py_frame_rec {
    uint32_t file;     /* string id of the file name */
    uint32_t function; /* string id of the function name */
    uint32_t line;     /* line, 0 = unknown */
    uint32_t unused;   /* zero */
} py_frame_rec_t;

static struct {
    pthread_mutex_t lock;                    /* table_lock: arenas, ids, hash tables */
    _Atomic(void *) str_dir[STR_CHUNKS];     /* chunks of string id - 1 -> text */
    _Atomic uint32_t nstrings;               /* strings interned (ids 1..n) */
    uint32_t *str_slot;                      /* string hash table: id, 0 = empty */
    uint32_t str_mask;                       /* its slots - 1 */
    char *arena;                             /* current string arena chunk */
    size_t arena_used;                       /* bytes used in it */
    _Atomic(void *) frame_dir[FRAME_CHUNKS]; /* chunks of frame id - 1 -> record */
    _Atomic uint32_t nframes;                /* frames interned (ids 1..n) */
    uint32_t *frame_slot;                    /* frame hash table: id, 0 = empty */
    uint32_t frame_mask;                     /* its slots - 1 */
    _Atomic size_t bytes;                    /* host memory of everything here */
    _Atomic uint64_t dropped;                /* frames not interned */
} pt = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t bytes_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return ledger_mix64(h ^ n);
}

static const char *str_get(uint32_t id)
{
    if (id == 0 || id > atomic_load_explicit(&pt.nstrings, memory_order_acquire)) return NULL;
    _Atomic(const char *) *chunk =
        atomic_load_explicit(&pt.str_dir[(id - 1) / STR_CHUNK], memory_order_acquire);
    return chunk ? atomic_load_explicit(&chunk[(id - 1) % STR_CHUNK], memory_order_acquire) : NULL;
}

static const py_frame_rec_t *frame_get(uint32_t id)
{
    if (id == 0 || id > atomic_load_explicit(&pt.nframes, memory_order_acquire)) return NULL;
    py_frame_rec_t *chunk =
        atomic_load_explicit(&pt.frame_dir[(id - 1) / FRAME_CHUNK], memory_order_acquire);
    return chunk ? &chunk[(id - 1) % FRAME_CHUNK] : NULL;
}

/* pre: table_lock, a free slot exists.  Id into its home slot or the next free one. */
static void slot_put(uint32_t *slot, uint32_t mask, uint64_t h, uint32_t id)
{
    uint32_t j = (uint32_t)h & mask;
    while (slot[j]) j = (j + 1) & mask;
    slot[j] = id;
}

/* pre: table_lock.  Doubles a hash table of ids when it would pass half full; 0 ok. */
static int slots_reserve(uint32_t **slot, uint32_t *mask, uint32_t count,
                         uint64_t (*hash_of)(uint32_t id))
{
    uint32_t nslots = *slot ? *mask + 1 : 0;
    if (*slot && (uint64_t)(count + 1) * 2 <= nslots) return 0;
    uint32_t grown = nslots ? nslots * 2 : 1024;
    uint32_t *ns = calloc(grown, sizeof *ns);
    if (!ns) return -1;
    for (uint32_t i = 0; i < nslots; i++) {
        uint32_t id = (*slot)[i];
        if (!id) continue;
        slot_put(ns, grown - 1, hash_of(id), id);
    }
    free(*slot);
    atomic_fetch_add_explicit(&pt.bytes, (size_t)(grown - nslots) * sizeof *ns,
                              memory_order_relaxed);
    *slot = ns;
    *mask = grown - 1;
    return 0;
}

static uint64_t str_hash_of(uint32_t id)
{
    const char *s = str_get(id);
    return bytes_hash(s, strlen(s));
}

/* pre: table_lock.  Chunk c of a directory, allocated (n zeroed elements of `size` bytes,
 * counted) and published when it is missing; NULL when host memory ran out. */
static void *chunk_at_locked(_Atomic(void *) *dir, uint32_t c, size_t n, size_t size)
{
    void *chunk = atomic_load_explicit(&dir[c], memory_order_relaxed);
    if (chunk) return chunk;
    chunk = calloc(n, size);
    if (!chunk) return NULL;
    atomic_fetch_add_explicit(&pt.bytes, n * size, memory_order_relaxed);
    atomic_store_explicit(&dir[c], chunk, memory_order_release);
    return chunk;
}

/* pre: table_lock.  The id of the n bytes at s, 0 when not interned. */
static uint32_t str_find_locked(const char *s, size_t n, uint64_t h)
{
    if (!pt.str_slot) return 0;
    for (uint32_t j = (uint32_t)h & pt.str_mask; pt.str_slot[j]; j = (j + 1) & pt.str_mask) {
        const char *t = str_get(pt.str_slot[j]);
        if (strncmp(t, s, n) == 0 && t[n] == '\0') return pt.str_slot[j];
    }
    return 0;
}

/* pre: table_lock.  The id of the n bytes at s (no NUL inside), interning them; 0 = no memory. */
static uint32_t str_intern_locked(const char *s, size_t n)
{
    uint64_t h = bytes_hash(s, n);
    uint32_t count = atomic_load_explicit(&pt.nstrings, memory_order_relaxed);
    uint32_t found = str_find_locked(s, n, h);
    if (found) return found;
    if (count + 1 > STR_CHUNK * STR_CHUNKS ||
        slots_reserve(&pt.str_slot, &pt.str_mask, count, str_hash_of) != 0)
        return 0;
    _Atomic(const char *) *chunk =
        chunk_at_locked(pt.str_dir, count / STR_CHUNK, STR_CHUNK, sizeof *chunk);
    if (!chunk) return 0;
    if (!pt.arena || pt.arena_used + n + 1 > ARENA_CHUNK) {
        char *a = malloc(ARENA_CHUNK);
        if (!a) return 0;
        atomic_fetch_add_explicit(&pt.bytes, ARENA_CHUNK, memory_order_relaxed);
        pt.arena = a;
        pt.arena_used = 0;
    }
    char *copy = pt.arena + pt.arena_used;
    memcpy(copy, s, n);
    copy[n] = '\0';
    pt.arena_used += n + 1;
    atomic_store_explicit(&chunk[count % STR_CHUNK], copy, memory_order_release);
    atomic_store_explicit(&pt.nstrings, count + 1, memory_order_release);
    slot_put(pt.str_slot, pt.str_mask, h, count + 1);
    return count + 1;
}

static uint64_t frame_key_hash(uint32_t file, uint32_t function, uint32_t line)
{
    return ledger_mix64(((uint64_t)file << 32 | function) ^ ledger_mix64(line));
}

static uint64_t frame_hash_of(uint32_t id)
{
    const py_frame_rec_t *r = frame_get(id);
    return frame_key_hash(r->file, r->function, r->line);
}

/* pre: table_lock.  The id of (file, function, line), 0 when not interned. */
static uint32_t frame_find_locked(uint32_t file, uint32_t function, uint32_t line)
{
    if (!pt.frame_slot) return 0;
    uint64_t h = frame_key_hash(file, function, line);
    for (uint32_t j = (uint32_t)h & pt.frame_mask; pt.frame_slot[j]; j = (j + 1) & pt.frame_mask) {
        const py_frame_rec_t *r = frame_get(pt.frame_slot[j]);
        if (r->file == file && r->function == function && r->line == line) return pt.frame_slot[j];
    }
    return 0;
}

/* pre: table_lock.  The id of (file, function, line), interning it; 0 = no memory or ids. */
static uint32_t frame_intern_locked(uint32_t file, uint32_t function, uint32_t line)
{
    uint64_t h = frame_key_hash(file, function, line);
    uint32_t count = atomic_load_explicit(&pt.nframes, memory_order_relaxed);
    uint32_t found = frame_find_locked(file, function, line);
    if (found) return found;
    if (count + 1 > FRAME_CHUNK * FRAME_CHUNKS ||
        slots_reserve(&pt.frame_slot, &pt.frame_mask, count, frame_hash_of) != 0)
        return 0;
    py_frame_rec_t *chunk =
        chunk_at_locked(pt.frame_dir, count / FRAME_CHUNK, FRAME_CHUNK, sizeof *chunk);
    if (!chunk) return 0;
    chunk[count % FRAME_CHUNK] = (py_frame_rec_t){file, function, line, 0};
    atomic_store_explicit(&pt.nframes, count + 1, memory_order_release);
    slot_put(pt.frame_slot, pt.frame_mask, h, count + 1);
    return count + 1;
}

LEDGER_HIDDEN uint32_t ledger_py_table_intern(const char *file, const char *function, uint32_t line)
{
    pthread_mutex_lock(&pt.lock);
    uint32_t f = str_intern_locked(file, strlen(file));
    uint32_t n = f ? str_intern_locked(function, strlen(function)) : 0;
    uint32_t had = atomic_load_explicit(&pt.nframes, memory_order_relaxed);
    uint32_t id = n ? frame_intern_locked(f, n, line) : 0;
    if (id > had) ledger_file_pyframe_added(id, file, function, line); /* new: into the file */
    pthread_mutex_unlock(&pt.lock);
    if (!id) atomic_fetch_add_explicit(&pt.dropped, 1, memory_order_relaxed);
    return id;
}

LEDGER_HIDDEN int ledger_py_table_get(uint32_t id, const char **file, const char **function,
                                      uint32_t *line)
{
    const py_frame_rec_t *r = frame_get(id);
    if (!r) return 0;
    *file = str_get(r->file);
    *function = str_get(r->function);
    *line = r->line;
    return *file && *function;
}

LEDGER_HIDDEN void ledger_py_table_stats(size_t *frames, size_t *strings, size_t *bytes,
                                         uint64_t *dropped)
{
    *frames = atomic_load_explicit(&pt.nframes, memory_order_acquire);
    *strings = atomic_load_explicit(&pt.nstrings, memory_order_acquire);
    *bytes = atomic_load_explicit(&pt.bytes, memory_order_relaxed);
    *dropped = atomic_load_explicit(&pt.dropped, memory_order_relaxed);
}

LEDGER_HIDDEN void ledger_py_table_account(size_t bytes)
{
    atomic_fetch_add_explicit(&pt.bytes, bytes, memory_order_relaxed);
}

LEDGER_HIDDEN int ledger_py_table_check(char *why, size_t why_len)
{
    int bad = 0;
    pthread_mutex_lock(&pt.lock);
    uint32_t nf = atomic_load_explicit(&pt.nframes, memory_order_relaxed);
    uint32_t ns = atomic_load_explicit(&pt.nstrings, memory_order_relaxed);
    for (uint32_t id = 1; id <= nf; id++) {
        const py_frame_rec_t *r = frame_get(id);
        if (!r || !r->file || r->file > ns || !r->function || r->function > ns ||
            frame_find_locked(r->file, r->function, r->line) != id) {
            if (!bad && why) snprintf(why, why_len, "Python frame %u is malformed or lost", id);
            bad++;
        }
    }
    for (uint32_t id = 1; id <= ns; id++) {
        const char *s = str_get(id);
        if (!s || str_find_locked(s, strlen(s), bytes_hash(s, strlen(s))) != id) {
            if (!bad && why) snprintf(why, why_len, "Python string %u is lost", id);
            bad++;
        }
    }
    pthread_mutex_unlock(&pt.lock);
    return bad;
}

LEDGER_HIDDEN void ledger_py_table_fork_lock(void) { pthread_mutex_lock(&pt.lock); }
LEDGER_HIDDEN void ledger_py_table_fork_unlock(void) { pthread_mutex_unlock(&pt.lock); }
LEDGER_HIDDEN void ledger_py_table_fork_reinit(void) { pthread_mutex_init(&pt.lock, NULL); }
