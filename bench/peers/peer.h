/* bench/peers/peer.h — the allocators bench_peers compares npupool's pool with, behind one face.
 *
 * Owns: the interface (peer_ops_t) and the list of peers.  Two kinds:
 *   arena  an allocator over a made-up address range [0, range) whose metadata lives in host
 *          memory and which never touches the range itself (what npupool's pool is: a device
 *          memory allocator).  alloc returns an offset.  These get latency AND fragmentation
 *          figures, and the unit test (tests/unit/test_bench_peers.c) drives them.
 *   host   an ordinary malloc (glibc, and mimalloc, jemalloc, tcmalloc from Debian packages,
 *          dlopen()ed at run time: peer_host.c).  alloc returns a pointer.  These appear in
 *          latency tables only: they are not arena allocators, so a "smallest arena" means
 *          nothing for them.
 * The arena peers are written for this bench from published algorithm descriptions (facts,
 * never text or code, are taken from public sources): they are not the vendored originals.
 *   peer_tlsf     two-level segregated fit after Masmano et al. 2004 (peer_tlsf.c)
 *   peer_o1heap   power-of-two segregated free lists, O(1), after Kirienko's o1heap design
 *   peer_bestfit  best fit over a (size, offset)-ordered tree, in the style of PyTorch's
 *                 caching allocator (peer_bestfit.c)
 * Every arena peer hands out PEER_GRAN-aligned blocks whose sizes are multiples of PEER_GRAN,
 * the granularity of npupool's pool (POOL_ALIGN), so waste figures compare the algorithms and
 * not the alignment.  Not thread-safe: one caller at a time.
 */
#ifndef NPUPOOL_BENCH_PEER_H
#define NPUPOOL_BENCH_PEER_H

#include <stddef.h>
#include <stdint.h>

#define PEER_GRAN 64u /* bytes: block alignment and size granularity of the arena peers */

/* What check() reports besides its violation count. */
typedef struct peer_stats {
    size_t live_blocks;  /* blocks handed out and not freed */
    size_t free_blocks;  /* free blocks (each maximal: two free blocks never touch) */
    size_t free_bytes;   /* bytes in them */
    size_t largest_free; /* the largest of them, bytes */
} peer_stats_t;

typedef struct peer_ops {
    const char *name;  /* short label for tables: "tlsf", "o1heap", "bestfit", "glibc", ... */
    const char *about; /* one line: what it is and where it comes from */
    int arena;         /* 1: arena over [0, range) handing out offsets; 0: host malloc */
    int reference;     /* 1: a lower bound shown for scale, never a contender (no goal, no best) */
    /* A fresh instance over [0, range) (host peers ignore range).  NULL on host out of memory
     * or, for a host peer, when it is not available (peer_host_unavailable says why). */
    void *(*create)(size_t range);
    void (*destroy)(void *peer); /* frees the instance (live blocks need not be freed first) */
    /* pre: size > 0.  0 and *out = the block's offset (pointer), or -1 when nothing fits. */
    int (*alloc)(void *peer, size_t size, uintptr_t *out);
    /* 0, or -1 when `at` is not the start of a live block (nothing changes then).  Host peers
     * cannot tell and always answer 0. */
    int (*free)(void *peer, uintptr_t at);
    /* Arena peers: bytes the live block at `at` occupies (its size after rounding), 0 when
     * `at` is not a live block.  NULL for host peers. */
    size_t (*block_size)(void *peer, uintptr_t at);
    /* Arena peers: walk every block, list, bitmap and tree; return the number of violations
     * (the first one described in why, if why_len > 0) and fill *st.  NULL for host peers. */
    int (*check)(void *peer, peer_stats_t *st, char *why, size_t why_len);
} peer_ops_t;

extern const peer_ops_t peer_tlsf;
extern const peer_ops_t peer_o1heap;
extern const peer_ops_t peer_bestfit;

/* bench_peers' reference row, not a contender and not in peer_arenas: the least a pair with
 * host metadata can cost (peer_floor.c).  Its instance is here for the unit test, which
 * corrupts one to see its check() object. */
extern const peer_ops_t peer_floor;
typedef struct floor_peer {
    uint64_t *word;  /* [cap] slot i's size, 0 when free */
    uint32_t *stack; /* [cap] free slot numbers, LIFO; `top` of them */
    size_t top;      /* free slots on the stack */
    size_t used;     /* slots ever handed out: [0, used) */
    size_t cap;      /* entries of word and stack */
} floor_peer_t;

/* The arena peers, NULL-terminated (the unit test and bench_peers iterate over it). */
extern const peer_ops_t *const peer_arenas[];

extern const peer_ops_t peer_glibc;
extern const peer_ops_t peer_glibc_plain; /* default settings: bench_peers' threads table */
extern const peer_ops_t peer_mimalloc;
extern const peer_ops_t peer_jemalloc;
extern const peer_ops_t peer_tcmalloc;

/* The host peers, NULL-terminated: glibc, mimalloc, jemalloc, tcmalloc (peer_host.c). */
extern const peer_ops_t *const peer_hosts[];

/* Call first thing in main(): re-executes the program once with the glibc tunable that lets
 * jemalloc be dlopen()ed (peer_host.c says why); returns when no re-exec is needed or
 * possible. */
void peer_host_prepare(char **argv);

/* NULL when the host peer can be used in this process, else why not ("not installed: ...",
 * "its probe child died: ..."): the first call loads the library (peer_host.c). */
const char *peer_host_unavailable(const peer_ops_t *p);

#endif /* NPUPOOL_BENCH_PEER_H */
