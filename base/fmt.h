/* base/fmt.h — numbers as text: byte counts for people, integers without stdio.
 *
 * Owns: the one rounding rule for byte counts ("512 B", "1.5 KiB", "51.2 GiB": binary units, one
 * decimal from KiB up, never "1024.0 KiB") and the async-signal-safe integer formatters that the
 * trace recorder, path templates and crash lines use (no locale, no malloc, no stdio).
 */
#ifndef NPUPOOL_BASE_FMT_H
#define NPUPOOL_BASE_FMT_H

#include <stddef.h>
#include <stdint.h>

#define FMT_BYTES_LEN 24 /* enough for any fmt_bytes / fmt_sbytes text */

/* "1.5 GiB" into buf (FMT_BYTES_LEN bytes); returns buf. */
const char *fmt_bytes(char *buf, uint64_t bytes);
/* Signed: "+1.5 GiB", "-512 B", "0 B". */
const char *fmt_sbytes(char *buf, int64_t bytes);

/* Decimal digits of v at p (no terminator); returns their number (<= 20).  AS-safe. */
size_t fmt_u64(char *p, uint64_t v);
/* "0x" and lowercase hex digits of v at p (no terminator); returns their number (<= 18).  AS-safe. */
size_t fmt_hex(char *p, uint64_t v);

#endif
