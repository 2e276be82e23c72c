/* ledger/ledger.c — the live-record table: one record per live device allocation.
 *
 * Owns: the shards of the live-record table, the sequence counter and the per-thread tid cache.
 *
 * Shards follow threads: the LEDGER_SHARDS shards form GROUPS groups of GROUP_SHARDS; a thread
 * records its allocations in its own group (the threads of the process take the groups
 * round-robin at their first allocation), in the group's shard named by the address's hash.  So
 * a thread allocating and freeing its own blocks touches only cache lines no other thread of a
 * different group writes: with shards keyed by address alone (the earlier design) every record,
 * index slot and shard lock bounced between the threads' CPUs, and two threads through the shim
 * each paid 1.9x the one-thread cost per pair, 1.32x with groups (bench_shim threads, sizes <=
 * 256 KiB, 2 vCPUs).  A group has several shards so that a thread's index never grows past a
 * sixteenth of its records: the index doubles under the shard lock, and one shard per thread
 * stalled one allocation 55 ms at 2 million live (3 ms with sixteen).  A free, a lookup looks in
 * the address's shard of the caller's group first, then of the group where the caller last found
 * another thread's record (a consumer freeing a producer's blocks), then of every other group: a
 * record is found wherever it is, and a free from another thread costs at most GROUPS probes.
 *
 * Layout (per shard; an index slot's home = bits of a 64-bit mix of the address):
 *   - records live in a slab of REC_CHUNK-record chunks that never move; a record is named by
 *     its number n (chunk n / REC_CHUNK, slot n % REC_CHUNK).  Free records form a list through
 *     their `seq` field (addr == 0 marks a free record).
 *   - the index is open addressing with linear probing over uint32 slots holding n + 1 in the
 *     low 25 bits and a 7-bit tag from the address's hash above (0 = empty), load factor <=
 *     0.7, doubled when exceeded; deletion shifts the following cluster back (no tombstones), so
 *     a lookup stops at the first empty slot.  A probe reads a record only when the tag matches
 *     (1 in 128 otherwise): without tags, the probe of an insert (which runs to the end of the
 *     cluster) read every record of it, and at 100,000 live each was a cache miss, 30 % of a
 *     pair through the shim (bench_shim + perf).  So a shard holds at most 2^25 - 1 records
 *     (33.5 million; 537 million in all); past that an allocation goes unrecorded, as when host
 *     memory runs out.
 *   A record is 48 bytes (sizes and device packed into bit fields; chunks have malloc's 16-byte
 *   alignment, so a record's first 16 bytes share one line), an index slot 4 bytes at a
 *   load of 0.35..0.7: 54..60 bytes per live allocation once the slab rounding is amortised.
 *   - tagged records (ledger_record_alloc_tagged: the pool's blocks, through the shim) are in
 *     no index: their handle (shard << SLOT_BITS | number + 1) lives in the block's tag, kept by
 *     the pool beside the block, and comes back when the block is freed.  Recording one takes a
 *     free record and writes it; forgetting one reads and writes the record's first 16 bytes
 *     only (its check word, 16 bits of the address's hash, refuses a stale or repeated
 *     handle).  At 100,000 live, a free picks a block allocated long ago, whose index slot and
 *     record both missed the CPU caches when found by address (bench_shim: 0.21 -> 0.16 us per
 *     pair); the check word lived in an array of its own until the record's line, which the
 *     release writes anyway, proved cheaper to read than a second line (below).  An
 *     address is turned into its tagged record through the resolver (ledger_set_resolver: the
 *     shim asks the pool for the block's tag) when a report or ledger_lookup needs it.
 *
 * Invariants (ledger_check): per shard, live == records with addr != 0 == non-empty index slots
 * + tagged records; every live untagged record is found through its shard's index at its own
 * address, no tagged one is; a record's check word is non-zero iff it is live and tagged, and
 * then is its address's; with a resolver, every tagged record's block has the record's handle
 * as its tag; no address is in two shards' indexes (an allocation replaces a stale record of its
 * address only in its own shard: the shim forgets a block before the pool can hand its address
 * out again, so none is left elsewhere; tagged records are forgotten by handle, never by
 * address); free list length + live == records carved; every stack
 * id in a record was issued by the stack table.
 *
 * Mirror: with a ledger file (ledger_file.h) every record written or released is also written
 * to or cleared in its slot of the file, under the shard's lock.
 *
 * Locking: each shard's lock guards everything in that shard.  It is a spin lock (one exchange
 * to take, one release store to let go: an uncontended pthread mutex costs a second locked
 * instruction to unlock, measured as a quarter of a pair through the shim with backtraces off,
 * bench_shim + perf) that spins briefly, then yields the CPU: it is held for a probe and a record
 * write on the allocation path, longer only while an index doubles (calloc), a record chunk is
 * carved, or a report walks the shard.  Sequence numbers come in per-thread blocks (seq_next).
 * No lock is held while calling out of this file (except libc malloc/free and the ledger file's
 * hooks, whose lock is a leaf).  The locks are plain words: no initialisation, and a fork child
 * resets them.
 *
 * Allocation path (ledger_record_alloc_at): the thread's shard, one hash, one probe of the index
 * that either finds a stale record at the same address or ends on the empty slot the new one
 * takes, one record written; the caller passes the time (the shim reads the clock once per
 * allocation).  Tagged (ledger_record_alloc_tagged): the thread's shard, one free record (the
 * one freed last: warm), written, and its check word.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ledger.h"
#include "barrier.h"
#include "ledger_file.h"
#include "ledger_internal.h"

#define REC_CHUNK 256u /* records per slab chunk (12 KiB; a thread group touches 16 shards) */
#define SLOT_BITS 25u  /* index slot: record number + 1 in the low bits, the tag above */
#define SLOT_REC ((1u << SLOT_BITS) - 1u)
#define INDEX_MIN 256u /* initial index slots of a shard */
#define SIZE_MAX48 ((UINT64_C(1) << 48) - 1)

/* The first 16 bytes are what forgetting a tagged record reads and writes (addr, the check
 * word, the free-list link): records are 48 bytes in 16-byte aligned chunks, so those 16 bytes
 * never straddle a cache line and a release touches one line of the record. */
