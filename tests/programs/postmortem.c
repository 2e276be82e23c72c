/* tests/programs/postmortem.c — planted leaks, then a death of the chosen kind.
 *
 * An ordinary ACL program (knows nothing of npupool; linked without -rdynamic).  It leaks from
 * three named sites (two `static` functions, one global; three entry points), makes and frees
 * temporary allocations from a fourth, prints for each planted site
 *   SITE <function> <count> <bytes> <line> <file>
 * and then, by mode:
 *   kill      kills itself with SIGKILL (nothing of it runs after: no exit hook, no report)
 *   threads   starts 8 threads that allocate and free from churn_site (each holds at most
 *             CHURN_LIVE blocks) and kills itself with SIGKILL while they run; prints
 *             CHURN <threads> <most live per thread> first
 *   segv      writes through a null pointer
 *   hang      prints READY and waits to be killed (a hung job)
 *   exit      returns from main (the leaks stay live)
 *   clean     frees its leaks and returns (nothing live)
 *   fork      the parent plants its leaks and forks; the child leaks 2 blocks from
 *             child_leak and exits (CHILD <pid> <line>); the parent waits, then kills itself
 *   own-before, own-after   installs its own SIGSEGV handler (it prints OWN and exits 3) before
 *             the first ACL call or after it, then writes through a null pointer
 *   dlopen A B   loads library A (libpostmortem_a.so), leaks 3 blocks from its leak_in_a,
 *             unloads it, loads B, leaks 2 from leak_in_b, prints their SITE lines (and SAME 1
 *             when B was loaded where A was), then kills itself
 * tests/cases/postmortem_*.sh compare what `npupool recover` says with these lines.
 * Usage: postmortem MODE [scale]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "check.h"

#define FILE_NAME "tests/programs/postmortem.c"
#define CHURN_THREADS 8
#define CHURN_LIVE 4

static int line_small, line_cached, line_global, line_child;
static void *leaked[64];
static int nleaked;

__attribute__((noipa)) static void leak_small_static(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        line_small = __LINE__ + 1;
        CHECK_EQ(aclrtMalloc(&p, 1000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        if (nleaked < 64) leaked[nleaked++] = p;
    }
}

__attribute__((noipa)) static void leak_cached_static(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        line_cached = __LINE__ + 1;
        CHECK_EQ(aclrtMallocCached(&p, 12345, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
        if (nleaked < 64) leaked[nleaked++] = p;
    }
}

/* Global, but not exported: the program is linked without -rdynamic. */
__attribute__((noipa)) void leak_big_global(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        line_global = __LINE__ + 1;
        CHECK_EQ(aclrtMallocAlign32(&p, (size_t)1 << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        if (nleaked < 64) leaked[nleaked++] = p;
    }
}

/* Busy but balanced: everything it allocates is freed again. */
__attribute__((noipa)) static void temporary_work(int n)
{
    void *keep[16] = {0};
    for (int i = 0; i < n; i++) {
        int k = i % 16;
        if (keep[k]) CHECK_EQ(aclrtFree(keep[k]), ACL_SUCCESS);
        CHECK_EQ(aclrtMalloc(&keep[k], 4096 + (size_t)(i % 7) * 512, ACL_MEM_MALLOC_HUGE_FIRST),
                 ACL_SUCCESS);
    }
    for (int k = 0; k < 16; k++)
        if (keep[k]) CHECK_EQ(aclrtFree(keep[k]), ACL_SUCCESS);
}

__attribute__((noipa)) static void child_leak(void)
{
    for (int i = 0; i < 2; i++) {
        void *p = NULL;
        line_child = __LINE__ + 1;
        CHECK_EQ(aclrtMalloc(&p, 777, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    }
}

static int churn_started;

static void own_handler(int sig)
{
    (void)sig;
    static const char msg[] = "OWN\n";
    ssize_t w = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

__attribute__((noipa)) static void *churn_site(size_t size)
{
    void *p = NULL;
    return aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS ? p : NULL;
}

static void *churn(void *arg)
{
    unsigned id = (unsigned)(size_t)arg;
    void *live[CHURN_LIVE] = {0};
    if (aclrtSetDevice(0) != ACL_SUCCESS) return NULL;
    __atomic_add_fetch(&churn_started, 1, __ATOMIC_RELAXED);
    for (unsigned i = 0;; i++) {
        unsigned k = i % CHURN_LIVE;
        if (live[k]) aclrtFree(live[k]);
        live[k] = churn_site(512 + 64 * ((i + id) % 9));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "kill";
    int scale = argc > 2 ? atoi(argv[2]) : 1;
    if (scale < 1) scale = 1;
    if (!strcmp(mode, "own-before")) signal(SIGSEGV, own_handler);
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    if (!strcmp(mode, "own-after")) signal(SIGSEGV, own_handler);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    temporary_work(200 * scale);
    leak_small_static(3 * scale);
    temporary_work(100 * scale);
    leak_big_global(2 * scale);
    leak_cached_static(1 * scale);
    temporary_work(100 * scale);
    printf("SITE leak_small_static %d %d %d %s\n", 3 * scale, 3000 * scale, line_small, FILE_NAME);
    printf("SITE leak_big_global %d %d %d %s\n", 2 * scale, (2 << 20) * scale, line_global,
           FILE_NAME);
    printf("SITE leak_cached_static %d %d %d %s\n", 1 * scale, 12345 * scale, line_cached,
           FILE_NAME);
    if (!strcmp(mode, "threads")) {
        printf("CHURN %d %d\n", CHURN_THREADS, CHURN_LIVE);
        pthread_t t[CHURN_THREADS];
        for (int i = 0; i < CHURN_THREADS; i++)
            pthread_create(&t[i], NULL, churn, (void *)(size_t)i);
        while (__atomic_load_n(&churn_started, __ATOMIC_RELAXED) < CHURN_THREADS) usleep(1000);
        usleep(200 * 1000);
    }
    fflush(stdout);
    if (!strcmp(mode, "dlopen") && argc > 3) {
        const char *name[2] = {"leak_in_a", "leak_in_b"};
        int count[2] = {3, 2};
        void *where[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            void *h = dlopen(argv[2 + k], RTLD_NOW | RTLD_LOCAL);
            CHECK(h != NULL);
            if (!h) break;
            int (*leak)(int) = (int (*)(int))dlsym(h, name[k]);
            CHECK(leak != NULL);
            where[k] = (void *)leak;
            int line = leak ? leak(count[k]) : -1;
            printf("SITE %s %d %d %d tests/programs/postmortem_lib.c\n", name[k], count[k],
                   2048 * count[k], line);
            dlclose(h);
        }
        printf("SAME %d\n", where[0] == where[1]);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    if (!strcmp(mode, "kill") || !strcmp(mode, "threads")) kill(getpid(), SIGKILL);
    if (!strncmp(mode, "segv", 4) || !strncmp(mode, "own-", 4))
        *(volatile int *)(uintptr_t)argc = 0; /* argc is never a mapping */
    if (!strcmp(mode, "hang")) {
        printf("READY\n");
        fflush(stdout);
        for (;;) pause();
    }
    if (!strcmp(mode, "clean"))
        for (int i = 0; i < nleaked; i++) CHECK_EQ(aclrtFree(leaked[i]), ACL_SUCCESS);
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            child_leak();
            printf("CHILD %d %d\n", (int)getpid(), line_child);
            fflush(stdout);
            exit(check_failures ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    CHECK_DONE();
}
