/* base/loader.h — npupool's one way to walk the loaded objects (dl_iterate_phdr).
 *
 * Owns: loader_iterate, which every walk of npupool's goes through.  The dynamic loader publishes
 * an object's record under its own lock, which ThreadSanitizer does not see; the object's name
 * is a string ld.so allocates with malloc in the thread that calls dlopen, and TSan records that
 * allocation as a write.  A walk in another thread that reads the name was reported as a data
 * race (tsan:vmm_threads, about one run in ten: a report's first dlopen of libdw.so.1 beside the
 * Python probe's walk, ledger_py.c), though the loader's lock orders the two.  In TSan builds a
 * walk's reads and writes are therefore not checked; every other build calls dl_iterate_phdr
 * directly.  Header-only.
 */
#ifndef NPUPOOL_BASE_LOADER_H
#define NPUPOOL_BASE_LOADER_H

#include <link.h>
#include <stddef.h>

#if defined(__SANITIZE_THREAD__)
#define LOADER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOADER_TSAN 1
#endif
#endif

#ifdef LOADER_TSAN
/* ThreadSanitizer's annotations (its runtime defines them) */
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#endif

typedef int (*loader_visit_fn)(struct dl_phdr_info *info, size_t size, void *ctx);

/* dl_iterate_phdr(visit, ctx): visit's answer that stopped the walk, or 0. */
static inline int loader_iterate(loader_visit_fn visit, void *ctx)
{
#ifdef LOADER_TSAN
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    int rc = dl_iterate_phdr(visit, ctx);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return rc;
#else
    return dl_iterate_phdr(visit, ctx);
#endif
}

#endif
