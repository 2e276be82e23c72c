/* ledger/ledger_file.c — the ledger file's writer (contract in ledger_file.h, format in
 * base/ledger_format.h).
 *
 * Owns: the file (its path, its mapped segments, the chunks carved from them), each shard's slot
 * table, the append chunks of stacks, modules and Python frames, the module map, the device
 * figures, and the header's identity (npupool's version and object, the runtime's).  Another
 * interned table is one more app_t of its own chunk kind: app_add() frames and commits its
 * entries, tools/ledger_read.c's read_append() walks them.
 *
 * Space: the file grows by segments, each reserved with fallocate and mapped shared at once (then
 * the descriptor is closed); chunks are carved from the last segment back to back, 64-byte
 * aligned; the rest of a segment that cannot hold the next chunk becomes a PAD chunk.  A segment
 * is as large as the file so far (the file doubles), between SEG_MIN and SEG_MAX, and never
 * reaches past RLIMIT_FSIZE.
 * Slots: record n of shard k lives in slot n of that shard's record chunks, which hold REC_FIRST,
 * 2 REC_FIRST, ... up to REC_MAX slots each, in order: a fixed function of (k, n) with no index.
 * The shard's table grp[n / LFMT_GROUP] points at the group of LFMT_GROUP slots holding n, so an
 * allocation is one table load and the slot's stores.
 * Modules: a capture that returns a stack never checked before asks the loader whether any object
 * was added or removed since the last look (dlpi_adds/dlpi_subs, one dl_iterate_phdr call that
 * stops at the first object); when one was, the loaded objects are read and every one that is not
 * the latest entry for its address range is appended, tagged with the first stack id that may
 * refer to it (every stack not yet checked).
 * Python frames: the Python frame table (ledger_py_table.c) hands each frame it interns to
 * ledger_file_pyframe_added, under its lock, in id order; like a stack, a frame is appended once,
 * and a new file (a fork child's) starts with every frame interned so far.  A stack holding a
 * frame is interned after the frame, so its entry follows the frame's.
 * Identity: the header names the npupool that writes it (version, libnpupool.so's path and build
 * id, learnt at ledger_file_open) and, once the shim knows it (ledger_file_runtime: at the first
 * allocation at the latest), the runtime library; both are kept in lf for a fork child's file.
 * Invariants: header.chunk_end covers only complete chunk headers; every mapped slot is FREE,
 * WRITING or committed; a shard's `mapped` slots all lie in mapped segments of the current file;
 * lf.stacks_known = the highest stack id interned (all of 1..it are in the file unless space ran
 * out, which header.stacks_lost counts; written under the stack table's lock, read under the
 * file lock); lf.py_known likewise for Python frames (header.pyframes_lost; the Python frame
 * table's lock).
 * Locking: lf.lock (the file lock, a leaf: taken under the stack table's, the Python frame
 * table's or a shard's lock) guards lf; msh[k] is guarded by shard k's lock (the caller's); the
 * flags the hooks read without a lock are atomics.
 */
#define _GNU_SOURCE
#include "ledger_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buildid.h"
#include "clock.h"
#include "fmt.h"
#include "ledger_internal.h"
#include "loader.h"
#include "log.h"
#include "path.h"
#include "rank.h"
#include "version.h"

#define SEG_MIN ((uint64_t)256 << 10)    /* smallest segment, bytes */
#define SEG_MAX ((uint64_t)32 << 20)     /* largest segment, bytes */
#define SEG_SLOTS 512u                   /* segments at most (the file then holds >= 8 GiB) */
#define REC_FIRST 64u                    /* slots of a shard's first record chunk */
#define REC_MAX 16384u                   /* slots of its largest record chunks (1 MiB) */
#define APPEND_FIRST ((uint64_t)4 << 10) /* bytes of the first stacks / modules chunk */
#define APPEND_MAX ((uint64_t)1 << 20)   /* bytes of the largest */
#define NAME_TRIES 100                   /* PATH, PATH.1, ... PATH.99: an existing file is kept */
#define ENTRY_MAX (16u + sizeof(lfmt_module_t) + LFMT_MAX_BUILD_ID + LFMT_MAX_PATH + 16u)
#define PYFRAME_MAX (sizeof(lfmt_pyframe_t) + 2 * LFMT_MAX_PY_NAME) /* a PYFRAMES payload */

_Static_assert(16u + PYFRAME_MAX + 16u <= ENTRY_MAX, "a Python frame entry fits app_add's buffer");
_Static_assert(LEDGER_MAX_DEPTH <= LFMT_MAX_DEPTH, "every stack fits a stack entry whole");

enum lf_state {
    LF_OFF = 0,     /* no file (none configured, none could be made, or a child without %p) */
    LF_ACTIVE = 1,  /* mirroring into lf's file */
    LF_PENDING = 2, /* a fork child: its own file is made at its first allocation */
};

typedef struct seg {
    char *addr;   /* mapping */
    uint64_t off; /* file offset of its first byte */
    uint64_t len; /* bytes */
} seg_t;

/* An append chunk being filled (stacks, modules, Python frames). */
typedef struct app {
    uint16_t kind;     /* LFMT_KIND_STACKS / LFMT_KIND_MODULES / LFMT_KIND_PYFRAMES */
    char *data;        /* first entry byte (after the chunk header), NULL = no chunk yet */
    uint64_t used;     /* bytes of entries written */
    uint64_t cap;      /* bytes available for entries */
    uint64_t next_cap; /* entry bytes of the next chunk */
} app_t;

/* One loaded object as appended to the file. */
typedef struct module {
    uint64_t base, lo, hi;                /* load bias, mapped range */
    uint32_t first_stack;                 /* the entry's tag */
    uint32_t bid_len;                     /* bytes of bid */
    unsigned char bid[LFMT_MAX_BUILD_ID]; /* GNU build id */
    char *path;                           /* malloc'ed */
} module_t;

