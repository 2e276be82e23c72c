/* tests/unit/test_tool_trace.c — the shim's trace recorder (shim/trace.c) against the CLI's trace
 * reader (tools/trace_read.c): round trip, 8 threads through many buffer flushes (only whole
 * lines, nothing lost), fork (the child never writes the parent's buffered lines), tracing off,
 * an unopenable path; and the reader on good and bad input (RMM format included), sizes and
 * pointers up to 2^64 - 1, input arriving in pieces through a pipe (lines split between pieces),
 * hostile input stopped at its first piece.
 * Each recorder test runs in a forked child: the recorder is process-wide state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "trace.h"
#include "trace_read.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/npupool-trace-test-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Run fn in a child process; assert it exits 0. */
static void in_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void path_of(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

/* ---- round trip --------------------------------------------------------------------------- */

static void child_roundtrip(void)
{
    char p[128];
    path_of(p, sizeof p, "rt.trace");
    if (trace_open(p) != 1) _exit(10);
    if (trace_open(p) != 1) _exit(11); /* idempotent */
    trace_alloc(0, 0x1000, 100);
    trace_alloc(1, 0x1000, 200); /* same address on another device: a different allocation */
    trace_free(0, 0x1000);
    trace_alloc(0, 0x1000, 300); /* address reused after its free */
    trace_flush();
    trace_flush();
}

static void test_roundtrip(void **state)
{
    (void)state;
    in_child(child_roundtrip);
    char p[128];
    path_of(p, sizeof p, "rt.trace");
    trace_t t;
    assert_int_equal(trace_read_file(p, &t), 0);
    assert_int_equal(t.format, TRACE_FMT_NPUPOOL);
    assert_int_equal(t.nev, 4);
    assert_int_equal(t.nallocs, 3);
    assert_int_equal(t.nfrees, 1);
    assert_int_equal(t.ndevices, 2);
    assert_int_equal(t.live_at_end, 2);
    assert_int_equal(t.ev[2].action, TRACE_FREE);
    assert_int_equal(t.ev[2].slot, t.ev[0].slot); /* the free found the device-0 block */
    assert_int_equal(t.ev[2].size, 100);
    assert_int_equal(t.ev[3].size, 300);
    assert_int_not_equal(t.ev[3].slot, t.ev[0].slot);
    trace_read_release(&t);
}

/* ---- threads ------------------------------------------------------------------------------ */

#define NTHREADS 8
#define PAIRS 20000

static void *thread_body(void *arg)
{
    uintptr_t base = ((uintptr_t)arg + 1) << 32;
    for (uintptr_t i = 0; i < PAIRS; i++) {
        trace_alloc(0, base + i * 64, (size_t)(i % 977) + 1);
        if (i % 3 == 0) trace_flush(); /* flushes race with appends */
        trace_free(0, base + i * 64);
    }
    return NULL;
}

static void child_threads(void)
{
    char p[128];
    path_of(p, sizeof p, "threads.trace");
    if (trace_open(p) != 1) _exit(10);
    pthread_t th[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++)
        if (pthread_create(&th[i], NULL, thread_body, (void *)i) != 0) _exit(11);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    trace_flush();
}

static void test_threads(void **state)
{
    (void)state;
    in_child(child_threads);
    char p[128];
    path_of(p, sizeof p, "threads.trace");
    trace_t t;
    assert_int_equal(trace_read_file(p, &t), 0); /* any torn line would fail here */
    assert_int_equal(t.nallocs, NTHREADS * PAIRS);
    assert_int_equal(t.nfrees, NTHREADS * PAIRS);
    assert_int_equal(t.live_at_end, 0);
    assert_int_equal(t.unknown_frees, 0); /* every free came after its alloc */
    trace_read_release(&t);
}

/* ---- fork --------------------------------------------------------------------------------- */

static void child_fork(void)
{
    char tmpl[128];
    path_of(tmpl, sizeof tmpl, "fork-%p.trace");
    pthread_atfork(trace_fork_prepare, trace_fork_parent, trace_fork_child);
    if (trace_open(tmpl) != 1) _exit(10);
    for (uintptr_t i = 0; i < 10; i++)
        trace_alloc(0, 0x10000 + i * 64, 64); /* buffered, unwritten */
    pid_t kid = fork();
    if (kid == 0) {
        trace_alloc(0, 0x90000, 128);
        trace_alloc(0, 0x90100, 128);
        trace_flush();
        _exit(0);
    }
    int st;
    waitpid(kid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(12);
    trace_alloc(0, 0x20000, 64);
    trace_flush();
    /* Tell the test which pid the child had. */
    char p[160];
    path_of(p, sizeof p, "fork.kid");
    FILE *f = fopen(p, "w");
    if (!f) _exit(13);
    fprintf(f, "%d %d\n", (int)getpid(), (int)kid);
    fclose(f);
}

static void test_fork(void **state)
{
    (void)state;
    in_child(child_fork);
    char p[160];
    path_of(p, sizeof p, "fork.kid");
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    int parent, kid;
    assert_int_equal(fscanf(f, "%d %d", &parent, &kid), 2);
    fclose(f);
    trace_t t;
    char name[64];
    snprintf(name, sizeof name, "fork-%d.trace", parent);
    path_of(p, sizeof p, name);
    assert_int_equal(trace_read_file(p, &t), 0);
    assert_int_equal(t.nallocs, 11); /* its 10 buffered lines once, and one more */
    trace_read_release(&t);
    snprintf(name, sizeof name, "fork-%d.trace", kid);
    path_of(p, sizeof p, name);
    assert_int_equal(trace_read_file(p, &t), 0);
    assert_int_equal(t.nallocs, 2); /* only the child's own: none of the parent's buffer */
    trace_read_release(&t);
}

static void child_fork_nopid(void)
{
    char p[128];
    path_of(p, sizeof p, "nopid.trace");
    pthread_atfork(trace_fork_prepare, trace_fork_parent, trace_fork_child);
    if (trace_open(p) != 1) _exit(10);
    trace_alloc(0, 0x10000, 64);
    pid_t kid = fork();
    if (kid == 0) {
        trace_alloc(0, 0x90000, 128); /* no %p: the child does not trace */
        trace_flush();
        _exit(0);
    }
    waitpid(kid, NULL, 0);
    trace_flush();
}

static void test_fork_no_pid(void **state)
{
    (void)state;
    in_child(child_fork_nopid);
    char p[128];
    path_of(p, sizeof p, "nopid.trace");
    trace_t t;
    assert_int_equal(trace_read_file(p, &t), 0);
    assert_int_equal(t.nallocs, 1);
    trace_read_release(&t);
}

static void child_off(void)
{
    if (trace_open(NULL) != 0) _exit(10);
    trace_alloc(0, 0x1000, 1);
    trace_free(0, 0x1000);
    trace_flush();
    if (trace_open("/nonexistent-dir/x/y.trace") != 0)
        _exit(11); /* one message, tracing stays off */
    trace_alloc(0, 0x1000, 1);
}

static void test_off_and_bad_path(void **state)
{
    (void)state;
    in_child(child_off);
}

/* ---- reader ------------------------------------------------------------------------------- */

static int parse(const char *text, trace_t *t)
{
    return trace_read_buffer("mem", text, strlen(text), t, 1);
}

static void test_reader_rmm(void **state)
{
    (void)state;
    const char *csv =
        "Thread,Time,Action,Pointer,Size,Stream\n"
        "140573312345856,07:49:44.519342,allocate,0x7f8a40000000,1024,0x0\n"
        "140573312345856,07:49:44.519400,allocate failure,0x0,99999999,0x0\n"
        "140573312345856,07:49:44.519500,allocate,0x7f8a40000400,2048,0x7f8a38001020\n"
        "140573312345856,07:49:44.519600,free,0x7f8a40000000,1024,0x0\n"
        "140573312345856,1634567890.345678,deallocate,0x7f8a40000400,2048,0x0\r\n";
    trace_t t;
    assert_int_equal(parse(csv, &t), 0);
    assert_int_equal(t.format, TRACE_FMT_RMM);
    assert_int_equal(t.nallocs, 2);
    assert_int_equal(t.nfrees, 2);
    assert_int_equal(t.nfails, 1);
    assert_int_equal(t.ev[1].action, TRACE_FAIL);
    assert_int_equal(t.ev[1].size, 99999999);
    trace_read_release(&t);
}

/* TRACE_KEEP_*: times per event, pointers per allocation, the header's pid; RMM times of day,
 * an unreadable one repeating the time before; nothing kept without the flags. */
static void test_reader_keep(void **state)
{
    (void)state;
    const char *text = "# npupool-trace/1 pid=4242 clock=monotonic_ns\n"
                       "thread,time_ns,action,pointer,size,device\n"
                       "1,100,alloc,0x1000,16,0\n"
                       "1,250,alloc,0xffffffffffffffc0,32,3\n"
                       "1,300,free,0x1000,,0\n"
                       "1,18446744073709551615,alloc,0x1000,8,0\n";
    trace_t t;
    assert_int_equal(
        trace_read_buffer_keep("mem", text, strlen(text), TRACE_KEEP_TIME | TRACE_KEEP_ADDR, &t, 0),
        0);
    assert_int_equal(t.pid, 4242);
    assert_int_equal(t.nev, 4);
    assert_non_null(t.time_ns);
    assert_true(t.time_ns[0] == 100 && t.time_ns[1] == 250 && t.time_ns[2] == 300);
    assert_true(t.time_ns[3] == UINT64_MAX);
    assert_non_null(t.addr);
    assert_true(t.addr[0] == 0x1000 && t.addr[1] == 0xffffffffffffffc0 && t.addr[2] == 0x1000);
    assert_int_equal(t.ev[2].slot, 0); /* the free names its allocation's slot */
    trace_read_release(&t);
    assert_int_equal(trace_read_buffer("mem", text, strlen(text), &t, 0), 0);
    assert_null(t.time_ns);
    assert_null(t.addr);
    assert_int_equal(t.pid, 4242);
    trace_read_release(&t);

    const char *csv = "Thread,Time,Action,Pointer,Size,Stream\n"
                      "1,07:49:44.519342,allocate,0x7f8a40000000,1024,0x0\n"
                      "1,garbage,allocate failure,0x0,99,0x0\n"
                      "1,23:59:59.5,free,0x7f8a40000000,1024,0x0\n";
    assert_int_equal(trace_read_buffer_keep("mem", csv, strlen(csv), TRACE_KEEP_TIME, &t, 0), 0);
    assert_int_equal(t.pid, 0);
    const uint64_t first = ((7 * 60 + 49) * 60 + 44) * 1000000000ull + 519342000ull;
    assert_true(t.time_ns[0] == first);
    assert_true(t.time_ns[1] == first);
    assert_true(t.time_ns[2] == (23 * 3600 + 59 * 60 + 59) * 1000000000ull + 500000000ull);
    assert_null(t.addr);
    trace_read_release(&t);
    /* many events: the kept arrays grow with the events */
    size_t cap = 1 << 20, n = 0;
    char *big = malloc(cap);
    n += (size_t)snprintf(big, cap,
                          "# npupool-trace/1 pid=7\nthread,time_ns,action,pointer,size,device\n");
    for (int i = 0; i < 10000; i++)
        n +=
            (size_t)snprintf(big + n, cap - n, "1,%d,alloc,0x%x,64,0\n", 1000 + i, 0x1000 + 64 * i);
    assert_int_equal(
        trace_read_buffer_keep("mem", big, n, TRACE_KEEP_TIME | TRACE_KEEP_ADDR, &t, 0), 0);
    for (int i = 0; i < 10000; i++) {
        assert_true(t.time_ns[i] == (uint64_t)(1000 + i));
        assert_true(t.addr[i] == (uint64_t)(0x1000 + 64 * i));
    }
    trace_read_release(&t);
    free(big);
}

static void test_reader_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",                                                               /* empty */
        "hello\n",                                                        /* unknown format */
        "# npupool-trace/2\nthread,time_ns,action,pointer,size,device\n", /* other version */
        "# npupool-trace/1\n1,2,alloc,0x10,5,0\n",                        /* no column line */
        "# npupool-trace/1\n",                                            /* truncated */
        "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n1,2,alloc,0x10,5\n",
        "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n1,2,alloc,0x10,5,0,7\n",
        "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n1,2,grab,0x10,5,0\n",
        "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n1,2,alloc,zz,5,0\n",
        "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n1,2,alloc,0x10,-5,0\n",
        "# "
        "npupool-trace/"
        "1\nthread,time_ns,action,pointer,size,device\n1,2,alloc,0x10,99999999999999999999999,0\n",
        "# "
        "npupool-trace/"
        "1\nthread,time_ns,action,pointer,size,device\n1,2,alloc,0x10,5,0\n1,3,alloc,0x10,6,0\n",
        "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n1,2,alloc,0x0,5,0\n",
        "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:01.0,allocate,0x10,abc,0x0\n",
        "Thread,Time,Action,Pointer,Size,Stream\n1,,allocate,0x10,5,0x0\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        trace_t t;
        if (parse(bad[i], &t) != 2) fail_msg("bad input %zu was accepted", i);
        assert_null(t.ev);
    }
    /* NUL bytes */
    trace_t t;
    static const char nul[] =
        "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n1,2,al\0loc,0x10,5,0\n";
    assert_int_equal(trace_read_buffer("mem", nul, sizeof nul - 1, &t, 1), 2);
}

