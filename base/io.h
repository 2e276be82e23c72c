/* base/io.h — writing whole buffers to a descriptor.
 *
 * Owns: io_write_all, the one loop around write(2) (EINTR retried, short writes continued).
 * Async-signal-safe.  Returns 0, or -1 with errno set (EIO for a write that made no progress).
 * A write that would pass the process's file-size limit (`ulimit -f`, RLIMIT_FSIZE) into a
 * regular file is not started: -1 with EFBIG, nothing written.  (Past the limit the kernel sends
 * SIGXFSZ, whose default action ends the process: npupool's reports, trace and log lines must
 * never end the host.)
 */
#ifndef NPUPOOL_BASE_IO_H
#define NPUPOOL_BASE_IO_H

#include <stddef.h>

int io_write_all(int fd, const void *buf, size_t len);

#endif
