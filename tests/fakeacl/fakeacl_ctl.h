/* tests/fakeacl/fakeacl_ctl.h — test control of the fake runtime (build/fakeacl/libascendcl.so).
 *
 * Owns: the `fakeacl_*` functions a test links against to read the fake's counters, inject
 * allocation failures and inspect HBM accounting.  They exist only in the fake, never in CANN's
 * libascendcl.so; a program that must also run on the real runtime looks them up with dlsym.
 *
 * Counter names (fakeacl_count, and the `name value` lines of the FAKEACL_STATS file):
 *   every entry point by its name ("aclrtMalloc", "aclrtFree", ...): calls, successful or not;
 *   device_allocs / device_frees      successful aclrtMalloc* / device-block frees
 *   bytes_charged                     HBM bytes charged by successful allocations (cumulative)
 *   alloc_failures / injected_failures  207001 refusals of HBM-charging calls / of those injected
 *   physical_allocs / physical_frees, host_allocs / host_frees, maps / unmaps
 *   map_failures                      aclrtMapMem calls refused by fault injection
 *   sync                              device synchronizations (aclrtSynchronizeDevice successes
 *                                     plus one per aclrtFreeWithDevSync that got past its checks)
 *   reset_released                    blocks + physical handles released by aclrtResetDevice
 *   charged_devN, peak_devN, live_devN, budget_devN   per device N: bytes charged now, peak
 *                                     bytes, live blocks + handles, HBM budget bytes
 * "HBM-charging calls" = the four aclrtMalloc* entry points and aclrtMallocPhysical, counted once
 * they pass their parameter and device checks.  All functions are thread-safe.
 */
#ifndef FAKEACL_CTL_H
#define FAKEACL_CTL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Value of a counter by name; UINT64_MAX (and one stderr line) for an unknown name. */
uint64_t fakeacl_count(const char *name);
/* Zero every cumulative counter; peaks restart from the current charge. */
void fakeacl_reset_counts(void);
/* The n-th HBM-charging call from now fails with 207001 (once).  n = 0 turns it off. */
void fakeacl_fail_nth_alloc(uint64_t n);
/* The n-th aclrtMallocPhysical from now fails with 207001 (once; counted as an alloc and an
 * injected failure).  n = 0 turns it off. */
void fakeacl_fail_nth_physical(uint64_t n);
/* The n-th aclrtMapMem from now that passes its checks fails with 207001 (once; counter
 * map_failures), mapping nothing.  n = 0 turns it off. */
void fakeacl_fail_nth_map(uint64_t n);
/* Every HBM-charging call whose block (padded size; physical: requested size) exceeds `bytes`
 * fails with 207001.  0 turns it off. */
void fakeacl_fail_above(size_t bytes);
/* Bytes charged to device `dev` now (blocks + physical handles); SIZE_MAX for a bad id. */
size_t fakeacl_charged(int dev);
/* HBM budget of device `dev`; SIZE_MAX for a bad id. */
size_t fakeacl_budget(int dev);
/* Change device `dev`'s budget; 0, or -1 if dev is bad, bytes is 0 or below what is charged. */
int fakeacl_set_budget(int dev, size_t bytes);
/* Live device blocks + physical handles of `dev`; UINT64_MAX for a bad id. */
uint64_t fakeacl_live(int dev);
/* Number of devices (FAKEACL_DEVICES). */
int fakeacl_device_count(void);
/* Device owning [p, p+len) inside one live device block or one mapping, else -1. */
int fakeacl_owner(const void *p, size_t len);
/* Bind `context` (from aclrtCreateContext or aclrtGetCurrentContext) to the calling thread the
 * way a library below ACL would (CANN's rtCtxSetCurrent): the same effect as
 * aclrtSetCurrentContext, but no acl* function is called, so an interposer on them does not see
 * it.  The same codes as aclrtSetCurrentContext; not counted as an entry-point call. */
int fakeacl_bind_context(void *context);
/* Write every counter as `name value` lines to `path` (%p = pid), atomically (temporary file,
 * then rename).  0, or -1 with one stderr line. */
int fakeacl_write_stats(const char *path);
/* Walk every table and check the invariants (charges add up, mappings inside their reservation
 * and handle, reference counts, table counts).  Returns the number of violations (0 = good);
 * each one is described on stderr. */
int fakeacl_check(void);

#ifdef __cplusplus
}
#endif
#endif /* FAKEACL_CTL_H */
