/* shim/real.h — the real runtime's functions, and the table of names npupool answers for.
 *
 * Owns: SHIM_HOOKS, the one list of ACL entry points the shim defines (and substitutes in dlsym
 * answers), and the resolved addresses of their real counterparts plus the few unhooked ACL
 * functions the shim itself calls.  Real addresses are found lazily with glibc's own dlsym
 * (reached through elf_lookup, never through the shim's dlsym): RTLD_NEXT first, then an
 * already-loaded libascendcl.so (RTLD_NOLOAD), then whatever a program's own dlsym lookup found.
 * Resolved pointers are published with atomic stores and never change afterwards.
 */
#ifndef NPUPOOL_REAL_H
#define NPUPOOL_REAL_H

#include <stddef.h>

#include "acl/acl.h"
#include "elf_lookup.h"

/* X(name): entry points the shim defines. */
// clang-format off
#define SHIM_HOOKS(X) \
    X(aclrtMalloc) \
    X(aclrtMallocAlign32) \
    X(aclrtMallocCached) \
    X(aclrtMallocWithCfg) \
    X(aclrtFree) \
    X(aclrtFreeWithDevSync) \
    X(aclrtGetMemInfo) \
    X(aclrtResetDevice) \
    X(aclFinalize) \
    X(aclrtMallocPhysical) \
    X(aclrtFreePhysical) \
    X(aclrtMapMem) \
    X(aclrtUnmapMem) \
    X(aclrtReserveMemAddress) \
    X(aclrtSetDevice) \
    X(aclrtCreateContext) \
    X(aclrtDestroyContext) \
    X(aclrtSetCurrentContext)
/* X(name): functions the shim calls but does not define. */
#define SHIM_CALLS(X) X(aclrtGetDevice) X(aclrtSynchronizeDevice) X(aclrtReleaseMemAddress) \
    X(aclrtMemGetAllocationGranularity)
// clang-format on

enum real_id {
#define REAL_ENUM(name) REAL_##name,
    SHIM_HOOKS(REAL_ENUM) REAL_HOOK_COUNT,
    REAL_CALLS_FIRST = REAL_HOOK_COUNT - 1,
    SHIM_CALLS(REAL_ENUM) REAL_COUNT
#undef REAL_ENUM
};

/* Address of the real function (NULL when no runtime is loaded). */
void *real_get(enum real_id id);
/* Typed call helper: REAL(aclrtMalloc)(ptr, size, policy). NULL-check with real_get first. */
#define REAL(name) ((__typeof__(&name))real_get(REAL_##name))

/* Resolve every real function now (idempotent).  Called before npupool makes a thread wait on
 * another one that will call the runtime: a first resolution takes the loader lock, which a
 * thread inside dlopen() (a library constructor allocating) may hold while it waits for us. */
void real_resolve_all(void);

/* Hidden aliases of the shim's hook definitions (defined in entry.c): their addresses are the
 * shim's own code even when a program's canonical PLT address stands for the exported name. */
#define REAL_DECLARE_ALIAS(name) \
    extern __typeof__(name) shim_##name __attribute__((visibility("hidden")));
SHIM_HOOKS(REAL_DECLARE_ALIAS)
#undef REAL_DECLARE_ALIAS

/* glibc's dlsym (elf_glibc_dlsym), with one error line when it cannot be found. */

elf_dlsym_fn real_dlsym(void);

/* dlsym answer filter: when `sym` is the runtime's definition of a hooked name, return the hook
 * instead (and remember `sym` as the real function if none was known yet). */
void *real_substitute(const char *name, void *sym);

#endif
