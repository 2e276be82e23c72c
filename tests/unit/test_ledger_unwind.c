/* tests/unit/test_ledger_unwind.c — the readability check behind libunwind's validation guard.
 *
 * libunwind asks "is this address readable?" by writing a byte from it into a pipe; npupool's
 * guard answers without a descriptor (ledger_unwind.c).  The answer must be right both ways: a
 * readable address called unreadable made aarch64's libunwind 1.6 read address 0 (every capture
 * under qemu-user, where process_vm_readv is ENOSYS, crashed), an unreadable one called readable
 * makes it fault.  Checked here with process_vm_readv available, and in children where a seccomp
 * filter makes it fail with EPERM or ENOSYS (the futex fallback) — where the kernel or emulator
 * refuses seccomp filters, those two cases say so and check the path they can.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ledger.h"
#include "ledger_internal.h"

#if defined(__x86_64__)
#define THIS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

static int failures;
#define EXPECT(cond)                                                              \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "# %s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                           \
        }                                                                         \
    } while (0)

static int vm_readv_works(void)
{
    char src = 'x', dst = 0;
    struct iovec l = {&dst, 1}, r = {&src, 1};
    return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1;
}

/* Every answer the check must get right; returns the number of wrong ones. */
static int check_answers(void)
{
    failures = 0;
    long pg = sysconf(_SC_PAGESIZE);
    int on_stack = 42;
    char *heap = malloc(100);
    EXPECT(ledger_unwind_readable(&on_stack, sizeof on_stack));
    EXPECT(heap && ledger_unwind_readable(heap + 3, 7));
    EXPECT(ledger_unwind_readable((const void *)(uintptr_t)check_answers, 1)); /* code */
    EXPECT(ledger_unwind_readable("read-only data", 8));
    EXPECT(!ledger_unwind_readable(NULL, 1));
    EXPECT(!ledger_unwind_readable((const void *)(uintptr_t)8, 1));
    EXPECT(ledger_unwind_readable(NULL, 0)); /* nothing to read */

    /* two pages: readable, then PROT_NONE; and one unmapped */
    char *two =
        mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(two != MAP_FAILED);
    if (two != MAP_FAILED) {
        EXPECT(mprotect(two + pg, (size_t)pg, PROT_NONE) == 0);
        EXPECT(ledger_unwind_readable(two, 1));
        EXPECT(ledger_unwind_readable(two + pg - 1, 1));
        EXPECT(!ledger_unwind_readable(two + pg, 1));
        EXPECT(!ledger_unwind_readable(two + pg - 2, 4)); /* runs into the PROT_NONE page */
        EXPECT(!ledger_unwind_readable(two + pg + 123, 1));
        munmap(two, 2 * (size_t)pg);
        EXPECT(!ledger_unwind_readable(two, 1)); /* unmapped now */
    }
    /* write-only pages cannot be had on x86 (write implies read): not checked */
    free(heap);
    return failures;
}

/* In a child: make process_vm_readv fail with err, then check the answers and that a stack can
 * still be walked.  Exit status: 0 all right, 1 a wrong answer, 77 no seccomp here. */
static int run_refused(int err)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
#ifdef THIS_AUDIT_ARCH
        struct sock_filter code[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_AUDIT_ARCH, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
            _exit(77);
#else
        _exit(77);
#endif
        if (vm_readv_works() || errno != err) {
            fprintf(stderr, "# the filter did not refuse process_vm_readv\n");
            _exit(1);
        }
        int wrong = check_answers();
        void *buf[16];
        int n = ledger_unwind_load() ? ledger_unwind_backtrace(buf, 16) : -1;
        if (n < 2) {
            fprintf(stderr, "# a stack of %d frames with process_vm_readv refused\n", n);
            wrong++;
        }
        _exit(wrong ? 1 : 0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_answers(void **state)
{
    (void)state;
    print_message("# process_vm_readv %s here\n", vm_readv_works() ? "works" : "fails");
    assert_int_equal(check_answers(), 0);
    void *buf[16];
    assert_true(ledger_unwind_load());
    assert_true(ledger_unwind_backtrace(buf, 16) >= 2);
}

static void test_refused_eperm(void **state)
{
    (void)state;
    int rc = run_refused(EPERM);
    if (rc == 77) skip();
    assert_int_equal(rc, 0);
}

static void test_refused_enosys(void **state)
{
    (void)state;
    int rc = run_refused(ENOSYS);
    if (rc == 77) skip();
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* the refused cases first: their children load libunwind under the filter */
        cmocka_unit_test(test_refused_eperm),
        cmocka_unit_test(test_refused_enosys),
        cmocka_unit_test(test_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
