/* fuzz/fuzz_ledger.c — libFuzzer target: the ledger-file reader (tools/ledger_read.c) on any
 * bytes.  Must never crash, leak or read out of bounds; a refusal (2) is a fine answer.
 *
 * Every input is read twice: as it is (a mutation almost always breaks a check word, so this
 * mostly exercises the refusals), and "resealed": a copy whose check words are recomputed for
 * whatever the mutation left (chunk headers, record slots that hold one, append entries of
 * stacks, modules and Python frames, device figures, the header's identities), so the reader's
 * checks of what a committed chunk, slot or entry may contain are reached too.  Also checked: an
 * input that reads whole reads the same with --salvage, and every record's stack, every frame's
 * module and every Python frame of a stack can be looked up.  `make fuzz` runs it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_format.h"
#include "ledger_read.h"

static void reseal_append(unsigned char *b, uint64_t off, uint64_t size, uint16_t kind)
{
    for (uint64_t p = off + LFMT_ALIGN; p + sizeof(lfmt_entry_t) <= off + size;) {
        lfmt_entry_t e;
        memcpy(&e, b + p, sizeof e);
        if (e.size < sizeof e + 8 || e.size % 8 || e.size > off + size - p) return;
        uint64_t check = lfmt_entry_check(b + p, e.size, kind);
        memcpy(b + p + e.size - 8, &check, 8);
        p += e.size;
    }
}

/* Recompute every check word the chunks as they now stand would need. */
static void reseal(unsigned char *b, size_t len)
{
    if (len >= sizeof(lfmt_header_t)) { /* the identities, when they say they were written */
        lfmt_library_t l;
        size_t at[] = {offsetof(lfmt_header_t, npupool), offsetof(lfmt_header_t, runtime)};
        for (int k = 0; k < 2; k++) {
            memcpy(&l, b + at[k], sizeof l);
            if (l.check) l.check = lfmt_library_check(&l);
            memcpy(b + at[k], &l, sizeof l);
        }
    }
    for (uint64_t off = 0; off + sizeof(lfmt_chunk_t) <= len;) {
        lfmt_chunk_t c;
        memcpy(&c, b + off, sizeof c);
        if (c.magic != LFMT_CHUNK_MAGIC || c.size < LFMT_ALIGN || c.size % LFMT_ALIGN ||
            c.size > len - off)
            return;
        c.offset = off;
        c.check = lfmt_chunk_check(&c);
        memcpy(b + off, &c, sizeof c);
        if (c.kind == LFMT_KIND_RECORDS) {
            for (uint64_t s = off + LFMT_ALIGN; s + sizeof(lfmt_record_t) <= off + c.size;
                 s += sizeof(lfmt_record_t)) {
                lfmt_record_t r;
                memcpy(&r, b + s, sizeof r);
                if (r.check > LFMT_CHECK_WRITING) r.check = lfmt_record_check(&r);
                memcpy(b + s, &r, sizeof r);
            }
        } else if (c.kind == LFMT_KIND_STACKS || c.kind == LFMT_KIND_MODULES ||
                   c.kind == LFMT_KIND_PYFRAMES) {
            reseal_append(b, off, c.size, c.kind);
        } else if (c.kind == LFMT_KIND_DEVICE && c.size >= sizeof(lfmt_device_chunk_t)) {
            lfmt_device_chunk_t d;
            memcpy(&d, b + off, sizeof d);
            for (int k = 0; k < 2; k++)
                d.figs[k].check = lfmt_words_check(&d.figs[k].mono_ns, (sizeof d.figs[k] - 8) / 8,
                                                   LFMT_KIND_DEVICE);
            memcpy(b + off, &d, sizeof d);
        }
        off += c.size;
    }
}

static volatile uint64_t sink; /* keeps the lookups */

static void use(const ledger_read_t *r)
{
    for (size_t i = 0; i < r->nrecs; i++) {
        const ledger_read_stack_t *s = ledger_read_stack(r, r->recs[i].stack_id);
        for (uint32_t k = 0; s && k < s->depth; k++) {
            uint64_t v = r->frames[s->first + k];
            const ledger_read_pyframe_t *p = ledger_read_pyframe(r, lfmt_py_frame_id(v));
            if (p) sink += strlen(p->file) + strlen(p->function) + p->line;
            const char *seen = lfmt_py_seen_name(lfmt_py_seen_of(v));
            if (seen) sink += strlen(seen);
            const ledger_read_module_t *m = ledger_read_module_of(r, r->recs[i].stack_id, v);
            if (m) sink += strlen(m->path) + strlen(m->build_id);
        }
    }
}

static void read_both_ways(const unsigned char *data, size_t size)
{
    ledger_read_t r, s;
    int rc = ledger_read_buffer("fuzz", data, size, 0, 1, &r);
    int rs = ledger_read_buffer("fuzz", data, size, 1, 1, &s);
    if (rc == 0) {
        if (rs != 0 || s.damaged || s.nrecs != r.nrecs || s.nstacks != r.nstacks ||
            s.nmods != r.nmods || s.npyframes != r.npyframes || s.torn_records != r.torn_records)
            abort();
        sink += strlen(r.hdr.version) + strlen(r.hdr.npupool.path) + strlen(r.hdr.runtime.path) +
                strlen(r.hdr.runtime.build_id);
        use(&r);
        ledger_read_release(&r);
    }
    if (rs == 0) {
        use(&s);
        ledger_read_release(&s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_both_ways(data, size);
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    reseal(copy, size);
    read_both_ways(copy, size);
    free(copy);
    return 0;
}