static void test_reader_lenient(void **state)
{
    (void)state;
    /* Comments, blank lines, unknown frees, a last line without newline, negative device. */
    const char *txt = "# npupool-trace/1 pid=1\n\nthread,time_ns,action,pointer,size,device\n"
                      "# a comment\n1,2,free,0x999,,0\n1,3,alloc,0x10,5,-1\n\n1,4,free,0x10,,-1";
    trace_t t;
    assert_int_equal(parse(txt, &t), 0);
    assert_int_equal(t.unknown_frees, 1);
    assert_int_equal(t.nallocs, 1);
    assert_int_equal(t.nfrees, 1);
    assert_int_equal(t.ndevices, 2); /* the unknown free named device 0 first */
    assert_int_equal(t.device_ids[1], -1);
    trace_read_release(&t);
}

static void test_reader_exact(void **state)
{
    (void)state;
    const char *txt = "# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n"
                      "18446744073709551615,18446744073709551615,alloc,0xffffffffffffffff,"
                      "18446744073709551615,0\n"
                      "1,2,free,0xFFFFFFFFFFFFFFFF,,0\n";
    trace_t t;
    assert_int_equal(parse(txt, &t), 0);
    assert_int_equal(t.nev, 2);
    assert_true(t.ev[0].size == UINT64_MAX);
    assert_true(t.ev[1].size == UINT64_MAX); /* the free found its allocation */
    trace_read_release(&t);
    /* one more is too much, and so is a 17th hex digit */
    assert_int_equal(parse("# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n"
                           "1,2,alloc,0x10,18446744073709551616,0\n",
                           &t),
                     2);
    assert_int_equal(parse("# npupool-trace/1\nthread,time_ns,action,pointer,size,device\n"
                           "1,2,alloc,0x10000000000000000,5,0\n",
                           &t),
                     2);
}

