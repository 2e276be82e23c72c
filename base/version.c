/* base/version.c — see version.h.  NPUPOOL_VERSION comes from the generated version_gen.h
 * ($(BUILD)/gen, written by mk/version.sh); only this file includes it, so a new version rebuilds
 * one object. */
#define _GNU_SOURCE
#include "version.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include("version_gen.h")
#include "version_gen.h"
#endif
#endif
#ifndef NPUPOOL_VERSION
#define NPUPOOL_VERSION "unknown"
#endif

#define VERSION_MARK "@(#)npupool " /* what(1)'s marker, then the name */
#define VERSION_MARK_LEN (sizeof VERSION_MARK - 1)
#define VERSION_SCAN 65536   /* bytes of a file read at a time */
#define VERSION_TEXT_MAX 128 /* longest version text read back whole */

/* Kept in every object that links this file (used), so the version can be read from the file. */
static const char version_what[] __attribute__((used)) = VERSION_MARK NPUPOOL_VERSION;

const char *version_string(void) { return version_what + VERSION_MARK_LEN; }

size_t version_of_file(const char *file, char *buf, size_t cap)
{
    char chunk[VERSION_SCAN + 1];
    off_t at = 0;
    if (cap == 0) return 0;
    buf[0] = 0;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    for (;;) {
        ssize_t got = pread(fd, chunk, VERSION_SCAN, at);
        if (got <= 0) break;
        const char *end = chunk + got;
        int last = got < VERSION_SCAN;
        chunk[got] = 0;
        for (const char *p = chunk;
             (p = memmem(p, (size_t)(end - p), VERSION_MARK, VERSION_MARK_LEN)) != NULL; p++) {
            const char *v = p + VERSION_MARK_LEN;
            size_t n = strnlen(v, (size_t)(end - v));
            if (v + n == end && !last) break; /* cut by the chunk's end: read whole next time */
            if (n == 0) continue;             /* the marker alone: this function's own needle */
            if (n >= cap) n = cap - 1;
            memcpy(buf, v, n);
            buf[n] = 0;
            close(fd);
            return n;
        }
        if (last) break;
        at += got - (ssize_t)(VERSION_MARK_LEN + VERSION_TEXT_MAX); /* overlap */
    }
    close(fd);
    return 0;
}
