/* tests/programs/dlopen_abs.c — a program that loads the runtime privately by absolute path
 * (dlopen RTLD_LOCAL, as Python's ctypes.CDLL/PyDLL and torch_npu do), finds its functions with
 * dlsym, and allocates: no LD_LIBRARY_PATH, the runtime is in no global scope.
 *
 * Usage: dlopen_abs /abs/path/to/libascendcl.so [N]   (N alloc/free pairs, default 100)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    int n = argc > 2 ? atoi(argv[2]) : 100;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 3;
    }
    aclError (*init)(const char *) = (aclError(*)(const char *))dlsym(h, "aclInit");
    aclError (*set)(int32_t) = (aclError(*)(int32_t))dlsym(h, "aclrtSetDevice");
    aclError (*mal)(void **, size_t, aclrtMemMallocPolicy) =
        (aclError(*)(void **, size_t, aclrtMemMallocPolicy))dlsym(h, "aclrtMalloc");
    aclError (*fre)(void *) = (aclError(*)(void *))dlsym(h, "aclrtFree");
    aclError (*fin)(void) = (aclError(*)(void))dlsym(h, "aclFinalize");
    if (!init || !set || !mal || !fre || !fin) return 4;
    if (init(NULL) != ACL_SUCCESS || set(0) != ACL_SUCCESS) return 5;
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        if (mal(&p, 4096 + (size_t)i * 64, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return 6;
        if (fre(p) != ACL_SUCCESS) return 7;
    }
    if (fin() != ACL_SUCCESS) return 8;
    printf("%d pairs through %s\n", n, argv[1]);
    return 0;
}
