/* tests/programs/threshold.c — pool use crossing the warning and critical thresholds.
 *
 * Run with NPUPOOL_POOL_BYTES=64M: grows_steadily() allocates 1 MiB blocks, one every TICK_MS
 * (argv[1], default 5 ms), up to 62 of them (97%: past 85% and 95%), then frees them all (so a
 * report written after the crossing would show an empty pool) and exits.
 */
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"
#include "check.h"

static void *blocks[64];

__attribute__((noipa)) static void grows_steadily(int n, long tick_ms)
{
    struct timespec tick = {tick_ms / 1000, (tick_ms % 1000) * 1000000};
    for (int i = 0; i < n; i++) {
        CHECK_EQ(aclrtMalloc(&blocks[i], ((size_t)1 << 20) - 64, ACL_MEM_MALLOC_HUGE_FIRST),
                 ACL_SUCCESS);
        nanosleep(&tick, NULL);
    }
}

int main(int argc, char **argv)
{
    long tick_ms = argc > 1 ? atol(argv[1]) : 5;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    grows_steadily(62, tick_ms);
    for (int i = 0; i < 62; i++) CHECK_EQ(aclrtFree(blocks[i]), ACL_SUCCESS);
    CHECK_DONE();
}
