/* bench/peers/peer_bestfit.c — "bestfit": best fit with host metadata, in the style of the
 * block pool of PyTorch's CUDA caching allocator (written for this bench from its documented
 * behaviour, not from its code).
 *
 * Index: the FREE blocks ordered by (size, offset) in a treap (Seidel and Aragon 1996: a binary
 * search tree by key that is also a max-heap by a pseudo-random priority, expected depth
 * O(log n)); PyTorch keeps the same order in a std::set, a red-black tree.  The priority is a
 * hash of the block's offset (key field), the children are link[0] (before) and link[1]
 * (after).  Insert and erase are iterative: insert walks down while the priority is not
 * smaller, then splits the subtree there around the new key; erase replaces the node by the
 * merge of its two subtrees.
 * alloc (expected O(log n)): lower_bound(size) — the smallest block of at least the request,
 *   the lowest offset among equals — is taken, the rest above the request (if any) split off
 *   and inserted.  (PyTorch also keeps separate small and large pools of segments and
 *   rounds requests to 512 B; here there is one range and the granule is PEER_GRAN, as for
 *   every peer.)
 * free (expected O(log n)): the block is found in the live map (PyTorch: a hash set of
 *   allocated blocks), merged at once with FREE address neighbours found through the
 *   address-ordered links (PyTorch: the prev/next pointers of its blocks), inserted.
 * Metadata: host descriptors and the live map of pblock.h.
 */
#include <stdlib.h>

#include "pblock.h"
#include "peer.h"

typedef struct bestfit_peer {
    pblock_heap_t h; /* first: the tiling (pblock.h) */
    pblock_t *root;  /* the treap of FREE blocks */
} bestfit_peer_t;

/* Strict (size, offset) order. */
static inline int before(const pblock_t *a, const pblock_t *b)
{
    return a->size != b->size ? a->size < b->size : a->off < b->off;
}

static inline uint32_t priority_of(size_t off)
{
    return (uint32_t)(((uint64_t)off * 0x9E3779B97F4A7C15ull) >> 32);
}

static void index_insert(void *index, pblock_t *x)
{
    bestfit_peer_t *t = index;
    pblock_t **p = &t->root;
    x->key = priority_of(x->off);
    while (*p && (*p)->key >= x->key) p = before(x, *p) ? &(*p)->link[0] : &(*p)->link[1];
    /* Split the subtree at *p around x: keys before x hang left of x, the others right. */
    pblock_t *s = *p, **lo = &x->link[0], **hi = &x->link[1];
    while (s) {
        if (before(s, x)) {
            *lo = s;
            lo = &s->link[1];
            s = s->link[1];
        } else {
            *hi = s;
            hi = &s->link[0];
            s = s->link[0];
        }
    }
    *lo = *hi = NULL;
    *p = x;
}

static void index_remove(void *index, pblock_t *x)
{
    bestfit_peer_t *t = index;
    pblock_t **p = &t->root;
    while (*p != x) p = before(x, *p) ? &(*p)->link[0] : &(*p)->link[1];
    /* Merge x's subtrees (every key of a is before every key of b) into its place. */
    pblock_t *a = x->link[0], *b = x->link[1];
    while (a && b) {
        if (a->key > b->key) {
            *p = a;
            p = &a->link[1];
            a = a->link[1];
        } else {
            *p = b;
            p = &b->link[0];
            b = b->link[0];
        }
    }
    *p = a ? a : b;
}

/* The first block in (size, offset) order with size >= need, or NULL. */
static inline pblock_t *lower_bound(const bestfit_peer_t *t, size_t need)
{
    pblock_t *best = NULL;
    for (pblock_t *s = t->root; s;) {
        if (s->size >= need) {
            best = s;
            s = s->link[0];
        } else {
            s = s->link[1];
        }
    }
    return best;
}

static int bestfit_alloc(void *peer, size_t size, uintptr_t *out)
{
    bestfit_peer_t *t = peer;
    size_t need = pblock_round(size);
    if (need == 0 || pblock_reserve(&t->h) != 0) return -1;
    pblock_t *b = lower_bound(t, need);
    if (!b) return -1;
    *out = pblock_hand_out(&t->h, b, need, index_remove, index_insert, t);
    return 0;
}

static int bestfit_free(void *peer, uintptr_t at)
{
    return pblock_take_back(peer, at, index_remove, index_insert, peer);
}

/* In-order walk of the subtree s: order against the previous node, heap order against the
 * parent's priority, each node noted.  Stops at the first node seen twice (a cycle). */
static int walk(pblock_checker_t *c, const pblock_t *s, uint32_t parent_key, const pblock_t **prev)
{
    if (!s) return 0;
    if (s->key > parent_key)
        pblock_violation(c, "treap: block at %zu has a higher priority than its parent", s->off);
    if (walk(c, s->link[0], s->key, prev)) return 1;
    if (*prev && !before(*prev, s))
        pblock_violation(c, "treap: block at %zu (%zu B) is out of (size, offset) order", s->off,
                         s->size);
    if (s->key != priority_of(s->off))
        pblock_violation(c, "treap: block at %zu has a stale priority", s->off);
    if (pblock_note_indexed(c, s)) return 1;
    *prev = s;
    return walk(c, s->link[1], s->key, prev);
}

static void index_check(void *index, pblock_checker_t *c)
{
    const pblock_t *prev = NULL;
    walk(c, ((bestfit_peer_t *)index)->root, UINT32_MAX, &prev);
}

static int bestfit_check(void *peer, peer_stats_t *st, char *why, size_t why_len)
{
    return pblock_check(peer, index_check, peer, st, why, why_len);
}

static void *bestfit_create(size_t range)
{
    return pblock_peer_create(sizeof(bestfit_peer_t), range, index_insert);
}

const peer_ops_t peer_bestfit = {
    .name = "bestfit",
    .about = "bestfit (best fit over a (size, offset)-ordered treap, address-linked neighbours, "
             "immediate coalescing: the style of PyTorch's caching allocator, written for this "
             "bench; host metadata)",
    .arena = 1,
    .create = bestfit_create,
    .destroy = pblock_peer_destroy,
    .alloc = bestfit_alloc,
    .free = bestfit_free,
    .block_size = pblock_peer_block_size,
    .check = bestfit_check,
};
