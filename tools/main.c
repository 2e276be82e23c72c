/* tools/main.c — `npupool`, the command-line tool: dispatch and the top-level help.
 *
 * Owns: the table of subcommands.  Each subcommand lives in its own cmd_*.c, parses its own
 * options with getopt_long and returns the exit code (0 ok, 1 finding asked for by a flag,
 * 2 bad usage or bad input: tools.h).
 */
#include "tools.h"

#include <string.h>

typedef struct subcommand {
    const char *name;                  /* as typed */
    int (*run)(int argc, char **argv); /* argv[0] = name */
    const char *args;                  /* synopsis */
    const char *what;                  /* one line */
} subcommand_t;

static const subcommand_t subcommands[] = {
    {"summary", cmd_summary, "REPORT",
     "per-device pool figures, size classes, counters, top leak sites"},
    {"leaks", cmd_leaks, "REPORT [--top N] [--min-bytes B]",
     "live allocations grouped by site, full stacks"},
    {"diff", cmd_diff, "OLD NEW [--fail-on-growth B]", "what grew between two reports, per stack"},
    {"flame", cmd_flame, "REPORT [--by bytes|count]",
     "live allocations as folded stacks (flamegraph.pl)"},
    {"map", cmd_map, "REPORT -o FILE [--html] [--by class|site]", "SVG/HTML picture of each pool"},
    {"symbolize", cmd_symbolize, "REPORT [-o OUT | --in-place]",
     "redo function/file/line from module+offset"},
    {"replay", cmd_replay, "TRACE [--pool-bytes N|--ratio R] [--fallback 0|1] [--min-pool]",
     "run an allocation trace through the pool"},
};

#define NSUB (sizeof subcommands / sizeof subcommands[0])

static void help(FILE *f)
{
    fprintf(
        f,
        "usage: npupool COMMAND [ARGS]   (npupool COMMAND --help for details)\n\n"
        "Reads npupool's JSON reports (NPUPOOL_REPORT) and allocation traces (NPUPOOL_TRACE).\n\n");
    for (size_t i = 0; i < NSUB; i++) {
        char syn[96];
        snprintf(syn, sizeof syn, "%s %s", subcommands[i].name, subcommands[i].args);
        fprintf(f, "  %s\n      %s\n", syn, subcommands[i].what);
    }
    fprintf(
        f,
        "  help [COMMAND]\n      this text, or a command's help\n\n"
        "Exit status: 0 success, 1 a finding a flag asked to fail on, 2 bad usage or bad input.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        help(stderr);
        return TOOL_BAD;
    }
    const char *name = argv[1];
    tool_json_arena();
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc >= 3 && strcmp(name, "help") == 0) {
            for (size_t i = 0; i < NSUB; i++) {
                if (strcmp(argv[2], subcommands[i].name) == 0) {
                    char *hargv[] = {(char *)subcommands[i].name, (char *)"--help", NULL};
                    return subcommands[i].run(2, hargv);
                }
            }
            fprintf(stderr, "npupool: no command '%s'\n", argv[2]);
            return TOOL_BAD;
        }
        help(stdout);
        return TOOL_OK;
    }
    for (size_t i = 0; i < NSUB; i++)
        if (strcmp(name, subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "npupool: no command '%s' (see 'npupool help')\n", name);
    return TOOL_BAD;
}
