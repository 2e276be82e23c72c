/* tests/programs/vmm_threads.c — 8 threads allocate and free device memory while another thread
 * of the same process takes physical memory through the virtual-memory API until the runtime
 * refuses, gives it back, and takes it again (torch_npu's expandable segments beside a pool).
 *
 * Usage: vmm_threads [ROUNDS]   (default 20)
 * Each worker keeps up to 32 blocks of 1 KiB .. 64 MiB, writes a tag into each and checks it
 * before the free, so a block handed to two owners (or unmapped under its owner) is seen.  The
 * taker grows a segment in 20 MiB pages until refused (207001), frees a random part of it, and
 * repeats.  At the end everything is freed and aclrtGetMemInfo must report what it reported at
 * the start: no block, no chunk and no page lost.  Prints "taken_max N" and exits 0 when every
 * answer was as the runtime's contract says.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

#define MiB ((size_t)1 << 20)
#define NWORKERS 8
#define KEEP 32
#define PAGE (20 * MiB)
#define MAXPAGES 4096

static int rounds = 20;
static volatile int stop;
static int errors; /* atomic */

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void *worker(void *arg)
{
    const uint64_t id = (uint64_t)(uintptr_t)arg; /* the owner's tag */
    uint64_t seed = id;
    uint64_t *blk[KEEP];
    size_t n = 0;
    if (aclrtSetDevice(0) != ACL_SUCCESS) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        if (n < KEEP && (n == 0 || rng(&seed) % 100 < 55)) {
            size_t size = (size_t)1024 << (rng(&seed) % 17); /* 1 KiB .. 64 MiB */
            void *p = NULL;
            aclError rc = aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST);
            if (rc == ACL_SUCCESS) {
                blk[n] = p;
                blk[n][0] = (uint64_t)(uintptr_t)p ^ id;
                n++;
            } else if (rc != ACL_ERROR_RT_MEMORY_ALLOCATION) {
                __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
            }
        } else {
            size_t i = rng(&seed) % n;
            if (blk[i][0] != ((uint64_t)(uintptr_t)blk[i] ^ id))
                __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
            if (aclrtFree(blk[i]) != ACL_SUCCESS) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
            blk[i] = blk[--n];
        }
    }
    while (n) {
        n--;
        if (blk[n][0] != ((uint64_t)(uintptr_t)blk[n] ^ id))
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        if (aclrtFree(blk[n]) != ACL_SUCCESS) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) rounds = atoi(argv[1]);
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    void *first = NULL;
    CHECK_EQ(aclrtMalloc(&first, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    size_t free0 = 0, total = 0;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free0, &total), ACL_SUCCESS);
    pthread_t th[NWORKERS];
    for (int i = 0; i < NWORKERS; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1)), 0);

    aclrtPhysicalMemProp prop = {.handleType = ACL_MEM_HANDLE_TYPE_NONE,
                                 .allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED,
                                 .memAttr = ACL_HBM_MEM_HUGE,
                                 .location = {.id = 0, .type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    static aclrtDrvMemHandle h[MAXPAGES];
    size_t cap = (size_t)MAXPAGES * PAGE;
    char *va = NULL;
    CHECK_EQ(aclrtReserveMemAddress((void **)&va, cap, 0, NULL, 0), ACL_SUCCESS);
    int n = 0, taken_max = 0;
    uint64_t seed = 77;
    for (int r = 0; r < rounds; r++) {
        for (;;) {
            if (n == MAXPAGES) break;
            aclError rc = aclrtMallocPhysical(&h[n], PAGE, &prop, 0);
            if (rc != ACL_SUCCESS) {
                CHECK_EQ(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
                break;
            }
            CHECK_EQ(aclrtMapMem(va + (size_t)n * PAGE, PAGE, 0, h[n], 0), ACL_SUCCESS);
            va[(size_t)n * PAGE] = (char)n;
            n++;
        }
        if (n > taken_max) taken_max = n;
        int keep = (int)(rng(&seed) % (uint64_t)(n + 1)); /* give a random part back */
        while (n > keep) {
            n--;
            CHECK_EQ(va[(size_t)n * PAGE], (char)n);
            CHECK_EQ(aclrtUnmapMem(va + (size_t)n * PAGE), ACL_SUCCESS);
            CHECK_EQ(aclrtFreePhysical(h[n]), ACL_SUCCESS);
        }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < NWORKERS; i++) pthread_join(th[i], NULL);
    while (n > 0) {
        n--;
        CHECK_EQ(aclrtUnmapMem(va + (size_t)n * PAGE), ACL_SUCCESS);
        CHECK_EQ(aclrtFreePhysical(h[n]), ACL_SUCCESS);
    }
    CHECK_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
    CHECK_EQ(errors, 0);
    size_t free1 = 0;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free1, &total), ACL_SUCCESS);
    CHECK_EQ(free1, free0); /* nothing lost */
    printf("taken_max %zu\n", (size_t)taken_max * PAGE);
    CHECK_EQ(aclrtFree(first), ACL_SUCCESS);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}
