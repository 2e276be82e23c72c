/* tools/site.c — how a call site and a frame are named in the command's output (site.h).
 * Stateless.  A frame with a function shows "func"; with a source line "func (file:line)"; without
 * either it falls back to "module+0xoffset", so unsymbolized reports still read sensibly.  A stack
 * (one row of summary/diff) is named by its site and its first named caller: "f (f.c:3) < main".
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

const char *site_label(const report_leak_t *l, char *buf, size_t cap)
{
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
    if (n < cap && f->file)
        n += (size_t)snprintf(buf + n, cap - n, " at %s:%" PRIu64, f->file, f->line);
    if (n < cap && f->module)
        n += (size_t)snprintf(buf + n, cap - n, " (%s+0x%" PRIx64 ")", site_basename(f->module),
                              f->offset);
    return buf;
}

/* One frame of a key: "|name+off" or "|function". */
static size_t frame_key(const report_frame_t *f, unsigned flags, char *k, size_t cap)
{
    int n;
    if (f->module && f->has_offset && (flags & SITE_KEY_BUILD_ID) && f->build_id)
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
               (f->build_id ? strlen(f->build_id) : 0);
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
    if (l->nframes == 0)
        snprintf(buf, cap, "?");
    else
        frame_key(&l->frames[0], flags, buf, cap);
}
