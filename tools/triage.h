/* tools/triage.h — which live stacks a leak listing shows: one report, growth since a baseline,
 * or several reports (ranks) side by side, less what suppression patterns leave out.
 * Names: types triage_*_t, functions triage_*.
 *
 * Owns: matching stacks across reports, suppression of stacks, and grouping them into sites (a
 * site = the innermost frame, the allocation call a fix starts from).  Three modes:
 *   plain   one report: every stack of the report is one row, as written (no matching);
 *   since   one report and a baseline: stacks matched by device + frames (module or build id +
 *           offset, site.h: site_stack_key), each row the growth since the baseline (new stacks
 *           and existing ones that gained bytes, or allocations with no loss of bytes);
 *   ranks   several reports: stacks matched by frames alone (each rank has its own device ids),
 *           each row the sum over the reports with the count and bytes of each report kept.
 * Suppression: a stack is left out when any of its frames matches a pattern (suppress.h), and
 * what is left out is counted per pattern.  Sites are sorted by bytes, largest first, and the
 * stacks under a site likewise; ties by key, so the order is total.
 * Cost: O(s log s) for s stacks; memory O(s * reports) in the ranks mode.
 */
#ifndef NPUPOOL_TOOLS_TRIAGE_H
#define NPUPOOL_TOOLS_TRIAGE_H

#include "report_read.h"
#include "suppress.h"

#include <stddef.h>
#include <stdint.h>

enum triage_mode { TRIAGE_PLAIN = 0, TRIAGE_SINCE = 1, TRIAGE_RANKS = 2 };

typedef struct triage_in {
    const report_t *reports;    /* the reports (the ranks), at least one */
    size_t nreports;            /* entries in reports */
    const report_t *base;       /* the baseline (since mode; one report only), or NULL */
    const suppress_list_t *sup; /* patterns, or NULL */
    int have_device;            /* 1: only stacks of device `device` */
    long device;                /* device id when have_device */
} triage_in_t;

typedef struct triage_stack {
    const report_leak_t *leak; /* the stack as written (the first report that has it) */
    char *key;                 /* its match key (malloc'd; NULL in the plain mode) */
    uint64_t count;            /* allocations the row stands for (the growth, since mode; >= 0) */
    uint64_t bytes;            /* bytes the row stands for (the growth, since mode) */
    int64_t delta_count;       /* since mode: allocations now - in the baseline */
    uint64_t now_count;        /* since mode: allocations now */
    uint64_t now_bytes;        /* since mode: bytes now */
    uint64_t base_count;       /* since mode: allocations in the baseline */
    uint64_t base_bytes;       /* since mode: bytes in the baseline */
    int in_base;               /* since mode: the baseline has this stack */
    uint64_t *rcount;          /* ranks mode: allocations per report (nreports entries) */
    uint64_t *rbytes;          /* ranks mode: bytes per report */
    int rule;                  /* the suppressing pattern's index, -1 when shown */
} triage_stack_t;

typedef struct triage_site {
    char key[160];    /* the innermost frame's key */
    uint64_t count;   /* allocations of its stacks */
    uint64_t bytes;   /* bytes of its stacks */
    size_t first;     /* its first stack in triage_t.stack (shown stacks are grouped by site) */
    size_t nstacks;   /* its stacks */
    uint64_t *rcount; /* ranks mode: allocations per report */
    uint64_t *rbytes; /* ranks mode: bytes per report */
} triage_site_t;

typedef struct triage_hits {
    uint64_t stacks; /* stacks a pattern left out (the first pattern that matches counts) */
    uint64_t count;  /* their allocations (the growth, since mode) */
    uint64_t bytes;  /* their bytes */
} triage_hits_t;

typedef struct triage {
    int mode;              /* enum triage_mode */
    size_t nreports;       /* reports read (ranks mode: the per-report arrays' length) */
    triage_stack_t *stack; /* shown stacks, grouped by site in site order */
    size_t nstacks;        /* entries in stack */
    triage_site_t *site;   /* sites, largest first */
    size_t nsites;         /* entries in site */
    uint64_t count, bytes; /* totals of the shown stacks */
    triage_hits_t hidden;  /* what suppression left out, in all */
    triage_hits_t *hits;   /* per pattern (sup->n entries), NULL without patterns */
    size_t base_stacks;    /* since mode: stacks of the baseline */
    uint64_t *stack_mem;   /* ranks mode: the stacks' per-report arrays, one block */
    uint64_t *site_mem;    /* ranks mode: the sites' per-report arrays, one block */
} triage_t;

/* Build the listing.  Returns 0, or -1 when out of memory (message printed; *t released). */
int triage_build(const triage_in_t *in, triage_t *t);
void triage_release(triage_t *t);

/* Distinct process.rank values of the reports: sorted into ranks[] (up to `cap`), count
 * returned; rank_index[i] (nreports entries, may be NULL) receives report i's index into ranks. */
size_t triage_ranks(const report_t *reports, size_t nreports, long *ranks, size_t cap,
                    size_t *rank_index);

/* Ranks (of n distinct ones, with rank_index from triage_ranks) where a per-report count array
 * is positive. */
size_t triage_present(const uint64_t *rcount, size_t nreports, const size_t *rank_index, size_t n);

/* One "note:" line on stdout per rank that more than one report has (their paths and pids; one
 * process's snapshots, or several processes): their rows are counted each.  Returns the lines. */
int triage_rank_notes(const report_t *reports, size_t nreports);

#endif /* NPUPOOL_TOOLS_TRIAGE_H */
