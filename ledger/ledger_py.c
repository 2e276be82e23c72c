/* ledger/ledger_py.c — Python frames in captured stacks (contract in ledger_py.h).
 *
 * Owns: finding a CPython interpreter in the process, reading the allocating thread's Python
 * frames without taking the GIL, the hot cache from (code object, offset) to frame id, and the
 * merge of Python frames into the native stack.  The interned frames themselves are
 * ledger_py_table.c's.
 *
 * Finding the interpreter.  At ledger_init (and, while none is found, at every PROBE_EVERY-th
 * capture of a thread, for interpreters loaded later), Py_IsInitialized is looked up with
 * dlsym(RTLD_DEFAULT), then in any loaded libpython3*.so (RTLD_NOLOAD).  Its version comes from
 * Py_Version (3.11+) or Py_GetVersion (whose text also tells PyPy apart, whose cpyext exports
 * CPython's names but not its layouts); CPython 3.9 to 3.13 are read through the facts of
 * ledger_py_layout.h, after checks that refuse builds with another object header (PyCode_Type's
 * type must be PyType_Type at the usual offset) and, on 3.13, any disagreement with the
 * interpreter's own _Py_DebugOffsets or a free-threaded build.  The object that defines it is
 * pinned (dlopen RTLD_NOLOAD, never closed): the functions looked up stay mapped.  No Python
 * header is used and no libpython is linked; only the looked-up functions below are called,
 * none of which takes a lock, runs Python code, creates an object or touches the error
 * indicator:
 * _PyThreadState_UncheckedGet / PyThreadState_GetUnchecked, PyGILState_GetThisThreadState,
 * Py_IsInitialized, _Py_IsFinalizing / Py_IsFinalizing.
 *
 * Whose frames may be read (thread_top): the GIL is never taken.
 *   - The thread holds the GIL (3.12+: its attached thread state is non-NULL; 3.9-3.11: the
 *     runtime's current thread state is this thread's own): its frames, read by itself.
 *   - The process's main thread released the GIL inside a call from Python (ctypes.CDLL, a torch
 *     operator): its frames cannot change until the call returns, and nothing frees them while the
 *     interpreter is initialised and not finalizing (the only thread that finalizes the
 *     interpreter of a `python` process is this one); checked right before the walk.
 *   - Any other thread that released the GIL: not read.  At shutdown the interpreter frees the
 *     thread states and frames of such (daemon) threads while they run C code; reading them could
 *     fault.  Threads without a Python thread state keep native frames.
 * Every object read is type-checked (code, str, bytes; frame objects on 3.9/3.10) and a walk is
 * bounded, so a layout npupool got wrong yields a shorter stack rather than wild reads.
 *
 * Frames to ids.  A frame is (code object, instruction offset).  The hot cache maps that pair,
 * checked against the code object's file, name and line-table pointers and first line (code
 * objects are freed and their addresses reused), to an interned frame id: a direct-mapped table
 * of HOT_SLOTS entries, each a seqlock (readers retry nothing: a torn or busy entry is a miss).
 * A miss copies the file and function names as UTF-8 out of the str objects (compact strings of
 * any kind; a code point that is no Unicode scalar becomes U+FFFD), computes the line from the
 * line table (CPython's own algorithms: lnotab, 3.10 line table, PEP 657 locations), and interns
 * (file, function, line) in ledger_py_table.c.  No Python object is created; nothing a report
 * needs is left in the interpreter: reports read only the table.
 *
 * Merging (ledger_py_merge).  Native frames innermost first; each return address inside
 * _PyEval_EvalFrameDefault is replaced by the Python frames that C call runs (one per call on
 * 3.9/3.10; on 3.11 a run ending with is_entry; from 3.12 a run ending at an entry frame owned by
 * the C stack); other frames of the interpreter's own code (call glue) are dropped when Python
 * frames are shown, as py-spy --native does; Python frames beyond the native frames captured are
 * appended.  At most `depth` native and `depth` Python frames, then the mark.
 *
 * Locking: none of its own on the capture path but the table's (ledger_py_table.c, taken on a
 * hot-cache miss, after the native unwind, with no other npupool lock held); probe_lock is only
 * ever try-locked (a thread that finds a probe running goes on without one).  The interpreter's
 * locks are never taken.  rt_store is written once before g_found publishes it (release).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ledger.h"
#include "ledger_internal.h"
#include "ledger_py.h"
#include "ledger_py_layout.h"
#include "loader.h"
#include "log.h"

#define PROBE_EVERY 4096u     /* captures of a thread between looks for a late interpreter */
#define HOT_SLOTS 2048u       /* hot-cache entries (power of two) */
#define NAME_MAX_BYTES 1024   /* UTF-8 bytes kept of a file or function name */
#define WALK_MAX_STEPS 1024   /* frames visited per capture at most */
#define LINES_MAX (16u << 20) /* a line table longer than this is not read */

