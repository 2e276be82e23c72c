/* tools/cmd_flame.c — `npupool flame REPORT`: live allocations as folded stacks.
 *
 * Owns: the folded-stack text ("outer;...;inner VALUE" per line, sorted, equal stacks merged),
 * the input format of flamegraph.pl, inferno-flamegraph and speedscope.  Frames go outermost
 * first (reports list the allocation call site first).  A frame is its function, else
 * module+0xoffset, else "??"; a Python frame "function (file.py:line)", as py-spy names them;
 * ';' inside a name becomes ':' and control characters a space, so every line has exactly one
 * separator before the number.
 */
#include "commands.h"
#include "report_read.h"
#include "site.h"
#include "tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_BY, OPT_DEVICE, OPT_WITH_DEVICE };
enum { BY_BYTES, BY_COUNT }; /* the words of --by, in order */
static const cli_opt_t flame_opts[] = {
    [OPT_BY] = {"by", 0, CLI_CHOICE, "bytes|count", "bytes", 0,
                "value of a stack: live requested bytes or allocations"},
    [OPT_DEVICE] = {"device", 0, CLI_UINT, "D", NULL, 0, "only device D"},
    [OPT_WITH_DEVICE] = {"with-device", 0, CLI_FLAG, NULL, NULL, 0, "add a root frame 'device N'"},
    {NULL},
};

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

static char *fold(const report_leak_t *l, int with_device)
{
    size_t cap = 32;
    for (size_t i = 0; i < l->nframes; i++)
        cap += 40 + (l->frames[i].function ? strlen(l->frames[i].function) : 0) +
               (l->frames[i].module ? strlen(site_basename(l->frames[i].module)) : 0) +
               (l->frames[i].file ? strlen(site_basename(l->frames[i].file)) : 0);
    char *t = malloc(cap), tmp[64];
    if (t == NULL) return NULL;
    size_t n = 0;
    if (with_device) n += (size_t)snprintf(t, cap, "device %ld", l->device);
    for (size_t i = l->nframes; i-- > 0;) {
        const report_frame_t *f = &l->frames[i];
        if (n) t[n++] = ';';
        if (f->python) {
            n += put_name(t + n, f->function ? f->function : "??");
            n += put_name(t + n, " (");
            n += put_name(t + n, site_basename(f->file));
            snprintf(tmp, sizeof tmp, ":%" PRIu64 ")", f->line);
            n += put_name(t + n, tmp);
        } else if (f->function)
            n += put_name(t + n, f->function);
        else if (f->module && f->has_offset) {
            n += put_name(t + n, site_basename(f->module));
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

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const int by_count = a->v[OPT_BY].choice == BY_COUNT, with_device = a->v[OPT_WITH_DEVICE].given;
    const int have_dev = a->v[OPT_DEVICE].given;
    const uint64_t devsel = a->v[OPT_DEVICE].u;
    report_t r;
    int rc = report_read_file(a->operand[0], &r);
    if (rc != TOOLS_OK) return rc;
    folded_t *v = calloc(r.nleaks ? r.nleaks : 1, sizeof *v);
    size_t n = 0;
    if (v == NULL) goto oom;
    for (size_t i = 0; i < r.nleaks; i++) {
        const report_leak_t *l = &r.leaks[i];
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
    report_read_release(&r);
    return TOOLS_OK;
oom:
    if (v)
        for (size_t i = 0; i < n; i++) free(v[i].text);
    free(v);
    report_read_release(&r);
    tools_err("out of memory");
    return TOOLS_BAD;
}

const cli_cmd_t cmd_flame = {
    .name = "flame",
    .operands = "REPORT",
    .purpose = "live allocations as folded stacks (flamegraph.pl)",
    .about = "Live allocations as folded stacks, one 'outer;...;inner VALUE' line per stack, for\n"
             "flamegraph.pl, inferno-flamegraph or speedscope:\n"
             "    npupool flame report.json | flamegraph.pl --countname bytes > leaks.svg",
    .opts = flame_opts,
    .run = run,
};
