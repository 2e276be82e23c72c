/* report/refusal.c — refused allocations: which get an `oom` report, which are counted, and the
 * last one, which is never lost.
 *
 * Owns: the refusal policy and its state.
 *   - The first refusal of the process, and the first refusal of each (call site, device, kind),
 *     always get a post-mortem report (up to REFUSAL_KEYS distinct keys; a call site is the
 *     refused call's interned stack, or its entry point when no stack was taken).
 *   - Any other refusal gets one when at most NPUPOOL_REPORT_OOM_MAX reports were written and
 *     the last was at least REFUSAL_GAP_NS ago; otherwise it is counted as suppressed, and the
 *     next report of any kind says how many were (its "refusals" section).  NPUPOOL_REPORT_OOM_MAX
 *     = 0 turns oom reports off altogether (the refusals are still counted and listed).
 *   - The last refusal is always kept (its figures, its reason and its stack id); every report
 *     lists it, and the exit report is written whenever the last refusal got no report of its
 *     own, so the refusal a job died of is never lost.
 *   - A report that cannot be written at once because another report is being written (the
 *     refused thread never blocks on the report lock, it tries for 2 ms at most: it might be
 *     holding a lock that report is waiting for, e.g. the loader's inside a library
 *     constructor) is deferred: the reporter thread writes it.  Up to REFUSAL_DEFERRED refusals
 *     are kept in the order they came, so that two first refusals refused while one report is
 *     being written both get theirs (with one slot the second replaced the first: a job that
 *     ran out of memory and then hit fragmentation during a threshold report got one oom report,
 *     tests/cases/guest_refusals.sh); when all are taken, the newest is replaced and counted as
 *     suppressed.
 * Locking: rf.lock guards everything here.  It is a leaf: nothing is called while it is held
 * (only copies), so it may be taken under the report lock (report.c) and alone.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "report_internal.h"

#define REFUSAL_KEYS 256             /* distinct (site, device, kind) whose first is reported */
#define REFUSAL_GAP_NS 1000000000ull /* other oom reports at least this far apart */
#define REFUSAL_DEFERRED 8           /* refusals whose reports the reporter thread may owe */

typedef struct refusal_key {
    uint32_t stack_id; /* the refused call's stack, 0 = none */
    int entry;         /* its entry point (the site when there is no stack) */
    int device;        /* its device */
    char kind[16];     /* the classifier's word */
} refusal_key_t;

static struct {
    pthread_mutex_t lock;             /* guards every field below */
    refusal_key_t keys[REFUSAL_KEYS]; /* sites whose first refusal was admitted */
    size_t nkeys;                     /* entries used */
    uint64_t total;                   /* refusals seen */
    uint64_t reported;                /* oom reports written (or handed to the reporter thread) */
    uint64_t suppressed;              /* refusals that got no report of their own */
    uint64_t suppressed_since;        /* of them, since the last oom report */
    uint64_t last_report_ns;          /* clock_mono_ns() of the last oom report, 0 = none */
    refusal_copy_t last;              /* the last refusal (valid when total > 0) */
    refusal_copy_t deferred[REFUSAL_DEFERRED]; /* reports the reporter thread owes, a ring */
    unsigned deferred_head;                    /* the oldest owed: deferred[deferred_head] */
    unsigned ndeferred;                        /* owed, <= REFUSAL_DEFERRED */
} rf = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Point the copy's strings at its own buffers (after a struct copy). */
static void copy_fix(refusal_copy_t *c)
{
    c->info.kind = c->kind;
    c->info.reason = c->reason;
}

static void copy_from(refusal_copy_t *c, const report_oom_info_t *info)
{
    c->info = *info;
    snprintf(c->kind, sizeof c->kind, "%s", info->kind ? info->kind : "unknown");
    snprintf(c->reason, sizeof c->reason, "%s", info->reason ? info->reason : "");
    copy_fix(c);
    c->wall_s = clock_wall_s();
    c->info.refused_ns = clock_mono_ns(); /* the rate limit's clock and the report's lateness */
    c->reported = 0;
}

