/* base/version.h — npupool's version, one text for the preload library, its reports and the
 * command.
 *
 * Owns: the version text, and reading it back from a built file.  mk/version.sh makes it at
 * build time: in a git checkout `git describe --tags` (a tag, or VERSION + "-g" + the commit,
 * "-dirty" with local changes), else the VERSION file; a build without the generated header (the
 * fuzzers) says "unknown".  Every object that links version.o carries it behind a what(1) marker
 * ("@(#)npupool 0.1.0"), so `strings`, `what` and version_of_file read it from libnpupool.so.
 * Which build of that version it is, is the object's GNU build id (base/buildid.h).
 */
#ifndef NPUPOOL_BASE_VERSION_H
#define NPUPOOL_BASE_VERSION_H

#include <stddef.h>

const char *version_string(void); /* never NULL */
/* The version an npupool file carries (its first marker) into buf; its length, 0 when the file
 * cannot be read or carries none. */
size_t version_of_file(const char *file, char *buf, size_t cap);

#endif
