/* base/suppress.h — suppression patterns: which call stacks a leak listing leaves out.
 *
 * Owns: the format of a suppressions file (NPUPOOL_SUPPRESS, `npupool leaks --suppress FILE`,
 * docs/tools.md), its parser, the glob matcher and the rule "a stack is suppressed when any of
 * its frames matches a pattern" (suppress_match is asked frame by frame; the caller walks the
 * stack).  The format, one pattern a line:
 *
 *     # a comment: '#' as the first character of the line after blanks
 *     load_weights              a function or a module (path or basename)
 *     function:*KVCache*       only the frame's function name
 *     module:libhccl.so        only the frame's module: its full path or its basename
 *
 * Blank lines are ignored, blanks around a pattern are trimmed, a '\r' before '\n' is dropped.
 * A pattern is a glob matched against the whole name: '*' any run of bytes ('/' included), '?'
 * one byte, '[abc]', '[a-z]', '[!a]' or '[^a]' one byte of (not of) a set, '\x' the byte x.
 * Matching is byte-wise and case-sensitive (no locale).
 *
 * Bounds (the preload uses this too, so nothing here allocates): a list holds at most
 * SUPPRESS_MAX_RULES patterns in fixed storage; a line is at most SUPPRESS_LINE_MAX bytes; a
 * file at most SUPPRESS_FILE_MAX.  A NUL or control byte (other than tab and '\r'), an unknown
 * glob construct (an unclosed '[', a '\' at the end), an empty pattern, a pattern longer than
 * SUPPRESS_PATTERN_MAX, or more patterns than the list holds is an error: the list keeps the
 * patterns before it, and `err` says "NAME:LINE: ..." naming the line.
 * Time: suppress_glob is O(len(pattern) * len(name)) at worst, without recursion.
 */
#ifndef NPUPOOL_BASE_SUPPRESS_H
#define NPUPOOL_BASE_SUPPRESS_H

#include <stddef.h>
#include <stdint.h>

#define SUPPRESS_MAX_RULES 256              /* patterns in one list */
#define SUPPRESS_PATTERN_MAX 255            /* bytes of one pattern, without its prefix */
#define SUPPRESS_LINE_MAX 1024              /* bytes of one line, without its '\n' */
#define SUPPRESS_FILE_MAX ((size_t)1 << 20) /* bytes of one file */
#define SUPPRESS_ERR_MAX 320                /* bytes of the error message */

enum suppress_kind {
    SUPPRESS_ANY = 0,      /* no prefix: the function or the module */
    SUPPRESS_FUNCTION = 1, /* "function:": the function name only */
    SUPPRESS_MODULE = 2,   /* "module:": the module path or its basename only */
};

typedef struct suppress_rule {
    char pattern[SUPPRESS_PATTERN_MAX + 1]; /* the glob, NUL-terminated, prefix removed */
    uint8_t kind;                           /* enum suppress_kind */
    uint32_t line;                          /* line in its source (1-based; 0 = not a file) */
    const char *source;                     /* name of its source (a file name, "--ignore"):
                                               the caller's string, kept as given */
} suppress_rule_t;

typedef struct suppress_list {
    suppress_rule_t rule[SUPPRESS_MAX_RULES]; /* in the order read */
    int n;                                    /* rules in use */
    char err[SUPPRESS_ERR_MAX];               /* the first error, "" while there is none */
} suppress_list_t;

/* An empty list. */
void suppress_init(suppress_list_t *l);

/* One line (without its '\n'; `len` bytes, no NUL needed): a pattern, a comment or blank.
 * `source` and `line` name it in messages and in the rule (`source` must outlive the list).
 * Returns 0, or -1 with l->err set. */
int suppress_add(suppress_list_t *l, const char *text, size_t len, const char *source,
                 uint32_t line);

/* A whole file's text, line by line.  Returns 0, or -1 with l->err set (the first bad line). */
int suppress_parse(suppress_list_t *l, const char *text, size_t len, const char *source);

/* Read and parse the file at `path` with read(2) and a fixed buffer (no allocation).  Returns 0,
 * or -1 with l->err set (cannot open or read, larger than SUPPRESS_FILE_MAX, a bad line). */
int suppress_load(suppress_list_t *l, const char *path);

/* The index of the first rule that matches a frame with this function name and module path
 * (either may be NULL: unknown), or -1. */
int suppress_match(const suppress_list_t *l, const char *function, const char *module);

/* 1 when `pattern` (the glob syntax above) matches all of `name`, else 0.  Any byte string is
 * safe as either argument; a malformed construct is taken literally. */
int suppress_glob(const char *pattern, const char *name);

#endif /* NPUPOOL_BASE_SUPPRESS_H */
