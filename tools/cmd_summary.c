/* tools/cmd_summary.c — `npupool summary REPORT...`: a screen-sized overview of one report, or
 * of the reports of a job's ranks side by side.
 *
 * Owns: the summary layout (in the spirit of torch.npu.memory_summary()).  One report: the
 * process, one line of pool figures per device, the busiest size classes, the counters, the top
 * leak sites and the oom post-mortem when there is one.  Several reports: one row per rank and
 * device (rank from process.rank) with the totals, the spread of allocated bytes over the ranks,
 * the top leak sites across the ranks (stacks matched by module + offset, triage.h) with the
 * ranks that hold them, and every oom post-mortem in one line.  Aligned columns, binary units.
 * Cost: O(sites log sites) per report.
 */
#include "commands.h"
#include "fmt.h"
#include "report_read.h"
#include "site.h"
#include "tools.h"
#include "triage.h"

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

/* An oom report written this much after its refusal says so (a direct one takes well under). */
#define OOM_LATE_MS 10.0

/* The line a late oom report gets (a report the reporter thread wrote after the refusal). */
static void print_oom_lateness(const report_oom_t *o)
{
    if (o->written_after_ms >= OOM_LATE_MS)
        printf("  written %.0f ms after the refusal: the free figures above are the refusal's, "
               "the pool and leak figures the later moment's\n",
               o->written_after_ms);
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
    print_oom_lateness(o);
    for (size_t i = 0; i < o->nframes; i++) {
        char fl[512];
        printf("  #%-2zu %s\n", i, site_frame_label(&o->frames[i], fl, sizeof fl));
    }
}

/* ---- several reports ------------------------------------------------------------------------ */

/* Live allocations and bytes of device `dev` in the report's stacks. */
static void live_of(const report_t *r, long dev, uint64_t *count, uint64_t *bytes)
{
    *count = *bytes = 0;
    for (size_t i = 0; i < r->nleaks; i++)
        if (r->leaks[i].device == dev)
            *count = tools_add_sat(*count, r->leaks[i].count),
            *bytes = tools_add_sat(*bytes, r->leaks[i].bytes);
}

/* One row per rank and device, the totals, and how evenly the ranks use their pools. */
static void print_rank_rows(const report_t *r, size_t n)
{
    char b[7][FMT_BYTES_LEN];
    printf("\n%6s %4s %8s %-9s %10s %10s %10s %10s %10s %6s %8s %10s\n", "rank", "dev", "pid",
           "trigger", "reserved", "allocated", "peak", "free", "lrg free", "frag", "live",
           "live bytes");
    uint64_t tres = 0, talloc = 0, tpeak = 0, tfree = 0, tlargest = 0, tlive = 0, tlbytes = 0;
    uint64_t amin = UINT64_MAX, amax = 0, asum = 0;
    long rmin = 0, rmax = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t rank_alloc = 0;
        if (r[i].ndevices == 0)
            printf("%6ld %4s %8ld %-9s (no device pool yet)\n", r[i].rank, "-", r[i].pid,
                   r[i].trigger);
        for (size_t k = 0; k < r[i].ndevices; k++) {
            const report_device_t *d = &r[i].devices[k];
            uint64_t live, lbytes;
            live_of(&r[i], d->device, &live, &lbytes);
            printf("%6ld %4ld %8ld %-9s ", r[i].rank, d->device, r[i].pid, r[i].trigger);
            if (d->has_pool)
                printf("%10s %10s %10s %10s %10s %5.1f%%", fmt_bytes(b[0], d->reserved),
                       fmt_bytes(b[1], d->allocated), fmt_bytes(b[2], d->peak_allocated),
                       fmt_bytes(b[3], d->free_bytes), fmt_bytes(b[4], d->largest_free),
                       d->fragmentation * 100.0);
            else
                printf("%-61s", "(no pool)");
            printf(" %8" PRIu64 " %10s\n", live, fmt_bytes(b[5], lbytes));
            if (d->has_pool) {
                tres = tools_add_sat(tres, d->reserved);
                talloc = tools_add_sat(talloc, d->allocated);
                tpeak = tools_add_sat(tpeak, d->peak_allocated);
                tfree = tools_add_sat(tfree, d->free_bytes);
                if (d->largest_free > tlargest) tlargest = d->largest_free;
                rank_alloc = tools_add_sat(rank_alloc, d->allocated);
            }
            tlive = tools_add_sat(tlive, live);
            tlbytes = tools_add_sat(tlbytes, lbytes);
        }
        if (rank_alloc < amin) amin = rank_alloc, rmin = r[i].rank;
        if (rank_alloc > amax || i == 0) amax = rank_alloc, rmax = r[i].rank;
        asum = tools_add_sat(asum, rank_alloc);
    }
    printf("%-30s %10s %10s %10s %10s %10s %6s %8" PRIu64 " %10s\n", "total", fmt_bytes(b[0], tres),
           fmt_bytes(b[1], talloc), fmt_bytes(b[2], tpeak), fmt_bytes(b[3], tfree),
           fmt_bytes(b[4], tlargest), "", tlive, fmt_bytes(b[5], tlbytes));
    printf("(peak is the sum of each pool's own peak; lrg free the largest of any pool)\n");
    printf("allocated per report: min %s (rank %ld), max %s (rank %ld), mean %s",
           fmt_bytes(b[0], amin), rmin, fmt_bytes(b[1], amax), rmax, fmt_bytes(b[2], asum / n));
    if (amin > 0) printf(", max/min %.2f", (double)amax / (double)amin);
    printf("\n");
}

