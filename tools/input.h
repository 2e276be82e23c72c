/* tools/input.h — reading the command's inputs (reports, traces, RMM logs; "-" = stdin) with a
 * bound.
 *
 * Owns: the one loop that reads an input, and its limit.  No input may be larger than
 * input_max() bytes (NPUPOOL_INPUT_MAX, a size such as "4G"; 1 GiB by default): a regular file
 * is refused from its size before a byte is read, anything else (a pipe, a device, stdin) as soon
 * as it passes the limit.  A regular file is mapped and handed over in one piece; anything else
 * is read and handed over in pieces of INPUT_PIECE bytes as they arrive, so a consumer that
 * checks its format piece by piece (report_read.c, trace_read.c) stops /dev/zero or
 * /dev/urandom after the first piece.  Every failure prints one message naming the file.
 */
#ifndef NPUPOOL_TOOLS_INPUT_H
#define NPUPOOL_TOOLS_INPUT_H

#include <stddef.h>
#include <stdint.h>

#define INPUT_MAX_ENV "NPUPOOL_INPUT_MAX"     /* environment variable that sets the limit */
#define INPUT_MAX_DEFAULT ((uint64_t)1 << 30) /* bytes: the limit when it is not set */
#define INPUT_PIECE ((size_t)64 << 10)        /* bytes read at a time from a non-regular file */

/* The limit in bytes: NPUPOOL_INPUT_MAX, read once; a bad value costs one warning and keeps the
 * default. */
uint64_t input_max(void);

/* Receives the input in order.  Returns 0 to go on, anything else to stop the read (it is then
 * what input_stream returns). */
typedef int (*input_take_fn)(void *ctx, const char *data, size_t n);

/* Hand all of `path` to `take`.  Returns 0 (all of it was taken), TOOLS_BAD after a message
 * (cannot open or read, over the limit), or what `take` returned to stop. */
int input_stream(const char *path, input_take_fn take, void *ctx);

/* Looks at the input read so far, buf[0..len), piece by piece.  Returns 0 to go on, anything
 * else to stop (after printing its own message). */
typedef int (*input_check_fn)(void *ctx, const char *buf, size_t len);

/* Read all of `path` into a malloc'd, NUL-terminated buffer (*buf, *len), calling `check`
 * (may be NULL) after each piece.  Returns 0, TOOLS_BAD after a message, or what `check`
 * returned to stop; on failure *buf is NULL. */
int input_load(const char *path, input_check_fn check, void *ctx, char **buf, size_t *len);

#endif /* NPUPOOL_TOOLS_INPUT_H */
