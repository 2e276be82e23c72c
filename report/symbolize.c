/* report/symbolize.c — report-time symbolization (contract in symbolize.h).
 *
 * Owns: the lazily loaded libdw function table (process-wide, loaded once under dw_once), and the
 * per-report symbolizer: a module snapshot, a Dwfl session fed with exactly the modules that
 * appear in stacks (dwfl_report_elf with the load bias seen by dl_iterate_phdr), a pc -> frame
 * cache and a string arena.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <elfutils/libdwfl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buildid.h"
#include "elf_dyn.h"
#include "ledger.h"
#include "ledger_py.h"
#include "loader.h"
#include "symbolize.h"

/* ---- libdw, loaded on demand ------------------------------------------------------------------ */

// clang-format off
#define DW_FUNCS(X) \
    X(dwfl_begin) \
    X(dwfl_end) \
    X(dwfl_report_begin_add) \
    X(dwfl_report_elf) \
    X(dwfl_report_end) \
    X(dwfl_addrmodule) \
    X(dwfl_module_addrinfo) \
    X(dwfl_module_getsrc) \
    X(dwfl_lineinfo) \
    X(dwfl_line_comp_dir) \
    X(dwfl_build_id_find_elf) \
    X(dwfl_standard_find_debuginfo) \
    X(dwfl_offline_section_address) \
    X(dwfl_module_build_id)
// clang-format on

static struct {
#define DW_FIELD(name) __typeof__(&name) name;
    DW_FUNCS(DW_FIELD)
#undef DW_FIELD
    int ok; /* 1 when every function was found */
} dw;
static pthread_once_t dw_once = PTHREAD_ONCE_INIT;

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn cxa_demangle;

static void dw_load(void)
{
    cxa_demangle = (demangle_fn)ledger_dlsym()(RTLD_DEFAULT, "__cxa_demangle");
    void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    int ok = 1;
#define DW_LOAD(name)                                      \
    dw.name = (__typeof__(&name))ledger_dlsym()(h, #name); \
    if (!dw.name) ok = 0;
    DW_FUNCS(DW_LOAD)
#undef DW_LOAD
    dw.ok = ok;
}

int symbolize_have_libdw(void)
{
    pthread_once(&dw_once, dw_load);
    return dw.ok;
}

/* ---- the per-report symbolizer ---------------------------------------------------------------- */

typedef struct module {
    uintptr_t lo, hi;     /* mapped range of its PT_LOAD segments */
    uintptr_t bias;       /* load bias (dlpi_addr) */
    const char *path;     /* file path (arena) */
    const char *build_id; /* hex (arena) or NULL */
    int reported;         /* 0 = not yet given to dwfl, 1 = given, -1 = dwfl refused it */
} module_t;

typedef struct arena_chunk {
    struct arena_chunk *next; /* older chunk */
    size_t used, cap;         /* bytes used / usable after the header */
    char data[];              /* strings */
} arena_chunk_t;

struct symbolizer {
    int names;                 /* 1 = look up function/file/line */
    module_t *mods;            /* module snapshot */
    size_t nmods, capmods;     /* used / allocated */
    Dwfl *dwfl;                /* libdwfl session, NULL without libdw */
    symbolize_frame_t *frames; /* answers, in lookup order */
    size_t nframes, capframes;
    uint32_t *slot;            /* pc hash -> frame index + 1 */
    uint32_t mask;             /* slots - 1 */
    arena_chunk_t *arena;      /* string storage */
    Dwfl_Callbacks *callbacks; /* given to dwfl_begin, freed after dwfl_end */
    char exe[4096];            /* /proc/self/exe target */
};

static const char *arena_str(symbolizer_t *s, const char *str, size_t len)
{
    if (!str) return NULL;
    if (!s->arena || s->arena->cap - s->arena->used < len + 1) {
        size_t cap = len + 1 > 65536 ? len + 1 : 65536;
        arena_chunk_t *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = s->arena;
        c->used = 0;
        c->cap = cap;
        s->arena = c;
    }
    char *p = s->arena->data + s->arena->used;
    memcpy(p, str, len);
    p[len] = 0;
    s->arena->used += len + 1;
    return p;
}

static const char *build_id_hex(symbolizer_t *s, const struct dl_phdr_info *info)
{
    char hex[BUILDID_HEX_MAX];
    size_t n =
        buildid_of_phdrs(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr, hex, sizeof hex);
    return n ? arena_str(s, hex, n) : NULL;
}

static int snapshot_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    symbolizer_t *s = ctx;
    uintptr_t lo, hi;
    elf_load_range(info, &lo, &hi);
    if (lo >= hi) return 0;
    const char *path = info->dlpi_name;
    if (!path || !path[0]) path = s->exe[0] ? s->exe : NULL; /* the main program */
    if (!path) return 0;
    if (s->nmods == s->capmods) {
        size_t ncap = s->capmods ? s->capmods * 2 : 64;
        module_t *nm = realloc(s->mods, ncap * sizeof *nm);
        if (!nm) return 1;
        s->mods = nm;
        s->capmods = ncap;
    }
    module_t *m = &s->mods[s->nmods++];
    m->lo = lo;
    m->hi = hi;
    m->bias = info->dlpi_addr;
    m->path = arena_str(s, path, strlen(path));
    m->build_id = build_id_hex(s, info);
    m->reported = 0;
    return 0;
}

