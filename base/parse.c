/* base/parse.c — see parse.h. */
#include "parse.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    /* strtod also reads "nan", "inf", "infinity" and hexadecimal floats: refuse all of them. */
    for (const char *p = s; *p; p++)
        if (!strchr("0123456789.+-eE", *p)) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return -1;
    char *end;
    errno = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        if (!s[2] || !strchr("0123456789abcdefABCDEF", s[2])) return -1;
        unsigned long long v = strtoull(s, &end, 16);
        if (errno || *end) return -1;
        *out = v;
        return 0;
    }
    const char *num_end = s;
    int fraction = 0;
    while (*num_end && strchr("0123456789.", *num_end)) fraction |= *num_end++ == '.';
    if (num_end == s) return -1;
    char num[64];
    if ((size_t)(num_end - s) >= sizeof num) return -1;
    memcpy(num, s, (size_t)(num_end - s));
    num[num_end - s] = 0;
    unsigned shift = 0;
    const char *u = num_end;
    if (*u && strchr("kKmMgGtT", *u)) {
        shift = (unsigned)(strchr("kmgt", *u | 32) - "kmgt" + 1) * 10;
        u++;
        if (*u == 'i' || *u == 'I') u++;
    }
    if (*u == 'b' || *u == 'B') u++;
    if (*u) return -1;
    if (!fraction) { /* exact: every integer up to 2^64 - 1 */
        uint64_t v;
        if (parse_u64(num, &v) != 0 || (shift && v > UINT64_MAX >> shift)) return -1;
        *out = v << shift;
        return 0;
    }
    double d;
    if (parse_double(num, &d) != 0 || d < 0) return -1;
    d *= (double)((uint64_t)1 << shift);
    if (d >= 18446744073709551616.0 || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"1", "true", "on", "yes"};
    static const char *const no[] = {"0", "false", "off", "no"};
    if (!s) return -1;
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = 1;
            return 0;
        }
        if (!strcasecmp(s, no[i])) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

static const struct {
    const char *name; /* without "SIG" */
    int sig;          /* number */
    int refused;      /* 1: never usable as npupool's report signal */
} signals[] = {
    {"HUP", SIGHUP, 0},   {"INT", SIGINT, 0},       {"QUIT", SIGQUIT, 0}, {"ILL", SIGILL, 1},
    {"TRAP", SIGTRAP, 1}, {"ABRT", SIGABRT, 1},     {"IOT", SIGABRT, 1},  {"BUS", SIGBUS, 1},
    {"FPE", SIGFPE, 1},   {"KILL", SIGKILL, 1},     {"USR1", SIGUSR1, 0}, {"SEGV", SIGSEGV, 1},
    {"USR2", SIGUSR2, 0}, {"PIPE", SIGPIPE, 0},     {"ALRM", SIGALRM, 0}, {"TERM", SIGTERM, 0},
    {"CHLD", SIGCHLD, 0}, {"CONT", SIGCONT, 0},     {"STOP", SIGSTOP, 1}, {"TSTP", SIGTSTP, 0},
    {"TTIN", SIGTTIN, 0}, {"TTOU", SIGTTOU, 0},     {"URG", SIGURG, 0},   {"XCPU", SIGXCPU, 0},
    {"XFSZ", SIGXFSZ, 0}, {"VTALRM", SIGVTALRM, 0}, {"PROF", SIGPROF, 0}, {"WINCH", SIGWINCH, 0},
    {"IO", SIGIO, 0},     {"PWR", SIGPWR, 0},       {"SYS", SIGSYS, 1},
};
#define NSIGNALS (sizeof signals / sizeof signals[0])

int parse_signal(const char *s, int *out)
{
    if (!s || !*s) return -1;
    if (!strcasecmp(s, "off") || !strcasecmp(s, "none") || !strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    uint64_t v;
    int sig = -1;
    if (parse_u64(s, &v) == 0) {
        if (v >= (uint64_t)NSIG) return -1;
        sig = (int)v;
    } else {
        const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
        for (size_t i = 0; i < NSIGNALS && sig < 0; i++)
            if (!strcasecmp(name, signals[i].name)) sig = signals[i].sig;
        if (sig < 0) return -1;
    }
    for (size_t i = 0; i < NSIGNALS; i++)
        if (signals[i].sig == sig && signals[i].refused) return -2;
    *out = sig;
    return 0;
}

const char *parse_signal_name(int sig)
{
    static char names[NSIGNALS][12];
    for (size_t i = 0; i < NSIGNALS; i++) {
        if (signals[i].sig != sig) continue;
        if (!names[i][0]) {
            memcpy(names[i], "SIG", 3);
            strncpy(names[i] + 3, signals[i].name, sizeof names[i] - 4);
        }
        return names[i];
    }
    return NULL;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return (size_t)-1;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = (a[i - 1] | 32) == (b[j - 1] | 32) ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *parse_closest(const char *word, const char *const *candidates, size_t n)
{
    size_t limit = strlen(word) / 3;
    if (limit < 2) limit = 2;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}
