/* tests/programs/postmortem_lib.c — a library that leaks device memory from a named function,
 * built twice (-DLIB=a: libpostmortem_a.so with leak_in_a; -DLIB=b -DPAD: libpostmortem_b.so with
 * leak_in_b, whose call sits at another offset) for `postmortem dlopen`: the program loads one
 * after npupool started, leaks from it, unloads it, loads the other (usually at the same address)
 * and leaks again, so the ledger file's module map must tell the two apart by the stacks made
 * after each was loaded.  (Two libraries whose allocating calls sit at the very same addresses
 * would share their stacks: a stack is its return addresses, in memory as in the file.)
 */
#include <stddef.h>

#include "acl/acl.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

/* Leaks n blocks of 2048 bytes; returns the line of the allocating call. */
__attribute__((noipa)) int CAT(leak_in_, LIB)(int n)
{
    int line = 0;
#ifdef PAD
    static volatile int sink; /* b's allocating call sits elsewhere than a's */
    for (int k = 0; k < n * 3; k++) sink += k * k + sink / 3;
#endif
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        line = __LINE__ + 1;
        if (aclrtMalloc(&p, 2048, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return -1;
    }
    return line;
}