static const module_t *module_of(symbolizer_t *s, uintptr_t addr)
{
    for (size_t i = 0; i < s->nmods; i++)
        if (addr >= s->mods[i].lo && addr < s->mods[i].hi) return &s->mods[i];
    return NULL;
}

/* find_debuginfo callback.  elfutils' standard one also asks debuginfod servers when
 * DEBUGINFOD_URLS is set (Debian sets it in login shells): a report must never wait on the network
 * or download debug files, so then only the local build-id tree is searched.  The module's own
 * DWARF is used when this finds nothing. */
static int find_debuginfo_local(Dwfl_Module *mod, void **userdata, const char *modname,
                                GElf_Addr base, const char *file_name, const char *debuglink_file,
                                GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    const char *urls = getenv("DEBUGINFOD_URLS");
    if (!urls || !*urls)
        return dw.dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
                                               debuglink_file, debuglink_crc, debuginfo_file_name);
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int len = dw.dwfl_module_build_id(mod, &bits, &vaddr);
    if (len < 2 || len > 64) return -1;
    char path[64 + 2 * 64 + 16];
    int n = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", bits[0]);
    for (int i = 1; i < len; i++) n += snprintf(path + n, sizeof path - (size_t)n, "%02x", bits[i]);
    snprintf(path + n, sizeof path - (size_t)n, ".debug");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    *debuginfo_file_name = strdup(path);
    return fd;
}

symbolizer_t *symbolize_open(int names)
{
    symbolizer_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->names = names;
    ssize_t n = readlink("/proc/self/exe", s->exe, sizeof s->exe - 1);
    s->exe[n > 0 ? n : 0] = 0;
    loader_iterate(snapshot_cb, s);
    if (names && symbolize_have_libdw()) {
        static char *debuginfo_path = NULL;
        static const Dwfl_Callbacks cb_template = {0};
        Dwfl_Callbacks *cb = malloc(sizeof *cb);
        if (cb) {
            *cb = cb_template;
            cb->find_elf = dw.dwfl_build_id_find_elf;
            cb->find_debuginfo = find_debuginfo_local;
            cb->section_address = dw.dwfl_offline_section_address;
            cb->debuginfo_path = &debuginfo_path;
            s->dwfl = dw.dwfl_begin(cb);
            if (!s->dwfl)
                free(cb);
            else
                s->callbacks = cb;
        }
    }
    return s;
}

/* Demangle into the arena when possible. */
static const char *function_name(symbolizer_t *s, const char *name)
{
    if (!name) return NULL;
    /* .dynsym names can carry a symbol version ("__libc_start_main@@GLIBC_2.34"): drop it. */
    const char *at = strchr(name, '@');
    if (at && at != name) {
        char plain[512];
        size_t n = (size_t)(at - name) < sizeof plain - 1 ? (size_t)(at - name) : sizeof plain - 1;
        memcpy(plain, name, n);
        plain[n] = 0;
        return function_name(s, plain);
    }
    if (cxa_demangle && name[0] == '_' && name[1] == 'Z') {
        int status = -1;
        char *d = cxa_demangle(name, NULL, NULL, &status);
        if (d && status == 0) {
            const char *r = arena_str(s, d, strlen(d));
            free(d);
            return r;
        }
        free(d);
    }
    return arena_str(s, name, strlen(name));
}

