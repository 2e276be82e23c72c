/* traces/gen.c — generators of the allocation traces shipped in traces/ (and of big ones at test time).
 *
 * Owns: four synthetic workloads, written as npupool traces (docs/trace.md) or as RAPIDS RMM
 * logging_resource_adaptor CSV.  Deterministic: the same scenario, seed and size give the same
 * bytes on every machine (own PRNG, no libc rand, integer arithmetic only).
 *
 *   serving   the seed's dynamic-shape serving scenario: fp32 tensors [batch, seq, 4096],
 *             batch 1..32, seq 128..2048, allocated and freed in random order (10..30 live).
 *   training  a transformer training step, repeated: weights and optimizer state once, then per
 *             step the forward pass keeps each layer's activations (plus short-lived workspaces),
 *             the backward pass frees them in reverse order while gradient temporaries come and go.
 *   service   a long-running service: every request allocates and frees a few temporaries
 *             (64 KiB..64 MiB); every 40th request leaks a 1 MiB buffer for good.
 *   random    RMM's random_allocations workload: each step allocates with probability 73%
 *             (size uniform in 1..N MiB) or frees a random live allocation; allocating stops at
 *             --max-live bytes live, freeing when nothing is live.
 *
 * Pointers are made up (unique, 256-byte aligned, never reused): replay does not need real ones.
 * The header and column lines are the readers' own (base/wire.h, tools/trace_read.h).
 */
#include "trace_read.h" /* TRACE_RMM_COLUMNS */
#include "splitmix.h"
#include "wire.h" /* WIRE_TRACE_HEADER, WIRE_TRACE_COLUMNS */

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen {
    FILE *out;           /* destination */
    int rmm;             /* 1: RMM CSV, 0: npupool trace */
    uint64_t rng;        /* splitmix64 state */
    uint64_t time_ns;    /* synthetic clock */
    uint64_t next_id;    /* next pointer number */
    uint64_t events;     /* events written */
    uint64_t *live;      /* live pointers */
    uint64_t *live_sz;   /* their sizes */
    size_t nlive;        /* entries used in live */
    size_t cap;          /* entries allocated in live */
    uint64_t live_bytes; /* sum of live sizes */
} gen_t;

static uint64_t rnd(gen_t *g) { return splitmix_next(&g->rng); }

/* Uniform in [lo, hi]. */
static uint64_t uni(gen_t *g, uint64_t lo, uint64_t hi) { return lo + rnd(g) % (hi - lo + 1); }

static void emit(gen_t *g, int alloc, uint64_t ptr, uint64_t size)
{
    g->time_ns += 1000 + rnd(g) % 4000;
    g->events++;
    if (g->rmm) {
        uint64_t us = g->time_ns / 1000;
        fprintf(g->out,
                "1,%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 ".%06" PRIu64 ",%s,0x%" PRIx64
                ",%" PRIu64 ",0x0\n",
                us / 3600000000u % 24, us / 60000000u % 60, us / 1000000u % 60, us % 1000000u,
                alloc ? "allocate" : "free", ptr, size);
    } else if (alloc) {
        fprintf(g->out, "1,%" PRIu64 ",alloc,0x%" PRIx64 ",%" PRIu64 ",0\n", g->time_ns, ptr, size);
    } else {
        fprintf(g->out, "1,%" PRIu64 ",free,0x%" PRIx64 ",,0\n", g->time_ns, ptr);
    }
}

/* Allocate: returns the index in the live list. */
static size_t g_alloc(gen_t *g, uint64_t size)
{
    if (g->nlive == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 1024;
        g->live = realloc(g->live, g->cap * sizeof *g->live);
        g->live_sz = realloc(g->live_sz, g->cap * sizeof *g->live_sz);
        if (!g->live || !g->live_sz) {
            fprintf(stderr, "gen: out of memory\n");
            exit(2);
        }
    }
    uint64_t ptr = 0x7f0000000000ull + (g->next_id++ << 8);
    g->live[g->nlive] = ptr;
    g->live_sz[g->nlive] = size;
    g->live_bytes += size;
    emit(g, 1, ptr, size);
    return g->nlive++;
}

