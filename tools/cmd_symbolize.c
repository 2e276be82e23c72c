/* tools/cmd_symbolize.c — `npupool symbolize REPORT`: fill in or redo function/file/line.
 *
 * Owns: rewriting the frames of a report (leaks[].frames and oom.frames) from their module,
 * offset and build id, with the offline symbolizer (symbolize.c), and writing the report back
 * out: to standard output, to -o FILE, or in place (temporary file + rename, like the shim).
 * A frame whose module cannot be found or whose build id differs keeps what it had.
 */
#include "report.h"
#include "symbolize.h"
#include "tools.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char symbolize_help[] =
    "usage: npupool symbolize REPORT [-o OUT | --in-place] [--missing-only] [--debug-dir DIR]\n"
    "                         [--path-map OLD=NEW]\n"
    "\n"
    "Redo each frame's function, file and line from its module, offset and build id with "
    "elfutils'\n"
    "libdw: for reports written on a machine without debug information, or with\n"
    "NPUPOOL_REPORT_SYMBOLS=0.  Needs the same binaries (the build id must match) or their debug\n"
    "files (/usr/lib/debug/.build-id/...).  Writes the whole report, changed frames included.\n"
    "\n"
    "  -o, --output OUT    write to OUT (default: standard output)\n"
    "  --in-place          replace REPORT (atomically)\n"
    "  --missing-only      only frames without a function name\n"
    "  --debug-dir DIR     also look for separate debug files in DIR\n"
    "  --path-map OLD=NEW  modules under OLD are read from NEW (binaries copied elsewhere)\n"
    "  -h, --help          this text\n"
    "\n"
    "A summary line goes to standard error.  Exit: 0 done, 2 bad usage or input.\n";

typedef struct sym_stats {
    unsigned long frames;    /* frames seen */
    unsigned long resolved;  /* rewritten */
    unsigned long skipped;   /* already named (--missing-only) */
    unsigned long no_module; /* module file not found */
    unsigned long mismatch;  /* build id differs */
    unsigned long nothing;   /* no symbol at the offset */
} sym_stats_t;

static void set_str(cJSON *obj, const char *key, const char *val)
{
    cJSON *v = cJSON_CreateString(val);
    if (v == NULL) return;
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
    else
        cJSON_AddItemToObject(obj, key, v);
}

static void set_num(cJSON *obj, const char *key, double val)
{
    cJSON *v = cJSON_CreateNumber(val);
    if (v == NULL) return;
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
    else
        cJSON_AddItemToObject(obj, key, v);
}

static void redo(tsym_t *ts, rep_frame_t *f, int missing_only, sym_stats_t *st)
{
    st->frames++;
    if (missing_only && f->function) {
        st->skipped++;
        return;
    }
    if (!f->has_offset || f->module == NULL) {
        st->no_module++;
        return;
    }
    const char *fn, *file;
    int line;
    int rc = tsym_lookup(ts, f->module, f->build_id, f->offset, &fn, &file, &line);
    if (rc == TSYM_NO_MODULE)
        st->no_module++;
    else if (rc == TSYM_BUILD_ID)
        st->mismatch++;
    else if (rc == TSYM_NOTHING)
        st->nothing++;
    if (rc != TSYM_OK) return;
    st->resolved++;
    if (fn) set_str(f->node, "function", fn);
    if (file) {
        set_str(f->node, "file", file);
        set_num(f->node, "line", line);
    }
}

static int write_out(const report_t *r, const char *out, int in_place)
{
    char *text = cJSON_Print(r->root);
    if (text == NULL) {
        tool_err("out of memory printing the report");
        return TOOL_BAD;
    }
    size_t len = strlen(text);
    int rc = TOOL_OK;
    if (!in_place && (out == NULL || strcmp(out, "-") == 0)) {
        if (fwrite(text, 1, len, stdout) != len || fputc('\n', stdout) == EOF ||
            fflush(stdout) != 0) {
            tool_err("standard output: write failed");
            rc = TOOL_BAD;
        }
        cJSON_free(text);
        return rc;
    }
    const char *dest = in_place ? r->path : out;
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dest, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        tool_err("%s: cannot write: %s", tmp, strerror(errno));
        cJSON_free(text);
        return TOOL_BAD;
    }
    int bad = fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    cJSON_free(text);
    if (bad || rename(tmp, dest) != 0) {
        tool_err("%s: write failed: %s", dest, strerror(errno));
        unlink(tmp);
        return TOOL_BAD;
    }
    return TOOL_OK;
}

int cmd_symbolize(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"in-place", no_argument, NULL, 'i'},
        {"missing-only", no_argument, NULL, 'm'},
        {"debug-dir", required_argument, NULL, 'd'},
        {"path-map", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL, *debug_dir = NULL, *path_map = NULL;
    int in_place = 0, missing_only = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'i': in_place = 1; break;
        case 'm': missing_only = 1; break;
        case 'd': debug_dir = optarg; break;
        case 'p':
            if (strchr(optarg, '=') == NULL || optarg[0] == '=')
                return tool_usage_error("symbolize", "--path-map: '%s' is not OLD=NEW", optarg);
            path_map = optarg;
            break;
        case 'h': fputs(symbolize_help, stdout); return TOOL_OK;
        case ':':
            return tool_usage_error("symbolize", "option '%s' needs a value", argv[optind - 1]);
        default: return tool_usage_error("symbolize", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return tool_usage_error("symbolize", optind == argc ? "missing REPORT" : "one REPORT only");
    if (in_place && out) return tool_usage_error("symbolize", "give -o or --in-place, not both");
    if (in_place && strcmp(argv[optind], "-") == 0)
        return tool_usage_error("symbolize", "--in-place needs a file, not standard input");
    report_t r;
    int rc = report_load(argv[optind], &r);
    if (rc != TOOL_OK) return rc;
    tsym_t *ts = tsym_open(debug_dir, path_map);
    if (ts == NULL) {
        report_release(&r);
        tool_err("out of memory");
        return TOOL_BAD;
    }
    sym_stats_t st = {0};
    for (size_t i = 0; i < r.nleaks; i++)
        for (size_t j = 0; j < r.leaks[i].nframes; j++)
            redo(ts, &r.leaks[i].frames[j], missing_only, &st);
    for (size_t j = 0; j < r.oom.nframes; j++) redo(ts, &r.oom.frames[j], missing_only, &st);
    rc = write_out(&r, out, in_place);
    fprintf(stderr,
            "npupool symbolize: %lu frames: %lu resolved, %lu already named, %lu module not found, "
            "%lu build id differs, %lu no symbol\n",
            st.frames, st.resolved, st.skipped, st.no_module, st.mismatch, st.nothing);
    tsym_close(ts);
    report_release(&r);
    return rc;
}
