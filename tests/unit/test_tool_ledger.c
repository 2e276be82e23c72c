/* tests/unit/test_tool_ledger.c — the ledger file: its writer (ledger/ledger_file.c, through the
 * ledger's own API) against its reader (tools/ledger_read.c).
 *
 * Links the ledger archive and the command's reader, as test_tool_trace links the trace writer:
 * the one format (base/ledger_format.h) is checked from both sides.  Each test writes a file in a
 * temporary directory, reads it back and compares with what the ledger holds in memory
 * (ledger_lookup, ledger_stack_frames); ledger_check() (which compares every slot of the file
 * with its record) runs after each phase.  Deaths are simulated by storing into the mapped file
 * what a store interrupted at each point leaves: a WRITING check word, a field changed after the
 * check, a stack entry's or a Python frame entry's check missing, a runtime identity half
 * written.  Also: the header's identity (version, this program as the writer, the runtime once
 * named) and the Python frames (names, lines, the tagged stack values) read back as the ledger
 * holds them, in a first file and in a file made later.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ledger.h"
#include "ledger_test_util.h"
#include "ledger_file.h"
#include "ledger_internal.h"
#include "ledger_py.h"
#include "ledger_read.h"
#include "tools.h"
#include "version.h"

static char dir[256];
static char pattern[300];

static int setup(void **state)
{
    (void)state;
    ledger_clear();
    snprintf(dir, sizeof dir, "/tmp/npupool-test-ledger.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(pattern, sizeof pattern, "%s/l-%%p.ledger", dir);
    ledger_config_t cfg = {.backtrace_depth = 0, .file = pattern, .file_config = "NPUPOOL_X=1\n"};
    ledger_init(&cfg);
    assert_non_null(ledger_file_path());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ledger_clear();
    ledger_file_close(1);
    rmdir(dir);
    return 0;
}

static void read_file(ledger_read_t *r)
{
    assert_int_equal(ledger_read_file(ledger_file_path(), 0, r), TOOLS_OK);
    assert_int_equal(r->damaged, 0);
}

/* The file mapped for the test to damage (as a death would leave it). */
static unsigned char *map_file(size_t *len)
{
    int fd = open(ledger_file_path(), O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(m != MAP_FAILED);
    *len = (size_t)st.st_size;
    return m;
}

/* Offset of the slot holding the record of addr (a committed slot with that address). */
static lfmt_record_t *slot_of_addr(unsigned char *m, size_t len, uint64_t addr)
{
    for (size_t off = 0; off + sizeof(lfmt_record_t) <= len; off += sizeof(lfmt_record_t)) {
        lfmt_record_t *s = (lfmt_record_t *)(void *)(m + off);
        if (s->addr == addr && s->check > LFMT_CHECK_WRITING && s->check == lfmt_record_check(s))
            return s;
    }
    return NULL;
}

static const ledger_read_record_t *find_rec(const ledger_read_t *r, uint64_t addr)
{
    for (size_t i = 0; i < r->nrecs; i++)
        if (r->recs[i].addr == addr) return &r->recs[i];
    return NULL;
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* With a file, a pool block's forget is never parked (ledger.h): the file of a job killed right
 * after a free must not list the block. */
static ledger_parked_t file_slot; /* static: the ledger keeps slots for good */
static void test_no_parked_forget_with_a_file(void **state)
{
    (void)state;
    uintptr_t a = 0x7e0000600000u;
    uint32_t h = ledger_record_alloc_tagged(a, 0, 100, 128, VOCAB_MALLOC, VOCAB_FROM_POOL, 0, 1);
    assert_true(h != 0);
    ledger_read_t r;
    read_file(&r);
    assert_non_null(find_rec(&r, a));
    ledger_read_release(&r);
    ledger_release_tagged_later(&file_slot, h, a);
    assert_true(file_slot.word == 0); /* forgotten at once, not parked */
    read_file(&r);                    /* the file says so without any reader of the ledger */
    assert_null(find_rec(&r, a));
    ledger_read_release(&r);
    assert_int_equal(ledger_release_tagged(h, a), 0);
    check_ledger();
}

static void test_round_trip(void **state)
{
    (void)state;
    uintptr_t f1[] = {0x401000, 0x402000, 0x403000}, f2[] = {0x7f0000001234};
    uint32_t s1 = ledger_stack_intern(f1, 3), s2 = ledger_stack_intern(f2, 1);
    enum { N = 5000 };
    for (uintptr_t i = 1; i <= N; i++)
        ledger_record_alloc(i * 4096, (int)(i % 3) - 1, 100 * i, 100 * i + 32, VOCAB_MALLOC_CACHED,
                            VOCAB_FROM_FALLBACK, i % 2 ? s1 : s2);
    for (uintptr_t i = 1; i <= N; i += 3) assert_int_equal(ledger_record_free(i * 4096), 1);
    ledger_record_alloc(2 * 4096, 5, 7, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, s2); /* replaces */
    check_ledger();
    ledger_read_t r;
    read_file(&r);
    assert_int_equal(r.nrecs, ledger_live_total());
    assert_int_equal(r.torn_records, 0);
    for (size_t i = 0; i < r.nrecs; i++) {
        ledger_record_t m;
        assert_int_equal(ledger_lookup(r.recs[i].addr, &m), 1);
        assert_int_equal(r.recs[i].device, m.device);
        assert_int_equal(r.recs[i].requested, m.requested);
        assert_int_equal(r.recs[i].granted, m.granted);
        assert_int_equal(r.recs[i].seq, m.seq);
        assert_int_equal(r.recs[i].stack_id, m.stack_id);
        assert_int_equal(r.recs[i].tid, m.tid);
        assert_int_equal(r.recs[i].entry, m.entry);
        assert_int_equal(r.recs[i].origin, m.origin);
    }
    const ledger_read_record_t *x = find_rec(&r, 2 * 4096);
    assert_non_null(x);
    assert_int_equal(x->device, 5);
    assert_int_equal(x->requested, 7);
    assert_int_equal(r.nstacks, 2);
    const ledger_read_stack_t *st = ledger_read_stack(&r, s1);
    assert_non_null(st);
    assert_int_equal(st->depth, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(r.frames[st->first + (size_t)i], f1[i]);
    assert_string_equal(r.hdr.config, "NPUPOOL_X=1\n");
    assert_int_equal(r.hdr.pid, getpid());
    assert_true(r.nmods > 0);
    ledger_read_release(&r);
}

static void test_modules(void **state)
{
    (void)state;
    ledger_read_t r;
    read_file(&r);
    /* this test's own code is in the module map, under the executable's path, with a build id */
    const ledger_read_module_t *m =
        ledger_read_module_of(&r, 1, (uint64_t)(uintptr_t)&test_modules + 1);
    assert_non_null(m);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    assert_string_equal(m->path, exe);
    assert_true(strlen(m->build_id) >= 16);
    assert_null(ledger_read_module_of(&r, 1, 16)); /* no module at address 15 */
    ledger_read_release(&r);
}

static void test_torn(void **state)
{
    (void)state;
    for (uintptr_t i = 1; i <= 40; i++)
        ledger_record_alloc(i << 20, 0, i, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    size_t len;
    unsigned char *m = map_file(&len);
    /* died after storing WRITING; died after changing a field but before the check */
    lfmt_record_t *a = slot_of_addr(m, len, 3u << 20), *b = slot_of_addr(m, len, 7u << 20);
    assert_non_null(a);
    assert_non_null(b);
    a->check = LFMT_CHECK_WRITING;
    b->requested = 12345;
    ledger_read_t r;
    read_file(&r);
    assert_int_equal(r.torn_records, 2);
    assert_int_equal(r.nrecs, 38);
    assert_null(find_rec(&r, 3u << 20));
    assert_null(find_rec(&r, 7u << 20));
    ledger_read_release(&r);
    /* the last stack entry caught before its check word */
    uintptr_t f[] = {0x1234};
    uint32_t id = ledger_stack_intern(f, 1);
    assert_true(id > 0);
    int found = 0;
    for (size_t off = 0; off + 24 <= len && !found; off += 8) {
        lfmt_entry_t e;
        memcpy(&e, m + off, sizeof e);
        uint64_t w;
        memcpy(&w, m + off + 16, 8);
        if (e.size == 32 && e.tag == id && w == 0x1234) {
            memset(m + off + 24, 0, 8);
            found = 1;
        }
    }
    assert_true(found);
    read_file(&r);
    assert_int_equal(r.torn_entries, 1);
    assert_null(ledger_read_stack(&r, id));
    ledger_read_release(&r);
    munmap(m, len);
}

static void test_growth_and_clear(void **state)
{
    (void)state;
    enum { N = 200000 }; /* every shard past its first chunks, several segments */
    for (uintptr_t i = 1; i <= N; i++)
        ledger_record_alloc(i * 64, 0, 64, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    check_ledger();
    ledger_read_t r;
    read_file(&r);
    assert_int_equal(r.nrecs, N);
    assert_true(r.file_size >= (uint64_t)N * sizeof(lfmt_record_t));
    /* at most twice the slots in use, plus headers and padding */
    assert_true(r.record_bytes <= 2 * (uint64_t)N * sizeof(lfmt_record_t) + (1u << 20));
    ledger_read_release(&r);
    ledger_clear();
    check_ledger();
    read_file(&r);
    assert_int_equal(r.nrecs, 0);
    ledger_read_release(&r);
}

static void test_devices(void **state)
{
    (void)state;
    lfmt_device_figs_t f = {.device = 3,
                            .has_pool = 1,
                            .reserved_bytes = 1000,
                            .allocated_bytes = 100,
                            .ncounters = 2,
                            .counters = {7, 8}};
    ledger_file_device_put(&f);
    f.allocated_bytes = 200;
    ledger_file_device_put(&f);
    lfmt_device_figs_t u = {.device = -1, .ncounters = 1, .counters = {9}};
    ledger_file_device_put(&u);
    ledger_read_t r;
    read_file(&r);
    assert_true(r.have_dev[3]);
    assert_int_equal(r.dev[3].allocated_bytes, 200);
    assert_int_equal(r.dev[3].counters[1], 8);
    assert_true(r.have_dev[LFMT_DEVICE_SLOTS - 1]);
    assert_int_equal(r.dev[LFMT_DEVICE_SLOTS - 1].counters[0], 9);
    assert_false(r.have_dev[0]);
    ledger_read_release(&r);
    /* the current copy torn (impossible for the writer, which writes the other): the older one */
    size_t len;
    unsigned char *m = map_file(&len);
    for (size_t off = 0; off + sizeof(lfmt_device_chunk_t) <= len; off += LFMT_ALIGN) {
        lfmt_device_chunk_t *c = (lfmt_device_chunk_t *)(void *)(m + off);
        if (c->chunk.magic == LFMT_CHUNK_MAGIC && c->chunk.kind == LFMT_KIND_DEVICE &&
            c->chunk.arg[0] == 4)
            c->figs[c->current & 1].allocated_bytes = 999;
    }
    munmap(m, len);
    read_file(&r);
    assert_int_equal(r.dev[3].allocated_bytes, 100);
    ledger_read_release(&r);
}

static void test_damage(void **state)
{
    (void)state;
    for (uintptr_t i = 1; i <= 3000; i++)
        ledger_record_alloc(i << 12, 0, 64, 64, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    size_t len;
    unsigned char *m = map_file(&len);
    const lfmt_header_t *h = (const lfmt_header_t *)(const void *)m;
    size_t end = (size_t)h->chunk_end, hsize = (size_t)h->chunk.size;
    unsigned char *copy = malloc(len);
    assert_non_null(copy);
    ledger_read_t r;
    /* whole: fine; cut anywhere before the end of the chunks: refused, salvage keeps a prefix */
    memcpy(copy, m, len);
    assert_int_equal(ledger_read_buffer("t", copy, end, 0, 1, &r), TOOLS_OK);
    ledger_read_release(&r);
    size_t cuts[] = {0, 3, 64, hsize - 1, hsize, hsize + 100, end / 2, end - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        assert_int_equal(ledger_read_buffer("t", copy, cuts[i], 0, 1, &r), TOOLS_BAD);
        if (cuts[i] >= hsize) {
            assert_int_equal(ledger_read_buffer("t", copy, cuts[i], 1, 1, &r), TOOLS_OK);
            assert_true(r.damaged);
            assert_true(r.nrecs <= 3000);
            ledger_read_release(&r);
        }
    }
    /* one bit of a chunk header after the first: refused; salvage stops there */
    copy[hsize + 9] ^= 1;
    assert_int_equal(ledger_read_buffer("t", copy, len, 0, 1, &r), TOOLS_BAD);
    assert_int_equal(ledger_read_buffer("t", copy, len, 1, 1, &r), TOOLS_OK);
    assert_true(r.damaged);
    assert_non_null(strstr(r.why, "check word"));
    ledger_read_release(&r);
    /* another format, the other byte order */
    memcpy(copy, m, len);
    copy[64 + 15] = '1'; /* "npupool-ledger/1": the previous format */
    assert_int_equal(ledger_read_buffer("t", copy, len, 1, 1, &r), TOOLS_BAD);
    memcpy(copy, m, len);
    uint32_t swapped = __builtin_bswap32(LFMT_CHUNK_MAGIC);
    memcpy(copy, &swapped, 4);
    assert_int_equal(ledger_read_buffer("t", copy, len, 1, 1, &r), TOOLS_BAD);
    /* random bytes everywhere after the header: never a crash */
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 200; round++) {
        memcpy(copy, m, len);
        for (int k = 0; k < 20; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            copy[hsize + x % (end - hsize)] = (unsigned char)(x >> 32);
        }
        if (ledger_read_buffer("t", copy, len, round & 1, 1, &r) == TOOLS_OK)
            ledger_read_release(&r);
    }
    free(copy);
    munmap(m, len);
}

/* Records made before the file is (threads that allocated while npupool started) are in it. */
static void test_records_before_the_file(void **state)
{
    (void)state;
    ledger_file_close(1);
    for (uintptr_t i = 1; i <= 100; i++)
        ledger_record_alloc(i << 16, 1, i, 128, VOCAB_MALLOC, VOCAB_FROM_POOL, 0);
    ledger_config_t cfg = {.backtrace_depth = 0, .file = pattern};
    ledger_init(&cfg);
    assert_non_null(ledger_file_path());
    check_ledger();
    ledger_read_t r;
    read_file(&r);
    assert_int_equal(r.nrecs, 100);
    assert_non_null(find_rec(&r, 77u << 16));
    ledger_read_release(&r);
}

/* An append entry of `kind` with this tag, found by walking the chunks; NULL when none. */
static unsigned char *entry_of(unsigned char *m, size_t len, uint16_t kind, uint32_t tag)
{
    const lfmt_header_t *h = (const lfmt_header_t *)(const void *)m;
    for (uint64_t off = h->chunk.size; off + sizeof(lfmt_chunk_t) <= len && off < h->chunk_end;) {
        lfmt_chunk_t c;
        memcpy(&c, m + off, sizeof c);
        if (c.size == 0) break;
        for (uint64_t p = off + LFMT_ALIGN; c.kind == kind && p + 8 <= off + c.size;) {
            lfmt_entry_t e;
            memcpy(&e, m + p, sizeof e);
            if (e.size == 0) break;
            if (e.tag == tag) return m + p;
            p += e.size;
        }
        off += c.size;
    }
    return NULL;
}

static void test_identity(void **state)
{
    (void)state;
    ledger_read_t r;
    read_file(&r);
    /* the writer: this version, this program (the ledger is linked into it), its build id */
    assert_string_equal(r.hdr.version, version_string());
    assert_true(r.have_npupool);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    assert_string_equal(r.hdr.npupool.path, exe);
    assert_true(strlen(r.hdr.npupool.build_id) >= 16);
    int named_before = ledger_file_runtime_known(); /* a fact of the process, kept across files */
    assert_int_equal(r.have_runtime, named_before);
    ledger_read_release(&r);
    if (!named_before) {
        ledger_file_runtime("/opt/cann/libascendcl.so", "0123abcd");
        assert_true(ledger_file_runtime_known());
    }
    ledger_file_runtime("/elsewhere/libascendcl.so", "ffff"); /* the first one counts */
    read_file(&r);
    assert_true(r.have_runtime);
    assert_string_equal(r.hdr.runtime.path, "/opt/cann/libascendcl.so");
    assert_string_equal(r.hdr.runtime.build_id, "0123abcd");
    assert_int_equal(r.torn_entries, 0);
    ledger_read_release(&r);
    /* a death between the fields and the check word: not known (check 0); a check caught with
     * fields that changed under it: torn */
    size_t len;
    unsigned char *m = map_file(&len);
    lfmt_header_t *h = (lfmt_header_t *)(void *)m;
    uint64_t check = h->runtime.check;
    h->runtime.check = 0;
    read_file(&r);
    assert_false(r.have_runtime);
    assert_int_equal(r.torn_entries, 0);
    ledger_read_release(&r);
    h->runtime.check = check;
    h->runtime.path[1] ^= 1;
    read_file(&r);
    assert_false(r.have_runtime);
    assert_int_equal(r.torn_entries, 1);
    assert_string_equal(r.hdr.runtime.path, "");
    ledger_read_release(&r);
    munmap(m, len);
    /* a file made later (as a fork child's) names the runtime from the start */
    ledger_file_close(1);
    ledger_init(&(ledger_config_t){.backtrace_depth = 0, .file = pattern});
    read_file(&r);
    assert_true(r.have_runtime);
    assert_string_equal(r.hdr.runtime.path, "/opt/cann/libascendcl.so");
    ledger_read_release(&r);
}

static void test_python_frames(void **state)
{
    (void)state;
    /* names unique to this run: the Python frame table lives as long as the process */
    static int round;
    char file[64], long_name[1600];
    snprintf(file, sizeof file, "/srv/train-%d.py", round++);
    size_t k = 0;
    while (k + 2 < sizeof long_name - 1) { /* "é" is two bytes: 1599 bytes of them, cut below */
        long_name[k++] = (char)0xc3;
        long_name[k++] = (char)0xa9;
    }
    long_name[k] = 0;
    uint32_t a = ledger_py_table_intern(file, "Model.forward", 42);
    uint32_t b = ledger_py_table_intern(file, "train_step", 0);
    uint32_t c = ledger_py_table_intern(file, long_name, 7);
    assert_true(a && b && c);
    assert_int_equal(ledger_py_table_intern(file, "Model.forward", 42), a); /* interned once */
    uintptr_t mark = LEDGER_PY_TAG | LEDGER_PY_MARK | LEDGER_PY_GIL_HELD;
    uintptr_t f1[] = {0x401000, LEDGER_PY_TAG | a, LEDGER_PY_TAG | b, 0x402000, mark};
    uintptr_t f2[] = {0x401000, LEDGER_PY_TAG | c, 0x402000, mark};
    uint32_t s1 = ledger_stack_intern(f1, 5), s2 = ledger_stack_intern(f2, 4);
    ledger_read_t r;
    read_file(&r);
    const ledger_read_stack_t *st = ledger_read_stack(&r, s1);
    assert_non_null(st);
    assert_int_equal(st->depth, 5);
    for (int i = 0; i < 5; i++) assert_int_equal(r.frames[st->first + (size_t)i], f1[i]);
    assert_int_equal(lfmt_py_seen_of(r.frames[st->first + 4]), LFMT_PY_GIL_HELD);
    assert_string_equal(lfmt_py_seen_name(lfmt_py_seen_of(r.frames[st->first + 4])), "gil_held");
    assert_non_null(ledger_read_stack(&r, s2));
    const ledger_read_pyframe_t *pa = ledger_read_pyframe(&r, lfmt_py_frame_id(f1[1]));
    const ledger_read_pyframe_t *pb = ledger_read_pyframe(&r, b);
    const ledger_read_pyframe_t *pc = ledger_read_pyframe(&r, c);
    assert_true(pa && pb && pc);
    assert_string_equal(pa->file, file);
    assert_string_equal(pa->function, "Model.forward");
    assert_int_equal(pa->line, 42);
    assert_string_equal(pb->function, "train_step");
    assert_int_equal(pb->line, 0);
    /* a name past the format's bound is cut at a character boundary */
    assert_int_equal(strlen(pc->function), LFMT_MAX_PY_NAME);
    assert_int_equal(strncmp(pc->function, long_name, LFMT_MAX_PY_NAME), 0);
    assert_int_equal(r.hdr.pyframes_lost, 0);
    size_t before = r.npyframes;
    assert_true(before >= 3);
    ledger_read_release(&r);
    /* a file made later holds every frame interned before it, and the new ones after */
    ledger_file_close(1);
    ledger_init(&(ledger_config_t){.backtrace_depth = 0, .file = pattern});
    uint32_t d = ledger_py_table_intern(file, "after", 1);
    read_file(&r);
    assert_int_equal(r.npyframes, before + 1);
    assert_non_null(ledger_read_pyframe(&r, a));
    assert_string_equal(ledger_read_pyframe(&r, d)->function, "after");
    ledger_read_release(&r);
    /* the last Python frame entry caught before its check word: torn, never used */
    size_t len;
    unsigned char *m = map_file(&len);
    unsigned char *e = entry_of(m, len, LFMT_KIND_PYFRAMES, d);
    assert_non_null(e);
    lfmt_entry_t eh;
    memcpy(&eh, e, sizeof eh);
    memset(e + eh.size - 8, 0, 8);
    read_file(&r);
    assert_int_equal(r.torn_entries, 1);
    assert_null(ledger_read_pyframe(&r, d));
    assert_non_null(ledger_read_pyframe(&r, a));
    ledger_read_release(&r);
    munmap(m, len);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_parked_forget_with_a_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_growth_and_clear, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_before_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_python_frames, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
