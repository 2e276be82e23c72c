/* shim/dl_hooks.c — npupool's dlsym and dlvsym.
 *
 * Owns: by-name lookups.  torch_npu (<= 26.0.1) does dlopen("libascendcl.so") + dlsym(handle,
 * "aclrtMallocAlign32"); from 26.1.0 it tries dlsym(RTLD_DEFAULT, ...).  Both must land on the
 * shim's hooks, so every answer passes through real_substitute(), which swaps the runtime's own
 * definition of a hooked name for the hook and leaves every other symbol untouched.
 *
 * RTLD_NEXT is relative to the caller, and glibc finds the caller from its return address — which
 * would be this file.  So RTLD_NEXT is emulated: find the caller's object with dladdr1 and search
 * the objects after it in load order with elf_lookup (the order of the initial global scope).
 * When NPUPOOL_DISABLE=1 answers are passed through unchanged.
 *
 * Built without sanitizer instrumentation (shim.mk): ASan and TSan call dlsym(RTLD_NEXT, ...)
 * while they start, before their shadow memory exists.  Names that do not start with "acl" are
 * therefore answered here without touching any instrumented code or npupool state.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

#include "elf_lookup.h"
#include "options.h"
#include "real.h"
#include "shim.h"

static int is_acl_name(const char *name)
{
    return name && name[0] == 'a' && name[1] == 'c' && name[2] == 'l';
}

/* The hooks' view of an answer: only ACL names can be substituted. */
static void *filter(const char *name, void *sym)
{
    if (!is_acl_name(name)) return sym;
    shim_ensure_init();
    return npupool_config.disable ? sym : real_substitute(name, sym);
}

static void *lookup_next(const void *caller, const char *name, const char *version)
{
    struct link_map *map = elf_object_of(caller);
    if (!map) return NULL;
    for (map = map->l_next; map; map = map->l_next) {
        void *p = elf_lookup(map, name, version);
        if (p) return p;
    }
    return NULL;
}

__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
    const void *caller = __builtin_return_address(0);
    void *sym;
    if (handle == RTLD_NEXT) {
        sym = lookup_next(caller, name, NULL);
    } else {
        elf_dlsym_fn real = elf_glibc_dlsym();
        sym = real ? real(handle, name) : NULL;
    }
    return filter(name, sym);
}

__attribute__((visibility("default"))) void *dlvsym(void *handle, const char *name,
                                                    const char *version)
{
    const void *caller = __builtin_return_address(0);
    void *sym;
    if (handle == RTLD_NEXT) {
        sym = lookup_next(caller, name, version);
    } else {
        elf_dlvsym_fn real = elf_glibc_dlvsym();
        sym = real ? real(handle, name, version) : NULL;
    }
    return filter(name, sym);
}