typedef struct rec {
    uintptr_t addr;          /* device address; 0 = free record */
    uint64_t seq : 48;       /* live: sequence number (2^48 allocations before it wraps); free:
                                next free record number + 1 */
    uint64_t check : 16;     /* live and tagged (found through its block's tag, not the index):
                                tag_check_of(its address's hash), never 0; else 0 */
    uint64_t requested : 48; /* bytes asked for (saturated at 2^48-1) */
    int64_t device : 16;     /* device id, -1 = unknown (vocab.h) */
    uint64_t granted : 48;   /* bytes that belong to the block (saturated) */
    uint64_t entry : 4;      /* enum vocab_entry */
    uint64_t origin : 2;     /* enum vocab_origin */
    uint64_t unused : 10;    /* zero */
    uint64_t time_ns;        /* clock_coarse_ns() at allocation */
    uint32_t stack_id;       /* interned stack, 0 = none */
    uint32_t tid;            /* kernel thread id of the allocating thread */
} rec_t;
_Static_assert(sizeof(rec_t) == 48, "a ledger record is 48 bytes");

typedef struct shard {
    int lock;           /* guards every field below: 0 free, 1 held (shard_lock) */
    uint32_t *index;    /* slot -> record number + 1, 0 = empty */
    uint32_t mask;      /* index slots - 1 (index == NULL: no slots yet) */
    uint32_t live;      /* live records */
    uint32_t tagged;    /* of them, tagged (not in the index) */
    uint32_t carved;    /* records ever taken from chunks */
    uint32_t free_head; /* first free record number + 1, 0 = none */
    rec_t **chunks;     /* slab chunks */
    uint32_t nchunks;   /* chunks allocated */
    uint32_t chunk_cap; /* capacity of `chunks` */
    size_t bytes;       /* host memory held by this shard, bytes */
} __attribute__((aligned(64))) shard_t;

static shard_t shards[LEDGER_SHARDS];
/* Sequence numbers: a thread takes SEQ_BLOCK at a time from g_seq and hands them out to its own
 * allocations, so an allocation writes no line other threads write (one global atomic per
 * allocation was a locked instruction and a cache-line transfer between the allocating threads'
 * CPUs every time).  Numbers rise along each thread; across threads they are ordered to within
 * a block.  A mark (ledger_last_seq) bumps g_seq_epoch, and a thread whose block was taken
 * before the current epoch takes a new one, so every allocation that starts after the mark is
 * numbered above it: what "allocated after" (ledger_live_count_since, the fork child's and the
 * finalize report's scopes) needs. */
#define SEQ_BLOCK 64u
static _Atomic uint64_t g_seq;       /* last sequence number handed out in a block */
static _Atomic uint64_t g_seq_epoch; /* marks so far */
static __thread uint64_t t_seq_next __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_seq_end __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_seq_epoch __attribute__((tls_model("initial-exec")));

/* The next sequence number of the calling thread. */
static uint64_t seq_next(void)
{
    uint64_t e = atomic_load_explicit(&g_seq_epoch, memory_order_acquire);
    if (__builtin_expect(t_seq_next == t_seq_end || e != t_seq_epoch, 0)) {
        t_seq_next = atomic_fetch_add_explicit(&g_seq, SEQ_BLOCK, memory_order_relaxed) + 1;
        t_seq_end = t_seq_next + SEQ_BLOCK;
        t_seq_epoch = e;
    }
    return t_seq_next++;
}
static __thread uint32_t t_tid __attribute__((tls_model("initial-exec"))); /* 0 = not yet read */
#define GROUP_SHARDS 16u                      /* shards of a thread group (a power of two) */
#define GROUPS (LEDGER_SHARDS / GROUP_SHARDS) /* thread groups */
_Static_assert(GROUPS >= 1 && GROUPS * GROUP_SHARDS == LEDGER_SHARDS, "whole groups");
_Static_assert(GROUPS <= 255, "a group number + 1 fits a byte");
_Static_assert(LEDGER_SHARDS <= 1u << (32 - SLOT_BITS), "a handle names its shard");
static _Atomic(ledger_resolve_fn) g_resolve; /* address -> tag of a tagged block, or NULL */
static unsigned g_group_next;                /* atomic: the group the next new thread records in */
/* the thread's own group + 1, and the group + 1 where its last free of another thread's block
 * found the record (0 = none yet) */
static __thread uint8_t t_group __attribute__((tls_model("initial-exec")));
static __thread uint8_t t_hint __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) static void shard_lock_wait(shard_t *s)
{
    for (unsigned spins = 0;; spins++) {
        while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED)) {
            if (spins++ < 128)
                cpu_relax();
            else
                sched_yield(); /* the holder may be waiting for this CPU */
        }
        if (!__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE)) return;
    }
}

static inline void shard_lock(shard_t *s)
{
    if (__builtin_expect(__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE), 0)) shard_lock_wait(s);
}

static inline void shard_unlock(shard_t *s) { __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE); }

/* Every shard, in index order (the only order in which two shard locks are ever held). */
static void shards_lock_all(void)
{
    for (int k = 0; k < LEDGER_SHARDS; k++) shard_lock(&shards[k]);
}

static void shards_unlock_all(void)
{
    for (int k = LEDGER_SHARDS - 1; k >= 0; k--) shard_unlock(&shards[k]);
}

static uint64_t addr_hash(uintptr_t a)
{
    uint64_t x = (uint64_t)a;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 32;
    return x;
}

/* The calling thread's group (taken round-robin at its first call). */
static unsigned my_group(void)
{
    if (__builtin_expect(!t_group, 0))
        t_group = (uint8_t)(__atomic_fetch_add(&g_group_next, 1, __ATOMIC_RELAXED) % GROUPS + 1);
    return t_group - 1u;
}

/* The shard of group g that holds the addresses of hash h. */
static shard_t *shard_in(unsigned g, uint64_t h)
{
    return &shards[g * GROUP_SHARDS + (unsigned)(h & (GROUP_SHARDS - 1))];
}
static unsigned shard_index(const shard_t *s) { return (unsigned)(s - shards); }
static uint32_t home_of(const shard_t *s, uint64_t h) { return (uint32_t)(h >> 8) & s->mask; }
/* An index slot's value for record n of an address with hash h, and back. */
static uint32_t slot_value(uint32_t n, uint64_t h)
{
    return (uint32_t)(h >> 57) << SLOT_BITS | (n + 1);
}
static uint32_t slot_rec(uint32_t v) { return (v & SLOT_REC) - 1; }
static int slot_tag_is(uint32_t v, uint64_t h) { return v >> SLOT_BITS == (uint32_t)(h >> 57); }

