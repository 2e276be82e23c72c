/* bench/peers/ptrace.c — the traces of bench_peers' fragmentation tables (ptrace.h). */
#include "ptrace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_read.h"

void ptrace_release(ptrace_t *t)
{
    free(t->size);
    free(t->ev);
    memset(t, 0, sizeof *t);
}

static int make_room(ptrace_t *t, const char *name, size_t nallocs, size_t nev)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->size = malloc((nallocs ? nallocs : 1) * sizeof *t->size);
    t->ev = malloc((nev ? nev : 1) * sizeof *t->ev);
    if (!t->size || !t->ev) {
        ptrace_release(t);
        return -1;
    }
    t->nallocs = nallocs;
    return 0;
}

static void note_peak(ptrace_t *t)
{
    size_t live = 0;
    t->peak_live = 0;
    for (size_t e = 0; e < t->nev; e++) {
        if (t->ev[e].free) {
            live -= t->size[t->ev[e].id];
        } else {
            live += t->size[t->ev[e].id];
            if (live > t->peak_live) t->peak_live = live;
        }
    }
}

int ptrace_tensor(ptrace_t *t, size_t n, uint64_t seed)
{
    static const size_t batch[] = {1, 2, 4, 8, 16, 32};
    static const size_t seq[] = {128, 256, 512, 1024, 2048};
    /* dies[i]: the step before whose allocation tensor i is freed (>= n: never); first[s]..
     * first[s+1]: the frees of step s in order[]; fill: where the next one goes. */
    size_t *dies = malloc(n * sizeof *dies), *first = calloc(n + 1, sizeof *first);
    size_t *fill = malloc(n * sizeof *fill);
    uint32_t *order = malloc(n * sizeof *order);
    int rc = dies && first && fill && order ? make_room(t, "tensor", n, 2 * n) : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t elems = batch[ptrace_rand(&seed) % 6] * seq[ptrace_rand(&seed) % 5] * 4096;
        t->size[i] = ((elems * 4 + 31) & ~(size_t)31) + 32;
        size_t life = ptrace_rand(&seed) % 10 == 0 ? ptrace_log_uniform(&seed, 100, 2000)
                                                   : ptrace_log_uniform(&seed, 1, 32);
        dies[i] = i + life;
        if (dies[i] < n) first[dies[i] + 1]++;
    }
    if (rc == 0) {
        /* Counting sort of the frees by step, then a shuffle inside each step. */
        for (size_t s = 0; s < n; s++) first[s + 1] += first[s];
        memcpy(fill, first, n * sizeof *fill);
        for (size_t i = 0; i < n; i++)
            if (dies[i] < n) order[fill[dies[i]]++] = (uint32_t)i;
        for (size_t s = 0; s < n; s++) {
            uint32_t *v = &order[first[s]];
            for (size_t k = first[s + 1] - first[s]; k > 1; k--) {
                size_t j = ptrace_rand(&seed) % k;
                uint32_t x = v[k - 1];
                v[k - 1] = v[j];
                v[j] = x;
            }
            for (size_t k = first[s]; k < first[s + 1]; k++)
                t->ev[t->nev++] = (ptrace_event_t){order[k], 1};
            t->ev[t->nev++] = (ptrace_event_t){(uint32_t)s, 0};
        }
        note_peak(t);
    }
    free(dies);
    free(first);
    free(fill);
    free(order);
    return rc;
}

int ptrace_mixed(ptrace_t *t, size_t live, size_t pairs, uint64_t seed)
{
    uint32_t *slot = malloc((live ? live : 1) * sizeof *slot);
    if (!slot || make_room(t, "mixed", live + pairs, live + 2 * pairs) != 0) {
        free(slot);
        return -1;
    }
    for (size_t i = 0; i < live + pairs; i++)
        t->size[i] = ptrace_log_uniform(&seed, 512, (size_t)8 << 20);
    for (size_t i = 0; i < live; i++) {
        slot[i] = (uint32_t)i;
        t->ev[t->nev++] = (ptrace_event_t){(uint32_t)i, 0};
    }
    for (size_t p = 0; p < pairs && live; p++) {
        size_t k = ptrace_rand(&seed) % live;
        t->ev[t->nev++] = (ptrace_event_t){slot[k], 1};
        slot[k] = (uint32_t)(live + p);
        t->ev[t->nev++] = (ptrace_event_t){slot[k], 0};
    }
    free(slot);
    note_peak(t);
    return 0;
}

int ptrace_load(ptrace_t *t, const char *path, const char *name)
{
    trace_t tr;
    memset(t, 0, sizeof *t);
    if (trace_read_file(path, &tr) != 0) return -1;
    int rc = make_room(t, name, tr.nallocs, tr.nev);
    for (size_t e = 0; rc == 0 && e < tr.nev; e++) {
        const trace_event_t *x = &tr.ev[e];
        if (x->action == TRACE_ALLOC) t->size[x->slot] = x->size ? x->size : 1;
        if (x->action == TRACE_ALLOC || x->action == TRACE_FREE)
            t->ev[t->nev++] = (ptrace_event_t){x->slot, x->action == TRACE_FREE};
    }
    trace_read_release(&tr);
    if (rc == 0) note_peak(t);
    return rc;
}
