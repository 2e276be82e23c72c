/* ledger/report.c — when and where reports are written (contract in report.h).
 *
 * Owns: the report state `rs` (configuration, sequence numbers, growth baseline, statistics), the
 * reporter thread and its wake-up pipe, the signal handler, the oom rate limit and the per-device
 * threshold monitors.
 *
 * Locking: rs.lock serialises reports and guards rs (except the atomics named below).  The signal
 * handler only write(2)s one byte to rs.pipe_wr (async-signal-safe, errno preserved).  Threshold
 * monitors are lock-free: per device, `level` moves up by compare-and-swap (the winner prints the
 * line and asks the thread for a report), samples for the growth rate are taken at most once a
 * second by the caller that wins the `last_sample_ns` exchange.
 *
 * Growth rate (after the seed's MemoryMonitor): the pool's allocated bytes now minus the oldest
 * sample of the last minute, over the time between them (since process start when there is no
 * older sample); predicted time to OOM = (reserved - allocated) / rate, none when not growing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "report_internal.h"
#include "symbolize.h"

#define MON_DEVICES 64              /* devices with a threshold monitor */
#define MON_RING 64                 /* growth-rate samples kept per device */
#define MON_SAMPLE_NS 1000000000ull /* at most one sample a second */
#define MON_HYSTERESIS 0.05         /* a level re-arms when use falls this far below it */
#define OOM_GAP_NS 1000000000ull    /* oom reports at least this far apart */

typedef struct monitor {
    _Atomic int level;                   /* highest level announced since re-armed: 0, 1, 2 */
    _Atomic int pending;                 /* 1: the reporter thread owes a threshold report */
    _Atomic uint64_t last_sample_ns;     /* coarse time of the newest sample (the cheap gate) */
    _Atomic uint64_t sample_t[MON_RING]; /* sample times, precise CLOCK_MONOTONIC ns (0 = empty) */
    _Atomic uint64_t sample_a[MON_RING]; /* allocated bytes at those times */
    _Atomic uint32_t sample_next;        /* ring position of the next sample */
    _Atomic uint64_t x_alloc;            /* allocated bytes at the last crossing */
    _Atomic uint64_t x_reserved;         /* reserved bytes at the last crossing */
    _Atomic uint64_t x_rate_bits;        /* growth rate at the crossing (double bits) */
    _Atomic int x_level;                 /* level of the last crossing */
} monitor_t;

static struct {
    pthread_mutex_t lock;          /* see the header comment */
    report_config_t cfg;           /* options in effect */
    report_source_t src;           /* the shim's callbacks (zeroed = none) */
    uint64_t seq;                  /* reports attempted; %n of the last */
    report_baseline_entry_t *base; /* previous report's sites, sorted */
    size_t nbase;
    report_stats_t stats;   /* written / failed / last path */
    double start_wall_s;    /* process start, epoch seconds */
    uint64_t start_mono_ns; /* ledger_now_ns() at report_init */
    int exiting;            /* the exit report was written: no more background ones */
    int fork_child;         /* 1 in a child made by fork() */
    uint64_t fork_seq;      /* in a fork child: ledger_last_seq() at the fork */
    /* background */
    int bg_wanted;         /* report_start_background was called */
    int bg_running;        /* the thread exists */
    pthread_t thread;      /* the reporter thread */
    int pipe_rd;           /* thread's end, -1 = none */
    int handler_installed; /* npupool installed the signal handler */
    int handler_signal;    /* which signal */
    /* oom rate limit (under lock) */
    uint64_t oom_reports;                  /* oom reports written or attempted */
    uint64_t oom_last_ns;                  /* time of the last one */
    _Atomic uint64_t oom_suppressed;       /* skipped since the last one */
    _Atomic uint64_t oom_suppressed_total; /* skipped in all */
    _Atomic uint64_t signals;              /* signal bytes read by the thread */
} rs = {.lock = PTHREAD_MUTEX_INITIALIZER, .pipe_rd = -1};

static _Atomic int pipe_wr = -1;              /* the thread's wake-up pipe (lock-free atomic: usable
                                                in the signal handler); -1 = none */
