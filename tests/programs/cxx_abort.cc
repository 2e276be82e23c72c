// tests/programs/cxx_abort.cc — an uncaught C++ exception with device memory held.
//
// An ordinary ACL program: leaks from one named function (its demangled name, count and bytes
// are printed as "SITE <function> <count> <bytes> <line> <file>"), then throws an exception
// nobody catches, so std::terminate calls abort() and the process dies of SIGABRT.  tests/cases/postmortem_crash.sh
// checks that the exit status is the same with npupool in front, that npupool's line names the
// ledger file, and that `npupool recover` finds the leak.
#include <cstdio>
#include <stdexcept>

#include "acl/acl.h"

static int leak_line;

__attribute__((noipa)) static void hold_weights(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = nullptr;
        leak_line = __LINE__ + 1;
        if (aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return;
    }
}

__attribute__((noipa)) static void step() { throw std::runtime_error("no one catches this"); }

int main()
{
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 2;
    hold_weights(5);
    std::printf("SITE hold_weights(int) 5 20480 %d tests/programs/cxx_abort.cc\n", leak_line);
    std::fflush(stdout);
    step();
    return 0;
}
