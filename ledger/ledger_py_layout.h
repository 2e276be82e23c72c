/* ledger/ledger_py_layout.h — where CPython 3.9 to 3.13 keep what a stack needs, per version.
 *
 * Owns: the facts ledger_py.c reads a running interpreter with, and nothing else: per minor
 * version, the offsets of the innermost frame in a thread state, of the caller, code object and
 * position in a frame, of file name, name, qualified name, first line, line table and code units
 * in a code object, and the layout of str and bytes objects; the line-table format; how a frame
 * says where it is; and which frames one C call of the evaluation loop runs.
 *
 * Where the facts come from: CPython's headers of each version (Include/cpython/pystate.h,
 * cpython/frameobject.h, cpython/code.h, cpython/unicodeobject.h, cpython/bytesobject.h and, from
 * 3.11, Include/internal/pycore_frame.h), for release builds on LP64 (x86-64, aarch64).  They
 * are carried over as numbers: npupool is never compiled against Python's headers and links no
 * libpython.  tests/cases/python_layout.sh compiles tests/programs/python/py_layout_check.c
 * against the headers of every interpreter it finds and compares each number below with
 * offsetof(); 3.13's own table of offsets (_Py_DebugOffsets, at the start of _PyRuntime) is
 * compared with these at run time, and a disagreement turns Python frames off.
 *
 * Invariants: an offset of -1 means "this version has no such field"; every other offset lies
 * inside its structure.  Free-threaded builds (3.13t) and builds with Py_TRACE_REFS have other
 * object headers and are refused at run time (ledger_py.c).
 * Locking: constant data.
 */
#ifndef NPUPOOL_LEDGER_PY_LAYOUT_H
#define NPUPOOL_LEDGER_PY_LAYOUT_H

#include <stdint.h>

/* The same in every supported version (PyObject, PyVarObject, PyASCIIObject, PyBytesObject). */
#define PY_LAYOUT_OB_TYPE 8            /* PyObject.ob_type */
#define PY_LAYOUT_OB_SIZE 16           /* PyVarObject.ob_size (code units of a 3.11+ code object) */
#define PY_LAYOUT_STR_LENGTH 16        /* PyASCIIObject.length: code points */
#define PY_LAYOUT_STR_HASH 24          /* PyASCIIObject.hash: -1 until computed */
#define PY_LAYOUT_STR_STATE 32         /* PyASCIIObject.state: a 32-bit bit field */
#define PY_LAYOUT_STR_KIND_MASK 28u    /* state.kind (bits 2..4): 1, 2 or 4 bytes per code point */
#define PY_LAYOUT_STR_KIND_SHIFT 2     /* its shift */
#define PY_LAYOUT_STR_COMPACT 32u      /* state.compact (bit 5): the data follows the header */
#define PY_LAYOUT_STR_ASCII 64u        /* state.ascii (bit 6): compact ASCII */
#define PY_LAYOUT_BYTES_SIZE 16        /* PyBytesObject.ob_size */
#define PY_LAYOUT_BYTES_DATA 32        /* PyBytesObject.ob_sval */
#define PY_LAYOUT_OWNED_BY_GENERATOR 1 /* _PyInterpreterFrame.owner: FRAME_OWNED_BY_GENERATOR */
#define PY_LAYOUT_OWNED_BY_CSTACK 3    /* FRAME_OWNED_BY_CSTACK (3.12+): the eval loop's entry */

/* Line-table formats. */
enum py_layout_lines {
    PY_LINES_LNOTAB = 0,    /* 3.9 co_lnotab: (byte delta, signed line delta) pairs */
    PY_LINES_310 = 1,       /* 3.10 co_linetable: (byte delta, line delta or -128 = none) */
    PY_LINES_LOCATIONS = 2, /* 3.11+ co_linetable: PEP 657 location entries */
};

/* How a frame says where it is. */
enum py_layout_instr {
    PY_INSTR_LASTI_BYTES = 0, /* int f_lasti: byte offset of the last instruction, -1 = none */
    PY_INSTR_LASTI_UNITS = 1, /* int f_lasti: in 2-byte code units (3.10) */
    PY_INSTR_POINTER = 2,     /* prev_instr / instr_ptr: a pointer into the code units (3.11+) */
};

/* Which frames one C call of _PyEval_EvalFrameDefault runs. */
enum py_layout_entry {
    PY_ENTRY_EACH_FRAME = 0, /* exactly one (3.9, 3.10) */
    PY_ENTRY_IS_ENTRY = 1,   /* a run of frames ending (outwards) with is_entry = true (3.11) */
    PY_ENTRY_CSTACK = 2,     /* a run of frames ending at an entry frame owned by the C stack */
};

