/* tests/fakeacl/fa_ctl.c — counters, fault injection, the statistics file and the invariant checker
 * of the fake runtime: the exported test-control API of fakeacl_ctl.h.
 *
 * Owns: fa_counter[] (relaxed atomics, one per entry point plus the derived counters named in
 * fa_internal.h) and the FAKEACL_STATS file written at process exit (a library destructor; a child
 * that leaves through _exit writes nothing).  Use "%p" in the path so forked children do not
 * overwrite their parent's file.  Fault settings and per-device figures live in fa_g under
 * fa_g.lock; counters are read without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fa_internal.h"
#include "fakeacl_ctl.h"

const char *const fa_counter_name[FA_NCOUNTERS] = {
#define FA_NAME(n) #n,
    FA_ENTRY_POINTS(FA_NAME) FA_DERIVED(FA_NAME)
#undef FA_NAME
};

uint64_t fa_counter[FA_NCOUNTERS];

/* Per-device figures, by suffix "_devN". */
enum dev_field { DF_CHARGED, DF_PEAK, DF_LIVE, DF_BUDGET, DF_N };
static const char *const dev_field_name[DF_N] = {"charged", "peak", "live", "budget"};

static uint64_t dev_field_locked(int dev, enum dev_field f)
{
    const struct fa_dev *d = &fa_g.dev[dev];
    switch (f) {
    case DF_CHARGED: return d->charged;
    case DF_PEAK: return d->peak;
    case DF_LIVE: return d->live;
    default: return d->budget;
    }
}

uint64_t fakeacl_count(const char *name)
{
    fa_init();
    if (name != NULL) {
        for (int i = 0; i < FA_NCOUNTERS; i++)
            if (strcmp(name, fa_counter_name[i]) == 0)
                return __atomic_load_n(&fa_counter[i], __ATOMIC_RELAXED);
        for (int f = 0; f < DF_N; f++) {
            size_t n = strlen(dev_field_name[f]);
            if (strncmp(name, dev_field_name[f], n) != 0 || strncmp(name + n, "_dev", 4) != 0)
                continue;
            const char *num = name + n + 4;
            char *end;
            long dev = strtol(num, &end, 10);
            if (*num < '0' || *num > '9' || *end != '\0' || dev >= fa_g.ndev) break;
            fa_lock();
            uint64_t v = dev_field_locked((int)dev, (enum dev_field)f);
            fa_unlock();
            return v;
        }
    }
    fa_err("fakeacl_count: no counter named \"%s\"", name ? name : "(null)");
    return UINT64_MAX;
}

void fakeacl_reset_counts(void)
{
    fa_init();
    for (int i = 0; i < FA_NCOUNTERS; i++) __atomic_store_n(&fa_counter[i], 0, __ATOMIC_RELAXED);
    fa_lock();
    for (int d = 0; d < fa_g.ndev; d++) fa_g.dev[d].peak = fa_g.dev[d].charged;
    fa_unlock();
}

void fakeacl_fail_nth_alloc(uint64_t n)
{
    fa_init();
    fa_lock();
    fa_g.fail_countdown = n;
    fa_unlock();
}

void fakeacl_fail_nth_physical(uint64_t n)
{
    fa_init();
    fa_lock();
    fa_g.fail_phys_countdown = n;
    fa_unlock();
}

void fakeacl_fail_nth_map(uint64_t n)
{
    fa_init();
    fa_lock();
    fa_g.fail_map_countdown = n;
    fa_unlock();
}

void fakeacl_fail_above(size_t bytes)
{
    fa_init();
    fa_lock();
    fa_g.fail_above = bytes;
    fa_unlock();
}

static uint64_t dev_field(int dev, enum dev_field f, uint64_t bad)
{
    fa_init();
    if (!fa_device_valid(dev)) return bad;
    fa_lock();
    uint64_t v = dev_field_locked(dev, f);
    fa_unlock();
    return v;
}

