/* tools/main.c — `npupool`, the command-line tool.  The commands are in commands.c, their
 * parsing and help in cli.c; exit codes in tools.h (0 ok, 1 a finding a flag asked for, 2 bad
 * usage or bad input).
 */
#include "commands.h"
#include "tools.h"

int main(int argc, char **argv)
{
    tools_json_arena();
    return cli_main(commands_all, commands_count, argc, argv);
}