static void lookup_dwfl(symbolizer_t *s, module_t *m, uintptr_t addr, symbolize_frame_t *f)
{
    if (m->reported == 0) {
        dw.dwfl_report_begin_add(s->dwfl);
        Dwfl_Module *dm = dw.dwfl_report_elf(s->dwfl, m->path, m->path, -1, m->bias, false);
        dw.dwfl_report_end(s->dwfl, NULL, NULL);
        m->reported = dm ? 1 : -1;
    }
    if (m->reported < 0) return;
    Dwfl_Module *dm = dw.dwfl_addrmodule(s->dwfl, addr);
    if (!dm) return;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dw.dwfl_module_addrinfo(dm, addr, &off, &sym, NULL, NULL, NULL);
    f->function = function_name(s, name);
    Dwfl_Line *line = dw.dwfl_module_getsrc(dm, addr);
    if (line) {
        int lineno = 0;
        const char *file = dw.dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (file) {
            const char *dir = file[0] == '/' ? NULL : dw.dwfl_line_comp_dir(line);
            if (dir && dir[0]) { /* relative to the compilation directory: make it absolute */
                char full[4096];
                snprintf(full, sizeof full, "%s/%s", dir, file);
                f->file = arena_str(s, full, strlen(full));
            } else {
                f->file = arena_str(s, file, strlen(file));
            }
            f->line = lineno;
        }
    }
}

static void lookup_dladdr(symbolizer_t *s, uintptr_t addr, symbolize_frame_t *f)
{
    Dl_info info;
    if (dladdr((void *)addr, &info) && info.dli_sname)
        f->function = function_name(s, info.dli_sname);
}

static void lookup(symbolizer_t *s, uintptr_t pc, symbolize_frame_t *f)
{
    memset(f, 0, sizeof *f);
    f->pc = pc;
    ledger_py_frame_t py;
    if (ledger_py_frame(pc, &py)) { /* the strings live as long as the process */
        f->python = 1;
        f->function = py.function;
        f->file = py.file;
        f->line = (int)py.line;
        return;
    }
    uintptr_t addr = pc ? pc - 1 : 0; /* the call instruction, not the one after it */
    module_t *m = (module_t *)module_of(s, addr);
    if (!m) {
        f->offset = addr;
        return;
    }
    f->module = m->path;
    f->build_id = m->build_id;
    f->offset = addr - m->bias;
    if (!s->names) return;
    if (s->dwfl) lookup_dwfl(s, m, addr, f);
    if (!f->function) lookup_dladdr(s, addr, f);
}

static uint32_t pc_hash(uintptr_t pc)
{
    uint64_t x = pc * 0x9e3779b97f4a7c15ULL;
    return (uint32_t)(x >> 32);
}

static int cache_grow(symbolizer_t *s)
{
    uint32_t nslots = s->slot ? (s->mask + 1) * 2 : 4096;
    uint32_t *ns = calloc(nslots, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < s->nframes; i++) {
        uint32_t j = pc_hash(s->frames[i].pc) & (nslots - 1);
        while (ns[j]) j = (j + 1) & (nslots - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(s->slot);
    s->slot = ns;
    s->mask = nslots - 1;
    return 0;
}

void symbolize_lookup(symbolizer_t *s, uintptr_t pc, symbolize_frame_t *out)
{
    if (!s->slot || (s->nframes + 1) * 2 > (size_t)s->mask + 1) {
        if (cache_grow(s) != 0) {
            lookup(s, pc, out);
            return;
        }
    }
    uint32_t j = pc_hash(pc) & s->mask;
    for (; s->slot[j]; j = (j + 1) & s->mask) {
        if (s->frames[s->slot[j] - 1].pc == pc) {
            *out = s->frames[s->slot[j] - 1];
            return;
        }
    }
    lookup(s, pc, out);
    if (s->nframes == s->capframes) {
        size_t ncap = s->capframes ? s->capframes * 2 : 1024;
        symbolize_frame_t *nf = realloc(s->frames, ncap * sizeof *nf);
        if (!nf) return;
        s->frames = nf;
        s->capframes = ncap;
    }
    s->frames[s->nframes] = *out;
    s->slot[j] = (uint32_t)++s->nframes;
}

void symbolize_close(symbolizer_t *s)
{
    if (!s) return;
    if (s->dwfl) dw.dwfl_end(s->dwfl);
    free(s->callbacks);
    while (s->arena) {
        arena_chunk_t *next = s->arena->next;
        free(s->arena);
        s->arena = next;
    }
    free(s->mods);
    free(s->frames);
    free(s->slot);
    free(s);
}
