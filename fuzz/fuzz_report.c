/* fuzz/fuzz_report.c — libFuzzer target: the report reader (tools/report_read.c) on any bytes.
 * Must never crash, leak or read out of bounds; a refusal (2) is a fine answer.  Also checked:
 *   - the byte pre-check (tools/jsonscan.c) gives the same answer fed in two pieces as whole;
 *   - a report read, printed back (as symbolize does, literals kept) and read again has the same
 *     exact figures: integers up to 2^64 - 1 survive the round trip.
 * The site labels are formatted too, since every subcommand prints them.  `make fuzz` runs it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonscan.h"
#include "report_read.h"
#include "site.h"

static void check_pieces(const char *data, size_t size)
{
    jsonscan_t whole = {0}, parts = {0};
    jsonscan_feed(&whole, data, size);
    size_t cut = size ? (unsigned char)data[0] * size / 256 : 0;
    if (jsonscan_feed(&parts, data, cut) == 0) jsonscan_feed(&parts, data, size);
    if (whole.why != parts.why || (whole.why && whole.bad != parts.bad)) abort();
}

static void check_same(const report_t *a, const report_t *b)
{
    if (a->ndevices != b->ndevices || a->nleaks != b->nleaks || a->oom.present != b->oom.present ||
        a->oom.requested != b->oom.requested || a->leaks_omitted != b->leaks_omitted)
        abort();
    for (size_t i = 0; i < a->ndevices; i++) {
        const report_device_t *x = &a->devices[i], *y = &b->devices[i];
        if (x->reserved != y->reserved || x->allocated != y->allocated ||
            x->free_bytes != y->free_bytes || x->base != y->base || x->nfree_map != y->nfree_map ||
            x->ncounters != y->ncounters)
            abort();
        for (size_t k = 0; k < x->nfree_map; k++)
            if (x->free_map[k].offset != y->free_map[k].offset ||
                x->free_map[k].size != y->free_map[k].size)
                abort();
        for (size_t k = 0; k < x->ncounters; k++)
            if (x->counters[k].value != y->counters[k].value) abort();
    }
    for (size_t i = 0; i < a->nleaks; i++) {
        const report_leak_t *x = &a->leaks[i], *y = &b->leaks[i];
        if (x->bytes != y->bytes || x->count != y->count || x->growth_bytes != y->growth_bytes ||
            strcmp(x->stack_id, y->stack_id) != 0 || x->nframes != y->nframes)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_pieces((const char *)data, size);
    report_t r;
    if (report_read_buffer("fuzz", (const char *)data, size, &r, 1) != 0) return 0;
    char buf[256];
    for (size_t i = 0; i < r.nleaks; i++) {
        site_label(&r.leaks[i], buf, sizeof buf);
        site_stack_label(&r.leaks[i], buf, sizeof buf);
        for (size_t j = 0; j < r.leaks[i].nframes; j++)
            site_frame_label(&r.leaks[i].frames[j], buf, sizeof buf);
    }
    report_read_keep_literals(&r);
    char *text = cJSON_PrintUnformatted(r.root);
    if (text) {
        report_t again;
        if (report_read_buffer("fuzz-again", text, strlen(text), &again, 1) != 0) abort();
        check_same(&r, &again);
        report_read_release(&again);
        cJSON_free(text);
    }
    report_read_release(&r);
    return 0;
}
