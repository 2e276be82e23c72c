/* base/barrier.c — the membarrier calls (see barrier.h for the contract). */
#include "barrier.h"

#include <sys/syscall.h>
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
