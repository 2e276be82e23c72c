/* ledger/ledger_unwind.c — the unwinder: libunwind, loaded privately and made a good guest.
 *
 * Owns: the libunwind handle and the function that walks the stack (ledger_unwind_walker, called
 * by ledger_unwind_backtrace, which ledger_internal.h inlines into the capture), npupool's guard
 * of libunwind's descriptor use, and the per-thread readiness of its TLS.
 *
 * Loading: dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL) at the first ledger_init with a
 * non-zero depth, so that libunwind's `backtrace` and `_Unwind_*` never enter the host program's
 * global scope (they would take over its C++ exceptions).
 *
 * The descriptor guard.  libunwind (x86-64, 1.3 to 1.8) checks that an address is readable before
 * it chases a frame pointer by writing one byte from it into a pipe it opens once and keeps
 * (libunwind issue #291).  A program that closes its descriptors (daemons, ssh, test runners:
 * "close 3..1023, then open my own files") hands those numbers to its own files, and libunwind then
 * reads from and writes into the program's pipe or file — or blocks for ever reading it.  So
 * right after loading libunwind, and before its first call, this file rewrites libunwind's import
 * slots (GOT entries, found through its dynamic relocations: base/elf_dyn.h) for pipe2, read, write,
 * close and syscall to guards: pipe2 hands out two descriptor numbers no process can own (negative),
 * and read/write/close/syscall on those numbers never reach the kernel: the "write" is answered by
 * a readability check that needs no descriptor (process_vm_readv of the bytes from this very
 * process; where that call is missing or refused — qemu-user, a seccomp policy — a zero-timeout
 * FUTEX_WAIT on the first and last word, which reads them or fails with EFAULT).  An answer of
 * "unreadable" for readable memory is not safe either: aarch64's libunwind 1.6 then walks on
 * without its checks and reads address 0.  Every other descriptor passes through untouched.  The
 * slots are written once, before any thread can call libunwind; pages under RELRO are made
 * writable for the store and read-only again.  When libunwind imports pipe2 but its slots cannot
 * be rewritten, backtraces stay off (one line): a hang is worse than a missing stack.
 *
 * TLS.  unw_backtrace keeps a per-thread trace cache behind a __thread pointer of the dlopen()ed
 * libunwind, whose TLS block glibc allocates lazily, with malloc, at the first access in each
 * thread — and aborts the process ("cannot allocate memory for thread-local data") when that
 * malloc fails.  So a thread's first capture first checks that host memory is there (a probe
 * allocation freed at once, LEDGER_TLS_PROBE bytes: far more than the block and the DTV growth
 * need); when it is not, the capture is skipped (the allocation is recorded without a stack,
 * counted, said once) and tried again at the thread's next allocation.  After one successful
 * unwind the thread's block exists and later captures need no memory.
 *
 * Locking: loading and patching happen once (pthread_once) before ledger_unwind_backtrace can be
 * reached (the function pointer is published with release order); the rest is lock-free.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "elf_dyn.h"
#include "ledger.h"
#include "ledger_internal.h"
#include "loader.h"
#include "log.h"

#if defined(__SANITIZE_THREAD__)
#define LEDGER_STEP_UNWIND 1
#define UNW_LOCAL_ONLY
#include <libunwind.h> /* types only: the functions are looked up in the dlopen()ed library */
#endif

#define GUARD_FD_READ (-0x4e50)  /* the pipe "read end" libunwind is given: no process has it */
#define GUARD_FD_WRITE (-0x4e51) /* the pipe "write end" */
#define LEDGER_TLS_PROBE ((size_t)64 << 10) /* bytes a thread's first capture checks are there */

_Atomic(ledger_walk_fn) ledger_unwind_walker; /* NULL until loaded (or when it cannot be) */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t tls_skipped; /* captures skipped: no host memory for libunwind's TLS */
__thread int ledger_unwind_tls_ready
    __attribute__((tls_model("initial-exec"))); /* 1: block exists */

/* ---- the guards ------------------------------------------------------------------------------ */

/* Can the kernel read the 4 bytes at the aligned address a?  FUTEX_WAIT reads the word and
 * compares it: EAGAIN (it differs) or ETIMEDOUT (equal, and a zero timeout) mean readable, EFAULT
 * means not.  Never blocks, touches no descriptor, and no seccomp policy can refuse futex. */
static int word_readable(uintptr_t a)
{
    struct timespec zero = {0, 0};
    long r =
        syscall(SYS_futex, (void *)(a & ~(uintptr_t)3), FUTEX_WAIT_PRIVATE, 0u, &zero, NULL, 0);
    return r == 0 || errno != EFAULT;
}

/* Are the n bytes at p readable?  Asked of the kernel without a descriptor: process_vm_readv of
 * this very process; where that call does not exist or is refused (qemu-user answers ENOSYS, a
 * seccomp policy EPERM), one futex read of the first and of the last word. */
