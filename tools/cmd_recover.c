/* tools/cmd_recover.c — `npupool recover FILE`: the report a process could not write.
 *
 * Owns: turning a ledger file (NPUPOOL_LEDGER_FILE, read by ledger_read.c) into an ordinary
 * report (schema npupool-report/1, trigger `recovered`, docs/report.md): which npupool wrote the
 * file and which runtime the process used (the `npupool` and `runtime` sections, as the writer
 * recorded them: never this command's own version); the live records grouped by (device, stack)
 * with counts, bytes and ages; native frames symbolized offline from the modules the file names
 * (symfile.c: build ids checked; --root DIR for binaries copied from another machine,
 * --debug-dir for separate debug files), Python frames named from the file's Python frame
 * entries and written as a live report writes them (report_json.c: function, file, line,
 * "python": true; the stack's mark becomes "python_frames"); each device's pool figures and
 * counters as last recorded; and a `recovered` section: what happened to the process (died of a
 * signal, exited, still running, gone without a word: SIGKILL or the OOM killer), how many slots
 * were torn.
 * A running process's file can be read too: a read that found torn slots (caught mid-write) is
 * taken again, up to RETRIES times, and the one with the fewest kept.
 * Ages are measured to the moment of death when the fatal-signal handler noted it, to the exit
 * hook when it ran, to now for a running process, else to the last sign of life in the file (the
 * newest record or device figures).
 */
#include "commands.h"
#include "fmt.h"
#include "ledger_read.h"
#include "symfile.h"
#include "tools.h"
#include "vocab.h"
#include "wire.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define RETRIES 3 /* reads of a running process's file */

enum { OPT_OUTPUT, OPT_ROOT, OPT_DEBUG_DIR, OPT_NO_SYMBOLS, OPT_SALVAGE };
static const cli_opt_t recover_opts[] = {
    [OPT_OUTPUT] = {"output", 'o', CLI_TEXT, "OUT", NULL, 0,
                    "write the report to OUT (default: standard output)"},
    [OPT_ROOT] = {"root", 0, CLI_TEXT, "DIR", NULL, 0,
                  "read the modules under DIR (DIR/usr/lib/..., binaries copied from the machine "
                  "that wrote FILE)"},
    [OPT_DEBUG_DIR] = {"debug-dir", 0, CLI_TEXT, "DIR", NULL, 0,
                       "also look for separate debug files in DIR"},
    [OPT_NO_SYMBOLS] = {"no-symbols", 0, CLI_FLAG, NULL, NULL, 0,
                        "frames with module, offset and build id only (symbolize later)"},
    [OPT_SALVAGE] = {"salvage", 0, CLI_FLAG, NULL, NULL, 0,
                     "write what can be read of a damaged file (exit 1) instead of refusing it"},
    {NULL},
};

/* Live records of one (device, stack). */
typedef struct site {
    int device;                             /* device id, -1 = unknown */
    uint32_t stack_id;                      /* stack */
    uint64_t count;                         /* live allocations */
    uint64_t bytes;                         /* requested bytes */
    uint64_t granted;                       /* granted bytes */
    uint64_t oldest_seq;                    /* sequence number of the oldest */
    uint64_t oldest_ns;                     /* its time */
    unsigned entry;                         /* its entry point */
    uint64_t by_origin[VOCAB_ORIGIN_COUNT]; /* count per origin */
} site_t;

typedef struct sym_stats {
    unsigned long frames;    /* frames written */
    unsigned long resolved;  /* with a function or file:line */
    unsigned long no_module; /* module file not found */
    unsigned long mismatch;  /* build id differs */
} sym_stats_t;

/* ---- the process ------------------------------------------------------------------------------ */

enum proc_state { PROC_DIED, PROC_EXITED, PROC_RUNNING, PROC_GONE, PROC_UNKNOWN };
static const char *const proc_state_name[] = {"died", "exited", "running", "gone", "unknown"};