typedef struct py_layout {
    uint8_t minor;             /* Python 3.minor */
    uint8_t lines;             /* enum py_layout_lines */
    uint8_t instr;             /* enum py_layout_instr */
    uint8_t entry;             /* enum py_layout_entry */
    int16_t ts_frame;          /* PyThreadState: frame (3.9/3.10), current_frame (3.13); -1 */
    int16_t ts_cframe;         /* PyThreadState.cframe (3.11, 3.12), -1 = none */
    int16_t cf_current;        /* _PyCFrame.current_frame (3.11, 3.12), -1 = none */
    int16_t fr_back;           /* frame: f_back / previous */
    int16_t fr_code;           /* frame: f_code / f_executable */
    int16_t fr_instr;          /* frame: f_lasti (int) or prev_instr / instr_ptr (pointer) */
    int16_t fr_owner;          /* _PyInterpreterFrame.owner (char), -1 before 3.11 */
    int16_t fr_is_entry;       /* _PyInterpreterFrame.is_entry (bool, 3.11 only), -1 = none */
    int16_t co_filename;       /* PyCodeObject.co_filename (str) */
    int16_t co_name;           /* PyCodeObject.co_name (str) */
    int16_t co_qualname;       /* PyCodeObject.co_qualname (str, 3.11+), -1 = use co_name */
    int16_t co_lines;          /* PyCodeObject.co_lnotab (3.9) / co_linetable (bytes) */
    int16_t co_firstlineno;    /* PyCodeObject.co_firstlineno (int) */
    int16_t co_code;           /* PyCodeObject.co_code_adaptive (3.11+): code units, -1 = none */
    int16_t co_firsttraceable; /* PyCodeObject._co_firsttraceable (int, 3.11+), -1 = none */
    int16_t str_ascii_size;    /* sizeof(PyASCIIObject): compact ASCII data starts here */
    int16_t str_compact_size;  /* sizeof(PyCompactUnicodeObject): other compact data here */
    uint32_t str_ready;        /* state.ready bit (3.9..3.11; must be set), 0 = none */
} py_layout_t;

// clang-format off
static const py_layout_t py_layouts[] = {
    /* minor lines               instr                 entry                ts  cfr cfc back code instr own ent  file name qual lines first code trace asc cmp ready */
    {9,  PY_LINES_LNOTAB,    PY_INSTR_LASTI_BYTES, PY_ENTRY_EACH_FRAME, 24, -1, -1, 24, 32, 104, -1, -1, 104, 112, -1, 120, 40, -1, -1, 48, 72, 128},
    {10, PY_LINES_310,       PY_INSTR_LASTI_UNITS, PY_ENTRY_EACH_FRAME, 24, -1, -1, 24, 32,  96, -1, -1, 104, 112, -1, 120, 40, -1, -1, 48, 72, 128},
    {11, PY_LINES_LOCATIONS, PY_INSTR_POINTER,     PY_ENTRY_IS_ENTRY,   -1, 56,  8, 48, 32,  56, 69, 68, 112, 120, 128, 136, 72, 184, 168, 48, 72, 128},
    {12, PY_LINES_LOCATIONS, PY_INSTR_POINTER,     PY_ENTRY_CSTACK,     -1, 56,  0,  8,  0,  56, 70, -1, 112, 120, 128, 136, 68, 192, 176, 40, 56, 0},
    {13, PY_LINES_LOCATIONS, PY_INSTR_POINTER,     PY_ENTRY_CSTACK,     72, -1, -1,  8,  0,  56, 70, -1, 112, 120, 128, 136, 68, 200, 184, 40, 56, 0},
};
// clang-format on
#define PY_LAYOUT_COUNT (sizeof py_layouts / sizeof py_layouts[0])

/* 3.13's _Py_DebugOffsets, read as an array of uint64_t: the index of each word npupool
 * compares with the table above (cookie "xdebugpy" in words 0, version (PY_VERSION_HEX) in 1). */
#define PY_DBG313_VERSION 1
#define PY_DBG313_FREE_THREADED 2
#define PY_DBG313_TS_CURRENT_FRAME 23
#define PY_DBG313_FR_PREVIOUS 29
#define PY_DBG313_FR_EXECUTABLE 30
#define PY_DBG313_FR_INSTR_PTR 31
#define PY_DBG313_FR_OWNER 33
#define PY_DBG313_CO_FILENAME 35
#define PY_DBG313_CO_NAME 36
#define PY_DBG313_CO_QUALNAME 37
#define PY_DBG313_CO_LINETABLE 38
#define PY_DBG313_CO_FIRSTLINENO 39
#define PY_DBG313_CO_CODE_ADAPTIVE 43
#define PY_DBG313_OB_TYPE 45
#define PY_DBG313_BYTES_OB_SIZE 65
#define PY_DBG313_BYTES_OB_SVAL 66
#define PY_DBG313_STR_STATE 68
#define PY_DBG313_STR_LENGTH 69
#define PY_DBG313_STR_ASCII_SIZE 70
#define PY_DBG313_WORDS 73 /* words npupool reads (the struct is this long in 3.13) */

/* The layout of Python 3.minor, NULL when unsupported. */
static inline const py_layout_t *py_layout_of(int minor)
{
    for (unsigned i = 0; i < PY_LAYOUT_COUNT; i++)
        if (py_layouts[i].minor == minor) return &py_layouts[i];
    return (const py_layout_t *)0;
}

#endif /* NPUPOOL_LEDGER_PY_LAYOUT_H */