size_t fakeacl_charged(int dev) { return (size_t)dev_field(dev, DF_CHARGED, SIZE_MAX); }
size_t fakeacl_budget(int dev) { return (size_t)dev_field(dev, DF_BUDGET, SIZE_MAX); }
uint64_t fakeacl_live(int dev) { return dev_field(dev, DF_LIVE, UINT64_MAX); }

int fakeacl_set_budget(int dev, size_t bytes)
{
    fa_init();
    if (!fa_device_valid(dev) || bytes == 0) return -1;
    fa_lock();
    int ok = bytes >= fa_g.dev[dev].charged;
    if (ok) fa_g.dev[dev].budget = bytes;
    fa_unlock();
    return ok ? 0 : -1;
}

int fakeacl_device_count(void)
{
    fa_init();
    return fa_g.ndev;
}

struct owner_find {
    uintptr_t lo, hi; /* wanted range [lo, hi) */
    int dev;          /* owner found, or -1 */
};

static int range_owner(struct fa_rec *r, void *ctx)
{
    struct owner_find *f = ctx;
    if (f->lo >= r->key && f->hi <= r->key + r->size) f->dev = r->dev;
    return 0;
}

int fakeacl_bind_context(void *context)
{
    fa_init();
    return fa_bind_context(context);
}

int fakeacl_owner(const void *p, size_t len)
{
    fa_init();
    uintptr_t lo = (uintptr_t)p;
    if (p == NULL || lo > UINTPTR_MAX - len) return -1;
    struct owner_find f = {lo, lo + len, -1};
    fa_lock();
    struct fa_rec *r = fa_table_find(&fa_g.blocks, lo); /* the common case: a block's start */
    if (r != NULL) range_owner(r, &f);
    if (f.dev < 0) fa_table_walk(&fa_g.blocks, range_owner, &f);
    if (f.dev < 0) fa_table_walk(&fa_g.mappings, range_owner, &f);
    fa_unlock();
    return f.dev;
}

