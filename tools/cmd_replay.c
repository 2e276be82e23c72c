/* tools/cmd_replay.c — `npupool replay TRACE`: a recorded workload through the pool, off-device.
 *
 * Owns: option parsing and the printed figures of replay; the engine is replay.c.  The pool size
 * is --pool-bytes, or --ratio of --device-bytes (the shim reserves NPUPOOL_RATIO of the free
 * device memory; 0.8 of 64 GiB by default, the fake runtime's device).  --min-pool bisects the
 * smallest pool that serves the whole trace with no refusal, per device.
 */
#include "replay.h"
#include "tools.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char replay_help[] =
    "usage: npupool replay TRACE [options]\n"
    "\n"
    "Run a recorded allocation trace through npupool's pool (the same code as the shim) and print\n"
    "allocations refused, peak allocated, peak reserved, final and worst fragmentation and the\n"
    "time per operation.  TRACE is an npupool trace (NPUPOOL_TRACE=path, docs/trace.md) or a "
    "RAPIDS\n"
    "RMM logging_resource_adaptor CSV; '-' reads standard input.\n"
    "\n"
    "  --pool-bytes N        pool size per device (suffixes K, M, G, T; e.g. 12G)\n"
    "  --ratio R             pool = R x --device-bytes (default 0.8, as NPUPOOL_RATIO)\n"
    "  --device-bytes N      device memory for --ratio (default 64G)\n"
    "  --fallback 0|1        1: a request the pool cannot serve goes outside it (default 1);\n"
    "                        0: it is refused, as with NPUPOOL_FALLBACK=0\n"
    "  --min-pool            also find the smallest pool that runs the whole trace with no\n"
    "                        refusal (bisection; assumes a larger pool never does worse)\n"
    "  --resolution N        precision of --min-pool in bytes (default 64)\n"
    "  --rounding acl|align32|none\n"
    "                        bytes that belong to a block: acl = ALIGN_UP(size,32)+32 "
    "(aclrtMalloc,\n"
    "                        default), align32 = ALIGN_UP(size,32) (aclrtMallocAlign32), none\n"
    "  --allocator pool|firstfit\n"
    "                        the allocator to replay against (firstfit: the seed's first-fit\n"
    "                        free list, the baseline of the benchmarks)\n"
    "  --check               run the pool's invariant checker after every event (slow)\n"
    "  --no-timing           leave out the timing line (stable output for tests)\n"
    "  --fail-on-refusal     exit 1 when any allocation was refused\n"
    "  -h, --help            this text\n"
    "\n"
    "Exit: 0 done, 1 refusals with --fail-on-refusal, 2 bad usage or a bad trace.\n";

static void print_trace_line(const trace_t *t)
{
    printf("trace        %s (%s): %zu events, %u allocations, %" PRIu64 " frees", t->path,
           t->format == TRC_FMT_RMM ? "RMM log" : "npupool-trace/1", t->nev, t->nallocs, t->nfrees);
    if (t->nfails) printf(", %" PRIu64 " allocation failures", t->nfails);
    printf(", %d device%s\n", t->ndevices, t->ndevices == 1 ? "" : "s");
    if (t->live_at_end || t->unknown_frees)
        printf("             %" PRIu64 " allocations never freed, %" PRIu64
               " frees of unknown pointers skipped\n",
               t->live_at_end, t->unknown_frees);
}

static const char *rounding_name(int r)
{
    return r == REPLAY_ROUND_ALIGN32 ? "align32" : r == REPLAY_ROUND_NONE ? "none" : "acl";
}

static void print_device(const trace_t *t, int i, const replay_dev_t *d, int fallback)
{
    char b1[TOOL_UNITS_LEN], b2[TOOL_UNITS_LEN];
    printf("\ndevice %ld\n", t->device_ids[i]);
    printf("  allocations      %" PRIu64 " (served %" PRIu64 ", refused %" PRIu64, d->allocs,
           d->served, d->refused);
    if (d->refused) {
        printf(" = %s", tool_bytes(b1, d->refused_bytes));
        if (fallback) printf(", all served by fallback");
    }
    printf(")\n");
    if (d->refused) printf("  first refusal    at event %" PRIu64 "\n", d->first_refusal + 1);
    if (d->source_failures)
        printf("  RMM failures     %" PRIu64 " recorded, %" PRIu64 " of them served here\n",
               d->source_failures, d->failures_served);
    printf("  frees            %" PRIu64 "\n", d->frees);
    printf("  peak requested   %-11s (%" PRIu64 " bytes the program asked for)\n",
           tool_bytes(b1, d->peak_requested), d->peak_requested);
    printf("  peak allocated   %-11s (%" PRIu64 " bytes in pool blocks)\n",
           tool_bytes(b1, d->peak_allocated), d->peak_allocated);
    printf("  peak reserved    %-11s (pool + %s peak fallback)\n", tool_bytes(b1, d->peak_reserved),
           tool_bytes(b2, d->peak_fallback));
    printf("  fragmentation    final %.1f%%, worst %.1f%% (at event %" PRIu64 ")\n",
           d->final_frag * 100.0, d->worst_frag * 100.0, d->worst_frag_event + 1);
    printf("  free at end      %s, largest block %s\n", tool_bytes(b1, d->final_free),
           tool_bytes(b2, d->final_largest));
}

