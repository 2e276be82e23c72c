/* tests/programs/slow_leak.c — a long-running service with a slow leak and a busy balanced site.
 *
 * Usage: slow_leak SECONDS
 * Every 10 ms: slow_leak_site() leaks one 4096-byte block; balanced_site() allocates and frees 50
 * blocks.  Run with NPUPOOL_REPORT_INTERVAL set: the periodic reports must show slow_leak_site
 * growing in every report and balanced_site never growing (tests/cases/report_interval.sh).
 */
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"
#include "check.h"

__attribute__((noipa)) static void slow_leak_site(void)
{
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
}

__attribute__((noipa)) static void balanced_site(void)
{
    for (int i = 0; i < 50; i++) {
        void *p = NULL;
        CHECK_EQ(aclrtMalloc(&p, 8192, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        CHECK_EQ(aclrtFree(p), ACL_SUCCESS);
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.5;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    struct timespec t0, now, tick = {0, 10 * 1000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        slow_leak_site();
        balanced_site();
        nanosleep(&tick, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9 <
             seconds);
    CHECK_DONE();
}