LEDGER_HIDDEN int ledger_unwind_readable(const void *p, size_t n)
{
    char tmp[16];
    if (n == 0) return 1;
    if (n > sizeof tmp) n = sizeof tmp;
    struct iovec local = {tmp, n}, remote = {(void *)(uintptr_t)p, n};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got == (ssize_t)n) return 1;
    if (got >= 0 || (errno != ENOSYS && errno != EPERM)) return 0;
    return word_readable((uintptr_t)p) && word_readable((uintptr_t)p + n - 1);
}

static int guard_pipe2(int fds[2], int flags)
{
    (void)flags;
    fds[0] = GUARD_FD_READ;
    fds[1] = GUARD_FD_WRITE;
    return 0;
}

static ssize_t guard_read(int fd, void *buf, size_t n)
{
    if (fd == GUARD_FD_READ || fd == GUARD_FD_WRITE) {
        errno = EAGAIN; /* "nothing to drain": the pipe stays as it was */
        return -1;
    }
    return read(fd, buf, n);
}

static ssize_t guard_write(int fd, const void *buf, size_t n)
{
    if (fd == GUARD_FD_WRITE || fd == GUARD_FD_READ) {
        if (ledger_unwind_readable(buf, n)) return (ssize_t)n;
        errno = EFAULT;
        return -1;
    }
    return write(fd, buf, n);
}

static int guard_close(int fd)
{
    if (fd == GUARD_FD_READ || fd == GUARD_FD_WRITE) return 0;
    return close(fd);
}

static long guard_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_write) return guard_write((int)a[0], (const void *)a[1], (size_t)a[2]);
    if (nr == SYS_read) return guard_read((int)a[0], (void *)a[1], (size_t)a[2]);
    if (nr == SYS_close) return guard_close((int)a[0]);
    if (nr == SYS_pipe2) return guard_pipe2((int *)a[0], (int)a[1]);
    return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static const struct {
    const char *name; /* libunwind's import */
    void *guard;      /* what its slot gets */
} guards[] = {
    {"pipe2", (void *)guard_pipe2},     {"read", (void *)guard_read},
    {"write", (void *)guard_write},     {"close", (void *)guard_close},
    {"syscall", (void *)guard_syscall},
};
#define NGUARDS (sizeof guards / sizeof guards[0])

/* ---- rewriting import slots ------------------------------------------------------------------- */

typedef struct relro_find {
    uintptr_t base;   /* the object's load base (link_map l_addr) */
    uintptr_t lo, hi; /* its PT_GNU_RELRO range, 0/0 when none */
} relro_find_t;

static int relro_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    relro_find_t *r = ctx;
    if (info->dlpi_addr != r->base) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
            r->lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            r->hi = r->lo + info->dlpi_phdr[i].p_memsz;
        }
    return 1;
}

/* Store v into the slot at addr, opening a RELRO page for the store. 0 ok, -1 failed. */
static int slot_store(uintptr_t addr, void *v, const relro_find_t *relro)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = addr & ~(uintptr_t)(pg - 1);
    int in_relro = addr >= relro->lo && addr < relro->hi;
    if (in_relro && mprotect((void *)page, (size_t)pg, PROT_READ | PROT_WRITE) != 0) return -1;
    __atomic_store_n((void **)addr, v, __ATOMIC_RELEASE);
    if (in_relro) mprotect((void *)page, (size_t)pg, PROT_READ);
    return 0;
}

static int is_slot_reloc(unsigned type)
{
#if defined(__x86_64__)
    return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
    return type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT;
#else
    (void)type;
    return 0;
#endif
}

/* Rewrite the slots of a RELA table.  *imports_pipe2 is set when pipe2 is imported; returns the
 * number of pipe2 slots that could not be rewritten. */
static int patch_table(const struct link_map *map, const elf_dyn_t *t, uintptr_t table,
                       size_t bytes, const relro_find_t *relro, int *imports_pipe2)
{
    int failed = 0;
    for (size_t off = 0; table && off + sizeof(ElfW(Rela)) <= bytes; off += sizeof(ElfW(Rela))) {
        const ElfW(Rela) *r = (const ElfW(Rela) *)(table + off);
        if (!is_slot_reloc((unsigned)ELF64_R_TYPE(r->r_info))) continue;
        const char *name = t->strtab + t->symtab[ELF64_R_SYM(r->r_info)].st_name;
        for (size_t g = 0; g < NGUARDS; g++) {
            if (strcmp(name, guards[g].name) != 0) continue;
            int is_pipe2 = g == 0;
            if (is_pipe2) *imports_pipe2 = 1;
            if (slot_store((uintptr_t)map->l_addr + r->r_offset, guards[g].guard, relro) != 0 &&
                is_pipe2)
                failed++;
        }
    }
    return failed;
}

