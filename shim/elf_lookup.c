/* shim/elf_lookup.c — per-object dynamic symbol lookup (see elf_lookup.h for why it exists).
 *
 * Algorithm: read DT_SYMTAB, DT_STRTAB, DT_VERSYM, DT_VERDEF and DT_GNU_HASH (or DT_HASH) from the
 * object's dynamic section; walk the hash chain of `name`; accept a defined symbol of function or
 * object type whose version matches (the tables come from base/elf_dyn.h).
 */
#define _GNU_SOURCE
#include "elf_lookup.h"

#include "elf_dyn.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdint.h>
#include <unistd.h>

/* No libc string functions here: sanitizer runtimes intercept them and their interceptors are
 * not ready yet when the sanitizers' own start-up calls our dlsym. */
static int str_eq(const char *a, const char *b)
{
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

typedef elf_dyn_t dyn_tables_t;

static int read_tables(const struct link_map *map, dyn_tables_t *t) { return elf_dyn_read(map, t); }

static const char *version_name(const dyn_tables_t *t, ElfW(Half) index)
{
    const ElfW(Verdef) *vd = t->verdef;
    while (vd) {
        if (vd->vd_ndx == index) {
            const ElfW(Verdaux) *aux = (const ElfW(Verdaux) *)((const char *)vd + vd->vd_aux);
            return t->strtab + aux->vda_name;
        }
        if (!vd->vd_next) break;
        vd = (const ElfW(Verdef) *)((const char *)vd + vd->vd_next);
    }
    return NULL;
}

/* 1 when symbol i is a usable definition of `name` in the wanted version. */
static int symbol_matches(const dyn_tables_t *t, uint32_t i, const char *name, const char *version)
{
    const ElfW(Sym) *s = &t->symtab[i];
    int type = ELF64_ST_TYPE(s->st_info);
    if (s->st_shndx == SHN_UNDEF || s->st_value == 0) return 0;
    if (type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC && type != STT_NOTYPE)
        return 0;
    if (!str_eq(t->strtab + s->st_name, name)) return 0;
    if (!t->versym) return version == NULL;
    ElfW(Half) v = t->versym[i];
    if (version == NULL) return (v & 0x8000) == 0; /* default version only */
    const char *vname = version_name(t, v & 0x7fff);
    return vname && str_eq(vname, version);
}

static uint32_t gnu_hash_of(const char *s)
{
    uint32_t h = 5381;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = h * 33 + *p;
    return h;
}

static uint32_t sysv_hash_of(const char *s)
{
    uint32_t h = 0, g;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h = (h << 4) + *p;
        g = h & 0xf0000000u;
        if (g) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

static long find_index(const dyn_tables_t *t, const char *name, const char *version)
{
    if (t->gnu_hash) {
        const uint32_t *h = t->gnu_hash;
        uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(h + 4);
        const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t hash = gnu_hash_of(name);
        if (nbuckets == 0) return -1;
        for (uint32_t i = buckets[hash % nbuckets]; i >= symoffset && i != 0; i++) {
            uint32_t ch = chain[i - symoffset];
            if ((ch | 1) == (hash | 1) && symbol_matches(t, i, name, version)) return i;
            if (ch & 1) break;
        }
        return -1;
    }
    const uint32_t *h = t->sysv_hash;
    uint32_t nbucket = h[0];
    const uint32_t *bucket = h + 2, *chain = h + 2 + nbucket;
    for (uint32_t i = bucket[sysv_hash_of(name) % nbucket]; i != STN_UNDEF; i = chain[i])
        if (symbol_matches(t, i, name, version)) return i;
    return -1;
}

void *elf_lookup(const struct link_map *map, const char *name, const char *version)
{
    dyn_tables_t t;
    if (!map || read_tables(map, &t) != 0) return NULL;
    long i = find_index(&t, name, version);
    if (i < 0) return NULL;
    const ElfW(Sym) *s = &t.symtab[i];
    void *addr = (void *)((uintptr_t)map->l_addr + s->st_value);
    if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) addr = ((void *(*)(void))addr)();
    return addr;
}

struct link_map *elf_object_of(const void *addr)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP)) return NULL;
    return map;
}

static elf_dlsym_fn glibc_dlsym;   /* cached by find_glibc_dl */
static elf_dlvsym_fn glibc_dlvsym; /* cached by find_glibc_dl */

static void find_glibc_dl(void)
{
    if (__atomic_load_n(&glibc_dlsym, __ATOMIC_ACQUIRE)) return;
    /* libc.so.6 holds getpid; dlerror lives in libc.so.6 from glibc 2.34, in libdl.so.2 before. */
    const void *homes[] = {(const void *)&getpid, (const void *)&dlerror};
    void *s = NULL, *v = NULL;
    for (size_t i = 0; i < 2 && (!s || !v); i++) {
        struct link_map *map = elf_object_of(homes[i]);
        if (!s) s = elf_lookup(map, "dlsym", NULL);
        if (!v) v = elf_lookup(map, "dlvsym", NULL);
    }
    if (!s || !v) return;
    __atomic_store_n(&glibc_dlvsym, (elf_dlvsym_fn)v, __ATOMIC_RELEASE);
    __atomic_store_n(&glibc_dlsym, (elf_dlsym_fn)s, __ATOMIC_RELEASE);
}

elf_dlsym_fn elf_glibc_dlsym(void)
{
    find_glibc_dl();
    return glibc_dlsym;
}

elf_dlvsym_fn elf_glibc_dlvsym(void)
{
    find_glibc_dl();
    return glibc_dlvsym;
}