typedef struct module_list {
    module_t *m;  /* entries */
    size_t n;     /* used */
    size_t cap;   /* allocated */
    size_t bytes; /* host memory, bytes */
} module_list_t;

static struct {
    pthread_mutex_t lock;    /* the file lock: every field below */
    const char *pattern;     /* NPUPOOL_LEDGER_FILE */
    char *config;            /* options text for the header (malloc'ed) */
    int depth;               /* backtrace depth for the header */
    enum lf_state state;     /* see enum lf_state */
    char expanded[PATH_MAX]; /* the pattern as the first process expanded it */
    char path[2][PATH_MAX];  /* the file's path (two: the published one is never rewritten) */
    int path_cur;            /* which of path[] is the file's */
    dev_t dev;               /* the file's device ... */
    ino_t ino;               /* ... and inode (a file put in its place is never grown) */
    lfmt_header_t *hdr;      /* in the first segment */
    seg_t segs[SEG_SLOTS];   /* mapped segments, in file order */
    unsigned nsegs;          /* used */
    uint64_t seg_used;       /* bytes carved from the last segment */
    uint64_t file_bytes;     /* bytes reserved */
    app_t stacks;            /* the stacks being appended */
    app_t modules;           /* the modules being appended */
    app_t pyframes;          /* the Python frames being appended */
    lfmt_device_chunk_t *devfig[LFMT_DEVICE_SLOTS]; /* figures per device (64 = unknown) */
    uint32_t stacks_known;          /* atomic: highest stack id interned (see Invariants) */
    uint32_t stacks_written;        /* highest stack id written to the current file */
    uint32_t py_known;              /* atomic: highest Python frame id interned (likewise) */
    uint32_t py_written;            /* highest Python frame id written to the current file */
    char version[LFMT_MAX_VERSION]; /* npupool's version, for every header */
    lfmt_library_t self;            /* libnpupool.so (the object holding this code), committed */
    lfmt_library_t runtime;         /* the runtime library, committed; check 0 = not known yet */
    module_list_t mods;             /* every module entry written, in order */
    uint64_t adds, subs;            /* the loader's counters at the last module refresh */
    uint64_t fork_seq;              /* in a fork child: ledger_last_seq() at the fork */
    int fork_child;                 /* 1 in a fork child */
    char exe[PATH_MAX];             /* /proc/self/exe, for the main program's module entry */
} lf = {.lock = PTHREAD_MUTEX_INITIALIZER,
        .stacks.kind = LFMT_KIND_STACKS,
        .modules.kind = LFMT_KIND_MODULES,
        .pyframes.kind = LFMT_KIND_PYFRAMES};

ledger_file_shard_t ledger_file_shards[LEDGER_SHARDS];
#define msh ledger_file_shards
int ledger_file_mirroring;                      /* atomic: the hooks' switch */
uint32_t ledger_file_modules_checked;           /* atomic: see ledger_file.h */
static int lf_configured;                       /* atomic: a pattern was given */
static int lf_growth_failed;                    /* atomic: space ran out, no more growth */
static uint64_t lf_adds = UINT64_MAX, lf_subs;  /* atomic copies of lf.adds / lf.subs */
static lfmt_header_t *lf_pub_hdr;               /* atomic: the header, for signal handlers */
static const char *lf_pub_path;                 /* atomic: the path, for signal handlers */
static uint64_t dev_last_ns[LFMT_DEVICE_SLOTS]; /* atomic: last figures per device */
static int lf_runtime_known;                    /* atomic: lf.runtime holds the runtime */

static void set_mirroring(int on)
{
    __atomic_store_n(&ledger_file_mirroring, on, __ATOMIC_RELAXED);
}

static uint64_t round_up(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

static uint64_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

/* ---- space --------------------------------------------------------------------------------- */

/* RLIMIT_FSIZE in bytes (UINT64_MAX = none): growing a file past it raises SIGXFSZ. */
static uint64_t fsize_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    return (uint64_t)rl.rlim_cur;
}

/* Reserve [off, off + len) of fd's file.  Without fallocate support, zeros are written (the
 * file system then allocates as it writes).  0, or -1 with errno. */
