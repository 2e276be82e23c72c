/* shim/real.c — resolution of real runtime functions (see real.h for the contract). */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "elf_lookup.h"
#include "loader.h"
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

/* The first loaded object whose file name is libascendcl.so[.*] (the runtime the process loaded,
 * whichever way: DT_NEEDED through the program's own RUNPATH, dlopen by absolute path, a later
 * dlopen; with or without a DT_SONAME). */
static int find_runtime_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (!base || strncmp(base, "libascendcl.so", 14) != 0 || (base[14] && base[14] != '.'))
        return 0;
    snprintf((char *)ctx, PATH_MAX, "%s", name);
    return 1;
}

/* A handle of the loaded runtime, or NULL.  Where the host found it: the object that defines a
 * real function learnt already (the host's own dlsym answer), else the first loaded
 * libascendcl.so, else the soname. */
static void *runtime_handle(void)
{
    char path[PATH_MAX] = "";
    for (int id = 0; id < REAL_COUNT && !path[0]; id++) {
        void *known = __atomic_load_n(&real_cache[id], __ATOMIC_ACQUIRE);
        Dl_info info;
        if (known && dladdr(known, &info) && info.dli_fname)
            snprintf(path, sizeof path, "%s", info.dli_fname);
    }
    if (!path[0]) loader_iterate(find_runtime_cb, path);
    return dlopen(path[0] ? path : "libascendcl.so", RTLD_LAZY | RTLD_NOLOAD);
}

static void *resolve(enum real_id id)
{
    elf_dlsym_fn dls = real_dlsym();
    if (!dls) return NULL;
    /* glibc's dlsym sees this file as its caller, so RTLD_NEXT means "after libnpupool.so". */
    void *p = dls(RTLD_NEXT, real_names[id]);
    if (p && is_own_code(p)) p = NULL; /* never ourselves */
    if (!p) {
        void *h = runtime_handle(); /* loaded RTLD_LOCAL (ctypes, torch_npu): not in the scope */
        if (h) {
            p = dls(h, real_names[id]);
            dlclose(h);
        }
    }
    if (p && is_own_code(p)) p = NULL;
    if (!p) {
        static int said; /* once per process */
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            log_info("no loaded libascendcl.so defines %s (yet): such calls go to whatever the "
                     "program binds them to until a runtime is loaded",
                     real_names[id]);
    }
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
