/* tools/cmd_symbolize.c — `npupool symbolize REPORT`: fill in or redo function/file/line.
 *
 * Owns: rewriting the frames of a report (leaks[].frames and oom.frames) from their module,
 * offset and build id, with the offline symbolizer (symbolize.c), and writing the report back
 * out: to standard output, to -o FILE, or in place (temporary file + rename, like the shim).
 * A frame whose module cannot be found or whose build id differs keeps what it had; a Python
 * frame (named from the interpreter when it was captured) is kept as it is.
 */
#include "commands.h"
#include "report_read.h"
#include "symfile.h"
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_OUTPUT, OPT_IN_PLACE, OPT_MISSING_ONLY, OPT_DEBUG_DIR, OPT_PATH_MAP };
static const cli_opt_t symbolize_opts[] = {
    [OPT_OUTPUT] = {"output", 'o', CLI_TEXT, "OUT", NULL, 0,
                    "write to OUT (default: standard output)"},
    [OPT_IN_PLACE] = {"in-place", 0, CLI_FLAG, NULL, NULL, CLI_ALT, "replace REPORT (atomically)"},
    [OPT_MISSING_ONLY] = {"missing-only", 0, CLI_FLAG, NULL, NULL, 0,
                          "only frames without a function name"},
    [OPT_DEBUG_DIR] = {"debug-dir", 0, CLI_TEXT, "DIR", NULL, 0,
                       "also look for separate debug files in DIR"},
    [OPT_PATH_MAP] = {"path-map", 0, CLI_TEXT, "OLD=NEW", NULL, 0,
                      "modules under OLD are read from NEW (binaries copied elsewhere)"},
    {NULL},
};

typedef struct sym_stats {
    unsigned long frames;    /* frames seen */
    unsigned long resolved;  /* rewritten */
    unsigned long skipped;   /* already named (--missing-only, Python frames) */
    unsigned long no_module; /* module file not found */
    unsigned long mismatch;  /* build id differs */
    unsigned long nothing;   /* no symbol at the offset */
} sym_stats_t;

/* obj[key] = v, replacing what was there (v == NULL: host OOM, nothing changes). */
static void set_item(cJSON *obj, const char *key, cJSON *v)
{
    if (v == NULL) return;
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
    else
        cJSON_AddItemToObject(obj, key, v);
}

static void redo(symfile_t *ts, report_frame_t *f, int missing_only, sym_stats_t *st)
{
    st->frames++;
    if (f->python || (missing_only && f->function)) { /* a Python frame is named at capture */
        st->skipped++;
        return;
    }
    if (!f->has_offset || f->module == NULL) {
        st->no_module++;
        return;
    }
    const char *fn, *file;
    int line;
    int rc = symfile_lookup(ts, f->module, f->build_id, f->offset, &fn, &file, &line);
    if (rc == SYMFILE_NO_MODULE)
        st->no_module++;
    else if (rc == SYMFILE_BUILD_ID)
        st->mismatch++;
    else if (rc == SYMFILE_NOTHING)
        st->nothing++;
    if (rc != SYMFILE_OK) return;
    st->resolved++;
    if (fn) set_item(f->node, "function", cJSON_CreateString(fn));
    if (file) {
        set_item(f->node, "file", cJSON_CreateString(file));
        set_item(f->node, "line", cJSON_CreateNumber(line));
    }
}

static int write_out(report_t *r, const char *out, int in_place)
{
    report_read_keep_literals(r); /* integers beyond 2^53 stay exact */
    char *text = cJSON_Print(r->root);
    if (text == NULL) {
        tools_err("out of memory printing the report");
        return TOOLS_BAD;
    }
    int rc = tools_write_text(in_place ? r->path : out, text, strlen(text));
    cJSON_free(text);
    return rc;
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    const char *out = a->v[OPT_OUTPUT].text, *debug_dir = a->v[OPT_DEBUG_DIR].text;
    const char *path_map = a->v[OPT_PATH_MAP].text;
    const int in_place = a->v[OPT_IN_PLACE].given, missing_only = a->v[OPT_MISSING_ONLY].given;
    if (path_map && (strchr(path_map, '=') == NULL || path_map[0] == '='))
        return cli_usage_error(cmd, "--path-map: '%s' is not OLD=NEW", path_map);
    if (in_place && strcmp(a->operand[0], "-") == 0)
        return cli_usage_error(cmd, "--in-place needs a file, not standard input");
    report_t r;
    int rc = report_read_file(a->operand[0], &r);
    if (rc != TOOLS_OK) return rc;
    symfile_t *ts = symfile_open(debug_dir, path_map);
    if (ts == NULL) {
        report_read_release(&r);
        tools_err("out of memory");
        return TOOLS_BAD;
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
    symfile_close(ts);
    report_read_release(&r);
    return rc;
}

const cli_cmd_t cmd_symbolize = {
    .name = "symbolize",
    .operands = "REPORT",
    .purpose = "redo function/file/line from module+offset",
    .about = "Redo each frame's function, file and line from its module, offset and build id with "
             "elfutils'\nlibdw: for reports written on a machine without debug information, or "
             "with\nNPUPOOL_REPORT_SYMBOLS=0.  Needs the same binaries (the build id must match) "
             "or their debug\nfiles (/usr/lib/debug/.build-id/...).  Writes the whole report, "
             "changed frames included.",
    .opts = symbolize_opts,
    .epilog = "A summary line goes to standard error.  Exit: 0 done, 2 bad usage or input.",
    .run = run,
};