static int reserve(int fd, uint64_t off, uint64_t len)
{
    if (fallocate(fd, 0, (off_t)off, (off_t)len) == 0) return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS) return -1;
    static const char zeros[65536];
    for (uint64_t done = 0; done < len;) {
        size_t n = len - done < sizeof zeros ? (size_t)(len - done) : sizeof zeros;
        ssize_t w = pwrite(fd, zeros, n, (off_t)(off + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        done += (uint64_t)w;
    }
    return 0;
}

/* Space ran out (or the file went away): one line, the header says so, no more growth. */
static void growth_failed_locked(const char *what, int err)
{
    if (__atomic_exchange_n(&lf_growth_failed, 1, __ATOMIC_RELAXED)) return;
    if (lf.hdr) __atomic_fetch_or(&lf.hdr->flags, (uint64_t)LFMT_F_INCOMPLETE, __ATOMIC_RELAXED);
    char b[FMT_BYTES_LEN];
    log_warn("ledger file %s: %s at %s (%s); continuing in memory: allocations from now on may be "
             "missing from the file",
             lf.path[lf.path_cur], what, fmt_bytes(b, lf.file_bytes), strerror(err));
}

/* Map a new segment of at least `need` bytes from fd.  0, or -1 with errno and *what. */
static int seg_add_fd(int fd, uint64_t need, const char **what)
{
    uint64_t page = page_size(), off = lf.file_bytes;
    uint64_t len = lf.file_bytes < SEG_MIN   ? SEG_MIN
                   : lf.file_bytes > SEG_MAX ? SEG_MAX
                                             : lf.file_bytes;
    need = round_up(need, page);
    if (len < need) len = need;
    uint64_t limit = fsize_limit();
    if (limit != UINT64_MAX) { /* never past RLIMIT_FSIZE: the kernel would raise SIGXFSZ */
        uint64_t room = limit > off ? (limit - off) / page * page : 0;
        if (room < need) {
            *what = "the file-size limit (ulimit -f) is reached";
            errno = EFBIG;
            return -1;
        }
        if (len > room) len = room;
    }
    if (lf.nsegs == SEG_SLOTS) {
        *what = "too many segments";
        errno = EFBIG;
        return -1;
    }
    if (reserve(fd, off, len) != 0) {
        /* a full segment does not fit: what is needed now may */
        if (errno != ENOSPC || len == need || reserve(fd, off, need) != 0) {
            *what = "cannot reserve space";
            return -1;
        }
        len = need;
    }
    void *m = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
    if (m == MAP_FAILED) {
        *what = "cannot map";
        return -1;
    }
    lf.segs[lf.nsegs++] = (seg_t){m, off, len};
    lf.seg_used = 0;
    lf.file_bytes = off + len;
    if (lf.hdr) __atomic_store_n(&lf.hdr->file_bytes, lf.file_bytes, __ATOMIC_RELEASE);
    return 0;
}

/* A new segment, opening the file again by path: it must still be the file npupool made. */
static int seg_add(uint64_t need)
{
    const char *what = "cannot open";
    int fd = open(lf.path[lf.path_cur], O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    int rc = -1;
    if (fd >= 0) {
        if (fstat(fd, &st) != 0 || st.st_dev != lf.dev || st.st_ino != lf.ino) {
            what = "was replaced";
            errno = ESTALE;
        } else {
            rc = seg_add_fd(fd, need, &what);
        }
        int e = errno;
        close(fd);
        errno = e;
    }
    if (rc != 0) growth_failed_locked(what, errno);
    return rc;
}

/* Fill a chunk header (check included) at p for `off`. */
static void chunk_header(char *p, uint64_t off, uint16_t kind, uint64_t size, uint64_t a0,
                         uint64_t a1, uint64_t a2)
{
    lfmt_chunk_t c = {.magic = LFMT_CHUNK_MAGIC,
                      .kind = kind,
                      .version = 1,
                      .size = size,
                      .offset = off,
                      .arg = {a0, a1, a2, 0}};
    c.check = lfmt_chunk_check(&c);
    memcpy(p, &c, sizeof c);
}

static void chunk_end_set(uint64_t end)
{
    if (lf.hdr) __atomic_store_n(&lf.hdr->chunk_end, end, __ATOMIC_RELEASE);
}

/* A new chunk of `size` bytes (a multiple of LFMT_ALIGN), its space zero; NULL when no space
 * (growth_failed_locked said so).  pre: lf.lock held, a file exists. */
static char *chunk_new(uint16_t kind, uint64_t size, uint64_t a0, uint64_t a1, uint64_t a2)
{
    if (__atomic_load_n(&lf_growth_failed, __ATOMIC_RELAXED)) return NULL;
    seg_t *s = lf.nsegs ? &lf.segs[lf.nsegs - 1] : NULL;
    if (!s || s->len - lf.seg_used < size) {
        if (s && s->len > lf.seg_used) { /* the rest of the segment: padding */
            uint64_t pad = s->len - lf.seg_used;
            chunk_header(s->addr + lf.seg_used, s->off + lf.seg_used, LFMT_KIND_PAD, pad, 0, 0, 0);
            chunk_end_set(s->off + s->len);
            lf.seg_used = s->len;
        }
        if (seg_add(size) != 0) return NULL;
        s = &lf.segs[lf.nsegs - 1];
    }
    char *p = s->addr + lf.seg_used;
    uint64_t off = s->off + lf.seg_used;
    chunk_header(p, off, kind, size, a0, a1, a2);
    lf.seg_used += size;
    chunk_end_set(off + size);
    return p;
}

/* ---- append chunks ---------------------------------------------------------------------------- */

/* Append {size, tag, payload, check} to a; 0, or -1 when no space.  pre: lf.lock held. */
static int app_add(app_t *a, uint32_t tag, const void *payload, size_t len)
{
    uint32_t size = (uint32_t)(sizeof(lfmt_entry_t) + round_up(len, 8) + 8);
    if (!a->data || a->cap - a->used < size) {
        uint64_t cap = a->next_cap ? a->next_cap : APPEND_FIRST;
        if (cap < round_up(size, LFMT_ALIGN)) cap = round_up(size, LFMT_ALIGN);
        char *c = chunk_new(a->kind, LFMT_ALIGN + cap, 0, 0, 0);
        if (!c) return -1;
        a->data = c + LFMT_ALIGN;
        a->used = 0;
        a->cap = cap;
        a->next_cap = cap * 2 < APPEND_MAX ? cap * 2 : APPEND_MAX;
    }
    char buf[ENTRY_MAX];
    memset(buf, 0, size);
    lfmt_entry_t e = {size, tag};
    memcpy(buf, &e, sizeof e);
    memcpy(buf + sizeof e, payload, len);
    uint64_t check = lfmt_entry_check(buf, size, a->kind);
    char *p = a->data + a->used;
    memcpy(p, buf, size - 8);
    __atomic_store_n((uint64_t *)(void *)(p + size - 8), check, __ATOMIC_RELEASE);
    a->used += size;
    return 0;
}

static void stack_write_locked(uint32_t id, const uintptr_t *frames, int depth)
{
    if (depth <= 0) return;
    if (depth > (int)LFMT_MAX_DEPTH) depth = LFMT_MAX_DEPTH;
    char buf[sizeof(lfmt_stack_t) + LFMT_MAX_DEPTH * 8];
    lfmt_stack_t h = {(uint32_t)depth, 0};
    memcpy(buf, &h, sizeof h);
    for (int i = 0; i < depth; i++) {
        uint64_t f = frames[i];
        memcpy(buf + sizeof h + 8 * (size_t)i, &f, 8);
    }
    if (app_add(&lf.stacks, id, buf, sizeof h + 8 * (size_t)depth) != 0 && lf.hdr)
        __atomic_fetch_add(&lf.hdr->stacks_lost, 1, __ATOMIC_RELAXED);
}

static void module_write_locked(const module_t *m)
{
    char buf[sizeof(lfmt_module_t) + LFMT_MAX_BUILD_ID + LFMT_MAX_PATH];
    size_t plen = strlen(m->path);
    if (plen > LFMT_MAX_PATH) plen = LFMT_MAX_PATH;
    lfmt_module_t h = {m->base, m->lo, m->hi, (uint32_t)plen, m->bid_len};
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, m->bid, m->bid_len);
    memcpy(buf + sizeof h + m->bid_len, m->path, plen);
    app_add(&lf.modules, m->first_stack, buf, sizeof h + m->bid_len + plen);
}

/* Cut a UTF-8 text of n bytes to at most cap bytes, at a character boundary. */
static size_t utf8_cut(const char *s, size_t n, size_t cap)
{
    if (n <= cap) return n;
    n = cap;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) n--; /* s[n] continues a character */
    return n;
}