/* Free live entry i (the last entry moves into its place). */
static void g_free(gen_t *g, size_t i)
{
    emit(g, 0, g->live[i], g->live_sz[i]);
    g->live_bytes -= g->live_sz[i];
    g->nlive--;
    g->live[i] = g->live[g->nlive];
    g->live_sz[i] = g->live_sz[g->nlive];
}

/* Free the most recent allocation of `ptr` (search from the end: LIFO patterns are cheap). */
static void g_free_ptr(gen_t *g, uint64_t ptr)
{
    for (size_t i = g->nlive; i-- > 0;) {
        if (g->live[i] == ptr) {
            emit(g, 0, ptr, g->live_sz[i]);
            g->live_bytes -= g->live_sz[i];
            memmove(&g->live[i], &g->live[i + 1], (g->nlive - i - 1) * sizeof *g->live);
            memmove(&g->live_sz[i], &g->live_sz[i + 1], (g->nlive - i - 1) * sizeof *g->live_sz);
            g->nlive--;
            return;
        }
    }
}

static uint64_t ptr_of(gen_t *g, size_t i) { return g->live[i]; }

static void scen_serving(gen_t *g, uint64_t events)
{
    while (g->events < events) {
        int alloc = g->nlive < 10 || (g->nlive < 30 && rnd(g) % 2 == 0);
        if (alloc) {
            uint64_t batch = uni(g, 1, 32), seq = uni(g, 128, 2048);
            g_alloc(g, batch * seq * 4096 * 4);
        } else {
            g_free(g, (size_t)(rnd(g) % g->nlive));
        }
    }
    while (g->nlive) g_free(g, g->nlive - 1);
}

static void scen_training(gen_t *g, uint64_t events)
{
    const uint64_t layers = 12, hidden = 1024, heads = 16, batch = 8, seq = 512, fp = 2; /* fp16 */
    const uint64_t bsh = batch * seq * hidden * fp;
    /* Weights (per layer: qkv 3h^2, out h^2, mlp 8h^2) and two optimizer states each, fp32. */
    for (uint64_t l = 0; l < layers; l++) {
        uint64_t w[4] = {3 * hidden * hidden * 4, hidden * hidden * 4, 4 * hidden * hidden * 4,
                         4 * hidden * hidden * 4};
        for (int k = 0; k < 4; k++)
            for (int s = 0; s < 3; s++) g_alloc(g, w[k]);
    }
    uint64_t step = 0;
    while (g->events < events) {
        uint64_t *acts = malloc(layers * 8 * sizeof *acts);
        size_t na = 0;
        /* Forward: per layer keep 7 activations, use one workspace briefly. */
        for (uint64_t l = 0; l < layers; l++) {
            uint64_t sz[7] = {bsh,
                              3 * bsh,
                              batch * heads * seq * seq * fp,
                              batch * heads * seq * seq * fp,
                              bsh,
                              4 * bsh,
                              4 * bsh};
            for (int k = 0; k < 7; k++) acts[na++] = ptr_of(g, g_alloc(g, sz[k]));
            size_t ws = g_alloc(g, uni(g, 1, 64) << 20); /* cuBLAS-like workspace */
            g_free(g, ws);
        }
        size_t loss = g_alloc(g, batch * seq * 32000 * fp); /* logits */
        /* Backward: reverse order; gradient temporaries allocated and freed in between. */
        for (uint64_t l = layers; l-- > 0;) {
            size_t gin = g_alloc(g, 4 * bsh);
            for (int k = 6; k >= 0; k--) {
                g_free_ptr(g, acts[l * 7 + (uint64_t)k]);
                if (k == 3) {
                    size_t gs = g_alloc(g, batch * heads * seq * seq * fp);
                    g_free(g, gs);
                }
            }
            g_free(g, gin);
        }
        for (size_t i = 0; i < g->nlive; i++) {
            if (g->live_sz[i] == batch * seq * 32000 * fp) {
                g_free(g, i);
                break;
            }
        }
        (void)loss;
        /* Optimizer step: a flat fp32 buffer for the gradient norm, then gone. */
        size_t norm = g_alloc(g, 256 + step % 7 * 64);
        g_free(g, norm);
        free(acts);
        step++;
    }
    while (g->nlive) g_free(g, g->nlive - 1);
}

