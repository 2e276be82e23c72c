/* base/rank.h — the rank of this process in a distributed job.
 *
 * Owns: where a rank comes from: RANK, else LOCAL_RANK (torchrun, mpirun wrappers, Ascend's
 * launchers set one of them), a decimal integer 0..1,000,000.  Anything else is "unknown" (-1).
 * Reads the environment only (getenv): async-signal-safe in practice, never allocates.
 */
#ifndef NPUPOOL_BASE_RANK_H
#define NPUPOOL_BASE_RANK_H

int rank_get(void); /* the rank, or -1 when unknown */

#endif
