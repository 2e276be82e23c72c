/* tests/programs/cjson_host.c — a host program with a cJSON of its own.
 *
 * An ordinary ACL program (knows nothing of npupool) that defines, and exports (linked with
 * -rdynamic), every cJSON function npupool's report writer uses, as sentinels: each counts its
 * calls and returns the address of `sentinel`.  A program that embeds its own copy or another
 * version of cJSON looks like this to the dynamic linker.  It leaks one allocation and calls
 * aclFinalize, which makes npupool write a `finalize` report right there (NPUPOOL_REPORT set by
 * tests/cases/shim_selfcontained.sh), then checks that:
 *   - nothing called its functions but itself (npupool's report went to its own cJSON);
 *   - its own calls still reach its own functions.
 * Prints "host cJSON intact: N calls" and exits 0, or names the check that failed and exits 1.
 */
#include <stdio.h>

#include "acl/acl.h"
#include "check.h"

static int own_calls;      /* calls of the functions below */
static char sentinel[256]; /* what they return: not a cJSON node of anybody's */

#define SENTINEL(name)                    \
    void *name(void *a, void *b, void *c) \
    {                                     \
        (void)a, (void)b, (void)c;        \
        own_calls++;                      \
        return sentinel;                  \
    }
SENTINEL(cJSON_CreateObject)
SENTINEL(cJSON_CreateArray)
SENTINEL(cJSON_CreateNumber)
SENTINEL(cJSON_CreateString)
SENTINEL(cJSON_CreateStringReference)
SENTINEL(cJSON_CreateRaw)
SENTINEL(cJSON_CreateNull)
SENTINEL(cJSON_CreateBool)
SENTINEL(cJSON_AddItemToObject)
SENTINEL(cJSON_AddItemToArray)
SENTINEL(cJSON_GetObjectItemCaseSensitive)
SENTINEL(cJSON_Print)
SENTINEL(cJSON_PrintBuffered)
SENTINEL(cJSON_PrintUnformatted)
SENTINEL(cJSON_Delete)
SENTINEL(cJSON_free)
SENTINEL(cJSON_malloc)
SENTINEL(cJSON_InitHooks)
SENTINEL(cJSON_Parse)

int main(void)
{
    void *p = NULL;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    CHECK_EQ(aclrtMalloc(&p, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS); /* kept: a leak */
    CHECK_EQ(aclFinalize(), ACL_SUCCESS); /* the finalize report is written in here */
    CHECK_EQ(own_calls, 0);
    CHECK(cJSON_CreateObject(NULL, NULL, NULL) == sentinel);
    CHECK(cJSON_Delete(NULL, NULL, NULL) == sentinel);
    CHECK_EQ(own_calls, 2);
    printf("host cJSON intact: %d calls\n", own_calls);
    return check_failures ? 1 : 0;
}
