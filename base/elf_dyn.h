/* base/elf_dyn.h — the dynamic section of one loaded ELF object, read in place.
 *
 * Owns: elf_dyn_read, the one reader of an object's DT_* tables: its dynamic symbol and string
 * tables, symbol versions, hash tables, and relocation tables (PLT and the rest); and
 * elf_load_range, the address range an object's loaded segments cover.  The shim's
 * symbol lookup (shim/elf_lookup.c, which must run before sanitizer runtimes are ready) and the
 * ledger's guard of libunwind's imports (ledger/ledger_unwind.c) both use it.
 * Header-only, static inline, no libc call, no allocation: safe anywhere, even uninstrumented.
 * glibc relocates most d_ptr values in place on x86-64 but not on every target: an address below
 * the load base is taken as unrelocated and the base is added.
 */
#ifndef NPUPOOL_BASE_ELF_DYN_H
#define NPUPOOL_BASE_ELF_DYN_H

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

typedef struct elf_dyn {
    const ElfW(Sym) * symtab;    /* .dynsym */
    const char *strtab;          /* .dynstr */
    const ElfW(Half) * versym;   /* version index per symbol, may be NULL */
    const ElfW(Verdef) * verdef; /* version definitions, may be NULL */
    const uint32_t *gnu_hash;    /* DT_GNU_HASH, may be NULL */
    const uint32_t *sysv_hash;   /* DT_HASH, may be NULL */
    uintptr_t jmprel;            /* PLT relocations (DT_JMPREL), 0 = none */
    size_t jmprel_bytes;         /* DT_PLTRELSZ */
    int pltrel_is_rela;          /* DT_PLTREL == DT_RELA */
    uintptr_t rela;              /* other relocations with addends (DT_RELA), 0 = none */
    size_t rela_bytes;           /* DT_RELASZ */
} elf_dyn_t;

static inline uintptr_t elf_dyn_fix(const struct link_map *map, uintptr_t p)
{
    return p < (uintptr_t)map->l_addr ? p + (uintptr_t)map->l_addr : p;
}

/* Read map's dynamic section.  0 when it has a symbol table, a string table and a hash table,
 * else -1. */
static inline int elf_dyn_read(const struct link_map *map, elf_dyn_t *t)
{
    *t = (elf_dyn_t){0};
    for (const ElfW(Dyn) *d = map->l_ld; d && d->d_tag != DT_NULL; d++) {
        uintptr_t p = elf_dyn_fix(map, (uintptr_t)d->d_un.d_ptr);
        switch (d->d_tag) {
        case DT_SYMTAB: t->symtab = (const ElfW(Sym) *)p; break;
        case DT_STRTAB: t->strtab = (const char *)p; break;
        case DT_VERSYM: t->versym = (const ElfW(Half) *)p; break;
        case DT_VERDEF: t->verdef = (const ElfW(Verdef) *)p; break;
        case DT_GNU_HASH: t->gnu_hash = (const uint32_t *)p; break;
        case DT_HASH: t->sysv_hash = (const uint32_t *)p; break;
        case DT_JMPREL: t->jmprel = p; break;
        case DT_PLTRELSZ: t->jmprel_bytes = (size_t)d->d_un.d_val; break;
        case DT_PLTREL: t->pltrel_is_rela = d->d_un.d_val == DT_RELA; break;
        case DT_RELA: t->rela = p; break;
        case DT_RELASZ: t->rela_bytes = (size_t)d->d_un.d_val; break;
        default: break;
        }
    }
    return t->symtab && t->strtab && (t->gnu_hash || t->sysv_hash) ? 0 : -1;
}

/* The address range [*lo, *hi) an object's PT_LOAD segments cover (as dl_iterate_phdr reports
 * the object); *lo >= *hi when it has none. */
static inline void elf_load_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < *lo) *lo = a;
        if (a + ph->p_memsz > *hi) *hi = a + ph->p_memsz;
    }
}

#endif
