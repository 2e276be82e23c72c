/* tests/programs/guest.c — an ordinary ACL program that does the things programs do to the
 * libraries preloaded into them (tests/cases/guest_*.sh run it in front of npupool, and alone).
 * It knows nothing of npupool: it checks only what it can see of itself.
 *
 * Usage: guest MODE [ARGS]
 *   quiet              never calls ACL; prints its thread count, open descriptors and
 *                      SIGUSR2/SIGSEGV dispositions (the case compares them with a run without
 *                      the preload)
 *   fds close|dup2     calls ACL, then closes every descriptor above 2 (close) or dup2()s its own
 *                      pipe over 3..63 (dup2); opens its own pipe and file; allocates from new
 *                      stacks, raises SIGUSR2, sleeps for the report; checks its pipe and file
 *                      hold only its own bytes
 *   hostmem            calls ACL, starts 4 threads that wait, uses up the address space with
 *                      malloc (RLIMIT_AS), then lets the threads allocate device memory: every
 *                      call must answer (success or 207001), nothing aborts
 *   privdrop           calls ACL (npupool's threads exist), then setresgid/setresuid(65534)
 *                      and allocates again (as root only)
 *   sizemax            asks for SIZE_MAX - 31 bytes: expects 207001
 *   refusals           fills the pool (exhausted), frees every other block, then asks for a block
 *                      twice the size of the holes (fragmentation), then repeats the last refusal
 *   raise SIG          calls ACL, then raises signal SIG (e.g. 8): dies of it as without npupool
 *   storm              4 threads allocate while the main thread sends 200 SIGUSR2 to itself
 *   threadexit         threads that allocate once and exit, 2000 of them, 8 at a time
 *   exitrace           4 threads allocate without pause while the main thread calls exit()
 *   resetrace          64 threads allocate and free while the main thread resets device 0 every
 *                      20 ms and asks for a report (SIGUSR2) every 50 ms, for 2 s; allocations
 *                      race the resets, a free never does (a block a reset took is not freed),
 *                      and every free of a block no reset took must succeed
 * Exit status 0 = everything as expected; a CHECK failure prints the line and exits 1.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "check.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void acl_start(void)
{
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK_EQ(aclrtFree(p), ACL_SUCCESS);
}

/* ---- quiet --------------------------------------------------------------------------------- */

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - (strcmp(path, "/proc/self/fd") == 0); /* the directory's own descriptor */
}

static int mode_quiet(void)
{
    struct sigaction usr2, segv;
    sigaction(SIGUSR2, NULL, &usr2);
    sigaction(SIGSEGV, NULL, &segv);
    printf("threads %d fds %d usr2 %s segv %s\n", count_dir("/proc/self/task"),
           count_dir("/proc/self/fd"), usr2.sa_handler == SIG_DFL ? "default" : "handled",
           segv.sa_handler == SIG_DFL ? "default" : "handled");
    return 0;
}

/* ---- descriptors ----------------------------------------------------------------------------- */

/* Allocations from stacks the unwinder has not seen: new frames, deeper pages. */
__attribute__((noipa)) static void *alloc_deep(int depth, size_t size)
{
    volatile char pad[512];
    pad[0] = (char)depth;
    if (depth > 0) {
        void *p = alloc_deep(depth - 1, size);
        pad[1] = pad[0];
        return p;
    }
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    return p;
}

static int mode_fds(const char *how)
{
    acl_start();
    int mine[2];
    if (!strcmp(how, "close")) {
        for (int fd = 3; fd < 1024; fd++) close(fd);
        CHECK_EQ(pipe(mine), 0); /* takes the lowest numbers: libunwind's, npupool's, ... */
    } else {
        CHECK_EQ(pipe(mine), 0);
        for (int fd = 3; fd < 64; fd++)
            if (fd != mine[0] && fd != mine[1]) dup2(mine[1], fd); /* every number is ours now */
    }
    char path[64];
    snprintf(path, sizeof path, "guest-file-%d.txt", (int)getpid());
    int file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(file >= 0);
    CHECK_EQ(write(mine[1], "mine\n", 5), 5);
    CHECK_EQ(write(file, "file\n", 5), 5);
    void *kept[64];
    for (int i = 0; i < 64; i++) kept[i] = alloc_deep(i, 1000 + (size_t)i * 4096);
    raise(SIGUSR2); /* a report, written by npupool's thread while we go on */
    for (int i = 0; i < 64; i++) CHECK_EQ(aclrtFree(kept[i]), ACL_SUCCESS);
    sleep_ms(300);
    /* our pipe: exactly our bytes (read what is there, without blocking) */
    fcntl(mine[0], F_SETFL, O_NONBLOCK);
    char buf[256];
    ssize_t n = read(mine[0], buf, sizeof buf);
    CHECK_EQ(n, 5);
    CHECK(n == 5 && !memcmp(buf, "mine\n", 5));
    if (strcmp(how, "close") != 0) { /* the dup2 copies write into the same pipe: still ours */
        n = read(mine[0], buf, sizeof buf);
        CHECK(n < 0);
    }
    CHECK_EQ(lseek(file, 0, SEEK_SET), 0);
    n = read(file, buf, sizeof buf);
    CHECK_EQ(n, 5);
    CHECK(n == 5 && !memcmp(buf, "file\n", 5));
    close(file);
    unlink(path);
    CHECK_EQ(aclFinalize(), ACL_SUCCESS);
    CHECK_DONE();
}

