/* tests/programs/check.h — the CHECK helper of the integration test programs.
 *
 * The programs in this folder are ordinary ACL applications: they include only <acl/acl.h>, link
 * the runtime (or dlopen it) and know nothing of npupool.  Each one must pass both with and without
 * LD_PRELOAD=libnpupool.so; the case scripts run them both ways and compare what reached the
 * runtime.  CHECK prints the failing expression with its location and counts the failure; a
 * program exits 1 if any check failed.  check_rand is the programs' one random-number generator
 * (xorshift64): a program's sequence depends only on its seed, so every run asks the same.
 */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                        \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b)                                                                            \
    do {                                                                                          \
        long long a_ = (long long)(a), b_ = (long long)(b);                                       \
        if (a_ != b_) {                                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, \
                    #a, #b, a_, b_);                                                              \
            check_failures++;                                                                     \
        }                                                                                         \
    } while (0)

/* The next number of the xorshift64 sequence whose state is *state (never 0). */
static inline uint64_t check_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

#define CHECK_DONE()                                                                 \
    do {                                                                             \
        if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures); \
        return check_failures ? 1 : 0;                                               \
    } while (0)

#endif
