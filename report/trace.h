/* report/trace.h — the allocation trace recorder (NPUPOOL_TRACE=path).
 *
 * Owns: the trace file of one process.  The shim calls trace_alloc() after a successful device
 * allocation and trace_free() BEFORE handing the block back (so the address cannot be handed out
 * again, and recorded, before its free is recorded).  Format: docs/trace.md ("npupool-trace/1":
 * a comment header, a CSV column line, then `thread,time_ns,action,pointer,size,device` lines).
 *
 * Contract:
 *   - No ACL call and no allocation through hooked calls inside; libc only (open/write/close).
 *   - Thread-safe: one mutex guards the buffer; the time stamp is taken under it, so the file is in
 *     time order and a free of P is always after the alloc that returned P.
 *   - Buffered (64 KiB); only whole lines are ever written; written when the buffer fills and at
 *     trace_flush().  A crash loses at most the buffered lines, never leaves half a line.
 *   - Fork: prepare takes the lock, parent releases it, the child drops the parent's buffered lines
 *     (the parent writes them) and then traces into its own file when the path has %p, else stops.
 *   - When tracing is off every call costs one relaxed atomic load.
 */
#ifndef NPUPOOL_TRACE_H
#define NPUPOOL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open the trace file of `pattern` (NPUPOOL_TRACE; %p %t %r %% as base/path.h expands them, %n =
 * 1) and write the header.  Returns 1 when tracing is on, 0 when off (NULL, empty, or the file
 * cannot be opened: one error line).  Calling it again while tracing is on returns 1 and changes
 * nothing. */
int trace_open(const char *pattern);

/* size = the bytes the application requested. */
void trace_alloc(int device, uintptr_t ptr, size_t size);
void trace_free(int device, uintptr_t ptr);

/* Write the buffered lines (at exit; safe to call more than once and from any thread). */
void trace_flush(void);

/* Fork handlers (shim/fork.c runs them in its lock-order table). */
void trace_fork_prepare(void);
void trace_fork_parent(void);
void trace_fork_child(void);

#ifdef __cplusplus
}
#endif
#endif /* NPUPOOL_TRACE_H */
