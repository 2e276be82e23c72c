/* tools/cmd_leaks.c — `npupool leaks REPORT`: live allocations grouped by site, with full stacks.
 *
 * Owns: grouping of the report's stacks by allocation site.  A site is the innermost frame (its
 * module + offset, or its function when there is no offset): several stacks reach the same
 * aclrtMalloc call from different callers, and a user fixing a leak starts from that call.
 * Sites are sorted by live bytes, largest first; the stacks under a site likewise.
 * Cost: O(stacks log stacks).
 */
#include "report.h"
#include "tools.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char leaks_help[] =
    "usage: npupool leaks REPORT [--top N] [--min-bytes B] [--device D] [--fail-on-leak]\n"
    "\n"
    "Live allocations grouped by allocation site (the innermost frame), largest first, each with\n"
    "the full stacks that reach it.\n"
    "\n"
    "  --top N         show the N largest sites (default: all)\n"
    "  --min-bytes B   only sites holding at least B bytes (suffixes K, M, G)\n"
    "  --device D      only allocations of device D\n"
    "  --fail-on-leak  exit 1 when any site is listed (for CI)\n"
    "  -h, --help      this text\n";

typedef struct site {
    char key[160];  /* grouping key */
    uint64_t count; /* live allocations */
    uint64_t bytes; /* requested bytes */
    size_t first;   /* index of the first stack in the sorted stack list */
    size_t nstacks; /* stacks of this site */
} site_t;

static void site_key(const rep_leak_t *l, char *buf, size_t cap)
{
    const rep_frame_t *f = l->nframes ? &l->frames[0] : NULL;
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
    const rep_leak_t *l; /* the stack */
    char key[160];       /* its site key */
    uint64_t site_bytes; /* bytes of its whole site (filled in a second pass) */
} keyed_t;

static int keyed_by_key(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    if (x->l->bytes != y->l->bytes) return x->l->bytes < y->l->bytes ? 1 : -1;
    return x->l < y->l ? -1 : x->l > y->l;
}

static int site_by_bytes(const void *a, const void *b)
{
    const site_t *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->key, y->key);
}

int cmd_leaks(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"top", required_argument, NULL, 't'},    {"min-bytes", required_argument, NULL, 'm'},
        {"device", required_argument, NULL, 'd'}, {"fail-on-leak", no_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    uint64_t top = UINT64_MAX, min_bytes = 0, devsel = 0;
    int have_dev = 0, fail_on_leak = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (tool_parse_u64(optarg, &top) != 0 || top == 0)
                return tool_usage_error("leaks", "--top: '%s' is not a positive number", optarg);
            break;
        case 'm':
            if (tool_parse_bytes(optarg, &min_bytes) != 0)
                return tool_usage_error("leaks", "--min-bytes: '%s' is not a size", optarg);
            break;
        case 'd':
            if (tool_parse_u64(optarg, &devsel) != 0)
                return tool_usage_error("leaks", "--device: '%s' is not a device number", optarg);
            have_dev = 1;
            break;
        case 'F': fail_on_leak = 1; break;
        case 'h': fputs(leaks_help, stdout); return TOOL_OK;
        case ':': return tool_usage_error("leaks", "option '%s' needs a value", argv[optind - 1]);
        default: return tool_usage_error("leaks", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return tool_usage_error("leaks", optind == argc ? "missing REPORT" : "one REPORT only");
    report_t r;
    int rc = report_load(argv[optind], &r);
    if (rc != TOOL_OK) return rc;

    keyed_t *k = calloc(r.nleaks ? r.nleaks : 1, sizeof *k);
    site_t *s = calloc(r.nleaks ? r.nleaks : 1, sizeof *s);
    if (k == NULL || s == NULL) {
        free(k), free(s), report_release(&r);
        tool_err("out of memory");
        return TOOL_BAD;
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
        site_t *st = &s[ns - 1];
        st->count += k[i].l->count;
        st->bytes += k[i].l->bytes;
        st->nstacks++;
    }
    qsort(s, ns, sizeof *s, site_by_bytes);

    uint64_t shown_count = 0, shown_bytes = 0, total_bytes = 0;
    size_t shown = 0;
    for (size_t i = 0; i < ns; i++) {
        total_bytes += s[i].bytes;
        if (s[i].bytes < min_bytes || shown >= top) continue;
        shown++;
        shown_count += s[i].count;
        shown_bytes += s[i].bytes;
    }
    char b1[TOOL_UNITS_LEN], b2[TOOL_UNITS_LEN];
    printf("live allocations in %s: %zu of %zu sites, %" PRIu64 " allocations, %s (of %s)\n",
           r.path, shown, ns, shown_count, tool_bytes(b1, shown_bytes),
           tool_bytes(b2, total_bytes));
    size_t printed = 0;
    for (size_t i = 0; i < ns && printed < shown; i++) {
        if (s[i].bytes < min_bytes) continue;
        printed++;
        char label[256];
        const rep_leak_t *l0 = k[s[i].first].l;
        printf("\n#%zu %s: %s in %" PRIu64 " allocation%s, %zu stack%s\n", printed,
               rep_site_label(l0, label, sizeof label), tool_bytes(b1, s[i].bytes), s[i].count,
               s[i].count == 1 ? "" : "s", s[i].nstacks, s[i].nstacks == 1 ? "" : "s");
        for (size_t j = 0; j < s[i].nstacks; j++) {
            const rep_leak_t *l = k[s[i].first + j].l;
            printf("   stack %s, device %ld: %s in %" PRIu64 " allocation%s",
                   l->stack_id[0] ? l->stack_id : "?", l->device, tool_bytes(b1, l->bytes),
                   l->count, l->count == 1 ? "" : "s");
            if (l->granted) printf(" (granted %s)", tool_bytes(b2, l->granted));
            printf(", oldest %.1f s", l->oldest_age_s);
            if (l->has_growth)
                printf(", growth %+" PRId64 " / %s", l->growth_count,
                       tool_sbytes(b2, l->growth_bytes));
            printf("\n");
            for (size_t f = 0; f < l->nframes; f++) {
                char fl[600];
                printf("      #%-2zu %s\n", f, rep_frame_label(&l->frames[f], fl, sizeof fl));
            }
            if (l->nframes == 0) printf("      (no stack: backtraces off)\n");
        }
    }
    if (r.leaks_omitted)
        printf("\n(%" PRIu64 " more sites left out of the report)\n", r.leaks_omitted);
    rc = fail_on_leak && shown ? TOOL_FINDING : TOOL_OK;
    free(k);
    free(s);
    report_release(&r);
    return rc;
}
