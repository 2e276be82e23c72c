/* base/path.h — file-name patterns of reports, traces and ledger files.
 *
 * Owns: the one expansion of %p (process id), %n (sequence number given by the caller), %t (UTC
 * time YYYYmmddTHHMMSSZ), %r (rank: rank.h, "0" when unknown) and %% (a percent sign); any other
 * "%x" is kept as written.  Async-signal-safe (no stdio, no locale, no malloc): fork children and
 * fatal-signal handlers use it.
 */
#ifndef NPUPOOL_BASE_PATH_H
#define NPUPOOL_BASE_PATH_H

#include <stddef.h>
#include <stdint.h>

/* Expand `pattern` into out.  Returns 0, or -1 when the result (with its terminator) does not
 * fit in len or is empty. */
int path_expand(const char *pattern, uint64_t seq, char *out, size_t len);

#endif