/* ---- the interpreter found ----------------------------------------------------------------- */

typedef struct py_rt {
    const py_layout_t *L;             /* where things are in this version */
    char version[32];                 /* "3.11.2" */
    void *(*unchecked_get)(void);     /* current thread state (see thread_top) */
    void *(*gilstate_this)(void);     /* this thread's thread state (main interpreter) */
    int (*is_initialized)(void);      /* Py_IsInitialized */
    int (*is_finalizing)(void);       /* _Py_IsFinalizing / Py_IsFinalizing */
    uintptr_t code_type, str_type;    /* &PyCode_Type, &PyUnicode_Type */
    uintptr_t bytes_type, frame_type; /* &PyBytes_Type, &PyFrame_Type (frames on 3.9/3.10) */
    uintptr_t eval_lo, eval_hi;       /* _PyEval_EvalFrameDefault's code */
    uintptr_t interp_lo, interp_hi;   /* the interpreter object's executable segments */
} py_rt_t;

enum { FOUND_NONE = 0, FOUND_SUPPORTED = 1, FOUND_UNSUPPORTED = 2 };

static py_rt_t rt_store;      /* written once by the probe, before g_found is set */
static _Atomic int g_found;   /* FOUND_* (release after rt_store is complete) */
static _Atomic int g_enabled; /* NPUPOOL_PYTHON_FRAMES */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER; /* one probe at a time */
static __thread unsigned t_probe_tick __attribute__((tls_model("initial-exec")));
static __thread signed char t_main __attribute__((tls_model("initial-exec"))) = -1; /* 1 main */

/* ---- the hot cache ---------------------------------------------------------------------- */

typedef struct hot_ent {
    _Atomic uint64_t seq;       /* even: stable, odd: being written */
    _Atomic uintptr_t code;     /* code object address, 0 = empty */
    _Atomic uint64_t where;     /* (uint32) instruction offset << 32 | (uint32) first line */
    _Atomic uintptr_t filename; /* co_filename when the entry was made */
    _Atomic uintptr_t name;     /* co_qualname / co_name then */
    _Atomic uintptr_t lines;    /* co_linetable / co_lnotab then */
    _Atomic uint32_t id;        /* the interned frame */
    uint32_t pad;               /* unused */
} __attribute__((aligned(64))) hot_ent_t;

static hot_ent_t *hot; /* HOT_SLOTS entries, once an interpreter is found */

static uint32_t hot_slot(uintptr_t code, uint64_t where)
{
    return (uint32_t)ledger_mix64(code ^ where * 0x9e3779b97f4a7c15ULL) & (HOT_SLOTS - 1);
}

/* ---- what readers see ---------------------------------------------------------------------- */

int ledger_py_frame(uintptr_t v, ledger_py_frame_t *out)
{
    uint32_t id = lfmt_py_frame_id(v);
    return id && ledger_py_table_get(id, &out->file, &out->function, &out->line);
}

enum ledger_py_seen ledger_py_stack_seen(const uintptr_t *frames, int depth)
{
    if (!frames || depth <= 0) return LEDGER_PY_SEEN_NONE;
    return (enum ledger_py_seen)lfmt_py_seen_of(frames[depth - 1]);
}

const char *ledger_py_seen_name(enum ledger_py_seen s)
{
    return lfmt_py_seen_name((enum lfmt_py_seen)s);
}

void ledger_py_status(ledger_py_status_t *out)
{
    memset(out, 0, sizeof *out);
    int found = atomic_load_explicit(&g_found, memory_order_acquire);
    out->found = found != FOUND_NONE;
    out->supported = found == FOUND_SUPPORTED;
    if (found) snprintf(out->version, sizeof out->version, "%s", rt_store.version);
    ledger_py_table_stats(&out->frames, &out->strings, &out->bytes, &out->frames_dropped);
}

