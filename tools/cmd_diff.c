/* tools/cmd_diff.c — `npupool diff OLD NEW`: what grew between two reports, per stack.
 *
 * Owns: matching stacks across reports.  Stack ids are only meaningful inside one process, so a
 * stack is matched by (device, its frames as module basename + offset, or the function name when
 * a frame has no offset): that is stable across snapshots of one process and across runs of one
 * binary (offsets are module-relative, so ASLR does not matter).
 * Output: growing stacks sorted by Δbytes (largest first), then shrinking ones apart, then the
 * totals and the growth rate when both reports carry a numeric dump_time.
 * Cost: O((a + b) log(a + b)) for a and b stacks.
 */
#include "report.h"
#include "tools.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char diff_help[] =
    "usage: npupool diff OLD NEW [--top N] [--stacks] [--fail-on-growth BYTES]\n"
    "\n"
    "What grew between two reports of the same process (or two runs of one program): per stack,\n"
    "the change in live allocations and bytes, sorted by growth; shrinking stacks are listed "
    "apart.\n"
    "Take two snapshots hours apart (SIGUSR2 or NPUPOOL_REPORT_INTERVAL) to find a slow leak.\n"
    "\n"
    "  --top N                 rows per section (default 20)\n"
    "  --stacks                print the full stack under each growing row\n"
    "  --fail-on-growth BYTES  exit 1 when the growing stacks together gained more than BYTES\n"
    "                          (suffixes K, M, G; 0 = any growth)\n"
    "  -h, --help              this text\n";

typedef struct entry {
    char *key;              /* match key (malloc'ed) */
    const rep_leak_t *leak; /* representative leak (NEW if present, else OLD) */
    int64_t old_count;      /* live allocations in OLD */
    int64_t old_bytes;      /* bytes in OLD */
    int64_t new_count;      /* live allocations in NEW */
    int64_t new_bytes;      /* bytes in NEW */
    int side;               /* 0 from OLD, 1 from NEW (while building) */
} entry_t;

static char *stack_key(const rep_leak_t *l)
{
    size_t cap = 32 + l->nframes * 64, n = 0;
    for (size_t i = 0; i < l->nframes; i++)
        cap += (l->frames[i].function ? strlen(l->frames[i].function) : 0) +
               (l->frames[i].module ? strlen(rep_basename(l->frames[i].module)) : 0);
    char *k = malloc(cap);
    if (k == NULL) return NULL;
    n += (size_t)snprintf(k + n, cap - n, "%ld", l->device);
    for (size_t i = 0; i < l->nframes; i++) {
        const rep_frame_t *f = &l->frames[i];
        if (f->module && f->has_offset)
            n += (size_t)snprintf(k + n, cap - n, "|%s+%" PRIx64, rep_basename(f->module),
                                  f->offset);
        else
            n += (size_t)snprintf(k + n, cap - n, "|%s", f->function ? f->function : "?");
    }
    return k;
}

static int by_key(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : x->side - y->side;
}

static int by_growth(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int64_t dx = x->new_bytes - x->old_bytes, dy = y->new_bytes - y->old_bytes;
    if (dx != dy) return dx < dy ? 1 : -1;
    return strcmp(x->key, y->key);
}

static int by_shrink(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int64_t dx = x->new_bytes - x->old_bytes, dy = y->new_bytes - y->old_bytes;
    if (dx != dy) return dx < dy ? -1 : 1;
    return strcmp(x->key, y->key);
}

static void print_row(const entry_t *e, int stacks)
{
    char b1[TOOL_UNITS_LEN], b2[TOOL_UNITS_LEN], site[256];
    printf("  %12s %+9" PRId64 " %11s %9" PRId64 " %4ld  %s\n",
           tool_sbytes(b1, e->new_bytes - e->old_bytes), e->new_count - e->old_count,
           tool_bytes(b2, (uint64_t)e->new_bytes), e->new_count, e->leak->device,
           rep_stack_label(e->leak, site, sizeof site));
    if (stacks) {
        for (size_t f = 0; f < e->leak->nframes; f++) {
            char fl[600];
            printf("        #%-2zu %s\n", f, rep_frame_label(&e->leak->frames[f], fl, sizeof fl));
        }
    }
}

