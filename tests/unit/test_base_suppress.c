/* tests/unit/test_base_suppress.c — base/suppress.h: the glob matcher against a table of cases
 * (and against libc's fnmatch on the same patterns, where fnmatch defines the answer), the file
 * format (comments, blanks, prefixes, CRLF, a last line without '\n'), every error naming its
 * line, the bounds (rules, line length, file size, binary input) and the frame rule (function,
 * module path, module basename, prefixes).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "suppress.h"

static void test_glob(void **state)
{
    (void)state;
    static const struct {
        const char *pat, *name;
        int want;
    } cases[] = {
        {"load_weights", "load_weights", 1},
        {"load_weights", "load_weights2", 0},
        {"load_weights", "xload_weights", 0},
        {"*", "", 1},
        {"*", "anything/at/all", 1},
        {"", "", 1},
        {"", "a", 0},
        {"a*", "a", 1},
        {"*a", "ba", 1},
        {"*a", "ab", 0},
        {"*KVCache*", "at_npu::KVCacheManager::grow(unsigned long)", 1},
        {"*KVCache*", "at_npu::kvcache", 0},
        {"a*b*c", "aXXbYYc", 1},
        {"a*b*c", "aXXbYYcZ", 0},
        {"a*b*c", "abcbcbc", 1},
        {"*aab", "aaaab", 1},
        {"a?c", "abc", 1},
        {"a?c", "ac", 0},
        {"[abc]x", "bx", 1},
        {"[abc]x", "dx", 0},
        {"[a-c]", "b", 1},
        {"[a-c]", "d", 0},
        {"[!a-c]", "d", 1},
        {"[^a-c]", "a", 0},
        {"[]]", "]", 1},
        {"[!]]", "a", 1},
        {"[a-]", "-", 1},
        {"\\*", "*", 1},
        {"\\*", "a", 0},
        {"lib*.so*", "libascendcl.so", 1},
        {"lib*.so*", "libascendcl.so.1.2", 1},
        {"/opt/*/libhccl.so", "/opt/ascend/lib64/libhccl.so", 1},
        {"**x**", "yyx", 1},
        {"*?", "", 0},
        {"*?", "a", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = suppress_glob(cases[i].pat, cases[i].name);
        if (got != cases[i].want)
            fail_msg("glob '%s' on '%s': %d, want %d", cases[i].pat, cases[i].name, got,
                     cases[i].want);
        /* fnmatch with no flags is the reference for every case it agrees to define ('[^' is
         * an extension both take) */
        int ref = fnmatch(cases[i].pat, cases[i].name, 0) == 0;
        if (ref != got)
            fail_msg("glob '%s' on '%s': %d, fnmatch says %d", cases[i].pat, cases[i].name, got,
                     ref);
    }
    /* malformed patterns do not crash and are taken literally */
    assert_int_equal(suppress_glob("[abc", "[abc"), 1);
    assert_int_equal(suppress_glob("ab\\", "ab\\"), 1);
}

/* Random patterns over a small alphabet agree with fnmatch: the back-tracking walk is exact. */
static void test_glob_random(void **state)
{
    (void)state;
    unsigned seed = 12345;
    const char alpha[] = "ab*?[]!-";
    for (int iter = 0; iter < 200000; iter++) {
        char pat[12], name[12];
        int np = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 10;
        int nn = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 10;
        for (int i = 0; i < np; i++)
            pat[i] = alpha[((seed = seed * 1103515245u + 12345u) >> 16) % (sizeof alpha - 1)];
        for (int i = 0; i < nn; i++)
            name[i] = "ab-]"[((seed = seed * 1103515245u + 12345u) >> 16) % 4];
        pat[np] = name[nn] = '\0';
        if (strchr(pat, '[')) continue; /* brackets: malformed ones differ by design */
        int got = suppress_glob(pat, name), ref = fnmatch(pat, name, 0) == 0;
        if (got != ref) fail_msg("glob '%s' on '%s': %d, fnmatch says %d", pat, name, got, ref);
    }
}

