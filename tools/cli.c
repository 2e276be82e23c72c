/* tools/cli.c — parsing and help of the command line from the command tables (cli.h).
 *
 * The parser walks argv once, left to right: an option is looked up in the table (exact name,
 * else the one name it is a prefix of), its value parsed by its kind into cli_args_t.v[index];
 * operands are collected in order.  After the walk: required options, alternatives given
 * together, the operand count.  Help texts are laid out here only: the option column is as wide
 * as the widest "-x, --name ARG" (up to HELP_LEFT_MAX), lines are at most WIDTH columns.
 */
#include "cli.h"

#include "fmt.h"
#include "input.h"
#include "log.h"
#include "parse.h"
#include "tools.h"

#include <stdarg.h>
#include <string.h>

#define WIDTH 100        /* columns of help texts */
#define HELP_LEFT_MAX 24 /* widest option column; a longer option puts its help on the next line */
#define MAX_CHOICES 8    /* words of a CLI_CHOICE */

static int count_opts(const cli_cmd_t *cmd)
{
    int n = 0;
    while (cmd->opts && cmd->opts[n].name) n++;
    return n;
}

static int count_words(const char *s)
{
    int n = 0;
    for (const char *p = s; p && *p;) {
        while (*p == ' ') p++;
        if (*p) n++;
        while (*p && *p != ' ') p++;
    }
    return n;
}

/* Word k (0-based) of s into buf. */
static const char *word(const char *s, int k, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (const char *p = s; *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        if (n && k-- == 0) {
            snprintf(buf, cap, "%.*s", (int)n, p);
            break;
        }
        p += n;
    }
    return buf;
}

/* 1 when the last operand word ends in "...": one or more operands. */
static int variadic(const cli_cmd_t *cmd)
{
    size_t n = cmd->operands ? strlen(cmd->operands) : 0;
    return n >= 3 && strcmp(cmd->operands + n - 3, "...") == 0;
}

/* An option as people type it: "-o" when it has a short name, else "--name". */
static const char *spelling(const cli_opt_t *o, char *buf, size_t cap)
{
    if (o->short_name)
        snprintf(buf, cap, "-%c", o->short_name);
    else
        snprintf(buf, cap, "--%s", o->name);
    return buf;
}

/* The words of a CLI_CHOICE's arg ("a|b|c"); returns their number. */
static int choices(const cli_opt_t *o, char words[][24])
{
    int n = 0;
    for (const char *p = o->arg; p && *p && n < MAX_CHOICES; n++) {
        size_t k = strcspn(p, "|");
        snprintf(words[n], 24, "%.*s", (int)k, p);
        p += k + (p[k] == '|');
    }
    return n;
}

int cli_usage_error(const cli_cmd_t *cmd, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tools_err("%s: %s (see 'npupool %s --help')", cmd->name, msg, cmd->name);
    return TOOLS_BAD;
}

/* Parse `text` as the value of option o into v.  0, or TOOLS_BAD after a message. */
static int set_value(const cli_cmd_t *cmd, const cli_opt_t *o, cli_val_t *v, const char *text)
{
    v->text = text;
    switch (o->kind) {
    case CLI_UINT:
        if (parse_u64(text, &v->u) != 0 || ((o->flags & CLI_POSITIVE) && v->u == 0))
            return cli_usage_error(cmd, "--%s: '%s' is not a %snumber", o->name, text,
                                   (o->flags & CLI_POSITIVE) ? "positive " : "");
        return 0;
    case CLI_SIZE:
        if (parse_bytes(text, &v->u) != 0 || ((o->flags & CLI_POSITIVE) && v->u == 0))
            return cli_usage_error(cmd, "--%s: '%s' is not a size", o->name, text);
        return 0;
    case CLI_FRACTION:
        if (parse_double(text, &v->d) != 0 || !(v->d > 0.0 && v->d <= 1.0))
            return cli_usage_error(cmd, "--%s: '%s' is not a number in (0, 1]", o->name, text);
        return 0;
    case CLI_CHOICE: {
        char w[MAX_CHOICES][24];
        const char *cand[MAX_CHOICES];
        int n = choices(o, w);
        for (int i = 0; i < n; i++) {
            cand[i] = w[i];
            if (strcmp(text, w[i]) == 0) {
                v->choice = i;
                return 0;
            }
        }
        char list[200] = "";
        for (int i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     i == 0       ? ""
                     : i == n - 1 ? " or "
                                  : ", ",
                     w[i]);
        const char *near = parse_closest(text, cand, (size_t)n);
        char hint[64] = "";
        if (near) snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
        return cli_usage_error(cmd, "--%s: '%s' is not %s%s", o->name, text, list, hint);
    }
    default: return 0;
    }
}

