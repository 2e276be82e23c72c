/* tests/programs/python/pyhelper.c — native code the Python test programs call through ctypes.
 *
 * An ordinary ACL library (includes only <acl/acl.h>; no Python headers: the few Python C API
 * functions one test needs are passed in as pointers).  It provides what Python alone cannot:
 *   pyhelper_thread_alloc      allocations from a C thread that has no Python thread state;
 *   pyhelper_call              a native frame between two Python frames (C calling back into
 *                              Python, which allocates), to check where Python frames are merged;
 *   pyhelper_alloc_with_error  an allocation made while a Python exception is pending, as a C
 *                              extension may (npupool must leave the error indicator alone).
 */
#include <pthread.h>
#include <stddef.h>

#include "acl/acl.h"

typedef struct job {
    size_t size; /* bytes per allocation */
    int n;       /* allocations (kept: a leak) */
    int rc;      /* first failure, 0 = none */
} job_t;

static void *thread_body(void *arg)
{
    job_t *j = arg;
    j->rc = aclrtSetDevice(0); /* a new thread has no current device */
    for (int i = 0; i < j->n && j->rc == 0; i++) {
        void *p = NULL;
        j->rc = aclrtMalloc(&p, j->size, ACL_MEM_MALLOC_HUGE_FIRST);
    }
    return NULL;
}

/* n allocations of size bytes from a new C thread, kept.  0 or the runtime's error. */
int pyhelper_thread_alloc(size_t size, int n)
{
    pthread_t t;
    job_t j = {size, n, 0};
    if (pthread_create(&t, NULL, thread_body, &j) != 0) return -1;
    pthread_join(t, NULL);
    return j.rc;
}

/* Calls cb(arg) and returns what it returns; never a tail call, so that this frame stays on the
 * stack below the callback's Python frames. */
__attribute__((noinline, noipa)) int pyhelper_call(int (*cb)(int), int arg)
{
    int r = cb(arg);
    __asm__ volatile("" ::: "memory");
    return r;
}

/* With the GIL held (called through ctypes.PyDLL): sets a Python exception, allocates and frees
 * one block, and checks the exception is still the one it set (else replaces it with one that
 * says so).  Returns 0; the caller's ctypes raises the pending exception. */
int pyhelper_alloc_with_error(void (*set_string)(void *, const char *), void *(*occurred)(void),
                              void *exc_type, size_t size)
{
    set_string(exc_type, "pending from C");
    void *before = occurred();
    void *p = NULL;
    if (aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtFree(p) != ACL_SUCCESS)
        set_string(exc_type, "the allocation failed");
    else if (occurred() != before || before == NULL)
        set_string(exc_type, "the pending exception changed during the allocation");
    return 0;
}