/* ---- line tables (CPython's algorithms, facts only) ---------------------------------------- */

/* A PEP 657 varint: 6 bits a byte, bit 6 = more. */
static unsigned scan_varint(const uint8_t **p, const uint8_t *end)
{
    unsigned val = 0, shift = 0, b;
    do {
        if (*p >= end || shift > 30) return val;
        b = *(*p)++;
        val |= (b & 63u) << shift;
        shift += 6;
    } while (b & 64u);
    return val;
}

LEDGER_HIDDEN int ledger_py_line(int format, const uint8_t *t, size_t len, int first, int addr)
{
    if (addr < 0) return first; /* not started: CPython says the first line */
    int line = first, end = 0;
    switch (format) {
    case PY_LINES_LNOTAB: /* PyCode_Addr2Line of 3.9 */
        for (size_t i = 0; i + 1 < len; i += 2) {
            end += t[i];
            if (end > addr) break;
            line += (int8_t)t[i + 1];
        }
        return line;
    case PY_LINES_310:
        for (size_t i = 0; i + 1 < len; i += 2) {
            end += t[i];
            int8_t d = (int8_t)t[i + 1];
            if (d != -128) line += d;
            if (end > addr) return d == -128 ? -1 : line;
        }
        return -1;
    case PY_LINES_LOCATIONS:
        for (const uint8_t *p = t, *lim = t + len; p < lim;) {
            uint8_t b = *p;
            if (!(b & 128u)) return -1; /* not the start of an entry: a table npupool misread */
            int code = (b >> 3) & 15;
            const uint8_t *q = p + 1;
            if (code == 13 || code == 14) { /* no columns / long form: signed varint delta */
                unsigned u = scan_varint(&q, lim);
                line += u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
            } else if (code == 11 || code == 12) { /* one-line forms 1, 2 */
                line += code - 10;
            }
            end += ((b & 7) + 1) * 2; /* code units of 2 bytes */
            if (end > addr) return code == 15 ? -1 : line;
            for (p++; p < lim && !(*p & 128u);) p++;
        }
        return -1;
    default: return -1;
    }
}

/* ---- reading the interpreter's memory ------------------------------------------------------ */

static inline uintptr_t rd_ptr(uintptr_t a)
{
    uintptr_t v;
    memcpy(&v, (const void *)a, sizeof v);
    return v;
}
static inline int32_t rd_i32(uintptr_t a)
{
    int32_t v;
    memcpy(&v, (const void *)a, sizeof v);
    return v;
}
static inline uint8_t rd_u8(uintptr_t a) { return *(const uint8_t *)a; }
static inline int is_type(uintptr_t obj, uintptr_t type)
{
    return obj && type && rd_ptr(obj + PY_LAYOUT_OB_TYPE) == type;
}

static size_t put_utf8(char *out, size_t at, size_t cap, uint32_t cp)
{
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 0xfffd;
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | (cp >> 6 & 63));
        b[2] = (char)(0x80 | (cp & 63));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18);
        b[1] = (char)(0x80 | (cp >> 12 & 63));
        b[2] = (char)(0x80 | (cp >> 6 & 63));
        b[3] = (char)(0x80 | (cp & 63));
        n = 4;
    }
    if (at + n >= cap) return at; /* the whole character or nothing */
    memcpy(out + at, b, n);
    return at + n;
}

/* The str object s as UTF-8 into out (NUL-terminated, at most cap - 1 bytes, cut at a character
 * boundary); "?" when it is not a compact str npupool can read. */
