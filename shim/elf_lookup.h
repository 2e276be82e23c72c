/* shim/elf_lookup.h — find a symbol's definition inside ONE loaded ELF object, by reading its
 * dynamic symbol table directly.
 *
 * Owns: the only way npupool reaches glibc's own dlsym/dlvsym.  The shim defines dlsym and dlvsym
 * itself (so that torch_npu's by-name lookups land on the hooks); any call to "dlsym" from inside
 * the shim would therefore bind back to the shim.  Reading libc's .dynsym with its GNU or SysV hash
 * table breaks that cycle without GLIBC_PRIVATE symbols, and also gives an exact per-object lookup
 * for emulating RTLD_NEXT on behalf of callers.  No allocation, no locks; safe during start-up.
 */
#ifndef NPUPOOL_ELF_LOOKUP_H
#define NPUPOOL_ELF_LOOKUP_H

#include <link.h>

/* Address of the definition of `name` in the object `map`, or NULL.  version == NULL picks the
 * default (non-hidden) version; otherwise only a definition with exactly that version node.
 * GNU indirect functions are resolved (their resolver is called). */
void *elf_lookup(const struct link_map *map, const char *name, const char *version);

/* The loaded object that contains addr, or NULL. */
struct link_map *elf_object_of(const void *addr);

/* glibc's own dlsym and dlvsym (libc.so.6, or libdl.so.2 on glibc < 2.34), found once and cached;
 * NULL if they cannot be found.  Safe to call from a sanitizer runtime's start-up: this file is
 * built without sanitizer instrumentation because the sanitizers call dlsym before their shadow
 * memory exists. */
typedef void *(*elf_dlsym_fn)(void *, const char *);
typedef void *(*elf_dlvsym_fn)(void *, const char *, const char *);
elf_dlsym_fn elf_glibc_dlsym(void);
elf_dlvsym_fn elf_glibc_dlvsym(void);

#endif