/* Does process `pid` map this very file (same device and inode)?  1 yes, 0 no, -1 cannot tell. */
static int maps_file(long pid, const struct stat *st)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    FILE *f = fopen(path, "re");
    if (!f) return errno == ENOENT ? 0 : -1;
    char line[4608];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned maj, min;
        unsigned long long ino;
        if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) == 3)
            found = ino == (unsigned long long)st->st_ino && maj == major(st->st_dev) &&
                    min == minor(st->st_dev);
    }
    fclose(f);
    return found;
}

static enum proc_state process_state(const ledger_read_t *r, const char *path)
{
    const lfmt_header_t *h = &r->hdr;
    if (h->death_signal) return PROC_DIED;
    if (h->flags & LFMT_F_EXITED) return PROC_EXITED;
    char boot[40] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = 0;
    if (!boot[0] || !h->boot_id[0]) return PROC_UNKNOWN;
    if (strcmp(boot, h->boot_id) != 0) {
        char host[64] = "";
        gethostname(host, sizeof host - 1);
        return strcmp(host, h->hostname) ? PROC_UNKNOWN : PROC_GONE; /* rebooted since */
    }
    struct stat st;
    if (strcmp(path, "-") == 0 || stat(path, &st) != 0) return PROC_UNKNOWN;
    int m = maps_file((long)h->pid, &st);
    if (m < 0) return kill((pid_t)h->pid, 0) == 0 || errno == EPERM ? PROC_UNKNOWN : PROC_GONE;
    return m ? PROC_RUNNING : PROC_GONE;
}

/* ---- JSON helpers ----------------------------------------------------------------------------- */

/* An unsigned integer, exact up to 2^64 - 1 (as the report writer writes it). */
static cJSON *unum_item(uint64_t v)
{
    if (v < UINT64_C(1000000000000000)) return cJSON_CreateNumber((double)v);
    char text[24];
    text[fmt_u64(text, v)] = 0;
    return cJSON_CreateRaw(text);
}

static void unum(cJSON *o, const char *k, uint64_t v) { cJSON_AddItemToObject(o, k, unum_item(v)); }
static void num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }
static void str(cJSON *o, const char *k, const char *v)
{
    cJSON_AddItemToObject(o, k, v ? cJSON_CreateString(v) : cJSON_CreateNull());
}

/* ISO 8601 UTC with milliseconds from ns since the epoch. */
static void iso_time(uint64_t wall_ns, char *buf, size_t len)
{
    time_t t = (time_t)(wall_ns / 1000000000u);
    struct tm tm;
    gmtime_r(&t, &tm);
    char head[32];
    strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03uZ", head, (unsigned)(wall_ns / 1000000u % 1000u));
}

/* The wall time of a writer's monotonic time. */
static uint64_t wall_of(const lfmt_header_t *h, uint64_t mono_ns)
{
    return mono_ns >= h->start_mono_ns ? h->start_wall_ns + (mono_ns - h->start_mono_ns)
                                       : h->start_wall_ns;
}

static void time_item(cJSON *o, const char *k, const lfmt_header_t *h, uint64_t mono_ns)
{
    char t[48];
    iso_time(wall_of(h, mono_ns), t, sizeof t);
    str(o, k, t);
}

/* ---- sections --------------------------------------------------------------------------------- */

/* Which npupool wrote the file: its version (always recorded; "unknown" only for a damaged
 * header), libnpupool.so's path and build id. */
static cJSON *build_npupool(const ledger_read_t *r)
{
    const lfmt_library_t *l = &r->hdr.npupool;
    cJSON *o = cJSON_CreateObject();
    str(o, "version", r->hdr.version[0] ? r->hdr.version : "unknown");
    str(o, "build_id", r->have_npupool && l->build_id[0] ? l->build_id : NULL);
    str(o, "library", r->have_npupool && l->path[0] ? l->path : NULL);
    return o;
}

/* Which runtime library the process used: null when the file never learnt it (no allocation
 * reached the runtime before the death) or caught it being written. */
static cJSON *build_runtime(const ledger_read_t *r)
{
    const lfmt_library_t *l = &r->hdr.runtime;
    cJSON *o = cJSON_CreateObject();
    str(o, "library", r->have_runtime && l->path[0] ? l->path : NULL);
    str(o, "build_id", r->have_runtime && l->build_id[0] ? l->build_id : NULL);
    return o;
}

