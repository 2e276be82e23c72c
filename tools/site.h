/* tools/site.h — how a call site, a stack and a frame of a report are named in the command's
 * output.  Stateless; the buffers are the caller's.
 */
#ifndef NPUPOOL_TOOLS_SITE_H
#define NPUPOOL_TOOLS_SITE_H

#include "report_read.h"

#include <stddef.h>

/* The frame a stack with Python frames is named by: its innermost Python frame of user code,
 * else its innermost Python frame; NULL for a stack without Python frames. */
const report_frame_t *site_python_frame(const report_leak_t *l);
/* 1 when a Python file is library code rather than the user's: the standard library
 * (".../lib/python3.X/..."), an installed package ("site-packages", "dist-packages"), a frozen
 * module ("<frozen ...>"), or unknown. */
int site_python_is_library(const char *file);
/* What a stack's "python_frames" word means, in a few words; NULL when its Python frames are in
 * the stack (or the process had no interpreter). */
const char *site_python_missing(const report_leak_t *l);

/* Short label of a site: "train.py:42 forward" (site_python_frame), else "func (file:line)",
 * "func (module)", "module+0xoff" or "?" from the first native frame with anything known. */
const char *site_label(const report_leak_t *l, char *buf, size_t cap);
/* The site label followed by " < caller" (the next frame with a function name: for a Python
 * site, the next Python frame), for rows that stand for one stack. */
const char *site_stack_label(const report_leak_t *l, char *buf, size_t cap);
/* One frame as "func at file:line (module+0xoff)" with whatever is known; a Python frame as
 * "func at file:line (python)". */
const char *site_frame_label(const report_frame_t *f, char *buf, size_t cap);
#define SITE_KEY_DEVICE 1u   /* the stack's device id is part of its key */
#define SITE_KEY_BUILD_ID 2u /* a frame with a build id is named by it, not by its module's name */

/* The match key of a stack across reports, malloc'd (NULL when out of memory): its frames as
 * module basename (or build id, with SITE_KEY_BUILD_ID) + offset, a Python frame as its file,
 * line and function, or the function name when a frame has no module offset; with
 * SITE_KEY_DEVICE the device first.  Stack ids are only
 * meaningful inside one process; module offsets hold across snapshots, runs and ranks of one
 * binary, whatever the load addresses. */
char *site_stack_key(const report_leak_t *l, unsigned flags);
/* The match key of a site (the frame it is named by: site_python_frame, else the innermost, as
 * site_stack_key names frames) into buf. */
void site_frame_key(const report_leak_t *l, unsigned flags, char *buf, size_t cap);
/* Basename of a module path ("" for NULL). */
const char *site_basename(const char *path);

#endif /* NPUPOOL_TOOLS_SITE_H */
