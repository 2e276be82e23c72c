/* tests/programs/exhaust.c — allocate blocks of argv[1] bytes (default 8 MiB) until the runtime
 * says out of memory.  The answer must be exactly 207001, the only code torch_npu retries on.
 * Prints "granted N" (bytes obtained) for the case script; then frees everything, checks that
 * the same amount can be obtained again (nothing lost), and frees again. */
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

#define MAXB 100000

static void *ptrs[MAXB];

static size_t fill(size_t block, int *count, aclError *last)
{
    size_t got = 0;
    *count = 0;
    while (*count < MAXB) {
        aclError rc = aclrtMalloc(&ptrs[*count], block, ACL_MEM_MALLOC_HUGE_FIRST);
        if (rc != ACL_SUCCESS) {
            *last = rc;
            break;
        }
        memset(ptrs[*count], 1, 64);
        got += block;
        (*count)++;
    }
    return got;
}

int main(int argc, char **argv)
{
    size_t block = argc > 1 ? strtoull(argv[1], NULL, 0) : (8u << 20);
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    int n = 0;
    aclError last = ACL_SUCCESS;
    size_t got = fill(block, &n, &last);
    CHECK_EQ(last, ACL_ERROR_RT_MEMORY_ALLOCATION);
    printf("granted %zu blocks %d\n", got, n);
    for (int i = 0; i < n; i++) CHECK_EQ(aclrtFree(ptrs[i]), ACL_SUCCESS);
    int n2 = 0;
    size_t got2 = fill(block, &n2, &last);
    CHECK_EQ(got2, got);
    CHECK_EQ(last, ACL_ERROR_RT_MEMORY_ALLOCATION);
    for (int i = 0; i < n2; i++) CHECK_EQ(aclrtFree(ptrs[i]), ACL_SUCCESS);
    CHECK_DONE();
}
