/* tools/tools.h — what the modules of the `npupool` command share.
 *
 * Owns: the exit codes, the command's message line (tools_err: one "npupool: ..." line through
 * base/log.h, after flushing standard output so the two streams stay in order), the cJSON
 * arena of the command and the one way a command writes a document out (tools_write_text).  The command is single-threaded.
 */
#ifndef NPUPOOL_TOOLS_H
#define NPUPOOL_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#define TOOLS_OK 0      /* success */
#define TOOLS_FINDING 1 /* a finding a flag asked to fail on (diff --fail-on-growth, ...) */
#define TOOLS_BAD 2     /* bad usage or bad input */

/* One line "npupool: ..." on stderr. */
void tools_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* a + b, or UINT64_MAX when that does not fit (totals of exact byte counts up to 2^64 - 1). */
static inline uint64_t tools_add_sat(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* cJSON allocates from a never-freed arena from now on (the command, not the fuzzers). */
void tools_json_arena(void);

/* Write text (a newline is added) to standard output when `out` is NULL or "-", in place when
 * `out` exists and is not a regular file (/dev/null, a FIFO), else to the file `out` atomically (a
 * temporary file in its directory, then rename).  TOOLS_OK, or TOOLS_BAD after one message. */
int tools_write_text(const char *out, const char *text, size_t len);

#endif /* NPUPOOL_TOOLS_H */
