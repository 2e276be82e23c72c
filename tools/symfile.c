/* tools/symfile.c — the offline symbolizer declared in symfile.h.
 *
 * One Dwfl session per module (dwfl_report_offline), kept in a small array cache keyed by the
 * module path and the build id asked for.  Addresses: the report's offset is an ELF virtual
 * address; dwfl places an offline module at a bias, so the lookup address is offset + bias.
 * Names: dwfl_module_addrinfo reads .symtab (static functions included), else .dynsym, else
 * .gnu_debugdata; file:line from DWARF, also from a separate debug file found by build id.  Names
 * are given as the shim writes them in-process: a .dynsym name's symbol version dropped, C++
 * names demangled with __cxa_demangle from libstdc++.so.6 when it can be loaded (dlopen, once);
 * each rewritten name is kept once per symbol (a small table keyed by the symbol name's address
 * in the module's string table).
 */
#include "symfile.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct tmod {
    char *path;       /* module path as written in the report */
    char *build_id;   /* build id asked for ("" = none) */
    Dwfl *dwfl;       /* session, NULL when the module could not be used */
    Dwfl_Module *mod; /* the module in it */
    int status;       /* SYMFILE_OK, or why it cannot be used */
} tmod_t;

/* A demangled name, keyed by the mangled name's address (stable while its module is open). */
typedef struct dname {
    const char *raw; /* the mangled name as dwfl returned it, NULL = empty slot */
    char *name;      /* malloc'ed demangled name */
} dname_t;

struct symfile {
    dname_t *names;       /* demangled names, open addressing */
    size_t nnames;        /* used */
    size_t capnames;      /* slots (a power of two) */
    tmod_t *mods;         /* cache */
    size_t n, cap;        /* used / allocated entries */
    char *debuginfo_path; /* for the callbacks (NULL = libdwfl's default) */
    Dwfl_Callbacks cb;    /* offline callbacks */
    char *map_old;        /* path prefix to replace (NULL = none) */
    char *map_new;        /* its replacement */
};

symfile_t *symfile_open(const char *debug_dir, const char *path_map)
{
    symfile_t *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    if (debug_dir) {
        /* Keep the standard places and add the user's directory. */
        size_t n = strlen(debug_dir) + 32;
        s->debuginfo_path = malloc(n);
        if (s->debuginfo_path == NULL) goto oom;
        snprintf(s->debuginfo_path, n, ":.debug:/usr/lib/debug:%s", debug_dir);
    }
    s->cb.find_elf = dwfl_build_id_find_elf;
    s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
    s->cb.section_address = dwfl_offline_section_address;
    s->cb.debuginfo_path = s->debuginfo_path ? &s->debuginfo_path : NULL;
    if (path_map) {
        const char *eq = strchr(path_map, '=');
        if (eq == NULL) eq = path_map + strlen(path_map);
        s->map_old = strndup(path_map, (size_t)(eq - path_map));
        s->map_new = strdup(*eq ? eq + 1 : "");
        if (s->map_old == NULL || s->map_new == NULL) goto oom;
    }
    return s;
oom:
    symfile_close(s);
    return NULL;
}

static void hex_of(const unsigned char *b, int n, char *out, size_t cap)
{
    static const char d[] = "0123456789abcdef";
    size_t k = 0;
    for (int i = 0; i < n && k + 2 < cap; i++) {
        out[k++] = d[b[i] >> 4];
        out[k++] = d[b[i] & 15];
    }
    out[k] = '\0';
}

/* Try to open `path` as the module; checks the build id when one is asked for. */
static int try_open(symfile_t *s, tmod_t *m, const char *path)
{
    if (access(path, R_OK) != 0) return SYMFILE_NO_MODULE;
    Dwfl *dwfl = dwfl_begin(&s->cb);
    if (dwfl == NULL) return SYMFILE_NO_MODULE;
    dwfl_report_begin(dwfl);
    Dwfl_Module *mod = dwfl_report_offline(dwfl, path, path, -1);
    dwfl_report_end(dwfl, NULL, NULL);
    if (mod == NULL) {
        dwfl_end(dwfl);
        return SYMFILE_NO_MODULE;
    }
    if (m->build_id[0]) {
        const unsigned char *bits;
        GElf_Addr vaddr;
        int n = dwfl_module_build_id(mod, &bits, &vaddr);
        char hex[130];
        if (n > 0) hex_of(bits, n, hex, sizeof hex);
        if (n <= 0 || strcmp(hex, m->build_id) != 0) {
            dwfl_end(dwfl);
            return SYMFILE_BUILD_ID;
        }
    }
    m->dwfl = dwfl;
    m->mod = mod;
    return SYMFILE_OK;
}

