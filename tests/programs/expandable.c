/* tests/programs/expandable.c — what torch_npu's expandable segments do with device memory
 * (PYTORCH_NPU_ALLOC_CONF=expandable_segments:True), as an ordinary ACL program.
 *
 * Usage: expandable [LIVE_BYTES]
 * One small aclrtMalloc first (torch_npu's first tensors; the pool is made there), plus
 * LIVE_BYTES more (default 0) kept live in 64 MiB blocks.  Then, as a segment: reserve an
 * address range as large as the device, take physical memory in 20 MiB pages (the large
 * segment's page) and map each at the end of the segment until the runtime refuses, then in
 * 2 MiB pages (the small segment's) until it refuses again; every page is written.  Prints
 *   reported_free N   what aclrtGetMemInfo said was free before the segment grew
 *   obtained N        bytes the segment got
 *   after_free N      what aclrtGetMemInfo says with the segment full
 * then unmaps and frees everything, checks that aclrtGetMemInfo reports the first figure again,
 * and exits 0 when every answer was as the runtime's contract says (207001 for the refusals).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

#define MiB ((size_t)1 << 20)
#define MAXPAGES 65536

static aclrtDrvMemHandle handles[MAXPAGES];
static size_t sizes[MAXPAGES];
static void *live[4096];

/* Grow the segment at `va` + *used with pages of `page` bytes until refused. */
static size_t grow(char *va, size_t cap, size_t *used, int *n, size_t page)
{
    aclrtPhysicalMemProp prop = {.handleType = ACL_MEM_HANDLE_TYPE_NONE,
                                 .allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED,
                                 .memAttr = ACL_HBM_MEM_HUGE,
                                 .location = {.id = 0, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    size_t got = 0;
    while (*n < MAXPAGES && *used + page <= cap) {
        aclError rc = aclrtMallocPhysical(&handles[*n], page, &prop, 0);
        if (rc != ACL_SUCCESS) {
            CHECK_EQ(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
            break;
        }
        CHECK_EQ(aclrtMapMem(va + *used, page, 0, handles[*n], 0), ACL_SUCCESS);
        memset(va + *used, 0x11, 64);
        va[*used + page - 1] = 0x22;
        sizes[(*n)++] = page;
        *used += page;
        got += page;
    }
    return got;
}

int main(int argc, char **argv)
{
    size_t keep = argc > 1 ? strtoull(argv[1], NULL, 0) : 0;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    void *first = NULL;
    CHECK_EQ(aclrtMalloc(&first, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    int nlive = 0;
    for (size_t k = 0; k + 64 * MiB <= keep && nlive < 4096; k += 64 * MiB)
        CHECK_EQ(aclrtMalloc(&live[nlive++], 64 * MiB - 32, ACL_MEM_MALLOC_HUGE_FIRST),
                 ACL_SUCCESS);
    size_t free0 = 0, total = 0;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total), ACL_SUCCESS);
    printf("reported_free %zu\n", free0);

    size_t cap = (total + 2 * MiB - 1) / (2 * MiB) * (2 * MiB); /* the device's size */
    void *va = NULL;
    CHECK_EQ(aclrtReserveMemAddress(&va, cap, 0, NULL, 0), ACL_SUCCESS);
    size_t used = 0;
    int n = 0;
    size_t got = grow(va, cap, &used, &n, 20 * MiB);
    got += grow(va, cap, &used, &n, 2 * MiB);
    printf("obtained %zu\n", got);
    size_t free1 = 0;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total), ACL_SUCCESS);
    printf("after_free %zu\n", free1);
    fflush(stdout);

    /* Every page still holds what was written: nothing was taken away behind the segment. */
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *p = (const char *)va + off;
        CHECK_EQ(p[0] == 0x11 && p[sizes[i] - 1] == 0x22, 1);
        CHECK_EQ(aclrtUnmapMem((char *)va + off), ACL_SUCCESS);
        CHECK_EQ(aclrtFreePhysical(handles[i]), ACL_SUCCESS);
        off += sizes[i];
    }
    CHECK_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
    size_t free2 = 0;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free2, &total), ACL_SUCCESS);
    printf("final_free %zu\n", free2);
    CHECK_EQ(free2 >= free0 - free0 / 1000 && free2 <= free0 + free0 / 1000, 1);
    for (int i = 0; i < nlive; i++) CHECK_EQ(aclrtFree(live[i]), ACL_SUCCESS);
    CHECK_EQ(aclrtFree(first), ACL_SUCCESS);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}
