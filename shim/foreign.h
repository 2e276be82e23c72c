/* shim/foreign.h — allocations npupool forwarded to the real runtime and must still recognise.
 *
 * Owns: the table of live fallback and pass-through allocations (address -> device, origin,
 * granted bytes), so that aclrtFree can tell "ours, forwarded" from "never seen", and reset can
 * forget a device's share.  One mutex guards the table; it is never held across a runtime call.
 */
#ifndef NPUPOOL_FOREIGN_H
#define NPUPOOL_FOREIGN_H

#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

typedef struct foreign_rec {
    int device;               /* device the allocation was made on, -1 = unknown */
    enum vocab_origin origin; /* why it bypassed the pool: VOCAB_FROM_FALLBACK or _PASSTHROUGH */
    size_t granted;           /* bytes that belong to it under the ACL padding rule */
} foreign_rec_t;

/* 0 on success, -1 when the record could not be stored (host OOM; it is then untracked). */
int foreign_add(uintptr_t addr, const foreign_rec_t *rec);
/* Remove and return the record: 1 when found, 0 otherwise. */
int foreign_take(uintptr_t addr, foreign_rec_t *out);
/* Forget every record of `device` (the runtime released them; -1 = of unknown devices).  Returns
 * how many. */
size_t foreign_drop_device(int device);

void foreign_fork_prepare(void);
void foreign_fork_parent(void);
void foreign_fork_child(void);

#endif
