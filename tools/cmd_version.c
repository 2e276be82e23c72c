/* tools/cmd_version.c — `npupool version` (also `npupool --version`): which npupool this is.
 *
 * Owns: the version report.  Prints npupool's version (base/version.h), then the path and GNU
 * build id (base/buildid.h) of this command, and of the libnpupool.so that goes with it: the
 * first found next to the command (a build directory), in ../lib or in ../lib64 (make install),
 * with the version that file carries.  Output, on standard output:
 *   npupool 0.1.0-g80610a09d040
 *   command: /usr/local/bin/npupool (build id 4f3c...)
 *   library: /usr/local/lib/libnpupool.so (version 0.1.0-g80610a09d040, build id 9a07...)
 * or "library: none found next to the command (../lib, ../lib64)".  Exit 0.
 */
#define _GNU_SOURCE
#include "buildid.h"
#include "commands.h"
#include "tools.h"
#include "version.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_opt_t version_opts[] = {{NULL}};

static const char *or_none(const char *s) { return s[0] ? s : "none"; }

/* The libnpupool.so that goes with the command at exe into out; 0 when none is there. */
static int find_library(const char *exe, char *out, size_t cap)
{
    static const char *const where[] = {"", "../lib/", "../lib64/"};
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exe);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) return 0;
    slash[1] = 0;
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        char path[PATH_MAX + 32], real[PATH_MAX];
        snprintf(path, sizeof path, "%s%slibnpupool.so", dir, where[i]);
        if (access(path, R_OK) != 0) continue;
        const char *found = realpath(path, real) ? real : path;
        size_t n = strlen(found);
        if (n >= cap) n = cap - 1;
        memcpy(out, found, n);
        out[n] = 0;
        return 1;
    }
    return 0;
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd, (void)a;
    char bid[BUILDID_HEX_MAX], exe[PATH_MAX], lib[PATH_MAX], ver[128];
    printf("npupool %s\n", version_string());
    buildid_of_address((const void *)&run, bid, sizeof bid, exe, sizeof exe);
    printf("command: %s (build id %s)\n", exe[0] ? exe : "?", or_none(bid));
    if (exe[0] && find_library(exe, lib, sizeof lib)) {
        buildid_of_file(lib, bid, sizeof bid);
        version_of_file(lib, ver, sizeof ver);
        printf("library: %s (version %s, build id %s)\n", lib, ver[0] ? ver : "unknown",
               or_none(bid));
    } else {
        printf("library: none found next to the command (../lib, ../lib64)\n");
    }
    return TOOLS_OK;
}

const cli_cmd_t cmd_version = {
    .name = "version",
    .operands = "",
    .purpose = "npupool's version and the build ids of the command and its library",
    .about = "Prints npupool's version, then the path and GNU build id of this command and of the\n"
             "libnpupool.so that goes with it (next to the command, in ../lib or ../lib64), with\n"
             "the version that library carries.  `npupool --version` is the same.",
    .opts = version_opts,
    .run = run,
};
