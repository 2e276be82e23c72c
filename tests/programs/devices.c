/* tests/programs/devices.c — two devices, aclrtGetMemInfo, and aclrtResetDevice.
 * Blocks of device 0 and device 1 are distinct and both writable; GetMemInfo's free figure drops
 * by about what was allocated (not by a whole pool reservation); resetting device 1 leaves
 * device 0's blocks intact and device 1 usable again. */
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

#define MIB ((size_t)1 << 20)

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t), ACL_SUCCESS);
    CHECK(f <= t);
    return f;
}

int main(void)
{
    uint32_t count = 0;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    CHECK(count >= 2);
    size_t f0 = 0, t0 = 0;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &f0, &t0), ACL_ERROR_RT_CONTEXT_NULL); /* no device yet */

    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    size_t before0 = free_now();
    void *a = NULL, *b = NULL;
    CHECK_EQ(aclrtMalloc(&a, 100 * MIB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    size_t after0 = free_now();
    /* the free figure tells the truth: down by ~100 MiB (2 MiB granularity), not by 80% */
    CHECK(before0 - after0 >= 100 * MIB && before0 - after0 <= 104 * MIB);
    memset(a, 0xaa, 100 * MIB);

    CHECK_EQ(aclrtSetDevice(1), ACL_SUCCESS);
    CHECK_EQ(aclrtMalloc(&b, 50 * MIB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK(a != b);
    memset(b, 0xbb, 50 * MIB);
    CHECK_EQ(aclrtResetDevice(1), ACL_SUCCESS);

    /* device 1 works again after its reset */
    CHECK_EQ(aclrtSetDevice(1), ACL_SUCCESS);
    void *c = NULL;
    CHECK_EQ(aclrtMalloc(&c, 10 * MIB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    memset(c, 0xcc, 10 * MIB);
    CHECK_EQ(aclrtFree(c), ACL_SUCCESS);

    /* device 0 untouched */
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    CHECK(((unsigned char *)a)[0] == 0xaa && ((unsigned char *)a)[100 * MIB - 1] == 0xaa);
    CHECK_EQ(aclrtFree(a), ACL_SUCCESS);
    size_t end0 = free_now();
    CHECK(end0 + 2 * MIB >= before0);
    CHECK_EQ(aclrtResetDevice(0), ACL_SUCCESS);
    CHECK_EQ(aclrtResetDevice(1), ACL_SUCCESS);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}
