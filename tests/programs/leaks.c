/* tests/programs/leaks.c — planted leaks in named functions, and temporary allocations.
 *
 * An ordinary ACL program (knows nothing of npupool; linked without -rdynamic, so `static`
 * functions exist only in the executable's .symtab).  It leaks from three sites — two `static`
 * functions and one global function, through three entry points — makes and frees many temporary
 * allocations from a fourth, and exits without freeing the leaks.  For each planted site it prints
 *   SITE <function> <count> <bytes> <line> <file>
 * (the line of the allocating call), which tests/cases/ledger_leaks.sh compares with the exit
 * report: exactly those sites, exact counts, bytes and lines, nothing else.
 * Usage: leaks [scale]   (each count is multiplied by scale, default 1)
 */
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "check.h"

#define FILE_NAME "tests/programs/leaks.c"

static int line_static_small, line_static_cached, line_global;

__attribute__((noipa)) static void leak_small_static(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        line_static_small = __LINE__ + 1;
        aclError rc = aclrtMalloc(&p, 1000, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_EQ(rc, ACL_SUCCESS);
    }
}

__attribute__((noipa)) static void leak_cached_static(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        line_static_cached = __LINE__ + 1;
        aclError rc = aclrtMallocCached(&p, 12345, ACL_MEM_MALLOC_NORMAL_ONLY);
        CHECK_EQ(rc, ACL_SUCCESS);
    }
}

/* Global, but not exported: the program is linked without -rdynamic. */
__attribute__((noipa)) void leak_big_global(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        line_global = __LINE__ + 1;
        aclError rc = aclrtMallocAlign32(&p, (size_t)1 << 20, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_EQ(rc, ACL_SUCCESS);
    }
}

/* Busy but balanced: everything it allocates is freed again. */
__attribute__((noipa)) static void temporary_work(int n)
{
    void *keep[16] = {0};
    for (int i = 0; i < n; i++) {
        int k = i % 16;
        if (keep[k]) CHECK_EQ(aclrtFree(keep[k]), ACL_SUCCESS);
        CHECK_EQ(aclrtMalloc(&keep[k], 4096 + (size_t)(i % 7) * 512, ACL_MEM_MALLOC_HUGE_FIRST),
                 ACL_SUCCESS);
    }
    for (int k = 0; k < 16; k++)
        if (keep[k]) CHECK_EQ(aclrtFree(keep[k]), ACL_SUCCESS);
}

int main(int argc, char **argv)
{
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    if (scale < 1) scale = 1;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    temporary_work(200 * scale);
    leak_small_static(3 * scale);
    temporary_work(100 * scale);
    leak_big_global(2 * scale);
    leak_cached_static(1 * scale);
    temporary_work(100 * scale);
    printf("SITE leak_small_static %d %d %d %s\n", 3 * scale, 3000 * scale, line_static_small,
           FILE_NAME);
    printf("SITE leak_big_global %d %d %d %s\n", 2 * scale, (2 << 20) * scale, line_global,
           FILE_NAME);
    printf("SITE leak_cached_static %d %d %d %s\n", 1 * scale, 12345 * scale, line_static_cached,
           FILE_NAME);
    CHECK_DONE();
}