/* The option named by name[0..n) (a long name or an unambiguous prefix of one), or NULL. */
static const cli_opt_t *find_long(const cli_cmd_t *cmd, const char *name, size_t n, int *ambiguous)
{
    const cli_opt_t *hit = NULL;
    int hits = 0;
    *ambiguous = 0;
    for (const cli_opt_t *o = cmd->opts; o && o->name; o++) {
        if (strncmp(o->name, name, n) != 0) continue;
        if (o->name[n] == '\0') return o;
        hit = o;
        hits++;
    }
    *ambiguous = hits > 1;
    return hits == 1 ? hit : NULL;
}

static int unknown_option(const cli_cmd_t *cmd, const char *typed, size_t n, int ambiguous)
{
    char cand_buf[CLI_MAX_OPTS + 1][40];
    const char *cand[CLI_MAX_OPTS + 1];
    int k = 0;
    for (const cli_opt_t *o = cmd->opts; o && o->name && k < CLI_MAX_OPTS; o++, k++) {
        snprintf(cand_buf[k], sizeof cand_buf[k], "--%s", o->name);
        cand[k] = cand_buf[k];
    }
    cand[k++] = "--help";
    char t[64];
    snprintf(t, sizeof t, "%.*s", (int)(n < 60 ? n : 60), typed);
    if (ambiguous) return cli_usage_error(cmd, "option '%s' is ambiguous", t);
    const char *near = parse_closest(t, cand, (size_t)k);
    if (near) return cli_usage_error(cmd, "unknown option '%s'; did you mean '%s'?", t, near);
    return cli_usage_error(cmd, "unknown option '%s'", t);
}

int cli_parse(const cli_cmd_t *cmd, int argc, char **argv, cli_args_t *a)
{
    const int nopt = count_opts(cmd);
    memset(a, 0, sizeof *a);
    for (int i = 0; i < nopt; i++) {
        const cli_opt_t *o = &cmd->opts[i];
        if (o->def && set_value(cmd, o, &a->v[i], o->def) != 0) return TOOLS_BAD;
    }
    int operands_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        if (operands_only || w[0] != '-' || w[1] == '\0') { /* "-" is stdin: an operand */
            if (a->noperands == CLI_MAX_OPERANDS) return cli_usage_error(cmd, "too many arguments");
            a->operand[a->noperands++] = w;
            continue;
        }
        if (strcmp(w, "--") == 0) {
            operands_only = 1;
            continue;
        }
        const cli_opt_t *o = NULL;
        const char *val = NULL;
        if (w[1] == '-') {
            const char *name = w + 2, *eq = strchr(name, '=');
            size_t n = eq ? (size_t)(eq - name) : strlen(name);
            int ambiguous;
            if (n == 4 && strncmp(name, "help", 4) == 0) goto help;
            o = find_long(cmd, name, n, &ambiguous);
            if (o == NULL) return unknown_option(cmd, w, (size_t)(2 + n), ambiguous);
            if (eq) val = eq + 1;
        } else {
            if (w[1] == 'h' && w[2] == '\0') goto help;
            for (const cli_opt_t *p = cmd->opts; p && p->name && !o; p++)
                if (p->short_name == w[1]) o = p;
            if (o == NULL) return unknown_option(cmd, w, 2, 0);
            if (w[2]) val = w + 2;
        }
        cli_val_t *v = &a->v[o - cmd->opts];
        if (o->kind == CLI_FLAG) {
            if (val) return cli_usage_error(cmd, "option '--%s' takes no value", o->name);
            v->given++;
            continue;
        }
        if (val == NULL) {
            if (i + 1 >= argc) return cli_usage_error(cmd, "option '%s' needs a value", w);
            val = argv[++i];
        }
        if (set_value(cmd, o, v, val) != 0) return TOOLS_BAD;
        if (o->flags & CLI_REPEAT) {
            if (v->given == CLI_MAX_REPEAT)
                return cli_usage_error(cmd, "more than %d --%s", CLI_MAX_REPEAT, o->name);
            v->all[v->given] = val;
        }
        v->given++;
    }
    for (int i = 0; i < nopt; i++) {
        const cli_opt_t *o = &cmd->opts[i];
        char s1[40], s2[40];
        if ((o->flags & CLI_REQUIRED) && !a->v[i].given && !o->def)
            return cli_usage_error(cmd, "missing %s%s%s", spelling(o, s1, sizeof s1),
                                   o->arg ? " " : "", o->arg ? o->arg : "");
        if ((o->flags & CLI_ALT) && i > 0 && a->v[i].given && a->v[i - 1].given)
            return cli_usage_error(cmd, "give %s or %s, not both",
                                   spelling(&cmd->opts[i - 1], s1, sizeof s1),
                                   spelling(o, s2, sizeof s2));
    }
    int want = count_words(cmd->operands);
    if (a->noperands < want) {
        char wd[40];
        word(cmd->operands, a->noperands, wd, sizeof wd);
        wd[strcspn(wd, ".")] = '\0'; /* "REPORT..." -> "REPORT" */
        return cli_usage_error(cmd, "missing %s", wd);
    }
    if (a->noperands > want && !variadic(cmd))
        return cli_usage_error(cmd, "unexpected argument '%.60s'", a->operand[want]);
    return 0;
