/* tests/programs/signal_threads.c — reports on a signal while threads allocate.
 *
 * Usage: signal_threads THREADS REPORTS DIR
 * THREADS threads allocate, stamp, check and free device memory without pause; the main thread
 * sends itself SIGUSR2 REPORTS times and each time waits (up to 20 s) until one more *.json file
 * is in DIR (the shim's reporter thread wrote it).  Exits 0 when every report appeared and no
 * thread saw an error (an allocation refused or data changed under it).
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "check.h"

static _Atomic int stop; /* set by main, read by the workers */
static const char *dir;

typedef struct worker {
    int id;      /* thread number */
    long pairs;  /* alloc/free pairs done */
    long errors; /* refused allocations or corrupted data */
} worker_t;

__attribute__((noipa)) static void *allocate_in_thread(void *arg)
{
    worker_t *w = arg;
    if (aclrtSetDevice(0) != ACL_SUCCESS) w->errors++;
    unsigned char *keep[32] = {0};
    for (long i = 0; !stop; i++) {
        int k = (int)(i % 32);
        if (keep[k]) {
            if (keep[k][0] != (unsigned char)k || keep[k][100] != (unsigned char)w->id) w->errors++;
            if (aclrtFree(keep[k]) != ACL_SUCCESS) w->errors++;
        }
        void *p = NULL;
        if (aclrtMalloc(&p, 256 + (size_t)(i % 97) * 64, ACL_MEM_MALLOC_HUGE_FIRST) !=
            ACL_SUCCESS) {
            w->errors++;
            keep[k] = NULL;
            continue;
        }
        keep[k] = p;
        keep[k][0] = (unsigned char)k; /* the fake runtime's device memory is host memory */
        keep[k][100] = (unsigned char)w->id;
        w->pairs++;
    }
    for (int k = 0; k < 32; k++)
        if (keep[k] && aclrtFree(keep[k]) != ACL_SUCCESS) w->errors++;
    return NULL;
}

static int count_reports(void)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) n++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: signal_threads THREADS REPORTS DIR\n");
        return 2;
    }
    int nthreads = atoi(argv[1]), nreports = atoi(argv[2]);
    dir = argv[3];
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    pthread_t th[64];
    worker_t w[64];
    if (nthreads > 64) nthreads = 64;
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker_t){i, 0, 0};
        pthread_create(&th[i], NULL, allocate_in_thread, &w[i]);
    }
    int base = count_reports();
    for (int r = 1; r <= nreports; r++) {
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
        kill(getpid(), SIGUSR2);
        int waited = 0;
        while (count_reports() < base + r && waited < 2000) {
            ts.tv_nsec = 10 * 1000000;
            nanosleep(&ts, NULL);
            waited++;
        }
        CHECK(count_reports() >= base + r);
    }
    stop = 1;
    long pairs = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(w[i].errors, 0);
        pairs += w[i].pairs;
    }
    printf("%d threads did %ld alloc/free pairs during %d signal reports\n", nthreads, pairs,
           nreports);
    CHECK(pairs > 0);
    CHECK_DONE();
}
