/* tools/cmd_leaks.c — `npupool leaks REPORT...`: live allocations grouped by site, with full
 * stacks; what is new since a baseline; what several ranks hold; less what is suppressed.
 *
 * Owns: the leak listing's options and layout.  A site is the innermost frame (its module +
 * offset, or its function when there is no offset): several stacks reach the same aclrtMalloc
 * call from different callers, and a user fixing a leak starts from that call.  Which stacks
 * are rows, and their sums, come from triage.h (plain / since / ranks); suppression patterns
 * come from --ignore, --suppress FILE or, without --suppress, the file NPUPOOL_SUPPRESS names
 * (base/suppress.h).  Sites are sorted by bytes, largest first; the stacks under a site likewise.
 * Cost: O(stacks log stacks), and O(stacks * reports) memory with several reports.
 */
#include "commands.h"
#include "fmt.h"
#include "report_read.h"
#include "site.h"
#include "suppress.h"
#include "tools.h"
#include "triage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUPPRESS_ENV "NPUPOOL_SUPPRESS" /* file of patterns read when --suppress is not given */
#define PER_RANK_MAX 16                 /* ranks listed one by one under a site */

enum {
    OPT_TOP,
    OPT_MIN_BYTES,
    OPT_DEVICE,
    OPT_FAIL_ON_LEAK,
    OPT_SINCE,
    OPT_IGNORE,
    OPT_SUPPRESS,
};
static const cli_opt_t leaks_opts[] = {
    [OPT_TOP] = {"top", 0, CLI_UINT, "N", NULL, CLI_POSITIVE,
                 "show the N largest sites (default: all)"},
    [OPT_MIN_BYTES] = {"min-bytes", 0, CLI_SIZE, "B", NULL, 0,
                       "only sites holding at least B bytes (suffixes K, M, G)"},
    [OPT_DEVICE] = {"device", 0, CLI_UINT, "D", NULL, 0, "only allocations of device D"},
    [OPT_FAIL_ON_LEAK] = {"fail-on-leak", 0, CLI_FLAG, NULL, NULL, 0,
                          "exit 1 when any site is listed (for CI)"},
    [OPT_SINCE] = {"since", 0, CLI_TEXT, "BASE", NULL, 0,
                   "only what is new since the report BASE: stacks matched by module + offset\n"
                   "(build id when known), rows are their growth (one REPORT only)"},
    [OPT_IGNORE] = {"ignore", 0, CLI_TEXT, "PATTERN", NULL, CLI_REPEAT,
                    "leave out stacks with a frame whose function or module matches the glob\n"
                    "(function:PATTERN, module:PATTERN: only that; see docs/tools.md)"},
    [OPT_SUPPRESS] = {"suppress", 0, CLI_TEXT, "FILE", NULL, 0,
                      "patterns to leave out, one a line (default: the file $" SUPPRESS_ENV ")"},
    {NULL},
};

typedef struct view {
    const report_t *r;                /* the reports */
    size_t nr;                        /* their number */
    const report_t *base;             /* --since, or NULL */
    const triage_t *t;                /* the rows */
    long ranks[CLI_MAX_OPERANDS];     /* distinct ranks, sorted */
    size_t nranks;                    /* entries in ranks */
    size_t rank_of[CLI_MAX_OPERANDS]; /* report -> index into ranks */
    int dup_rank[CLI_MAX_OPERANDS];   /* 1 when the report's rank is in another report too */
} view_t;

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

/* Load the patterns: --suppress FILE, else $NPUPOOL_SUPPRESS, then every --ignore. */
static int load_patterns(const cli_cmd_t *cmd, const cli_args_t *a, suppress_list_t *sup)
{
    suppress_init(sup);
    const char *file = a->v[OPT_SUPPRESS].given ? a->v[OPT_SUPPRESS].text : getenv(SUPPRESS_ENV);
    if (file && *file && suppress_load(sup, file) != 0) {
        tools_err("%s", sup->err);
        return TOOLS_BAD;
    }
    for (int i = 0; i < a->v[OPT_IGNORE].given; i++) {
        const char *p = a->v[OPT_IGNORE].all[i];
        int before = sup->n;
        if (suppress_add(sup, p, strlen(p), "--ignore", 0) != 0)
            return cli_usage_error(cmd, "%s", sup->err);
        if (sup->n == before) /* blank, or a '#' comment: refused rather than ignored */
            return cli_usage_error(cmd, "--ignore: '%.60s' is not a pattern", p);
    }
    return TOOLS_OK;
}