static _Atomic int thresholds_on;             /* 1 when a ratio is configured */
static _Atomic uint64_t warn_bits, crit_bits; /* the ratios as double bits (read lock-free) */
static _Atomic uint64_t mon_start_ns;         /* monitors' time origin */
static monitor_t monitors[MON_DEVICES];

static double bits_to_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}
static uint64_t double_to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* Precise CLOCK_MONOTONIC (the coarse clock the ledger stamps records with has a resolution of
 * several ms: too coarse for a growth rate over a fast-filling pool). */
static uint64_t precise_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- configuration ---------------------------------------------------------------------------- */

static double process_start_wall(void)
{
    /* /proc/self/stat field 22 (start time in clock ticks since boot) + /proc/stat btime. */
    double now = ledger_wall_s();
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f) return now;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return now;
    unsigned long long ticks = 0;
    int field = 2;
    for (char *t = strtok(p + 1, " "); t; t = strtok(NULL, " ")) {
        if (++field == 22) {
            ticks = strtoull(t, NULL, 10);
            break;
        }
    }
    f = fopen("/proc/stat", "re");
    if (!f) return now;
    unsigned long long btime = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1) break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (!btime || hz <= 0) return now;
    double start = (double)btime + (double)ticks / (double)hz;
    return start <= now ? start : now;
}

static void config_load(report_config_t *c)
{
    memset(c, 0, sizeof *c);
    const char *p = ledger_option("NPUPOOL_REPORT");
    if (p) {
        snprintf(c->pattern, sizeof c->pattern, "%s", p);
        c->pattern_set = 1;
    }
    c->signal = ledger_option_signal("NPUPOOL_REPORT_SIGNAL", SIGUSR2);
    c->interval_s = ledger_option_double("NPUPOOL_REPORT_INTERVAL", 0.0, 0.0, 1e7);
    c->warn_ratio = ledger_option_double("NPUPOOL_WARN_RATIO", 0.85, 0.0, 1.0);
    c->critical_ratio = ledger_option_double("NPUPOOL_CRITICAL_RATIO", 0.95, 0.0, 1.0);
    c->free_map_max = ledger_option_long("NPUPOOL_REPORT_FREE_MAP", 4096, 0, 100000000);
    c->live_map_max = ledger_option_long("NPUPOOL_REPORT_LIVE_MAP", 4096, 0, 100000000);
    c->symbols = (int)ledger_option_long("NPUPOOL_REPORT_SYMBOLS", 1, 0, 1);
    c->oom_max = ledger_option_long("NPUPOOL_REPORT_OOM_MAX", 10, 0, 1000000);
    c->backtrace_depth = ledger_backtrace_depth();
}

void report_init(const report_source_t *src)
{
    pthread_mutex_lock(&rs.lock);
    config_load(&rs.cfg);
    if (src)
        rs.src = *src;
    else
        memset(&rs.src, 0, sizeof rs.src);
    if (rs.start_wall_s == 0) {
        rs.start_wall_s = process_start_wall();
        rs.start_mono_ns = ledger_now_ns();
        atomic_store(&mon_start_ns, precise_now_ns());
    }
    atomic_store(&warn_bits, double_to_bits(rs.cfg.warn_ratio));
    atomic_store(&crit_bits, double_to_bits(rs.cfg.critical_ratio));
    atomic_store(&thresholds_on, rs.cfg.warn_ratio > 0 || rs.cfg.critical_ratio > 0);
    pthread_mutex_unlock(&rs.lock);
}

/* ---- paths and files -------------------------------------------------------------------------- */