static rec_t *rec_at(const shard_t *s, uint32_t n)
{
    return &s->chunks[n / REC_CHUNK][n % REC_CHUNK];
}

/* The chunk directory (s->chunks) grows by copying into one twice as large; the old copies are
 * kept (dir_retired) until ledger_clear, so that rec_hint, which reads the directory without the
 * shard lock, never reads freed memory.  They add up to less than the directory in use. */
#define DIR_FIRST 16u       /* entries of a shard's first directory */
#define DIR_RETIRED_MAX 16u /* copies a shard may retire: 13 take it past SLOT_REC / REC_CHUNK */
static rec_t **dir_retired[LEDGER_SHARDS][DIR_RETIRED_MAX];
/* Copies retired by a shard whose directory has cap entries (0: none yet). */
static size_t dir_retired_count(uint32_t cap)
{
    size_t k = 0;
    for (uint32_t c = DIR_FIRST; c < cap; c *= 2) k++;
    return k;
}

/* Without the shard lock: where record n of s is, or NULL when its chunk is not carved yet.  For
 * a prefetch only: the record may change meanwhile.  nchunks is read before the directory, and
 * a directory is published before nchunks passes the previous one's size, so entry n/REC_CHUNK
 * of the directory read exists (rec_take). */
static const rec_t *rec_hint(const shard_t *s, uint32_t n)
{
    uint32_t c = n / REC_CHUNK;
    if (c >= __atomic_load_n(&s->nchunks, __ATOMIC_ACQUIRE)) return NULL;
    rec_t **dir = __atomic_load_n(&s->chunks, __ATOMIC_ACQUIRE);
    return dir ? dir[c] + n % REC_CHUNK : NULL;
}

static uint32_t my_tid(void)
{
    if (!t_tid) t_tid = (uint32_t)syscall(SYS_gettid);
    return t_tid;
}

/* pre: shard locked.  The slot holding addr (*found = 1), or the empty slot where addr's probe
 * ends, which is where it would be inserted (*found = 0); -1 when the shard has no index. */
static long index_probe(const shard_t *s, uintptr_t addr, uint64_t h, int *found)
{
    *found = 0;
    if (!s->index) return -1;
    for (uint32_t i = home_of(s, h);; i = (i + 1) & s->mask) {
        uint32_t v = s->index[i];
        if (!v) return (long)i;
        if (slot_tag_is(v, h) && rec_at(s, slot_rec(v))->addr == addr) {
            *found = 1;
            return (long)i;
        }
    }
}

/* pre: shard locked.  Slot holding addr, or -1. */
static long index_find(const shard_t *s, uintptr_t addr, uint64_t h)
{
    int found;
    long i = index_probe(s, addr, h, &found);
    return found ? i : -1;
}

static void index_put(uint32_t *index, uint32_t mask, uint32_t home, uint32_t value)
{
    uint32_t i = home;
    while (index[i]) i = (i + 1) & mask;
    index[i] = value;
}

/* pre: shard locked.  Room for one more live record; 0 on success. */
static int index_reserve(shard_t *s)
{
    uint32_t slots = s->index ? s->mask + 1 : 0;
    if (s->index && (uint64_t)(s->live - s->tagged + 1) * 10 <= (uint64_t)slots * 7) return 0;
    uint32_t nslots = slots ? slots * 2 : INDEX_MIN;
    if (nslots == 0) return -1;
    uint32_t *ni = calloc(nslots, sizeof *ni);
    if (!ni) return -1;
    for (uint32_t i = 0; i < slots; i++) {
        uint32_t v = s->index[i];
        if (!v) continue;
        uint64_t h = addr_hash(rec_at(s, slot_rec(v))->addr);
        index_put(ni, nslots - 1, (uint32_t)(h >> 8) & (nslots - 1), v);
    }
    free(s->index);
    s->bytes += (size_t)(nslots - slots) * sizeof *ni;
    s->index = ni;
    s->mask = nslots - 1;
    return 0;
}

