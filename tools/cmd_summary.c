/* tools/cmd_summary.c — `npupool summary REPORT`: a screen-sized overview of one report.
 *
 * Owns: the summary layout (in the spirit of torch.npu.memory_summary()): the process, one line
 * of pool figures per device, the busiest size classes, the counters, the top leak sites and the
 * oom post-mortem when there is one.  Aligned columns, binary units.  Cost: O(sites log sites).
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

enum { OPT_TOP };
static const cli_opt_t summary_opts[] = {
    [OPT_TOP] = {"top", 0, CLI_UINT, "N", "10", CLI_POSITIVE,
                 "leak sites and size classes to show"},
    {NULL},
};

static int leak_cmp(const void *a, const void *b)
{
    const report_leak_t *x = *(const report_leak_t *const *)a,
                        *y = *(const report_leak_t *const *)b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return x < y ? -1 : x > y;
}

static int bucket_cmp(const void *a, const void *b)
{
    const report_bucket_t *x = *(const report_bucket_t *const *)a,
                          *y = *(const report_bucket_t *const *)b;
    if (x->live_bytes != y->live_bytes) return x->live_bytes < y->live_bytes ? 1 : -1;
    return x < y ? -1 : x > y;
}

static const char *bucket_label(const report_bucket_t *b, char *buf, size_t cap)
{
    char lo[FMT_BYTES_LEN], hi[FMT_BYTES_LEN];
    if (b->label)
        snprintf(buf, cap, "%s", b->label);
    else if (!b->has_range)
        snprintf(buf, cap, "?");
    else if (b->hi == UINT64_MAX)
        snprintf(buf, cap, "> %s", fmt_bytes(lo, b->lo ? b->lo - 1 : 0));
    else
        snprintf(buf, cap, "%s - %s", fmt_bytes(lo, b->lo), fmt_bytes(hi, b->hi));
    return buf;
}

static void print_header(const report_t *r)
{
    printf("npupool report %s\n", r->path);
    printf("  schema %s, trigger %s\n", r->schema, r->trigger);
    printf("  process %ld %s", r->pid, r->exe[0] ? r->exe : "?");
    if (r->hostname[0]) printf(" on %s", r->hostname);
    printf(", rank %ld\n", r->rank);
    if (r->cmdline[0]) printf("  command %s\n", r->cmdline);
    if (r->start_time[0] || r->dump_time[0])
        printf("  started %s, dumped %s\n", r->start_time[0] ? r->start_time : "?",
               r->dump_time[0] ? r->dump_time : "?");
}

static void print_pools(const report_t *r)
{
    char b[8][FMT_BYTES_LEN];
    printf("\n%-9s %11s %11s %11s %11s %11s %13s %6s %11s\n", "pool", "reserved", "allocated",
           "requested", "peak", "free", "largest free", "frag", "free blocks");
    for (size_t i = 0; i < r->ndevices; i++) {
        const report_device_t *d = &r->devices[i];
        char name[24];
        snprintf(name, sizeof name, "device %ld", d->device);
        if (!d->has_pool) {
            printf("%-9s (no pool)\n", name);
            continue;
        }
        printf("%-9s %11s %11s %11s %11s %11s %13s %5.1f%% %11" PRIu64 "\n", name,
               fmt_bytes(b[0], d->reserved), fmt_bytes(b[1], d->allocated),
               fmt_bytes(b[2], d->requested), fmt_bytes(b[3], d->peak_allocated),
               fmt_bytes(b[4], d->free_bytes), fmt_bytes(b[5], d->largest_free),
               d->fragmentation * 100.0, d->free_blocks);
    }
    if (r->ndevices == 0) printf("(no device pool yet)\n");
}

static void print_classes(const report_device_t *d, size_t top)
{
    if (d->nbuckets == 0) return;
    const report_bucket_t **v = malloc(d->nbuckets * sizeof *v);
    if (v == NULL) return;
    size_t n = 0;
    for (size_t i = 0; i < d->nbuckets; i++)
        if (d->buckets[i].live_blocks || d->buckets[i].free_blocks) v[n++] = &d->buckets[i];
    qsort(v, n, sizeof *v, bucket_cmp);
    if (n > top) n = top;
    printf("\nsize classes, device %ld (by live bytes)\n", d->device);
    printf("  %-22s %10s %12s %10s %12s\n", "class", "live", "live bytes", "free", "free bytes");
    for (size_t i = 0; i < n; i++) {
        char l[64], b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN];
        printf("  %-22s %10" PRIu64 " %12s %10" PRIu64 " %12s\n", bucket_label(v[i], l, sizeof l),
               v[i]->live_blocks, fmt_bytes(b1, v[i]->live_bytes), v[i]->free_blocks,
               fmt_bytes(b2, v[i]->free_bytes));
    }
    if (n == 0) printf("  (empty)\n");
    free(v);
}

static void print_counters(const report_device_t *d)
{
    if (d->ncounters == 0) return;
    printf("\ncounters, device %ld:", d->device);
    size_t col = 20;
    for (size_t i = 0; i < d->ncounters; i++) {
        char item[96];
        int n = snprintf(item, sizeof item, " %s %" PRIu64 "%s", d->counters[i].name,
                         d->counters[i].value, i + 1 < d->ncounters ? "," : "");
        if (col + (size_t)n > 100) {
            printf("\n ");
            col = 1;
        }
        fputs(item, stdout);
        col += (size_t)n;
    }
    printf("\n");
}

static void print_leaks(const report_t *r, size_t top)
{
    uint64_t total_count = 0, total_bytes = 0;
    for (size_t i = 0; i < r->nleaks; i++)
        total_count = tools_add_sat(total_count, r->leaks[i].count),
        total_bytes = tools_add_sat(total_bytes, r->leaks[i].bytes);
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN];
    if (r->nleaks == 0) {
        printf("\nno live allocations\n");
        return;
    }
    const report_leak_t **v = malloc(r->nleaks * sizeof *v);
    if (v == NULL) return;
    for (size_t i = 0; i < r->nleaks; i++) v[i] = &r->leaks[i];
    qsort(v, r->nleaks, sizeof *v, leak_cmp);
    size_t n = r->nleaks < top ? r->nleaks : top;
    printf("\ntop leak sites (%zu of %zu; %" PRIu64 " live allocations, %s)\n", n, r->nleaks,
           total_count, fmt_bytes(b1, total_bytes));
    printf("  %11s %9s %4s %9s %11s  %s\n", "bytes", "count", "dev", "oldest", "growth", "site");
    for (size_t i = 0; i < n; i++) {
        char site[256], age[24];
        snprintf(age, sizeof age, "%.1f s", v[i]->oldest_age_s);
        printf("  %11s %9" PRIu64 " %4ld %9s %11s  %s\n", fmt_bytes(b1, v[i]->bytes), v[i]->count,
               v[i]->device, age, v[i]->has_growth ? fmt_sbytes(b2, v[i]->growth_bytes) : "-",
               site_stack_label(v[i], site, sizeof site));
    }
    if (r->leaks_omitted)
        printf("  (%" PRIu64 " more sites left out of the report)\n", r->leaks_omitted);
    free(v);
}

static void print_oom(const report_t *r)
{
    const report_oom_t *o = &r->oom;
    if (!o->present) return;
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN], b3[FMT_BYTES_LEN];
    printf("\nOOM: %s (%" PRIu64 " bytes) requested on device %ld via %s\n",
           fmt_bytes(b1, o->requested), o->requested, o->device,
           o->entry_point ? o->entry_point : "?");
    printf("  free %s, largest free block %s\n", fmt_bytes(b2, o->free_bytes),
           fmt_bytes(b3, o->largest_free));
    if (o->reason) printf("  reason: %s\n", o->reason);
    for (size_t i = 0; i < o->nframes; i++) {
        char fl[512];
        printf("  #%-2zu %s\n", i, site_frame_label(&o->frames[i], fl, sizeof fl));
    }
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const size_t top = (size_t)a->v[OPT_TOP].u;
    report_t r;
    int rc = report_read_file(a->operand[0], &r);
    if (rc != TOOLS_OK) return rc;
    print_header(&r);
    print_pools(&r);
    for (size_t i = 0; i < r.ndevices; i++) print_classes(&r.devices[i], top);
    for (size_t i = 0; i < r.ndevices; i++) print_counters(&r.devices[i]);
    print_leaks(&r, top);
    print_oom(&r);
    report_read_release(&r);
    return TOOLS_OK;
}

const cli_cmd_t cmd_summary = {
    .name = "summary",
    .operands = "REPORT",
    .purpose = "per-device pool figures, size classes, counters, top leak sites",
    .about = "Screen-sized overview of a report: per device reserved / allocated / peak / free / "
             "largest\nfree block / fragmentation, the busiest size classes, counters, the top "
             "leak sites with\nfunction and file:line, and the post-mortem of an oom report.",
    .opts = summary_opts,
    .run = run,
};
