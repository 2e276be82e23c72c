/* base/parse.h — reading values people type: sizes, numbers, booleans, signals.
 *
 * Owns: the one parser of each kind, used by the preload's options and by the command's flags.
 * Every parser reads the whole string (trailing garbage is an error), writes *out only on success
 * and returns 0, or -1 for a malformed or out-of-range value.  No parser accepts nan or inf.
 *   parse_bytes   "123", "4K", "1.5G", "64MiB", "2gb", "0x1000": binary K/M/G/T suffixes with an
 *                 optional "i"/"iB"/"B"; a fraction only where the result is a whole number of
 *                 bytes after the suffix; nothing at or above 2^64.
 *   parse_u64     a plain decimal integer.
 *   parse_double  a finite decimal number.
 *   parse_bool    1/0, true/false, on/off, yes/no (any case).
 *   parse_signal  a signal by number or name ("USR2", "SIGUSR2", "12"); "0", "off", "none" = 0
 *                 (none).  Returns -2 for a signal npupool must never take: the fault signals
 *                 (SEGV BUS FPE ILL ABRT TRAP SYS, whose handlers belong to the program, the
 *                 sanitizers and crash reporters) and KILL/STOP (cannot be caught).
 *   parse_closest the candidate nearest to a misspelt word (edit distance), or NULL when none is
 *                 close (at most a third of the word's length, at least 2, edits away).
 */
#ifndef NPUPOOL_BASE_PARSE_H
#define NPUPOOL_BASE_PARSE_H

#include <stddef.h>
#include <stdint.h>

int parse_bytes(const char *s, uint64_t *out);
int parse_u64(const char *s, uint64_t *out);
int parse_double(const char *s, double *out);
int parse_bool(const char *s, int *out);
int parse_signal(const char *s, int *out);
/* Name of a signal number ("SIGUSR2"), or NULL when it has none in parse_signal's table. */
const char *parse_signal_name(int sig);
const char *parse_closest(const char *word, const char *const *candidates, size_t n);

#endif