help:
    cli_help(cmd, stdout);
    return 1;
}

/* ---- help texts ----------------------------------------------------------------------------- */

/* Print `item` at column *col of a line that wraps at WIDTH to column `cont` (where an item needs
 * no space before it). */
static void put_item(FILE *f, const char *item, int *col, int cont)
{
    int n = (int)strlen(item);
    if (*col != cont && *col + 1 + n > WIDTH) {
        fprintf(f, "\n%*s", cont, "");
        *col = cont;
    }
    if (*col != cont) {
        fputc(' ', f);
        (*col)++;
    }
    fputs(item, f);
    *col += n;
}

void cli_synopsis(const cli_cmd_t *cmd, int indent, FILE *f)
{
    int col = indent + (int)strlen(cmd->name);
    const int cont = col + 1;
    fputs(cmd->name, f);
    char item[160];
    for (int k = 0, n = count_words(cmd->operands); k < n; k++)
        put_item(f, word(cmd->operands, k, item, sizeof item), &col, cont);
    const int nopt = count_opts(cmd);
    for (int i = 0; i < nopt; i++) {
        size_t len = 0;
        int required = (cmd->opts[i].flags & CLI_REQUIRED) != 0;
        if (!required) item[len++] = '[';
        for (int j = i;; j++) { /* the option, and its alternatives after it */
            const cli_opt_t *o = &cmd->opts[j];
            char sp[40];
            len += (size_t)snprintf(item + len, sizeof item - len, "%s%s%s%s", j > i ? " | " : "",
                                    spelling(o, sp, sizeof sp), o->arg ? " " : "",
                                    o->arg ? o->arg : "");
            if (j + 1 >= nopt || !(cmd->opts[j + 1].flags & CLI_ALT)) {
                i = j;
                break;
            }
        }
        if (!required) len += (size_t)snprintf(item + len, sizeof item - len, "]");
        if (cmd->opts[i].flags & CLI_REPEAT) snprintf(item + len, sizeof item - len, "...");
        put_item(f, item, &col, cont);
    }
    fputc('\n', f);
}

