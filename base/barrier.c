/* base/barrier.c — the membarrier and futex calls (see barrier.h for the contract). */
#define _GNU_SOURCE
#include "barrier.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#define HAVE_MEMBARRIER 1
#endif
#endif

#if defined(HAVE_MEMBARRIER) && defined(SYS_membarrier)
static int membarrier_call(int cmd) { return (int)syscall(SYS_membarrier, cmd, 0, 0); }

int barrier_register(void)
{
    int cmds = membarrier_call(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
        !(cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
        return 0;
    return membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

int barrier_all(void) { return membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 ? 0 : -1; }
#else
int barrier_register(void) { return 0; }
int barrier_all(void) { return -1; }
#endif

void futex_wait(void *word, uint32_t value, uint64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns != UINT64_MAX) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
        ts.tv_nsec = (long)(timeout_ns % 1000000000u);
        tp = &ts;
    }
    int e = errno;
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, tp, NULL, 0);
    errno = e;
}

void futex_wake(void *word, int n)
{
    int e = errno;
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = e;
}
