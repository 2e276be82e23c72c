/* fuzz/fuzz_trace.c — libFuzzer target: the trace reader (tools/trace_read.c), npupool and RMM
 * formats, on any bytes; a parsed trace is checked against the reader's invariants (every free
 * names an earlier allocation's slot, devices in range).  `make fuzz` runs it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "trace_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    trace_t t;
    if (trace_read_buffer("fuzz", (const char *)data, size, &t, 1) != 0) return 0;
    uint32_t allocs = 0;
    for (size_t i = 0; i < t.nev; i++) {
        const trace_event_t *e = &t.ev[i];
        if ((int)e->device >= t.ndevices) abort();
        if (e->action == 0 && e->slot != allocs++) abort();
        if (e->action == 1 && e->slot >= allocs) abort();
    }
    if (allocs != t.nallocs) abort();
    trace_read_release(&t);
    return 0;
}