static void scen_service(gen_t *g, uint64_t events)
{
    uint64_t req = 0;
    uint64_t pending[8];
    size_t npend = 0;
    while (g->events < events) {
        req++;
        /* Temporaries of the previous request that outlive it are freed now (overlap). */
        for (size_t i = 0; i < npend; i++) g_free_ptr(g, pending[i]);
        npend = 0;
        int n = (int)uni(g, 2, 6);
        uint64_t mine[6];
        for (int k = 0; k < n; k++)
            mine[k] = ptr_of(g, g_alloc(g, uni(g, 1, 1024) << 16)); /* 64K..64M */
        for (int k = 0; k < n; k++) {
            if (rnd(g) % 3 == 0 && npend < 8)
                pending[npend++] = mine[k];
            else
                g_free_ptr(g, mine[k]);
        }
        if (req % 40 == 0)
            g_alloc(g, (uint64_t)1 << 20); /* the slow leak: a cache entry never dropped */
    }
    for (size_t i = 0; i < npend; i++) g_free_ptr(g, pending[i]);
    /* The leaked buffers stay live at the end: that is the point of this trace. */
}

static void scen_random(gen_t *g, uint64_t events, uint64_t max_mib, uint64_t max_live)
{
    while (g->events < events) {
        int alloc = g->nlive == 0 || rnd(g) % 100 < 73;
        uint64_t size = uni(g, 1, max_mib << 20);
        if (alloc && g->live_bytes + size <= max_live)
            g_alloc(g, size);
        else if (g->nlive)
            g_free(g, (size_t)(rnd(g) % g->nlive));
    }
    while (g->nlive) g_free(g, (size_t)(rnd(g) % g->nlive));
}

static const char usage[] =
    "usage: gen SCENARIO [--events N] [--seed S] [--format npupool|rmm] [--max-mib N] [--max-live "
    "BYTES] [-o FILE]\n"
    "  SCENARIO: serving | training | service | random   (see traces/gen.c)\n";

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"events", required_argument, NULL, 'n'},   {"seed", required_argument, NULL, 's'},
        {"format", required_argument, NULL, 'f'},   {"max-mib", required_argument, NULL, 'm'},
        {"max-live", required_argument, NULL, 'l'}, {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    uint64_t events = 20000, seed = 1, max_mib = 16, max_live = (uint64_t)4 << 30;
    const char *outp = NULL;
    gen_t g = {0};
    int c;
    while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
        switch (c) {
        case 'n': events = strtoull(optarg, NULL, 10); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        case 'f':
            if (strcmp(optarg, "rmm") == 0)
                g.rmm = 1;
            else if (strcmp(optarg, "npupool") != 0) {
                fputs(usage, stderr);
                return 2;
            }
            break;
        case 'm': max_mib = strtoull(optarg, NULL, 10); break;
        case 'l': max_live = strtoull(optarg, NULL, 10); break;
        case 'o': outp = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind != argc - 1 || events == 0 || max_mib == 0) {
        fputs(usage, stderr);
        return 2;
    }
    g.out = outp ? fopen(outp, "w") : stdout;
    if (g.out == NULL) {
        perror(outp);
        return 2;
    }
    static char obuf[1 << 20];
    setvbuf(g.out, obuf, _IOFBF, sizeof obuf);
    g.rng = seed * 0x2545F4914F6CDD1Dull + 7;
    g.time_ns = 1000000000;
    const char *scen = argv[optind];
    if (g.rmm)
        fputs(TRACE_RMM_COLUMNS "\n", g.out);
    else
        fprintf(g.out, WIRE_TRACE_HEADER " generator=%s seed=%" PRIu64 "\n" WIRE_TRACE_COLUMNS "\n",
                scen, seed);
    if (strcmp(scen, "serving") == 0)
        scen_serving(&g, events);
    else if (strcmp(scen, "training") == 0)
        scen_training(&g, events);
    else if (strcmp(scen, "service") == 0)
        scen_service(&g, events);
    else if (strcmp(scen, "random") == 0)
        scen_random(&g, events, max_mib, max_live);
    else {
        fputs(usage, stderr);
        return 2;
    }
    if (fflush(g.out) != 0 || (outp && fclose(g.out) != 0)) {
        perror(outp ? outp : "stdout");
        return 2;
    }
    free(g.live);
    free(g.live_sz);
    return 0;
}
