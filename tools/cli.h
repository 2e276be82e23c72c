/* tools/cli.h — the command line of `npupool`: each command described once, one option parser.
 *
 * Owns: the description of a command (cli_cmd_t: name, operands, one-line purpose, what it does,
 * its options as a table), and everything printed or checked from it: the parse of its
 * arguments, `npupool CMD --help` and `npupool help CMD` (cli_help), its synopsis in the overview
 * `npupool help` (cli_overview), and the messages for bad usage.  Nothing about an option is
 * written twice, so the help cannot drift from what the parser accepts.
 *
 * An option is --name (also --name=VALUE, and any unambiguous prefix of the name, as getopt_long
 * takes it), or -x when it has a short name (also -xVALUE); "--" ends the options; options and
 * operands may come in any order; the last of a repeated option counts, except for an option
 * marked CLI_REPEAT, which keeps every value.  An operand word ending in "..." (the last one,
 * "REPORT...") stands for one or more operands.  -h/--help is every command's.  Bad usage is one line "npupool: CMD: ... (see 'npupool CMD --help')", with a "did
 * you mean" for a misspelt option or choice (base/parse.h: parse_closest), and exit 2.
 */
#ifndef NPUPOOL_TOOLS_CLI_H
#define NPUPOOL_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

enum cli_kind {
    CLI_FLAG = 0, /* no value */
    CLI_TEXT,     /* any text: .text */
    CLI_UINT,     /* a decimal integer (parse_u64): .u */
    CLI_SIZE,     /* a byte count such as 12G (parse_bytes): .u */
    CLI_FRACTION, /* a number in (0, 1] (parse_double): .d */
    CLI_CHOICE,   /* one of the words of the option's `arg`, "a|b|c": .choice = its index */
};

#define CLI_REQUIRED 1u /* the command needs it (shown without brackets in the synopsis) */
#define CLI_POSITIVE 2u /* CLI_UINT / CLI_SIZE: 0 is refused */
#define CLI_ALT 4u      /* an alternative to the option before it: not both ("[-a A | -b B]") */
#define CLI_REPEAT 8u   /* may be given several times, every value kept ("[--ignore P]...") */

typedef struct cli_opt {
    const char *name; /* long name, without "--"; NULL ends a table */
    char short_name;  /* -x, or 0 */
    enum cli_kind kind;
    const char *arg;  /* the value's name in help texts ("N", "FILE", "bytes|count"); NULL = flag */
    const char *def;  /* the default as it would be typed, or NULL; parsed like a given value */
    unsigned flags;   /* CLI_REQUIRED | CLI_POSITIVE | CLI_ALT */
    const char *help; /* what it does; "\n" breaks the line (the default is appended) */
} cli_opt_t;

#define CLI_MAX_OPTS 16       /* options of one command */
#define CLI_MAX_OPERANDS 1024 /* operands one command line may give (reports of 1024 ranks) */
#define CLI_MAX_REPEAT 64     /* values one CLI_REPEAT option keeps */

/* The value of one option after a parse. */
typedef struct cli_val {
    int given;        /* times on the command line (0: the default, or absent) */
    const char *text; /* the value as typed (or the default), NULL when there is none */
    uint64_t u;       /* CLI_UINT, CLI_SIZE */
    double d;         /* CLI_FRACTION */
    int choice;       /* CLI_CHOICE: index of the word in `arg` */
    const char *all[CLI_MAX_REPEAT]; /* CLI_REPEAT: every value as typed, in order ([0, given)) */
} cli_val_t;

typedef struct cli_args {
    cli_val_t v[CLI_MAX_OPTS];             /* by index in the command's option table */
    const char *operand[CLI_MAX_OPERANDS]; /* in command-line order */
    int noperands; /* = the words of the command's `operands` (at least, with a "WORD...") */
} cli_args_t;

typedef struct cli_cmd {
    const char *name;      /* as typed: "summary" */
    const char *operands;  /* "REPORT", "OLD NEW": each word is one required operand; a last
                              word "REPORT..." is one or more */
    const char *purpose;   /* one line for the overview */
    const char *about;     /* what it does, for its --help ("\n" breaks lines) */
    const cli_opt_t *opts; /* its options, ended by an entry with name NULL */
    const char *epilog;    /* printed after the options in --help, or NULL */
    int (*run)(const struct cli_cmd *cmd, const cli_args_t *a); /* returns the exit code */
} cli_cmd_t;

/* Parse argv[1..argc) (argv[0] is the command's name) for `cmd`.  Returns 0 with *a filled, 1
 * after printing the help (--help), or TOOLS_BAD after one usage message. */
int cli_parse(const cli_cmd_t *cmd, int argc, char **argv, cli_args_t *a);

/* "npupool: CMD: <message> (see 'npupool CMD --help')" on stderr; returns TOOLS_BAD.  For checks
 * a table cannot state (an operand's form, options that go together). */
int cli_usage_error(const cli_cmd_t *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* `npupool CMD --help`. */
void cli_help(const cli_cmd_t *cmd, FILE *f);
/* "NAME OPERANDS [OPTIONS...]" wrapped to the width of the help, continuation lines indented by
 * `indent` + the name. */
void cli_synopsis(const cli_cmd_t *cmd, int indent, FILE *f);
/* `npupool help`: every command's synopsis and purpose. */
void cli_overview(const cli_cmd_t *const *cmds, int n, FILE *f);
/* The command line of `npupool`: dispatch, `help [COMMAND]`, unknown commands. */
int cli_main(const cli_cmd_t *const *cmds, int n, int argc, char **argv);

#endif /* NPUPOOL_TOOLS_CLI_H */
