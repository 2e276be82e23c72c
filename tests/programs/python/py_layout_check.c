/* tests/programs/python/py_layout_check.c — compares npupool's facts about one CPython version
 * (ledger/ledger_py_layout.h) with that version's own headers.
 *
 * Compiled by tests/cases/python_layout.sh against the headers of each interpreter it finds
 * (-I<include> -I<include>/internal -Iledger): offsetof() and sizeof() of every field npupool
 * reads, the str state bits, and on 3.13 the word index of each _Py_DebugOffsets entry npupool
 * compares at run time.  npupool itself is never compiled against Python's headers; this test
 * program is how the numbers it carries are kept honest.  Prints one line per disagreement and
 * "layout 3.N ok" when there is none; exits 1 on any.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if PY_MINOR_VERSION >= 11
#include <internal/pycore_frame.h>
#else
#include <frameobject.h>
#endif
#if PY_MINOR_VERSION >= 13
#include <internal/pycore_runtime.h>
#endif

#include "ledger_py_layout.h"

static int bad;

static void same(const char *what, long npupool, long header)
{
    if (npupool == header) return;
    printf("3.%d %s: npupool has %ld, the headers say %ld\n", PY_MINOR_VERSION, what, npupool,
           header);
    bad++;
}

static unsigned state_bits(int which)
{
    PyASCIIObject a;
    unsigned u;
    memset(&a, 0, sizeof a);
    if (which == 0) a.state.kind = 7;
    if (which == 1) a.state.compact = 1;
    if (which == 2) a.state.ascii = 1;
#if PY_MINOR_VERSION <= 11
    if (which == 3) a.state.ready = 1;
#endif
    memcpy(&u, &a.state, sizeof u);
    return u;
}

int main(void)
{
    const py_layout_t *L = py_layout_of(PY_MINOR_VERSION);
    if (!L) {
        printf("3.%d: npupool has no layout for this version\n", PY_MINOR_VERSION);
        return 1;
    }
#if PY_MINOR_VERSION <= 10
    same("ts_frame", L->ts_frame, offsetof(PyThreadState, frame));
    same("fr_back", L->fr_back, offsetof(PyFrameObject, f_back));
    same("fr_code", L->fr_code, offsetof(PyFrameObject, f_code));
    same("fr_instr", L->fr_instr, offsetof(PyFrameObject, f_lasti));
    same("lines", L->lines, PY_MINOR_VERSION == 9 ? PY_LINES_LNOTAB : PY_LINES_310);
    same("instr", L->instr, PY_MINOR_VERSION == 9 ? PY_INSTR_LASTI_BYTES : PY_INSTR_LASTI_UNITS);
    same("entry", L->entry, PY_ENTRY_EACH_FRAME);
#if PY_MINOR_VERSION == 9
    same("co_lines", L->co_lines, offsetof(PyCodeObject, co_lnotab));
#else
    same("co_lines", L->co_lines, offsetof(PyCodeObject, co_linetable));
#endif
    same("co_qualname", L->co_qualname, -1);
    same("co_code", L->co_code, -1);
#else
#if PY_MINOR_VERSION <= 12
    same("ts_cframe", L->ts_cframe, offsetof(PyThreadState, cframe));
    same("cf_current", L->cf_current, offsetof(_PyCFrame, current_frame));
    same("fr_code", L->fr_code, offsetof(_PyInterpreterFrame, f_code));
    same("fr_instr", L->fr_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
    same("ts_frame", L->ts_frame, offsetof(PyThreadState, current_frame));
    same("fr_code", L->fr_code, offsetof(_PyInterpreterFrame, f_executable));
    same("fr_instr", L->fr_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
    same("fr_back", L->fr_back, offsetof(_PyInterpreterFrame, previous));
    same("fr_owner", L->fr_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_MINOR_VERSION == 11
    same("fr_is_entry", L->fr_is_entry, offsetof(_PyInterpreterFrame, is_entry));
    same("entry", L->entry, PY_ENTRY_IS_ENTRY);
#else
    same("entry", L->entry, PY_ENTRY_CSTACK);
    same("owned by C stack", PY_LAYOUT_OWNED_BY_CSTACK, FRAME_OWNED_BY_CSTACK);
#endif
    same("owned by generator", PY_LAYOUT_OWNED_BY_GENERATOR, FRAME_OWNED_BY_GENERATOR);
    same("co_qualname", L->co_qualname, offsetof(PyCodeObject, co_qualname));
    same("co_lines", L->co_lines, offsetof(PyCodeObject, co_linetable));
    same("co_code", L->co_code, offsetof(PyCodeObject, co_code_adaptive));
    same("co_firsttraceable", L->co_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
    same("lines", L->lines, PY_LINES_LOCATIONS);
    same("instr", L->instr, PY_INSTR_POINTER);
    same("code unit", 2, sizeof(_Py_CODEUNIT));
    same("code ob_size", PY_LAYOUT_OB_SIZE, offsetof(PyCodeObject, ob_base.ob_size));
#endif
    same("co_filename", L->co_filename, offsetof(PyCodeObject, co_filename));
    same("co_name", L->co_name, offsetof(PyCodeObject, co_name));
    same("co_firstlineno", L->co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
    same("ob_type", PY_LAYOUT_OB_TYPE, offsetof(PyObject, ob_type));
    same("str length", PY_LAYOUT_STR_LENGTH, offsetof(PyASCIIObject, length));
    same("str hash", PY_LAYOUT_STR_HASH, offsetof(PyASCIIObject, hash));
    same("str state", PY_LAYOUT_STR_STATE, offsetof(PyASCIIObject, state));
    same("str_ascii_size", L->str_ascii_size, sizeof(PyASCIIObject));
    same("str_compact_size", L->str_compact_size, sizeof(PyCompactUnicodeObject));
    same("str kind bits", PY_LAYOUT_STR_KIND_MASK, state_bits(0));
    same("str compact bit", PY_LAYOUT_STR_COMPACT, state_bits(1));
    same("str ascii bit", PY_LAYOUT_STR_ASCII, state_bits(2));
    same("str ready bit", L->str_ready, state_bits(3));
    same("bytes size", PY_LAYOUT_BYTES_SIZE, offsetof(PyBytesObject, ob_base.ob_size));
    same("bytes data", PY_LAYOUT_BYTES_DATA, offsetof(PyBytesObject, ob_sval));
#if PY_MINOR_VERSION >= 13
#define WORD(f) (long)(offsetof(_Py_DebugOffsets, f) / sizeof(uint64_t))
    same("dbg version", PY_DBG313_VERSION, WORD(version));
    same("dbg free_threaded", PY_DBG313_FREE_THREADED, WORD(free_threaded));
    same("dbg current_frame", PY_DBG313_TS_CURRENT_FRAME, WORD(thread_state.current_frame));
    same("dbg previous", PY_DBG313_FR_PREVIOUS, WORD(interpreter_frame.previous));
    same("dbg executable", PY_DBG313_FR_EXECUTABLE, WORD(interpreter_frame.executable));
    same("dbg instr_ptr", PY_DBG313_FR_INSTR_PTR, WORD(interpreter_frame.instr_ptr));
    same("dbg owner", PY_DBG313_FR_OWNER, WORD(interpreter_frame.owner));
    same("dbg filename", PY_DBG313_CO_FILENAME, WORD(code_object.filename));
    same("dbg name", PY_DBG313_CO_NAME, WORD(code_object.name));
    same("dbg qualname", PY_DBG313_CO_QUALNAME, WORD(code_object.qualname));
    same("dbg linetable", PY_DBG313_CO_LINETABLE, WORD(code_object.linetable));
    same("dbg firstlineno", PY_DBG313_CO_FIRSTLINENO, WORD(code_object.firstlineno));
    same("dbg co_code_adaptive", PY_DBG313_CO_CODE_ADAPTIVE, WORD(code_object.co_code_adaptive));
    same("dbg ob_type", PY_DBG313_OB_TYPE, WORD(pyobject.ob_type));
    same("dbg bytes ob_size", PY_DBG313_BYTES_OB_SIZE, WORD(bytes_object.ob_size));
    same("dbg bytes ob_sval", PY_DBG313_BYTES_OB_SVAL, WORD(bytes_object.ob_sval));
    same("dbg str state", PY_DBG313_STR_STATE, WORD(unicode_object.state));
    same("dbg str length", PY_DBG313_STR_LENGTH, WORD(unicode_object.length));
    same("dbg str asciiobject_size", PY_DBG313_STR_ASCII_SIZE,
         WORD(unicode_object.asciiobject_size));
    same("dbg words", PY_DBG313_WORDS, (long)(sizeof(_Py_DebugOffsets) / sizeof(uint64_t)));
#endif
    if (!bad) printf("layout 3.%d ok\n", PY_MINOR_VERSION);
    return bad ? 1 : 0;
}
