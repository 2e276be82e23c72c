/* tools/site.h — how a call site, a stack and a frame of a report are named in the command's
 * output.  Stateless; the buffers are the caller's.
 */
#ifndef NPUPOOL_TOOLS_SITE_H
#define NPUPOOL_TOOLS_SITE_H

#include "report_read.h"

#include <stddef.h>

/* Short label of a site: "func (file:line)", "func (module)", "module+0xoff" or "?".
 * Uses the first frame with anything known. */
const char *site_label(const report_leak_t *l, char *buf, size_t cap);
/* The site label followed by " < caller" (the next frame with a function name), for rows that
 * stand for one stack. */
const char *site_stack_label(const report_leak_t *l, char *buf, size_t cap);
/* One frame as "func at file:line (module+0xoff)" with whatever is known. */
const char *site_frame_label(const report_frame_t *f, char *buf, size_t cap);
/* Basename of a module path ("" for NULL). */
const char *site_basename(const char *path);

#endif /* NPUPOOL_TOOLS_SITE_H */
