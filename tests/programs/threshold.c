/* tests/programs/threshold.c — pool use crossing the warning and critical thresholds.
 *
 * Run with NPUPOOL_POOL_BYTES=64M: grows_steadily() allocates 1 MiB blocks, one every 5 ms, up to
 * 62 of them (97%: past 85% and 95%), then waits a little for the reporter thread and exits.
 */
#include <time.h>

#include "acl/acl.h"
#include "check.h"

__attribute__((noipa)) static void grows_steadily(int n)
{
    struct timespec tick = {0, 5 * 1000000};
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        CHECK_EQ(aclrtMalloc(&p, ((size_t)1 << 20) - 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        nanosleep(&tick, NULL);
    }
}

int main(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    grows_steadily(62);
    struct timespec wait = {0, 300 * 1000000};
    nanosleep(&wait, NULL);
    CHECK_DONE();
}
