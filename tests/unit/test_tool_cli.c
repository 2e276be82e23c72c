/* tests/unit/test_tool_cli.c — the command line of `npupool` (tools/cli.c) over the real command
 * tables (tools/commands.c): every option a command accepts is in its --help, in its synopsis in
 * `npupool help` and in its row of docs/tools.md; every default parses; every option is accepted
 * in each of its spellings; bad usage gets one clear line (unknown option or command with a "did
 * you mean", missing value, bad choice, alternatives given together, a required option or an
 * operand missing, one operand too many).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "cli.h"
#include "commands.h"
#include "tools.h"

/* The text `print` writes to a FILE, malloc'd. */
static char *capture(void (*print)(const void *, FILE *), const void *arg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    print(arg, f);
    fclose(f);
    return text;
}

static void print_help(const void *cmd, FILE *f) { cli_help(cmd, f); }
static void print_overview(const void *unused, FILE *f)
{
    (void)unused;
    cli_overview(commands_all, commands_count, f);
}

/* The lines of `text` from the one that starts with `start` up to (not including) the next line
 * that starts with `stop` and then not a space (or the end), malloc'd; NULL when there is no such
 * line. */
static char *section(const char *text, const char *start, const char *stop)
{
    const char *s = text;
    size_t n = strlen(start);
    while (s && strncmp(s, start, n) != 0) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (s == NULL) return NULL;
    const char *e = strchr(s, '\n');
    size_t k = strlen(stop);
    while (e && !(strncmp(e + 1, stop, k) == 0 && e[1 + k] != ' ')) e = strchr(e + 1, '\n');
    return strndup(s, e ? (size_t)(e - s) : strlen(s));
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

static void test_every_option_documented(void **state)
{
    (void)state;
    char *overview = capture(print_overview, NULL);
    char *docs = read_text("docs/tools.md"); /* tests run from the repository root */
    assert_non_null(docs);
    for (int c = 0; c < commands_count; c++) {
        const cli_cmd_t *cmd = commands_all[c];
        char *help = capture(print_help, cmd);
        char head[64], row[64];
        snprintf(head, sizeof head, "usage: npupool %s", cmd->name);
        assert_memory_equal(help, head, strlen(head));
        assert_true(help[strlen(head)] == ' ' || help[strlen(head)] == '\n');
        snprintf(head, sizeof head, "  %s", cmd->name); /* then operands, or the line's end */
        char *syn = section(overview, head, "  ");
        if (syn == NULL) fail_msg("%s: not in the overview", cmd->name);
        snprintf(row, sizeof row, "| `%s", cmd->name);
        char *doc = section(docs, row, "|");
        if (doc == NULL) fail_msg("%s: no row in docs/tools.md", cmd->name);
        assert_non_null(strstr(syn, cmd->purpose));
        assert_non_null(strstr(help, "-h, --help"));
        int n = 0;
        for (const cli_opt_t *o = cmd->opts; o->name; o++, n++) {
            char lng[40], shrt[8], both[48];
            snprintf(lng, sizeof lng, "--%s", o->name);
            snprintf(shrt, sizeof shrt, "-%c", o->short_name);
            snprintf(both, sizeof both, "-%c, --%s", o->short_name, o->name);
            const char *spelt = o->short_name ? shrt : lng; /* as synopses write it */
            if (strstr(help, o->short_name ? both : lng) == NULL)
                fail_msg("%s: %s is not in its --help", cmd->name, lng);
            if (strstr(syn, spelt) == NULL)
                fail_msg("%s: %s is not in its synopsis in `npupool help`", cmd->name, spelt);
            if (strstr(doc, lng) == NULL && strstr(doc, spelt) == NULL)
                fail_msg("%s: %s is not in its row of docs/tools.md", cmd->name, lng);
            if (o->arg && strstr(help, o->arg) == NULL)
                fail_msg("%s: %s's %s is not in its --help", cmd->name, lng, o->arg);
        }
        assert_true(n < CLI_MAX_OPTS);
        free(doc);
        free(syn);
        free(help);
    }
    free(docs);
    free(overview);
}

/* A value `o` takes. */
static const char *sample(const cli_opt_t *o, char *buf, size_t cap)
{
    switch (o->kind) {
    case CLI_TEXT: return "x";
    case CLI_UINT: return "3";
    case CLI_SIZE: return "4K";
    case CLI_FRACTION: return "0.5";
    case CLI_CHOICE: snprintf(buf, cap, "%.*s", (int)strcspn(o->arg, "|"), o->arg); return buf;
    default: return NULL;
    }
}

/* argv for `cmd` with its operands, its required options, and then `extra`. */
static int parse_with(const cli_cmd_t *cmd, cli_args_t *a, int nextra, const char **extra)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)cmd->name;
    static char ops[8][16];
    for (int k = 0; k < 8; k++) snprintf(ops[k], sizeof ops[k], "in%d.json", k);
    int k = 0;
    for (const char *p = cmd->operands; *p; p++)
        if (*p != ' ' && (p == cmd->operands || p[-1] == ' ')) argv[argc++] = ops[k++ % 8];
    for (const cli_opt_t *o = cmd->opts; o->name; o++)
        if (o->flags & CLI_REQUIRED) {
            static char req[48];
            snprintf(req, sizeof req, "--%s", o->name);
            argv[argc++] = req;
            argv[argc++] = "x";
        }
    for (int i = 0; i < nextra; i++) argv[argc++] = (char *)extra[i];
    argv[argc] = NULL;
    return cli_parse(cmd, argc, argv, a);
}

