/* ledger/ledger_internal.h — what the files of ledger/ share with each other (never used outside).
 *
 * Owns: the stack table's (stack.c) share of ledger_memory(), ledger_check() and the fork
 * handlers, called by ledger.c.  All hidden: the preload library never exports them.
 */
#ifndef NPUPOOL_LEDGER_INTERNAL_H
#define NPUPOOL_LEDGER_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LEDGER_HIDDEN __attribute__((visibility("hidden")))

/* The 64-bit finalizer of MurmurHash3: every bit of x moves every bit of the result (the stack
 * and Python tables' hashes). */
static inline uint64_t ledger_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The stack table's share of ledger_memory(), ledger_check() and the fork handlers (stack.c). */
/* Capture on (depth > 0) or off; opens libunwind at the first call with depth > 0; Python
 * frames on or off (ledger_py_init). */
LEDGER_HIDDEN void ledger_stack_init(int backtrace_depth, int python_frames);
LEDGER_HIDDEN void ledger_stack_memory(size_t *stacks, size_t *bytes, uint64_t *dropped);
LEDGER_HIDDEN int ledger_stack_check(char *why, size_t why_len);
LEDGER_HIDDEN void ledger_stack_fork_lock(void);
LEDGER_HIDDEN void ledger_stack_fork_unlock(void);
LEDGER_HIDDEN void ledger_stack_fork_reinit(void);

/* The unwinder (ledger_unwind.c). */
/* Load libunwind once (privately, with its descriptor guard).  1 when backtraces can be taken. */
LEDGER_HIDDEN int ledger_unwind_load(void);
LEDGER_HIDDEN int ledger_unwind_ready(void); /* 1 once loaded */
/* Return addresses of the caller's stack into buf (buf[0] is inside the function this is inlined
 * into, buf[1] in its caller, as unw_backtrace); at most want.  -1 when no stack can be taken now
 * (not loaded, or no host memory for a new thread's unwinder state: counted, said once).  Always
 * inlined, so that the walk has no frame of its own to step over (about 6 ns a frame). */
typedef int (*ledger_walk_fn)(void **buffer, int size);
extern _Atomic(ledger_walk_fn) ledger_unwind_walker LEDGER_HIDDEN; /* NULL until loaded */
extern __thread int ledger_unwind_tls_ready LEDGER_HIDDEN
    __attribute__((tls_model("initial-exec")));  /* 1: this thread's unwinder state exists */
LEDGER_HIDDEN int ledger_unwind_tls_probe(void); /* 0: memory for it is there now */
static inline __attribute__((always_inline)) int ledger_unwind_backtrace(void **buf, int want)
{
    ledger_walk_fn fn = atomic_load_explicit(&ledger_unwind_walker, memory_order_acquire);
    if (!fn) return -1;
    if (!ledger_unwind_tls_ready && ledger_unwind_tls_probe() != 0) return -1;
    int n = fn(buf, want);
    ledger_unwind_tls_ready = 1;
    return n;
}
LEDGER_HIDDEN uint64_t ledger_unwind_skipped(void); /* captures skipped for lack of memory */
/* 1 when the n bytes at p can be read, asked of the kernel without a descriptor (the answer the
 * guard gives libunwind's validation pipe). */
LEDGER_HIDDEN int ledger_unwind_readable(const void *p, size_t n);

/* Python frames (ledger_py.c, contract in ledger_py.h). */
/* Python frames on (NPUPOOL_PYTHON_FRAMES) or off; on: look for an interpreter now. */
LEDGER_HIDDEN void ledger_py_init(int enabled);
/* 1 when captures get a mark (an interpreter was found); while none is, looks again now and then
 * (every few thousand captures of a thread).  pre: no npupool lock held. */
LEDGER_HIDDEN int ledger_py_active(void);
/* The stack to intern for the native return addresses native[0..n) (npupool's frames dropped):
 * this thread's Python frames merged in where it may read them, and the mark; into out (cap
 * values); returns its length, -1 when there is no interpreter (keep the native stack).
 * pre: no npupool lock held (a new Python frame takes py_lock). */
LEDGER_HIDDEN int ledger_py_splice(const uintptr_t *native, int n, int depth, uintptr_t *out,
                                   int cap);
LEDGER_HIDDEN void ledger_py_fork_lock(void);
LEDGER_HIDDEN void ledger_py_fork_unlock(void);
LEDGER_HIDDEN void ledger_py_fork_reinit(void);

/* The Python frame table (ledger_py_table.c). */
/* Intern (file, function, line) (NUL-terminated UTF-8): the frame id (LEDGER_PY_TAG | id is its
 * stack value), 0 when no host memory or ids are left (counted as dropped).  Takes table_lock. */
LEDGER_HIDDEN uint32_t ledger_py_table_intern(const char *file, const char *function,
                                              uint32_t line);
/* Frame `id`: 1 and the strings (process lifetime) and line, 0 for an unknown id.  No lock. */
LEDGER_HIDDEN int ledger_py_table_get(uint32_t id, const char **file, const char **function,
                                      uint32_t *line);
LEDGER_HIDDEN void ledger_py_table_stats(size_t *frames, size_t *strings, size_t *bytes,
                                         uint64_t *dropped);
/* Count `bytes` more host memory as the Python tables' (ledger_py.c's hot cache). */
LEDGER_HIDDEN void ledger_py_table_account(size_t bytes);
LEDGER_HIDDEN int ledger_py_table_check(char *why, size_t why_len);
LEDGER_HIDDEN void ledger_py_table_fork_lock(void);
LEDGER_HIDDEN void ledger_py_table_fork_unlock(void);
LEDGER_HIDDEN void ledger_py_table_fork_reinit(void);

/* The pure parts of ledger_py.c, for the unit tests. */
/* Line of byte offset addr (-1 = not started: the first line) in a line table of the given
 * format (enum py_layout_lines); -1 when the table gives the instruction no line. */
LEDGER_HIDDEN int ledger_py_line(int format, const uint8_t *table, size_t len, int firstlineno,
                                 int addr);

typedef struct ledger_py_merge {
    const uintptr_t *native;        /* return addresses, innermost first */
    int nnative;                    /* how many */
    uintptr_t eval_lo, eval_hi;     /* _PyEval_EvalFrameDefault's code */
    uintptr_t interp_lo, interp_hi; /* the interpreter's executable code (call glue) */
    const uintptr_t *py;            /* Python frame values, innermost first */
    int npy;                        /* how many */
    const uint16_t *group;          /* Python frames run by each eval-loop call, innermost first */
    int ngroups;                    /* how many calls */
    int native_max, py_max;         /* at most this many native / Python frames */
    uintptr_t mark;                 /* appended last, 0 = none */
} ledger_py_merge_t;
/* The merged stack into out (at most cap values, the mark always kept); returns its length. */
LEDGER_HIDDEN int ledger_py_merge(const ledger_py_merge_t *m, uintptr_t *out, int cap);

#endif
