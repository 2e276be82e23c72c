/* ledger/ledger_internal.h — what the files of ledger/ share with each other (never used outside).
 *
 * Owns: the `ledger_`-prefixed internal helpers: symbol lookup inside a dlopen()ed library that
 * bypasses the shim's own dlsym, the option reader, the stack table's hooks for ledger.c, and
 * small time/format helpers.  All hidden: the preload library never exports them.
 */
#ifndef NPUPOOL_LEDGER_INTERNAL_H
#define NPUPOOL_LEDGER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define LEDGER_HIDDEN __attribute__((visibility("hidden")))

/* dlsym() on a handle npupool opened itself.  Inside libnpupool.so a plain call to dlsym would
 * bind to the shim's exported dlsym (which answers for the application); this goes to glibc's
 * own (the shim's real_dlsym() when linked in, else dlsym). */
LEDGER_HIDDEN void *ledger_dlsym(void *handle, const char *name);

/* The one place ledger/ reads its options: the shim's options table (npupool_option_str) when it
 * knows `name`, else the environment.  Returns NULL when unset (or empty). */
LEDGER_HIDDEN const char *ledger_option(const char *name);
/* Typed readers: a missing option gives `dflt`; a bad value prints one `npupool:` line per option
 * and gives `dflt`. */
LEDGER_HIDDEN double ledger_option_double(const char *name, double dflt, double lo, double hi);
LEDGER_HIDDEN long ledger_option_long(const char *name, long dflt, long lo, long hi);
LEDGER_HIDDEN int ledger_option_signal(const char *name, int dflt);

/* The stack table's share of ledger_memory(), ledger_check() and the fork handlers (stack.c). */
LEDGER_HIDDEN void ledger_stack_memory(size_t *stacks, size_t *bytes, uint64_t *dropped);
LEDGER_HIDDEN int ledger_stack_check(char *why, size_t why_len);
LEDGER_HIDDEN void ledger_stack_atfork_prepare(void);
LEDGER_HIDDEN void ledger_stack_atfork_parent(void);
LEDGER_HIDDEN void ledger_stack_atfork_child(void);

/* Wall clock, seconds since the epoch (CLOCK_REALTIME). */
LEDGER_HIDDEN double ledger_wall_s(void);
/* "1.5 GiB" style rendering of a byte count into buf (returns buf). */
LEDGER_HIDDEN const char *ledger_human_bytes(double bytes, char *buf, size_t len);

#endif
