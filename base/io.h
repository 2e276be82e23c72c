/* base/io.h — writing whole buffers to a descriptor.
 *
 * Owns: io_write_all, the one loop around write(2) (EINTR retried, short writes continued).
 * Async-signal-safe.  Returns 0, or -1 with errno set (EIO for a write that made no progress).
 */
#ifndef NPUPOOL_BASE_IO_H
#define NPUPOOL_BASE_IO_H

#include <stddef.h>

int io_write_all(int fd, const void *buf, size_t len);

#endif