/* pre: shard locked.  Removes slot i, shifting the rest of its cluster back. */
static void index_remove(shard_t *s, uint32_t i)
{
    uint32_t j = i;
    s->index[i] = 0;
    for (;;) {
        j = (j + 1) & s->mask;
        uint32_t v = s->index[j];
        if (!v) return;
        uint32_t k = home_of(s, addr_hash(rec_at(s, slot_rec(v))->addr));
        /* v may move to i unless its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        s->index[i] = v;
        s->index[j] = 0;
        i = j;
    }
}

/* pre: shard locked.  A free record number, or UINT32_MAX. */
static uint32_t rec_take(shard_t *s)
{
    if (s->free_head) {
        uint32_t n = s->free_head - 1;
        s->free_head = (uint32_t)rec_at(s, n)->seq;
        return n;
    }
    if (s->carved >= SLOT_REC) return UINT32_MAX; /* no record number left in the index */
    if (s->carved == s->nchunks * REC_CHUNK) {
        if (s->nchunks == s->chunk_cap) { /* a larger copy; the old one stays (rec_hint) */
            uint32_t ncap = s->chunk_cap ? s->chunk_cap * 2 : DIR_FIRST;
            size_t k = dir_retired_count(s->chunk_cap);
            if (k >= DIR_RETIRED_MAX) return UINT32_MAX; /* cannot happen: SLOT_REC bounds it */
            rec_t **nc = malloc(ncap * sizeof *nc);
            if (!nc) return UINT32_MAX;
            if (s->nchunks) memcpy(nc, s->chunks, s->nchunks * sizeof *nc);
            if (s->chunks) dir_retired[shard_index(s)][k] = s->chunks;
            __atomic_store_n(&s->chunks, nc, __ATOMIC_RELEASE);
            s->bytes += ncap * sizeof *nc;
            s->chunk_cap = ncap;
        }
        rec_t *c = calloc(REC_CHUNK, sizeof *c);
        if (!c) return UINT32_MAX;
        s->bytes += REC_CHUNK * sizeof *c;
        s->chunks[s->nchunks] = c;
        __atomic_store_n(&s->nchunks, s->nchunks + 1, __ATOMIC_RELEASE);
    }
    return s->carved++;
}

static void rec_export(const rec_t *r, ledger_record_t *out);

/* 1 when live record r is tagged: its check word is set (never 0 then). */
static int rec_tagged(const rec_t *r) { return r->check != 0; }

/* A record's check word: 0 unless it is live and tagged, then 16 bits of its address's hash h
 * (addr_hash), never 0. */
static uint16_t tag_check_of(uint64_t h) { return (uint16_t)(h >> 48) | 1u; }

/* pre: s locked.  1 when record n of s is live, tagged and its check word is `check`. */
static int check_ok(const shard_t *s, uint32_t n, uint16_t check)
{
    return n < s->carved && rec_at(s, n)->check == check;
}

/* pre: s locked.  1 when record n of s is live, tagged and checks as addr's. */
static int tag_ok(const shard_t *s, uint32_t n, uintptr_t addr)
{
    return check_ok(s, n, tag_check_of(addr_hash(addr)));
}

/* A tagged record's handle: its shard's index above SLOT_BITS, its number + 1 below (never 0). */
static uint32_t handle_of(const shard_t *s, uint32_t n)
{
    return (uint32_t)shard_index(s) << SLOT_BITS | (n + 1);
}

static void rec_fill(rec_t *r, uintptr_t addr, int device, size_t requested, size_t granted,
                     enum vocab_entry entry, enum vocab_origin origin, uint32_t stack_id,
                     uint64_t time_ns, uint64_t seq, uint32_t tid, uint16_t check)
{
    r->addr = addr;
    r->requested = requested > SIZE_MAX48 ? SIZE_MAX48 : requested;
    r->device = vocab_device(device);
    r->granted = granted > SIZE_MAX48 ? SIZE_MAX48 : granted;
    r->entry = (unsigned)entry & 15u;
    r->origin = (unsigned)origin & 3u;
    r->unused = 0;
    r->seq = seq;
    r->check = check; /* 0: untagged; tag_check_of(hash): tagged */
    r->time_ns = time_ns;
    r->stack_id = stack_id;
    r->tid = tid;
}

/* pre: shard locked.  Record n into its slot of the ledger file. */
static void rec_to_file(shard_t *s, uint32_t n, const rec_t *r)
{
    ledger_file_record(shard_index(s), n,
                       &(lfmt_record_t){.addr = r->addr,
                                        .requested = r->requested,
                                        .granted = r->granted,
                                        .seq = r->seq,
                                        .time_ns = r->time_ns,
                                        .stack_id = r->stack_id,
                                        .tid = r->tid,
                                        .device = (int16_t)r->device,
                                        .entry = (uint8_t)r->entry,
                                        .origin = (uint8_t)r->origin});
}

/* pre: shard locked.  Writes only the record's first 16 bytes (one cache line): a free record is
 * one with addr 0, every reader of a record looks at addr first, and rec_fill writes every field
 * when the record is taken again. */
static void rec_release(shard_t *s, uint32_t n)
{
    rec_t *r = rec_at(s, n);
    if (ledger_file_on()) ledger_file_clear(shard_index(s), n);
    r->addr = 0;
    r->seq = s->free_head;
    r->check = 0;
    s->free_head = n + 1;
}

void ledger_record_alloc_at(uintptr_t addr, int device, size_t requested, size_t granted,
                            enum vocab_entry entry, enum vocab_origin origin, uint32_t stack_id,
                            uint64_t time_ns)
{
    if (addr == 0) return;
    uint64_t h = addr_hash(addr);
    uint64_t seq = seq_next();
    uint32_t tid = my_tid();
    shard_t *s = shard_in(my_group(), h);

    shard_lock(s);
    rec_t *r = NULL;
    uint32_t n = UINT32_MAX;
    int found;
    long slot = index_probe(s, addr, h, &found);
    if (found) {
        n = slot_rec(s->index[slot]);
        r = rec_at(s, n); /* reused address: replace the stale record */
    } else {
        const uint32_t *before = s->index;
        if (index_reserve(s) == 0) {
            if (s->index != before) slot = index_probe(s, addr, h, &found); /* it grew */
            n = rec_take(s);
            if (n != UINT32_MAX) {
                r = rec_at(s, n);
                s->index[slot] = slot_value(n, h);
                s->live++;
            }
        }
    }
    if (r) {
        rec_fill(r, addr, device, requested, granted, entry, origin, stack_id, time_ns, seq, tid,
                 0);
        if (ledger_file_on()) rec_to_file(s, n, r);
    }
    shard_unlock(s);
}

uint32_t ledger_record_alloc_tagged(uintptr_t addr, int device, size_t requested, size_t granted,
                                    enum vocab_entry entry, enum vocab_origin origin,
                                    uint32_t stack_id, uint64_t time_ns)
{
    if (addr == 0) return 0;
    uint64_t seq = seq_next();
    uint32_t tid = my_tid();
    uint64_t h = addr_hash(addr);
    shard_t *s = shard_in(my_group(), h);
    shard_lock(s);
    uint32_t n = rec_take(s), handle = 0;
    if (n != UINT32_MAX) {
        rec_t *r = rec_at(s, n);
        rec_fill(r, addr, device, requested, granted, entry, origin, stack_id, time_ns, seq, tid,
                 tag_check_of(h));
        s->live++;
        s->tagged++;
        handle = handle_of(s, n);
        if (ledger_file_on()) rec_to_file(s, n, r);
    }
    shard_unlock(s);
    return handle;
}

/* The shard and record a handle names, if it could name one: 1 and *s, *n set. */
static int handle_rec(uint32_t handle, shard_t **s, uint32_t *n)
{
    uint32_t k = handle >> SLOT_BITS, m = handle & SLOT_REC;
    if (m == 0 || k >= LEDGER_SHARDS) return 0;
    *s = &shards[k];
    *n = m - 1;
    return 1;
}

/* pre: s locked.  Record n of s if it is the tagged live record of addr, else NULL. */
static rec_t *tagged_rec(const shard_t *s, uint32_t n, uintptr_t addr)
{
    if (!tag_ok(s, n, addr)) return NULL;
    rec_t *r = rec_at(s, n);
    return r->addr == addr ? r : NULL;
}

/* pre: s locked, record n live and tagged.  Forgets it. */
static void tagged_release(shard_t *s, uint32_t n)
{
    rec_release(s, n);
    s->live--;
    s->tagged--;
}

/* One line of the record is read and written: its first 16 bytes (the check word, then addr
 * and the free-list link).  At 100,000 live that line is cold (a free picks a block allocated
 * long ago).  The check word refuses a stale or repeated handle and, but for one chance in
 * 32,768, a handle given with another block's address; ledger_check compares the full address
 * with the block's tag.  In an array of its own (so that the release only stored into the
 * record) it cost a second cold line, and the record's stores were paid anyway at the pool's
 * compare-and-swap right after: docs/bench.md, "Measured changes". */
static int release_checked(uint32_t handle, uint16_t check)
{
    shard_t *s;
    uint32_t n;
    if (!handle_rec(handle, &s, &n)) return 0;
    shard_lock(s);
    int found = check_ok(s, n, check);
    if (found) tagged_release(s, n);
    shard_unlock(s);
    return found;
}

int ledger_release_tagged(uint32_t handle, uintptr_t addr)
{
    if (addr == 0) return 0;
    return release_checked(handle, tag_check_of(addr_hash(addr)));
}

/* ---- parked forgets (ledger.h) --------------------------------------------------------------- */
/* The parked record's line is asked for one free ahead of its forget, so its miss overlaps the
 * rest of that free and the next allocation.  Parking costs a few loads (the directory, the
 * slot), which a ledger whose lines stay in the CPU caches does not win back: a forget parks
 * when the record's shard has carved at least park_min_chunks chunks (LEDGER_PARK_MIN_CHUNKS:
 * 1,024 records, a group's 16 shards about 16,000 live records), else it is immediate.
 * Measured (bench_shim --child loop, 512 B..256 KiB, backtraces off, mean ns per pair, three
 * alternated runs, parked / immediate): 1,000 live 81.8..85.1 / 78.9..82.1; 3,000 live
 * 87.3..89.4 / 83.6..85.0; 10,000 live 95.2..97.5 / 95.5..97.7; 30,000 live 107.3..108.2 /
 * 116.1..117.5; 100,000 live 143.9..144.1 / 163.4..186.0.  (With a locked exchange on the slot
 * instead of parked_complete's protocol, parking cost 6..8 ns more: 30,000 live 127..138.) */
static uint32_t park_min_chunks = LEDGER_PARK_MIN_CHUNKS; /* atomic */
static ledger_parked_t *parked_list; /* every slot ever used, newest first (atomic head) */

void ledger_set_park_min_chunks(uint32_t chunks)
{
    __atomic_store_n(&park_min_chunks, chunks, __ATOMIC_RELAXED);
}

/* The slot's word changes in two ways only: its owner stores a word it parks (the owner is the
 * only writer of non-zero words), and whoever completes the parked forget replaces the word (the
 * owner: with its next one; a reader: with 0) while holding the shard lock of the parked
 * record, after reading the word again under that lock.  So a parked handle is forgotten once,
 * without a locked instruction on the slot: the shard lock is taken for the forget anyway.
 * pre: w (non-zero) was read from slot.  Stores `next` into the slot. */
static void parked_complete(ledger_parked_t *slot, uint64_t w, uint64_t next)
{
    shard_t *s;
    uint32_t n;
    if (!handle_rec((uint32_t)w, &s, &n)) { /* cannot happen: only valid handles are parked */
        __atomic_store_n(&slot->word, next, __ATOMIC_RELAXED);
        return;
    }
    shard_lock(s);
    if (__atomic_load_n(&slot->word, __ATOMIC_RELAXED) == w) { /* not completed meanwhile */
        if (check_ok(s, n, (uint16_t)(w >> 32))) tagged_release(s, n);
        __atomic_store_n(&slot->word, next, __ATOMIC_RELAXED);
    } else if (next) {
        __atomic_store_n(&slot->word, next, __ATOMIC_RELAXED); /* a reader emptied it */
    }
    shard_unlock(s);
}

void ledger_release_tagged_later(ledger_parked_t *slot, uint32_t handle, uintptr_t addr)
{
    shard_t *s;
    uint32_t n;
    if (addr == 0 || !handle_rec(handle, &s, &n)) return;
    if (!slot || ledger_file_on() ||
        __atomic_load_n(&s->nchunks, __ATOMIC_RELAXED) <
            __atomic_load_n(&park_min_chunks, __ATOMIC_RELAXED)) {
        (void)ledger_release_tagged(handle, addr);
        return;
    }
    const rec_t *r = rec_hint(s, n);
    if (r) __builtin_prefetch(r, 1);
    if (!slot->linked) {
        slot->next = __atomic_load_n(&parked_list, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&parked_list, &slot->next, slot, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED)) {
        }
        slot->linked = 1;
    }
    uint64_t word = (uint64_t)tag_check_of(addr_hash(addr)) << 32 | handle;
    uint64_t before = __atomic_load_n(&slot->word, __ATOMIC_RELAXED);
    if (before)
        parked_complete(slot, before, word);
    else
        __atomic_store_n(&slot->word, word, __ATOMIC_RELAXED); /* readers only empty a slot */
}

void ledger_release_parked(void)
{
    for (ledger_parked_t *p = __atomic_load_n(&parked_list, __ATOMIC_ACQUIRE); p; p = p->next) {
        uint64_t word = __atomic_load_n(&p->word, __ATOMIC_RELAXED);
        if (word) parked_complete(p, word, 0);
    }
}

void ledger_record_alloc(uintptr_t addr, int device, size_t requested, size_t granted,
                         enum vocab_entry entry, enum vocab_origin origin, uint32_t stack_id)
{
    ledger_record_alloc_at(addr, device, requested, granted, entry, origin, stack_id,
                           clock_coarse_ns());
}

/* What find_record does with the record it finds (pre: its shard locked). */
typedef void (*rec_visit_fn)(shard_t *s, long slot, void *arg);

/* addr's record in group g's shard for hash h: visit called on it, its shard locked; 1 when
 * found. */
static int visit_in(unsigned g, uintptr_t addr, uint64_t h, rec_visit_fn visit, void *arg)
{
    shard_t *s = shard_in(g, h);
    shard_lock(s);
    long slot = index_find(s, addr, h);
    if (slot >= 0) visit(s, slot, arg);
    shard_unlock(s);
    return slot >= 0;
}

/* Looks for addr's record in its shard of: the caller's group, the hint's, then every other
 * group; calls visit on the first one found.  1 when found. */
static int find_record(uintptr_t addr, rec_visit_fn visit, void *arg)
{
    uint64_t h = addr_hash(addr);
    unsigned own = my_group(), hint = t_hint ? t_hint - 1u : own;
    if (visit_in(own, addr, h, visit, arg)) return 1;
    if (hint != own && visit_in(hint, addr, h, visit, arg)) return 1;
    for (unsigned g = 0; g < GROUPS; g++) {
        if (g == own || g == hint || !visit_in(g, addr, h, visit, arg)) continue;
        t_hint = (uint8_t)(g + 1);
        return 1;
    }
    return 0;
}

static void visit_release(shard_t *s, long slot, void *arg)
{
    (void)arg;
    uint32_t n = slot_rec(s->index[slot]);
    index_remove(s, (uint32_t)slot);
    rec_release(s, n);
    s->live--;
}

/* The tagged record of addr through the resolver: visit called with its shard locked. */
static int visit_tagged(uintptr_t addr, void (*visit)(shard_t *s, uint32_t n, void *arg), void *arg)
{
    ledger_resolve_fn resolve = atomic_load_explicit(&g_resolve, memory_order_acquire);
    uint32_t handle = 0, n;
    shard_t *s;
    if (!resolve || !resolve(addr, &handle) || !handle_rec(handle, &s, &n)) return 0;
    shard_lock(s);
    int found = tagged_rec(s, n, addr) != NULL;
    if (found) visit(s, n, arg);
    shard_unlock(s);
    return found;
}

static void visit_tagged_release(shard_t *s, uint32_t n, void *arg)
{
    (void)arg;
    tagged_release(s, n);
}

int ledger_record_free(uintptr_t addr)
{
    return find_record(addr, visit_release, NULL) || visit_tagged(addr, visit_tagged_release, NULL);
}

void ledger_set_resolver(ledger_resolve_fn fn)
{
    atomic_store_explicit(&g_resolve, fn, memory_order_release);
}

static int rec_device(const rec_t *r) { return (int)r->device; }

void ledger_drop_device(int device)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    for (int k = 0; k < LEDGER_SHARDS; k++) {
        shard_t *s = &shards[k];
        shard_lock(s);
        for (uint32_t n = 0; n < s->carved && s->live; n++) {
            rec_t *r = rec_at(s, n);
            if (!r->addr || rec_device(r) != device) continue;
            if (rec_tagged(r)) {
                tagged_release(s, n);
                continue;
            }
            long slot = index_find(s, r->addr, addr_hash(r->addr));
            if (slot >= 0) index_remove(s, (uint32_t)slot);
            rec_release(s, n);
            s->live--;
        }
        shard_unlock(s);
    }
}

