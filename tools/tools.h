/* tools/tools.h — what the modules of the `npupool` command share.
 *
 * Owns: exit codes, the one message sink of the command (tool_err: "npupool: " + one line on
 * stderr), human-readable units, number parsing for options, whole-file reading, and the entry
 * point of every subcommand.  Internal names carry the `tool_` prefix; each cmd_*.c keeps the
 * rest static.  The command is single-threaded.
 */
#ifndef NPUPOOL_TOOLS_H
#define NPUPOOL_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TOOL_OK 0      /* success */
#define TOOL_FINDING 1 /* a finding a flag asked to fail on (diff --fail-on-growth, ...) */
#define TOOL_BAD 2     /* bad usage or bad input */

/* One line "npupool: ..." on stderr. */
void tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "1.5 GiB", "512 B", "12.0 KiB": binary units, one decimal from KiB up.  buf >= 16 bytes. */
#define TOOL_UNITS_LEN 24
const char *tool_bytes(char *buf, uint64_t v);
/* Signed: "+1.5 GiB" / "-512 B" / "0 B". */
const char *tool_sbytes(char *buf, int64_t v);

/* Parse "123", "4K", "1.5G", "64MiB", "0x1000" (binary suffixes K/M/G/T, optional "iB"/"B").
 * Returns 0 on success, -1 on a malformed value or overflow. */
int tool_parse_bytes(const char *s, uint64_t *out);
/* Plain non-negative decimal integer.  0 or -1. */
int tool_parse_u64(const char *s, uint64_t *out);

/* Read a whole file ("-" = stdin) into a malloc'd, NUL-terminated buffer.  Returns 0, or 2 after
 * a message naming the file. */
int tool_read_file(const char *path, char **buf, size_t *len);

/* cJSON allocates from a never-freed arena from now on (the command, not the fuzzers). */
void tool_json_arena(void);

/* Option-parsing glue: prints "npupool CMD: ..." for a bad option and returns TOOL_BAD. */
int tool_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Subcommands: argv[0] is the subcommand name.  Return the exit code. */
int cmd_summary(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_flame(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_replay(int argc, char **argv);

#endif /* NPUPOOL_TOOLS_H */
