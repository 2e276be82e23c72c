/* tests/programs/threads.c — NTHREADS threads (argv[1], default 8) allocate, write, verify and free
 * concurrently through every entry point; each block is stamped with its owner and checked before
 * it is freed, so overlapping blocks or lost writes show up as a failed check.
 * `threads N handoff`: each thread also hands blocks it allocated to the next thread (a one-slot
 * inbox), which checks and frees them, so most frees come from another thread than the one that
 * allocated (npupool's ledger keeps a thread's records in that thread's shards, the pool's thread
 * caches take other threads' blocks); what is left in the inboxes is freed by main.
 * `threads 2 race`: the main thread and one other free the same block at the same moment,
 * RACE_ROUNDS times, at every skew: each round exactly one free must succeed and the other get
 * ACL_ERROR_RT_MEMORY_FREE (the pool's lock-free free claims a slot with a compare-and-swap). */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

#define LIVE 64
#define ROUNDS 3000

static int failures;
static int nthreads = 8;

/* A block on its way to another thread. */
typedef struct handoff {
    unsigned char *ptr;
    size_t size;
    unsigned char tag;
} handoff_t;
static handoff_t *inbox[256]; /* atomic: thread i's one-slot inbox */

static void check_and_free(handoff_t *h)
{
    if (h->ptr[0] != h->tag || h->ptr[h->size - 1] != h->tag)
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    if (aclrtFree(h->ptr) != ACL_SUCCESS) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    free(h);
}

/* Thread id's handoff step: free what arrived, then send a new block to the next thread (or
 * free it here when that thread has not taken the last one yet). */
static void handoff_round(unsigned id, size_t size)
{
    handoff_t *got = __atomic_exchange_n(&inbox[id], NULL, __ATOMIC_ACQ_REL);
    if (got) check_and_free(got);
    handoff_t *h = malloc(sizeof *h);
    if (!h) return;
    h->size = size;
    h->tag = (unsigned char)(0x80 | id);
    if (aclrtMalloc((void **)&h->ptr, size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        free(h);
        return;
    }
    memset(h->ptr, h->tag, size);
    handoff_t *empty = NULL;
    unsigned next = (id + 1) % (unsigned)nthreads;
    if (!__atomic_compare_exchange_n(&inbox[next], &empty, h, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        check_and_free(h);
}
static int handoff;

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
        check_rand(&rng);
        int slot = (int)(rng % LIVE);
        if (handoff && (r & 1)) {
            handoff_round(id, ((size_t)1 << (rng >> 40) % 19) + 1);
            continue;
        }
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

#define RACE_ROUNDS 3000
static void *race_block;          /* the block of the current round (written before race_round) */
static int race_round, race_done; /* atomics: the round the helper may run, the last it ran */
static aclError race_rc;          /* the helper's answer (read after race_done) */

static void race_wait(const int *word, int want)
{
    for (unsigned n = 0; __atomic_load_n(word, __ATOMIC_ACQUIRE) != want; n++)
        if (n > 4096) sched_yield();
}

static void *race_helper(void *arg)
{
    (void)arg;
    if (aclrtSetDevice(0) != ACL_SUCCESS) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    for (int k = 1; k <= RACE_ROUNDS; k++) {
        race_wait(&race_round, k);
        race_rc = aclrtFree(race_block);
        __atomic_store_n(&race_done, k, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void run_race(void)
{
    void *keep[LIVE]; /* live blocks of the same size: the size class gets slab pages */
    for (int i = 0; i < LIVE; i++)
        CHECK_EQ(aclrtMalloc(&keep[i], 1000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    pthread_t helper;
    CHECK_EQ(pthread_create(&helper, NULL, race_helper, NULL), 0);
    int once = 0, twice = 0, never = 0;
    uint32_t lcg = 7;
    for (int k = 1; k <= RACE_ROUNDS; k++) {
        void *p = NULL;
        CHECK_EQ(aclrtMalloc(&p, 1000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        race_block = p;
        __atomic_store_n(&race_round, k, __ATOMIC_RELEASE);
        lcg = lcg * 1103515245u + 12345u;
        for (volatile unsigned d = (lcg >> 16) % 256; d; d--) {
        }
        aclError mine = aclrtFree(p);
        race_wait(&race_done, k);
        int ok = (mine == ACL_SUCCESS) + (race_rc == ACL_SUCCESS);
        int refused = (mine == ACL_ERROR_RT_MEMORY_FREE) + (race_rc == ACL_ERROR_RT_MEMORY_FREE);
        once += ok == 1 && refused == 1;
        twice += ok == 2;
        never += ok == 0;
    }
    pthread_join(helper, NULL);
    printf("race: %d rounds: one free accepted %d, both %d, neither %d\n", RACE_ROUNDS, once, twice,
           never);
    CHECK_EQ(once, RACE_ROUNDS);
    for (int i = 0; i < LIVE; i++) CHECK_EQ(aclrtFree(keep[i]), ACL_SUCCESS);
}

int main(int argc, char **argv)
{
    nthreads = argc > 1 ? atoi(argv[1]) : 8;
    if (nthreads < 1 || nthreads > 256) nthreads = 8;
    handoff = argc > 2 && strcmp(argv[2], "handoff") == 0;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    if (argc > 2 && strcmp(argv[2], "race") == 0) {
        CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
        run_race();
        CHECK_EQ(failures, 0);
        CHECK_EQ(aclFinalize(), ACL_SUCCESS);
        CHECK_DONE();
    }
    pthread_t t[256];
    for (int i = 0; i < nthreads; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < nthreads; i++)
        if (inbox[i]) check_and_free(inbox[i]);
    CHECK_EQ(failures, 0);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}