void ledger_clear(void)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    for (int k = 0; k < LEDGER_SHARDS; k++) {
        shard_t *s = &shards[k];
        shard_lock(s);
        if (ledger_file_on()) ledger_file_shard_clear((unsigned)k);
        for (uint32_t c = 0; c < s->nchunks; c++) free(s->chunks[c]);
        for (size_t r = 0; r < DIR_RETIRED_MAX; r++) {
            free(dir_retired[k][r]);
            dir_retired[k][r] = NULL;
        }
        free(s->chunks);
        free(s->index);
        __atomic_store_n(&s->nchunks, 0, __ATOMIC_RELEASE); /* before the directory: rec_hint */
        __atomic_store_n(&s->chunks, NULL, __ATOMIC_RELEASE);
        s->index = NULL;
        s->mask = s->live = s->tagged = s->carved = s->free_head = s->chunk_cap = 0;
        s->bytes = 0;
        shard_unlock(s);
    }
}

/* Live records for which keep(record, arg) says 1, the parked forgets completed first. */
static size_t live_count_where(int (*keep)(const rec_t *, uint64_t), uint64_t arg)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    size_t total = 0;
    for (int k = 0; k < LEDGER_SHARDS; k++) {
        shard_t *s = &shards[k];
        shard_lock(s);
        for (uint32_t n = 0; n < s->carved; n++) {
            const rec_t *r = rec_at(s, n);
            if (r->addr && keep(r, arg)) total++;
        }
        shard_unlock(s);
    }
    return total;
}