/* "  -o, --output FILE" */
static int option_left(const cli_opt_t *o, char *buf, size_t cap)
{
    char sh[8] = "";
    if (o->short_name) snprintf(sh, sizeof sh, "-%c, ", o->short_name);
    return snprintf(buf, cap, "  %s--%s%s%s", sh, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

static void option_line(FILE *f, const char *left, int leftw, int col, const char *help,
                        const char *def, int repeat)
{
    fputs(left, f);
    if (leftw + 2 > col)
        fprintf(f, "\n%*s", col, "");
    else
        fprintf(f, "%*s", col - leftw, "");
    for (const char *p = help; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(f, "%.*s", (int)n, p);
        p += n;
        if (*p == '\n') {
            p++;
            fprintf(f, "\n%*s", col, "");
        }
    }
    if (def) fprintf(f, " (default %s)", def);
    if (repeat) fputs(" (may be given more than once)", f);
    fputc('\n', f);
}

void cli_help(const cli_cmd_t *cmd, FILE *f)
{
    fputs("usage: npupool ", f);
    cli_synopsis(cmd, (int)strlen("usage: npupool "), f);
    fprintf(f, "\n%s\n\n", cmd->about);
    static const cli_opt_t help = {"help", 'h', CLI_FLAG, NULL, NULL, 0, "this text"};
    const int nopt = count_opts(cmd);
    char left[80];
    int col = 0;
    for (int i = 0; i <= nopt; i++) {
        int w = option_left(i < nopt ? &cmd->opts[i] : &help, left, sizeof left);
        if (w <= HELP_LEFT_MAX && w + 2 > col) col = w + 2;
    }
    for (int i = 0; i <= nopt; i++) {
        const cli_opt_t *o = i < nopt ? &cmd->opts[i] : &help;
        int w = option_left(o, left, sizeof left);
        option_line(f, left, w, col, o->help, o->def, (o->flags & CLI_REPEAT) != 0);
    }
    if (cmd->epilog) fprintf(f, "\n%s\n", cmd->epilog);
}

void cli_overview(const cli_cmd_t *const *cmds, int n, FILE *f)
{
    char lim[FMT_BYTES_LEN];
    fputs(
        "usage: npupool COMMAND [ARGS]   (npupool COMMAND --help for details)\n\n"
        "Reads npupool's JSON reports (NPUPOOL_REPORT) and allocation traces (NPUPOOL_TRACE).\n\n",
        f);
    for (int i = 0; i < n; i++) {
        fputs("  ", f);
        cli_synopsis(cmds[i], 2, f);
        fprintf(f, "      %s\n", cmds[i]->purpose);
    }
    fprintf(f,
            "  help [COMMAND]\n      this text, or a command's help\n\n"
            "Inputs larger than %s (%s by default) are refused.\n"
            "Exit status: 0 success, 1 a finding a flag asked to fail on, 2 bad usage or bad "
            "input.\n",
            INPUT_MAX_ENV, fmt_bytes(lim, INPUT_MAX_DEFAULT));
}

static const cli_cmd_t *find_cmd(const cli_cmd_t *const *cmds, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(cmds[i]->name, name) == 0) return cmds[i];
    return NULL;
}

static int no_command(const cli_cmd_t *const *cmds, int n, const char *name)
{
    const char *cand[64];
    int k = 0;
    for (int i = 0; i < n && k < 63; i++) cand[k++] = cmds[i]->name;
    cand[k++] = "help";
    const char *near = parse_closest(name, cand, (size_t)k);
    char hint[64] = "";
    if (near) snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
    tools_err("no command '%.60s'%s (see 'npupool help')", name, hint);
    return TOOLS_BAD;
}

int cli_main(const cli_cmd_t *const *cmds, int n, int argc, char **argv)
{
    log_set_tagged(0); /* one process on its own terminal: "npupool: " */
    if (argc < 2) {
        cli_overview(cmds, n, stderr);
        return TOOLS_BAD;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0) name = "version";
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc >= 3 && strcmp(name, "help") == 0) {
            const cli_cmd_t *c = find_cmd(cmds, n, argv[2]);
            if (c == NULL) return no_command(cmds, n, argv[2]);
            cli_help(c, stdout);
            return TOOLS_OK;
        }
        cli_overview(cmds, n, stdout);
        return TOOLS_OK;
    }
    const cli_cmd_t *c = find_cmd(cmds, n, name);
    if (c == NULL) return no_command(cmds, n, name);
    cli_args_t a;
    int rc = cli_parse(c, argc - 1, argv + 1, &a);
    if (rc == 1) return TOOLS_OK;
    if (rc != 0) return rc;
    return c->run(c, &a);
}
