/* report/report_file.c — writing one report file so that a reader never sees half of it.
 *
 * Owns: report_file_write.  A regular file (or a path that does not exist yet) is written to a
 * temporary file in the same directory ("<path>.tmp.<pid>.<seq>", created O_EXCL) and renamed
 * into place; the temporary file is removed on any failure.  A path that exists and is not a
 * regular file (/dev/stdout, /dev/full, a FIFO) is written in place, never replaced.
 * Locking: none (the caller, report.c, serialises reports).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "report_internal.h"

static int write_fd(int fd, const char *data, size_t len, const char **what)
{
    *what = "write";
    int r = io_write_all(fd, data, len);
    int e = errno;
    if (r == 0) {
        *what = "close";
        return close(fd);
    }
    close(fd);
    errno = e;
    return -1;
}

REPORT_HIDDEN int report_file_write(const char *path, const char *data, size_t len, uint64_t seq,
                                    const char **what)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        *what = "open";
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_APPEND);
        return fd < 0 ? -1 : write_fd(fd, data, len, what);
    }
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d.%llu", path, (int)getpid(),
                         (unsigned long long)seq) >= sizeof tmp) {
        *what = "name";
        errno = ENAMETOOLONG;
        return -1;
    }
    *what = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    int r = write_fd(fd, data, len, what);
    if (r == 0) {
        *what = "rename";
        r = rename(tmp, path);
    }
    if (r != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
    }
    return r;
}