static tmod_t *module_get(symfile_t *s, const char *path, const char *build_id)
{
    const char *bid = build_id ? build_id : "";
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->mods[i].path, path) == 0 && strcmp(s->mods[i].build_id, bid) == 0)
            return &s->mods[i];
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        tmod_t *nm = realloc(s->mods, nc * sizeof *nm);
        if (nm == NULL) return NULL;
        s->mods = nm;
        s->cap = nc;
    }
    tmod_t *m = &s->mods[s->n];
    memset(m, 0, sizeof *m);
    m->path = strdup(path);
    m->build_id = strdup(bid);
    if (m->path == NULL || m->build_id == NULL) {
        free(m->path), free(m->build_id);
        return NULL;
    }
    s->n++;
    char mapped[4096];
    const char *p = path;
    if (s->map_old && strncmp(path, s->map_old, strlen(s->map_old)) == 0) {
        snprintf(mapped, sizeof mapped, "%s%s", s->map_new, path + strlen(s->map_old));
        p = mapped;
    }
    m->status = try_open(s, m, p);
    if (m->status != SYMFILE_OK && bid[0] && strlen(bid) > 2) {
        /* The installed debug file for this build id, wherever the binary went. */
        char dbg[512];
        snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%.2s/%s.debug", bid, bid + 2);
        int st = try_open(s, m, dbg);
        if (st == SYMFILE_OK) m->status = SYMFILE_OK;
    }
    return m;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn demangler(void)
{
    static int tried;
    static demangle_fn fn;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h) fn = (demangle_fn)dlsym(h, "__cxa_demangle");
    }
    return fn;
}

static size_t dname_slot(const dname_t *t, size_t cap, const char *raw)
{
    size_t i = ((uintptr_t)raw * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
    while (t[i].raw && t[i].raw != raw) i = (i + 1) & (cap - 1);
    return i;
}

/* The name as the shim writes it in-process (kept until symfile_close): a .dynsym name's symbol
 * version dropped ("__libc_start_main@@GLIBC_2.34"), a C++ name demangled; else the name itself. */
static const char *demangled(symfile_t *s, const char *raw)
{
    const char *at = raw ? strchr(raw, '@') : NULL;
    int cxx = raw && raw[0] == '_' && raw[1] == 'Z' && demangler() != NULL;
    if (raw == NULL || ((!at || at == raw) && !cxx)) return raw;
    if (s->nnames * 2 >= s->capnames) {
        size_t cap = s->capnames ? s->capnames * 2 : 256;
        dname_t *t = calloc(cap, sizeof *t);
        if (t == NULL) return raw;
        for (size_t i = 0; i < s->capnames; i++)
            if (s->names[i].raw) t[dname_slot(t, cap, s->names[i].raw)] = s->names[i];
        free(s->names);
        s->names = t;
        s->capnames = cap;
    }
    dname_t *d = &s->names[dname_slot(s->names, s->capnames, raw)];
    if (d->raw) return d->name;
    char *plain = at && at != raw ? strndup(raw, (size_t)(at - raw)) : NULL;
    int status = -1;
    char *name = cxx ? demangler()(plain ? plain : raw, NULL, NULL, &status) : NULL;
    if (name == NULL || status != 0) {
        free(name);
        name = plain; /* the version dropped, or NULL */
    } else {
        free(plain);
    }
    if (name == NULL) return raw;
    d->raw = raw;
    d->name = name;
    s->nnames++;
    return name;
}

int symfile_lookup(symfile_t *s, const char *module, const char *build_id, uint64_t offset,
                   const char **function, const char **file, int *line)
{
    *function = NULL;
    *file = NULL;
    *line = 0;
    if (module == NULL || module[0] == '\0') return SYMFILE_NO_MODULE;
    tmod_t *m = module_get(s, module, build_id);
    if (m == NULL) return SYMFILE_NO_MODULE;
    if (m->status != SYMFILE_OK) return m->status;
    Dwarf_Addr bias = 0;
    if (dwfl_module_getelf(m->mod, &bias) == NULL) return SYMFILE_NOTHING;
    Dwarf_Addr addr = (Dwarf_Addr)offset + bias;
    GElf_Off off;
    GElf_Sym sym;
    *function = demangled(s, dwfl_module_addrinfo(m->mod, addr, &off, &sym, NULL, NULL, NULL));
    Dwfl_Line *l = dwfl_module_getsrc(m->mod, addr);
    if (l) {
        int ln = 0;
        const char *src = dwfl_lineinfo(l, NULL, &ln, NULL, NULL, NULL);
        if (src) {
            *file = src;
            *line = ln;
        }
    }
    return (*function || *file) ? SYMFILE_OK : SYMFILE_NOTHING;
}

void symfile_close(symfile_t *s)
{
    if (s == NULL) return;
    for (size_t i = 0; i < s->n; i++) {
        if (s->mods[i].dwfl) dwfl_end(s->mods[i].dwfl);
        free(s->mods[i].path);
        free(s->mods[i].build_id);
    }
    free(s->mods);
    for (size_t i = 0; i < s->capnames; i++) free(s->names[i].name);
    free(s->names);
    free(s->debuginfo_path);
    free(s->map_old);
    free(s->map_new);
    free(s);
}
