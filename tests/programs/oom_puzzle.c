/* tests/programs/oom_puzzle.c — the seeds' OOM puzzle, as an ordinary ACL program.
 *
 * Run with NPUPOOL_POOL_BYTES=8G NPUPOOL_FALLBACK=0: fill the pool with 1 GiB blocks (7 fit, with
 * the runtime's padding), free every other one (3 GiB + the ~1 GiB tail free, no two adjacent),
 * then ask for 2 GiB: refused with 207001 although 4 GiB are free.  The oom report must explain it
 * ("fragmentation: ...").  Prints "REFUSED <code>" and exits 0 when the runtime answers as expected.
 */
#include <stdio.h>

#include "acl/acl.h"
#include "check.h"

#define GiB ((size_t)1 << 30)

__attribute__((noipa)) static aclError ask_for_two_gib(void **p)
{
    aclError rc = aclrtMalloc(p, 2 * GiB, ACL_MEM_MALLOC_HUGE_FIRST);
    if (rc != ACL_SUCCESS)
        fprintf(stderr, "oom_puzzle: 2 GiB refused with %d\n", (int)rc); /* no tail call */
    return rc;
}

int main(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    void *blocks[7] = {0};
    for (int i = 0; i < 7; i++)
        CHECK_EQ(aclrtMalloc(&blocks[i], GiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    for (int i = 1; i < 7; i += 2) CHECK_EQ(aclrtFree(blocks[i]), ACL_SUCCESS);
    void *big = NULL;
    aclError rc = ask_for_two_gib(&big);
    printf("REFUSED %d\n", (int)rc);
    CHECK_EQ(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
    for (int i = 0; i < 7; i += 2) CHECK_EQ(aclrtFree(blocks[i]), ACL_SUCCESS);
    CHECK_DONE();
}
