/* shim/trace.c — the allocation trace recorder declared in trace.h (see there for the contract).
 *
 * Owns: the trace file descriptor, its path template and one 64 KiB line buffer.
 * Invariants: tr.len <= TRACE_BUF_BYTES and tr.buf[0..len) holds whole '\n'-terminated lines;
 * tr.on == 1 exactly when tr.fd >= 0 (tr.on is also read without the lock, as a hint).
 * Locking: tr.lock guards fd, len and buf.  Lines are formatted outside the lock, except the time
 * stamp, which is patched in under it so that file order == time order.
 * Formatting is by hand (no stdio, no locale, no malloc): it runs inside aclrtMalloc/aclrtFree.
 */
#define _GNU_SOURCE
#include "trace.h"

#include "log.h"

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
    int fd;                    /* trace file, -1 when off */
    int per_pid;               /* 1 when the template holds %p: children trace to their own file */
    size_t len;                /* bytes used in buf (whole lines only) */
    pthread_mutex_t lock;      /* guards fd, len, buf */
    char tmpl[PATH_MAX];       /* NPUPOOL_TRACE as given */
    char buf[TRACE_BUF_BYTES]; /* buffered lines */
} tr = {.on = 0, .fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* Cached kernel thread id; 0 = not fetched yet.  initial-exec: no __tls_get_addr (no malloc). */
static __thread pid_t trace_tid __attribute__((tls_model("initial-exec")));

static pid_t tid_get(void)
{
    if (trace_tid == 0) trace_tid = (pid_t)syscall(SYS_gettid);
    return trace_tid;
}

/* ---- tiny formatters: return the number of chars written at p ------------------------- */

static size_t fmt_u64(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

static size_t fmt_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v != 0);
    p[0] = '0';
    p[1] = 'x';
    for (size_t i = 0; i < n; i++) p[2 + i] = tmp[n - 1 - i];
    return n + 2;
}

/* ---- file handling ----------------------------------------------------------------------- */

/* write(2) all of buf; 0 on success, -1 on error (errno kept for the caller). */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Expand the template for `pid` into out.  Returns 0, or -1 when it does not fit. */
static int path_expand(const char *tmpl, pid_t pid, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *s = tmpl; *s; s++) {
        char num[24];
        const char *ins = NULL;
        size_t inslen = 0;
        if (s[0] == '%' && s[1] == 'p') {
            inslen = fmt_u64(num, (uint64_t)pid);
            ins = num;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            ins = "%";
            inslen = 1;
            s++;
        } else {
            ins = s;
            inslen = 1;
        }
        if (o + inslen + 1 > cap) return -1;
        memcpy(out + o, ins, inslen);
        o += inslen;
    }
    out[o] = '\0';
    return 0;
}

/* pre: lock held (or single-threaded).  Opens the file for `pid` and writes the header.
 * Returns 0 or -1 (one error line).  Only async-signal-safe calls: used in the fork child. */
static int file_open_unlocked(pid_t pid)
{
    char path[PATH_MAX];
    if (path_expand(tr.tmpl, pid, path, sizeof path) != 0) {
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
    static const char h1[] = "# " TRACE_FORMAT " pid=";
    memcpy(head + n, h1, sizeof h1 - 1);
    n += sizeof h1 - 1;
    n += fmt_u64(head + n, (uint64_t)pid);
    static const char h2[] = " clock=monotonic_ns\nthread,time_ns,action,pointer,size,device\n";
    memcpy(head + n, h2, sizeof h2 - 1);
    n += sizeof h2 - 1;
    if (write_all(fd, head, n) != 0) {
        log_error("NPUPOOL_TRACE: cannot write %s: %s, tracing off", path, strerror(errno));
        close(fd);
        return -1;
    }
    tr.fd = fd;
    tr.len = 0;
    __atomic_store_n(&tr.on, 1, __ATOMIC_RELEASE);
    return 0;
}

/* pre: lock held.  Stops tracing (after a write error or in a child that may not trace). */
static void file_close_unlocked(void)
{
    __atomic_store_n(&tr.on, 0, __ATOMIC_RELEASE);
    if (tr.fd >= 0) close(tr.fd);
    tr.fd = -1;
    tr.len = 0;
}

/* pre: lock held.  Writes the buffered lines; on error reports once and stops tracing. */
static void buf_flush_unlocked(void)
{
    if (tr.fd < 0 || tr.len == 0) return;
    if (write_all(tr.fd, tr.buf, tr.len) != 0) {
        log_error("NPUPOOL_TRACE: write failed: %s, tracing off (the trace ends early)",
                  strerror(errno));
        file_close_unlocked();
        return;
    }
    tr.len = 0;
}

int trace_open_from_env(void)
{
    const char *env = getenv("NPUPOOL_TRACE");
    if (env == NULL || env[0] == '\0') return 0;
    pthread_mutex_lock(&tr.lock);
    int rc = 1;
    if (tr.fd < 0) {
        size_t n = strlen(env);
        if (n >= sizeof tr.tmpl) {
            log_error("NPUPOOL_TRACE: path too long, tracing off");
            rc = 0;
        } else {
            memcpy(tr.tmpl, env, n + 1);
            tr.per_pid = strstr(tr.tmpl, "%p") != NULL;
            rc = file_open_unlocked(getpid()) == 0;
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
    if (tr.fd >= 0) {
        if (tr.len + TRACE_LINE_MAX > TRACE_BUF_BYTES) buf_flush_unlocked();
        if (tr.fd >= 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            char *p = tr.buf + tr.len;
            memcpy(p, head, h);
            p += h;
            p += fmt_u64(p, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
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

void trace_atfork_prepare(void) { pthread_mutex_lock(&tr.lock); }

void trace_atfork_parent(void) { pthread_mutex_unlock(&tr.lock); }

void trace_atfork_child(void)
{
    /* Only this thread exists now.  The buffered lines are the parent's: it writes them. */
    pthread_mutex_init(&tr.lock, NULL);
    trace_tid = 0;
    tr.len = 0;
    if (tr.fd < 0) return;
    close(tr.fd); /* shared with the parent: never write through it again */
    tr.fd = -1;
    __atomic_store_n(&tr.on, 0, __ATOMIC_RELEASE);
    if (tr.per_pid) (void)file_open_unlocked(getpid());
}
