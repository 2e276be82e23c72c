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
#include "commands.h"
#include "fmt.h"
#include "report_read.h"
#include "site.h"
#include "tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_TOP, OPT_STACKS, OPT_FAIL_ON_GROWTH };
static const cli_opt_t diff_opts[] = {
    [OPT_TOP] = {"top", 0, CLI_UINT, "N", "20", CLI_POSITIVE, "rows per section"},
    [OPT_STACKS] = {"stacks", 0, CLI_FLAG, NULL, NULL, 0,
                    "print the full stack under each growing row"},
    [OPT_FAIL_ON_GROWTH] = {"fail-on-growth", 0, CLI_SIZE, "BYTES", NULL, 0,
                            "exit 1 when the growing stacks together gained more than BYTES\n"
                            "(suffixes K, M, G; 0 = any growth)"},
    {NULL},
};

/* Sums and differences of exact 64-bit counts: wider than 64 bits, shown clamped to 64. */
typedef __int128 wide_t;

static int64_t clamp(wide_t v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}
static uint64_t uclamp(wide_t v) { return v > (wide_t)UINT64_MAX ? UINT64_MAX : (uint64_t)v; }

typedef struct entry {
    char *key;                 /* match key (malloc'ed) */
    const report_leak_t *leak; /* representative leak (NEW if present, else OLD) */
    wide_t old_count;          /* live allocations in OLD */
    wide_t old_bytes;          /* bytes in OLD */
    wide_t new_count;          /* live allocations in NEW */
    wide_t new_bytes;          /* bytes in NEW */
    int side;                  /* 0 from OLD, 1 from NEW (while building) */
} entry_t;

static int by_key(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : x->side - y->side;
}

static int by_growth(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    wide_t dx = x->new_bytes - x->old_bytes, dy = y->new_bytes - y->old_bytes;
    if (dx != dy) return dx < dy ? 1 : -1;
    return strcmp(x->key, y->key);
}

static int by_shrink(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    wide_t dx = x->new_bytes - x->old_bytes, dy = y->new_bytes - y->old_bytes;
    if (dx != dy) return dx < dy ? -1 : 1;
    return strcmp(x->key, y->key);
}

