/* tests/unit/test_base_identity.c — base/buildid.h, base/version.h, base/log.h's head: what tells
 * one npupool build, and one process of a job, from another.
 *   - a build id read from the loaded object and from its file on disk agree, and equal what the
 *     linker wrote (sha1: 40 hex digits); damaged or foreign note blocks give none, never a crash;
 *   - the version is read back from a file, also across the reader's chunk boundary, and the
 *     reader's own needle (the bare marker) is not taken for a version;
 *   - a stderr line's head is "npupool[PID]: ", "rank N: " after it when RANK or LOCAL_RANK is
 *     set, and "npupool: " for the command-line tool.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "buildid.h"
#include "log.h"
#include "version.h"

static void test_build_id_of_this_program(void **state)
{
    (void)state;
    char mem[BUILDID_HEX_MAX], file[BUILDID_HEX_MAX], path[4096], exe[4096];
    size_t n = buildid_of_address((const void *)&test_build_id_of_this_program, mem, sizeof mem,
                                  path, sizeof path);
    assert_int_equal(n, 40);
    assert_int_equal(strspn(mem, "0123456789abcdef"), 40);
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(len > 0);
    exe[len] = 0;
    assert_string_equal(path, exe);
    assert_int_equal(buildid_of_file(exe, file, sizeof file), 40);
    assert_string_equal(mem, file);
    /* too small a buffer: none rather than a cut id */
    char small[20];
    assert_int_equal(buildid_of_file(exe, small, sizeof small), 0);
    assert_string_equal(small, "");
    /* no such file, not an ELF file */
    assert_int_equal(buildid_of_file("/nonexistent/npupool", file, sizeof file), 0);
    assert_int_equal(buildid_of_file("/proc/self/status", file, sizeof file), 0);
    /* an address in no loaded object */
    assert_int_equal(buildid_of_address((const void *)16, mem, sizeof mem, path, sizeof path), 0);
    assert_string_equal(path, "");
}

/* Note blocks as a linker writes them, and damaged ones. */
static void test_build_id_notes(void **state)
{
    (void)state;
    unsigned char buf[256];
    char hex[BUILDID_HEX_MAX];
    ElfW(Nhdr) other = {.n_namesz = 4, .n_descsz = 8, .n_type = NT_GNU_ABI_TAG};
    ElfW(Nhdr) id = {.n_namesz = 4, .n_descsz = 4, .n_type = NT_GNU_BUILD_ID};
    size_t at = 0;
    memcpy(buf + at, &other, sizeof other);
    memcpy(buf + at + sizeof other, "GNU", 4);
    memset(buf + at + sizeof other + 4, 0, 8);
    at += sizeof other + 4 + 8;
    memcpy(buf + at, &id, sizeof id);
    memcpy(buf + at + sizeof id, "GNU", 4);
    memcpy(buf + at + sizeof id + 4, "\xde\xad\xbe\xef", 4);
    size_t whole = at + sizeof id + 8;
    assert_int_equal(buildid_from_notes(buf, whole, hex, sizeof hex), 8);
    assert_string_equal(hex, "deadbeef");
    /* cut anywhere inside the build-id note: none */
    for (size_t cut = at; cut < whole; cut++)
        assert_int_equal(buildid_from_notes(buf, cut, hex, sizeof hex), 0);
    /* a size field that points past the block */
    ElfW(Nhdr) huge = {.n_namesz = 4, .n_descsz = 0xfffffff0u, .n_type = NT_GNU_BUILD_ID};
    memcpy(buf, &huge, sizeof huge);
    assert_int_equal(buildid_from_notes(buf, whole, hex, sizeof hex), 0);
    /* another owner's note of the same type */
    memcpy(buf + at + sizeof id, "XYZ", 4);
    assert_int_equal(buildid_from_notes(buf + at, whole - at, hex, sizeof hex), 0);
}

static void write_file(const char *path, size_t pad, const char *tail, size_t tail_len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < pad; i++) fputc('x', f);
    fwrite(tail, 1, tail_len, f);
    fclose(f);
}

static void test_version_read_back(void **state)
{
    (void)state;
    char v[128], exe[4096];
    assert_true(strlen(version_string()) > 0);
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(len > 0);
    exe[len] = 0;
    assert_int_equal(version_of_file(exe, v, sizeof v), strlen(version_string()));
    assert_string_equal(v, version_string());
    /* a marker cut by the reader's 64 KiB chunk, at every offset around the boundary; the bare
     * marker (the reader's needle in a binary) comes first and is skipped */
    char path[] = "/tmp/npupool-version-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char text[] = "_(#)npupool \0zz_(#)npupool 9.8.7-test";
    text[0] = text[15] = '@'; /* written here, so that this program's file has no such marker */
    for (size_t pad = 65536 - 60; pad < 65536 + 8; pad++) {
        write_file(path, pad, text, sizeof text);
        assert_int_equal(version_of_file(path, v, sizeof v), 10);
        assert_string_equal(v, "9.8.7-test");
    }
    write_file(path, 10, "no marker here", 14);
    assert_int_equal(version_of_file(path, v, sizeof v), 0);
    assert_int_equal(version_of_file("/nonexistent/x", v, sizeof v), 0);
    unlink(path);
}

static void test_log_head(void **state)
{
    (void)state;
    char head[LOG_HEAD_MAX], want[64];
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    log_head(head, sizeof head);
    snprintf(want, sizeof want, "npupool[%d]: ", (int)getpid());
    assert_string_equal(head, want);
    setenv("LOCAL_RANK", "5", 1);
    log_head(head, sizeof head);
    snprintf(want, sizeof want, "npupool[%d]: rank 5: ", (int)getpid());
    assert_string_equal(head, want);
    setenv("RANK", "1000000", 1); /* RANK first; the largest rank accepted */
    size_t n = log_head(head, sizeof head);
    assert_int_equal(n, strlen(head));
    snprintf(want, sizeof want, "npupool[%d]: rank 1000000: ", (int)getpid());
    assert_string_equal(head, want);
    assert_true(strlen(head) < LOG_HEAD_MAX);
    setenv("RANK", "x1", 1); /* not a rank: LOCAL_RANK */
    log_head(head, sizeof head);
    assert_non_null(strstr(head, "rank 5: "));
    char tiny[6];
    assert_int_equal(log_head(tiny, sizeof tiny), 5); /* cut, terminated */
    assert_string_equal(tiny, "npupo");
    log_set_tagged(0);
    log_head(head, sizeof head);
    assert_string_equal(head, "npupool: ");
    log_set_tagged(1);
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_id_of_this_program),
        cmocka_unit_test(test_build_id_notes),
        cmocka_unit_test(test_version_read_back),
        cmocka_unit_test(test_log_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