static cJSON *build_process(const ledger_read_t *r, uint64_t ref_ns)
{
    const lfmt_header_t *h = &r->hdr;
    cJSON *p = cJSON_CreateObject();
    unum(p, "pid", h->pid > 0 ? (uint64_t)h->pid : 1);
    str(p, "exe", h->exe);
    cJSON *argv = cJSON_AddArrayToObject(p, "cmdline");
    for (size_t i = 0; i < sizeof h->cmdline && h->cmdline[i]; i += strlen(h->cmdline + i) + 1)
        cJSON_AddItemToArray(argv, cJSON_CreateString(h->cmdline + i));
    str(p, "hostname", h->hostname);
    num(p, "rank", h->rank < 0 ? 0 : (double)h->rank);
    time_item(p, "start_time", h, h->start_mono_ns);
    time_item(p, "dump_time", h, ref_ns);
    num(p, "uptime_s", ref_ns > h->start_mono_ns ? (double)(ref_ns - h->start_mono_ns) * 1e-9 : 0);
    return p;
}

static cJSON *build_config(const ledger_read_t *r)
{
    cJSON *c = cJSON_CreateObject();
    const char *s = r->hdr.config;
    while (*s) {
        const char *nl = strchr(s, '\n'), *eq = strchr(s, '=');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        if (eq && (size_t)(eq - s) < n && eq > s) {
            char name[128], value[1024];
            snprintf(name, sizeof name, "%.*s", (int)(eq - s), s);
            snprintf(value, sizeof value, "%.*s", (int)(n - (size_t)(eq - s) - 1), eq + 1);
            if (!cJSON_GetObjectItemCaseSensitive(c, name)) str(c, name, value);
        }
        s += n + (nl ? 1 : 0);
    }
    return c;
}

static cJSON *build_ledger(const ledger_read_t *r)
{
    cJSON *l = cJSON_CreateObject();
    unum(l, "live_allocations", r->nrecs);
    unum(l, "host_bytes", r->record_bytes); /* a recovered report: the file's record bytes */
    unum(l, "stacks", r->nstacks);
    unum(l, "stack_bytes", r->stack_bytes);
    unum(l, "stacks_dropped", r->hdr.stacks_lost);
    unum(l, "backtrace_depth", r->hdr.backtrace_depth);
    unum(l, "reports_written", 0);
    unum(l, "reports_failed", 0);
    return l;
}

static void empty_maps(cJSON *d, const lfmt_device_figs_t *f)
{
    cJSON_AddArrayToObject(d, "free_map");
    unum(d, "free_map_omitted", f ? f->free_blocks : 0);
    unum(d, "free_map_omitted_bytes", f ? f->free_bytes : 0);
    cJSON_AddArrayToObject(d, "live_map");
    unum(d, "live_map_omitted", f ? f->live_blocks : 0);
    unum(d, "live_map_omitted_bytes", f ? f->allocated_bytes : 0);
}

static cJSON *build_pool(const lfmt_device_figs_t *f)
{
    cJSON *p = cJSON_CreateObject();
    char base[32];
    snprintf(base, sizeof base, "0x%llx", (unsigned long long)f->pool_base);
    str(p, "base", base);
#define FIGURE(field, key) unum(p, key, f->field);
    LFMT_POOL_FIGURES(FIGURE)
#undef FIGURE
    num(p, "fragmentation",
        f->free_bytes ? 1.0 - (double)f->largest_free_bytes / (double)f->free_bytes : 0.0);
    num(p, "usage_ratio",
        f->reserved_bytes ? (double)f->allocated_bytes / (double)f->reserved_bytes : 0.0);
    cJSON_AddBoolToObject(p, "snapshot_consistent", 1);
    return p;
}