static void print_suppressed(const suppress_list_t *sup, const triage_t *t)
{
    if (sup->n == 0) return;
    char b1[FMT_BYTES_LEN];
    if (t->hidden.stacks == 0) {
        printf("suppressed: nothing (%d pattern%s)\n", sup->n, plural((uint64_t)sup->n));
        return;
    }
    int used = 0;
    for (int i = 0; i < sup->n; i++) used += t->hits[i].stacks > 0;
    printf("suppressed: %" PRIu64 " stack%s, %s in %" PRIu64 " allocation%s (%d of %d pattern%s "
           "matched)\n",
           t->hidden.stacks, plural(t->hidden.stacks), fmt_bytes(b1, t->hidden.bytes),
           t->hidden.count, plural(t->hidden.count), used, sup->n, plural((uint64_t)sup->n));
    for (int i = 0; i < sup->n; i++) {
        const suppress_rule_t *r = &sup->rule[i];
        const triage_hits_t *h = &t->hits[i];
        if (h->stacks == 0) continue;
        static const char *const prefix[] = {"", "function:", "module:"};
        char where[600];
        if (r->line)
            snprintf(where, sizeof where, "%s:%u", r->source, (unsigned)r->line);
        else
            snprintf(where, sizeof where, "%s", r->source);
        printf("  by %s '%s%s': %" PRIu64 " stack%s, %s in %" PRIu64 " allocation%s\n", where,
               prefix[r->kind], r->pattern, h->stacks, plural(h->stacks), fmt_bytes(b1, h->bytes),
               h->count, plural(h->count));
    }
}

/* The ranks table of several reports, and a note for a rank that is in more than one. */
static void print_ranks(view_t *v)
{
    char b1[FMT_BYTES_LEN];
    printf("  %6s %8s %12s %12s %6s  %s\n", "rank", "pid", "allocations", "bytes", "stacks",
           "report");
    uint64_t tc = 0, tb = 0, ts = 0;
    for (size_t i = 0; i < v->nr; i++) {
        const report_t *r = &v->r[i];
        uint64_t c = 0, b = 0;
        for (size_t j = 0; j < r->nleaks; j++)
            c = tools_add_sat(c, r->leaks[j].count), b = tools_add_sat(b, r->leaks[j].bytes);
        printf("  %6ld %8ld %12" PRIu64 " %12s %6zu  %s\n", r->rank, r->pid, c, fmt_bytes(b1, b),
               r->nleaks, r->path);
        tc = tools_add_sat(tc, c), tb = tools_add_sat(tb, b), ts += r->nleaks;
    }
    printf("  %6s %8s %12" PRIu64 " %12s %6" PRIu64 "\n", "total", "", tc, fmt_bytes(b1, tb), ts);
    triage_rank_notes(v->r, v->nr);
}

/* "rank 3" or, for a rank that several reports share, "rank 3 (path)". */
static const char *rank_label(const view_t *v, size_t r, char *buf, size_t cap)
{
    if (v->dup_rank[r])
        snprintf(buf, cap, "rank %ld (%s)", v->r[r].rank, site_basename(v->r[r].path));
    else
        snprintf(buf, cap, "rank %ld", v->r[r].rank);
    return buf;
}

/* What each rank holds of a site: one phrase when every rank holds the same, else a list. */
static void print_per_rank(const view_t *v, const uint64_t *rc, const uint64_t *rb)
{
    char b1[FMT_BYTES_LEN], lab[600];
    size_t present = triage_present(rc, v->nr, v->rank_of, v->nranks);
    int same = 1;
    for (size_t r = 1; r < v->nr; r++) same &= rc[r] == rc[0] && rb[r] == rb[0];
    if (same) {
        printf("   every rank: %s in %" PRIu64 " allocation%s\n", fmt_bytes(b1, rb[0]), rc[0],
               plural(rc[0]));
        return;
    }
    printf("   per rank:");
    size_t shown = 0;
    for (size_t r = 0; r < v->nr; r++) {
        if (rc[r] == 0) continue;
        if (shown++ == PER_RANK_MAX) {
            printf(", ... (%zu ranks in all)", present);
            break;
        }
        printf("%s %s %s in %" PRIu64, shown > 1 ? "," : "", rank_label(v, r, lab, sizeof lab),
               fmt_bytes(b1, rb[r]), rc[r]);
    }
    if (present < v->nranks) {
        printf("; none in");
        size_t k = 0;
        for (size_t i = 0; i < v->nranks; i++) {
            int holds = 0;
            for (size_t r = 0; r < v->nr; r++) holds |= v->rank_of[r] == i && rc[r] > 0;
            if (holds) continue;
            if (k++ == PER_RANK_MAX) {
                printf(" ...");
                break;
            }
            printf("%s rank %ld", k > 1 ? "," : "", v->ranks[i]);
        }
    }
    printf("\n");
}

