/* tools/cmd_flame.c — `npupool flame REPORT`: live allocations as folded stacks.
 *
 * Owns: the folded-stack text ("outer;...;inner VALUE" per line, sorted, equal stacks merged),
 * the input format of flamegraph.pl, inferno-flamegraph and speedscope.  Frames go outermost
 * first (reports list the allocation call site first).  A frame is its function, else
 * module+0xoffset, else "??"; ';' inside a name becomes ':' and control characters a space, so
 * every line has exactly one separator before the number.
 */
#include "report.h"
#include "tools.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char flame_help[] =
    "usage: npupool flame REPORT [--by bytes|count] [--device D] [--with-device]\n"
    "\n"
    "Live allocations as folded stacks, one 'outer;...;inner VALUE' line per stack, for\n"
    "flamegraph.pl, inferno-flamegraph or speedscope:\n"
    "    npupool flame report.json | flamegraph.pl --countname bytes > leaks.svg\n"
    "\n"
    "  --by bytes|count  value of a stack: live requested bytes (default) or allocations\n"
    "  --device D        only device D\n"
    "  --with-device     add a root frame 'device N'\n"
    "  -h, --help        this text\n";

typedef struct folded {
    char *text;     /* the folded frames */
    uint64_t value; /* bytes or count */
} folded_t;

static size_t put_name(char *out, const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        out[n++] = ch == ';' ? ':' : ch < 32 || ch == 127 ? ' ' : (char)ch;
    }
    return n;
}

static char *fold(const rep_leak_t *l, int with_device)
{
    size_t cap = 32;
    for (size_t i = 0; i < l->nframes; i++)
        cap += 40 + (l->frames[i].function ? strlen(l->frames[i].function) : 0) +
               (l->frames[i].module ? strlen(rep_basename(l->frames[i].module)) : 0);
    char *t = malloc(cap), tmp[64];
    if (t == NULL) return NULL;
    size_t n = 0;
    if (with_device) n += (size_t)snprintf(t, cap, "device %ld", l->device);
    for (size_t i = l->nframes; i-- > 0;) {
        const rep_frame_t *f = &l->frames[i];
        if (n) t[n++] = ';';
        if (f->function)
            n += put_name(t + n, f->function);
        else if (f->module && f->has_offset) {
            n += put_name(t + n, rep_basename(f->module));
            snprintf(tmp, sizeof tmp, "+0x%" PRIx64, f->offset);
            memcpy(t + n, tmp, strlen(tmp));
            n += strlen(tmp);
        } else
            n += put_name(t + n, "??");
    }
    if (n == 0) n += put_name(t, "[no stack]");
    t[n] = '\0';
    return t;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(((const folded_t *)a)->text, ((const folded_t *)b)->text);
}

int cmd_flame(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"by", required_argument, NULL, 'b'},
        {"device", required_argument, NULL, 'd'},
        {"with-device", no_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int by_count = 0, with_device = 0, have_dev = 0, c;
    uint64_t devsel = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (strcmp(optarg, "bytes") == 0)
                by_count = 0;
            else if (strcmp(optarg, "count") == 0)
                by_count = 1;
            else
                return tool_usage_error("flame", "--by: '%s' is not bytes or count", optarg);
            break;
        case 'd':
            if (tool_parse_u64(optarg, &devsel) != 0)
                return tool_usage_error("flame", "--device: '%s' is not a device number", optarg);
            have_dev = 1;
            break;
        case 'w': with_device = 1; break;
        case 'h': fputs(flame_help, stdout); return TOOL_OK;
        case ':': return tool_usage_error("flame", "option '%s' needs a value", argv[optind - 1]);
        default: return tool_usage_error("flame", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return tool_usage_error("flame", optind == argc ? "missing REPORT" : "one REPORT only");
    report_t r;
    int rc = report_load(argv[optind], &r);
    if (rc != TOOL_OK) return rc;
    folded_t *v = calloc(r.nleaks ? r.nleaks : 1, sizeof *v);
    size_t n = 0;
    if (v == NULL) goto oom;
    for (size_t i = 0; i < r.nleaks; i++) {
        const rep_leak_t *l = &r.leaks[i];
        if (have_dev && l->device != (long)devsel) continue;
        uint64_t val = by_count ? l->count : l->bytes;
        if (val == 0) continue;
        v[n].text = fold(l, with_device);
        if (v[n].text == NULL) goto oom;
        v[n++].value = val;
    }
    qsort(v, n, sizeof *v, by_text);
    for (size_t i = 0; i < n;) {
        uint64_t sum = 0;
        size_t j = i;
        while (j < n && strcmp(v[j].text, v[i].text) == 0) sum += v[j++].value;
        printf("%s %" PRIu64 "\n", v[i].text, sum);
        i = j;
    }
    for (size_t i = 0; i < n; i++) free(v[i].text);
    free(v);
    report_release(&r);
    return TOOL_OK;
oom:
    if (v)
        for (size_t i = 0; i < n; i++) free(v[i].text);
    free(v);
    report_release(&r);
    tool_err("out of memory");
    return TOOL_BAD;
}
