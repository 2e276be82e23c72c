/* tests/programs/basic.c — one thread, every allocating entry point, the runtime's contract.
 * Data written through each pointer survives; blocks (with their padding) never overlap;
 * addresses are 64-byte aligned; error codes for misuse are the runtime's. */
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

#define NBLOCKS 600

typedef struct block {
    unsigned char *p;  /* device pointer */
    size_t size;       /* requested bytes */
    size_t owned;      /* bytes that belong to it (padding rule) */
    unsigned char tag; /* byte it was filled with */
} block_t;

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) { return check_rand(&rng); }

static int cmp_blocks(const void *a, const void *b)
{
    const block_t *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

int main(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);

    static block_t blocks[NBLOCKS];
    for (int i = 0; i < NBLOCKS; i++) {
        size_t size = (size_t)1 << (next_rand() % 22); /* 1 B .. 2 MiB */
        size += next_rand() % size;
        void *p = NULL;
        aclError rc;
        switch (i % 4) {
        case 0: rc = aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST); break;
        case 1: rc = aclrtMallocAlign32(&p, size, ACL_MEM_MALLOC_HUGE_FIRST); break;
        case 2: rc = aclrtMallocCached(&p, size, ACL_MEM_MALLOC_NORMAL_ONLY); break;
        default: rc = aclrtMallocWithCfg(&p, size, ACL_MEM_MALLOC_HUGE_ONLY, NULL); break;
        }
        CHECK_EQ(rc, ACL_SUCCESS);
        CHECK(p != NULL);
        CHECK(((uintptr_t)p & 63) == 0);
        blocks[i].p = p;
        blocks[i].size = size;
        blocks[i].owned = i % 4 == 1 ? ACL_ALIGN32_SIZE(size) : ACL_PADDED_SIZE(size);
        blocks[i].tag = (unsigned char)i;
        /* the whole owned range is writable: fill it with the block's tag */
        CHECK_EQ(aclrtMemset(p, blocks[i].owned, (int)(i & 0xff), blocks[i].owned), ACL_SUCCESS);
    }
    for (int i = 0; i < NBLOCKS; i++) {
        unsigned char *p = blocks[i].p;
        size_t n = blocks[i].owned;
        CHECK(p[0] == (unsigned char)(i & 0xff));
        CHECK(p[n / 2] == (unsigned char)(i & 0xff));
        CHECK(p[n - 1] == (unsigned char)(i & 0xff));
    }
    qsort(blocks, NBLOCKS, sizeof blocks[0], cmp_blocks);
    for (int i = 1; i < NBLOCKS; i++) CHECK(blocks[i - 1].p + blocks[i - 1].owned <= blocks[i].p);

    /* memcpy through a device pointer, both ways */
    char host[256], back[256];
    void *scratch = NULL;
    for (int i = 0; i < 256; i++) host[i] = (char)i;
    CHECK_EQ(aclrtMalloc(&scratch, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK_EQ(aclrtMemcpy(scratch, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE),
             ACL_SUCCESS);
    CHECK_EQ(aclrtMemcpy(back, sizeof back, scratch, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST),
             ACL_SUCCESS);
    CHECK(memcmp(host, back, sizeof host) == 0);
    CHECK_EQ(aclrtFree(scratch), ACL_SUCCESS);

    /* the runtime's answers to bad arguments */
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMallocAlign32(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMallocCached(NULL, 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMallocWithCfg(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtFreeWithDevSync(NULL), ACL_ERROR_INVALID_PARAM);

    /* misuse: interior pointer, pointer never handed out, double free — all refused */
    int on_stack;
    CHECK(aclrtFree(blocks[5].p + 64) != ACL_SUCCESS);
    CHECK(aclrtFree(&on_stack) != ACL_SUCCESS);
    unsigned char *victim = blocks[7].p;
    CHECK_EQ(aclrtFree(victim), ACL_SUCCESS);
    CHECK(aclrtFree(victim) != ACL_SUCCESS);
    blocks[7].p = NULL;
    /* the refused frees changed nothing: every other block still holds its data */
    for (int i = 0; i < NBLOCKS; i++) {
        if (!blocks[i].p) continue;
        CHECK(blocks[i].p[blocks[i].owned - 1] == blocks[i].tag);
    }

    /* free everything, half with device sync */
    for (int i = 0; i < NBLOCKS; i++) {
        if (!blocks[i].p) continue;
        aclError rc = i % 2 ? aclrtFree(blocks[i].p) : aclrtFreeWithDevSync(blocks[i].p);
        CHECK_EQ(rc, ACL_SUCCESS);
    }
    CHECK_EQ(aclrtResetDevice(0), ACL_SUCCESS);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}
