/* shim/crash.c — the one line a fatal signal leaves when the ledger is in a file.
 *
 * Owns: npupool's handlers of SIGSEGV, SIGBUS, SIGABRT, SIGFPE and SIGILL.  Installed once, at the
 * first ACL call (init.c), only when a ledger file is being written (NPUPOOL_LEDGER_FILE), and
 * only for a signal whose disposition is still SIG_DFL: a handler the application or a sanitizer
 * runtime installed before is never touched, and one installed after simply replaces npupool's.
 * The handler (SA_RESETHAND: the default disposition is back before it runs) notes the signal in
 * the file's header, writes
 *     npupool[1234]: pid 1234 died of SIGSEGV; its ledger is in PATH; npupool recover PATH
 * and lets the signal do what it would have done: a fault the kernel raised (si_code > 0) happens
 * again when the handler returns to the faulting instruction; a signal that was sent (kill,
 * abort()'s raise) is raised once more, blocked until the handler returns.  So the exit status and
 * the core dump are those the process would have had.  Called by another handler that chains to
 * it (the disposition is then not the default), it only writes the line and returns.
 * Async-signal-safe throughout: no lock, no allocation, no stdio (base/fmt.h, write(2)).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"
#include "log.h"
#include "ledger_file.h"
#include "shim.h"

static const struct {
    int sig;          /* signal number */
    const char *name; /* as people write it */
} fatal[] = {
    {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGABRT, "SIGABRT"},
    {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},
};
#define FATAL_COUNT (sizeof fatal / sizeof fatal[0])

/* Append s to the line (never past its end). */
static size_t put(char *line, size_t n, size_t cap, const char *s)
{
    while (*s && n < cap) line[n++] = *s++;
    return n;
}

static void on_fatal(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    int saved = errno;
    const char *path = ledger_file_path();
    if (path) {
        ledger_file_note_death(sig);
        const char *name = "a fatal signal";
        for (size_t i = 0; i < FATAL_COUNT; i++)
            if (fatal[i].sig == sig) name = fatal[i].name;
        char line[2 * 4096 + 128 + LOG_HEAD_MAX];
        size_t cap = sizeof line - 1, n = log_head(line, LOG_HEAD_MAX);
        n = put(line, n, cap, "pid ");
        char num[24];
        num[fmt_u64(num, (uint64_t)getpid())] = 0;
        n = put(line, n, cap, num);
        n = put(line, n, cap, " died of ");
        n = put(line, n, cap, name);
        n = put(line, n, cap, "; its ledger is in ");
        n = put(line, n, cap, path);
        n = put(line, n, cap, "; npupool recover ");
        n = put(line, n, cap, path);
        line[n++] = '\n';
        ssize_t w = write(STDERR_FILENO, line, n);
        (void)w;
    }
    struct sigaction now;
    if (sigaction(sig, NULL, &now) == 0 && now.sa_handler == SIG_DFL && info && info->si_code <= 0)
        raise(sig); /* sent, not a fault: pending until we return, then the default action */
    errno = saved;
}

void crash_install(void)
{
    if (!ledger_file_path()) return;
    for (size_t i = 0; i < FATAL_COUNT; i++) {
        struct sigaction old;
        if (sigaction(fatal[i].sig, NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal[i].sig, &sa, NULL);
    }
}