static size_t str_utf8(const py_rt_t *rt, uintptr_t s, char *out, size_t cap)
{
    size_t n = 0;
    if (is_type(s, rt->str_type)) {
        uint32_t state = (uint32_t)rd_i32(s + PY_LAYOUT_STR_STATE);
        int64_t len;
        memcpy(&len, (const void *)(s + PY_LAYOUT_STR_LENGTH), sizeof len);
        unsigned kind = (state & PY_LAYOUT_STR_KIND_MASK) >> PY_LAYOUT_STR_KIND_SHIFT;
        int readable = (state & PY_LAYOUT_STR_COMPACT) && len >= 0 &&
                       (!rt->L->str_ready || (state & rt->L->str_ready)) &&
                       (kind == 1 || kind == 2 || kind == 4);
        if (readable) {
            uintptr_t data = s + (uintptr_t)(state & PY_LAYOUT_STR_ASCII ? rt->L->str_ascii_size
                                                                         : rt->L->str_compact_size);
            if (len > (int64_t)cap) len = (int64_t)cap;
            for (int64_t i = 0; i < len && n + 1 < cap; i++) {
                uint32_t cp;
                if (kind == 1)
                    cp = rd_u8(data + (uintptr_t)i);
                else if (kind == 2) {
                    uint16_t u;
                    memcpy(&u, (const void *)(data + 2 * (uintptr_t)i), 2);
                    cp = u;
                } else
                    memcpy(&cp, (const void *)(data + 4 * (uintptr_t)i), 4);
                if (cp == 0) cp = 0xfffd; /* a NUL would end the name */
                size_t m = put_utf8(out, n, cap, cp);
                if (m == n) break;
                n = m;
            }
        }
    }
    if (n == 0) out[n++] = '?';
    out[n] = '\0';
    return n;
}

/* What identifies a code object's names and lines now (hot-cache key and check). */
typedef struct code_key {
    uintptr_t filename; /* co_filename */
    uintptr_t name;     /* co_qualname or co_name */
    uintptr_t lines;    /* co_linetable / co_lnotab */
    int32_t first;      /* co_firstlineno */
} code_key_t;

static void code_key_read(const py_rt_t *rt, uintptr_t code, code_key_t *k)
{
    const py_layout_t *L = rt->L;
    k->filename = rd_ptr(code + (uintptr_t)L->co_filename);
    k->name = rd_ptr(code + (uintptr_t)(L->co_qualname >= 0 ? L->co_qualname : L->co_name));
    k->lines = rd_ptr(code + (uintptr_t)L->co_lines);
    k->first = rd_i32(code + (uintptr_t)L->co_firstlineno);
}

/* The frame id of (code, addr) by the slow path: names, line, interning. */
static uint32_t frame_slow(const py_rt_t *rt, const code_key_t *k, int32_t addr)
{
    char file[NAME_MAX_BYTES], func[NAME_MAX_BYTES];
    str_utf8(rt, k->filename, file, sizeof file);
    str_utf8(rt, k->name, func, sizeof func);
    int line = -1;
    if (is_type(k->lines, rt->bytes_type)) {
        int64_t len;
        memcpy(&len, (const void *)(k->lines + PY_LAYOUT_BYTES_SIZE), sizeof len);
        if (len >= 0 && len <= (int64_t)LINES_MAX)
            line = ledger_py_line(rt->L->lines, (const uint8_t *)(k->lines + PY_LAYOUT_BYTES_DATA),
                                  (size_t)len, k->first, addr);
    }
    return ledger_py_table_intern(file, func, line > 0 ? (uint32_t)line : 0);
}

static uint32_t frame_id(const py_rt_t *rt, uintptr_t code, int32_t addr)
{
    code_key_t k;
    code_key_read(rt, code, &k);
    uint64_t where = (uint64_t)(uint32_t)addr << 32 | (uint32_t)k.first;
    hot_ent_t *e = &hot[hot_slot(code, where)];
    /* A seqlock without fences: the writer's field stores are releases after its acquiring
     * CAS, the reader's field loads acquires, so a reader that saw a new field sees the odd (or
     * a later) sequence number when it looks again, and calls the entry a miss. */
    uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (!(s1 & 1)) {
        uintptr_t c = atomic_load_explicit(&e->code, memory_order_acquire);
        uint64_t w = atomic_load_explicit(&e->where, memory_order_acquire);
        uintptr_t f = atomic_load_explicit(&e->filename, memory_order_acquire);
        uintptr_t n = atomic_load_explicit(&e->name, memory_order_acquire);
        uintptr_t l = atomic_load_explicit(&e->lines, memory_order_acquire);
        uint32_t id = atomic_load_explicit(&e->id, memory_order_acquire);
        if (atomic_load_explicit(&e->seq, memory_order_relaxed) == s1 && c == code && w == where &&
            f == k.filename && n == k.name && l == k.lines && id)
            return id;
    }
    uint32_t id = frame_slow(rt, &k, addr);
    if (id && !(s1 & 1) &&
        atomic_compare_exchange_strong_explicit(&e->seq, &s1, s1 + 1, memory_order_acq_rel,
                                                memory_order_relaxed)) {
        atomic_store_explicit(&e->code, code, memory_order_release);
        atomic_store_explicit(&e->where, where, memory_order_release);
        atomic_store_explicit(&e->filename, k.filename, memory_order_release);
        atomic_store_explicit(&e->name, k.name, memory_order_release);
        atomic_store_explicit(&e->lines, k.lines, memory_order_release);
        atomic_store_explicit(&e->id, id, memory_order_release);
        atomic_store_explicit(&e->seq, s1 + 2, memory_order_release);
    }
    return id;
}

