/* tools/commands.h — the subcommands of `npupool`.  Each cmd_NAME.c defines cmd_NAME, its one
 * description (cli.h: options, help texts, run function) and nothing else outside the file;
 * commands_all lists them in the order `npupool help` shows them.
 */
#ifndef NPUPOOL_TOOLS_COMMANDS_H
#define NPUPOOL_TOOLS_COMMANDS_H

#include "cli.h"

extern const cli_cmd_t cmd_summary;
extern const cli_cmd_t cmd_leaks;
extern const cli_cmd_t cmd_diff;
extern const cli_cmd_t cmd_flame;
extern const cli_cmd_t cmd_map;
extern const cli_cmd_t cmd_symbolize;
extern const cli_cmd_t cmd_replay;
extern const cli_cmd_t cmd_export;
extern const cli_cmd_t cmd_recover;
extern const cli_cmd_t cmd_version;

extern const cli_cmd_t *const commands_all[];
extern const int commands_count;

#endif /* NPUPOOL_TOOLS_COMMANDS_H */