/* ---- host memory ------------------------------------------------------------------------------ */

static pthread_barrier_t gate;
static long answered, refused, wrong;

static void *hostmem_worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);
    aclrtSetDevice(0);
    for (int i = 0; i < 200; i++) {
        void *p = NULL;
        aclError rc = aclrtMalloc(&p, 1024 + (size_t)i * 512, ACL_MEM_MALLOC_HUGE_FIRST);
        __atomic_add_fetch(&answered, 1, __ATOMIC_RELAXED);
        if (rc == ACL_ERROR_RT_MEMORY_ALLOCATION)
            __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
        else if (rc != ACL_SUCCESS)
            __atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
        else if (aclrtFree(p) != ACL_SUCCESS)
            __atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static long vm_size(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0;
    if (f) {
        if (fscanf(f, "%ld", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * sysconf(_SC_PAGESIZE);
}

static int mode_hostmem(void)
{
    acl_start();
    enum { T = 4 };
    pthread_t th[T];
    pthread_barrier_init(&gate, NULL, T + 1);
    for (int i = 0; i < T; i++) CHECK_EQ(pthread_create(&th[i], NULL, hostmem_worker, NULL), 0);
    struct rlimit rl = {(rlim_t)vm_size() + (8u << 20), RLIM_INFINITY};
    CHECK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
    void *chain = NULL; /* every byte malloc will give, kept */
    size_t chunk = 1 << 20, got = 0;
    while (chunk >= 64) {
        void **p = malloc(chunk);
        if (!p) {
            chunk /= 2;
            continue;
        }
        *p = chain;
        chain = p;
        got += chunk;
    }
    pthread_barrier_wait(&gate); /* now the threads' first ACL calls, with no host memory */
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    while (chain) {
        void *next = *(void **)chain;
        free(chain);
        chain = next;
    }
    printf("host memory used up (%zu bytes); %ld calls answered, %ld refused, %ld wrong\n", got,
           answered, refused, wrong);
    CHECK_EQ(answered, T * 200);
    CHECK_EQ(wrong, 0);
    CHECK_DONE();
}

/* ---- privileges ------------------------------------------------------------------------------- */

static int mode_privdrop(void)
{
    acl_start();
    CHECK_EQ(setresgid(65534, 65534, 65534), 0);
    CHECK_EQ(setresuid(65534, 65534, 65534), 0);
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK_EQ(aclrtFree(p), ACL_SUCCESS);
    CHECK_DONE();
}

/* ---- refusals --------------------------------------------------------------------------------- */

static int mode_sizemax(void)
{
    acl_start();
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(&p, SIZE_MAX - 31, ACL_MEM_MALLOC_HUGE_FIRST),
             ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_DONE();
}

__attribute__((noipa)) static aclError ask(void **p, size_t size)
{
    aclError rc = aclrtMalloc(p, size, ACL_MEM_MALLOC_HUGE_FIRST);
    __asm__ volatile("" ::: "memory"); /* not a tail call: ask() is the call site */
    return rc;
}

static int mode_refusals(void)
{
    acl_start();
    enum { N = 64 };
    static void *blocks[N + 1];
    const size_t block = (size_t)32 << 20;
    int n = 0;
    while (n < N && ask(&blocks[n], block) == ACL_SUCCESS) n++; /* the last ask is refused */
    CHECK(n > 4 && n < N);
    for (int i = 0; i < n; i += 2) CHECK_EQ(aclrtFree(blocks[i]), ACL_SUCCESS);
    void *p = NULL;
    for (int again = 0; again < 2; again++) /* the same site and reason twice in a row */
        CHECK_EQ(ask(&p, 2 * block), ACL_ERROR_RT_MEMORY_ALLOCATION);
    printf("REFUSED exhausted after %d blocks, then fragmentation twice\n", n);
    CHECK_DONE();
}

/* ---- signals ---------------------------------------------------------------------------------- */

static int mode_raise(int sig)
{
    acl_start();
    raise(sig);
    return 0; /* only when the signal did not kill us */
}

static int stop;

static void *churn(void *arg)
{
    (void)arg;
    aclrtSetDevice(0);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        void *p = NULL;
        if (aclrtMalloc(&p, 8192, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS) aclrtFree(p);
    }
    return NULL;
}

static int mode_storm(void)
{
    acl_start();
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, churn, NULL);
    for (int i = 0; i < 200; i++) {
        kill(getpid(), SIGUSR2);
        if (i % 20 == 0) sleep_ms(5);
    }
    sleep_ms(200);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK_DONE();
}

static void *alloc_once(void *arg)
{
    (void)arg;
    aclrtSetDevice(0);
    void *p = NULL;
    if (aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS) aclrtFree(p);
    return NULL;
}

static int mode_threadexit(void)
{
    acl_start();
    for (int round = 0; round < 250; round++) {
        pthread_t th[8];
        for (int i = 0; i < 8; i++) CHECK_EQ(pthread_create(&th[i], NULL, alloc_once, NULL), 0);
        for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    }
    CHECK_DONE();
}

static int mode_exitrace(void)
{
    acl_start();
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, churn, NULL);
    sleep_ms(50);
    exit(0); /* destructors (npupool's exit report) run while the threads still allocate */
}

/* resetrace: a thread frees its blocks only when no reset came since it began to allocate them.
 * A block a reset took is gone: freeing its address later could free another thread's block of
 * the next pool at the same address (the new pool may get the old range back), an application
 * bug that would make two threads own one block.  So allocations race the resets, frees do not. */
static pthread_rwlock_t reset_gate =
    PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP; /* writer first */
static unsigned resets;                                /* read and bumped only under the gate */
static unsigned refused_frees; /* frees of blocks no reset took that failed: must stay 0 */

static void *churn_big(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        pthread_rwlock_rdlock(&reset_gate); /* no reset under way while the epoch is read */
        unsigned epoch = resets;
        pthread_rwlock_unlock(&reset_gate);
        aclrtSetDevice(0);
        void *p[8];
        for (int i = 0; i < 8; i++) {
            seed = seed * 1103515245u + 12345u;
            p[i] = NULL;
            if (aclrtMalloc(&p[i], 4096 + (seed >> 8) % (8u << 20), ACL_MEM_MALLOC_HUGE_FIRST) !=
                ACL_SUCCESS)
                p[i] = NULL;
        }
        pthread_rwlock_rdlock(&reset_gate);
        if (resets == epoch)
            for (int i = 0; i < 8; i++)
                if (p[i] && aclrtFree(p[i]) != ACL_SUCCESS)
                    __atomic_add_fetch(&refused_frees, 1, __ATOMIC_RELAXED);
        pthread_rwlock_unlock(&reset_gate);
    }
    return NULL;
}

static int mode_resetrace(void)
{
    acl_start();
    enum { T = 64 };
    pthread_t th[T];
    for (int i = 0; i < T; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, churn_big, (void *)(uintptr_t)(i + 1)), 0);
    for (int ms = 0; ms < 2000; ms += 10) {
        if (ms % 20 == 0) {
            pthread_rwlock_wrlock(&reset_gate);
            resets++;
            aclrtResetDevice(0);
            pthread_rwlock_unlock(&reset_gate);
        }
        if (ms % 50 == 0) kill(getpid(), SIGUSR2);
        sleep_ms(10);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    CHECK_EQ(refused_frees, 0);
    CHECK_DONE();
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) return 2;
    const char *m = argv[1];
    if (!strcmp(m, "quiet")) return mode_quiet();
    if (!strcmp(m, "fds") && argc > 2) return mode_fds(argv[2]);
    if (!strcmp(m, "hostmem")) return mode_hostmem();
    if (!strcmp(m, "privdrop")) return mode_privdrop();
    if (!strcmp(m, "sizemax")) return mode_sizemax();
    if (!strcmp(m, "refusals")) return mode_refusals();
    if (!strcmp(m, "raise") && argc > 2) return mode_raise(atoi(argv[2]));
    if (!strcmp(m, "storm")) return mode_storm();
    if (!strcmp(m, "threadexit")) return mode_threadexit();
    if (!strcmp(m, "exitrace")) return mode_exitrace();
    if (!strcmp(m, "resetrace")) return mode_resetrace();
    return 2;
}