/* ---- whose frames, and walking them -------------------------------------------------------- */

static int is_main_thread(void)
{
    if (t_main < 0) t_main = (signed char)(syscall(SYS_gettid) == getpid());
    return t_main;
}

/* What this thread's capture may see; *top = its innermost frame when it may read them. */
static enum ledger_py_seen thread_top(const py_rt_t *rt, uintptr_t *top)
{
    const py_layout_t *L = rt->L;
    *top = 0;
    uintptr_t cur = (uintptr_t)rt->unchecked_get(), ts;
    enum ledger_py_seen seen;
    if (L->minor >= 12) { /* the attached thread state is per thread, NULL once detached */
        ts = cur ? cur : (uintptr_t)rt->gilstate_this();
        seen = cur ? LEDGER_PY_GIL_HELD : LEDGER_PY_GIL_RELEASED;
    } else { /* one current thread state for the runtime: the GIL holder's */
        ts = (uintptr_t)rt->gilstate_this();
        seen = cur && cur == ts ? LEDGER_PY_GIL_HELD : LEDGER_PY_GIL_RELEASED;
    }
    if (!ts) return LEDGER_PY_NO_THREAD_STATE;
    if (seen == LEDGER_PY_GIL_RELEASED) {
        if (!is_main_thread()) return LEDGER_PY_NOT_VISIBLE;
        if (!rt->is_initialized() || rt->is_finalizing()) return LEDGER_PY_NOT_RUNNING;
    }
    if (L->ts_frame >= 0) {
        *top = rd_ptr(ts + (uintptr_t)L->ts_frame);
    } else {
        uintptr_t cf = rd_ptr(ts + (uintptr_t)L->ts_cframe);
        *top = cf ? rd_ptr(cf + (uintptr_t)L->cf_current) : 0;
    }
    return seen;
}

typedef struct walk {
    uintptr_t py[LEDGER_MAX_DEPTH];   /* Python frame values, innermost first */
    uint16_t group[LEDGER_MAX_DEPTH]; /* frames per C call of the eval loop */
    int npy, ngroups;                 /* used */
} walk_t;

static void group_close(walk_t *w, int *open)
{
    if (w->ngroups < LEDGER_MAX_DEPTH) w->group[w->ngroups++] = (uint16_t)*open;
    *open = 0;
}

/* Up to `want` Python frames from `frame` outwards, grouped by the C call that runs them. */
static void walk_frames(const py_rt_t *rt, uintptr_t frame, int want, walk_t *w)
{
    const py_layout_t *L = rt->L;
    int open = 0; /* frames in the current group */
    w->npy = w->ngroups = 0;
    if (want > LEDGER_MAX_DEPTH) want = LEDGER_MAX_DEPTH;
    for (int step = 0; frame && step < WALK_MAX_STEPS && w->npy < want; step++) {
        if (L->entry == PY_ENTRY_EACH_FRAME && !is_type(frame, rt->frame_type)) break;
        uintptr_t back = rd_ptr(frame + (uintptr_t)L->fr_back);
        int owner = L->fr_owner >= 0 ? rd_u8(frame + (uintptr_t)L->fr_owner) : -1;
        if (L->entry == PY_ENTRY_CSTACK && owner == PY_LAYOUT_OWNED_BY_CSTACK) {
            group_close(w, &open); /* the entry frame of one C call */
            frame = back;
            continue;
        }
        uintptr_t code = rd_ptr(frame + (uintptr_t)L->fr_code);
        if (is_type(code, rt->code_type)) {
            int32_t addr;
            int complete = 1;
            if (L->instr == PY_INSTR_POINTER) {
                uintptr_t start = code + (uintptr_t)L->co_code;
                intptr_t off = (intptr_t)(rd_ptr(frame + (uintptr_t)L->fr_instr) - start);
                intptr_t units = (intptr_t)rd_ptr(code + PY_LAYOUT_OB_SIZE);
                addr = off >= 0 && off < 2 * units ? (int32_t)off : -1;
                /* not yet at its first traceable instruction: CPython hides it too */
                complete = owner == PY_LAYOUT_OWNED_BY_GENERATOR ||
                           off >= 2 * (intptr_t)rd_i32(code + (uintptr_t)L->co_firsttraceable);
            } else {
                int32_t lasti = rd_i32(frame + (uintptr_t)L->fr_instr);
                addr = lasti < 0 ? -1 : L->instr == PY_INSTR_LASTI_UNITS ? lasti * 2 : lasti;
            }
            uint32_t id = complete ? frame_id(rt, code, addr) : 0;
            if (id) {
                w->py[w->npy++] = LEDGER_PY_TAG | id;
                open++;
            }
        }
        if (L->entry == PY_ENTRY_EACH_FRAME ||
            (L->entry == PY_ENTRY_IS_ENTRY && rd_u8(frame + (uintptr_t)L->fr_is_entry)))
            group_close(w, &open);
        frame = back;
    }
    if (open) group_close(w, &open);
}