static void print_row(const entry_t *e, int stacks)
{
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN], site[256];
    printf("  %12s %+9" PRId64 " %11s %9" PRIu64 " %4ld  %s\n",
           fmt_sbytes(b1, clamp(e->new_bytes - e->old_bytes)), clamp(e->new_count - e->old_count),
           fmt_bytes(b2, uclamp(e->new_bytes)), uclamp(e->new_count), e->leak->device,
           site_stack_label(e->leak, site, sizeof site));
    if (stacks) {
        for (size_t f = 0; f < e->leak->nframes; f++) {
            char fl[600];
            printf("        #%-2zu %s\n", f, site_frame_label(&e->leak->frames[f], fl, sizeof fl));
        }
    }
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const uint64_t top = a->v[OPT_TOP].u, fail_bytes = a->v[OPT_FAIL_ON_GROWTH].u;
    const int stacks = a->v[OPT_STACKS].given, have_fail = a->v[OPT_FAIL_ON_GROWTH].given;
    report_t ro, rn;
    int rc = report_read_file(a->operand[0], &ro);
    if (rc != TOOLS_OK) return rc;
    rc = report_read_file(a->operand[1], &rn);
    if (rc != TOOLS_OK) {
        report_read_release(&ro);
        return rc;
    }
    size_t n = ro.nleaks + rn.nleaks;
    entry_t *e = calloc(n ? n : 1, sizeof *e);
    if (e == NULL) goto oom;
    for (size_t i = 0; i < n; i++) {
        const report_leak_t *l = i < ro.nleaks ? &ro.leaks[i] : &rn.leaks[i - ro.nleaks];
        e[i].key = site_stack_key(l, SITE_KEY_DEVICE);
        if (e[i].key == NULL) goto oom;
        e[i].leak = l;
        e[i].side = i >= ro.nleaks;
        if (e[i].side)
            e[i].new_count = l->count, e[i].new_bytes = l->bytes;
        else
            e[i].old_count = l->count, e[i].old_bytes = l->bytes;
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
    wide_t gained = 0, lost = 0, gained_count = 0;
    for (size_t i = 0; i < m; i++) {
        wide_t d = e[i].new_bytes - e[i].old_bytes, dc = e[i].new_count - e[i].old_count;
        if (d > 0 || (d == 0 && dc > 0))
            grow[ng++] = e[i], gained += d, gained_count += dc;
        else if (d < 0 || dc < 0)
            shrink[nsh++] = e[i], lost += d;
    }
    qsort(grow, ng, sizeof *grow, by_growth);
    qsort(shrink, nsh, sizeof *shrink, by_shrink);

    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN], b3[FMT_BYTES_LEN];
    printf("old  %s: pid %ld, trigger %s, dumped %s, %zu stacks\n", ro.path, ro.pid, ro.trigger,
           ro.dump_time[0] ? ro.dump_time : "?", ro.nleaks);
    printf("new  %s: pid %ld, trigger %s, dumped %s, %zu stacks\n", rn.path, rn.pid, rn.trigger,
           rn.dump_time[0] ? rn.dump_time : "?", rn.nleaks);
    if (ro.pid != rn.pid) printf("(different processes: stacks matched by module offsets)\n");
    for (size_t i = 0; i < rn.ndevices; i++) {
        const report_device_t *dn = &rn.devices[i];
        for (size_t j = 0; j < ro.ndevices; j++) {
            if (ro.devices[j].device != dn->device) continue;
            printf("device %ld: allocated %s -> %s (%s)\n", dn->device,
                   fmt_bytes(b1, ro.devices[j].allocated), fmt_bytes(b2, dn->allocated),
                   fmt_sbytes(b3, clamp((wide_t)dn->allocated - ro.devices[j].allocated)));
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
           fmt_sbytes(b1, clamp(gained)), clamp(gained_count), fmt_sbytes(b2, clamp(lost)),
           fmt_sbytes(b3, clamp(gained + lost)));
    /* Elapsed time: numeric dump times, else the uptimes of one process. */
    double dt = 0;
    if (ro.dump_time_s > 0 && rn.dump_time_s > 0)
        dt = rn.dump_time_s - ro.dump_time_s;
    else if (ro.pid == rn.pid && ro.uptime_s >= 0 && rn.uptime_s >= 0)
        dt = rn.uptime_s - ro.uptime_s;
    if (dt > 0)
        printf("rate: %s per hour over %.0f s\n",
               fmt_sbytes(b2, clamp((wide_t)((double)gained * 3600.0 / dt))), dt);
    rc = have_fail && gained > 0 && gained > (wide_t)fail_bytes ? TOOLS_FINDING : TOOLS_OK;
    if (rc == TOOLS_FINDING)
        tools_err("diff: growth %s exceeds the limit", fmt_sbytes(b1, clamp(gained)));
    for (size_t i = 0; i < m; i++) free(e[i].key);
    free(e);
    free(grow);
    free(shrink);
    report_read_release(&ro);
    report_read_release(&rn);
    return rc;
oom:
    if (e)
        for (size_t i = 0; i < n; i++) free(e[i].key);
    free(e);
    report_read_release(&ro);
    report_read_release(&rn);
    tools_err("out of memory");
    return TOOLS_BAD;
}

const cli_cmd_t cmd_diff = {
    .name = "diff",
    .operands = "OLD NEW",
    .purpose = "what grew between two reports, per stack",
    .about = "What grew between two reports of the same process (or two runs of one program): per "
             "stack,\nthe change in live allocations and bytes, sorted by growth; shrinking stacks "
             "are listed apart.\nTake two snapshots hours apart (SIGUSR2 or "
             "NPUPOOL_REPORT_INTERVAL) to find a slow leak.",
    .opts = diff_opts,
    .run = run,
};
