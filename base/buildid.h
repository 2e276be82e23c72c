/* base/buildid.h — GNU build ids: the NT_GNU_BUILD_ID note the linker writes (--build-id) into
 * an executable or shared object, as lower-case hex text, the form reports and `file` print.
 *
 * Owns: finding that note in a loaded object (the one that contains an address: libnpupool.so
 * itself, the runtime library the shim forwards to, the program), in program headers the loader
 * gives (the symbolizer's module list) and in an ELF file on disk (`npupool version` reading
 * the libnpupool.so next to it).  Files are read with pread into a bounded buffer: a file of the
 * other word size or byte order, or a damaged one, has no build id (0), never a crash.
 * Returns: the length of the hex text written into hex (NUL-terminated), 0 when there is none.
 * Locking: buildid_of_address walks the loaded objects with dl_iterate_phdr (the loader's lock):
 * never call it while holding a lock a thread inside dlopen() may wait for.
 */
#ifndef NPUPOOL_BASE_BUILDID_H
#define NPUPOOL_BASE_BUILDID_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

#define BUILDID_HEX_MAX 129 /* 64 note bytes as hex + NUL: more than any linker writes (sha1: 40) */

/* The build id in a block of ELF notes (a PT_NOTE segment's contents). */
size_t buildid_from_notes(const void *notes, size_t len, char *hex, size_t cap);
/* The build id of a loaded object described by its program headers and load bias. */
size_t buildid_of_phdrs(const ElfW(Phdr) * phdr, int phnum, uintptr_t bias, char *hex, size_t cap);
/* The build id of the loaded object that contains addr; its path into path (when not NULL; the
 * main program's is /proc/self/exe resolved), "" when unknown. */
size_t buildid_of_address(const void *addr, char *hex, size_t cap, char *path, size_t pathcap);
/* The build id of an ELF file of this process's word size and byte order. */
size_t buildid_of_file(const char *file, char *hex, size_t cap);

#endif