LEDGER_HIDDEN int ledger_py_merge(const ledger_py_merge_t *m, uintptr_t *out, int cap)
{
    int k = 0, gi = 0, pi = 0, nat = 0, pyn = 0;
    int room = cap - (m->mark ? 1 : 0);
    int have_py = m->npy > 0;
    for (int i = 0; i < m->nnative && k < room; i++) {
        uintptr_t pc = m->native[i], a = pc - 1;
        if (have_py && a >= m->eval_lo && a < m->eval_hi) { /* an eval loop: its Python frames */
            for (int j = 0; gi < m->ngroups && j < m->group[gi]; j++, pi++)
                if (pyn < m->py_max && k < room) out[k++] = m->py[pi], pyn++;
            gi++;
            continue;
        }
        if (have_py && a >= m->interp_lo && a < m->interp_hi) continue; /* call glue */
        if (nat < m->native_max) out[k++] = pc, nat++;
    }
    for (; pi < m->npy && pyn < m->py_max && k < room; pi++, pyn++) out[k++] = m->py[pi];
    if (m->mark && k < cap) out[k++] = m->mark;
    return k;
}

LEDGER_HIDDEN int ledger_py_splice(const uintptr_t *native, int n, int depth, uintptr_t *out,
                                   int cap)
{
    int found = atomic_load_explicit(&g_found, memory_order_acquire);
    if (found == FOUND_NONE || !atomic_load_explicit(&g_enabled, memory_order_relaxed)) return -1;
    const py_rt_t *rt = &rt_store;
    walk_t w;
    w.npy = w.ngroups = 0;
    enum ledger_py_seen seen = LEDGER_PY_UNSUPPORTED;
    if (found == FOUND_SUPPORTED) {
        uintptr_t top;
        seen = thread_top(rt, &top);
        if (top) walk_frames(rt, top, depth, &w);
    }
    ledger_py_merge_t m = {
        .native = native,
        .nnative = n,
        .eval_lo = rt->eval_lo,
        .eval_hi = rt->eval_hi,
        .interp_lo = rt->interp_lo,
        .interp_hi = rt->interp_hi,
        .py = w.py,
        .npy = w.npy,
        .group = w.group,
        .ngroups = w.ngroups,
        .native_max = depth,
        .py_max = depth,
        .mark = LEDGER_PY_TAG | LEDGER_PY_MARK | (uintptr_t)seen,
    };
    return ledger_py_merge(&m, out, cap);
}

/* ---- finding the interpreter --------------------------------------------------------------- */

typedef struct libpy_find {
    char path[512]; /* a loaded libpython3*.so, "" when none */
} libpy_find_t;

static int libpy_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    libpy_find_t *f = ctx;
    const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    name = name ? name + 1 : info->dlpi_name;
    if (!name || strncmp(name, "libpython3", 10) != 0) return 0;
    snprintf(f->path, sizeof f->path, "%s", info->dlpi_name);
    return 1;
}

typedef struct text_find {
    uintptr_t addr;   /* an address inside the object */
    uintptr_t lo, hi; /* its executable PT_LOAD range */
} text_find_t;

