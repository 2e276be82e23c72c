/* bench/peers/peer_floor.c — "floor": the least work a free+malloc pair can do when the blocks'
 * metadata lives in host memory.  bench_peers shows it beside the allocators as a reference
 * (section B), never as a contender: no goal is measured against it.
 *
 * Every block takes a slot of FLOOR_SLOT bytes (1 MiB, the largest size bench_peers' latency
 * section asks for), so a block's slot number is its offset shifted right and no size class,
 * list or tree is needed.  A slot's state is one 8-byte word in one array (the block's size;
 * 0 = free), and the free slots are a LIFO stack of slot numbers.
 *   free   one read and one write of the block's word (the pair's only random access: the word
 *          of a block allocated long ago), a push;
 *   alloc  a pop (the slot the free just pushed) and one write of its word.
 * An allocator with host metadata does this and more (size classes, coalescing, statistics,
 * thread safety); what none can skip is reading a word of the freed block's metadata to know
 * it, which misses the CPU caches once the live blocks' words outgrow them.
 * Offsets run past any arena bench_peers makes (a million live blocks reach 2^40), so `range`
 * is ignored, and fragmentation means nothing here (each block takes 1 MiB): section C and the
 * arena peers' unit test leave it out; tests/unit/test_bench_peers.c checks it on its own.
 * Not thread-safe.
 */
#include <stdio.h>
#include <stdlib.h>

#include "peer.h"

#define FLOOR_SHIFT 20u                          /* log2 of a slot's bytes */
#define FLOOR_SLOT ((size_t)1 << FLOOR_SHIFT)    /* bytes of every block's slot */
#define FLOOR_SLOTS_MAX ((size_t)1 << (64 - 21)) /* slot numbers whose offsets fit, with room */

/* floor_peer_t: peer.h */

static void *floor_create(size_t range)
{
    (void)range;
    return calloc(1, sizeof(floor_peer_t));
}

static void floor_destroy(void *peer)
{
    floor_peer_t *f = peer;
    if (!f) return;
    free(f->word);
    free(f->stack);
    free(f);
}

/* Room for one more slot: 0, or -1 on host out of memory (nothing changes then). */
static int floor_grow(floor_peer_t *f)
{
    if (f->used < f->cap) return 0;
    size_t cap = f->cap ? 2 * f->cap : 1024;
    if (cap > FLOOR_SLOTS_MAX || cap > UINT32_MAX) return -1;
    uint64_t *w = realloc(f->word, cap * sizeof *w);
    if (!w) return -1;
    f->word = w;
    uint32_t *s = realloc(f->stack, cap * sizeof *s);
    if (!s) return -1;
    f->stack = s;
    f->cap = cap;
    return 0;
}

static int floor_alloc(void *peer, size_t size, uintptr_t *out)
{
    floor_peer_t *f = peer;
    if (size == 0 || size > FLOOR_SLOT) return -1;
    size_t i;
    if (f->top) {
        i = f->stack[--f->top];
    } else {
        if (floor_grow(f) != 0) return -1;
        i = f->used++;
    }
    f->word[i] = size;
    *out = (uintptr_t)i << FLOOR_SHIFT;
    return 0;
}

/* The slot of a live block at `at`, or SIZE_MAX. */
static size_t floor_live_slot(const floor_peer_t *f, uintptr_t at)
{
    size_t i = at >> FLOOR_SHIFT;
    if ((at & (FLOOR_SLOT - 1)) || i >= f->used || f->word[i] == 0) return SIZE_MAX;
    return i;
}

static int floor_free(void *peer, uintptr_t at)
{
    floor_peer_t *f = peer;
    size_t i = floor_live_slot(f, at);
    if (i == SIZE_MAX) return -1;
    f->word[i] = 0;
    f->stack[f->top++] = (uint32_t)i;
    return 0;
}

static size_t floor_block_size(void *peer, uintptr_t at)
{
    const floor_peer_t *f = peer;
    return floor_live_slot(f, at) == SIZE_MAX ? 0 : FLOOR_SLOT;
}

/* Every slot is live or on the stack, never both, never twice. */
static int floor_check(void *peer, peer_stats_t *st, char *why, size_t why_len)
{
    const floor_peer_t *f = peer;
    int bad = 0;
    size_t live = 0;
    for (size_t i = 0; i < f->used; i++) live += f->word[i] != 0;
    unsigned char *seen = calloc(f->used ? f->used : 1, 1);
    if (!seen) return 0; /* host out of memory: nothing checked */
    for (size_t k = 0; k < f->top; k++) {
        uint32_t i = f->stack[k];
        if (i >= f->used || f->word[i] != 0 || seen[i]) {
            if (!bad++ && why_len) snprintf(why, why_len, "stack entry %zu: slot %u", k, i);
        } else {
            seen[i] = 1;
        }
    }
    free(seen);
    if (live + f->top != f->used && !bad++ && why_len)
        snprintf(why, why_len, "%zu live + %zu free != %zu slots", live, f->top, f->used);
    *st = (peer_stats_t){.live_blocks = live,
                         .free_blocks = f->top,
                         .free_bytes = f->top * FLOOR_SLOT,
                         .largest_free = f->top ? FLOOR_SLOT : 0};
    return bad;
}

const peer_ops_t peer_floor = {
    .name = "floor",
    .about = "reference, not a contender: a 1 MiB slot per block, one 8-byte word of host "
             "metadata per slot, a LIFO stack of free slots (the least a pair with host metadata "
             "can do: read and write the freed block's word, pop a slot)",
    .arena = 1,
    .reference = 1,
    .create = floor_create,
    .destroy = floor_destroy,
    .alloc = floor_alloc,
    .free = floor_free,
    .block_size = floor_block_size,
    .check = floor_check,
};