int report_expand_path(const char *pattern, uint64_t seq, char *out, size_t len)
{
    if (!pattern || !*pattern) pattern = REPORT_DEFAULT_PATH;
    size_t o = 0;
    for (const char *p = pattern; *p; p++) {
        char tmp[64];
        const char *piece = tmp;
        if (p[0] == '%' && p[1]) {
            switch (p[1]) {
            case 'p': snprintf(tmp, sizeof tmp, "%d", (int)getpid()); break;
            case 'n': snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)seq); break;
            case 'r': {
                const char *r = getenv("RANK");
                if (!r || !*r) r = getenv("LOCAL_RANK");
                snprintf(tmp, sizeof tmp, "%s",
                         r && *r && strlen(r) < 16 && !strchr(r, '/') ? r : "0");
                break;
            }
            case 't': {
                time_t t = time(NULL);
                struct tm tm;
                gmtime_r(&t, &tm);
                strftime(tmp, sizeof tmp, "%Y%m%dT%H%M%SZ", &tm);
                break;
            }
            case '%': snprintf(tmp, sizeof tmp, "%%"); break;
            default: snprintf(tmp, sizeof tmp, "%%%c", p[1]); break;
            }
            p++;
        } else {
            tmp[0] = *p;
            tmp[1] = 0;
        }
        size_t n = strlen(piece);
        if (o + n + 1 > len) return -1;
        memcpy(out + o, piece, n);
        o += n;
    }
    if (o == 0 || o + 1 > len) return -1;
    out[o] = 0;
    return 0;
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Returns 0, or -1 with errno set and *what naming the failed step. */
static int write_file(const char *path, const char *data, size_t len, uint64_t seq,
                      const char **what)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* A device or FIFO (/dev/full, /dev/stdout, a pipe): write in place, never replace it. */
        *what = "open";
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_APPEND);
        if (fd < 0) return -1;
        *what = "write";
        int r = write_all(fd, data, len);
        int e = errno;
        close(fd);
        errno = e;
        return r;
    }
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d.%llu", path, (int)getpid(),
                         (unsigned long long)seq) >= sizeof tmp) {
        *what = "name";
        errno = ENAMETOOLONG;
        return -1;
    }
    *what = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    *what = "write";
    int r = write_all(fd, data, len);
    if (r == 0) {
        *what = "close";
        r = close(fd);
    } else {
        int e = errno;
        close(fd);
        errno = e;
    }
    if (r == 0) {
        *what = "rename";
        r = rename(tmp, path);
    }
    if (r != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
    }
    return r;
}

/* ---- one report ------------------------------------------------------------------------------- */