static void test_every_option_parses(void **state)
{
    (void)state;
    for (int c = 0; c < commands_count; c++) {
        const cli_cmd_t *cmd = commands_all[c];
        cli_args_t a;
        assert_int_equal(parse_with(cmd, &a, 0, NULL), 0); /* every default parses */
        int i = 0;
        for (const cli_opt_t *o = cmd->opts; o->name; o++, i++) {
            if (o->flags & CLI_REQUIRED) continue;
            char lng[48], eq[80], pre[48], sbuf[32];
            const char *v = sample(o, sbuf, sizeof sbuf);
            snprintf(lng, sizeof lng, "--%s", o->name);
            snprintf(eq, sizeof eq, "--%s=%s", o->name, v ? v : "");
            /* a prefix as long as the name but one letter, when it is unambiguous */
            snprintf(pre, sizeof pre, "--%.*s", (int)strlen(o->name) - 1, o->name);
            const char *forms[3][2] = {{lng, v}, {v ? eq : lng, NULL}, {pre, v}};
            for (int f = 0; f < 3; f++) {
                int ambiguous = 0;
                for (const cli_opt_t *p = cmd->opts; p->name; p++)
                    ambiguous += strncmp(p->name, pre + 2, strlen(pre + 2)) == 0;
                if (f == 2 && ambiguous > 1) continue;
                const char *extra[2] = {forms[f][0], forms[f][1]};
                if (parse_with(cmd, &a, forms[f][1] ? 2 : 1, extra) != 0)
                    fail_msg("%s %s %s refused", cmd->name, extra[0], extra[1] ? extra[1] : "");
                assert_int_equal(a.v[i].given, 1);
            }
        }
    }
}

/* Run cli_main on argv in a child process, as `npupool` runs (one command a process: the message
 * sink's rate limit starts afresh); return its exit code, *err = what it wrote to stderr
 * (static). */
static int run_main(const char **argv, int argc, const char **err)
{
    static char buf[4096];
    char path[] = "/tmp/npupool-cli-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, 2);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        int rc = cli_main(commands_all, commands_count, argc, (char **)argv);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    *err = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define EXPECT_USAGE(msg, ...)                                                                \
    do {                                                                                      \
        const char *argv_[] = {"npupool", __VA_ARGS__, NULL};                                 \
        const char *err_;                                                                     \
        int rc_ = run_main(argv_, (int)(sizeof argv_ / sizeof argv_[0]) - 1, &err_);          \
        if (rc_ != TOOLS_BAD || strstr(err_, msg) == NULL || strchr(err_, '\n') == NULL ||    \
            strchr(err_, '\n')[1] != '\0' || strncmp(err_, "npupool: ", 9) != 0)              \
            fail_msg("expected exit 2 and one line with \"%s\"; got %d: %s", msg, rc_, err_); \
    } while (0)

