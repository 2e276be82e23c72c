/* tests/programs/dlopen_stress.c — allocating threads while another thread dlopen()s and
 * dlclose()s a library whose constructor and destructor allocate device memory.
 *
 * Usage: dlopen_stress LIBRARY ROUNDS
 * The known deadlock: a thread that unwinds while holding a lock, and a thread inside dlopen
 * (holding the loader lock) that needs that lock.  npupool captures stacks before any lock, so
 * this finishes; a watchdog turns a hang into exit code 99.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "acl/acl.h"
#include "check.h"

static _Atomic int stop; /* set by main, read by the workers */

__attribute__((noipa)) static void *allocate_forever(void *arg)
{
    long *errors = arg;
    if (aclrtSetDevice(0) != ACL_SUCCESS) (*errors)++;
    while (!stop) {
        void *p = NULL;
        if (aclrtMalloc(&p, 1024, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
            aclrtFree(p) != ACL_SUCCESS)
            (*errors)++;
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "dlopen_stress: deadlock (watchdog)\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(99);
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    int rounds = atoi(argv[2]);
    signal(SIGALRM, on_alarm);
    alarm(120);
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    enum { T = 4 };
    pthread_t th[T];
    long errors[T] = {0};
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, allocate_forever, &errors[i]);
    for (int r = 0; r < rounds; r++) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL);
        if (!h) break;
        int (*work)(void) = (int (*)(void))dlsym(h, "ledger_ctor_work");
        CHECK(work != NULL);
        if (work) work();
        dlclose(h);
    }
    stop = 1;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(errors[i], 0);
    }
    alarm(0);
    printf("%d dlopen/dlclose rounds while 4 threads allocated\n", rounds);
    CHECK_DONE();
}