static int site_order(const void *x, const void *y)
{
    const ledger_site_t *a = x, *b = y;
    if (a->requested_bytes != b->requested_bytes)
        return a->requested_bytes > b->requested_bytes ? -1 : 1;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static int base_order(const void *x, const void *y)
{
    const report_baseline_entry_t *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* pre: rs.lock held. */
static int write_locked(enum report_trigger trigger, int device, const report_oom_info_t *oom,
                        uint64_t oom_suppressed, const report_threshold_info_t *thr)
{
    uint64_t seq = ++rs.seq;
    char path[4096];
    if (report_expand_path(rs.cfg.pattern, seq, path, sizeof path) != 0) {
        rs.stats.failed++;
        log_warn(
            "cannot write the %s report: NPUPOOL_REPORT=\"%s\" expands to a path that is too long",
            report_trigger_name(trigger), rs.cfg.pattern);
        return -1;
    }
    rs.cfg.backtrace_depth = ledger_backtrace_depth();

    ledger_site_t *sites = NULL;
    size_t nsites = ledger_collect_sites(&sites);
    if (nsites == (size_t)-1) {
        rs.stats.failed++;
        log_warn("cannot write the %s report %s: out of host memory", report_trigger_name(trigger),
                 path);
        return -1;
    }
    if (nsites > 1) qsort(sites, nsites, sizeof *sites, site_order);

    report_input_t in = {
        .trigger = trigger,
        .device = device,
        .seq = seq,
        .cfg = &rs.cfg,
        .src = &rs.src,
        .sites = sites,
        .nsites = nsites,
        .base = rs.base,
        .nbase = rs.nbase,
        .oom = oom,
        .oom_suppressed = oom_suppressed,
        .threshold = thr,
        .start_wall_s = rs.start_wall_s,
        .now_mono_ns = ledger_now_ns(),
        .now_wall_s = ledger_wall_s(),
        .stats = &rs.stats,
    };
    symbolizer_t *sym = NULL;
    cJSON *doc = report_build(&in, &sym);
    /* One buffer sized for the document up front: no repeated regrowth of a 40 MB text. */
    size_t guess = nsites * 4096 + ((size_t)1 << 20);
    char *text = doc ? cJSON_PrintBuffered(
                           doc, (int)(guess < ((size_t)1 << 30) ? guess : ((size_t)1 << 30)), 1)
                     : NULL;
    cJSON_Delete(doc);
    sym_close(sym);
    if (!text) {
        free(sites);
        rs.stats.failed++;
        log_warn("cannot write the %s report %s: out of host memory", report_trigger_name(trigger),
                 path);
        return -1;
    }
    size_t len = strlen(text);
    text[len] = '\n'; /* cJSON_Print leaves room for exactly the terminator: replace it */
    const char *what = "";
    int r = write_file(path, text, len + 1, seq, &what);
    int e = errno;
    free(text);
    if (r != 0) {
        free(sites);
        rs.stats.failed++;
        log_warn("cannot write the %s report to %s (%s: %s)", report_trigger_name(trigger), path,
                 what, strerror(e));
        return -1;
    }
    rs.stats.written++;
    snprintf(rs.stats.last_path, sizeof rs.stats.last_path, "%s", path);
    log_info("%s report written to %s (%zu sites)", report_trigger_name(trigger), path, nsites);

    /* The new growth baseline. */
    report_baseline_entry_t *nb = nsites ? malloc(nsites * sizeof *nb) : NULL;
    if (nsites && !nb) {
        free(sites);
        return 0; /* keep the old baseline */
    }
    for (size_t i = 0; i < nsites; i++)
        nb[i] = (report_baseline_entry_t){sites[i].device, sites[i].stack_id, sites[i].count,
                                          sites[i].requested_bytes};
    if (nsites > 1) qsort(nb, nsites, sizeof *nb, base_order);
    free(rs.base);
    rs.base = nb;
    rs.nbase = nsites;
    free(sites);
    return 0;
}

int report_write(enum report_trigger trigger, int device)
{
    pthread_mutex_lock(&rs.lock);
    int r = write_locked(trigger, device, NULL, 0, NULL);
    pthread_mutex_unlock(&rs.lock);
    return r;
}

void report_get_stats(report_stats_t *out)
{
    pthread_mutex_lock(&rs.lock);
    *out = rs.stats;
    out->oom_suppressed = atomic_load(&rs.oom_suppressed_total);
    out->signals = atomic_load(&rs.signals);
    pthread_mutex_unlock(&rs.lock);
}

/* "Leaks exist": live allocations of this process.  A fork child inherits the parent's records
 * (its memory is a copy); only what it allocated itself since the fork counts as its leaks. */
static void report_if_needed(enum report_trigger trigger)
{
    pthread_mutex_lock(&rs.lock);
    size_t live = rs.fork_child ? ledger_live_count_since(rs.fork_seq) : ledger_live_count(-1);
    if (rs.cfg.pattern_set || live > 0) write_locked(trigger, -1, NULL, 0, NULL);
    pthread_mutex_unlock(&rs.lock);
}

void report_at_exit(void)
{
    report_if_needed(REPORT_EXIT);
    pthread_mutex_lock(&rs.lock);
    rs.exiting = 1; /* the reporter thread starts no report after this one */
    pthread_mutex_unlock(&rs.lock);
}

void report_at_finalize(void) { report_if_needed(REPORT_FINALIZE); }

/* ---- oom -------------------------------------------------------------------------------------- */

void report_oom(const report_oom_info_t *info)
{
    if (!info) return;
    uint64_t now = ledger_now_ns();
    pthread_mutex_lock(&rs.lock);
    if (rs.oom_reports >= (uint64_t)rs.cfg.oom_max ||
        (rs.oom_reports > 0 && now - rs.oom_last_ns < OOM_GAP_NS)) {
        atomic_fetch_add(&rs.oom_suppressed, 1);
        atomic_fetch_add(&rs.oom_suppressed_total, 1);
        pthread_mutex_unlock(&rs.lock);
        return;
    }
    rs.oom_reports++;
    rs.oom_last_ns = now;
    uint64_t suppressed = atomic_exchange(&rs.oom_suppressed, 0);
    write_locked(REPORT_OOM, info->device, info, suppressed, NULL);
    pthread_mutex_unlock(&rs.lock);
}

/* ---- threshold monitor ------------------------------------------------------------------------ */

/* coarse: ledger_now_ns() (a few ns); the precise clock is read only when a sample is taken. */
static void monitor_sample(monitor_t *m, uint64_t coarse, size_t allocated)
{
    uint64_t last = atomic_load_explicit(&m->last_sample_ns, memory_order_relaxed);
    if (last && coarse - last < MON_SAMPLE_NS) return;
    if (!atomic_compare_exchange_strong(&m->last_sample_ns, &last, coarse)) return;
    uint32_t i = atomic_fetch_add_explicit(&m->sample_next, 1, memory_order_relaxed) % MON_RING;
    atomic_store_explicit(&m->sample_a[i], allocated, memory_order_relaxed);
    atomic_store_explicit(&m->sample_t[i], precise_now_ns(), memory_order_release);
}

static double monitor_rate(monitor_t *m, uint64_t now, size_t allocated)
{
    uint64_t best_t = 0, best_a = 0;
    for (int i = 0; i < MON_RING; i++) {
        uint64_t t = atomic_load_explicit(&m->sample_t[i], memory_order_acquire);
        if (!t || t >= now || now - t > 60 * MON_SAMPLE_NS) continue;
        if (!best_t || t < best_t) {
            best_t = t;
            best_a = atomic_load_explicit(&m->sample_a[i], memory_order_relaxed);
        }
    }
    if (!best_t || now - best_t < MON_SAMPLE_NS / 2) { /* no usable sample: since start */
        best_t = atomic_load(&mon_start_ns);
        best_a = 0;
    }
    if (now <= best_t) return 0.0;
    return ((double)allocated - (double)best_a) / ((double)(now - best_t) * 1e-9);
}

static const char *human_duration(double s, char *buf, size_t len)
{
    if (s < 0)
        snprintf(buf, len, "never (not growing)");
    else if (s < 10)
        snprintf(buf, len, "~%.1f s", s);
    else if (s < 120)
        snprintf(buf, len, "~%.0f s", s);
    else if (s < 7200)
        snprintf(buf, len, "~%.0f min", s / 60);
    else if (s < 172800)
        snprintf(buf, len, "~%.1f h", s / 3600);
    else
        snprintf(buf, len, "~%.1f days", s / 86400);
    return buf;
}

static void wake_thread(char what)
{
    int fd = atomic_load_explicit(&pipe_wr, memory_order_relaxed);
    if (fd >= 0) {
        int e = errno;
        ssize_t r = write(fd, &what, 1); /* full pipe: a wake-up is pending anyway */
        (void)r;
        errno = e;
    }
}

void report_usage_changed(int device, size_t allocated, size_t reserved)
{
    if (!atomic_load_explicit(&thresholds_on, memory_order_relaxed) || reserved == 0 ||
        device < 0 || device >= MON_DEVICES)
        return;
    monitor_t *m = &monitors[device];
    monitor_sample(m, ledger_now_ns(), allocated);
    double warn = bits_to_double(atomic_load_explicit(&warn_bits, memory_order_relaxed));
    double crit = bits_to_double(atomic_load_explicit(&crit_bits, memory_order_relaxed));
    double u = (double)allocated / (double)reserved;
    int level = (crit > 0 && u >= crit) ? 2 : (warn > 0 && u >= warn) ? 1 : 0;
    int cur = atomic_load_explicit(&m->level, memory_order_relaxed);
    if (level == cur) return;
    if (level < cur) {
        /* Re-arm a level only once use is clearly (MON_HYSTERESIS) below it. */
        int target = (crit > 0 && u >= crit - MON_HYSTERESIS)   ? 2
                     : (warn > 0 && u >= warn - MON_HYSTERESIS) ? 1
                                                                : 0;
        if (target < cur) atomic_compare_exchange_strong(&m->level, &cur, target);
        return;
    }
    if (!atomic_compare_exchange_strong(&m->level, &cur, level)) return;
    double rate = monitor_rate(m, precise_now_ns(), allocated);
    double remaining = (double)(reserved - (allocated < reserved ? allocated : reserved));
    double eta = rate > 0 ? remaining / rate : -1.0;
    atomic_store(&m->x_alloc, allocated);
    atomic_store(&m->x_reserved, reserved);
    atomic_store(&m->x_rate_bits, double_to_bits(rate));
    atomic_store(&m->x_level, level);
    char a[32], r[32], g[32], d[48];
    ledger_human_bytes((double)allocated, a, sizeof a);
    ledger_human_bytes((double)reserved, r, sizeof r);
    ledger_human_bytes(rate > 0 ? rate : 0, g, sizeof g);
    human_duration(eta, d, sizeof d);
    if (level == 2)
        log_error("device %d pool use %.1f%% crossed the critical threshold (%.0f%%): %s of %s "
                  "allocated, "
                  "growing %s/s, OOM in %s",
                  device, u * 100, crit * 100, a, r, g, d);
    else
        log_warn(
            "device %d pool use %.1f%% crossed the warning threshold (%.0f%%): %s of %s allocated, "
            "growing %s/s, OOM in %s",
            device, u * 100, warn * 100, a, r, g, d);
    atomic_store(&m->pending, 1);
    wake_thread('t');
}

/* ---- the reporter thread ---------------------------------------------------------------------- */

static void on_signal(int sig)
{
    (void)sig;
    wake_thread('s');
}

/* pre: rs.lock held; returns 0 if the thread should go on. */
static int background_report_locked(enum report_trigger trigger, int device,
                                    const report_threshold_info_t *t)
{
    if (rs.exiting) return 0;
    write_locked(trigger, device, NULL, 0, t);
    return 0;
}

static void threshold_reports(void)
{
    for (int d = 0; d < MON_DEVICES; d++) {
        monitor_t *m = &monitors[d];
        if (!atomic_exchange(&m->pending, 0)) continue;
        report_threshold_info_t t;
        t.device = d;
        t.level = atomic_load(&m->x_level);
        t.allocated_bytes = atomic_load(&m->x_alloc);
        t.reserved_bytes = atomic_load(&m->x_reserved);
        t.usage_ratio =
            t.reserved_bytes ? (double)t.allocated_bytes / (double)t.reserved_bytes : 0.0;
        t.threshold_ratio = bits_to_double(atomic_load(t.level >= 2 ? &crit_bits : &warn_bits));
        t.growth_bytes_per_s = bits_to_double(atomic_load(&m->x_rate_bits));
        t.predicted_oom_s =
            t.growth_bytes_per_s > 0
                ? (double)(t.reserved_bytes - t.allocated_bytes) / t.growth_bytes_per_s
                : -1.0;
        pthread_mutex_lock(&rs.lock);
        background_report_locked(REPORT_THRESHOLD, d, &t);
        pthread_mutex_unlock(&rs.lock);
    }
}

static void *reporter_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    pthread_mutex_lock(&rs.lock);
    double interval = rs.cfg.interval_s;
    pthread_mutex_unlock(&rs.lock);
    uint64_t period = interval > 0 ? (uint64_t)(interval * 1e9) : 0;
    if (interval > 0 && period == 0) period = 1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    uint64_t due = now + period;
    for (;;) {
        int timeout = -1;
        if (period) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            timeout = due > now ? (int)((due - now + 999999) / 1000000) : 0;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, timeout);
        int want_signal = 0, want_threshold = 0;
        if (n > 0) {
            char buf[64];
            ssize_t got;
            while ((got = read(fd, buf, sizeof buf)) > 0) {
                for (ssize_t i = 0; i < got; i++) {
                    if (buf[i] == 'q') return NULL;
                    if (buf[i] == 's') want_signal = 1;
                    if (buf[i] == 't') want_threshold = 1;
                }
            }
            if (got == 0) return NULL; /* write end closed */
        }
        if (want_signal) {
            atomic_fetch_add(&rs.signals, 1);
            pthread_mutex_lock(&rs.lock);
            background_report_locked(REPORT_SIGNAL, -1, NULL);
            pthread_mutex_unlock(&rs.lock);
        }
        if (want_threshold) threshold_reports();
        if (period) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            if (now >= due) {
                pthread_mutex_lock(&rs.lock);
                background_report_locked(REPORT_INTERVAL, -1, NULL);
                pthread_mutex_unlock(&rs.lock);
                due += period;
                if (due <= now) due = now + period;
            }
        }
    }
}

