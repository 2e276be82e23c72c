/* tools/pickle.h — writing Python pickle data (protocol 2) from C, as a stream.
 *
 * Owns: the subset of the pickle format that plain data needs: dict, list, str, int (any 64-bit
 * value, signed or not), bool, None and float, written in the order the caller gives them.  A
 * value written twice is two objects, except the strings written with pickle_str_memo (dict
 * keys, a few fixed words): the first is stored in the reader's memo (BINPUT) and the others
 * refer to it (BINGET), which makes a snapshot of a million entries less than half as large.
 * Python's pickle.load reads the result; PyTorch's memory_viz reads its snapshots in this
 * format (export_viz.c), and its own unpickler (MemoryViz.js) knows these opcodes.
 * Encoding: PROTO 2; EMPTY_DICT / EMPTY_LIST, then MARK, the items and SETITEMS / APPENDS, in
 * batches of PICKLE_BATCH items (as Python's own pickler does, so the reader's stack stays
 * small); BININT1 / BININT2 / BININT / LONG1 by size; BINUNICODE (a string that is not valid
 * UTF-8 has each bad byte replaced by '?', so the reader never refuses it); NEWTRUE /
 * NEWFALSE; NONE; BINFLOAT (big-endian IEEE double); BINPUT / BINGET (one-byte memo index);
 * STOP.
 * Invariants: containers nest at most PICKLE_DEPTH deep; every begin has its end (pickle_end
 * checks); inside a dict, items alternate key, value.  Errors (a write error, bad nesting) are
 * sticky and pickle_end returns them.  No allocation.
 */
#ifndef NPUPOOL_TOOLS_PICKLE_H
#define NPUPOOL_TOOLS_PICKLE_H

#include <stdint.h>
#include <stdio.h>

#define PICKLE_DEPTH 16   /* containers open at once */
#define PICKLE_BATCH 1000 /* items per SETITEMS / APPENDS */
#define PICKLE_MEMO 64    /* strings pickle_str_memo keeps (memo indexes 0..63) */

typedef struct pickle {
    FILE *f;                       /* where the bytes go */
    int depth;                     /* containers open */
    char kind[PICKLE_DEPTH];       /* 'd' dict, 'l' list, per open container */
    uint32_t items[PICKLE_DEPTH];  /* items since the container's last MARK */
    int err;                       /* 0, or the first error (-1) */
    const char *memo[PICKLE_MEMO]; /* strings in the reader's memo, by index (caller's storage) */
    int nmemo;                     /* entries in memo */
} pickle_t;

/* Start a pickle on f (writes PROTO 2). */
void pickle_begin(pickle_t *p, FILE *f);
/* End it (STOP).  Returns 0, or -1 after a write error or unbalanced containers. */
int pickle_end(pickle_t *p);

void pickle_dict_begin(pickle_t *p);
void pickle_dict_end(pickle_t *p);
void pickle_list_begin(pickle_t *p);
void pickle_list_end(pickle_t *p);

void pickle_str(pickle_t *p, const char *s); /* NULL is written as None */
/* A string written often (a key, a fixed word): kept in the reader's memo on first use and
 * referred to afterwards.  `s` must stay valid until pickle_end; NULL is written as None. */
void pickle_str_memo(pickle_t *p, const char *s);
void pickle_int(pickle_t *p, int64_t v);
void pickle_uint(pickle_t *p, uint64_t v);
void pickle_bool(pickle_t *p, int v);
void pickle_none(pickle_t *p);
void pickle_float(pickle_t *p, double v);

/* A dict item: pickle_str_memo(key) then the value. */
void pickle_key_str(pickle_t *p, const char *key, const char *value);
void pickle_key_int(pickle_t *p, const char *key, int64_t value);
void pickle_key_uint(pickle_t *p, const char *key, uint64_t value);

#endif /* NPUPOOL_TOOLS_PICKLE_H */