int cmd_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"pool-bytes", required_argument, NULL, 'p'},
        {"ratio", required_argument, NULL, 'r'},
        {"device-bytes", required_argument, NULL, 'd'},
        {"fallback", required_argument, NULL, 'f'},
        {"min-pool", no_argument, NULL, 'm'},
        {"resolution", required_argument, NULL, 'R'},
        {"rounding", required_argument, NULL, 'o'},
        {"allocator", required_argument, NULL, 'a'},
        {"check", no_argument, NULL, 'c'},
        {"no-timing", no_argument, NULL, 'T'},
        {"fail-on-refusal", no_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t pool_bytes = 0, device_bytes = (uint64_t)64 << 30, resolution = 64;
    double ratio = 0.8;
    int have_pool = 0, have_ratio = 0, fallback = 1, min_pool = 0, check = 0, timing = 1,
        fail_on_refusal = 0;
    int rounding = REPLAY_ROUND_ACL;
    const replay_allocator_t *alloc = &replay_pool_allocator;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (tool_parse_bytes(optarg, &pool_bytes) != 0 || pool_bytes == 0)
                return tool_usage_error("replay", "--pool-bytes: '%s' is not a size", optarg);
            have_pool = 1;
            break;
        case 'r': {
            char *end;
            ratio = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(ratio > 0.0 && ratio <= 1.0))
                return tool_usage_error("replay", "--ratio: '%s' is not a number in (0, 1]",
                                        optarg);
            have_ratio = 1;
            break;
        }
        case 'd':
            if (tool_parse_bytes(optarg, &device_bytes) != 0 || device_bytes == 0)
                return tool_usage_error("replay", "--device-bytes: '%s' is not a size", optarg);
            break;
        case 'f':
            if (strcmp(optarg, "0") != 0 && strcmp(optarg, "1") != 0)
                return tool_usage_error("replay", "--fallback: '%s' is not 0 or 1", optarg);
            fallback = optarg[0] == '1';
            break;
        case 'm': min_pool = 1; break;
        case 'R':
            if (tool_parse_bytes(optarg, &resolution) != 0 || resolution == 0)
                return tool_usage_error("replay", "--resolution: '%s' is not a size", optarg);
            break;
        case 'o':
            if (strcmp(optarg, "acl") == 0)
                rounding = REPLAY_ROUND_ACL;
            else if (strcmp(optarg, "align32") == 0)
                rounding = REPLAY_ROUND_ALIGN32;
            else if (strcmp(optarg, "none") == 0)
                rounding = REPLAY_ROUND_NONE;
            else
                return tool_usage_error("replay", "--rounding: '%s' is not acl, align32 or none",
                                        optarg);
            break;
        case 'a':
            if (strcmp(optarg, "pool") == 0)
                alloc = &replay_pool_allocator;
            else if (strcmp(optarg, "firstfit") == 0)
                alloc = &replay_firstfit_allocator;
            else
                return tool_usage_error("replay", "--allocator: '%s' is not pool or firstfit",
                                        optarg);
            break;
        case 'c': check = 1; break;
        case 'T': timing = 0; break;
        case 'F': fail_on_refusal = 1; break;
        case 'h': fputs(replay_help, stdout); return TOOL_OK;
        case ':': return tool_usage_error("replay", "option '%s' needs a value", argv[optind - 1]);
        default: return tool_usage_error("replay", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (have_pool && have_ratio)
        return tool_usage_error("replay", "give --pool-bytes or --ratio, not both");
    if (optind != argc - 1)
        return tool_usage_error("replay", optind == argc ? "missing TRACE" : "one TRACE only");
    if (!have_pool) pool_bytes = (uint64_t)((double)device_bytes * ratio) & ~(uint64_t)63;

    trace_t t;
    int rc = trace_load(argv[optind], &t);
    if (rc != TOOL_OK) return rc;

    replay_opts_t o = {
        .alloc = alloc,
        .pool_bytes = pool_bytes,
        .fallback = fallback,
        .rounding = rounding,
        .only_device = -1,
        .check_every_op = check,
    };
    replay_result_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        trace_release(&t);
        tool_err("out of memory");
        return TOOL_BAD;
    }
    char b1[TOOL_UNITS_LEN], b2[TOOL_UNITS_LEN];
    if (replay_run(&t, &o, r) != 0) {
        tool_err("%s: cannot create a %s of %" PRIu64 " bytes (too small?)", t.path, alloc->name,
                 pool_bytes);
        free(r);
        trace_release(&t);
        return TOOL_BAD;
    }
    print_trace_line(&t);
    printf("allocator    %s, %s (%" PRIu64 " bytes) per device, fallback %s, rounding %s\n",
           alloc->name, tool_bytes(b1, pool_bytes), pool_bytes, fallback ? "on" : "off",
           rounding_name(rounding));
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
        printf("\nminimum pool with no refusal (bisection to %s):\n", tool_bytes(b1, resolution));
        for (int i = 0; i < t.ndevices; i++) {
            int probes;
            uint64_t peak = replay_live_peak(&t, i, rounding, alloc->align ? alloc->align : 1);
            uint64_t m = replay_min_pool(&t, i, &o, resolution, &probes);
            if (m == 0) {
                printf("  device %ld: none up to 1 PiB\n", t.device_ids[i]);
                continue;
            }
            printf("  device %ld: %s (%" PRIu64 " bytes); live peak %s (%" PRIu64 " bytes): "
                   "fragmentation costs %+.2f%% [%d replays]\n",
                   t.device_ids[i], tool_bytes(b1, m), m, tool_bytes(b2, peak), peak,
                   peak ? ((double)m - (double)peak) * 100.0 / (double)peak : 0.0, probes);
        }
    }
    if (r->violations)
        rc = TOOL_FINDING;
    else if (fail_on_refusal && refused)
        rc = TOOL_FINDING;
    free(r);
    trace_release(&t);
    return rc;
}
