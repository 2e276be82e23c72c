/* pool/desc.h — block descriptors: the host records of the large heap's tiling, and their
 * storage (desc.c).
 *
 * Owns: desc_t (one block of the tiling: address, size, physical neighbours, state, and the
 * state's payload), the 64-byte granularity every block keeps (DESC_GRAN_SHIFT, desc_align),
 * and desc_store_t, which hands descriptors out and takes them back without calling malloc in
 * steady state: descriptors come in pages of DESC_PER_PAGE taken with aligned_alloc and kept
 * until desc_store_destroy; unused ones sit on a singly linked free list (through free_next).
 * A caller that may need k descriptors reserves them first (desc_reserve), so the operation
 * that takes them cannot fail half-way; that reservation is the only host-OOM path.
 * Invariants: free_count == length of `free`; total == pages * DESC_PER_PAGE; an UNUSED
 * descriptor is all zero but for its state and free_next.
 * Locking: caller holds pool->lock.
 */
#ifndef NPUPOOL_DESC_H
#define NPUPOOL_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "debug.h"
#include "pool.h"

#pragma GCC visibility push(hidden) /* module internals: never exported by the preload library */

#define DESC_GRAN_SHIFT 6u /* block granularity: 64 bytes */
#define DESC_PER_PAGE 256u /* descriptors per storage page (16 KiB) */
_Static_assert((1u << DESC_GRAN_SHIFT) == POOL_ALIGN, "blocks are POOL_ALIGN granular");

/* Bytes of the block that holds `n` bytes: n rounded up to the granularity. */
static inline size_t desc_align(size_t n)
{
    return (n + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1);
}

enum desc_state {
    DESC_UNUSED = 0,  /* on the storage's free list */
    DESC_FREE = 1,    /* free, listed in the large heap's class list (tlsf.h) */
    DESC_LIVE = 2,    /* an allocation, in the pool's address map */
    DESC_PAGE = 3,    /* a slab page (its slab_page_t in `page`, slab.h) */
    DESC_VOID = 4,    /* virtual-memory backing: address range with no physical memory mapped,
                        chunk aligned, listed in the pool's void heap (pool_vmm.c) */
    DESC_TRANSIT = 5, /* virtual-memory backing: taken by a slow path that is mapping or
                         unmapping its chunks with the pool lock released (pool_vmm.c) */
};

typedef struct desc desc_t;
struct slab_page;
/* 64 bytes, one cache line (storage pages are 64-byte aligned).  The free-list links and the
 * live-block sizes share storage: a block is never FREE (or VOID) and LIVE at once. */
struct desc {
    uintptr_t addr;    /* first byte (absolute address), POOL_ALIGN aligned */
    size_t size;       /* bytes, a multiple of POOL_ALIGN, > 0 */
    desc_t *phys_prev; /* block just below, NULL at the first usable byte */
    desc_t *phys_next; /* block just above, NULL at the end of the usable range */
    union {
        struct {
            desc_t *free_prev; /* FREE: previous in its class list (NULL = list head) */
            desc_t *free_next; /* FREE: next in its class list; UNUSED: next on free list */
        };
        struct {
            size_t granted;   /* LIVE: bytes the caller's contract gives it (<= size) */
            size_t requested; /* LIVE: bytes the application asked for (statistics) */
        };
    }; /* FREE and VOID blocks use the list links (each in its own heap); TRANSIT neither */
    union {
        struct slab_page *page; /* PAGE: its slab page; NULL in FREE, VOID and TRANSIT */
        uint32_t tag;           /* LIVE: the caller's tag word (pool_alloc_tagged) */
    };
    uint32_t state; /* enum desc_state */
    uint32_t mark;  /* scratch for pool_check (epoch stamp) */
};
_Static_assert(sizeof(desc_t) == 64, "desc_t is one cache line");

typedef struct desc_page desc_page_t;
typedef struct desc_store {
    desc_page_t *pages; /* every storage page, for destroy */
    desc_t *free;       /* UNUSED descriptors, linked through free_next */
    size_t free_count;  /* length of `free` */
    size_t total;       /* descriptors in all pages */
} desc_store_t;

void desc_store_init(desc_store_t *s);
void desc_store_destroy(desc_store_t *s);
/* Make sure `n` descriptors can be taken without allocating.  0 ok, -1 host OOM. */
int desc_grow(desc_store_t *s, size_t n);

static inline int desc_reserve(desc_store_t *s, size_t n)
{
    return s->free_count >= n ? 0 : desc_grow(s, n);
}

/* pre: desc_reserve() guaranteed one.  Returns a zeroed descriptor (state UNUSED). */
static inline desc_t *desc_get(desc_store_t *s)
{
    debug_assert_internal(s->free_count > 0 && s->free != NULL);
    desc_t *b = s->free;
    s->free = b->free_next;
    s->free_count--;
    *b = (desc_t){0};
    return b;
}

/* pre: b is in no list and nothing points at it any more. */
static inline void desc_put(desc_store_t *s, desc_t *b)
{
    debug_assert_internal(b->state != DESC_UNUSED);
    *b = (desc_t){0};
    b->state = DESC_UNUSED;
    b->free_next = s->free;
    s->free = b;
    s->free_count++;
}

/* Give back a descriptor taken with desc_get and never put in a tiling (a slow path that held
 * it for a commit that did not need it). */
static inline void desc_unget(desc_store_t *s, desc_t *b)
{
    *b = (desc_t){0};
    b->state = DESC_UNUSED;
    b->free_next = s->free;
    s->free = b;
    s->free_count++;
}

#pragma GCC visibility pop
#endif /* NPUPOOL_DESC_H */
