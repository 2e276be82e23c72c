/* tools/site.c — how a call site and a frame are named in the command's output (site.h).
 * Stateless.  A frame with a function shows "func"; with a source line "func (file:line)"; without
 * either it falls back to "module+0xoffset", so unsymbolized reports still read sensibly.  A stack
 * (one row of summary/diff) is named by its site and its first named caller: "f (f.c:3) < main".
 * A stack with Python frames is named by its innermost Python frame of user code, the way
 * Python's own tools name a line: "train.py:42 forward < main"; its native frames (the runtime
 * call, libffi, a framework's C++) are the same for every Python call site and name none.
 */
#include "site.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *site_basename(const char *path)
{
    if (path == NULL) return "";
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int frame_known(const report_frame_t *f)
{
    return f->function || f->file || (f->module && f->has_offset);
}

int site_python_is_library(const char *file)
{
    if (file == NULL || strncmp(file, "<frozen ", 8) == 0) return 1;
    if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/")) return 1;
    for (const char *p = strstr(file, "/lib/python3."); p; p = strstr(p + 1, "/lib/python3.")) {
        const char *q = p + 13;
        while (*q >= '0' && *q <= '9') q++;
        if (q > p + 13 && *q == '/') return 1;
    }
    return 0;
}

const report_frame_t *site_python_frame(const report_leak_t *l)
{
    const report_frame_t *first = NULL;
    for (size_t i = 0; i < l->nframes; i++) {
        const report_frame_t *f = &l->frames[i];
        if (!f->python) continue;
        if (!site_python_is_library(f->file)) return f;
        if (first == NULL) first = f;
    }
    return first;
}

const char *site_python_missing(const report_leak_t *l)
{
    static const struct {
        const char *word; /* "python_frames" in a report */
        const char *text; /* what it means for the stack */
    } why[] = {
        {"not_visible", "the thread had released the GIL and is not the main thread"},
        {"no_thread_state", "the thread has no Python thread state"},
        {"not_running", "the interpreter was starting or shutting down"},
        {"unsupported", "this interpreter's frames cannot be read"},
    };
    if (l->python_frames == NULL) return NULL;
    for (size_t i = 0; i < sizeof why / sizeof why[0]; i++)
        if (strcmp(l->python_frames, why[i].word) == 0) return why[i].text;
    return NULL;
}

static void python_label(const report_frame_t *f, char *buf, size_t cap)
{
    if (f->line)
        snprintf(buf, cap, "%s:%" PRIu64 " %s", site_basename(f->file), f->line,
                 f->function ? f->function : "?");
    else
        snprintf(buf, cap, "%s %s", site_basename(f->file), f->function ? f->function : "?");
}

const char *site_label(const report_leak_t *l, char *buf, size_t cap)
{
    const report_frame_t *py = site_python_frame(l);
    if (py) {
        python_label(py, buf, cap);
        return buf;
    }
    for (size_t i = 0; i < l->nframes; i++) {
        const report_frame_t *f = &l->frames[i];
        if (!frame_known(f)) continue;
        if (f->function && f->file && f->line)
            snprintf(buf, cap, "%s (%s:%" PRIu64 ")", f->function, site_basename(f->file), f->line);
        else if (f->function && f->module)
            snprintf(buf, cap, "%s (%s)", f->function, site_basename(f->module));
        else if (f->function)
            snprintf(buf, cap, "%s", f->function);
        else if (f->file && f->line)
            snprintf(buf, cap, "%s:%" PRIu64, site_basename(f->file), f->line);
        else
            snprintf(buf, cap, "%s+0x%" PRIx64, site_basename(f->module), f->offset);
        return buf;
    }
    snprintf(buf, cap, "?");
    return buf;
}

const char *site_stack_label(const report_leak_t *l, char *buf, size_t cap)
{
    site_label(l, buf, cap);
    const report_frame_t *py = site_python_frame(l);
    if (py) { /* the caller: the next Python frame */
        for (const report_frame_t *f = py + 1; f < l->frames + l->nframes; f++) {
            if (!f->python || !f->function) continue;
            size_t n = strlen(buf);
            if (n + 4 < cap) snprintf(buf + n, cap - n, " < %s", f->function);
            break;
        }
        return buf;
    }
    /* The innermost frame is often a wrapper (a caching allocator, a helper every site calls):
     * name the caller too, so that rows of different stacks can be told apart. */
    size_t i = 0;
    while (i < l->nframes && !frame_known(&l->frames[i])) i++;
    for (i++; i < l->nframes; i++) {
        if (!l->frames[i].function) continue;
        size_t n = strlen(buf);
        if (n + 4 < cap) snprintf(buf + n, cap - n, " < %s", l->frames[i].function);
        break;
    }
    return buf;
}

const char *site_frame_label(const report_frame_t *f, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, cap - n, "%s", f->function ? f->function : "??");
    if (n < cap && f->file && f->line)
        n += (size_t)snprintf(buf + n, cap - n, " at %s:%" PRIu64, f->file, f->line);
    else if (n < cap && f->file)
        n += (size_t)snprintf(buf + n, cap - n, " at %s", f->file);
    if (n < cap && f->python) snprintf(buf + n, cap - n, " (python)");
    if (n < cap && f->module)
        n += (size_t)snprintf(buf + n, cap - n, " (%s+0x%" PRIx64 ")", site_basename(f->module),
                              f->offset);
    return buf;
}

/* One frame of a key: "|name+off" or "|function". */
static size_t frame_key(const report_frame_t *f, unsigned flags, char *k, size_t cap)
{
    int n;
    if (f->python)
        n = snprintf(k, cap, "|py:%s:%" PRIu64 ":%s", f->file ? f->file : "?", f->line,
                     f->function ? f->function : "?");
    else if (f->module && f->has_offset && (flags & SITE_KEY_BUILD_ID) && f->build_id)
        n = snprintf(k, cap, "|%s+%" PRIx64, f->build_id, f->offset);
    else if (f->module && f->has_offset)
        n = snprintf(k, cap, "|%s+%" PRIx64, site_basename(f->module), f->offset);
    else
        n = snprintf(k, cap, "|%s", f->function ? f->function : "?");
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

char *site_stack_key(const report_leak_t *l, unsigned flags)
{
    size_t cap = 32 + l->nframes * 64, n = 0;
    for (size_t i = 0; i < l->nframes; i++) {
        const report_frame_t *f = &l->frames[i];
        cap += (f->function ? strlen(f->function) : 0) +
               (f->module ? strlen(site_basename(f->module)) : 0) +
               (f->build_id ? strlen(f->build_id) : 0) + (f->file ? strlen(f->file) : 0);
    }
    char *k = malloc(cap);
    if (k == NULL) return NULL;
    k[0] = '\0';
    if (flags & SITE_KEY_DEVICE) n += (size_t)snprintf(k, cap, "%ld", l->device);
    for (size_t i = 0; i < l->nframes; i++) n += frame_key(&l->frames[i], flags, k + n, cap - n);
    return k;
}

void site_frame_key(const report_leak_t *l, unsigned flags, char *buf, size_t cap)
{
    buf[0] = '\0';
    const report_frame_t *py = site_python_frame(l);
    if (l->nframes == 0)
        snprintf(buf, cap, "?");
    else
        frame_key(py ? py : &l->frames[0], flags, buf, cap);
}