/* pre: rs.lock held.  Creates the pipe and the thread. */
static int thread_start_locked(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        log_warn("no background reports: pipe: %s", strerror(errno));
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits: no signal lands on it */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    int e = pthread_create(&rs.thread, &attr, reporter_main, (void *)(intptr_t)fds[0]);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        close(fds[0]);
        close(fds[1]);
        log_warn("no background reports: cannot start the reporter thread: %s", strerror(e));
        return -1;
    }
    rs.pipe_rd = fds[0];
    atomic_store(&pipe_wr, fds[1]);
    rs.bg_running = 1;
    return 0;
}

void report_start_background(void)
{
    pthread_mutex_lock(&rs.lock);
    if (rs.bg_wanted) {
        pthread_mutex_unlock(&rs.lock);
        return;
    }
    rs.bg_wanted = 1;
    int need = rs.cfg.signal > 0 || rs.cfg.interval_s > 0 || atomic_load(&thresholds_on);
    if (need && thread_start_locked() == 0 && rs.cfg.signal > 0) {
        struct sigaction old;
        if (sigaction(rs.cfg.signal, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            sa.sa_flags = SA_RESTART;
            sigemptyset(&sa.sa_mask);
            if (sigaction(rs.cfg.signal, &sa, NULL) == 0) {
                rs.handler_installed = 1;
                rs.handler_signal = rs.cfg.signal;
            }
        } else {
            log_info("signal %d already has a handler: NPUPOOL_REPORT_SIGNAL reports are off",
                     rs.cfg.signal);
        }
    }
    pthread_mutex_unlock(&rs.lock);
}

void report_stop_background(void)
{
    pthread_mutex_lock(&rs.lock);
    if (rs.handler_installed) {
        struct sigaction cur;
        /* Only undo our own handler: the application may have replaced it since. */
        if (sigaction(rs.handler_signal, NULL, &cur) == 0 && cur.sa_handler == on_signal)
            signal(rs.handler_signal, SIG_DFL);
        rs.handler_installed = 0;
    }
    int running = rs.bg_running;
    pthread_t th = rs.thread;
    rs.bg_running = 0;
    rs.bg_wanted = 0;
    pthread_mutex_unlock(&rs.lock);
    if (running) {
        wake_thread('q');
        pthread_join(th, NULL);
        pthread_mutex_lock(&rs.lock);
        int w = atomic_exchange(&pipe_wr, -1);
        close(w);
        close(rs.pipe_rd);
        rs.pipe_rd = -1;
        pthread_mutex_unlock(&rs.lock);
    }
    for (int d = 0; d < MON_DEVICES; d++) {
        atomic_store(&monitors[d].level, 0);
        atomic_store(&monitors[d].pending, 0);
    }
}

/* ---- fork ------------------------------------------------------------------------------------- */

void report_atfork_prepare(void) { pthread_mutex_lock(&rs.lock); }
void report_atfork_parent(void) { pthread_mutex_unlock(&rs.lock); }

void report_atfork_child(void)
{
    pthread_mutex_init(&rs.lock, NULL);
    /* The parent's reporter thread does not exist here and its pipe belongs to the parent.  No new
     * thread is started in the child (a child of a threaded process should not create threads
     * before exec; ThreadSanitizer refuses it): the child writes exit, finalize, reset and oom
     * reports, and gets signal/interval/threshold reports again only if report_start_background()
     * is called in it.  The signal gets its default action back, as without npupool. */
    if (rs.bg_running) {
        int w = atomic_exchange(&pipe_wr, -1);
        close(w);
        close(rs.pipe_rd);
        rs.pipe_rd = -1;
        rs.bg_running = 0;
    }
    if (rs.handler_installed) {
        signal(rs.handler_signal, SIG_DFL);
        rs.handler_installed = 0;
    }
    rs.bg_wanted = 0;
    rs.oom_reports = 0;
    rs.start_wall_s = ledger_wall_s();
    rs.fork_child = 1;
    rs.fork_seq = ledger_last_seq();
}