static cJSON *build_device(const ledger_read_t *r, int device, const site_t *sites, size_t n)
{
    unsigned slot = device < 0 ? LFMT_DEVICE_SLOTS - 1 : (unsigned)device;
    const lfmt_device_figs_t *f = r->have_dev[slot] ? &r->dev[slot] : NULL;
    cJSON *d = cJSON_CreateObject();
    num(d, "device", device);
    int pool = f && f->has_pool;
    cJSON_AddItemToObject(d, "pool", pool ? build_pool(f) : cJSON_CreateNull());
    cJSON *bk = cJSON_AddArrayToObject(d, "buckets");
    for (uint64_t k = 0; pool && k < f->nbuckets; k++) {
        const lfmt_bucket_t *b = &f->buckets[k];
        cJSON *e = cJSON_CreateObject();
        unum(e, "min_bytes", k ? f->buckets[k - 1].max_bytes + 1 : 0);
        if (b->max_bytes == UINT64_MAX)
            cJSON_AddNullToObject(e, "max_bytes");
        else
            unum(e, "max_bytes", b->max_bytes);
        unum(e, "live_blocks", b->live_blocks);
        unum(e, "live_bytes", b->live_bytes);
        unum(e, "free_blocks", b->free_blocks);
        unum(e, "free_bytes", b->free_bytes);
        cJSON_AddItemToArray(bk, e);
    }
    empty_maps(d, pool ? f : NULL); /* a ledger file keeps no maps: every block is "omitted" */
    cJSON *cn = cJSON_AddObjectToObject(d, "counters");
    uint64_t k = 0;
#define COUNTER(field, meaning)                                  \
    if (f && k < f->ncounters) unum(cn, #field, f->counters[k]); \
    k++;
    WIRE_COUNTERS(COUNTER)
#undef COUNTER
    uint64_t count = 0, bytes = 0, granted = 0;
    for (size_t i = 0; i < n; i++) {
        if (sites[i].device != device) continue;
        count += sites[i].count;
        bytes = tools_add_sat(bytes, sites[i].bytes);
        granted = tools_add_sat(granted, sites[i].granted);
    }
    unum(d, "live_allocations", count);
    unum(d, "live_bytes", bytes);
    unum(d, "live_granted_bytes", granted);
    if (f) time_item(d, "recorded_time", &r->hdr, f->mono_ns);
    return d;
}

static cJSON *build_devices(const ledger_read_t *r, const site_t *sites, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (int dev = 0; dev <= (int)LFMT_DEVICE_SLOTS - 1; dev++) {
        int device = dev == (int)LFMT_DEVICE_SLOTS - 1 ? -1 : dev;
        int listed = r->have_dev[dev];
        for (size_t i = 0; i < n && !listed; i++) listed = sites[i].device == device;
        if (listed) cJSON_AddItemToArray(arr, build_device(r, device, sites, n));
    }
    return arr;
}

/* A Python frame, as a live report writes it; one whose entry the file lacks (space ran out, or
 * torn) keeps its place with no function and the file "<unknown>". */
static cJSON *python_frame(const ledger_read_t *r, uint32_t id, sym_stats_t *st)
{
    const ledger_read_pyframe_t *p = ledger_read_pyframe(r, id);
    st->frames++;
    st->resolved += p != NULL;
    cJSON *f = cJSON_CreateObject();
    str(f, "function", p ? p->function : NULL);
    cJSON_AddNullToObject(f, "module");
    cJSON_AddNullToObject(f, "offset");
    str(f, "file", p ? p->file : "<unknown>");
    if (p && p->line > 0)
        num(f, "line", p->line);
    else
        cJSON_AddNullToObject(f, "line");
    cJSON_AddNullToObject(f, "build_id");
    cJSON_AddNullToObject(f, "address");
    cJSON_AddBoolToObject(f, "python", 1);
    return f;
}

static cJSON *build_frames(const ledger_read_t *r, uint32_t stack_id, symfile_t *sf,
                           sym_stats_t *st)
{
    cJSON *arr = cJSON_CreateArray();
    const ledger_read_stack_t *s = ledger_read_stack(r, stack_id);
    for (uint32_t i = 0; s && i < s->depth; i++) {
        uint64_t pc = r->frames[s->first + i];
        if (lfmt_py_is_mark(pc)) continue; /* said by "python_frames" */
        uint32_t py = lfmt_py_frame_id(pc);
        if (py) {
            cJSON_AddItemToArray(arr, python_frame(r, py, st));
            continue;
        }
        const ledger_read_module_t *m = ledger_read_module_of(r, stack_id, pc);
        uint64_t offset = m ? pc - 1 - m->base : (pc ? pc - 1 : 0);
        const char *fn = NULL, *file = NULL;
        int line = 0;
        if (sf && m) {
            int rc = symfile_lookup(sf, m->path, m->build_id[0] ? m->build_id : NULL, offset, &fn,
                                    &file, &line);
            st->no_module += rc == SYMFILE_NO_MODULE;
            st->mismatch += rc == SYMFILE_BUILD_ID;
        }
        st->frames++;
        st->resolved += fn || file;
        cJSON *f = cJSON_CreateObject();
        str(f, "function", fn);
        str(f, "module", m ? m->path : NULL);
        unum(f, "offset", offset);
        str(f, "file", file);
        if (file && line > 0)
            num(f, "line", line);
        else
            cJSON_AddNullToObject(f, "line");
        str(f, "build_id", m && m->build_id[0] ? m->build_id : NULL);
        char addr[32];
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)pc);
        str(f, "address", addr);
        cJSON_AddItemToArray(arr, f);
    }
    return arr;
}

