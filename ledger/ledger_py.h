/* ledger/ledger_py.h — Python frames in captured stacks: what a report needs to name them.
 *
 * Owns: the value space of Python frames inside an interned stack, the Python frame table
 * (interned: file, function, line -> id) with its own string table, and the word that says
 * which Python frames a capture could see.  The capture side (finding an interpreter, reading
 * the allocating thread's frames, merging them into the native stack) is ledger_py.c's, reached
 * only through ledger_stack_capture().
 *
 * A stack is an array of uintptr_t, innermost first.  Besides return addresses it may hold (the
 * value space is base/ledger_format.h's LFMT_PY_*, shared with the ledger file and its reader):
 *   - a Python frame: LEDGER_PY_TAG | id (id >= 1, in the low 32 bits), where the interpreter's
 *     evaluation frames were (the way `py-spy --native` and memray show mixed stacks);
 *   - as its last (outermost) element, one mark: LEDGER_PY_TAG | LEDGER_PY_MARK | seen, present
 *     in every stack captured while an interpreter is in the process (none otherwise).
 * Neither is ever a user-space address on x86-64 or aarch64 (the top bit is set), so the stack
 * table's hashing keeps distinct Python call sites apart and interns identical ones once.
 *
 * Lifetime and locking: ids are never reused and their strings never freed; readers
 * (ledger_py_frame, ledger_py_stack_seen) take no lock, like ledger_stack_frames.  The tables
 * are separate from the stack table and reached only through these functions, so that they can
 * be stored elsewhere (a file-backed mapping) without touching their users.  With a ledger file,
 * every frame interned is also appended to it (ledger_file.h), so `npupool recover` names the
 * Python frames of a dead process's stacks.
 */
#ifndef NPUPOOL_LEDGER_PY_H
#define NPUPOOL_LEDGER_PY_H

#include <stddef.h>
#include <stdint.h>

#include "ledger_format.h"

/* The value space is the ledger file's (base/ledger_format.h: LFMT_PY_*), which stores stacks as
 * they are in memory; these names are the ledger's. */
#define LEDGER_PY_TAG ((uintptr_t)LFMT_PY_TAG)   /* a Python value, not a return address */
#define LEDGER_PY_MARK ((uintptr_t)LFMT_PY_MARK) /* with the tag: the mark of a stack */

/* X(ENUM, "word", meaning): which Python frames a capture could see (the report's
 * "python_frames"; the order is the file's). */
#define LEDGER_PY_SEEN(X) LFMT_PY_SEEN(X)

enum ledger_py_seen {
    LEDGER_PY_SEEN_NONE = 0, /* no mark: no interpreter in the process, or Python frames off */
#define LEDGER_PY_SEEN_ENUM(e, word, meaning) LEDGER_PY_##e,
    LEDGER_PY_SEEN(LEDGER_PY_SEEN_ENUM)
#undef LEDGER_PY_SEEN_ENUM
        LEDGER_PY_SEEN_COUNT
};
_Static_assert((int)LEDGER_PY_SEEN_COUNT == (int)LFMT_PY_SEEN_COUNT, "one list");

static inline int ledger_py_is_frame(uintptr_t v) { return lfmt_py_is_frame(v); }
static inline int ledger_py_is_mark(uintptr_t v) { return lfmt_py_is_mark(v); }

/* One interned Python frame. */
typedef struct ledger_py_frame {
    const char *file;     /* co_filename as UTF-8 (a code point that is not one: U+FFFD) */
    const char *function; /* co_qualname (3.11+) or co_name, UTF-8 */
    uint32_t line;        /* line being executed, 0 = unknown (an instruction without a line) */
} ledger_py_frame_t;

/* The frame a stack value names: 1 and *out filled when v is an interned Python frame, else 0.
 * The strings live for the process lifetime. */
int ledger_py_frame(uintptr_t v, ledger_py_frame_t *out);
/* The mark of a stack (its last frame): what its capture could see; LEDGER_PY_SEEN_NONE when the
 * stack has no mark. */
enum ledger_py_seen ledger_py_stack_seen(const uintptr_t *frames, int depth);
/* "gil_held", "not_visible", ...; NULL for LEDGER_PY_SEEN_NONE or an unknown value. */
const char *ledger_py_seen_name(enum ledger_py_seen s);

/* What the ledger knows of the process's interpreter. */
typedef struct ledger_py_status {
    int found;               /* 1 when an interpreter was found in the process */
    int supported;           /* 1 when npupool reads its frames */
    char version[32];        /* its version ("3.11.2"), "" when not found */
    size_t frames;           /* Python frames interned */
    size_t strings;          /* distinct file and function names interned */
    size_t bytes;            /* host memory of the Python tables, bytes */
    uint64_t frames_dropped; /* Python frames left out: a table was full or memory ran out */
} ledger_py_status_t;
void ledger_py_status(ledger_py_status_t *out);

#endif /* NPUPOOL_LEDGER_PY_H */
