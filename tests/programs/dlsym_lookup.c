/* tests/programs/dlsym_lookup.c — reaches the runtime only by name, as torch_npu does.
 * Not linked with libascendcl.so: dlopen()s it, then looks every function up with dlsym on the
 * handle (torch_npu <= 26.0.1), with dlsym(RTLD_DEFAULT) (26.1.0 under LD_PRELOAD, which needs the
 * library loaded RTLD_GLOBAL); "vsym" also checks that dlvsym answers as glibc's does.
 * argv[1] = "handle" | "default" | "vsym". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "check.h"

/* glibc's first symbol version on this architecture: what malloc and free are versioned with. */
#if defined(__aarch64__)
#define GLIBC_BASE_VERSION "GLIBC_2.17"
#elif defined(__x86_64__)
#define GLIBC_BASE_VERSION "GLIBC_2.2.5"
#else
#error "add this architecture's first glibc symbol version"
#endif

typedef aclError (*malloc_fn)(void **, size_t, aclrtMemMallocPolicy);
typedef aclError (*free_fn)(void *);
typedef aclError (*setdev_fn)(int32_t);
typedef aclError (*meminfo_fn)(aclrtMemAttr, size_t *, size_t *);

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "handle";
    void *lib = dlopen("libascendcl.so",
                       RTLD_NOW | (strcmp(mode, "default") == 0 ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    void *scope = strcmp(mode, "default") == 0 ? RTLD_DEFAULT : lib;
#define LOOKUP(name) dlsym(scope, name)
    if (strcmp(mode, "vsym") == 0) {
        /* dlvsym answers exactly as glibc's: versioned libc symbols are found, an unversioned
         * runtime's names under a made-up version are not. */
        CHECK(dlvsym(RTLD_DEFAULT, "malloc", GLIBC_BASE_VERSION) != NULL);
        CHECK(dlvsym(lib, "aclrtMalloc", "NO_SUCH_VERSION") == NULL);
        CHECK(dlvsym(RTLD_NEXT, "free", GLIBC_BASE_VERSION) != NULL);
    }
    setdev_fn set_device = (setdev_fn)LOOKUP("aclrtSetDevice");
    malloc_fn m_align32 = (malloc_fn)LOOKUP("aclrtMallocAlign32");
    malloc_fn m_plain = (malloc_fn)LOOKUP("aclrtMalloc");
    free_fn f_free = (free_fn)LOOKUP("aclrtFree");
    meminfo_fn meminfo = (meminfo_fn)LOOKUP("aclrtGetMemInfo");
    CHECK(set_device && m_align32 && m_plain && f_free && meminfo);
    if (!(set_device && m_align32 && m_plain && f_free && meminfo)) CHECK_DONE();
    CHECK(dlsym(scope, "no_such_function_anywhere") == NULL);
    CHECK(dlerror() != NULL); /* and releases glibc's message buffer */

    CHECK_EQ(set_device(0), ACL_SUCCESS);
    enum { N = 400 };
    static void *ptrs[N];
    for (int i = 0; i < N; i++) {
        size_t size = 512u * (size_t)(1 + i % 97);
        CHECK_EQ((i & 1 ? m_plain : m_align32)(&ptrs[i], size, ACL_MEM_MALLOC_HUGE_FIRST),
                 ACL_SUCCESS);
        CHECK(((uintptr_t)ptrs[i] & 63) == 0);
        memset(ptrs[i], i & 0xff, size);
    }
    for (int i = 0; i < N; i++) {
        CHECK(((unsigned char *)ptrs[i])[0] == (unsigned char)(i & 0xff));
        CHECK_EQ(f_free(ptrs[i]), ACL_SUCCESS);
    }
    size_t free_b = 0, total_b = 0;
    CHECK_EQ(meminfo(ACL_HBM_MEM, &free_b, &total_b), ACL_SUCCESS);
    CHECK(free_b > 0 && free_b <= total_b);
    /* no dlclose: like torch_npu, the runtime stays loaded for the life of the process */
    CHECK_DONE();
}
