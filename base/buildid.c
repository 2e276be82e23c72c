/* base/buildid.c — GNU build ids of loaded objects and of files (see buildid.h). */
#define _GNU_SOURCE
#include "buildid.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"

#define NOTES_MAX 4096 /* bytes of one PT_NOTE segment read from a file */

size_t buildid_from_notes(const void *notes, size_t len, char *hex, size_t cap)
{
    static const char digits[] = "0123456789abcdef";
    const char *p = notes, *end = p + len;
    if (cap) hex[0] = 0;
    while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) n;
        memcpy(&n, p, sizeof n); /* a file's notes may sit at any alignment in our buffer */
        size_t name_len = ((size_t)n.n_namesz + 3) & ~(size_t)3;
        size_t desc_len = ((size_t)n.n_descsz + 3) & ~(size_t)3;
        const char *name = p + sizeof n;
        if (name_len > (size_t)(end - name) || desc_len > (size_t)(end - name) - name_len) break;
        const unsigned char *desc = (const unsigned char *)name + name_len;
        if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
            n.n_descsz > 0 && 2 * (size_t)n.n_descsz < cap) {
            for (size_t k = 0; k < n.n_descsz; k++) {
                hex[2 * k] = digits[desc[k] >> 4];
                hex[2 * k + 1] = digits[desc[k] & 15];
            }
            hex[2 * n.n_descsz] = 0;
            return 2 * (size_t)n.n_descsz;
        }
        p = (const char *)desc + desc_len;
    }
    return 0;
}

size_t buildid_of_phdrs(const ElfW(Phdr) * phdr, int phnum, uintptr_t bias, char *hex, size_t cap)
{
    if (cap) hex[0] = 0;
    for (int i = 0; i < phnum; i++) {
        if (phdr[i].p_type != PT_NOTE) continue;
        size_t n =
            buildid_from_notes((const void *)(bias + phdr[i].p_vaddr), phdr[i].p_memsz, hex, cap);
        if (n) return n;
    }
    return 0;
}

typedef struct addr_query {
    uintptr_t addr; /* the address asked about */
    char *hex;      /* out: build id */
    size_t cap;     /* its capacity */
    char *path;     /* out: the object's path, or NULL */
    size_t pathcap; /* its capacity */
    size_t found;   /* hex length; also set (to 0) when the object was found without a build id */
    int hit;        /* 1 once the object was found */
} addr_query_t;

static int addr_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    addr_query_t *q = ctx;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || q->addr < lo || q->addr - lo >= ph->p_memsz) continue;
        q->hit = 1;
        q->found =
            buildid_of_phdrs(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr, q->hex, q->cap);
        if (q->path && q->pathcap) {
            const char *name = info->dlpi_name;
            if (name && name[0]) {
                size_t n = strlen(name);
                if (n >= q->pathcap) n = q->pathcap - 1;
                memcpy(q->path, name, n);
                q->path[n] = 0;
            } else { /* the main program */
                ssize_t n = readlink("/proc/self/exe", q->path, q->pathcap - 1);
                q->path[n > 0 ? (size_t)n : 0] = 0;
            }
        }
        return 1;
    }
    return 0;
}

size_t buildid_of_address(const void *addr, char *hex, size_t cap, char *path, size_t pathcap)
{
    addr_query_t q = {(uintptr_t)addr, hex, cap, path, pathcap, 0, 0};
    if (cap) hex[0] = 0;
    if (path && pathcap) path[0] = 0;
    loader_iterate(addr_cb, &q);
    return q.found;
}

size_t buildid_of_file(const char *file, char *hex, size_t cap)
{
    if (cap) hex[0] = 0;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t found = 0;
    ElfW(Ehdr) eh;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
        memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) &&
        eh.e_ident[EI_DATA] ==
            (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB) &&
        eh.e_phentsize == sizeof(ElfW(Phdr))) {
        for (unsigned i = 0; i < eh.e_phnum && !found; i++) {
            ElfW(Phdr) ph;
            off_t at = (off_t)eh.e_phoff + (off_t)i * (off_t)sizeof ph;
            if (pread(fd, &ph, sizeof ph, at) != (ssize_t)sizeof ph) break;
            if (ph.p_type != PT_NOTE) continue;
            char notes[NOTES_MAX];
            size_t want = ph.p_filesz < sizeof notes ? (size_t)ph.p_filesz : sizeof notes;
            ssize_t got = pread(fd, notes, want, (off_t)ph.p_offset);
            if (got > 0) found = buildid_from_notes(notes, (size_t)got, hex, cap);
        }
    }
    close(fd);
    return found;
}
