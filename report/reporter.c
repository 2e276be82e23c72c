/* report/reporter.c — the reporter thread and the report signal.
 *
 * Owns: the thread that writes signal, interval and threshold reports while the application keeps
 * running and rewrites the metrics file (metrics.h) on its own period, its wake-up word, and the
 * signal handler npupool installs for NPUPOOL_REPORT_SIGNAL.
 * Wake-up without a descriptor: wakers set a bit in `wake_word` and futex-wake it; the thread
 * takes the bits with one exchange and sleeps on the word (FUTEX_WAIT against 0, with the time
 * left to the earlier of the next interval report and the next metrics rewrite).  Both sides are
 * async-signal-safe and lock-free, so the signal handler is one atomic OR and one system call,
 * and a program that closes or reuses every descriptor can never receive npupool's bytes or steal
 * its wake-ups.
 * The handler is installed only where the signal's disposition is still the default; an
 * application's handler, installed before or after, is never replaced or undone.
 * The thread blocks every signal (so none lands on it) and is never started in a fork child.
 * Locking: reporter_start_locked runs under the report lock; rp's fields are written only there,
 * by reporter_stop (after joining) and in the fork child; reporter_wake is lock-free.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "barrier.h"
#include "clock.h"
#include "log.h"
#include "report_internal.h"

#define WAKE_SIGNAL 1u    /* the report signal arrived */
#define WAKE_THRESHOLD 2u /* a monitor owes a threshold report */
#define WAKE_QUIT 4u      /* reporter_stop: exit the thread */
#define WAKE_OOM 8u       /* a refusal's report was deferred */

static _Atomic uint32_t wake_word; /* WAKE_* bits not yet taken by the thread */

static struct {
    int running;           /* the thread exists */
    pthread_t thread;      /* the reporter thread */
    int handler_installed; /* npupool installed the signal handler */
    int handler_signal;    /* which signal */
} rp;

static void wake(uint32_t bit) /* also from the signal handler: futex_wake keeps errno */
{
    atomic_fetch_or(&wake_word, bit);
    futex_wake(&wake_word, 1);
}

REPORT_HIDDEN void reporter_wake(char why)
{
    wake(why == REPORTER_WAKE_SIGNAL ? WAKE_SIGNAL
         : why == REPORTER_WAKE_OOM  ? WAKE_OOM
                                     : WAKE_THRESHOLD);
}

static void on_signal(int sig)
{
    (void)sig;
    wake(WAKE_SIGNAL);
}

/* A period in nanoseconds (0 = off). */
static uint64_t period_ns(double seconds) { return seconds > 0 ? (uint64_t)(seconds * 1e9) : 0; }

/* The deadline after `due` once it was met at `now`: one period later, or one period from now
 * when the thread fell more than a period behind (no burst of catch-up writes). */
static uint64_t deadline_next(uint64_t due, uint64_t period, uint64_t now)
{
    due += period;
    return due <= now ? now + period : due;
}

/* Nanoseconds from now to the earlier of the deadlines of the periods that are on
 * (UINT64_MAX = none is on: sleep until woken). */
static uint64_t time_to_next(uint64_t now, uint64_t period, uint64_t due, uint64_t mperiod,
                             uint64_t mdue)
{
    uint64_t timeout = UINT64_MAX;
    if (period) timeout = due > now ? due - now : 0;
    if (mperiod) {
        uint64_t m = mdue > now ? mdue - now : 0;
        if (m < timeout) timeout = m;
    }
    return timeout;
}

static void *reporter_main(void *arg)
{
    (void)arg;
    uint64_t period = period_ns(report_interval_s());          /* interval reports */
    uint64_t mperiod = period_ns(report_metrics_interval_s()); /* metrics rewrites */
    uint64_t start = clock_mono_ns();
    uint64_t due = start + period;
    uint64_t mdue = start; /* the metrics file appears at once, then every mperiod */
    for (;;) {
        uint32_t bits = atomic_exchange(&wake_word, 0);
        if (!bits) {
            uint64_t timeout = time_to_next(clock_mono_ns(), period, due, mperiod, mdue);
            if (timeout) futex_wait(&wake_word, 0, timeout); /* while no bit is set */
            bits = atomic_exchange(&wake_word, 0);
        }
        if (bits & WAKE_QUIT) return NULL;
        if (bits & WAKE_SIGNAL) {
            report_count_signal();
            report_write_background(WIRE_TRIGGER_SIGNAL, -1, NULL);
        }
        if (bits & WAKE_THRESHOLD) monitor_write_pending();
        if (bits & WAKE_OOM) report_write_deferred_oom();
        uint64_t now = clock_mono_ns();
        if (period && now >= due) {
            report_write_background(WIRE_TRIGGER_INTERVAL, -1, NULL);
            due = deadline_next(due, period, now);
        }
        if (mperiod && now >= mdue) {
            report_write_metrics();
            mdue = deadline_next(mdue, mperiod, clock_mono_ns());
        }
    }
}

static int thread_start(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits: no signal lands on it */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    int e = pthread_create(&rp.thread, &attr, reporter_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        log_warn("no background reports: cannot start the reporter thread: %s", strerror(e));
        return -1;
    }
    rp.running = 1;
    return 0;
}

static void handler_install(int sig)
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
        old.sa_handler != SIG_DFL) {
        log_info("signal %d already has a handler: NPUPOOL_REPORT_SIGNAL reports are off", sig);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) == 0) {
        rp.handler_installed = 1;
        rp.handler_signal = sig;
    }
}

REPORT_HIDDEN int reporter_start_locked(int signal, int need_thread)
{
    if (rp.running || !need_thread) return 0;
    atomic_store(&wake_word, 0);
    if (thread_start() != 0) return -1;
    if (signal > 0) handler_install(signal);
    return 0;
}

REPORT_HIDDEN void reporter_stop(void)
{
    if (rp.handler_installed) {
        struct sigaction cur;
        /* Only undo our own handler: the application may have replaced it since. */
        if (sigaction(rp.handler_signal, NULL, &cur) == 0 && cur.sa_handler == on_signal)
            signal(rp.handler_signal, SIG_DFL);
        rp.handler_installed = 0;
    }
    if (rp.running) {
        wake(WAKE_QUIT);
        pthread_join(rp.thread, NULL);
        rp.running = 0;
    }
    atomic_store(&wake_word, 0);
}

REPORT_HIDDEN void reporter_fork_child(void)
{
    /* The parent's thread does not exist here.  No thread is started in the child (a child of a
     * threaded process should not create threads before exec; ThreadSanitizer refuses it): the
     * child writes exit, finalize, reset and oom reports, and gets background reports again only
     * if report_start_background() is called in it.  The signal gets its default action back, as
     * without npupool. */
    rp.running = 0;
    if (rp.handler_installed) {
        signal(rp.handler_signal, SIG_DFL);
        rp.handler_installed = 0;
    }
    atomic_store(&wake_word, 0);
}
