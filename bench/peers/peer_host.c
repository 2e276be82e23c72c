/* bench/peers/peer_host.c — the host peers: glibc's malloc, and the third-party allocators of
 * Debian's packages, loaded at run time so that the bench builds and runs without them.
 *
 * Each third-party library is dlopen()ed RTLD_NOW | RTLD_LOCAL and used only through its own
 * prefixed entry points (mi_malloc/mi_free, jemalloc's mallocx/dallocx, tc_malloc/tc_free):
 * RTLD_LOCAL keeps its unprefixed malloc/free (jemalloc and tcmalloc export them) out of the
 * global scope, so glibc stays this process's malloc and no pointer crosses allocators.
 * RTLD_DEEPBIND is not used: it would bind the library's own calls to its malloc while the
 * libraries it depends on (libstdc++ for tcmalloc) keep glibc's, and a pointer from one could
 * reach the other's free.  Before the first dlopen in this process, a forked child loads the
 * library and runs a few thousand malloc/free; if the child dies (a library that cannot live
 * beside glibc), the peer is skipped with the reason.
 * Unavailable peers say why (peer_host_unavailable): "skipped: not installed (Debian package
 * ...)" when the file is absent, else the loader's or the probe's message.
 * jemalloc uses initial-exec TLS (DT_FLAGS STATIC_TLS, 2.6 KiB in Debian's 5.3): dlopen()
 * fails with "cannot allocate memory in static TLS block" unless glibc reserved that much
 * surplus at start-up.  peer_host_prepare() therefore re-executes the program once with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 added (the loader reads it only at
 * start); if that cannot be done, jemalloc is skipped with the loader's message.
 * Between runs each peer gives its free memory back (malloc_trim, mi_collect, jemalloc's
 * arena purge, tcmalloc's ReleaseFreeMemory), so that a million live blocks of one allocator
 * do not stay resident under the next one.
 */
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer.h"

typedef struct host_lib {
    const char *soname;    /* file to dlopen */
    const char *package;   /* Debian package that ships it */
    const char *sym[3];    /* malloc, free, release (the last may be absent) */
    int tried;             /* load attempted */
    const char *why;       /* NULL when usable, else the reason */
    char why_buf[300];     /* storage of why */
    void *fn[3];           /* resolved sym[] */
    const peer_ops_t *ops; /* its peer (the probe child calls alloc and free through it) */
} host_lib_t;

enum { SYM_MALLOC = 0, SYM_FREE = 1, SYM_RELEASE = 2 };

static host_lib_t g_mimalloc = {.soname = "libmimalloc.so.2",
                                .package = "libmimalloc2.0",
                                .sym = {"mi_malloc", "mi_free", "mi_collect"},
                                .ops = &peer_mimalloc};
static host_lib_t g_jemalloc = {.soname = "libjemalloc.so.2",
                                .package = "libjemalloc2",
                                .sym = {"mallocx", "dallocx", "mallctl"},
                                .ops = &peer_jemalloc};
static host_lib_t g_tcmalloc = {
    .soname = "libtcmalloc_minimal.so.4",
    .package = "libtcmalloc-minimal4",
    .sym = {"tc_malloc", "tc_free", "MallocExtension_ReleaseFreeMemory"},
    .ops = &peer_tcmalloc};

static int resolve(host_lib_t *l, void *h)
{
    for (int i = 0; i < 3; i++) {
        l->fn[i] = dlsym(h, l->sym[i]);
        if (!l->fn[i] && i != SYM_RELEASE) {
            snprintf(l->why_buf, sizeof l->why_buf, "skipped: %s has no %s", l->soname, l->sym[i]);
            return -1;
        }
    }
    return 0;
}