static void pyframe_write_locked(uint32_t id, const char *file, const char *function, uint32_t line)
{
    char buf[PYFRAME_MAX];
    size_t flen = utf8_cut(file, strlen(file), LFMT_MAX_PY_NAME);
    size_t nlen = utf8_cut(function, strlen(function), LFMT_MAX_PY_NAME);
    lfmt_pyframe_t h = {line, (uint16_t)flen, (uint16_t)nlen};
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, file, flen);
    memcpy(buf + sizeof h + flen, function, nlen);
    if (app_add(&lf.pyframes, id, buf, sizeof h + flen + nlen) != 0 && lf.hdr)
        __atomic_fetch_add(&lf.hdr->pyframes_lost, 1, __ATOMIC_RELAXED);
}

/* Python frame `id` as the table holds it (a new file copies every frame interned so far). */
static void pyframe_copy_locked(uint32_t id)
{
    const char *file, *function;
    uint32_t line;
    if (ledger_py_table_get(id, &file, &function, &line))
        pyframe_write_locked(id, file, function, line);
    else if (lf.hdr) /* never: ids up to py_known are published */
        __atomic_fetch_add(&lf.hdr->pyframes_lost, 1, __ATOMIC_RELAXED);
}

/* ---- identity ------------------------------------------------------------------------------ */

/* A committed identity of the object at `path` with build id `hex` (NULL or "" = none). */
static void library_fill(lfmt_library_t *l, const char *path, const char *hex)
{
    memset(l, 0, sizeof *l);
    size_t n = strlen(path);
    if (n < sizeof l->path) memcpy(l->path, path, n); /* a longer one: not stored (no lie) */
    if (hex && strlen(hex) < sizeof l->build_id) memcpy(l->build_id, hex, strlen(hex));
    l->check = lfmt_library_check(l);
}

/* Store a committed identity where a reader may be looking: the fields, then the check word. */
static void library_put(lfmt_library_t *dst, const lfmt_library_t *src)
{
    memcpy((char *)dst + 8, (const char *)src + 8, sizeof *src - 8);
    __atomic_store_n(&dst->check, src->check, __ATOMIC_RELEASE);
}

/* ---- the module map ------------------------------------------------------------------------- */

static void module_list_free(module_list_t *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->m[i].path);
    free(l->m);
    *l = (module_list_t){0};
}

static int module_list_push(module_list_t *l, const module_t *m)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        module_t *nm = realloc(l->m, cap * sizeof *nm);
        if (!nm) return -1;
        l->bytes += (cap - l->cap) * sizeof *nm;
        l->m = nm;
        l->cap = cap;
    }
    module_t *d = &l->m[l->n];
    *d = *m;
    d->path = strdup(m->path);
    if (!d->path) return -1;
    l->bytes += strlen(m->path) + 1;
    l->n++;
    return 0;
}

/* The GNU build id of a loaded object, from its PT_NOTE segments in memory. */
static uint32_t build_id_of(const struct dl_phdr_info *info, unsigned char *out)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
            const char *name = p + sizeof *n;
            const char *desc = name + ((n->n_namesz + 3) & ~3u);
            const char *next = desc + ((n->n_descsz + 3) & ~3u);
            if (next > end) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                n->n_descsz > 0 && n->n_descsz <= LFMT_MAX_BUILD_ID) {
                memcpy(out, desc, n->n_descsz);
                return n->n_descsz;
            }
            p = next;
        }
    }
    return 0;
}

static int module_scan_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    module_list_t *l = ctx;
    module_t m = {.base = info->dlpi_addr, .lo = UINT64_MAX};
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < m.lo) m.lo = a;
        if (a + ph->p_memsz > m.hi) m.hi = a + ph->p_memsz;
    }
    if (m.lo >= m.hi) return 0;
    m.path = (char *)(info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : lf.exe);
    if (!m.path[0]) return 0;
    m.bid_len = build_id_of(info, m.bid);
    module_list_push(l, &m); /* out of memory: that module stays unknown */
    return 0;
}

typedef struct loader_counts {
    uint64_t adds, subs; /* dlpi_adds, dlpi_subs */
} loader_counts_t;

static int counts_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    loader_counts_t *c = ctx;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
    }
    return 1; /* the first object is enough */
}