/* ---- statistics file -------------------------------------------------------------------------------- */
static int expand_path(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *s = in; *s != '\0'; s++) {
        char tmp[24];
        const char *piece = tmp;
        size_t n;
        if (s[0] == '%' && s[1] == 'p') {
            n = (size_t)snprintf(tmp, sizeof(tmp), "%ld", (long)getpid());
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            tmp[0] = '%';
            n = 1;
            s++;
        } else {
            piece = s;
            n = 1;
        }
        if (o + n >= cap) return -1;
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The body of fakeacl_write_stats; the exit hook calls it directly (no PLT call to our own export). */
static int stats_write(const char *path)
{
    char final[4200], tmp[4300];
    if (path == NULL || expand_path(path, final, sizeof(final)) != 0) {
        fa_err("stats path \"%s\" is empty or too long", path ? path : "(null)");
        return -1;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", final, (long)getpid());

    size_t cap = (size_t)(FA_NCOUNTERS + DF_N * FA_MAX_DEVICES) * 64;
    char *buf = malloc(cap);
    if (buf == NULL) {
        fa_err("no memory for the stats of %s", final);
        return -1;
    }
    size_t len = 0;
    for (int i = 0; i < FA_NCOUNTERS; i++)
        len +=
            (size_t)snprintf(buf + len, cap - len, "%s %llu\n", fa_counter_name[i],
                             (unsigned long long)__atomic_load_n(&fa_counter[i], __ATOMIC_RELAXED));
    fa_lock();
    for (int d = 0; d < fa_g.ndev; d++)
        for (int f = 0; f < DF_N; f++)
            len += (size_t)snprintf(buf + len, cap - len, "%s_dev%d %llu\n", dev_field_name[f], d,
                                    (unsigned long long)dev_field_locked(d, (enum dev_field)f));
    fa_unlock();

    int rc = -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        rc = write_all(fd, buf, len);
        if (close(fd) != 0) rc = -1;
        if (rc == 0 && rename(tmp, final) != 0) rc = -1;
        if (rc != 0) unlink(tmp);
    }
    if (rc != 0) fa_err("cannot write stats to %s: %s", final, strerror(errno));
    free(buf);
    return rc;
}

int fakeacl_write_stats(const char *path)
{
    fa_init();
    return stats_write(path);
}

__attribute__((destructor)) static void fa_stats_at_exit(void)
{
    if (fa_g.stats_path[0] != '\0') stats_write(fa_g.stats_path);
}

/* ---- invariant checker -------------------------------------------------------------------------------- */
struct check_ctx {
    int bad;                        /* violations found */
    size_t charged[FA_MAX_DEVICES]; /* bytes, summed from records */
    uint64_t live[FA_MAX_DEVICES];  /* records per device */
    size_t maps_listed;             /* mappings found on the handles' lists */
};

#define CHECK(ctx, cond, ...)              \
    do {                                   \
        if (!(cond)) {                     \
            (ctx)->bad++;                  \
            fa_err("check: " __VA_ARGS__); \
        }                                  \
    } while (0)

static int check_block(struct fa_rec *r, void *ctx)
{
    struct check_ctx *c = ctx;
    CHECK(c, r->dev >= 0 && r->dev < fa_g.ndev, "block %p has device %d", (void *)r->key, r->dev);
    CHECK(c, r->key % 64 == 0, "block %p is not 64-byte aligned", (void *)r->key);
    CHECK(c, r->size > 0 && r->size % 32 == 0 && r->maplen >= r->size && r->charged >= r->size,
          "block %p: size %zu, mapped %zu, charged %zu", (void *)r->key, r->size, r->maplen,
          r->charged);
    if (r->dev >= 0 && r->dev < FA_MAX_DEVICES) {
        c->charged[r->dev] += r->charged;
        c->live[r->dev]++;
    }
    return 0;
}

static int check_phys(struct fa_rec *r, void *ctx)
{
    struct check_ctx *c = ctx;
    CHECK(c, r->dev >= 0 && r->dev < fa_g.ndev, "handle %#lx has device %d", (unsigned long)r->key,
          r->dev);
    CHECK(c, r->fd >= 0 && r->size % FA_HUGE_PAGE == 0 && r->charged == r->size,
          "handle %#lx: fd %d, size %zu, charged %zu", (unsigned long)r->key, r->fd, r->size,
          r->charged);
    if (r->dev >= 0 && r->dev < fa_g.ndev)
        CHECK(c,
              (r->fd == fa_g.dev[r->dev].hbm_fd || fa_g.forked) && r->offset % FA_HUGE_PAGE == 0 &&
                  r->offset + r->size <= fa_g.dev[r->dev].hbm_next,
              "handle %#lx: file %d offset %zu, its device's file %d (next %zu)",
              (unsigned long)r->key, r->fd, r->offset, fa_g.dev[r->dev].hbm_fd,
              fa_g.dev[r->dev].hbm_next);
    if (r->dev >= 0 && r->dev < FA_MAX_DEVICES) {
        c->charged[r->dev] += r->charged;
        c->live[r->dev]++;
    }
    uint32_t n = 0;
    const struct fa_rec *prev = NULL;
    for (const struct fa_rec *m = r->pmaps; m != NULL && n <= r->nmaps; prev = m, m = m->psib) {
        n++;
        CHECK(c, m->phys == r && m->psib_prev == prev,
              "mapping %p on the list of handle %#lx is not its own or badly linked",
              (void *)m->key, (unsigned long)r->key);
    }
    CHECK(c, n == r->nmaps, "handle %#lx: %u mappings listed, nmaps %u", (unsigned long)r->key, n,
          r->nmaps);
    c->maps_listed += n;
    return 0;
}

static int check_resv(struct fa_rec *r, void *ctx)
{
    struct check_ctx *c = ctx;
    uint32_t n = 0;
    size_t granules = 0;
    const struct fa_rec *prev = NULL;
    for (const struct fa_rec *m = r->maps; m != NULL && n <= r->nmaps; prev = m, m = m->sib) {
        n++;
        CHECK(c, m->resv == r && m->sib_prev == prev && fa_table_find(&fa_g.mappings, m->key) == m,
              "mapping %p in the list of reservation %p is not its own, badly linked or not in "
              "the table",
              (void *)m->key, (void *)r->key);
        granules += m->size / FA_HUGE_PAGE;
        for (uintptr_t a = m->key; r->gbits && a < m->key + m->size; a += FA_HUGE_PAGE) {
            size_t g = (a - r->key) / FA_HUGE_PAGE;
            CHECK(c, r->gbits[g >> 6] >> (g & 63) & 1, "mapping %p: granule %zu not marked",
                  (void *)m->key, g);
        }
    }
    CHECK(c, n == r->nmaps, "reservation %p: %u mappings listed, nmaps %u", (void *)r->key, n,
          r->nmaps);
    size_t set = 0;
    for (size_t w = 0; r->gbits && w < (r->size / FA_HUGE_PAGE + 63) / 64; w++)
        set += (size_t)__builtin_popcountll(r->gbits[w]);
    /* every mapped granule marked, and no more marked: the mappings do not overlap */
    CHECK(c, set == granules, "reservation %p: %zu granules marked, its mappings cover %zu",
          (void *)r->key, set, granules);
    return 0;
}

static int check_mapping(struct fa_rec *m, void *ctx)
{
    struct check_ctx *c = ctx;
    const struct fa_rec *rv = m->resv, *ph = m->phys;
    CHECK(c, rv != NULL && fa_table_find(&fa_g.resvs, rv->key) == rv, "mapping %p: no reservation",
          (void *)m->key);
    CHECK(c, ph != NULL && fa_table_find(&fa_g.physs, ph->key) == ph, "mapping %p: no handle",
          (void *)m->key);
    if (rv != NULL)
        CHECK(c, m->key >= rv->key && m->key + m->size <= rv->key + rv->size,
              "mapping %p (+%zu) outside its reservation", (void *)m->key, m->size);
    if (ph != NULL)
        CHECK(c, m->offset + m->size <= ph->size, "mapping %p: offset %zu + %zu beyond its handle",
              (void *)m->key, m->offset, m->size);
    return 0;
}

int fa_check_locked(void)
{
    struct check_ctx c;
    memset(&c, 0, sizeof(c));
    const struct fa_table *tabs[] = {&fa_g.blocks, &fa_g.hosts, &fa_g.resvs, &fa_g.physs,
                                     &fa_g.mappings};
    for (size_t i = 0; i < sizeof(tabs) / sizeof(tabs[0]); i++)
        CHECK(&c, fa_table_chained(tabs[i]) == tabs[i]->count, "table %zu: count %zu, chained %zu",
              i, tabs[i]->count, fa_table_chained(tabs[i]));
    fa_table_walk(&fa_g.blocks, check_block, &c);
    fa_table_walk(&fa_g.physs, check_phys, &c);
    fa_table_walk(&fa_g.resvs, check_resv, &c);
    fa_table_walk(&fa_g.mappings, check_mapping, &c);
    CHECK(&c, c.maps_listed == fa_g.mappings.count,
          "%zu mappings on the handles' lists, %zu in the table", c.maps_listed,
          fa_g.mappings.count);
    for (int d = 0; d < fa_g.ndev; d++) {
        const struct fa_dev *dv = &fa_g.dev[d];
        CHECK(&c, dv->charged == c.charged[d], "device %d: charged %zu, records add up to %zu", d,
              dv->charged, c.charged[d]);
        CHECK(&c, dv->live == c.live[d], "device %d: live %llu, records %llu", d,
              (unsigned long long)dv->live, (unsigned long long)c.live[d]);
        CHECK(&c, dv->charged <= dv->budget && dv->peak >= dv->charged,
              "device %d: charged %zu, budget %zu, peak %zu", d, dv->charged, dv->budget, dv->peak);
    }
    return c.bad;
}

int fakeacl_check(void)
{
    fa_init();
    fa_lock();
    int bad = fa_check_locked();
    fa_unlock();
    return bad;
}
