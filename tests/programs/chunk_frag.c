/* tests/programs/chunk_frag.c — fragmentation below the chunk size, as an ordinary ACL program.
 *
 * Usage: chunk_frag   (run with NPUPOOL_POOL_BYTES=1G NPUPOOL_CHUNK_BYTES=64M NPUPOOL_FALLBACK=0)
 * Fills the pool with pairs of a 63 MiB and a 1 MiB block, frees the 63 MiB ones: about half of
 * the pool is free, but every free hole straddles a 64 MiB chunk edge, so no chunk is whole and
 * nothing can be stitched.  Then asks for 100 MiB: refused with 207001, and npupool's oom report
 * says why ("... in pieces smaller than a chunk").  Prints "REFUSED <code>".
 */
#include <stdio.h>

#include "acl/acl.h"
#include "check.h"

#define MiB ((size_t)1 << 20)

__attribute__((noipa)) static aclError ask_for_100_mib(void **p)
{
    aclError rc = aclrtMalloc(p, 100 * MiB, ACL_MEM_MALLOC_HUGE_FIRST);
    if (rc != ACL_SUCCESS) fprintf(stderr, "chunk_frag: 100 MiB refused with %d\n", (int)rc);
    return rc;
}

int main(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    void *big[15] = {0}, *small[15] = {0};
    for (int i = 0; i < 15; i++) {
        CHECK_EQ(aclrtMalloc(&big[i], 63 * MiB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        CHECK_EQ(aclrtMalloc(&small[i], MiB + 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    }
    for (int i = 0; i < 15; i += 2) CHECK_EQ(aclrtFree(big[i]), ACL_SUCCESS);
    void *p = NULL;
    aclError rc = ask_for_100_mib(&p);
    printf("REFUSED %d\n", (int)rc);
    CHECK_EQ(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
    for (int i = 1; i < 15; i += 2) CHECK_EQ(aclrtFree(big[i]), ACL_SUCCESS);
    for (int i = 0; i < 15; i++) CHECK_EQ(aclrtFree(small[i]), ACL_SUCCESS);
    CHECK_DONE();
}
