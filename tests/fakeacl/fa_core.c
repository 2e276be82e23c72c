/* tests/fakeacl/fa_core.c — the fake runtime's global state, options, lock, fork handlers, error sink.
 *
 * Owns: fa_g (every table, budget and setting, all under fa_g.lock), the option table read once
 * from the environment, and the pthread_atfork handlers.
 *
 * Options (read once, at load time or at the first call, whichever comes first):
 *   FAKEACL_DEVICES     device count, 0..64                          (default 2)
 *   FAKEACL_HBM_BYTES   HBM per device; K/M/G/T suffixes, powers of 2 (default 64G)
 *   FAKEACL_FAIL_NTH    the N-th HBM-charging call of the process fails with 207001 (0 = off)
 *   FAKEACL_FAIL_ABOVE  every HBM-charging call whose block exceeds this fails (0 = off)
 *   FAKEACL_FAIL_PHYSICAL_NTH  the N-th aclrtMallocPhysical fails with 207001 (0 = off)
 *   FAKEACL_FAIL_MAP_NTH  the N-th aclrtMapMem fails with 207001 (0 = off)
 *   FAKEACL_FAIL_RESERVE_NTH  the N-th aclrtReserveMemAddress fails with 207001 (0 = off)
 *   FAKEACL_VMM         0: behave as a runtime without the virtual-memory API (its seven calls
 *                       answer 207000, feature not supported)                  (default 1)
 *   FAKEACL_STATS       at exit write every counter to this path ("%p" -> pid)
 * A bad value costs one `fakeacl:` line on stderr and keeps the default.
 *
 * Fork: prepare takes fa_g.lock and then the records' lock, parent and child release them, so the
 * child gets a consistent copy of every table and of the record storage and keeps using them.
 * Device memory is the process's own, as a device's address space is on an NPU: the child's
 * copy of a device block is copy-on-write host memory, and the child handler remaps every
 * mapping of a physical handle privately (fa_vmm.c), so neither process sees the other's writes
 * after the fork.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fa_internal.h"

struct fa_state fa_g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .ndev = FA_DEFAULT_DEVICES,
    .next_handle = 1,
};

static pthread_once_t fa_once = PTHREAD_ONCE_INIT;

/* ---- error sink: never allocates, one write(2) per line ---------------------------------------- */
void fa_err(const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "fakeacl: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
    buf[len++] = '\n';
    int saved = errno;
    ssize_t w = write(2, buf, len);
    (void)w;
    errno = saved;
}

void fa_lock(void) { pthread_mutex_lock(&fa_g.lock); }
void fa_unlock(void) { pthread_mutex_unlock(&fa_g.lock); }

/* ---- option parsing ------------------------------------------------------------------------------ */
int fa_parse_size(const char *s, size_t *out)
{
    if (s == NULL || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0) return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    case 't':
    case 'T':
        shift = 40;
        end++;
        break;
    default: break;
    }
    if (shift != 0 && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'b' || end[1] == 'B'))
        end += 2;
    else if (end[0] == 'b' || end[0] == 'B')
        end++;
    if (*end != '\0') return -1;
    if (shift != 0 && v > (SIZE_MAX >> shift)) return -1;
    if (v > SIZE_MAX) return -1;
    *out = (size_t)v << shift;
    return 0;
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    if (s == NULL || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) return -1;
    *out = v;
    return 0;
}

static int opt_devices(const char *v)
{
    unsigned long long n;
    if (parse_uint(v, FA_MAX_DEVICES, &n) != 0) return -1;
    fa_g.ndev = (int)n;
    return 0;
}

static int opt_hbm(const char *v)
{
    size_t b;
    if (fa_parse_size(v, &b) != 0 || b == 0) return -1;
    for (int d = 0; d < FA_MAX_DEVICES; d++) fa_g.dev[d].budget = b;
    return 0;
}

/* A fault countdown: the n-th call of its kind fails (0 = off). */
static int opt_countdown(const char *v, uint64_t *countdown)
{
    unsigned long long n;
    if (parse_uint(v, UINT64_MAX, &n) != 0) return -1;
    *countdown = n;
    return 0;
}

