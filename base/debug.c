/* base/debug.c — the failure path of debug.h's assertions. */
#include "debug.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "io.h"
#include "log.h"

void debug_assert_fail(const char *expr, const char *file, int line, const char *func)
{
    char buf[512], head[LOG_HEAD_MAX];
    log_head(head, sizeof head);
    int n = snprintf(buf, sizeof buf, "%sassertion failed: %s (%s:%d, %s)\n", head, expr, file,
                     line, func);
    if (n > 0)
        (void)io_write_all(STDERR_FILENO, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf);
    abort();
}