static int module_same(const module_t *a, const module_t *b)
{
    return a->base == b->base && a->lo == b->lo && a->hi == b->hi && a->bid_len == b->bid_len &&
           !memcmp(a->bid, b->bid, a->bid_len) && !strcmp(a->path, b->path);
}

/* Append every scanned module that is not the latest entry for its range, tagged `first`.
 * pre: lf.lock held. */
static void modules_merge_locked(const module_list_t *scan, uint32_t first)
{
    for (size_t i = 0; i < scan->n; i++) {
        const module_t *s = &scan->m[i];
        const module_t *latest = NULL;
        for (size_t k = lf.mods.n; k-- > 0 && !latest;)
            if (lf.mods.m[k].lo < s->hi && s->lo < lf.mods.m[k].hi) latest = &lf.mods.m[k];
        if (latest && module_same(latest, s)) continue;
        module_t m = *s;
        m.first_stack = first;
        if (module_list_push(&lf.mods, &m) != 0) continue;
        if (lf.state == LF_ACTIVE) module_write_locked(&lf.mods.m[lf.mods.n - 1]);
    }
}

static void checked_advance(uint32_t id)
{
    uint32_t cur = __atomic_load_n(&ledger_file_modules_checked, __ATOMIC_RELAXED);
    while (cur < id && !__atomic_compare_exchange_n(&ledger_file_modules_checked, &cur, id, 1,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

LEDGER_FILE_HIDDEN void ledger_file_stack_seen(uint32_t id)
{
    loader_counts_t c = {0, 0};
    loader_iterate(counts_cb, &c);
    if (c.adds == __atomic_load_n(&lf_adds, __ATOMIC_RELAXED) &&
        c.subs == __atomic_load_n(&lf_subs, __ATOMIC_RELAXED)) {
        checked_advance(id); /* nothing loaded or unloaded: the map is current */
        return;
    }
    module_list_t scan = {0};
    loader_iterate(module_scan_cb, &scan); /* the loader's lock, none of npupool's */
    pthread_mutex_lock(&lf.lock);
    uint32_t first = __atomic_load_n(&ledger_file_modules_checked, __ATOMIC_RELAXED) + 1;
    modules_merge_locked(&scan, first);
    lf.adds = c.adds;
    lf.subs = c.subs;
    __atomic_store_n(&lf_adds, c.adds, __ATOMIC_RELAXED);
    __atomic_store_n(&lf_subs, c.subs, __ATOMIC_RELAXED);
    checked_advance(id);
    pthread_mutex_unlock(&lf.lock);
    module_list_free(&scan);
}

/* ---- creating the file ------------------------------------------------------------------------ */

/* Up to cap - 1 bytes of a small /proc file (NUL-terminated); its length. */
static size_t read_small(const char *path, char *buf, size_t cap)
{
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        for (;;) {
            ssize_t r = read(fd, buf + n, cap - 1 - n);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            n += (size_t)r;
            if (n == cap - 1) break;
        }
        close(fd);
    }
    buf[n] = 0;
    return n;
}

/* The pattern expanded, made absolute (a growth reopens it after the program's chdir). */
static int expand_path(char *out, size_t cap)
{
    char rel[PATH_MAX];
    if (path_expand(lf.pattern, 1, rel, sizeof rel) != 0) return -1;
    if (rel[0] == '/') return snprintf(out, cap, "%s", rel) < (int)cap ? 0 : -1;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    return snprintf(out, cap, "%s/%s", cwd, rel) < (int)cap ? 0 : -1;
}

/* As much of src as fits, NUL-terminated (the header's texts are informational). */
static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

static void header_fill(lfmt_header_t *h, const char *path)
{
    memcpy(h->format, LFMT_FORMAT, sizeof LFMT_FORMAT);
    h->record_size = sizeof(lfmt_record_t);
    h->page_size = (uint32_t)page_size();
    h->shards = LEDGER_SHARDS;
    h->backtrace_depth = (uint32_t)lf.depth;
    h->pid = getpid();
    h->ppid = getppid();
    h->rank = rank_get();
    h->start_mono_ns = clock_coarse_ns();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_wall_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    h->fork_seq = lf.fork_seq;
    read_small("/proc/sys/kernel/random/boot_id", h->boot_id, sizeof h->boot_id);
    h->boot_id[strcspn(h->boot_id, "\n")] = 0;
    gethostname(h->hostname, sizeof h->hostname - 1);
    copy_text(h->exe, sizeof h->exe, lf.exe);
    read_small("/proc/self/cmdline", h->cmdline, sizeof h->cmdline);
    copy_text(h->path, sizeof h->path, path);
    if (lf.config) copy_text(h->config, sizeof h->config, lf.config);
    copy_text(h->version, sizeof h->version, lf.version);
    h->npupool = lf.self;
    h->runtime = lf.runtime; /* check 0 until the shim names it */
    h->flags = lf.fork_child ? LFMT_F_FORK_CHILD : 0;
}

/* Make the file: a fresh name (an existing file is never overwritten: PATH.1, PATH.2, ...), the
 * first segment, the header, every stack and module known so far.  `scan` = the loaded modules
 * (NULL in a fork child: its parent's list is written).  0, or -1 after one line.
 * pre: lf.lock held. */
static int file_create_locked(const module_list_t *scan)
{
    char base[PATH_MAX];
    if (expand_path(base, sizeof base) != 0) {
        log_warn("NPUPOOL_LEDGER_FILE=\"%s\": the path is too long; the ledger stays in memory",
                 lf.pattern);
        return -1;
    }
    if (lf.fork_child && !strcmp(base, lf.expanded)) {
        log_info("NPUPOOL_LEDGER_FILE has no %%p: this fork child keeps no ledger file");
        return -1;
    }
    if (!lf.fork_child) snprintf(lf.expanded, sizeof lf.expanded, "%s", base);
    int cur = lf.path_cur ^ 1; /* the other buffer: a signal handler may read the current one */
    char *path = lf.path[cur];
    int fd = -1;
    for (int i = 0; i < NAME_TRIES && fd < 0; i++) {
        if ((i ? snprintf(path, PATH_MAX, "%s.%d", base, i)
               : snprintf(path, PATH_MAX, "%s", base)) >= PATH_MAX)
            break;
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        log_warn("cannot create the ledger file %s (%s); the ledger stays in memory", path,
                 strerror(errno));
        return -1;
    }
    struct stat st;
    const char *what = "cannot stat";
    uint64_t hdr_size = round_up(sizeof(lfmt_header_t), LFMT_ALIGN);
    lf.nsegs = 0;
    lf.file_bytes = 0;
    lf.hdr = NULL;
    int rc = fstat(fd, &st) == 0 ? seg_add_fd(fd, hdr_size, &what) : -1;
    int e = errno;
    close(fd);
    if (rc != 0) {
        unlink(path);
        log_warn("cannot make the ledger file %s: %s (%s); the ledger stays in memory", path, what,
                 strerror(e));
        return -1;
    }
    lf.path_cur = cur;
    lf.dev = st.st_dev;
    lf.ino = st.st_ino;
    __atomic_store_n(&lf_growth_failed, 0, __ATOMIC_RELAXED);
    lfmt_header_t *h = (lfmt_header_t *)(void *)lf.segs[0].addr;
    header_fill(h, path);
    h->file_bytes = lf.file_bytes;
    chunk_header((char *)h, 0, LFMT_KIND_HEADER, hdr_size, 0, 0, 0);
    lf.seg_used = hdr_size;
    lf.hdr = h;
    chunk_end_set(hdr_size);
    lf.stacks.data = lf.modules.data = lf.pyframes.data = NULL;
    lf.stacks.next_cap = lf.modules.next_cap = lf.pyframes.next_cap = 0;
    memset(lf.devfig, 0, sizeof lf.devfig);
    lf.state = LF_ACTIVE;
    /* the Python frames first: the stacks below may hold them */
    uint32_t py = __atomic_load_n(&lf.py_known, __ATOMIC_ACQUIRE);
    for (uint32_t id = 1; id <= py; id++) pyframe_copy_locked(id);
    lf.py_written = py;
    uint32_t known = __atomic_load_n(&lf.stacks_known, __ATOMIC_RELAXED);
    for (uint32_t id = 1; id <= known; id++) {
        const uintptr_t *frames;
        int depth = ledger_stack_frames(id, &frames);
        stack_write_locked(id, frames, depth);
    }
    lf.stacks_written = known;
    if (scan) {
        modules_merge_locked(scan, 1);
    } else {
        for (size_t i = 0; i < lf.mods.n; i++) module_write_locked(&lf.mods.m[i]);
    }
    __atomic_store_n(&lf_pub_hdr, h, __ATOMIC_RELEASE);
    __atomic_store_n(&lf_pub_path, path, __ATOMIC_RELEASE);
    log_info("ledger file %s", path);
    return 0;
}

LEDGER_FILE_HIDDEN int ledger_file_open(const ledger_config_t *cfg)
{
    if (!cfg->file || !cfg->file[0]) return 0;
    pthread_mutex_lock(&lf.lock);
    int first = !__atomic_load_n(&lf_configured, __ATOMIC_RELAXED);
    if (first) {
        lf.pattern = cfg->file;
        lf.config = cfg->file_config ? strdup(cfg->file_config) : NULL;
        lf.depth = cfg->backtrace_depth;
        ssize_t n = readlink("/proc/self/exe", lf.exe, sizeof lf.exe - 1);
        lf.exe[n > 0 ? n : 0] = 0;
        __atomic_store_n(&lf_configured, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lf.lock);
    if (!first) return 0;
    loader_counts_t c = {0, 0};
    loader_iterate(counts_cb, &c);
    module_list_t scan = {0};
    loader_iterate(module_scan_cb, &scan); /* before the file lock: the loader's lock alone */
    char bid[BUILDID_HEX_MAX], self[LFMT_MAX_PATH];
    buildid_of_address((const void *)&ledger_file_open, bid, sizeof bid, self, sizeof self);
    pthread_mutex_lock(&lf.lock);
    copy_text(lf.version, sizeof lf.version, version_string());
    library_fill(&lf.self, self, bid);
    int made = file_create_locked(&scan) == 0;
    if (made) {
        lf.adds = c.adds;
        lf.subs = c.subs;
        __atomic_store_n(&lf_adds, c.adds, __ATOMIC_RELAXED);
        __atomic_store_n(&lf_subs, c.subs, __ATOMIC_RELAXED);
        checked_advance(__atomic_load_n(&lf.stacks_known, __ATOMIC_RELAXED));
        set_mirroring(1);
    }
    pthread_mutex_unlock(&lf.lock);
    module_list_free(&scan);
    return made;
}

/* ---- records ------------------------------------------------------------------------------- */

static int grp_reserve(ledger_file_shard_t *m, uint32_t groups)
{
    uint32_t cap = m->grp_cap ? m->grp_cap : 16;
    while (cap < groups) cap *= 2;
    lfmt_record_t **g = realloc(m->grp, cap * sizeof *g);
    if (!g) return -1;
    m->grp = g;
    m->grp_cap = cap;
    return 0;
}

static void note_unmirrored(void)
{
    lfmt_header_t *h = __atomic_load_n(&lf_pub_hdr, __ATOMIC_ACQUIRE);
    if (h) __atomic_fetch_add(&h->unmirrored, 1, __ATOMIC_RELAXED);
}

/* Slots up to record n of shard k (a fork child's file is made here).  1 when n has a slot.
 * pre: shard k's lock held. */
static int shard_grow(unsigned k, uint32_t n)
{
    if (__atomic_load_n(&lf_growth_failed, __ATOMIC_RELAXED)) {
        note_unmirrored();
        return 0;
    }
    ledger_file_shard_t *m = &msh[k];
    pthread_mutex_lock(&lf.lock);
    if (lf.state == LF_PENDING) {
        if (file_create_locked(NULL) != 0) {
            lf.state = LF_OFF;
            set_mirroring(0);
        }
    }
    while (lf.state == LF_ACTIVE && n >= m->mapped) {
        uint32_t slots = m->next_slots ? m->next_slots : REC_FIRST;
        if ((m->mapped + slots) / LFMT_GROUP > m->grp_cap &&
            grp_reserve(m, (m->mapped + slots) / LFMT_GROUP) != 0)
            break;
        char *c = chunk_new(LFMT_KIND_RECORDS, LFMT_ALIGN + (uint64_t)slots * sizeof(lfmt_record_t),
                            k, m->mapped, slots);
        if (!c) break;
        lfmt_record_t *first = (lfmt_record_t *)(void *)(c + LFMT_ALIGN);
        for (uint32_t g = 0; g < slots / LFMT_GROUP; g++)
            m->grp[m->mapped / LFMT_GROUP + g] = first + (size_t)g * LFMT_GROUP;
        m->mapped += slots;
        m->next_slots = slots < REC_MAX ? slots * 2 : REC_MAX;
    }
    int ok = n < m->mapped;
    if (!ok && lf.state == LF_ACTIVE) note_unmirrored();
    pthread_mutex_unlock(&lf.lock);
    return ok;
}

static lfmt_record_t *slot_of(unsigned k, uint32_t n)
{
    return msh[k].grp[n / LFMT_GROUP] + n % LFMT_GROUP;
}

LEDGER_FILE_HIDDEN lfmt_record_t *ledger_file_slot_slow(unsigned k, uint32_t n)
{
    return shard_grow(k, n) ? slot_of(k, n) : NULL;
}

LEDGER_FILE_HIDDEN void ledger_file_shard_clear(unsigned k)
{
    for (uint32_t n = 0; n < msh[k].mapped; n++)
        __atomic_store_n(&slot_of(k, n)->check, 0, __ATOMIC_RELAXED);
}

LEDGER_FILE_HIDDEN int ledger_file_check_slot(unsigned k, uint32_t n, const ledger_record_t *r)
{
    if (!ledger_file_on() || n >= msh[k].mapped) return 0;
    const lfmt_record_t *s = slot_of(k, n);
    uint64_t c = __atomic_load_n(&s->check, __ATOMIC_ACQUIRE);
    if (!r) return c != LFMT_CHECK_FREE;
    return c != lfmt_record_check(s) || s->addr != r->addr || s->seq != r->seq ||
           s->stack_id != r->stack_id || s->device != r->device || s->granted != r->granted;
}

/* ---- stacks ---------------------------------------------------------------------------------- */

LEDGER_FILE_HIDDEN void ledger_file_stack_added(uint32_t id, const uintptr_t *frames, int depth)
{
    __atomic_store_n(&lf.stacks_known, id, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&lf_configured, __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&lf.lock);
    if (lf.state == LF_ACTIVE && id > lf.stacks_written) { /* else the file was made with it */
        stack_write_locked(id, frames, depth);
        lf.stacks_written = id;
    }
    pthread_mutex_unlock(&lf.lock);
}

/* ---- Python frames ---------------------------------------------------------------------------- */

LEDGER_FILE_HIDDEN void ledger_file_pyframe_added(uint32_t id, const char *file,
                                                  const char *function, uint32_t line)
{
    __atomic_store_n(&lf.py_known, id, __ATOMIC_RELEASE); /* after the table published it */
    if (!__atomic_load_n(&lf_configured, __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&lf.lock);
    if (lf.state == LF_ACTIVE && id > lf.py_written) { /* else the file was made with it */
        pyframe_write_locked(id, file, function, line);
        lf.py_written = id;
    }
    pthread_mutex_unlock(&lf.lock);
}

/* ---- the runtime ------------------------------------------------------------------------------ */

int ledger_file_runtime_known(void) { return __atomic_load_n(&lf_runtime_known, __ATOMIC_ACQUIRE); }

void ledger_file_runtime(const char *library, const char *build_id)
{
    if (!library || !library[0] || !__atomic_load_n(&lf_configured, __ATOMIC_RELAXED)) return;
    lfmt_library_t *id = malloc(sizeof *id); /* 4 KiB: not on a guest thread's stack */
    if (!id) return;
    library_fill(id, library, build_id);
    pthread_mutex_lock(&lf.lock);
    if (!lf.runtime.check) {
        lf.runtime = *id;
        if (lf.state == LF_ACTIVE && lf.hdr) library_put(&lf.hdr->runtime, id);
        __atomic_store_n(&lf_runtime_known, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lf.lock);
    free(id);
}

/* ---- device figures, death, exit -------------------------------------------------------------- */

static unsigned device_slot(int64_t device)
{
    return device >= 0 && device < (int64_t)LFMT_DEVICE_SLOTS - 1 ? (unsigned)device
                                                                  : LFMT_DEVICE_SLOTS - 1;
}

int ledger_file_device_due_slow(int device)
{
    uint64_t *last = &dev_last_ns[device_slot(device)];
    uint64_t now = clock_coarse_ns(), was = __atomic_load_n(last, __ATOMIC_RELAXED);
    if (was && now - was < 1000000000u) return 0;
    return __atomic_compare_exchange_n(last, &was, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void ledger_file_device_put(const lfmt_device_figs_t *figs)
{
    unsigned slot = device_slot(figs->device);
    pthread_mutex_lock(&lf.lock);
    lfmt_device_chunk_t *c = lf.devfig[slot];
    if (!c && lf.state == LF_ACTIVE) {
        c = (lfmt_device_chunk_t *)(void *)chunk_new(
            LFMT_KIND_DEVICE, round_up(sizeof *c, LFMT_ALIGN),
            slot == LFMT_DEVICE_SLOTS - 1 ? 0 : (uint64_t)slot + 1, 0, 0);
        lf.devfig[slot] = c;
    }
    if (c && lf.state == LF_ACTIVE) {
        uint64_t next = c->current + 1; /* the copy not in use: a death now leaves the other */
        lfmt_device_figs_t f = *figs;
        f.check = lfmt_words_check(&f.mono_ns, (sizeof f - 8) / 8, LFMT_KIND_DEVICE);
        memcpy(&c->figs[next & 1], &f, sizeof f);
        __atomic_store_n(&c->current, next, __ATOMIC_RELEASE);
        __atomic_store_n(&lf.hdr->updated_mono_ns, figs->mono_ns, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lf.lock);
}

const char *ledger_file_path(void) { return __atomic_load_n(&lf_pub_path, __ATOMIC_ACQUIRE); }

void ledger_file_note_death(int sig)
{
    lfmt_header_t *h = __atomic_load_n(&lf_pub_hdr, __ATOMIC_ACQUIRE);
    if (!h) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* async-signal-safe */
    __atomic_store_n(&h->death_mono_ns, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&h->death_signal, (uint64_t)sig, __ATOMIC_RELEASE);
}

void ledger_file_at_exit(void)
{
    if (!__atomic_load_n(&lf_configured, __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&lf.lock);
    int active = lf.state == LF_ACTIVE, child = lf.fork_child;
    uint64_t since = lf.fork_seq;
    pthread_mutex_unlock(&lf.lock);
    if (!active) return;
    /* the shard locks come before the file lock: count first */
    size_t live = child ? ledger_live_count_since(since) : ledger_live_total();
    pthread_mutex_lock(&lf.lock);
    if (lf.state == LF_ACTIVE) {
        const char *path = lf.path[lf.path_cur];
        __atomic_store_n(&lf.hdr->live_at_exit, (uint64_t)live, __ATOMIC_RELAXED);
        __atomic_store_n(&lf.hdr->exit_mono_ns, clock_coarse_ns(), __ATOMIC_RELAXED);
        __atomic_fetch_or(&lf.hdr->flags, (uint64_t)LFMT_F_EXITED, __ATOMIC_RELEASE);
        struct stat st;
        if (live == 0) {
            /* the mapping stays (threads may still record), only the name goes */
            if (stat(path, &st) == 0 && st.st_dev == lf.dev && st.st_ino == lf.ino &&
                unlink(path) == 0)
                log_info("ledger file %s removed: nothing was live at exit", path);
        } else {
            log_warn("the ledger file %s keeps %zu live allocation%s of this process: npupool "
                     "recover %s",
                     path, live, live == 1 ? "" : "s", path);
        }
    }
    pthread_mutex_unlock(&lf.lock);
}

/* ---- closing, fork, memory -------------------------------------------------------------------- */

/* Unmap every segment and forget the file's chunks (not the module list or stacks_known). */
static void file_drop_locked(void)
{
    __atomic_store_n(&lf_pub_path, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&lf_pub_hdr, NULL, __ATOMIC_RELEASE);
    for (unsigned i = 0; i < lf.nsegs; i++) munmap(lf.segs[i].addr, (size_t)lf.segs[i].len);
    lf.nsegs = 0;
    lf.seg_used = lf.file_bytes = 0;
    lf.hdr = NULL;
    lf.stacks.data = lf.modules.data = lf.pyframes.data = NULL;
    memset(lf.devfig, 0, sizeof lf.devfig);
    for (unsigned k = 0; k < LEDGER_SHARDS; k++) msh[k].mapped = msh[k].next_slots = 0;
    memset(dev_last_ns, 0, sizeof dev_last_ns);
}

void ledger_file_close(int remove)
{
    pthread_mutex_lock(&lf.lock);
    set_mirroring(0);
    if (remove && lf.state == LF_ACTIVE) unlink(lf.path[lf.path_cur]);
    file_drop_locked();
    lf.state = LF_OFF;
    free(lf.config);
    lf.config = NULL;
    module_list_free(&lf.mods);
    for (unsigned k = 0; k < LEDGER_SHARDS; k++) {
        free(msh[k].grp);
        msh[k] = (ledger_file_shard_t){0};
    }
    lf.fork_child = 0;
    lf.fork_seq = 0;
    __atomic_store_n(&lf_adds, UINT64_MAX, __ATOMIC_RELAXED);
    __atomic_store_n(&ledger_file_modules_checked, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lf_growth_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lf_configured, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lf.lock);
}

size_t ledger_file_host_bytes(void)
{
    size_t bytes = lf.mods.bytes;
    for (unsigned k = 0; k < LEDGER_SHARDS; k++) bytes += msh[k].grp_cap * sizeof(void *);
    return bytes;
}

void ledger_file_fork_prepare(void) { pthread_mutex_lock(&lf.lock); }
void ledger_file_fork_parent(void) { pthread_mutex_unlock(&lf.lock); }

void ledger_file_fork_child(void)
{
    pthread_mutex_init(&lf.lock, NULL);
    if (!__atomic_load_n(&lf_configured, __ATOMIC_RELAXED)) return;
    /* The parent's mapping is shared: the child must never store into it. */
    file_drop_locked();
    lf.fork_child = 1;
    lf.fork_seq = ledger_last_seq();
    int pending = lf.state != LF_OFF; /* a parent whose file could not be made: none either */
    lf.state = pending ? LF_PENDING : LF_OFF;
    __atomic_store_n(&lf_growth_failed, 0, __ATOMIC_RELAXED);
    set_mirroring(pending);
}
