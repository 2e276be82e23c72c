/* report/trace.c — the allocation trace recorder declared in trace.h (see there for the contract).
 *
 * Owns: the trace file's path (template and expansion) and one 64 KiB line buffer.
 * No descriptor is kept: the file is created (with its header) when tracing starts, and opened
 * (O_APPEND), written and closed at every flush of the buffer.  A program that closes or reuses
 * its descriptors therefore never receives trace lines, and a trace file that was removed or
 * moved meanwhile ends the trace with one line instead of writing into somebody else's file.
 * Invariants: tr.len <= TRACE_BUF_BYTES and tr.buf[0..len) holds whole '\n'-terminated lines;
 * tr.on == 1 exactly when tr.path[0] != 0 (tr.on is also read without the lock, as a hint).
 * Locking: tr.lock guards path, len and buf.  Lines are formatted outside the lock, except the
 * time stamp, which is patched in under it so that file order == time order.
 * Formatting is by hand (no stdio, no locale, no malloc): it runs inside aclrtMalloc/aclrtFree.
 */
#define _GNU_SOURCE
#include "trace.h"

#include "clock.h"
#include "fmt.h"
#include "io.h"
#include "log.h"
#include "path.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TRACE_BUF_BYTES (64u * 1024u) /* bytes of buffered lines */
#define TRACE_LINE_MAX 128u           /* bytes: longest line (6 fields of <= 20 digits) */

static struct {
    int on;                    /* 1 while tracing (atomic hint for the fast path) */
    int per_pid;               /* 1 when the template holds %p: children trace to their own file */
    size_t len;                /* bytes used in buf (whole lines only) */
    pthread_mutex_t lock;      /* guards path, len, buf */
    char tmpl[PATH_MAX];       /* NPUPOOL_TRACE as given */
    char path[PATH_MAX];       /* this process's trace file, "" when off */
    char buf[TRACE_BUF_BYTES]; /* buffered lines */
} tr = {.on = 0, .lock = PTHREAD_MUTEX_INITIALIZER};

/* Cached kernel thread id; 0 = not fetched yet.  initial-exec: no __tls_get_addr (no malloc). */
static __thread pid_t trace_tid __attribute__((tls_model("initial-exec")));

static pid_t tid_get(void)
{
    if (trace_tid == 0) trace_tid = (pid_t)syscall(SYS_gettid);
    return trace_tid;
}

/* pre: lock held (or single-threaded).  Creates the file for `pid` with its header.
 * Returns 0 or -1 (one error line).  Only async-signal-safe calls: used in the fork child. */
static int file_create_unlocked(pid_t pid)
{
    char path[PATH_MAX];
    if (path_expand(tr.tmpl, 1, path, sizeof path) != 0) {
        log_error("NPUPOOL_TRACE: path too long, tracing off");
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_error("NPUPOOL_TRACE=%s: cannot open %s: %s, tracing off", tr.tmpl, path,
                  strerror(errno));
        return -1;
    }
    char head[160];
    size_t n = 0;
    static const char h1[] = WIRE_TRACE_HEADER " pid=";
    memcpy(head + n, h1, sizeof h1 - 1);
    n += sizeof h1 - 1;
    n += fmt_u64(head + n, (uint64_t)pid);
    static const char h2[] = " clock=monotonic_ns\n" WIRE_TRACE_COLUMNS "\n";
    memcpy(head + n, h2, sizeof h2 - 1);
    n += sizeof h2 - 1;
    int w = io_write_all(fd, head, n);
    int e = errno;
    close(fd);
    if (w != 0) {
        log_error("NPUPOOL_TRACE: cannot write %s: %s, tracing off", path, strerror(e));
        return -1;
    }
    memcpy(tr.path, path, sizeof path);
    tr.len = 0;
    __atomic_store_n(&tr.on, 1, __ATOMIC_RELEASE);
    return 0;
}

/* pre: lock held.  Stops tracing (after a write error or in a child that may not trace). */
static void tracing_stop_unlocked(void)
{
    __atomic_store_n(&tr.on, 0, __ATOMIC_RELEASE);
    tr.path[0] = 0;
    tr.len = 0;
}

