/* shim/real.c — resolution of real runtime functions (see real.h for the contract). */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <string.h>

#include "elf_lookup.h"
#include "log.h"

static const char *const real_names[REAL_COUNT] = {
#define REAL_NAME(name) [REAL_##name] = #name,
    SHIM_HOOKS(REAL_NAME) SHIM_CALLS(REAL_NAME)
#undef REAL_NAME
};

static void *const hook_addresses[REAL_HOOK_COUNT] = {
#define HOOK_ADDR(name) [REAL_##name] = (void *)&shim_##name,
    SHIM_HOOKS(HOOK_ADDR)
#undef HOOK_ADDR
};

static void *real_cache[REAL_COUNT]; /* resolved addresses, atomically published */

elf_dlsym_fn real_dlsym(void)
{
    elf_dlsym_fn f = elf_glibc_dlsym();
    if (!f) log_error("cannot find glibc's dlsym; npupool cannot reach the runtime");
    return f;
}

/* 1 when p lies in libnpupool.so itself: such an address must never be taken for the runtime's. */
static int is_own_code(const void *p)
{
    static const void *own_base; /* atomic: threads may race to set the same value */
    Dl_info self, other;
    const void *base = __atomic_load_n(&own_base, __ATOMIC_RELAXED);
    if (!base && dladdr((const void *)&is_own_code, &self)) {
        base = self.dli_fbase;
        __atomic_store_n(&own_base, base, __ATOMIC_RELAXED);
    }
    return dladdr(p, &other) && other.dli_fbase == base;
}

static void *resolve(enum real_id id)
{
    elf_dlsym_fn dls = real_dlsym();
    if (!dls) return NULL;
    /* glibc's dlsym sees this file as its caller, so RTLD_NEXT means "after libnpupool.so". */
    void *p = dls(RTLD_NEXT, real_names[id]);
    if (!p) {
        void *h = dlopen("libascendcl.so", RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            p = dls(h, real_names[id]);
            dlclose(h);
        }
    }
    if (p && is_own_code(p)) p = NULL; /* never ourselves */
    return p;
}

void *real_get(enum real_id id)
{
    void *p = __atomic_load_n(&real_cache[id], __ATOMIC_ACQUIRE);
    if (p) return p;
    p = resolve(id);
    if (p) {
        void *expected = NULL;
        if (!__atomic_compare_exchange_n(&real_cache[id], &expected, p, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            p = expected;
    }
    return p;
}

void *real_substitute(const char *name, void *sym)
{
    if (!sym || !name || strncmp(name, "acl", 3) != 0) return sym;
    for (int id = 0; id < REAL_HOOK_COUNT; id++) {
        if (strcmp(name, real_names[id]) != 0) continue;
        if (sym == hook_addresses[id] || is_own_code(sym)) return sym;
        void *expected = NULL;
        __atomic_compare_exchange_n(&real_cache[id], &expected, sym, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
        void *real = __atomic_load_n(&real_cache[id], __ATOMIC_ACQUIRE);
        return sym == real ? hook_addresses[id] : sym;
    }
    return sym;
}

void real_resolve_all(void)
{
    for (int id = 0; id < REAL_COUNT; id++) real_get((enum real_id)id);
}