/* The largest sites across the reports, with the ranks that hold them. */
static void print_rank_sites(const report_t *r, size_t n, size_t top)
{
    triage_in_t in = {.reports = r, .nreports = n};
    triage_t t;
    if (triage_build(&in, &t) != 0) return;
    long ranks[CLI_MAX_OPERANDS];
    size_t rank_of[CLI_MAX_OPERANDS];
    size_t nranks = triage_ranks(r, n, ranks, CLI_MAX_OPERANDS, rank_of);
    char b1[FMT_BYTES_LEN];
    size_t k = t.nsites < top ? t.nsites : top;
    if (t.nsites == 0) {
        printf("\nno live allocations\n");
    } else {
        printf("\ntop leak sites across ranks (%zu of %zu; %" PRIu64 " live allocations, %s)\n", k,
               t.nsites, t.count, fmt_bytes(b1, t.bytes));
        printf("  %11s %9s %7s  %s\n", "bytes", "count", "ranks", "site");
    }
    for (size_t i = 0; i < k; i++) {
        const triage_site_t *s = &t.site[i];
        char site[256], held[32];
        snprintf(held, sizeof held, "%zu/%zu", triage_present(s->rcount, n, rank_of, nranks),
                 nranks);
        printf("  %11s %9" PRIu64 " %7s  %s\n", fmt_bytes(b1, s->bytes), s->count, held,
               site_stack_label(t.stack[s->first].leak, site, sizeof site));
    }
    triage_release(&t);
}

static int run_ranks(const cli_args_t *a, size_t top)
{
    const size_t n = (size_t)a->noperands;
    report_t *r = calloc(n, sizeof *r);
    if (r == NULL) {
        tools_err("out of memory");
        return TOOLS_BAD;
    }
    size_t loaded = 0;
    int rc = TOOLS_OK;
    for (; loaded < n && rc == TOOLS_OK; loaded++)
        if ((rc = report_read_file(a->operand[loaded], &r[loaded])) != TOOLS_OK) break;
    if (rc == TOOLS_OK) {
        long ranks[CLI_MAX_OPERANDS];
        size_t nranks = triage_ranks(r, n, ranks, CLI_MAX_OPERANDS, NULL);
        printf("npupool summary of %zu reports, %zu rank%s\n", n, nranks, nranks == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
            printf("  rank %ld: %s, pid %ld%s%s, trigger %s, dumped %s\n", r[i].rank, r[i].path,
                   r[i].pid, r[i].hostname[0] ? " on " : "", r[i].hostname, r[i].trigger,
                   r[i].dump_time[0] ? r[i].dump_time : "?");
        triage_rank_notes(r, n);
        print_rank_rows(r, n);
        print_rank_sites(r, n, top);
        for (size_t i = 0; i < n; i++) {
            const report_oom_t *o = &r[i].oom;
            if (!o->present) continue;
            char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN], b3[FMT_BYTES_LEN];
            printf("\nOOM in rank %ld (%s): %s requested on device %ld via %s; free %s, largest "
                   "free block %s\n",
                   r[i].rank, r[i].path, fmt_bytes(b1, o->requested), o->device,
                   o->entry_point ? o->entry_point : "?", fmt_bytes(b2, o->free_bytes),
                   fmt_bytes(b3, o->largest_free));
            if (o->reason) printf("  reason: %s\n", o->reason);
            print_oom_lateness(o);
        }
    }
    for (size_t i = 0; i < loaded; i++) report_read_release(&r[i]);
    free(r);
    return rc;
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const size_t top = (size_t)a->v[OPT_TOP].u;
    if (a->noperands > 1) return run_ranks(a, top);
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
    .operands = "REPORT...",
    .purpose =
        "per-device pool figures, size classes, counters, top leak sites; ranks side by side",
    .about = "Screen-sized overview of a report: per device reserved / allocated / peak / free / "
             "largest\nfree block / fragmentation, the busiest size classes, counters, the top "
             "leak sites with\nfunction and file:line, and the post-mortem of an oom report.",
    .opts = summary_opts,
    .run = run,
};
