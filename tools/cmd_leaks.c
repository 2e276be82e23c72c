/* tools/cmd_leaks.c — `npupool leaks REPORT`: live allocations grouped by site, with full stacks.
 *
 * Owns: grouping of the report's stacks by allocation site.  A site is the innermost frame (its
 * module + offset, or its function when there is no offset): several stacks reach the same
 * aclrtMalloc call from different callers, and a user fixing a leak starts from that call.
 * Sites are sorted by live bytes, largest first; the stacks under a site likewise.
 * Cost: O(stacks log stacks).
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

enum { OPT_TOP, OPT_MIN_BYTES, OPT_DEVICE, OPT_FAIL_ON_LEAK };
static const cli_opt_t leaks_opts[] = {
    [OPT_TOP] = {"top", 0, CLI_UINT, "N", NULL, CLI_POSITIVE,
                 "show the N largest sites (default: all)"},
    [OPT_MIN_BYTES] = {"min-bytes", 0, CLI_SIZE, "B", NULL, 0,
                       "only sites holding at least B bytes (suffixes K, M, G)"},
    [OPT_DEVICE] = {"device", 0, CLI_UINT, "D", NULL, 0, "only allocations of device D"},
    [OPT_FAIL_ON_LEAK] = {"fail-on-leak", 0, CLI_FLAG, NULL, NULL, 0,
                          "exit 1 when any site is listed (for CI)"},
    {NULL},
};

typedef struct group {
    char key[160];  /* grouping key */
    uint64_t count; /* live allocations */
    uint64_t bytes; /* requested bytes */
    size_t first;   /* index of the first stack in the sorted stack list */
    size_t nstacks; /* stacks of this site */
} group_t;

static void site_key(const report_leak_t *l, char *buf, size_t cap)
{
    const report_frame_t *f = l->nframes ? &l->frames[0] : NULL;
    if (f == NULL)
        snprintf(buf, cap, "?");
    else if (f->module && f->has_offset)
        snprintf(buf, cap, "%s+0x%" PRIx64, f->module, f->offset);
    else if (f->function)
        snprintf(buf, cap, "fn:%s:%s:%" PRIu64, f->function, f->file ? f->file : "", f->line);
    else
        snprintf(buf, cap, "?");
}

typedef struct keyed {
    const report_leak_t *l; /* the stack */
    char key[160];          /* its site key */
    uint64_t site_bytes;    /* bytes of its whole site (filled in a second pass) */
} keyed_t;

static int keyed_by_key(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    if (x->l->bytes != y->l->bytes) return x->l->bytes < y->l->bytes ? 1 : -1;
    return x->l < y->l ? -1 : x->l > y->l;
}

static int group_by_bytes(const void *a, const void *b)
{
    const group_t *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->key, y->key);
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const uint64_t top = a->v[OPT_TOP].given ? a->v[OPT_TOP].u : UINT64_MAX;
    const uint64_t min_bytes = a->v[OPT_MIN_BYTES].u, devsel = a->v[OPT_DEVICE].u;
    const int have_dev = a->v[OPT_DEVICE].given, fail_on_leak = a->v[OPT_FAIL_ON_LEAK].given;
    report_t r;
    int rc = report_read_file(a->operand[0], &r);
    if (rc != TOOLS_OK) return rc;

    keyed_t *k = calloc(r.nleaks ? r.nleaks : 1, sizeof *k);
    group_t *s = calloc(r.nleaks ? r.nleaks : 1, sizeof *s);
    if (k == NULL || s == NULL) {
        free(k), free(s), report_read_release(&r);
        tools_err("out of memory");
        return TOOLS_BAD;
    }
    size_t nk = 0;
    for (size_t i = 0; i < r.nleaks; i++) {
        if (have_dev && r.leaks[i].device != (long)devsel) continue;
        k[nk].l = &r.leaks[i];
        site_key(&r.leaks[i], k[nk].key, sizeof k[nk].key);
        nk++;
    }
    qsort(k, nk, sizeof *k, keyed_by_key);
    size_t ns = 0;
    for (size_t i = 0; i < nk; i++) {
        if (ns == 0 || strcmp(s[ns - 1].key, k[i].key) != 0) {
            memcpy(s[ns].key, k[i].key, sizeof s[ns].key);
            s[ns].first = i;
            ns++;
        }
        group_t *st = &s[ns - 1];
        st->count = tools_add_sat(st->count, k[i].l->count);
        st->bytes = tools_add_sat(st->bytes, k[i].l->bytes);
        st->nstacks++;
    }
    qsort(s, ns, sizeof *s, group_by_bytes);

    uint64_t shown_count = 0, shown_bytes = 0, total_bytes = 0;
    size_t shown = 0;
    for (size_t i = 0; i < ns; i++) {
        total_bytes = tools_add_sat(total_bytes, s[i].bytes);
        if (s[i].bytes < min_bytes || shown >= top) continue;
        shown++;
        shown_count = tools_add_sat(shown_count, s[i].count);
        shown_bytes = tools_add_sat(shown_bytes, s[i].bytes);
    }
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN];
    printf("live allocations in %s: %zu of %zu sites, %" PRIu64 " allocations, %s (of %s)\n",
           r.path, shown, ns, shown_count, fmt_bytes(b1, shown_bytes), fmt_bytes(b2, total_bytes));
    size_t printed = 0;
    for (size_t i = 0; i < ns && printed < shown; i++) {
        if (s[i].bytes < min_bytes) continue;
        printed++;
        char label[256];
        const report_leak_t *l0 = k[s[i].first].l;
        printf("\n#%zu %s: %s in %" PRIu64 " allocation%s, %zu stack%s\n", printed,
               site_label(l0, label, sizeof label), fmt_bytes(b1, s[i].bytes), s[i].count,
               s[i].count == 1 ? "" : "s", s[i].nstacks, s[i].nstacks == 1 ? "" : "s");
        for (size_t j = 0; j < s[i].nstacks; j++) {
            const report_leak_t *l = k[s[i].first + j].l;
            printf("   stack %s, device %ld: %s in %" PRIu64 " allocation%s",
                   l->stack_id[0] ? l->stack_id : "?", l->device, fmt_bytes(b1, l->bytes), l->count,
                   l->count == 1 ? "" : "s");
            if (l->granted) printf(" (granted %s)", fmt_bytes(b2, l->granted));
            printf(", oldest %.1f s", l->oldest_age_s);
            if (l->has_growth)
                printf(", growth %+" PRId64 " / %s", l->growth_count,
                       fmt_sbytes(b2, l->growth_bytes));
            printf("\n");
            for (size_t f = 0; f < l->nframes; f++) {
                char fl[600];
                printf("      #%-2zu %s\n", f, site_frame_label(&l->frames[f], fl, sizeof fl));
            }
            if (l->nframes == 0) printf("      (no stack: backtraces off)\n");
        }
    }
    if (r.leaks_omitted)
        printf("\n(%" PRIu64 " more sites left out of the report)\n", r.leaks_omitted);
    rc = fail_on_leak && shown ? TOOLS_FINDING : TOOLS_OK;
    free(k);
    free(s);
    report_read_release(&r);
    return rc;
}

const cli_cmd_t cmd_leaks = {
    .name = "leaks",
    .operands = "REPORT",
    .purpose = "live allocations grouped by site, full stacks",
    .about = "Live allocations grouped by allocation site (the innermost frame), largest first, "
             "each with\nthe full stacks that reach it.",
    .opts = leaks_opts,
    .run = run,
};
