/* tests/unit/test_tool_trace.c — the shim's trace recorder (shim/trace.c) against the CLI's trace
 * reader (tools/trace_read.c): round trip, 8 threads through many buffer flushes (only whole
 * lines, nothing lost), fork (the child never writes the parent's buffered lines), tracing off,
 * an unopenable path; and the reader on good and bad input (RMM format included).
 * Each recorder test runs in a forked child: the recorder is process-wide state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "trace.h"
#include "../../tools/trace_read.h"

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
    assert_int_equal(trace_load(p, &t), 0);
    assert_int_equal(t.format, TRC_FMT_NPUPOOL);
    assert_int_equal(t.nev, 4);
    assert_int_equal(t.nallocs, 3);
    assert_int_equal(t.nfrees, 1);
    assert_int_equal(t.ndevices, 2);
    assert_int_equal(t.live_at_end, 2);
    assert_int_equal(t.ev[2].action, TRC_FREE);
    assert_int_equal(t.ev[2].slot, t.ev[0].slot); /* the free found the device-0 block */
    assert_int_equal(t.ev[2].size, 100);
    assert_int_equal(t.ev[3].size, 300);
    assert_int_not_equal(t.ev[3].slot, t.ev[0].slot);
    trace_release(&t);
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
    assert_int_equal(trace_load(p, &t), 0); /* any torn line would fail here */
    assert_int_equal(t.nallocs, NTHREADS * PAIRS);
    assert_int_equal(t.nfrees, NTHREADS * PAIRS);
    assert_int_equal(t.live_at_end, 0);
    assert_int_equal(t.unknown_frees, 0); /* every free came after its alloc */
    trace_release(&t);
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
    assert_int_equal(trace_load(p, &t), 0);
    assert_int_equal(t.nallocs, 11); /* its 10 buffered lines once, and one more */
    trace_release(&t);
    snprintf(name, sizeof name, "fork-%d.trace", kid);
    path_of(p, sizeof p, name);
    assert_int_equal(trace_load(p, &t), 0);
    assert_int_equal(t.nallocs, 2); /* only the child's own: none of the parent's buffer */
    trace_release(&t);
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
    assert_int_equal(trace_load(p, &t), 0);
    assert_int_equal(t.nallocs, 1);
    trace_release(&t);
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
    return trace_parse("mem", text, strlen(text), t, 1);
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
    assert_int_equal(t.format, TRC_FMT_RMM);
    assert_int_equal(t.nallocs, 2);
    assert_int_equal(t.nfrees, 2);
    assert_int_equal(t.nfails, 1);
    assert_int_equal(t.ev[1].action, TRC_FAIL);
    assert_int_equal(t.ev[1].size, 99999999);
    trace_release(&t);
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
    assert_int_equal(trace_parse("mem", nul, sizeof nul - 1, &t, 1), 2);
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
    trace_release(&t);
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
        cmocka_unit_test(test_reader_errors),
        cmocka_unit_test(test_reader_lenient),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
