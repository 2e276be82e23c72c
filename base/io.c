/* base/io.c — see io.h. */
#define _GNU_SOURCE
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when writing len more bytes to fd would pass the process's file-size limit (RLIMIT_FSIZE,
 * `ulimit -f`): the kernel would send SIGXFSZ, whose default action ends the process. */
static int past_fsize_limit(int fd, size_t len)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0; /* the limit is for files only */
    int flags = fcntl(fd, F_GETFL);
    off_t pos = flags >= 0 && (flags & O_APPEND) ? st.st_size : lseek(fd, 0, SEEK_CUR);
    if (pos < 0) pos = st.st_size;
    return (uint64_t)pos + len > (uint64_t)rl.rlim_cur;
}

int io_write_all(int fd, const void *buf, size_t len)
{
    if (len > 0 && past_fsize_limit(fd, len)) {
        errno = EFBIG;
        return -1;
    }
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
