/* tests/programs/reset_loop.c — a program that resets its device in a tight loop (3000 times,
 * allocating in between).  Whatever keeps per-device state must not grow with the number of
 * resets: the process's peak resident memory is printed ("maxrss_kb N") for the case script. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "acl/acl.h"
#include "check.h"

int main(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    for (int i = 0; i < 3000; i++) {
        void *p = NULL;
        CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
        CHECK_EQ(aclrtMalloc(&p, 4096u + (unsigned)i, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        if (p) memset(p, i & 0xff, 4096);
        CHECK_EQ(aclrtFree(p), ACL_SUCCESS);
        CHECK_EQ(aclrtResetDevice(0), ACL_SUCCESS);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("maxrss_kb %ld\n", ru.ru_maxrss);
    CHECK_DONE();
}
