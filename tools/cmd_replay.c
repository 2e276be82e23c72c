/* tools/cmd_replay.c — `npupool replay TRACE`: a recorded workload through the pool, off-device.
 *
 * Owns: option parsing and the printed figures of replay; the engine is replay.c.  The pool size
 * is --pool-bytes, or --ratio of --device-bytes (the shim reserves NPUPOOL_RATIO of the free
 * device memory; 0.8 of 64 GiB by default, the fake runtime's device); its backing is
 * --backing (vmm, as the shim makes it where the runtime has the virtual-memory API, with
 * --chunk-bytes; or block).  --min-pool bisects the smallest pool that serves the whole trace
 * with no refusal, per device, then replays --verify larger sizes: a larger pool can do worse,
 * and the figure printed is one that every checked larger size serves too.
 */
#include "commands.h"
#include "fmt.h"
#include "pool.h"
#include "replay.h"
#include "tools.h"
#include "wire.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_POOL_BYTES,
    OPT_RATIO,
    OPT_DEVICE_BYTES,
    OPT_FALLBACK,
    OPT_MIN_POOL,
    OPT_RESOLUTION,
    OPT_ROUNDING,
    OPT_ALLOCATOR,
    OPT_BACKING,
    OPT_CHUNK_BYTES,
    OPT_VERIFY,
    OPT_CHECK,
    OPT_NO_TIMING,
    OPT_FAIL_ON_REFUSAL,
};
/* The words of --rounding are enum replay_rounding in order, those of --allocator allocators[]. */
static const replay_allocator_t *const allocators[] = {&replay_pool_allocator,
                                                       &replay_firstfit_allocator};
/* (--allocator pool with --backing vmm is replay_pool_vmm_allocator.) */
static const cli_opt_t replay_opts[] = {
    REPLAY_POOL_OPTS(OPT_POOL_BYTES, OPT_RATIO, OPT_DEVICE_BYTES, OPT_FALLBACK, OPT_ROUNDING,
                     OPT_BACKING, OPT_CHUNK_BYTES),
    [OPT_MIN_POOL] = {"min-pool", 0, CLI_FLAG, NULL, NULL, 0,
                      "also find the smallest pool that runs the whole trace with no\n"
                      "refusal (bisection, then --verify larger sizes replayed: a larger\n"
                      "pool can do worse; the figure printed serves at each of them)"},
    [OPT_RESOLUTION] = {"resolution", 0, CLI_SIZE, "N", "64", CLI_POSITIVE,
                        "precision of --min-pool in bytes"},
    [OPT_ALLOCATOR] = {"allocator", 0, CLI_CHOICE, "pool|firstfit", "pool", 0,
                       "the allocator to replay against; firstfit: the seed's first-fit\n"
                       "free list, the baseline of the benchmarks"},
    [OPT_VERIFY] = {"verify", 0, CLI_SIZE, "N", "100", 0,
                    "--min-pool: larger sizes to replay after the bisection (0 = none)"},
    [OPT_CHECK] = {"check", 0, CLI_FLAG, NULL, NULL, 0,
                   "run the pool's invariant checker after every event (slow)"},
    [OPT_NO_TIMING] = {"no-timing", 0, CLI_FLAG, NULL, NULL, 0,
                       "leave out the timing line (stable output for tests)"},
    [OPT_FAIL_ON_REFUSAL] = {"fail-on-refusal", 0, CLI_FLAG, NULL, NULL, 0,
                             "exit 1 when any allocation was refused"},
    {NULL},
};

static void print_trace_line(const trace_t *t)
{
    printf("trace        %s (%s): %zu events, %u allocations, %" PRIu64 " frees", t->path,
           t->format == TRACE_FMT_RMM ? "RMM log" : WIRE_TRACE_FORMAT, t->nev, t->nallocs,
           t->nfrees);
    if (t->nfails) printf(", %" PRIu64 " allocation failures", t->nfails);
    printf(", %d device%s\n", t->ndevices, t->ndevices == 1 ? "" : "s");
    if (t->live_at_end || t->unknown_frees)
        printf("             %" PRIu64 " allocations never freed, %" PRIu64
               " frees of unknown pointers skipped\n",
               t->live_at_end, t->unknown_frees);
}