static cJSON *build_leaks(const ledger_read_t *r, const site_t *sites, size_t n, uint64_t ref_ns,
                          symfile_t *sf, sym_stats_t *st)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        const site_t *s = &sites[i];
        cJSON *o = cJSON_CreateObject();
        num(o, "device", s->device);
        unum(o, "count", s->count);
        unum(o, "bytes", s->bytes);
        unum(o, "granted_bytes", s->granted);
        num(o, "oldest_age_s", ref_ns > s->oldest_ns ? (double)(ref_ns - s->oldest_ns) * 1e-9 : 0);
        unum(o, "stack_id", s->stack_id);
        str(o, "entry_point", vocab_entry_name((enum vocab_entry)s->entry));
        cJSON *orig = cJSON_AddObjectToObject(o, "origins");
        for (int k = 0; k < VOCAB_ORIGIN_COUNT; k++)
            unum(orig, vocab_origin_name((enum vocab_origin)k), s->by_origin[k]);
        cJSON *g = cJSON_AddObjectToObject(o, "growth"); /* as a first report: everything */
        unum(g, "count", s->count);
        unum(g, "bytes", s->bytes);
        cJSON_AddItemToObject(o, "frames", build_frames(r, s->stack_id, sf, st));
        /* which Python frames the capture could see: the stack's mark (absent without one) */
        const ledger_read_stack_t *stk = ledger_read_stack(r, s->stack_id);
        const char *seen =
            stk ? lfmt_py_seen_name(lfmt_py_seen_of(r->frames[stk->first + stk->depth - 1])) : NULL;
        if (seen) str(o, "python_frames", seen);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static const char *signal_name(uint64_t sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"},
                 {SIGBUS, "SIGBUS"},
                 {SIGABRT, "SIGABRT"},
                 {SIGFPE, "SIGFPE"},
                 {SIGILL, "SIGILL"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((uint64_t)names[i].sig == sig) return names[i].name;
    return "a fatal signal";
}

static cJSON *build_recovered(const ledger_read_t *r, const char *path, enum proc_state ps,
                              uint64_t ref_ns)
{
    const lfmt_header_t *h = &r->hdr;
    cJSON *o = cJSON_CreateObject();
    str(o, "file", path);
    str(o, "format", LFMT_FORMAT);
    str(o, "process", proc_state_name[ps]);
    str(o, "death_signal", h->death_signal ? signal_name(h->death_signal) : NULL);
    if (h->death_mono_ns)
        time_item(o, "death_time", h, h->death_mono_ns);
    else
        cJSON_AddNullToObject(o, "death_time");
    time_item(o, "last_seen_time", h, ref_ns);
    unum(o, "torn", r->torn_records + r->torn_entries);
    unum(o, "torn_records", r->torn_records);
    unum(o, "torn_entries", r->torn_entries);
    cJSON_AddBoolToObject(o, "incomplete", (h->flags & LFMT_F_INCOMPLETE) != 0);
    unum(o, "unrecorded_allocations", h->unmirrored);
    cJSON_AddBoolToObject(o, "fork_child", (h->flags & LFMT_F_FORK_CHILD) != 0);
    unum(o, "parent_pid", h->ppid > 0 ? (uint64_t)h->ppid : 0);
    unum(o, "modules", r->nmods);
    unum(o, "python_frames", r->npyframes);
    unum(o, "python_frames_lost", h->pyframes_lost);
    unum(o, "file_bytes", r->file_size);
    str(o, "damaged", r->damaged ? r->why : NULL);
    return o;
}

/* ---- grouping --------------------------------------------------------------------------------- */

static int rec_key_cmp(const void *a, const void *b)
{
    const ledger_read_record_t *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->stack_id != y->stack_id) return x->stack_id < y->stack_id ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int site_order(const void *a, const void *b)
{
    const site_t *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* Sites of r's live records (r->recs is sorted in place); NULL + *n = 0 when there are none. */
static site_t *group(ledger_read_t *r, size_t *n)
{
    *n = 0;
    if (r->nrecs == 0) return NULL;
    qsort(r->recs, r->nrecs, sizeof *r->recs, rec_key_cmp);
    site_t *sites = calloc(r->nrecs, sizeof *sites);
    if (!sites) return NULL;
    for (size_t i = 0; i < r->nrecs; i++) {
        const ledger_read_record_t *x = &r->recs[i];
        site_t *s = *n ? &sites[*n - 1] : NULL;
        if (!s || s->device != x->device || s->stack_id != x->stack_id) {
            s = &sites[(*n)++];
            *s = (site_t){.device = x->device,
                          .stack_id = x->stack_id,
                          .oldest_seq = x->seq,
                          .oldest_ns = x->time_ns,
                          .entry = x->entry};
        }
        s->count++;
        s->bytes = tools_add_sat(s->bytes, x->requested);
        s->granted = tools_add_sat(s->granted, x->granted);
        s->by_origin[x->origin < VOCAB_ORIGIN_COUNT ? x->origin : 0]++;
    }
    qsort(sites, *n, sizeof *sites, site_order);
    return sites;
}

/* The moment ages are measured to (see the header comment). */
static uint64_t reference_ns(const ledger_read_t *r, enum proc_state ps)
{
    const lfmt_header_t *h = &r->hdr;
    if (h->death_mono_ns) return h->death_mono_ns;
    if (h->exit_mono_ns) return h->exit_mono_ns;
    if (ps == PROC_RUNNING) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    uint64_t ref = h->start_mono_ns > h->updated_mono_ns ? h->start_mono_ns : h->updated_mono_ns;
    for (size_t i = 0; i < r->nrecs; i++)
        if (r->recs[i].time_ns > ref) ref = r->recs[i].time_ns;
    return ref;
}

/* ---- the command ------------------------------------------------------------------------------ */

static int read_best(const char *path, int salvage, ledger_read_t *r, enum proc_state *ps)
{
    int rc = ledger_read_file(path, salvage, r);
    if (rc != TOOLS_OK) return rc;
    *ps = process_state(r, path);
    for (int i = 1; i < RETRIES && *ps == PROC_RUNNING && r->torn_records + r->torn_entries; i++) {
        ledger_read_t again;
        if (ledger_read_file(path, salvage, &again) != TOOLS_OK) break;
        if (again.torn_records + again.torn_entries < r->torn_records + r->torn_entries) {
            ledger_read_release(r);
            *r = again;
        } else {
            ledger_read_release(&again);
        }
    }
    return TOOLS_OK;
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const char *path = a->operand[0], *out = a->v[OPT_OUTPUT].text;
    const char *root = a->v[OPT_ROOT].text;
    ledger_read_t r;
    enum proc_state ps = PROC_UNKNOWN;
    int rc = read_best(path, a->v[OPT_SALVAGE].given, &r, &ps);
    if (rc != TOOLS_OK) return rc;
    size_t nsites = 0;
    site_t *sites = group(&r, &nsites);
    if (r.nrecs && !sites) {
        ledger_read_release(&r);
        tools_err("out of memory");
        return TOOLS_BAD;
    }
    symfile_t *sf = NULL;
    if (!a->v[OPT_NO_SYMBOLS].given) {
        char map[4200];
        if (root) snprintf(map, sizeof map, "=%s", root); /* every path gets DIR in front */
        sf = symfile_open(a->v[OPT_DEBUG_DIR].text, root ? map : NULL);
    }
    uint64_t ref = reference_ns(&r, ps);
    sym_stats_t st = {0};
    cJSON *doc = cJSON_CreateObject();
    str(doc, "schema", WIRE_REPORT_SCHEMA);
    str(doc, "trigger", wire_trigger_name(WIRE_TRIGGER_RECOVERED));
    num(doc, "trigger_device", -1);
    unum(doc, "sequence", 1);
    cJSON_AddItemToObject(doc, "npupool", build_npupool(&r));
    cJSON_AddItemToObject(doc, "runtime", build_runtime(&r));
    cJSON_AddItemToObject(doc, "process", build_process(&r, ref));
    cJSON_AddItemToObject(doc, "config", build_config(&r));
    cJSON_AddItemToObject(doc, "ledger", build_ledger(&r));
    cJSON_AddItemToObject(doc, "devices", build_devices(&r, sites, nsites));
    cJSON_AddItemToObject(doc, "leaks", build_leaks(&r, sites, nsites, ref, sf, &st));
    cJSON_AddItemToObject(doc, "recovered", build_recovered(&r, path, ps, ref));
    char *text = cJSON_Print(doc);
    if (text) {
        rc = tools_write_text(out, text, strlen(text));
    } else {
        tools_err("out of memory printing the report");
        rc = TOOLS_BAD;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < nsites; i++) bytes = tools_add_sat(bytes, sites[i].bytes);
    char b[FMT_BYTES_LEN], why[48] = "";
    if (r.hdr.death_signal) snprintf(why, sizeof why, " of %s", signal_name(r.hdr.death_signal));
    fprintf(stderr,
            "npupool recover: pid %lld %s%s: %zu live allocation%s (%s) in %zu site%s, %llu torn; "
            "%lu of %lu frames symbolized",
            (long long)r.hdr.pid, proc_state_name[ps], why, r.nrecs, r.nrecs == 1 ? "" : "s",
            fmt_bytes(b, bytes), nsites, nsites == 1 ? "" : "s",
            (unsigned long long)(r.torn_records + r.torn_entries), st.resolved, st.frames);
    if (st.no_module || st.mismatch)
        fprintf(stderr, " (%lu module not found, %lu build id differs)", st.no_module, st.mismatch);
    if (r.hdr.flags & LFMT_F_INCOMPLETE)
        fprintf(stderr, "; incomplete: space ran out, %llu allocations not recorded",
                (unsigned long long)r.hdr.unmirrored);
    fputc('\n', stderr);
    if (rc == TOOLS_OK && r.damaged) rc = TOOLS_FINDING;
    cJSON_free(text);
    cJSON_Delete(doc);
    symfile_close(sf);
    free(sites);
    ledger_read_release(&r);
    return rc;
}

const cli_cmd_t cmd_recover = {
    .name = "recover",
    .operands = "FILE",
    .purpose = "the report of a process that died (or hangs) from its ledger file",
    .about = "Turn a ledger file (NPUPOOL_LEDGER_FILE) into a report (trigger 'recovered'): what "
             "the\nprocess held when it died, however it died (SIGKILL, the OOM killer, a fault, "
             "abort),\nor holds now if it still runs (it is read without being signalled): live "
             "allocations\ngrouped by stack with counts, bytes and ages, frames symbolized from "
             "the modules the\nfile names (build ids checked), pool figures as last recorded, "
             "and how many slots were\ntorn (being written at that moment: counted, never "
             "used).",
    .opts = recover_opts,
    .epilog = "A summary line goes to standard error.  Exit: 0 done, 1 --salvage wrote what a "
              "damaged file\nheld, 2 bad usage or a file that is not a whole ledger file.",
    .run = run,
};