static int rec_on_device(const rec_t *r, uint64_t device) { return rec_device(r) == (int)device; }
static int rec_numbered_above(const rec_t *r, uint64_t seq) { return r->seq > seq; }

size_t ledger_live_count(int device) { return live_count_where(rec_on_device, (uint64_t)device); }

size_t ledger_live_total(void)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    size_t total = 0;
    for (int k = 0; k < LEDGER_SHARDS; k++) {
        shard_t *s = &shards[k];
        shard_lock(s);
        total += s->live;
        shard_unlock(s);
    }
    return total;
}

uint64_t ledger_last_seq(void)
{
    /* The number first, then the epoch: a thread that sees the new epoch takes its next block
     * after this read, so above it (the other order let a thread take a block between the two,
     * below the number returned, and number allocations after the mark below it). */
    uint64_t mark = atomic_load_explicit(&g_seq, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g_seq_epoch, 1, memory_order_seq_cst); /* new blocks from now on */
    return mark;
}

size_t ledger_live_count_since(uint64_t seq) { return live_count_where(rec_numbered_above, seq); }

static void rec_export(const rec_t *r, ledger_record_t *out)
{
    out->addr = r->addr;
    out->device = rec_device(r);
    out->requested = (size_t)r->requested;
    out->granted = (size_t)r->granted;
    out->seq = r->seq;
    out->tid = r->tid;
    out->time_ns = r->time_ns;
    out->stack_id = r->stack_id;
    out->entry = (enum vocab_entry)r->entry;
    out->origin = (enum vocab_origin)r->origin;
}

