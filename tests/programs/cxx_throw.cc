// tests/programs/cxx_throw.cc — C++ exceptions in front of the shim.
//
// Allocates device memory (so the shim captures stacks) inside functions that throw, catches,
// and frees.  Under LD_PRELOAD=libnpupool.so the exceptions must still be unwound by libgcc_s
// (tests/cases/ledger_unwind_binding.sh checks LD_DEBUG=bindings): npupool's libunwind must not
// interpose its _Unwind_* on the program.  Exits 0 when every exception was caught.
#include <cstdio>
#include <stdexcept>

#include "acl/acl.h"

__attribute__((noipa)) static int deep(int n, void **p)
{
    if (n == 0) {
        if (aclrtMalloc(p, 1024, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return -1;
        throw std::runtime_error("thrown with a device block held");
    }
    return deep(n - 1, p) + 1;
}

int main()
{
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 2;
    int caught = 0;
    for (int i = 0; i < 1000; i++) {
        void *p = nullptr;
        try {
            deep(8, &p);
        } catch (const std::runtime_error &) {
            caught++;
        }
        if (p && aclrtFree(p) != ACL_SUCCESS) return 3;
    }
    std::printf("caught %d of 1000\n", caught);
    return caught == 1000 ? 0 : 1;
}
