/* tests/programs/reset_finalize.c — live allocations at aclrtResetDevice and at aclFinalize.
 *
 * Leaks on devices 0 and 1 (leak_on_device), resets device 1 with its blocks still live (a
 * `reset` report), then finalizes with device 0's blocks still live (a `finalize` report).
 */
#include "acl/acl.h"
#include "check.h"

__attribute__((noipa)) static void leak_on_device(int dev, int n)
{
    CHECK_EQ(aclrtSetDevice(dev), ACL_SUCCESS);
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        CHECK_EQ(aclrtMalloc(&p, 2048, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    }
}

int main(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    leak_on_device(0, 4);
    leak_on_device(1, 5);
    CHECK_EQ(aclrtResetDevice(1), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}