/* Write `len` bytes of `text` into a pipe from a child, in writes of `step` bytes; read it back
 * with trace_read_file("/dev/fd/N") (pieces as the pipe delivers them). */
static int read_through_pipe(const char *text, size_t len, size_t step, trace_t *t)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        for (size_t off = 0; off < len;) {
            size_t n = len - off < step ? len - off : step;
            ssize_t w = write(fds[1], text + off, n);
            if (w <= 0) _exit(w < 0 && errno == EPIPE ? 0 : 1);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    char path[32];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    int rc = trace_read_file(path, t);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    return rc;
}

static void test_reader_pieces(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    /* ~1 MB of events: the 64 KiB pieces split lines; odd-sized writes split them anywhere */
    size_t cap = 2 << 20, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    n += (size_t)snprintf(buf, cap,
                          "# npupool-trace/1 pid=1\nthread,time_ns,action,pointer,size,device\n");
    for (int i = 0; i < 20000; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "7,%d,alloc,0x%x,%d,%d\n", 2 * i, 0x1000 + 64 * i,
                              i + 1, i % 3);
        if (i % 2)
            n += (size_t)snprintf(buf + n, cap - n, "7,%d,free,0x%x,,%d\r\n", 2 * i + 1,
                                  0x1000 + 64 * i, i % 3);
    }
    n += (size_t)snprintf(buf + n, cap - n, "7,99999,alloc,0xdead,5,0"); /* no final newline */
    trace_t whole, piecewise;
    assert_int_equal(trace_read_buffer("mem", buf, n, &whole, 0), 0);
    static const size_t steps[] = {1 << 20, 4093, 7};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        assert_int_equal(read_through_pipe(buf, n, steps[k], &piecewise), 0);
        assert_int_equal(piecewise.nev, whole.nev);
        assert_int_equal(piecewise.lines, whole.lines);
        assert_int_equal(piecewise.ndevices, whole.ndevices);
        assert_memory_equal(piecewise.ev, whole.ev, whole.nev * sizeof *whole.ev);
        trace_read_release(&piecewise);
    }
    trace_read_release(&whole);
    /* a NUL after the first piece stops the read there */
    memset(buf + n - 100, 0, 100);
    assert_int_equal(read_through_pipe(buf, n, 1 << 20, &piecewise), 2);
    assert_null(piecewise.ev);
    /* a line longer than the reader takes */
    n = (size_t)snprintf(buf, cap, "# npupool-trace/1\n#");
    memset(buf + n, 'x', 100000);
    n += 100000;
    assert_int_equal(read_through_pipe(buf, n, 4096, &piecewise), 2);
    assert_int_equal(trace_read_buffer("mem", buf, n, &piecewise, 1), 2);
    /* random bytes: refused within the first piece */
    uint64_t s = 3;
    for (size_t i = 0; i < (1 << 20); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (char)(s >> 56);
    }
    assert_int_equal(read_through_pipe(buf, 1 << 20, 1 << 20, &piecewise), 2);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_fork_no_pid),
        cmocka_unit_test(test_off_and_bad_path),
        cmocka_unit_test(test_reader_rmm),
        cmocka_unit_test(test_reader_keep),
        cmocka_unit_test(test_reader_errors),
        cmocka_unit_test(test_reader_lenient),
        cmocka_unit_test(test_reader_exact),
        cmocka_unit_test(test_reader_pieces),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