static void print_device(const trace_t *t, int i, const replay_dev_t *d, int fallback)
{
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN];
    printf("\ndevice %ld\n", t->device_ids[i]);
    printf("  allocations      %" PRIu64 " (served %" PRIu64 ", refused %" PRIu64, d->allocs,
           d->served, d->refused);
    if (d->refused) {
        printf(" = %s", fmt_bytes(b1, d->refused_bytes));
        if (fallback) printf(", all served by fallback");
    }
    printf(")\n");
    if (d->refused) printf("  first refusal    at event %" PRIu64 "\n", d->first_refusal + 1);
    if (d->source_failures)
        printf("  RMM failures     %" PRIu64 " recorded, %" PRIu64 " of them served here\n",
               d->source_failures, d->failures_served);
    printf("  frees            %" PRIu64 "\n", d->frees);
    printf("  peak requested   %-11s (%" PRIu64 " bytes the program asked for)\n",
           fmt_bytes(b1, d->peak_requested), d->peak_requested);
    printf("  peak allocated   %-11s (%" PRIu64 " bytes in pool blocks)\n",
           fmt_bytes(b1, d->peak_allocated), d->peak_allocated);
    printf("  peak reserved    %-11s (pool + %s peak fallback)\n", fmt_bytes(b1, d->peak_reserved),
           fmt_bytes(b2, d->peak_fallback));
    printf("  fragmentation    final %.1f%%, worst %.1f%% (at event %" PRIu64 ")\n",
           d->final_frag * 100.0, d->worst_frag * 100.0, d->worst_frag_event + 1);
    printf("  free at end      %s, largest block %s\n", fmt_bytes(b1, d->final_free),
           fmt_bytes(b2, d->final_largest));
    if (d->vmm)
        printf("  stitching        %" PRIu64 " stitches remapped %" PRIu64 " chunks; %" PRIu64
               " refusals for want of an unmapped stretch\n",
               d->stitches, d->chunks_moved, d->va_refusals);
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const uint64_t resolution = a->v[OPT_RESOLUTION].u;
    const int fallback = a->v[OPT_FALLBACK].choice == 1, min_pool = a->v[OPT_MIN_POOL].given;
    const int check = a->v[OPT_CHECK].given, timing = !a->v[OPT_NO_TIMING].given;
    const int fail_on_refusal = a->v[OPT_FAIL_ON_REFUSAL].given;
    const int rounding = a->v[OPT_ROUNDING].choice;
    replay_opts_t chosen = {.alloc = allocators[a->v[OPT_ALLOCATOR].choice]};
    if (replay_choose_backing(&a->v[OPT_BACKING], &a->v[OPT_CHUNK_BYTES], &chosen) != TOOLS_OK)
        return TOOLS_BAD;
    const replay_allocator_t *alloc = chosen.alloc;
    const uint64_t chunk = chosen.chunk_bytes;
    const uint64_t pool_bytes =
        replay_pool_bytes(&a->v[OPT_POOL_BYTES], &a->v[OPT_RATIO], &a->v[OPT_DEVICE_BYTES]);

    trace_t t;
    int rc = trace_read_file(a->operand[0], &t);
    if (rc != TOOLS_OK) return rc;

    replay_opts_t o = {
        .alloc = alloc,
        .pool_bytes = pool_bytes,
        .chunk_bytes = chunk,
        .fallback = fallback,
        .rounding = rounding,
        .only_device = -1,
        .check_every_op = check,
    };
    replay_result_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        trace_read_release(&t);
        tools_err("out of memory");
        return TOOLS_BAD;
    }
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN];
    if (replay_run(&t, &o, r) != 0) {
        tools_err("%s: cannot create a %s of %" PRIu64 " bytes (too small?)", t.path, alloc->name,
                  pool_bytes);
        free(r);
        trace_read_release(&t);
        return TOOLS_BAD;
    }
    print_trace_line(&t);
    printf("allocator    %s, %s (%" PRIu64 " bytes) per device, fallback %s, rounding %s\n",
           alloc->name, fmt_bytes(b1, pool_bytes), pool_bytes, fallback ? "on" : "off",
           a->v[OPT_ROUNDING].text);
    if (alloc == &replay_pool_vmm_allocator)
        printf("backing      vmm: %s chunks (the limit rounded down to them), address range %dx\n",
               fmt_bytes(b1, chunk), POOL_VMM_VA_RATIO);
    else if (alloc == &replay_pool_allocator)
        printf("backing      block\n");
    uint64_t refused = 0;
    for (int i = 0; i < t.ndevices; i++) {
        print_device(&t, i, &r->dev[i], fallback);
        refused += r->dev[i].refused;
    }
    if (check)
        printf("\ninvariant checks: %d violation%s\n", r->violations,
               r->violations == 1 ? "" : "s");
    if (timing && r->events)
        printf("\ntime per operation  %.0f ns (%" PRIu64
               " events in %.3f s, allocator + replay bookkeeping)\n",
               r->seconds * 1e9 / (double)r->events, r->events, r->seconds);

    if (min_pool) {
        const int verify = (int)(a->v[OPT_VERIFY].u > 100000 ? 100000 : a->v[OPT_VERIFY].u);
        const uint64_t res = replay_resolution(&o, resolution);
        printf("\nminimum pool with no refusal (bisection to %s, then %d larger sizes checked):\n",
               fmt_bytes(b1, res), verify);
        for (int i = 0; i < t.ndevices; i++) {
            uint64_t peak = replay_live_peak(&t, i, rounding, alloc->align ? alloc->align : 1);
            replay_min_pool_result_t m;
            replay_min_pool_verified(&t, i, &o, resolution, verify, &m);
            if (m.min == 0) {
                printf("  device %ld: none up to 1 PiB\n", t.device_ids[i]);
                continue;
            }
            printf("  device %ld: %s (%" PRIu64 " bytes); live peak %s (%" PRIu64 " bytes): "
                   "fragmentation costs %+.2f%% [%d replays]\n",
                   t.device_ids[i], fmt_bytes(b1, m.safe), m.safe, fmt_bytes(b2, peak), peak,
                   peak ? ((double)m.safe - (double)peak) * 100.0 / (double)peak : 0.0, m.probes);
            if (m.checked && !m.refused)
                printf("             every one of %" PRIu64 " larger sizes up to %s serves too\n",
                       m.checked, fmt_bytes(b1, m.checked_to));
            if (m.refused) {
                char b3[FMT_BYTES_LEN], b4[FMT_BYTES_LEN], b5[FMT_BYTES_LEN];
                printf("             not monotone: %s (%" PRIu64 " bytes) serves, but %" PRIu64
                       " of %" PRIu64 " larger sizes checked refuse a request (%s = %" PRIu64
                       " bytes .. %s);\n",
                       fmt_bytes(b1, m.min), m.min, m.refused, m.checked,
                       fmt_bytes(b2, m.first_refused), m.first_refused,
                       fmt_bytes(b3, m.last_refused));
                if (m.safe)
                    printf("             %s is the smallest checked size above them all, and "
                           "every checked size from it up to %s serves\n",
                           fmt_bytes(b4, m.safe), fmt_bytes(b5, m.checked_to));
                else
                    printf("             no checked size above them serves\n");
            }
        }
    }
    if (r->violations)
        rc = TOOLS_FINDING;
    else if (fail_on_refusal && refused)
        rc = TOOLS_FINDING;
    free(r);
    trace_read_release(&t);
    return rc;
}

const cli_cmd_t cmd_replay = {
    .name = "replay",
    .operands = "TRACE",
    .purpose = "run an allocation trace through the pool",
    .about = "Run a recorded allocation trace through npupool's pool (the same code as the shim) "
             "and print\nallocations refused, peak allocated, peak reserved, final and worst "
             "fragmentation and the\ntime per operation.  TRACE is an npupool trace "
             "(NPUPOOL_TRACE=path, docs/trace.md) or a RAPIDS\nRMM logging_resource_adaptor CSV; "
             "'-' reads standard input.",
    .opts = replay_opts,
    .epilog = "Exit: 0 done, 1 refusals with --fail-on-refusal, 2 bad usage or a bad trace.",
    .run = run,
};