static int opt_fail_nth(const char *v) { return opt_countdown(v, &fa_g.fail_countdown); }

static int opt_fail_above(const char *v)
{
    size_t b;
    if (fa_parse_size(v, &b) != 0) return -1;
    fa_g.fail_above = b;
    return 0;
}

static int opt_fail_phys(const char *v) { return opt_countdown(v, &fa_g.fail_phys_countdown); }
static int opt_fail_map(const char *v) { return opt_countdown(v, &fa_g.fail_map_countdown); }
static int opt_fail_resv(const char *v) { return opt_countdown(v, &fa_g.fail_resv_countdown); }

static int opt_vmm(const char *v)
{
    unsigned long long n;
    if (parse_uint(v, 1, &n) != 0) return -1;
    fa_g.no_vmm = n == 0;
    return 0;
}

static int opt_stats(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n >= sizeof(fa_g.stats_path)) return -1;
    memcpy(fa_g.stats_path, v, n + 1);
    return 0;
}

static const struct fa_option {
    const char *name;              /* environment variable */
    const char *expect;            /* what a good value looks like (for the warning) */
    int (*apply)(const char *val); /* 0 = taken, -1 = bad value, default kept */
} fa_options[] = {
    {"FAKEACL_DEVICES", "an integer 0..64", opt_devices},
    {"FAKEACL_HBM_BYTES", "a size > 0 such as 64G, 512M, 1073741824", opt_hbm},
    {"FAKEACL_FAIL_NTH", "an integer >= 0", opt_fail_nth},
    {"FAKEACL_FAIL_ABOVE", "a size such as 1M (0 = off)", opt_fail_above},
    {"FAKEACL_FAIL_PHYSICAL_NTH", "an integer >= 0", opt_fail_phys},
    {"FAKEACL_FAIL_MAP_NTH", "an integer >= 0", opt_fail_map},
    {"FAKEACL_FAIL_RESERVE_NTH", "an integer >= 0", opt_fail_resv},
    {"FAKEACL_VMM", "0 or 1", opt_vmm},
    {"FAKEACL_STATS", "a file path (%p = pid)", opt_stats},
};

static void fork_prepare(void)
{
    pthread_mutex_lock(&fa_g.lock);
    pthread_mutex_lock(&fa_recs_lock);
}
static void fork_parent(void)
{
    pthread_mutex_unlock(&fa_recs_lock);
    pthread_mutex_unlock(&fa_g.lock);
}
static void fork_child(void)
{
    fa_vmm_fork_child_locked();
    fork_parent();
}

static void init_once(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    fa_g.page = pg > 0 ? (size_t)pg : 4096;
    for (int d = 0; d < FA_MAX_DEVICES; d++) {
        fa_g.dev[d].budget = FA_DEFAULT_HBM;
        fa_g.dev[d].hbm_fd = -1;
    }
    for (size_t i = 0; i < sizeof(fa_options) / sizeof(fa_options[0]); i++) {
        const char *v = getenv(fa_options[i].name);
        if (v != NULL && fa_options[i].apply(v) != 0)
            fa_err("%s=\"%s\" is not %s; keeping the default", fa_options[i].name, v,
                   fa_options[i].expect);
    }
    /* The physical memory of the virtual-memory API is a sparse host file (fa_vmm.c) that a
     * file-size limit (`ulimit -f`) would cut short, where a real device knows no such limit:
     * under one, the fake is a runtime without the API (npupool then keeps a block pool). */
    struct rlimit rl;
    if (!fa_g.no_vmm && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)rl.rlim_cur < (uint64_t)FA_HBM_FILE_BYTES)
        fa_g.no_vmm = 1;
    if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
        fa_err("pthread_atfork failed; fork while other threads call the fake may deadlock");
}

void fa_init(void) { pthread_once(&fa_once, init_once); }

__attribute__((constructor)) static void fa_ctor(void) { fa_init(); }
