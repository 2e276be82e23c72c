/* tests/programs/fork_threads.c — fork while 4 threads allocate and free without pause.
 * Each child allocates, writes and frees on its own (it inherits a copy of the parent's state)
 * and exits; a deadlock in the child shows up as the test's timeout, a crash as a bad status.
 * ASan builds only: the threads pause around each fork (a rwlock), because GCC 12's libasan
 * does not lock its allocator around fork(), and a child whose parent had a thread inside
 * malloc() (any malloc: npupool's, the runtime's) deadlocks at its first malloc (seen: the
 * child's pool_new).  The plain and TSan builds fork while the threads are inside npupool. */
#define _GNU_SOURCE /* PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "check.h"

static int stop; /* set once by main, read by the threads (atomic) */
#if defined(__SANITIZE_ADDRESS__)
static pthread_rwlock_t quiet = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP; /* fork waits */
#define CALLS_BEGIN() pthread_rwlock_rdlock(&quiet)
#define CALLS_END() pthread_rwlock_unlock(&quiet)
#define FORK_BEGIN() pthread_rwlock_wrlock(&quiet)
#define FORK_END() pthread_rwlock_unlock(&quiet)
#else
#define CALLS_BEGIN() ((void)0)
#define CALLS_END() ((void)0)
#define FORK_BEGIN() ((void)0)
#define FORK_END() ((void)0)
#endif
static int failures;

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    aclrtSetDevice(0);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        CALLS_BEGIN();
        void *p[16];
        for (int i = 0; i < 16; i++) {
            size_t size = 256u + (size_t)((seed = seed * 1103515245u + 12345u) >> 8) % 300000u;
            if (aclrtMalloc(&p[i], size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
                p[i] = NULL;
                continue;
            }
            memset(p[i], 0x5a, 64);
        }
        for (int i = 0; i < 16; i++)
            if (p[i]) aclrtFree(p[i]);
        CALLS_END();
    }
    return NULL;
}

int main(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    for (int round = 0; round < 40; round++) {
        FORK_BEGIN();
        pid_t pid = fork();
        if (pid != 0) FORK_END();
        if (pid == 0) {
            int bad = 0;
            if (aclrtSetDevice(0) != ACL_SUCCESS) bad++;
            for (int i = 0; i < 50; i++) {
                void *p = NULL;
                if (aclrtMalloc(&p, 4096u * (unsigned)(i + 1), ACL_MEM_MALLOC_HUGE_FIRST) !=
                    ACL_SUCCESS) {
                    bad++;
                    continue;
                }
                memset(p, i, 4096u * (unsigned)(i + 1));
                if (((unsigned char *)p)[4095] != (unsigned char)i) bad++;
                if (aclrtFree(p) != ACL_SUCCESS) bad++;
            }
            _exit(bad ? 3 : 0);
        }
        CHECK(pid > 0);
        int status = 0;
        CHECK_EQ(waitpid(pid, &status, 0), pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK_EQ(failures, 0);
    CHECK_DONE();
}
