/* tests/programs/dlsym_lookup.c — reaches the runtime only by name, as torch_npu does.
 * Not linked with libascendcl.so: dlopen()s it, then looks every function up with dlsym on the
 * handle (torch_npu <= 26.0.1), with dlsym(RTLD_DEFAULT) (26.1.0 under LD_PRELOAD, which needs the
 * library loaded RTLD_GLOBAL); "vsym" also checks that dlvsym answers as glibc's does.
 * The device and context calls are looked up by name too, and the blocks allocated after each
 * switch must lie on the device it names (the fake's fakeacl_owner): a switch that bypassed an
 * interposer's hook would leave it allocating on the previous device.
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
typedef aclError (*ctx_create_fn)(aclrtContext *, int32_t);
typedef aclError (*ctx_fn)(aclrtContext);
typedef aclError (*ctx_get_fn)(aclrtContext *);
typedef int (*owner_fn)(const void *, size_t);

/* One block through `m`, on the device `want`, freed again. */
static void alloc_check(malloc_fn m, free_fn f, owner_fn owner, int want)
{
    void *p = NULL;
    CHECK_EQ(m(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK_EQ(owner(p, 4096), want);
    CHECK_EQ(f(p), ACL_SUCCESS);
}

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

    ctx_create_fn ctx_create = (ctx_create_fn)LOOKUP("aclrtCreateContext");
    ctx_fn ctx_set = (ctx_fn)LOOKUP("aclrtSetCurrentContext");
    ctx_fn ctx_destroy = (ctx_fn)LOOKUP("aclrtDestroyContext");
    ctx_get_fn ctx_get = (ctx_get_fn)LOOKUP("aclrtGetCurrentContext");
    owner_fn owner = (owner_fn)LOOKUP("fakeacl_owner");
    CHECK(ctx_create && ctx_set && ctx_destroy && ctx_get && owner);
    if (!(ctx_create && ctx_set && ctx_destroy && ctx_get && owner)) CHECK_DONE();
    aclrtContext def0 = NULL, c1 = NULL;
    CHECK_EQ(ctx_get(&def0), ACL_SUCCESS);
    CHECK_EQ(ctx_create(&c1, 1), ACL_SUCCESS); /* binds c1: device 1 */
    alloc_check(m_align32, f_free, owner, 1);
    CHECK_EQ(ctx_set(def0), ACL_SUCCESS);
    alloc_check(m_align32, f_free, owner, 0);
    CHECK_EQ(ctx_set(c1), ACL_SUCCESS);
    alloc_check(m_plain, f_free, owner, 1);
    CHECK_EQ(ctx_destroy(c1), ACL_SUCCESS); /* the thread has no context now */
    void *none = NULL;
    CHECK_EQ(m_align32(&none, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(set_device(1), ACL_SUCCESS);
    alloc_check(m_align32, f_free, owner, 1);
    CHECK_EQ(set_device(0), ACL_SUCCESS);
    alloc_check(m_align32, f_free, owner, 0);
    /* no dlclose: like torch_npu, the runtime stays loaded for the life of the process */
    CHECK_DONE();
}