static void test_file_format(void **state)
{
    (void)state;
    static suppress_list_t l;
    suppress_init(&l);
    const char text[] = "# model weights and the KV cache live to the end\n"
                        "\n"
                        "   load_weights   \n"
                        "function:*KVCache*\r\n"
                        "\t# indented comment\n"
                        "module:libhccl.so\n"
                        "module: /opt/*/libge*.so\n"
                        "at_npu::native::*"; /* no final newline; C++ colons are no prefix */
    assert_int_equal(suppress_parse(&l, text, sizeof text - 1, "w.supp"), 0);
    assert_string_equal(l.err, "");
    assert_int_equal(l.n, 5);
    assert_string_equal(l.rule[0].pattern, "load_weights");
    assert_int_equal(l.rule[0].kind, SUPPRESS_ANY);
    assert_int_equal(l.rule[0].line, 3);
    assert_string_equal(l.rule[1].pattern, "*KVCache*");
    assert_int_equal(l.rule[1].kind, SUPPRESS_FUNCTION);
    assert_int_equal(l.rule[1].line, 4);
    assert_string_equal(l.rule[2].pattern, "libhccl.so");
    assert_int_equal(l.rule[2].kind, SUPPRESS_MODULE);
    assert_string_equal(l.rule[3].pattern, "/opt/*/libge*.so");
    assert_string_equal(l.rule[4].pattern, "at_npu::native::*");
    assert_int_equal(l.rule[4].kind, SUPPRESS_ANY);
    assert_int_equal(l.rule[4].line, 8);
    assert_string_equal(l.rule[4].source, "w.supp");

    /* the frame rule */
    assert_int_equal(suppress_match(&l, "load_weights", "/app/bin/trainer"), 0);
    assert_int_equal(suppress_match(&l, "main", "/x/load_weights"), 0); /* either, by basename */
    assert_int_equal(suppress_match(&l, "KVCache::grow", NULL), 1);
    assert_int_equal(suppress_match(&l, NULL, "/x/KVCache"), -1); /* function: only */
    assert_int_equal(suppress_match(&l, NULL, "/usr/lib/libhccl.so"), 2);
    assert_int_equal(suppress_match(&l, "libhccl.so", "/a/b.so"), -1); /* module: only */
    assert_int_equal(suppress_match(&l, NULL, "/opt/ascend/lib64/libgert.so"), 3);
    assert_int_equal(suppress_match(&l, "at_npu::native::malloc", NULL), 4);
    assert_int_equal(suppress_match(&l, "main", "/app/bin/trainer"), -1);
    assert_int_equal(suppress_match(&l, NULL, NULL), -1);
}

/* The message for `text`, which must fail. */
static const char *error_of(const char *text, size_t len)
{
    static suppress_list_t l;
    suppress_init(&l);
    if (suppress_parse(&l, text, len, "s.supp") == 0) fail_msg("'%s' was accepted", text);
    return l.err;
}

