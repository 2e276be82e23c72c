/* mk/mangen.c — the generated sections of npupool(1), in roff, from the command tables
 * (tools/cli.h): each command's synopsis, what it does, its options with their defaults and its
 * closing notes are what its --help says, so the manual cannot drift from the parser.
 * Prints the COMMANDS section: per command a .SS heading, the synopsis, what it does, its
 * options as .TP entries, its notes.  mk/man.sh puts it
 * into mk/npupool.1.in (make man); tests/cases/docs_man.sh checks that docs/man/ is what it
 * makes.  Roff escapes: a backslash becomes \e, '-' becomes \- (so options copy and paste), and
 * a line that would start with '.' or '\'' starts with \& first.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

/* One line of text, escaped (no newline). */
static void roff_line(FILE *f, const char *s, size_t n)
{
    if (n && (s[0] == '.' || s[0] == '\'')) fputs("\\&", f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\')
            fputs("\\e", f);
        else if (s[i] == '-')
            fputs("\\-", f);
        else
            fputc(s[i], f);
    }
}

/* Help text as roff source lines: its lines wrap again (fill mode), except a line indented by two
 * spaces or more (an example command), which stays as it is (.nf, indented). */
static void roff(FILE *f, const char *s)
{
    while (*s) {
        size_t n = strcspn(s, "\n");
        if (n >= 2 && s[0] == ' ' && s[1] == ' ') {
            size_t lead = strspn(s, " ");
            fputs(".RS 4\n.nf\n", f);
            roff_line(f, s + lead, n - lead);
            fputs("\n.fi\n.RE\n", f);
        } else {
            roff_line(f, s, n);
            fputc('\n', f);
        }
        s += n + (s[n] == '\n');
    }
}

/* The synopsis as one line (cli_synopsis wraps it for a terminal), left-adjusted. */
static void synopsis(const cli_cmd_t *cmd, FILE *f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m == NULL) exit(1);
    cli_synopsis(cmd, 0, m);
    fclose(m);
    char *q = text;
    for (const char *p = text; *p; p++) /* runs of blanks and newlines: one space */
        if ((*p != ' ' && *p != '\n') || (q > text && q[-1] != ' ')) *q++ = *p == '\n' ? ' ' : *p;
    while (q > text && q[-1] == ' ') q--;
    *q = '\0';
    fputs(".ad l\n.B npupool ", f);
    roff_line(f, text, strlen(text));
    fputs("\n.ad b\n.PP\n", f);
    free(text);
}

static void option(const cli_opt_t *o, FILE *f)
{
    fputs(o->arg ? ".TP\n.BI \"" : ".TP\n.B \"", f);
    if (o->short_name) fprintf(f, "\\-%c, ", o->short_name);
    fputs("\\-\\-", f);
    roff_line(f, o->name, strlen(o->name));
    if (o->arg) {
        fputs(" \" \"", f);
        roff_line(f, o->arg, strlen(o->arg));
    }
    fputs("\"\n", f);
    roff(f, o->help);
    if (o->def) {
        fputs("(default ", f);
        roff_line(f, o->def, strlen(o->def));
        fputs(")\n", f);
    }
}

int main(void)
{
    static const cli_opt_t help = {"help", 'h', CLI_FLAG, NULL, NULL, 0, "this text"};
    for (int i = 0; i < commands_count; i++) {
        const cli_cmd_t *cmd = commands_all[i];
        fputs(".SS ", stdout);
        roff_line(stdout, cmd->name, strlen(cmd->name));
        fputc('\n', stdout);
        synopsis(cmd, stdout);
        roff(stdout, cmd->about);
        for (const cli_opt_t *o = cmd->opts; o->name; o++) option(o, stdout);
        option(&help, stdout);
        if (cmd->epilog) {
            fputs(".PP\n", stdout);
            roff(stdout, cmd->epilog);
        }
    }
    return 0;
}