/* pre: lock held.  Appends the buffered lines to the file; on error says so once and stops. */
static void buf_flush_unlocked(void)
{
    if (!tr.path[0] || tr.len == 0) return;
    int fd = open(tr.path, O_WRONLY | O_APPEND | O_CLOEXEC);
    int w = fd < 0 ? -1 : io_write_all(fd, tr.buf, tr.len);
    int e = errno;
    if (fd >= 0) close(fd);
    if (w != 0) {
        log_error("NPUPOOL_TRACE: cannot append to %s: %s, tracing off (the trace ends early)",
                  tr.path, strerror(e));
        tracing_stop_unlocked();
        return;
    }
    tr.len = 0;
}

int trace_open(const char *pattern)
{
    const char *env = pattern;
    if (env == NULL || env[0] == '\0') return 0;
    pthread_mutex_lock(&tr.lock);
    int rc = 1;
    if (!tr.path[0]) {
        size_t n = strlen(env);
        if (n >= sizeof tr.tmpl) {
            log_error("NPUPOOL_TRACE: path too long, tracing off");
            rc = 0;
        } else {
            memcpy(tr.tmpl, env, n + 1);
            tr.per_pid = strstr(tr.tmpl, "%p") != NULL;
            rc = file_create_unlocked(getpid()) == 0;
        }
    }
    pthread_mutex_unlock(&tr.lock);
    return rc;
}

/* ---- events ------------------------------------------------------------------------------- */

static void record(const char *action, size_t alen, int device, uintptr_t ptr, int has_size,
                   size_t size)
{
    /* Everything but the time stamp is formatted before taking the lock. */
    char tail[TRACE_LINE_MAX];
    size_t t = 0;
    tail[t++] = ',';
    memcpy(tail + t, action, alen);
    t += alen;
    tail[t++] = ',';
    t += fmt_hex(tail + t, (uint64_t)ptr);
    tail[t++] = ',';
    if (has_size) t += fmt_u64(tail + t, (uint64_t)size);
    tail[t++] = ',';
    if (device < 0) {
        tail[t++] = '-';
        device = -device;
    }
    t += fmt_u64(tail + t, (uint64_t)device);
    tail[t++] = '\n';

    char head[48];
    size_t h = fmt_u64(head, (uint64_t)tid_get());
    head[h++] = ',';

    pthread_mutex_lock(&tr.lock);
    if (tr.path[0]) {
        if (tr.len + TRACE_LINE_MAX > TRACE_BUF_BYTES) buf_flush_unlocked();
        if (tr.path[0]) {
            char *p = tr.buf + tr.len;
            memcpy(p, head, h);
            p += h;
            p += fmt_u64(p, clock_mono_ns());
            memcpy(p, tail, t);
            p += t;
            tr.len = (size_t)(p - tr.buf);
        }
    }
    pthread_mutex_unlock(&tr.lock);
}

void trace_alloc(int device, uintptr_t ptr, size_t size)
{
    if (!__atomic_load_n(&tr.on, __ATOMIC_RELAXED)) return;
    record("alloc", 5, device, ptr, 1, size);
}

void trace_free(int device, uintptr_t ptr)
{
    if (!__atomic_load_n(&tr.on, __ATOMIC_RELAXED)) return;
    record("free", 4, device, ptr, 0, 0);
}

void trace_flush(void)
{
    if (!__atomic_load_n(&tr.on, __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&tr.lock);
    buf_flush_unlocked();
    pthread_mutex_unlock(&tr.lock);
}

/* ---- fork --------------------------------------------------------------------------------- */

void trace_fork_prepare(void) { pthread_mutex_lock(&tr.lock); }

void trace_fork_parent(void) { pthread_mutex_unlock(&tr.lock); }

void trace_fork_child(void)
{
    /* Only this thread exists now.  The buffered lines are the parent's: it writes them. */
    pthread_mutex_init(&tr.lock, NULL);
    trace_tid = 0;
    if (!tr.path[0]) return;
    tracing_stop_unlocked(); /* the parent's file: never written by the child */
    if (tr.per_pid) (void)file_create_unlocked(getpid());
}