/* pre: rf.lock held.  1 when this is the first refusal of its key (and remembers it). */
static int first_of_key(const report_oom_info_t *info)
{
    refusal_key_t k = {
        .stack_id = info->stack_id, .entry = (int)info->entry, .device = info->device};
    snprintf(k.kind, sizeof k.kind, "%s", info->kind ? info->kind : "");
    for (size_t i = 0; i < rf.nkeys; i++)
        if (rf.keys[i].stack_id == k.stack_id && rf.keys[i].entry == k.entry &&
            rf.keys[i].device == k.device && !strcmp(rf.keys[i].kind, k.kind))
            return 0;
    if (rf.nkeys == REFUSAL_KEYS) return 0; /* bounded: later sites fall under the rate limit */
    rf.keys[rf.nkeys++] = k;
    return 1;
}

REPORT_HIDDEN int refusal_admit(const report_oom_info_t *info, long oom_max, refusal_copy_t *out,
                                uint64_t *suppressed_before)
{
    pthread_mutex_lock(&rf.lock);
    rf.total++;
    copy_from(&rf.last, info);
    uint64_t now = rf.last.info.refused_ns;
    int admit = 0;
    if (oom_max > 0) {
        int first = first_of_key(info);
        int room = rf.reported < (uint64_t)oom_max &&
                   (rf.last_report_ns == 0 || now - rf.last_report_ns >= REFUSAL_GAP_NS);
        admit = first || room;
    }
    if (admit) {
        rf.reported++;
        rf.last_report_ns = now;
        rf.last.reported = 1;
        *suppressed_before = rf.suppressed_since;
        rf.suppressed_since = 0;
        *out = rf.last;
        copy_fix(out);
    } else {
        rf.suppressed++;
        rf.suppressed_since++;
    }
    pthread_mutex_unlock(&rf.lock);
    return admit;
}

REPORT_HIDDEN void refusal_defer(const refusal_copy_t *c)
{
    pthread_mutex_lock(&rf.lock);
    unsigned at;
    if (rf.ndeferred == REFUSAL_DEFERRED) { /* the newest is replaced: it goes without a report */
        at = (rf.deferred_head + REFUSAL_DEFERRED - 1) % REFUSAL_DEFERRED;
        rf.suppressed++;
        rf.suppressed_since++;
    } else {
        at = (rf.deferred_head + rf.ndeferred++) % REFUSAL_DEFERRED;
    }
    rf.deferred[at] = *c;
    copy_fix(&rf.deferred[at]);
    pthread_mutex_unlock(&rf.lock);
}

REPORT_HIDDEN int refusal_take_deferred(refusal_copy_t *out)
{
    pthread_mutex_lock(&rf.lock);
    int had = rf.ndeferred > 0;
    if (had) {
        *out = rf.deferred[rf.deferred_head];
        copy_fix(out);
        rf.deferred_head = (rf.deferred_head + 1) % REFUSAL_DEFERRED;
        rf.ndeferred--;
    }
    pthread_mutex_unlock(&rf.lock);
    return had;
}

REPORT_HIDDEN void refusal_summary(report_refusals_t *out)
{
    pthread_mutex_lock(&rf.lock);
    out->total = rf.total;
    out->reported = rf.reported;
    out->suppressed = rf.suppressed;
    out->last = rf.last;
    copy_fix(&out->last);
    pthread_mutex_unlock(&rf.lock);
}

REPORT_HIDDEN int refusal_last_unreported(void)
{
    pthread_mutex_lock(&rf.lock);
    int r = rf.total > 0 && !rf.last.reported;
    pthread_mutex_unlock(&rf.lock);
    return r;
}

REPORT_HIDDEN void refusal_fork_prepare(void) { pthread_mutex_lock(&rf.lock); }
REPORT_HIDDEN void refusal_fork_parent(void) { pthread_mutex_unlock(&rf.lock); }

REPORT_HIDDEN void refusal_fork_child(void)
{
    /* The child's refusals are its own: it starts with none (and no deferred report). */
    pthread_mutex_init(&rf.lock, NULL);
    rf.nkeys = 0;
    rf.total = rf.reported = rf.suppressed = rf.suppressed_since = 0;
    rf.last_report_ns = 0;
    rf.deferred_head = rf.ndeferred = 0;
}
