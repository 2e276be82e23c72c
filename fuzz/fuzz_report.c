/* fuzz/fuzz_report.c — libFuzzer target: the report reader (tools/report_read.c) on any bytes.
 * Must never crash, leak or read out of bounds; a refusal (2) is a fine answer.  The site
 * labels are formatted too, since every subcommand prints them.  `make fuzz` runs it.
 */
#include <stddef.h>
#include <stdint.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    report_t r;
    if (report_parse("fuzz", (const char *)data, size, &r, 1) == 0) {
        char buf[256];
        for (size_t i = 0; i < r.nleaks; i++) {
            rep_site_label(&r.leaks[i], buf, sizeof buf);
            for (size_t j = 0; j < r.leaks[i].nframes; j++)
                rep_frame_label(&r.leaks[i].frames[j], buf, sizeof buf);
        }
        report_release(&r);
    }
    return 0;
}
