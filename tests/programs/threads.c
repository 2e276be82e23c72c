/* tests/programs/threads.c — NTHREADS threads (argv[1], default 8) allocate, write, verify and free
 * concurrently through every entry point; each block is stamped with its owner and checked before
 * it is freed, so overlapping blocks or lost writes show up as a failed check. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

#define LIVE 64
#define ROUNDS 3000

static int failures;

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (id + 1);
    void *ptrs[LIVE] = {0};
    size_t sizes[LIVE] = {0};
    if (aclrtSetDevice(0) != ACL_SUCCESS) {
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    for (int r = 0; r < ROUNDS; r++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        int slot = (int)(rng % LIVE);
        if (ptrs[slot]) {
            unsigned char *p = ptrs[slot];
            unsigned char tag = (unsigned char)(id * 31 + slot);
            if (p[0] != tag || p[sizes[slot] - 1] != tag)
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
            if ((r & 1 ? aclrtFree(p) : aclrtFreeWithDevSync(p)) != ACL_SUCCESS)
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
            ptrs[slot] = NULL;
        } else {
            size_t size = ((size_t)1 << (rng >> 40) % 20) + (rng >> 20) % 4096 + 1;
            aclError rc =
                (r % 3 == 0)   ? aclrtMallocAlign32(&ptrs[slot], size, ACL_MEM_MALLOC_HUGE_FIRST)
                : (r % 3 == 1) ? aclrtMalloc(&ptrs[slot], size, ACL_MEM_MALLOC_HUGE_FIRST)
                               : aclrtMallocCached(&ptrs[slot], size, ACL_MEM_MALLOC_HUGE_FIRST);
            if (rc != ACL_SUCCESS || ((uintptr_t)ptrs[slot] & 63)) {
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
                ptrs[slot] = NULL;
                continue;
            }
            sizes[slot] = size;
            memset(ptrs[slot], (unsigned char)(id * 31 + slot), size);
        }
    }
    for (int s = 0; s < LIVE; s++)
        if (ptrs[s] && aclrtFree(ptrs[s]) != ACL_SUCCESS)
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 8;
    if (nthreads < 1 || nthreads > 256) nthreads = 8;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    pthread_t t[256];
    for (int i = 0; i < nthreads; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    CHECK_EQ(failures, 0);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}