static void test_bad_usage(void **state)
{
    (void)state;
    EXPECT_USAGE("no command 'sumary'; did you mean 'summary'?", "sumary", "r.json");
    EXPECT_USAGE("no command 'frobnicate' (see 'npupool help')", "frobnicate");
    EXPECT_USAGE("summary: unknown option '--tpo'; did you mean '--top'?", "summary", "--tpo", "3",
                 "r.json");
    EXPECT_USAGE("leaks: unknown option '--bogus' (see 'npupool leaks --help')", "leaks", "--bogus",
                 "r.json");
    EXPECT_USAGE("option '--fa' is ambiguous", "replay", "t", "--fa");
    EXPECT_USAGE("option '--pool-bytes' needs a value", "replay", "t", "--pool-bytes");
    EXPECT_USAGE("--by: 'byte' is not bytes or count; did you mean 'bytes'?", "flame", "--by=byte",
                 "r.json");
    EXPECT_USAGE("--rounding: 'x' is not acl, align32 or none", "replay", "t", "--rounding", "x");
    EXPECT_USAGE("--top: '0' is not a positive number", "summary", "r.json", "--top", "0");
    EXPECT_USAGE("--ratio: '1.5' is not a number in (0, 1]", "replay", "t", "--ratio", "1.5");
    EXPECT_USAGE("give --pool-bytes or --ratio, not both", "replay", "t", "--ratio", "0.5",
                 "--pool-bytes", "1G");
    EXPECT_USAGE("give -o or --in-place, not both", "symbolize", "r", "-o", "x", "--in-place");
    EXPECT_USAGE("missing -o FILE", "map", "r.json");
    EXPECT_USAGE("missing NEW", "diff", "old.json");
    EXPECT_USAGE("unexpected argument 'b.json'", "flame", "a.json", "b.json");
    EXPECT_USAGE("leaks: missing REPORT", "leaks", "--ignore", "x");
    EXPECT_USAGE("leaks: --ignore: bad pattern 'a[': '[' without its ']'", "leaks", "r.json",
                 "--ignore", "a[");
    EXPECT_USAGE("leaks: --ignore: '# x' is not a pattern", "leaks", "r.json", "--ignore", "# x");
    EXPECT_USAGE("leaks: --since compares one REPORT with its baseline, not 2", "leaks", "a.json",
                 "b.json", "--since", "c.json");
    EXPECT_USAGE("export: give --memory-viz FILE or --perfetto FILE", "export", "t.trace");
    EXPECT_USAGE("option '--stacks' takes no value", "diff", "a", "b", "--stacks=1");
    /* "--" ends the options; "-" is an operand (stdin); -oVALUE and --name=VALUE */
    cli_args_t a;
    char *argv1[] = {"summary", "--", "--top", NULL};
    assert_int_equal(cli_parse(&cmd_summary, 3, argv1, &a), 0);
    assert_string_equal(a.operand[0], "--top");
    char *argv2[] = {"map", "-", "-oout.svg", "--by=site", NULL};
    assert_int_equal(cli_parse(&cmd_map, 4, argv2, &a), 0);
    assert_string_equal(a.operand[0], "-");
    assert_string_equal(a.v[0].text, "out.svg");
    assert_int_equal(a.v[2].choice, 1);
    /* REPORT...: one or more operands; a CLI_REPEAT option keeps every value in order */
    char *argv3[] = {"leaks",   "r0.json", "--ignore", "a*",    "r1.json", "--ignore=function:b",
                     "r2.json", "--top",   "1",        "--top", "2",       NULL};
    assert_int_equal(cli_parse(&cmd_leaks, 11, argv3, &a), 0);
    assert_int_equal(a.noperands, 3);
    assert_string_equal(a.operand[2], "r2.json");
    int ignore = -1, top = -1;
    for (int i = 0; cmd_leaks.opts[i].name; i++) {
        if (strcmp(cmd_leaks.opts[i].name, "ignore") == 0) ignore = i;
        if (strcmp(cmd_leaks.opts[i].name, "top") == 0) top = i;
    }
    assert_true(ignore >= 0 && top >= 0);
    assert_int_equal(a.v[ignore].given, 2);
    assert_string_equal(a.v[ignore].all[0], "a*");
    assert_string_equal(a.v[ignore].all[1], "function:b");
    assert_int_equal(a.v[top].u, 2); /* the last of a plain option counts */
    static char *many[2 + 2 * (CLI_MAX_REPEAT + 1)];
    int n = 0;
    many[n++] = "leaks";
    many[n++] = "r.json";
    for (int i = 0; i <= CLI_MAX_REPEAT; i++) many[n++] = "--ignore", many[n++] = "p";
    assert_int_equal(cli_parse(&cmd_leaks, n, many, &a), TOOLS_BAD);
    /* help and synopsis show both */
    char *help = capture(print_help, &cmd_leaks);
    assert_non_null(strstr(help, "usage: npupool leaks REPORT... "));
    assert_non_null(strstr(help, "[--ignore PATTERN]..."));
    assert_non_null(strstr(help, "(may be given more than once)"));
    free(help);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_option_documented),
        cmocka_unit_test(test_every_option_parses),
        cmocka_unit_test(test_bad_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