/* 0 when libunwind can no longer touch a descriptor of the program (guarded, or it has none). */
static int guard_install(void *handle)
{
    struct link_map *map = NULL;
    elf_dyn_t t;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || elf_dyn_read(map, &t) != 0) return -1;
    relro_find_t relro = {.base = (uintptr_t)map->l_addr};
    loader_iterate(relro_cb, &relro);
    int imports_pipe2 = 0, failed = 0;
    if (t.pltrel_is_rela)
        failed += patch_table(map, &t, t.jmprel, t.jmprel_bytes, &relro, &imports_pipe2);
    failed += patch_table(map, &t, t.rela, t.rela_bytes, &relro, &imports_pipe2);
    if (!t.pltrel_is_rela && t.jmprel) return imports_pipe2 ? -1 : 0; /* REL tables: not ours */
    return failed ? -1 : 0;
}

/* ---- loading ----------------------------------------------------------------------------------- */

#ifdef LEDGER_STEP_UNWIND
/* ThreadSanitizer builds only: unw_backtrace's per-thread cache is freed by a thread-specific
 * destructor that takes a mutex after TSan has torn the exiting thread down (Debian's libunwind
 * 1.6.2 crashes every thread that unwound), so those builds step with the cursor API instead (no
 * per-thread cache; slower, same frames). */
#if defined(__aarch64__)
#define UNW_ARCH "aarch64"
#else
#define UNW_ARCH "x86_64"
#endif
static struct {
    int (*getcontext)(unw_context_t *);                         /* unw_getcontext */
    int (*init_local)(unw_cursor_t *, unw_context_t *);         /* unw_init_local */
    int (*step)(unw_cursor_t *);                                /* unw_step */
    int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *); /* unw_get_reg */
} unw_steps;

/* unw_backtrace's contract (buf[0] = the caller's pc) with the stepping API. */
__attribute__((noinline)) static int step_backtrace(void **buf, int size)
{
    unw_context_t uc;
    unw_cursor_t cur;
    if (unw_steps.getcontext(&uc) != 0 || unw_steps.init_local(&cur, &uc) != 0) return 0;
    int n = 0;
    /* The first frame is this function: step once so that buf[0] is its caller, as unw_backtrace. */
    while (n < size && unw_steps.step(&cur) > 0) {
        unw_word_t ip;
        if (unw_steps.get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        buf[n++] = (void *)ip;
    }
    return n;
}

static ledger_walk_fn lookup_walker(void *h)
{
    ledger_dlsym_fn dls = ledger_dlsym();
    unw_steps.getcontext = (int (*)(unw_context_t *))dls(h, "_U" UNW_ARCH "_getcontext");
    unw_steps.init_local =
        (int (*)(unw_cursor_t *, unw_context_t *))dls(h, "_UL" UNW_ARCH "_init_local");
    unw_steps.step = (int (*)(unw_cursor_t *))dls(h, "_UL" UNW_ARCH "_step");
    unw_steps.get_reg =
        (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))dls(h, "_UL" UNW_ARCH "_get_reg");
    return unw_steps.getcontext && unw_steps.init_local && unw_steps.step && unw_steps.get_reg
               ? step_backtrace
               : NULL;
}
#else
static ledger_walk_fn lookup_walker(void *h)
{
    return (ledger_walk_fn)ledger_dlsym()(h, "unw_backtrace");
}
#endif

static void load_once_body(void)
{
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        log_warn("backtraces are off: cannot load libunwind.so.8 (%s)", dlerror());
        return;
    }
    if (guard_install(h) != 0) {
        log_warn("backtraces are off: libunwind.so.8 keeps a pipe that npupool cannot guard "
                 "against a program that closes or reuses its descriptors");
        return;
    }
    ledger_walk_fn fn = lookup_walker(h);
    if (!fn) {
        log_warn("backtraces are off: libunwind.so.8 has no unw_backtrace");
        return;
    }
    /* Warm the unwinder: its global init, this thread's trace cache and lazy bindings. */
    void *buf[8];
    fn(buf, 8);
    ledger_unwind_tls_ready = 1;
    atomic_store_explicit(&ledger_unwind_walker, fn, memory_order_release);
}

LEDGER_HIDDEN int ledger_unwind_load(void)
{
    pthread_once(&load_once, load_once_body);
    return atomic_load_explicit(&ledger_unwind_walker, memory_order_acquire) != NULL;
}

LEDGER_HIDDEN int ledger_unwind_ready(void)
{
    return atomic_load_explicit(&ledger_unwind_walker, memory_order_acquire) != NULL;
}

LEDGER_HIDDEN int ledger_unwind_tls_probe(void)
{
    void *probe = malloc(LEDGER_TLS_PROBE);
    if (!probe) {
        if (atomic_fetch_add_explicit(&tls_skipped, 1, memory_order_relaxed) == 0)
            log_warn("no host memory for the unwinder in a new thread: its allocations are "
                     "recorded without a stack until memory is back");
        return -1;
    }
    free(probe);
    return 0;
}

LEDGER_HIDDEN uint64_t ledger_unwind_skipped(void)
{
    return atomic_load_explicit(&tls_skipped, memory_order_relaxed);
}
