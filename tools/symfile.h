/* tools/symfile.h — offline symbolization from files: (module file, build id, module offset) ->
 * function, file, line, with elfutils' libdwfl.  Names: symfile_* / SYMFILE_*.
 *
 * Owns: a cache of opened modules (one Dwfl per distinct module path).  Unlike the ledger's
 * in-process symbolizer (ledger/symbolize.h, which reads the modules mapped in the running
 * process), this one opens ELF files by path, after a report was written, possibly on another
 * machine: the path may be remapped (OLD=NEW prefix) and a build id must match the file's, or the
 * separate debug file found under the debuginfo path (/usr/lib/debug/.build-id/..).
 * Offsets are ELF virtual addresses of the call site (the report's "offset").  Single-threaded.
 */
#ifndef NPUPOOL_TOOLS_SYMFILE_H
#define NPUPOOL_TOOLS_SYMFILE_H

#include <stdint.h>

typedef struct symfile symfile_t;

enum symfile_status {
    SYMFILE_OK = 0,         /* something was found (function and/or file:line) */
    SYMFILE_NO_MODULE = -1, /* the module file cannot be opened */
    SYMFILE_BUILD_ID = -2,  /* the file's build id differs from the report's */
    SYMFILE_NOTHING = -3,   /* module found, but no symbol or line at that offset */
};

/* debug_dir: extra directory searched for separate debug files (NULL = the standard ones);
 * path_map: "OLD=NEW" prefix rewrite for module paths (NULL = none).  NULL on out of memory. */
symfile_t *symfile_open(const char *debug_dir, const char *path_map);
/* Strings returned live until symfile_close().  *function / *file are NULL when unknown. */
int symfile_lookup(symfile_t *s, const char *module, const char *build_id, uint64_t offset,
                   const char **function, const char **file, int *line);
void symfile_close(symfile_t *s);

#endif /* NPUPOOL_TOOLS_SYMFILE_H */