static void print_stack(const view_t *v, const triage_stack_t *s)
{
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN], b3[FMT_BYTES_LEN];
    const report_leak_t *l = s->leak;
    if (v->t->mode == TRIAGE_SINCE) {
        printf("   stack %s, device %ld: %s in %+" PRId64 " allocation%s",
               l->stack_id[0] ? l->stack_id : "?", l->device,
               fmt_sbytes(b1, s->bytes > INT64_MAX ? INT64_MAX : (int64_t)s->bytes), s->delta_count,
               s->delta_count == 1 || s->delta_count == -1 ? "" : "s");
        if (s->in_base)
            printf(" (now %s in %" PRIu64 ", was %s in %" PRIu64 ")\n", fmt_bytes(b2, s->now_bytes),
                   s->now_count, fmt_bytes(b3, s->base_bytes), s->base_count);
        else
            printf(" (new)\n");
    } else if (v->t->mode == TRIAGE_RANKS) {
        size_t present = triage_present(s->rcount, v->nr, v->rank_of, v->nranks);
        printf("   stack in %zu of %zu rank%s: %s in %" PRIu64 " allocation%s\n", present,
               v->nranks, plural(v->nranks), fmt_bytes(b1, s->bytes), s->count, plural(s->count));
    } else {
        printf("   stack %s, device %ld: %s in %" PRIu64 " allocation%s",
               l->stack_id[0] ? l->stack_id : "?", l->device, fmt_bytes(b1, l->bytes), l->count,
               plural(l->count));
        if (l->granted) printf(" (granted %s)", fmt_bytes(b2, l->granted));
        printf(", oldest %.1f s", l->oldest_age_s);
        if (l->has_growth)
            printf(", growth %+" PRId64 " / %s", l->growth_count, fmt_sbytes(b2, l->growth_bytes));
        printf("\n");
    }
    for (size_t f = 0; f < l->nframes; f++) {
        char fl[600];
        printf("      #%-2zu %s\n", f, site_frame_label(&l->frames[f], fl, sizeof fl));
    }
    if (l->nframes == 0) printf("      (no stack: backtraces off)\n");
    const char *missing = site_python_missing(l);
    if (missing) printf("      (no Python frames: %s)\n", missing);
}

/* The first line: what is listed, out of what. */
static void print_head(const view_t *v, size_t shown, uint64_t count, uint64_t bytes)
{
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN];
    const triage_t *t = v->t;
    if (t->mode == TRIAGE_SINCE)
        printf("new in %s since %s (%zu stack%s): %zu of %zu sites, +%" PRIu64
               " allocations, +%s (of +%s)\n",
               v->r[0].path, v->base->path, t->base_stacks, plural(t->base_stacks), shown,
               t->nsites, count, fmt_bytes(b1, bytes), fmt_bytes(b2, t->bytes));
    else if (t->mode == TRIAGE_RANKS)
        printf("live allocations in %zu reports of %zu rank%s: %zu of %zu sites, %" PRIu64
               " allocations, %s (of %s)\n",
               v->nr, v->nranks, plural(v->nranks), shown, t->nsites, count, fmt_bytes(b1, bytes),
               fmt_bytes(b2, t->bytes));
    else
        printf("live allocations in %s: %zu of %zu sites, %" PRIu64 " allocations, %s (of %s)\n",
               v->r[0].path, shown, t->nsites, count, fmt_bytes(b1, bytes),
               fmt_bytes(b2, t->bytes));
}

