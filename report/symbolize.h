/* report/symbolize.h — turning captured return addresses into function, file:line and module.
 *
 * Owns: report-time symbolization (never on the allocation path).  A symbolizer lives for one
 * report: it snapshots the loaded modules (dl_iterate_phdr: path, load bias, mapped range, GNU
 * build id read from the PT_NOTE in memory), then answers per address, caching each answer.
 *
 * Names come from elfutils' libdwfl when libdw.so.1 can be loaded: the module's ELF symbol table
 * (.symtab, so `static` functions and executables linked without -rdynamic are named too; falls
 * back to .dynsym and .gnu_debugdata), and file:line from DWARF where the module (or its separate
 * debug file under /usr/lib/debug) has it — local files only: debuginfod servers are never asked,
 * even when DEBUGINFOD_URLS is set.  libdw is dlopen()ed (RTLD_LOCAL) lazily at the first
 * symbolization and kept: a process that never writes a report never maps libdw, libelf and their
 * compression libraries, and none of their symbols enter the host program's global scope.  Without
 * libdw, names come from dladdr (dynamic symbols only) and there is no file:line.
 * C++ names are demangled when the process has __cxa_demangle (libstdc++ loaded).
 *
 * A Python frame of a stack (ledger_py.h: a tagged value, never an address) is answered from the
 * ledger's Python frame table: function (qualified name), file and line, `python` set, no module.
 *
 * Every native frame keeps module, module-relative offset and build id, so a report can be
 * symbolized again elsewhere (`npupool symbolize`).  `offset` is the call site: (return address - 1) minus
 * the module's load bias, i.e. an address to give to `addr2line -e MODULE` as is.
 *
 * Not thread-safe: one thread uses a symbolizer (the report writer, under the report lock).
 */
#ifndef NPUPOOL_SYMBOLIZE_H
#define NPUPOOL_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sym_frame {
    uintptr_t pc;         /* return address as captured */
    const char *function; /* demangled function name, NULL when unknown */
    const char *module;   /* path of the module, NULL when no loaded module contains pc */
    uintptr_t offset;     /* module-relative call site: pc - 1 - load bias (pc - 1 w/o module) */
    const char *file;     /* source file, NULL when the module has no line information */
    int line;             /* source line, 0 when unknown */
    const char *build_id; /* GNU build id as lowercase hex, NULL when the module has none */
    int python;           /* 1: a Python frame (function, file, line from ledger_py.h) */
} symbolize_frame_t;

typedef struct symbolizer symbolizer_t;

/* names: 1 = function names (+ file:line with libdw), 0 = module/offset/build id only.
 * Returns NULL only when host memory ran out. */
symbolizer_t *symbolize_open(int names);
/* Answer for one return address or Python frame value (cached); the strings in *out live until
 * symbolize_close(). */
void symbolize_lookup(symbolizer_t *s, uintptr_t pc, symbolize_frame_t *out);
void symbolize_close(symbolizer_t *s);

/* 1 when libdw could be loaded (loads it on first call). */
int symbolize_have_libdw(void);

#endif