int cmd_diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"top", required_argument, NULL, 't'},
        {"stacks", no_argument, NULL, 's'},
        {"fail-on-growth", required_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t top = 20, fail_bytes = 0;
    int stacks = 0, have_fail = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (tool_parse_u64(optarg, &top) != 0 || top == 0)
                return tool_usage_error("diff", "--top: '%s' is not a positive number", optarg);
            break;
        case 's': stacks = 1; break;
        case 'F':
            if (tool_parse_bytes(optarg, &fail_bytes) != 0)
                return tool_usage_error("diff", "--fail-on-growth: '%s' is not a size", optarg);
            have_fail = 1;
            break;
        case 'h': fputs(diff_help, stdout); return TOOL_OK;
        case ':': return tool_usage_error("diff", "option '%s' needs a value", argv[optind - 1]);
        default: return tool_usage_error("diff", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 2) return tool_usage_error("diff", "expected two reports, OLD and NEW");
    report_t ro, rn;
    int rc = report_load(argv[optind], &ro);
    if (rc != TOOL_OK) return rc;
    rc = report_load(argv[optind + 1], &rn);
    if (rc != TOOL_OK) {
        report_release(&ro);
        return rc;
    }
    size_t n = ro.nleaks + rn.nleaks;
    entry_t *e = calloc(n ? n : 1, sizeof *e);
    if (e == NULL) goto oom;
    for (size_t i = 0; i < n; i++) {
        const rep_leak_t *l = i < ro.nleaks ? &ro.leaks[i] : &rn.leaks[i - ro.nleaks];
        e[i].key = stack_key(l);
        if (e[i].key == NULL) goto oom;
        e[i].leak = l;
        e[i].side = i >= ro.nleaks;
        if (e[i].side)
            e[i].new_count = (int64_t)l->count, e[i].new_bytes = (int64_t)l->bytes;
        else
            e[i].old_count = (int64_t)l->count, e[i].old_bytes = (int64_t)l->bytes;
    }
    qsort(e, n, sizeof *e, by_key);
    /* Merge runs of equal keys into their first entry. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && strcmp(e[m - 1].key, e[i].key) == 0) {
            e[m - 1].old_count += e[i].old_count;
            e[m - 1].old_bytes += e[i].old_bytes;
            e[m - 1].new_count += e[i].new_count;
            e[m - 1].new_bytes += e[i].new_bytes;
            if (e[i].side) e[m - 1].leak = e[i].leak;
            free(e[i].key);
        } else {
            e[m++] = e[i];
        }
    }
    entry_t *grow = calloc(m ? m : 1, sizeof *grow), *shrink = calloc(m ? m : 1, sizeof *shrink);
    if (grow == NULL || shrink == NULL) {
        free(grow), free(shrink);
        n = m;
        goto oom;
    }
    size_t ng = 0, nsh = 0;
    int64_t gained = 0, lost = 0, gained_count = 0;
    for (size_t i = 0; i < m; i++) {
        int64_t d = e[i].new_bytes - e[i].old_bytes, dc = e[i].new_count - e[i].old_count;
        if (d > 0 || (d == 0 && dc > 0))
            grow[ng++] = e[i], gained += d, gained_count += dc;
        else if (d < 0 || dc < 0)
            shrink[nsh++] = e[i], lost += d;
    }
    qsort(grow, ng, sizeof *grow, by_growth);
    qsort(shrink, nsh, sizeof *shrink, by_shrink);

    char b1[TOOL_UNITS_LEN], b2[TOOL_UNITS_LEN], b3[TOOL_UNITS_LEN];
    printf("old  %s: pid %ld, trigger %s, dumped %s, %zu stacks\n", ro.path, ro.pid, ro.trigger,
           ro.dump_time[0] ? ro.dump_time : "?", ro.nleaks);
    printf("new  %s: pid %ld, trigger %s, dumped %s, %zu stacks\n", rn.path, rn.pid, rn.trigger,
           rn.dump_time[0] ? rn.dump_time : "?", rn.nleaks);
    if (ro.pid != rn.pid) printf("(different processes: stacks matched by module offsets)\n");
    for (size_t i = 0; i < rn.ndevices; i++) {
        const rep_device_t *dn = &rn.devices[i];
        for (size_t j = 0; j < ro.ndevices; j++) {
            if (ro.devices[j].device != dn->device) continue;
            printf("device %ld: allocated %s -> %s (%s)\n", dn->device,
                   tool_bytes(b1, ro.devices[j].allocated), tool_bytes(b2, dn->allocated),
                   tool_sbytes(b3, (int64_t)dn->allocated - (int64_t)ro.devices[j].allocated));
        }
    }
    printf("\ngrew (%zu stack%s):\n", ng, ng == 1 ? "" : "s");
    printf("  %12s %9s %11s %9s %4s  %s\n", "delta bytes", "delta n", "bytes now", "count now",
           "dev", "site");
    for (size_t i = 0; i < ng && i < top; i++) print_row(&grow[i], stacks);
    if (ng > top) printf("  ... %zu more\n", ng - (size_t)top);
    if (ng == 0) printf("  (nothing)\n");
    printf("\nshrank or freed (%zu stack%s):\n", nsh, nsh == 1 ? "" : "s");
    if (nsh)
        printf("  %12s %9s %11s %9s %4s  %s\n", "delta bytes", "delta n", "bytes now", "count now",
               "dev", "site");
    for (size_t i = 0; i < nsh && i < top; i++) print_row(&shrink[i], 0);
    if (nsh > top) printf("  ... %zu more\n", nsh - (size_t)top);
    if (nsh == 0) printf("  (nothing)\n");
    printf("\ntotal: grew %s in %+" PRId64 " allocations, shrank %s, net %s\n",
           tool_sbytes(b1, gained), gained_count, tool_sbytes(b2, lost),
           tool_sbytes(b3, gained + lost));
    /* Elapsed time: numeric dump times, else the uptimes of one process. */
    double dt = 0;
    if (ro.dump_time_s > 0 && rn.dump_time_s > 0)
        dt = rn.dump_time_s - ro.dump_time_s;
    else if (ro.pid == rn.pid && ro.uptime_s >= 0 && rn.uptime_s >= 0)
        dt = rn.uptime_s - ro.uptime_s;
    if (dt > 0)
        printf("rate: %s per hour over %.0f s\n",
               tool_sbytes(b2, (int64_t)((double)gained * 3600.0 / dt)), dt);
    rc = have_fail && gained > 0 && (uint64_t)gained > fail_bytes ? TOOL_FINDING : TOOL_OK;
    if (rc == TOOL_FINDING)
        fprintf(stderr, "npupool diff: growth %s exceeds the limit\n", tool_sbytes(b1, gained));
    for (size_t i = 0; i < m; i++) free(e[i].key);
    free(e);
    free(grow);
    free(shrink);
    report_release(&ro);
    report_release(&rn);
    return rc;
oom:
    if (e)
        for (size_t i = 0; i < n; i++) free(e[i].key);
    free(e);
    report_release(&ro);
    report_release(&rn);
    tool_err("out of memory");
    return TOOL_BAD;
}
