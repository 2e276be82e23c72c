/* tools/commands.c — the list of subcommands (commands.h). */
#include "commands.h"

const cli_cmd_t *const commands_all[] = {
    &cmd_summary,   &cmd_leaks,  &cmd_diff,   &cmd_flame,   &cmd_map,
    &cmd_symbolize, &cmd_replay, &cmd_export, &cmd_recover, &cmd_version,
};
const int commands_count = (int)(sizeof commands_all / sizeof commands_all[0]);