static void visit_export(shard_t *s, long slot, void *out)
{
    if (out) rec_export(rec_at(s, slot_rec(s->index[slot])), out);
}

static void visit_tagged_export(shard_t *s, uint32_t n, void *out)
{
    if (out) rec_export(rec_at(s, n), out);
}

int ledger_lookup(uintptr_t addr, ledger_record_t *out)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    return find_record(addr, visit_export, out) || visit_tagged(addr, visit_tagged_export, out);
}

static int addr_cmp(const void *k, const void *e)
{
    uintptr_t a = *(const uintptr_t *)k, b = *(const uintptr_t *)e;
    return a < b ? -1 : a > b;
}

size_t ledger_lookup_sorted(const uintptr_t *addrs, size_t n, ledger_record_t *out, uint8_t *found)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    size_t hits = 0;
    memset(found, 0, n);
    for (int k = 0; k < LEDGER_SHARDS && n; k++) {
        shard_t *s = &shards[k];
        shard_lock(s);
        for (uint32_t i = 0; i < s->carved && s->live; i++) {
            const rec_t *r = rec_at(s, i);
            if (!r->addr) continue;
            const uintptr_t *at = bsearch(&r->addr, addrs, n, sizeof *addrs, addr_cmp);
            if (!at) continue;
            size_t j = (size_t)(at - addrs);
            if (found[j] && out[j].seq > r->seq) continue; /* the newer record of the address */
            if (!found[j]) hits++;
            found[j] = 1;
            rec_export(r, &out[j]);
        }
        shard_unlock(s);
    }
    return hits;
}

/* ---- grouping by site ------------------------------------------------------------------------ */

typedef struct site_map {
    uint32_t *slot;       /* site index + 1, 0 = empty */
    uint32_t mask;        /* slots - 1 */
    ledger_site_t *sites; /* grouped sites */
    size_t n;             /* sites used */
    size_t cap;           /* sites allocated */
} site_map_t;

static uint64_t site_key_hash(int device, uint32_t stack)
{
    return addr_hash(((uint64_t)(uint32_t)device << 32) | stack);
}

static int site_map_grow(site_map_t *m)
{
    uint32_t nslots = m->slot ? (m->mask + 1) * 2 : 1024;
    uint32_t *ns = calloc(nslots, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < m->n; i++) {
        uint32_t j =
            (uint32_t)site_key_hash(m->sites[i].device, m->sites[i].stack_id) & (nslots - 1);
        while (ns[j]) j = (j + 1) & (nslots - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(m->slot);
    m->slot = ns;
    m->mask = nslots - 1;
    return 0;
}

static ledger_site_t *site_get(site_map_t *m, int device, uint32_t stack)
{
    if (!m->slot || (m->n + 1) * 2 > (size_t)m->mask + 1) {
        if (site_map_grow(m) != 0) return NULL;
    }
    uint32_t j = (uint32_t)site_key_hash(device, stack) & m->mask;
    for (; m->slot[j]; j = (j + 1) & m->mask) {
        ledger_site_t *s = &m->sites[m->slot[j] - 1];
        if (s->device == device && s->stack_id == stack) return s;
    }
    if (m->n == m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 256;
        ledger_site_t *ns = realloc(m->sites, ncap * sizeof *ns);
        if (!ns) return NULL;
        m->sites = ns;
        m->cap = ncap;
    }
    ledger_site_t *s = &m->sites[m->n];
    memset(s, 0, sizeof *s);
    s->device = device;
    s->stack_id = stack;
    s->oldest_time_ns = UINT64_MAX;
    s->oldest_seq = UINT64_MAX;
    m->slot[j] = (uint32_t)++m->n;
    return s;
}

size_t ledger_collect_sites(ledger_site_t **out, uint64_t after_seq)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    site_map_t m = {0};
    int failed = 0;
    for (int k = 0; k < LEDGER_SHARDS && !failed; k++) {
        shard_t *s = &shards[k];
        shard_lock(s);
        for (uint32_t n = 0; n < s->carved && !failed; n++) {
            const rec_t *r = rec_at(s, n);
            if (!r->addr || r->seq <= after_seq) continue;
            ledger_site_t *site = site_get(&m, rec_device(r), r->stack_id);
            if (!site) {
                failed = 1;
                break;
            }
            site->count++;
            site->requested_bytes += r->requested;
            site->granted_bytes += r->granted;
            site->by_origin[r->origin]++; /* 2 bits: every value names an origin (vocab.h) */
            if (r->seq < site->oldest_seq) {
                site->oldest_seq = r->seq;
                site->oldest_time_ns = r->time_ns;
                site->entry = (uint8_t)r->entry;
            }
        }
        shard_unlock(s);
    }
    free(m.slot);
    if (failed) {
        free(m.sites);
        *out = NULL;
        return (size_t)-1;
    }
    *out = m.sites;
    return m.n;
}

/* ---- memory, checks, fork -------------------------------------------------------------------- */

void ledger_memory(ledger_memory_t *out)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    memset(out, 0, sizeof *out);
    for (int k = 0; k < LEDGER_SHARDS; k++) {
        shard_t *s = &shards[k];
        shard_lock(s);
        out->live_records += s->live;
        out->record_bytes += s->bytes;
        shard_unlock(s);
    }
    out->record_bytes += sizeof shards;
    ledger_stack_memory(&out->stacks, &out->stack_bytes, &out->stacks_dropped);
}

/* A tagged record, to compare with its block's tag once the shards are unlocked. */
typedef struct tagged_ref {
    uintptr_t addr;
    uint32_t handle;
} tagged_ref_t;