static int text_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    text_find_t *t = ctx;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (t->addr >= a && t->addr < a + ph->p_memsz) mine = 1;
        if (!(ph->p_flags & PF_X)) continue;
        if (a < lo) lo = a;
        if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
    if (!mine) return 0;
    t->lo = lo < hi ? lo : 0;
    t->hi = lo < hi ? hi : 0;
    return 1;
}

/* 3.13: the interpreter's own offsets must agree with the table. */
static int debug_offsets_agree(const py_layout_t *L, uintptr_t runtime)
{
    if (!runtime || memcmp((const void *)runtime, "xdebugpy", 8) != 0) return 0;
    uint64_t w[PY_DBG313_WORDS];
    memcpy(w, (const void *)runtime, sizeof w);
    if ((w[PY_DBG313_VERSION] >> 16) != 0x030d || w[PY_DBG313_FREE_THREADED]) return 0;
    const struct {
        int word;     /* index in _Py_DebugOffsets */
        int64_t want; /* the table's value */
    } checks[] = {
        {PY_DBG313_TS_CURRENT_FRAME, L->ts_frame},
        {PY_DBG313_FR_PREVIOUS, L->fr_back},
        {PY_DBG313_FR_EXECUTABLE, L->fr_code},
        {PY_DBG313_FR_INSTR_PTR, L->fr_instr},
        {PY_DBG313_FR_OWNER, L->fr_owner},
        {PY_DBG313_CO_FILENAME, L->co_filename},
        {PY_DBG313_CO_NAME, L->co_name},
        {PY_DBG313_CO_QUALNAME, L->co_qualname},
        {PY_DBG313_CO_LINETABLE, L->co_lines},
        {PY_DBG313_CO_FIRSTLINENO, L->co_firstlineno},
        {PY_DBG313_CO_CODE_ADAPTIVE, L->co_code},
        {PY_DBG313_OB_TYPE, PY_LAYOUT_OB_TYPE},
        {PY_DBG313_BYTES_OB_SIZE, PY_LAYOUT_BYTES_SIZE},
        {PY_DBG313_BYTES_OB_SVAL, PY_LAYOUT_BYTES_DATA},
        {PY_DBG313_STR_STATE, PY_LAYOUT_STR_STATE},
        {PY_DBG313_STR_LENGTH, PY_LAYOUT_STR_LENGTH},
        {PY_DBG313_STR_ASCII_SIZE, L->str_ascii_size},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        if ((int64_t)w[checks[i].word] != checks[i].want) return 0;
    return 1;
}

/* Fill rt from the interpreter behind handle h (RTLD_DEFAULT or a libpython's).  Returns
 * FOUND_SUPPORTED, FOUND_UNSUPPORTED (rt->version says which), or FOUND_NONE. */
static int resolve(void *h, py_rt_t *rt)
{
    ledger_dlsym_fn dls = ledger_dlsym();
    rt->is_initialized = (int (*)(void))dls(h, "Py_IsInitialized");
    if (!rt->is_initialized) return FOUND_NONE;
    int major = 0, minor = 0, micro = 0;
    const unsigned long *hex = dls(h, "Py_Version");
    const char *(*get_version)(void) = (const char *(*)(void))dls(h, "Py_GetVersion");
    const char *text = get_version ? get_version() : NULL; /* "3.10.13 (main, ...) [GCC ...]" */
    if (hex) {
        major = (int)(*hex >> 24 & 0xff), minor = (int)(*hex >> 16 & 0xff);
        micro = (int)(*hex >> 8 & 0xff);
    } else if (text) {
        sscanf(text, "%d.%d.%d", &major, &minor, &micro);
    }
    int pypy = text && strstr(text, "PyPy"); /* cpyext exports CPython's names, not its layouts */
    snprintf(rt->version, sizeof rt->version, "%d.%d.%d%s", major, minor, micro,
             pypy ? " (PyPy)" : "");
    rt->L = major == 3 && !pypy ? py_layout_of(minor) : NULL;
    if (!rt->L) return FOUND_UNSUPPORTED;
    rt->unchecked_get = (void *(*)(void))dls(h, minor >= 13 ? "PyThreadState_GetUnchecked"
                                                            : "_PyThreadState_UncheckedGet");
    rt->gilstate_this = (void *(*)(void))dls(h, "PyGILState_GetThisThreadState");
    rt->is_finalizing = (int (*)(void))dls(h, minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
    rt->code_type = (uintptr_t)dls(h, "PyCode_Type");
    rt->str_type = (uintptr_t)dls(h, "PyUnicode_Type");
    rt->bytes_type = (uintptr_t)dls(h, "PyBytes_Type");
    rt->frame_type = (uintptr_t)dls(h, "PyFrame_Type");
    uintptr_t type_type = (uintptr_t)dls(h, "PyType_Type");
    void *eval = dls(h, "_PyEval_EvalFrameDefault");
    if (!rt->unchecked_get || !rt->gilstate_this || !rt->is_finalizing || !rt->code_type ||
        !rt->str_type || !rt->bytes_type || !rt->frame_type || !eval || !type_type ||
        !is_type(rt->code_type, type_type)) /* another object header (Py_TRACE_REFS) */
        return FOUND_UNSUPPORTED;
    if (minor == 13 && !debug_offsets_agree(rt->L, (uintptr_t)dls(h, "_PyRuntime")))
        return FOUND_UNSUPPORTED;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    rt->eval_lo = (uintptr_t)eval;
    rt->eval_hi = rt->eval_lo;
    if (dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size &&
        (uintptr_t)info.dli_saddr == rt->eval_lo)
        rt->eval_hi = rt->eval_lo + sym->st_size;
    text_find_t t = {.addr = rt->eval_lo};
    loader_iterate(text_cb, &t);
    rt->interp_lo = t.lo;
    rt->interp_hi = t.hi;
    return FOUND_SUPPORTED;
}

/* Look for an interpreter once (no lock held by the caller; the loader's lock is taken). */
static void probe(void)
{
    if (pthread_mutex_trylock(&probe_lock) != 0) return;
    if (atomic_load_explicit(&g_found, memory_order_acquire) == FOUND_NONE) {
        py_rt_t rt = {0};
        int found = resolve(RTLD_DEFAULT, &rt);
        if (found == FOUND_NONE) {
            libpy_find_t f = {""};
            loader_iterate(libpy_cb, &f);
            void *h = f.path[0] ? dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
            if (h) found = resolve(h, &rt); /* the handle is kept: libpython stays loaded */
        }
        if (found == FOUND_SUPPORTED && !hot) {
            hot = calloc(HOT_SLOTS, sizeof *hot);
            if (hot)
                ledger_py_table_account(HOT_SLOTS * sizeof *hot);
            else
                found = FOUND_UNSUPPORTED;
        }
        Dl_info where;
        if (found == FOUND_SUPPORTED && dladdr((void *)rt.is_initialized, &where) &&
            where.dli_fname && where.dli_fname[0])
            dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD); /* pinned: never unloaded under us
                                                               * (fails for the main program,
                                                               * which stays anyway) */
        if (found != FOUND_NONE) {
            rt_store = rt;
            atomic_store_explicit(&g_found, found, memory_order_release);
            if (found == FOUND_SUPPORTED)
                log_info("Python %s found: allocation stacks include its frames", rt.version);
            else
                log_warn("Python %s: npupool cannot read this interpreter's frames (supported: "
                         "CPython 3.9 to 3.13 with a GIL); stacks keep native frames only",
                         rt.version);
        }
    }
    pthread_mutex_unlock(&probe_lock);
}

LEDGER_HIDDEN void ledger_py_init(int enabled)
{
    atomic_store_explicit(&g_enabled, enabled, memory_order_relaxed);
    if (enabled) probe();
}

LEDGER_HIDDEN int ledger_py_active(void)
{
    if (!atomic_load_explicit(&g_enabled, memory_order_relaxed)) return 0;
    if (atomic_load_explicit(&g_found, memory_order_acquire) != FOUND_NONE) return 1;
    if ((++t_probe_tick & (PROBE_EVERY - 1)) == 0) probe();
    return atomic_load_explicit(&g_found, memory_order_acquire) != FOUND_NONE;
}

/* ---- checks and fork ----------------------------------------------------------------------- */

LEDGER_HIDDEN void ledger_py_fork_lock(void) { ledger_py_table_fork_lock(); }
LEDGER_HIDDEN void ledger_py_fork_unlock(void) { ledger_py_table_fork_unlock(); }
LEDGER_HIDDEN void ledger_py_fork_reinit(void)
{
    ledger_py_table_fork_reinit();
    pthread_mutex_init(&probe_lock, NULL);
    t_main = -1; /* the child's only thread is its main thread */
}