/* In a child: load, resolve, and churn a few thousand blocks of 16 B .. 1 MiB; exit 0. */
static void probe_child(host_lib_t *l)
{
    alarm(30);
    void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h || resolve(l, h) != 0) _exit(3);
    enum { N = 256 };
    uintptr_t v[N] = {0};
    uint64_t s = 1;
    for (int i = 0; i < 20000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((s >> 33) % N);
        if (v[k]) l->ops->free(l, v[k]);
        if (l->ops->alloc(l, (size_t)16 << ((s >> 59) % 17), &v[k]) != 0) _exit(4);
        *(volatile char *)v[k] = 1;
    }
    for (int k = 0; k < N; k++) l->ops->free(l, v[k]);
    _exit(0);
}

static void load(host_lib_t *l)
{
    l->tried = 1;
    l->why = l->why_buf;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) probe_child(l);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
        snprintf(l->why_buf, sizeof l->why_buf, "skipped: could not fork a probe child");
        return;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
        /* The child could not load it: ask the loader here, to say why. */
        void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
        const char *err = h ? NULL : dlerror();
        if (h && resolve(l, h) != 0) return; /* why_buf names the missing symbol */
        if (h)
            snprintf(l->why_buf, sizeof l->why_buf, "skipped: %s loads here, not in a child",
                     l->soname);
        else if (err && strstr(err, "No such file"))
            snprintf(l->why_buf, sizeof l->why_buf, "skipped: not installed (Debian package %s)",
                     l->package);
        else
            snprintf(l->why_buf, sizeof l->why_buf, "skipped: %s cannot be loaded: %s", l->soname,
                     err ? err : "unknown error");
        return;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(l->why_buf, sizeof l->why_buf,
                 "skipped: a probe child using %s %s %d (it cannot run beside glibc here)",
                 l->soname, WIFSIGNALED(st) ? "died of signal" : "exited with",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        return;
    }
    void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(l->why_buf, sizeof l->why_buf, "skipped: %s cannot be loaded: %s", l->soname,
                 dlerror());
        return;
    }
    if (resolve(l, h) != 0) return;
    l->why = NULL;
}

/* ---- the four peers ------------------------------------------------------------------------ */
static int g_glibc_ctx; /* glibc needs no state; create returns its address */

static void *glibc_create(size_t range)
{
    (void)range;
    /* bench_pool's settings: every block in the main arena, no trimming between pairs. */
    static const int opt[][2] = {{M_MMAP_THRESHOLD, 32 << 20},
                                 {M_TRIM_THRESHOLD, INT_MAX},
                                 {M_TOP_PAD, 64 << 20},
                                 {M_ARENA_MAX, 1}};
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) mallopt(opt[i][0], opt[i][1]);
    return &g_glibc_ctx;
}
static void glibc_destroy(void *c)
{
    (void)c;
    malloc_trim(0);
}
static int glibc_alloc(void *c, size_t size, uintptr_t *out)
{
    (void)c;
    void *p = malloc(size);
    *out = (uintptr_t)p;
    return p ? 0 : -1;
}
static int glibc_free(void *c, uintptr_t at)
{
    (void)c;
    free((void *)at);
    return 0;
}

static void *lib_open(host_lib_t *l)
{
    if (!l->tried) load(l);
    return l->why ? NULL : l;
}
/* Give the freed memory back to the system (the release entry point is optional). */
static void lib_destroy(void *c)
{
    host_lib_t *l = c;
    void *f = l->fn[SYM_RELEASE];
    if (!f) return;
    if (l == &g_mimalloc)
        ((void (*)(bool))f)(true);
    else if (l == &g_jemalloc) /* MALLCTL_ARENAS_ALL is 4096 in jemalloc 5 */
        ((int (*)(const char *, void *, size_t *, void *, size_t))f)("arena.4096.purge", NULL, NULL,
                                                                     NULL, 0);
    else
        ((void (*)(void))f)();
}
static int lib_alloc_op(void *c, size_t size, uintptr_t *out)
{
    void *p = ((void *(*)(size_t))((host_lib_t *)c)->fn[SYM_MALLOC])(size);
    *out = (uintptr_t)p;
    return p ? 0 : -1;
}
static int lib_free_op(void *c, uintptr_t at)
{
    ((void (*)(void *))((host_lib_t *)c)->fn[SYM_FREE])((void *)at);
    return 0;
}
/* jemalloc's mallocx/dallocx take a flags argument (0: default alignment, tcache, arena). */
static int je_alloc_op(void *c, size_t size, uintptr_t *out)
{
    void *p = ((void *(*)(size_t, int))((host_lib_t *)c)->fn[SYM_MALLOC])(size, 0);
    *out = (uintptr_t)p;
    return p ? 0 : -1;
}
static int je_free_op(void *c, uintptr_t at)
{
    ((void (*)(void *, int))((host_lib_t *)c)->fn[SYM_FREE])((void *)at, 0);
    return 0;
}