int ledger_check(char *why, size_t why_len)
{
    ledger_release_parked(); /* parked records are forgotten ones */
    int bad = 0;
#define FAIL(...)                                             \
    do {                                                      \
        if (!bad && why) snprintf(why, why_len, __VA_ARGS__); \
        bad++;                                                \
    } while (0)
    uint32_t nstacks = ledger_stack_count();
    ledger_resolve_fn resolve = atomic_load_explicit(&g_resolve, memory_order_acquire);
    shards_lock_all();
    size_t ntags = 0, cap = 0; /* the tagged records, for the resolver (their counters' sum) */
    for (int k = 0; resolve && k < LEDGER_SHARDS; k++) cap += shards[k].tagged;
    tagged_ref_t *tags = cap ? malloc(cap * sizeof *tags) : NULL;
    if (cap && !tags) FAIL("no host memory to check the tags");
    for (int k = 0; k < LEDGER_SHARDS; k++) {
        shard_t *s = &shards[k];
        uint32_t live = 0, tagged = 0, used_slots = 0, free_len = 0;
        for (uint32_t n = 0; n < s->carved; n++) {
            const rec_t *r = rec_at(s, n);
            ledger_record_t e;
            if (r->addr) rec_export(r, &e);
            uint64_t h = r->addr ? addr_hash(r->addr) : 0;
            if (r->check != (r->addr && rec_tagged(r) ? tag_check_of(h) : 0))
                FAIL("shard %d: record %u: check word %#x", k, n, (unsigned)r->check);
            if (ledger_file_check_slot((unsigned)k, n, r->addr ? &e : NULL))
                FAIL("shard %d: record %u differs from its slot in the ledger file", k, n);
            if (!r->addr) continue;
            live++;
            if (shard_in((unsigned)k / GROUP_SHARDS, h) != s)
                FAIL("shard %d: record %u is in the wrong shard of its group", k, n);
            for (unsigned g = 0; g < GROUPS; g++) { /* (every shard is locked) */
                shard_t *o = shard_in(g, h);
                if (o != s && index_find(o, r->addr, h) >= 0)
                    FAIL("shard %d: record %u (addr %#lx) is live in shard %u too", k, n,
                         (unsigned long)r->addr, shard_index(o));
            }
            long slot = index_find(s, r->addr, h);
            if (rec_tagged(r)) {
                tagged++;
                if (slot >= 0)
                    FAIL("shard %d: tagged record %u (addr %#lx) is in the index too", k, n,
                         (unsigned long)r->addr);
                if (ntags < cap && tags) tags[ntags++] = (tagged_ref_t){r->addr, handle_of(s, n)};
            } else {
                if (slot < 0 || s->index[slot] != slot_value(n, h))
                    FAIL("shard %d: record %u (addr %#lx) not found through the index", k, n,
                         (unsigned long)r->addr);
            }
            if (r->stack_id > nstacks)
                FAIL("shard %d: record %u has unknown stack %u", k, n, r->stack_id);
            if (r->granted < r->requested) FAIL("shard %d: record %u granted < requested", k, n);
        }
        if (s->index) {
            for (uint32_t i = 0; i <= s->mask; i++) {
                uint32_t v = s->index[i];
                if (!v) continue;
                used_slots++;
                if (slot_rec(v) >= s->carved || !rec_at(s, slot_rec(v))->addr)
                    FAIL("shard %d: index slot %u points at a free record", k, i);
            }
        }
        for (uint32_t f = s->free_head; f && free_len <= s->carved;
             f = (uint32_t)rec_at(s, f - 1)->seq) {
            if (f - 1 >= s->carved || rec_at(s, f - 1)->addr) {
                FAIL("shard %d: free list reaches a live or missing record", k);
                break;
            }
            free_len++;
        }
        if (live != s->live) FAIL("shard %d: %u live records, counter says %u", k, live, s->live);
        if (tagged != s->tagged)
            FAIL("shard %d: %u tagged records, counter says %u", k, tagged, s->tagged);
        if (used_slots != s->live - s->tagged)
            FAIL("shard %d: %u index entries for %u untagged live", k, used_slots,
                 s->live - s->tagged);
        if (free_len + s->live != s->carved)
            FAIL("shard %d: free list %u + live %u != carved %u", k, free_len, s->live, s->carved);
    }
    shards_unlock_all();
    /* The blocks' tags, with no ledger lock held: the resolver takes its allocator's locks, which
     * come before the ledger's (shim/fork.c). */
    for (size_t i = 0; i < ntags; i++) {
        uint32_t tag = 0;
        if (!resolve(tags[i].addr, &tag) || tag != tags[i].handle)
            FAIL("record %#x (addr %#lx): its block's tag names another record", tags[i].handle,
                 (unsigned long)tags[i].addr);
    }
    free(tags);
#undef FAIL
    char swhy[160];
    int sbad = ledger_stack_check(swhy, sizeof swhy);
    if (sbad && !bad && why) snprintf(why, why_len, "%s", swhy);
    return bad + sbad;
}

void ledger_fork_lock(void)
{
    ledger_stack_fork_lock();
    shards_lock_all();
}

void ledger_fork_unlock(void)
{
    shards_unlock_all();
    ledger_stack_fork_unlock();
}

void ledger_fork_reinit(void)
{
    for (int k = 0; k < LEDGER_SHARDS; k++) __atomic_store_n(&shards[k].lock, 0, __ATOMIC_RELAXED);
    ledger_stack_fork_reinit();
    t_tid = 0;                  /* the child is a new thread id */
    t_seq_next = t_seq_end = 0; /* and takes a block of its own */
}

/* ---- configuration ------------------------------------------------------------------------- */

static _Atomic(ledger_dlsym_fn) g_dlsym;

static void *plain_dlsym(void *handle, const char *name) { return dlsym(handle, name); }

ledger_dlsym_fn ledger_dlsym(void)
{
    ledger_dlsym_fn f = atomic_load_explicit(&g_dlsym, memory_order_acquire);
    return f ? f : plain_dlsym;
}

void ledger_init(const ledger_config_t *cfg)
{
    if (cfg->dlsym) atomic_store_explicit(&g_dlsym, cfg->dlsym, memory_order_release);
    /* The file before captures can start (it copies the stacks interned so far); then the records
     * already live (threads that allocated while npupool started): a record made from now on is
     * written by its own allocation, and the sweep takes each shard's lock. */
    if (ledger_file_open(cfg)) {
        for (int k = 0; k < LEDGER_SHARDS; k++) {
            shard_t *s = &shards[k];
            shard_lock(s);
            for (uint32_t n = 0; n < s->carved; n++)
                if (rec_at(s, n)->addr) rec_to_file(s, n, rec_at(s, n));
            shard_unlock(s);
        }
    }
    ledger_stack_init(cfg->backtrace_depth, cfg->python_frames);
}
