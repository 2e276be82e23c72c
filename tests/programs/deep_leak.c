/* tests/programs/deep_leak.c — two leaks from the bottom of a deep recursion, the first the
 * process's first allocation.
 *
 * An ordinary ACL program (knows nothing of npupool).  descend() calls itself LEVELS times, then
 * leak_at_bottom() allocates 4096 bytes and keeps them; this happens twice, from one call site,
 * so the exit report has one site with two allocations.  tests/cases/ledger_depth.sh checks that
 * the site's stack holds exactly NPUPOOL_BACKTRACE_DEPTH frames (the stack is deeper), the first
 * leak_at_bottom and the rest descend: the first capture of a process is the one that learns how
 * many of npupool's own frames to walk past (ledger/ledger_stack.c).
 * Usage: deep_leak [LEVELS]   (default 60)
 */
#include <stdlib.h>

#include "acl/acl.h"
#include "check.h"

__attribute__((noipa)) static void leak_at_bottom(void)
{
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    __asm__ volatile("" ::: "memory"); /* keep the call from being a tail call */
}

__attribute__((noipa)) static void descend(int levels)
{
    if (levels > 0)
        descend(levels - 1);
    else
        leak_at_bottom();
    __asm__ volatile("" ::: "memory"); /* every level keeps its frame */
}

int main(int argc, char **argv)
{
    int levels = argc > 1 ? atoi(argv[1]) : 60;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    for (volatile int round = 0; round < 2; round++) descend(levels); /* one call site */
    CHECK_DONE();
}