static void test_errors(void **state)
{
    (void)state;
#define EXPECT_ERR(text, msg)                                                              \
    do {                                                                                   \
        const char *e_ = error_of(text, sizeof(text) - 1);                                 \
        if (strstr(e_, msg) == NULL) fail_msg("'%s': got '%s', want '%s'", text, e_, msg); \
    } while (0)
    EXPECT_ERR("ok\nfoo[bar\n", "s.supp:2: bad pattern 'foo[bar': '[' without its ']'");
    EXPECT_ERR("a\nb\n\nfoo\\", "s.supp:4: bad pattern 'foo\\': '\\' at the end of the pattern");
    EXPECT_ERR("function:\n", "s.supp:1: empty pattern after its prefix");
    EXPECT_ERR("module:   \n", "s.supp:1: empty pattern after its prefix");
    EXPECT_ERR("a\n\001b\n", "s.supp:2: control byte 0x01");
    EXPECT_ERR("a\nb\0c\n", "s.supp:2: NUL byte");
    /* limits */
    static char big[SUPPRESS_LINE_MAX + 10];
    memset(big, 'x', sizeof big);
    memcpy(big, "ok\n", 3);
    const char *e = error_of(big, sizeof big);
    assert_non_null(strstr(e, "s.supp:2: line longer than 1024 bytes"));
    static char longpat[SUPPRESS_PATTERN_MAX + 2];
    memset(longpat, 'p', sizeof longpat);
    e = error_of(longpat, sizeof longpat);
    assert_non_null(strstr(e, "s.supp:1: pattern longer than 255 bytes"));
    static char many[SUPPRESS_MAX_RULES * 4 + 8];
    size_t n = 0;
    for (int i = 0; i <= SUPPRESS_MAX_RULES; i++) n += (size_t)sprintf(many + n, "p%d\n", i % 10);
    e = error_of(many, n);
    assert_non_null(strstr(e, "s.supp:257: more than 256 patterns"));
    /* a failure keeps the rules before it */
    static suppress_list_t l;
    suppress_init(&l);
    assert_int_equal(suppress_parse(&l, "a\nb\n[\n", 6, "x"), -1);
    assert_int_equal(l.n, 2);
    /* a single line from the command line names its source without a line */
    suppress_init(&l);
    assert_int_equal(suppress_add(&l, "x[", 2, "--ignore", 0), -1);
    assert_string_equal(l.err, "--ignore: bad pattern 'x[': '[' without its ']'");
}

static void test_load(void **state)
{
    (void)state;
    static suppress_list_t l;
    char path[] = "/tmp/npupool-supp-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* more than one read piece, a line split across pieces */
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 200; i++)
        fprintf(f, "# comment line number %d, padding padding padding\n", i);
    fprintf(f, "function:first_%0100d\nmodule:libx.so\n", 7);
    fclose(f);
    suppress_init(&l);
    assert_int_equal(suppress_load(&l, path), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.rule[0].line, 201);
    assert_int_equal(l.rule[1].kind, SUPPRESS_MODULE);
    unlink(path);
    /* missing file, /dev/zero, /dev/urandom: one message, at once */
    suppress_init(&l);
    assert_int_equal(suppress_load(&l, "/nonexistent.supp"), -1);
    assert_non_null(strstr(l.err, "/nonexistent.supp: cannot open"));
    suppress_init(&l);
    assert_int_equal(suppress_load(&l, "/dev/zero"), -1);
    assert_non_null(strstr(l.err, "/dev/zero:1: NUL byte"));
    suppress_init(&l);
    assert_int_equal(suppress_load(&l, "/dev/urandom"), -1);
    /* random bytes end the read at the first line that cannot be a suppressions line: most often
     * at a control or NUL byte, about once in a hundred runs at a newline first, and then the
     * line is a bad pattern (a '[' without its ']'); any of them names the file */
    print_message("# /dev/urandom: %s\n", l.err);
    assert_int_equal(strncmp(l.err, "/dev/urandom:", 13), 0);
    assert_true(strstr(l.err, "byte") != NULL || strstr(l.err, "longer") != NULL ||
                strstr(l.err, "bad pattern") != NULL || strstr(l.err, "empty pattern") != NULL ||
                strstr(l.err, "larger than") != NULL);
    /* a file of endless comments stops at the size bound */
    char path2[] = "/tmp/npupool-supp-XXXXXX";
    fd = mkstemp(path2);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    for (size_t k = 0; k <= SUPPRESS_FILE_MAX / 8; k++) fputs("# .....\n", f); /* 8 bytes */
    fclose(f);
    suppress_init(&l);
    assert_int_equal(suppress_load(&l, path2), -1);
    assert_non_null(strstr(l.err, "larger than 1048576 bytes"));
    unlink(path2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob),        cmocka_unit_test(test_glob_random),
        cmocka_unit_test(test_file_format), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
