/* tests/programs/fork_dlopen.c — the torch_npu pattern under fork: the runtime is dlopen()ed after
 * start-up (so its fork handlers are registered after npupool's constructor ran), 4 threads
 * allocate through dlsym'd pointers (one rebuilds device 1's pool without pause), and the main
 * thread forks 30 times.  A lock-order inversion
 * between npupool's and the runtime's fork handlers would hang here (the case script's timeout). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "check.h"

typedef aclError (*malloc_fn)(void **, size_t, aclrtMemMallocPolicy);
typedef aclError (*free_fn)(void *);
typedef aclError (*setdev_fn)(int32_t);
typedef aclError (*reset_fn)(int32_t);

static malloc_fn m_align32;
static free_fn f_free;
static setdev_fn set_device;
static reset_fn reset_device;
static int stop; /* atomic */

/* Device 1 is built and torn down without pause: npupool holds its device lock across the
 * runtime's reservation and reset calls, the window a badly ordered fork handler would hit. */
static void *rebuild(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        void *p = NULL;
        set_device(1);
        if (m_align32(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS) f_free(p);
        reset_device(1);
        usleep(200); /* a few thousand rebuilds a second at most */
    }
    return NULL;
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    set_device(0);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        void *p = NULL;
        seed = seed * 1103515245u + 12345u;
        if (m_align32(&p, 512u + (seed >> 12) % 200000u, ACL_MEM_MALLOC_HUGE_FIRST) ==
            ACL_SUCCESS) {
            memset(p, 1, 512);
            f_free(p);
        }
    }
    return NULL;
}

int main(void)
{
    void *lib = dlopen("libascendcl.so", RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    if (!lib) CHECK_DONE();
    m_align32 = (malloc_fn)dlsym(lib, "aclrtMallocAlign32");
    f_free = (free_fn)dlsym(lib, "aclrtFree");
    set_device = (setdev_fn)dlsym(lib, "aclrtSetDevice");
    reset_device = (reset_fn)dlsym(lib, "aclrtResetDevice");
    CHECK(m_align32 && f_free && set_device && reset_device);
    pthread_t t[4];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    pthread_create(&t[3], NULL, rebuild, NULL);
    for (int round = 0; round < 30; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            void *p = NULL;
            int bad = set_device(0) != ACL_SUCCESS;
            bad += m_align32(&p, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS;
            if (!bad) {
                memset(p, 2, 1 << 20);
                bad += f_free(p) != ACL_SUCCESS;
            }
            _exit(bad ? 3 : 0);
        }
        int status = 0;
        CHECK_EQ(waitpid(pid, &status, 0), pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        usleep(1000);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK_DONE();
}