const peer_ops_t peer_glibc = {
    .name = "glibc",
    .about = "glibc malloc/free (main arena: mmap threshold 32 MiB, no trimming, one arena)",
    .create = glibc_create,
    .destroy = glibc_destroy,
    .alloc = glibc_alloc,
    .free = glibc_free,
};
/* glibc as a threaded program gets it (no mallopt: one arena per thread as glibc chooses), for
 * bench_peers' threads table; the latency table's settings (peer_glibc) come later in a run. */
static void *glibc_plain_create(size_t range) { return (void)range, &g_glibc_ctx; }
static void glibc_plain_destroy(void *c) { (void)c; }
const peer_ops_t peer_glibc_plain = {
    .name = "glibc",
    .about = "glibc malloc/free (default settings)",
    .create = glibc_plain_create,
    .destroy = glibc_plain_destroy,
    .alloc = glibc_alloc,
    .free = glibc_free,
};

/* A third-party library's peer: its create opens the library (once) and hands out its
 * host_lib_t as the instance. */
#define LIB_PEER(id, text, alloc_fn, free_fn)                                         \
    static void *id##_create(size_t range) { return (void)range, lib_open(&g_##id); } \
    const peer_ops_t peer_##id = {.name = #id,                                        \
                                  .about = text,                                      \
                                  .create = id##_create,                              \
                                  .destroy = lib_destroy,                             \
                                  .alloc = alloc_fn,                                  \
                                  .free = free_fn}
LIB_PEER(mimalloc, "mimalloc (mi_malloc/mi_free, Debian libmimalloc2.0, dlopen RTLD_LOCAL)",
         lib_alloc_op, lib_free_op);
LIB_PEER(jemalloc, "jemalloc (mallocx/dallocx, Debian libjemalloc2, dlopen RTLD_LOCAL)",
         je_alloc_op, je_free_op);
LIB_PEER(tcmalloc, "tcmalloc (tc_malloc/tc_free, Debian libtcmalloc-minimal4, dlopen RTLD_LOCAL)",
         lib_alloc_op, lib_free_op);

#define TLS_TUNABLE "glibc.rtld.optional_static_tls=16384"

void peer_host_prepare(char **argv)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, "optional_static_tls")) return; /* set by us, or by the caller */
    char old[1024] = "", buf[1100];
    if (t) snprintf(old, sizeof old, "%s", t);
    snprintf(buf, sizeof buf, "%s%s%s", old, t ? ":" : "", TLS_TUNABLE);
    if (setenv("GLIBC_TUNABLES", buf, 1) != 0) return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* Not re-executed: go on without the room (jemalloc will say why it is skipped). */
    if (t)
        setenv("GLIBC_TUNABLES", old, 1);
    else
        unsetenv("GLIBC_TUNABLES");
}

const char *peer_host_unavailable(const peer_ops_t *p)
{
    host_lib_t *l = p == &peer_mimalloc   ? &g_mimalloc
                    : p == &peer_jemalloc ? &g_jemalloc
                    : p == &peer_tcmalloc ? &g_tcmalloc
                                          : NULL;
    if (!l) return NULL;
    lib_open(l);
    return l->why;
}

const peer_ops_t *const peer_hosts[] = {&peer_glibc, &peer_mimalloc, &peer_jemalloc, &peer_tcmalloc,
                                        NULL};
const peer_ops_t *const peer_arenas[] = {&peer_tlsf, &peer_o1heap, &peer_bestfit, NULL};
