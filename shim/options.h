/* shim/options.h — npupool's configuration: one table of options, parsed once into one typed
 * configuration that the shim keeps and passes down to the layers below.
 *
 * Owns: every NPUPOOL_* environment variable.  The table in options.c holds, per option, its
 * name, type, default, range, the field it fills and its help text; it is the only place any of
 * them is written down.  From it come the parse (options_init), the values the report's "config"
 * section lists and NPUPOOL_LOG=info prints (options_for_each), and the README's variable table
 * (options_markdown; a test compares the two).
 * Accepted forms: booleans 1/0, true/false, on/off, yes/no; sizes with K/M/G/T (binary)
 * suffixes; numbers finite and within the option's range; signals by number or name (fault
 * signals, KILL and STOP refused).  A bad value prints one `npupool:` line saying what was wrong
 * and what is used instead (the default), and an unknown NPUPOOL_* variable one line naming the
 * closest known option.
 * Lifetime: options_init() parses once (pthread_once) at the first intercepted call; afterwards
 * npupool_config is read-only and readers need no lock.  Strings point into the environment.
 */
#ifndef NPUPOOL_SHIM_OPTIONS_H
#define NPUPOOL_SHIM_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "ledger.h"
#include "report.h"

enum npupool_mode {
    NPUPOOL_MODE_POOL = 0,    /* the pool serves allocations (the default) */
    NPUPOOL_MODE_OBSERVE = 1, /* the runtime serves every allocation; npupool records and reports */
};

typedef struct npupool_config {
    double ratio;           /* NPUPOOL_RATIO: share of free HBM reserved per device */
    size_t pool_bytes;      /* NPUPOOL_POOL_BYTES: absolute pool size, 0 = use the ratio */
    int vmm;                /* NPUPOOL_VMM: 1 = virtual-memory pool where the runtime has it */
    size_t chunk_bytes;     /* NPUPOOL_CHUNK_BYTES: bytes per chunk of a virtual-memory pool */
    int fallback;           /* NPUPOOL_FALLBACK: 1 = the runtime serves what the pool cannot */
    int mode;               /* NPUPOOL_MODE: enum npupool_mode */
    int device_cache;       /* NPUPOOL_DEVICE_CACHE: 1 = threads' devices from observed calls */
    int disable;            /* NPUPOOL_DISABLE: 1 = pure pass-through */
    int log_level;          /* NPUPOOL_LOG: enum log_level */
    const char *trace;      /* NPUPOOL_TRACE: allocation trace path pattern, "" = off */
    ledger_config_t ledger; /* NPUPOOL_BACKTRACE_DEPTH, NPUPOOL_PYTHON_FRAMES, NPUPOOL_LEDGER_FILE
                               (dlsym and file_config are filled in by the shim) */
    report_config_t report; /* NPUPOOL_REPORT* and the thresholds */
} npupool_config_t;

extern npupool_config_t npupool_config; /* valid after options_init() */

/* Parse the environment once (idempotent; thread-safe).  Warnings go to stderr. */
void options_init(void);

/* Calls cb for each option in table order with its effective value as text. */
void options_for_each(void (*cb)(void *ctx, const char *name, const char *value), void *ctx);

/* The README's variable table (markdown rows, header included) into f. */
void options_markdown(FILE *f);

#endif