static int list(view_t *v, const suppress_list_t *sup, uint64_t top, uint64_t min_bytes)
{
    const triage_t *t = v->t;
    char b1[FMT_BYTES_LEN];
    uint64_t shown_count = 0, shown_bytes = 0;
    size_t shown = 0;
    for (size_t i = 0; i < t->nsites; i++) {
        if (t->site[i].bytes < min_bytes || shown >= top) continue;
        shown++;
        shown_count = tools_add_sat(shown_count, t->site[i].count);
        shown_bytes = tools_add_sat(shown_bytes, t->site[i].bytes);
    }
    print_head(v, shown, shown_count, shown_bytes);
    if (t->mode == TRIAGE_RANKS) print_ranks(v);
    print_suppressed(sup, t);
    size_t printed = 0;
    for (size_t i = 0; i < t->nsites && printed < shown; i++) {
        const triage_site_t *s = &t->site[i];
        if (s->bytes < min_bytes) continue;
        printed++;
        char label[256];
        const char *sign = t->mode == TRIAGE_SINCE ? "+" : "";
        printf("\n#%zu %s: %s%s in %s%" PRIu64 " allocation%s, %zu stack%s", printed,
               site_label(t->stack[s->first].leak, label, sizeof label), sign,
               fmt_bytes(b1, s->bytes), sign, s->count, plural(s->count), s->nstacks,
               plural(s->nstacks));
        if (t->mode == TRIAGE_RANKS)
            printf(", in %zu of %zu rank%s",
                   triage_present(s->rcount, v->nr, v->rank_of, v->nranks), v->nranks,
                   plural(v->nranks));
        printf("\n");
        if (t->mode == TRIAGE_RANKS) print_per_rank(v, s->rcount, s->rbytes);
        for (size_t j = 0; j < s->nstacks; j++) print_stack(v, &t->stack[s->first + j]);
    }
    for (size_t i = 0; i < v->nr; i++)
        if (v->r[i].leaks_omitted)
            printf("\n(%" PRIu64 " more sites left out of %s)\n", v->r[i].leaks_omitted,
                   v->nr > 1 ? v->r[i].path : "the report");
    return shown > 0;
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    const uint64_t top = a->v[OPT_TOP].given ? a->v[OPT_TOP].u : UINT64_MAX;
    const uint64_t min_bytes = a->v[OPT_MIN_BYTES].u;
    const int fail_on_leak = a->v[OPT_FAIL_ON_LEAK].given;
    const size_t nr = (size_t)a->noperands;
    if (a->v[OPT_SINCE].given && nr > 1)
        return cli_usage_error(cmd, "--since compares one REPORT with its baseline, not %zu", nr);
    suppress_list_t *sup = malloc(sizeof *sup);
    view_t *v = calloc(1, sizeof *v);
    report_t *r = calloc(nr + 1, sizeof *r); /* the reports, then the baseline */
    size_t loaded = 0;
    int rc = TOOLS_BAD;
    if (sup == NULL || v == NULL || r == NULL) {
        tools_err("out of memory");
        goto out;
    }
    if ((rc = load_patterns(cmd, a, sup)) != TOOLS_OK) goto out;
    for (; loaded < nr; loaded++)
        if ((rc = report_read_file(a->operand[loaded], &r[loaded])) != TOOLS_OK) goto out;
    if (a->v[OPT_SINCE].given) {
        if ((rc = report_read_file(a->v[OPT_SINCE].text, &r[nr])) != TOOLS_OK) goto out;
        loaded++;
    }
    triage_in_t in = {
        .reports = r,
        .nreports = nr,
        .base = a->v[OPT_SINCE].given ? &r[nr] : NULL,
        .sup = sup,
        .have_device = a->v[OPT_DEVICE].given,
        .device = (long)a->v[OPT_DEVICE].u,
    };
    triage_t t;
    if (triage_build(&in, &t) != 0) {
        rc = TOOLS_BAD;
        goto out;
    }
    v->r = r, v->nr = nr, v->base = in.base, v->t = &t;
    v->nranks = triage_ranks(r, nr, v->ranks, CLI_MAX_OPERANDS, v->rank_of);
    for (size_t i = 0; i < nr; i++)
        for (size_t j = 0; j < nr; j++) v->dup_rank[i] |= i != j && r[i].rank == r[j].rank;
    int listed = list(v, sup, top, min_bytes);
    rc = fail_on_leak && listed ? TOOLS_FINDING : TOOLS_OK;
    triage_release(&t);
out:
    for (size_t i = 0; i < loaded; i++) report_read_release(&r[i]);
    free(r);
    free(v);
    free(sup);
    return rc;
}

const cli_cmd_t cmd_leaks = {
    .name = "leaks",
    .operands = "REPORT...",
    .purpose = "live allocations grouped by site, full stacks; new since a baseline; across ranks",
    .about = "Live allocations grouped by allocation site (the innermost frame), largest first, "
             "each with\nthe full stacks that reach it.  With --since BASE only the growth since "
             "the baseline report.\nWith several reports (one per rank) one row per rank, and "
             "each site with the ranks that\nhold it (stacks matched by module + offset).  "
             "--ignore, --suppress and $" SUPPRESS_ENV " leave\nout stacks that have a frame a "
             "pattern matches (model weights, the KV cache) and say how much.",
    .opts = leaks_opts,
    .run = run,
};
