/* tests/programs/many_live.c — a thread that keeps many small blocks live, frees and allocates
 * in random order, then leaves a known set of them allocated at exit.
 *
 * An ordinary ACL program.  With tens of thousands of blocks live, the shim parks the ledger's
 * forget of each pool block it frees (ledger.h: ledger_release_tagged_later), so this is what
 * tests/cases/ledger_parked.sh checks: every report, the exit report included, counts exactly the
 * blocks still allocated, none that was freed last.
 * Prints "LIVE <blocks> <bytes requested>" of what it leaves allocated.
 * Usage: many_live LIVE PAIRS [SECONDS]   (SECONDS: keep pairing for at least that long, so that
 *        interval reports fall in the middle of it)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"
#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { return check_rand(&rng); }
static size_t block_size(void) { return 512 + (size_t)(next() % 7681); } /* 512 B .. 8 KiB */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: many_live LIVE PAIRS [SECONDS]\n");
        return 2;
    }
    size_t live = strtoul(argv[1], NULL, 10), pairs = strtoul(argv[2], NULL, 10);
    double seconds = argc > 3 ? atof(argv[3]) : 0;
    void **slot = calloc(live, sizeof *slot);
    size_t *size = calloc(live, sizeof *size);
    if (!slot || !size || live == 0) return 2;
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    for (size_t i = 0; i < live; i++) {
        size[i] = block_size();
        CHECK_EQ(aclrtMalloc(&slot[i], size[i], ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    }
    double until = now_s() + seconds;
    for (size_t k = 0; k < pairs || now_s() < until; k++) {
        size_t i = (size_t)(next() % live);
        CHECK_EQ(aclrtFree(slot[i]), ACL_SUCCESS);
        size[i] = block_size();
        CHECK_EQ(aclrtMalloc(&slot[i], size[i], ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    }
    size_t kept = 0, bytes = 0;
    for (size_t i = 0; i < live; i++) {
        if (i % 2) {
            CHECK_EQ(aclrtFree(slot[i]), ACL_SUCCESS);
        } else {
            kept++;
            bytes += size[i];
        }
    }
    printf("LIVE %zu %zu\n", kept, bytes);
    free(slot);
    free(size);
    CHECK_DONE();
}
