/* bench/peers/pblock.c — the cold half of the arena peers' host-side block tiling (pblock.h):
 * set-up and tear-down, descriptor storage, and the checker every peer's check() runs.
 * The checker marks each FREE block of the tiling (mark 1), lets the index mark what it holds
 * (mark 2, through pblock_note_indexed), then finds FREE blocks the index missed; marks are 0
 * again when it returns.
 */
#include "pblock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MARK_NONE = 0, MARK_FREE = 1, MARK_INDEXED = 2 };

struct pblock_checker {
    int violations; /* found so far */
    char *why;      /* the first one's description */
    size_t why_len; /* bytes of why */
    size_t indexed; /* blocks the index reported */
};

int pblock_grow(pblock_heap_t *h)
{
    if (h->nchunks == h->chunks_cap) {
        size_t cap = h->chunks_cap ? 2 * h->chunks_cap : 16;
        void **c = realloc(h->chunks, cap * sizeof *c);
        if (!c) return -1;
        h->chunks = c;
        h->chunks_cap = cap;
    }
    pblock_t *v = aligned_alloc(64, PBLOCK_CHUNK * sizeof *v);
    if (!v) return -1;
    memset(v, 0, PBLOCK_CHUNK * sizeof *v);
    h->chunks[h->nchunks++] = v;
    for (size_t i = PBLOCK_CHUNK; i-- > 0;) pblock_put_spare(h, &v[i]);
    return 0;
}

pblock_t *pblock_heap_init(pblock_heap_t *h, size_t range)
{
    memset(h, 0, sizeof *h);
    h->range = range & ~(size_t)(PEER_GRAN - 1);
    if (h->range == 0 || addrmap_init(&h->live, 1024) != 0) return NULL;
    if (pblock_grow(h) != 0) {
        pblock_heap_destroy(h);
        return NULL;
    }
    pblock_t *b = pblock_take_spare(h);
    *b = (pblock_t){.off = 0, .size = h->range, .free = 1};
    h->first = b;
    return b;
}

void pblock_heap_destroy(pblock_heap_t *h)
{
    for (size_t i = 0; i < h->nchunks; i++) free(h->chunks[i]);
    free(h->chunks);
    addrmap_destroy(&h->live);
    memset(h, 0, sizeof *h);
}

void *pblock_peer_create(size_t peer_bytes, size_t range, pblock_index_fn index)
{
    pblock_heap_t *h = calloc(1, peer_bytes);
    pblock_t *b = h ? pblock_heap_init(h, range) : NULL;
    if (!b) {
        free(h);
        return NULL;
    }
    index(h, b);
    return h;
}

void pblock_peer_destroy(void *peer)
{
    if (!peer) return;
    pblock_heap_destroy(peer);
    free(peer);
}

size_t pblock_peer_block_size(void *peer, uintptr_t at) { return pblock_live_size(peer, at); }

static int vviolation(pblock_checker_t *c, const char *fmt, va_list ap)
{
    if (c->violations++ == 0 && c->why_len) vsnprintf(c->why, c->why_len, fmt, ap);
    return 1;
}

int pblock_violation(pblock_checker_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vviolation(c, fmt, ap);
    va_end(ap);
    return 1;
}

int pblock_note_indexed(pblock_checker_t *c, const pblock_t *b)
{
    if (b->mark == MARK_INDEXED)
        return pblock_violation(c, "block at %zu is in the free index twice", b->off);
    if (b->mark != MARK_FREE)
        return pblock_violation(c, "the free index holds block at %zu, which is not FREE", b->off);
    ((pblock_t *)b)->mark = MARK_INDEXED;
    c->indexed++;
    return 0;
}

int pblock_list_check(pblock_checker_t *c, const pblock_t *head, uint32_t want_key,
                      uint32_t (*key_of)(size_t size))
{
    int bad = 0;
    for (const pblock_t *b = head, *prev = NULL; b; prev = b, b = b->link[1]) {
        if (b->link[0] != prev)
            bad += pblock_violation(c, "list %u: block at %zu has a wrong back link", want_key,
                                    b->off);
        if (b->key != want_key || key_of(b->size) != want_key)
            bad += pblock_violation(c,
                                    "block at %zu (%zu B, list %u by size) is on list %u, "
                                    "its key says %u",
                                    b->off, b->size, key_of(b->size), want_key, b->key);
        if (pblock_note_indexed(c, b)) return bad + 1; /* a cycle would never end */
    }
    return bad;
}

/* Does the live map hold exactly what the tiling calls LIVE?  (Each LIVE block is looked up;
 * equal counts then rule out extra entries.) */
static void check_live_map(pblock_heap_t *h, pblock_checker_t *c, size_t live)
{
    for (pblock_t *b = h->first; b; b = b->next) {
        uint64_t v;
        if (b->free) continue;
        if (!addrmap_get(&h->live, b->off, &v) || (pblock_t *)(uintptr_t)v != b)
            pblock_violation(c, "LIVE block at %zu is not in the live map", b->off);
    }
    if (addrmap_count(&h->live) != live || h->live_blocks != live)
        pblock_violation(c, "live map holds %zu, counter says %zu, the tiling has %zu LIVE",
                         addrmap_count(&h->live), h->live_blocks, live);
    if (addrmap_check(&h->live) != 0) pblock_violation(c, "the live map is inconsistent");
}

int pblock_check(pblock_heap_t *h, pblock_index_check_fn index_check, void *index, peer_stats_t *st,
                 char *why, size_t why_len)
{
    pblock_checker_t c = {0, why, why_len, 0};
    peer_stats_t s = {0};
    size_t at = 0, blocks = 0, max_blocks = h->range / PEER_GRAN;
    if (why_len) why[0] = '\0';
    const pblock_t *prev = NULL;
    for (pblock_t *b = h->first; b; prev = b, b = b->next) {
        if (++blocks > max_blocks) {
            pblock_violation(&c, "more blocks than granules: the address list loops");
            break;
        }
        if (b->prev != prev) pblock_violation(&c, "block at %zu: wrong prev link", b->off);
        if (b->off != at) pblock_violation(&c, "block at %zu, expected one at %zu", b->off, at);
        if (b->size == 0 || b->size % PEER_GRAN || b->off % PEER_GRAN)
            pblock_violation(&c, "block at %zu has size %zu: not granular", b->off, b->size);
        at = b->off + b->size;
        if (!b->free) {
            s.live_blocks++;
            continue;
        }
        if (prev && prev->free) pblock_violation(&c, "FREE blocks touch at %zu", b->off);
        b->mark = MARK_FREE;
        s.free_blocks++;
        s.free_bytes += b->size;
        if (b->size > s.largest_free) s.largest_free = b->size;
    }
    if (at != h->range && blocks <= max_blocks)
        pblock_violation(&c, "the blocks end at %zu, the range at %zu", at, h->range);
    check_live_map(h, &c, s.live_blocks);
    index_check(index, &c);
    if (c.indexed != s.free_blocks)
        pblock_violation(&c, "the free index holds %zu blocks, the tiling has %zu FREE", c.indexed,
                         s.free_blocks);
    size_t n = 0;
    for (pblock_t *b = h->first; b && n++ < max_blocks; b = b->next) {
        if (b->mark == MARK_FREE)
            pblock_violation(&c, "FREE block at %zu (%zu B) is missing from the free index", b->off,
                             b->size);
        b->mark = MARK_NONE;
    }
    if (st) *st = s;
    return c.violations;
}
