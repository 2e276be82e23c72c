/* tests/programs/oom_puzzle.c — the seeds' OOM puzzle, as an ordinary ACL program.
 *
 * Run with NPUPOOL_POOL_BYTES=8G NPUPOOL_FALLBACK=0: fill the pool with 1 GiB blocks (7 fit, with
 * the runtime's padding), free every other one (3 GiB + the ~1 GiB tail free, no two adjacent),
 * then ask for 2 GiB.  With a block pool (NPUPOOL_VMM=0) it is refused with 207001 although 4 GiB
 * are free, and the oom report must explain it ("fragmentation: ..."); prints "REFUSED <code>".
 * With argument "served" (a virtual-memory pool: the holes are stitched) it must succeed, and the
 * 2 GiB must be memory (written and read back at both ends); prints "SERVED".  Exits 0 when the
 * runtime answers as expected.
 */
#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    int want_served = argc > 1 && strcmp(argv[1], "served") == 0;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    void *blocks[7] = {0};
    for (int i = 0; i < 7; i++)
        CHECK_EQ(aclrtMalloc(&blocks[i], GiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    for (int i = 1; i < 7; i += 2) CHECK_EQ(aclrtFree(blocks[i]), ACL_SUCCESS);
    void *big = NULL;
    aclError rc = ask_for_two_gib(&big);
    if (want_served) {
        CHECK_EQ(rc, ACL_SUCCESS);
        if (rc == ACL_SUCCESS) {
            unsigned char *b = big;
            memset(b, 0x5A, 4096);
            memset(b + 2 * GiB - 4096, 0xA5, 4096);
            CHECK_EQ(b[17] == 0x5A && b[2 * GiB - 1] == 0xA5, 1);
            CHECK_EQ(aclrtFree(big), ACL_SUCCESS);
        }
        printf("SERVED\n");
    } else {
        printf("REFUSED %d\n", (int)rc);
        CHECK_EQ(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
    }
    for (int i = 0; i < 7; i += 2) CHECK_EQ(aclrtFree(blocks[i]), ACL_SUCCESS);
    CHECK_DONE();
}
