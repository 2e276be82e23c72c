/* tools/report_read.c — loading and validating a report into report_t (see report_read.h).
 *
 * Algorithm: the bytes are checked as they are read (jsonscan_feed: the first byte that cannot be
 * a JSON object stops the read); cJSON parses the whole document (nesting is bounded by cJSON's
 * own limit, so hostile input cannot exhaust the stack); one pass gives the number nodes whose
 * literal a double may not hold exactly their literal text (attach_literals); then one walk
 * copies the typed fields out, checking each.  The JSON path of the value being read is kept as a
 * small stack of (key | index) segments and only formatted when a message is needed, so
 * validation costs nothing per field on good input.
 */
#include "report_read.h"

#include "input.h"
#include "jsonscan.h"
#include "parse.h"
#include "tools.h"
#include "vocab.h"
#include "wire.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_DEPTH 8

typedef struct rd {
    const char *name;            /* file name for messages */
    int quiet;                   /* no messages (fuzzer) */
    int nseg;                    /* segments in use */
    const char *key[PATH_DEPTH]; /* object key of segment i, or NULL for an index */
    size_t idx[PATH_DEPTH];      /* array index of segment i */
    int failed;                  /* 1 after the first error */
} rd_t;

static void push_key(rd_t *d, const char *k)
{
    if (d->nseg < PATH_DEPTH) d->key[d->nseg] = k, d->idx[d->nseg] = 0;
    d->nseg++;
}
static void push_idx(rd_t *d, size_t i)
{
    if (d->nseg < PATH_DEPTH) d->key[d->nseg] = NULL, d->idx[d->nseg] = i;
    d->nseg++;
}
static void pop(rd_t *d) { d->nseg--; }

static int fail(rd_t *d, const char *leaf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(rd_t *d, const char *leaf, const char *fmt, ...)
{
    if (d->failed) return -1;
    d->failed = 1;
    if (d->quiet) return -1;
    char path[256] = "$";
    size_t n = 1;
    for (int i = 0; i < d->nseg && i < PATH_DEPTH && n < sizeof path; i++) {
        if (d->key[i])
            n += (size_t)snprintf(path + n, sizeof path - n, ".%s", d->key[i]);
        else
            n += (size_t)snprintf(path + n, sizeof path - n, "[%zu]", d->idx[i]);
    }
    if (leaf && n < sizeof path) snprintf(path + n, sizeof path - n, ".%s", leaf);
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tools_err("%s: at %s: %s", d->name, path, msg);
    return -1;
}

static const char *type_name(const cJSON *v)
{
    if (v == NULL) return "nothing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an invalid value";
}

_Static_assert(JSONSCAN_MAX_DEPTH == CJSON_NESTING_LIMIT, "the pre-check takes what cJSON takes");

/* ---- typed getters: return 0 ok / 1 absent (optional) / -1 error ---------------------------- */

static cJSON *member(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* Number literals of at most this many digits, with no fraction or exponent, are exact as a
 * double; any other keeps its text (attach_literals). */
#define EXACT_DIGITS 15

/* The exact value of a number node: enum jsonscan_int. */
static int number_exact(const cJSON *v, int *neg, uint64_t *mag)
{
    if (v->valuestring) return jsonscan_integer(v->valuestring, strlen(v->valuestring), neg, mag);
    double x = v->valuedouble; /* an integer literal of at most EXACT_DIGITS digits */
    *neg = x < 0;
    *mag = (uint64_t)(x < 0 ? -x : x);
    return JSONSCAN_INT;
}

/* A number as it was written, for messages and texts. */
static const char *number_text(const cJSON *v, char *buf, size_t cap)
{
    if (v->valuestring)
        snprintf(buf, cap, "%s", v->valuestring);
    else
        snprintf(buf, cap, "%.0f", v->valuedouble);
    return buf;
}

static int as_u64(rd_t *d, const cJSON *v, const char *leaf, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return fail(d, leaf, "expected an unsigned integer, found %s", type_name(v));
    int neg;
    uint64_t mag;
    int k = number_exact(v, &neg, &mag);
    if (k == JSONSCAN_INT && !(neg && mag)) {
        *out = mag;
        return 0;
    }
    char t[48];
    return fail(d, leaf, "expected an unsigned integer%s, found %s",
                k == JSONSCAN_RANGE ? " (at most 18446744073709551615)" : "",
                number_text(v, t, sizeof t));
}

static int get_u64(rd_t *d, const cJSON *obj, const char *key, int required, uint64_t *out)
{
    cJSON *v = member(obj, key);
    if (v == NULL || (!required && cJSON_IsNull(v))) {
        if (required) return fail(d, key, "missing (required)");
        return 1;
    }
    return as_u64(d, v, key, out);
}

static int get_i64(rd_t *d, const cJSON *obj, const char *key, int required, int64_t *out)
{
    cJSON *v = member(obj, key);
    if (v == NULL) return required ? fail(d, key, "missing (required)") : 1;
    if (!cJSON_IsNumber(v)) return fail(d, key, "expected an integer, found %s", type_name(v));
    int neg;
    uint64_t mag;
    if (number_exact(v, &neg, &mag) != JSONSCAN_INT || mag > (uint64_t)INT64_MAX + neg) {
        char t[48];
        return fail(d, key, "expected a 64-bit integer, found %s", number_text(v, t, sizeof t));
    }
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

static int get_long(rd_t *d, const cJSON *obj, const char *key, int required, long *out)
{
    int64_t v = 0;
    int rc = get_i64(d, obj, key, required, &v);
    if (rc == 0) {
        if (v < -2147483647 || v > 2147483647) return fail(d, key, "out of range: %" PRId64, v);
        *out = (long)v;
    }
    return rc;
}

/* "device": VOCAB_DEVICE_UNKNOWN or a tracked device id. */
static int get_device(rd_t *d, const cJSON *obj, int required, long *out)
{
    int rc = get_long(d, obj, "device", required, out);
    if (rc == 0 && *out != VOCAB_DEVICE_UNKNOWN && !vocab_device_known((int)*out))
        return fail(d, "device", "expected a device id (%d = unknown, or 0..%d), found %ld",
                    VOCAB_DEVICE_UNKNOWN, NPUPOOL_MAX_DEVICES - 1, *out);
    return rc;
}

static int get_double(rd_t *d, const cJSON *obj, const char *key, int required, double *out)
{
    cJSON *v = member(obj, key);
    if (v == NULL || (!required && cJSON_IsNull(v)))
        return required ? fail(d, key, "missing (required)") : 1;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return fail(d, key, "expected a number, found %s", type_name(v));
    *out = v->valuedouble;
    return 0;
}

/* String or null (null / absent -> *out = NULL when optional). */
static int get_str(rd_t *d, const cJSON *obj, const char *key, int required, const char **out)
{
    cJSON *v = member(obj, key);
    if (v == NULL || cJSON_IsNull(v)) {
        *out = NULL;
        return required ? fail(d, key, "missing (required)") : 1;
    }
    if (!cJSON_IsString(v)) return fail(d, key, "expected a string, found %s", type_name(v));
    *out = v->valuestring;
    return 0;
}

/* An object or an array (`is` tells which, `what` names it). */
static int get_container(rd_t *d, const cJSON *obj, const char *key, int required,
                         cJSON_bool (*is)(const cJSON *), const char *what, cJSON **out)
{
    cJSON *v = member(obj, key);
    if (v == NULL || (!required && cJSON_IsNull(v))) {
        *out = NULL;
        return required ? fail(d, key, "missing (required)") : 1;
    }
    if (!is(v)) return fail(d, key, "expected %s, found %s", what, type_name(v));
    *out = v;
    return 0;
}

static int get_obj(rd_t *d, const cJSON *obj, const char *key, int required, cJSON **out)
{
    return get_container(d, obj, key, required, cJSON_IsObject, "an object", out);
}

static int get_arr(rd_t *d, const cJSON *obj, const char *key, int required, cJSON **out)
{
    return get_container(d, obj, key, required, cJSON_IsArray, "an array", out);
}

/* true/false or absent/null (-> 0). */
static int get_flag(rd_t *d, const cJSON *obj, const char *key, int *out)
{
    cJSON *v = member(obj, key);
    *out = 0;
    if (v == NULL || cJSON_IsNull(v)) return 1;
    if (!cJSON_IsBool(v)) return fail(d, key, "expected true or false, found %s", type_name(v));
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
}

/* A number or a string, as text (times, ids). */
static int get_text(rd_t *d, const cJSON *obj, const char *key, char *buf, size_t cap, double *num)
{
    cJSON *v = member(obj, key);
    buf[0] = '\0';
    if (num) *num = 0;
    if (v == NULL || cJSON_IsNull(v)) return 1;
    if (cJSON_IsString(v)) {
        snprintf(buf, cap, "%s", v->valuestring);
        return 0;
    }
    if (cJSON_IsNumber(v)) {
        number_text(v, buf, cap);
        if (num) *num = v->valuedouble;
        return 0;
    }
    return fail(d, key, "expected a number or a string, found %s", type_name(v));
}

/* "0x7f0000000000" (at most 16 hex digits) or a decimal integer, exactly.  0 or -1. */
static int parse_address(const char *s, uint64_t *out)
{
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return parse_u64(s, out);
    uint64_t v = 0;
    size_t n = 0;
    for (const char *p = s + 2; *p; p++, n++) {
        unsigned c = (unsigned char)*p, x;
        if (c >= '0' && c <= '9')
            x = c - '0';
        else if ((c | 32) >= 'a' && (c | 32) <= 'f')
            x = (c | 32) - 'a' + 10;
        else
            return -1;
        v = v << 4 | x;
    }
    if (n == 0 || n > 16) return -1;
    *out = v;
    return 0;
}

/* ---- parts -------------------------------------------------------------------------------- */

static int read_frames(rd_t *d, const cJSON *parent, report_frame_t **out, size_t *n)
{
    cJSON *arr;
    *out = NULL;
    *n = 0;
    int rc = get_arr(d, parent, "frames", 0, &arr);
    if (rc < 0) return -1;
    if (rc == 1) return 0;
    size_t cnt = (size_t)cJSON_GetArraySize(arr);
    if (cnt == 0) return 0;
    report_frame_t *f = calloc(cnt, sizeof *f);
    if (f == NULL) return fail(d, "frames", "out of memory");
    *out = f;
    push_key(d, "frames");
    size_t i = 0;
    cJSON *fr;
    cJSON_ArrayForEach(fr, arr)
    {
        push_idx(d, i);
        if (!cJSON_IsObject(fr)) {
            fail(d, NULL, "expected a frame object, found %s", type_name(fr));
            return -1;
        }
        report_frame_t *x = &f[i];
        x->node = fr;
        if (get_str(d, fr, "function", 0, &x->function) < 0 ||
            get_str(d, fr, "module", 0, &x->module) < 0 ||
            get_str(d, fr, "file", 0, &x->file) < 0 ||
            get_str(d, fr, "build_id", 0, &x->build_id) < 0)
            return -1;
        cJSON *off = member(fr, "offset");
        if (off && cJSON_IsString(off)) { /* "0x1234" is accepted too */
            if (parse_address(off->valuestring, &x->offset) != 0)
                return fail(d, "offset", "expected an offset, found '%.40s'", off->valuestring);
            x->has_offset = 1;
        } else {
            int r = get_u64(d, fr, "offset", 0, &x->offset);
            if (r < 0) return -1;
            x->has_offset = r == 0;
        }
        if (get_u64(d, fr, "line", 0, &x->line) < 0) return -1;
        if (get_flag(d, fr, "python", &x->python) < 0) return -1;
        if (x->function && x->function[0] == '\0') x->function = NULL;
        if (x->file && x->file[0] == '\0') x->file = NULL;
        pop(d);
        i++;
    }
    pop(d);
    *n = cnt;
    return 0;
}

static int read_pair_list(rd_t *d, const cJSON *dev, const char *key, report_extent_t **out,
                          size_t *n)
{
    cJSON *arr;
    *out = NULL;
    *n = 0;
    int rc = get_arr(d, dev, key, 0, &arr);
    if (rc != 0) return rc < 0 ? -1 : 0;
    size_t cnt = (size_t)cJSON_GetArraySize(arr);
    if (cnt == 0) return 0;
    report_extent_t *e = malloc(cnt * sizeof *e);
    if (e == NULL) return fail(d, key, "out of memory");
    *out = e;
    push_key(d, key);
    size_t i = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        push_idx(d, i);
        int sz = cJSON_GetArraySize(it);
        int is_free = !strcmp(key, "free_map");
        if (!cJSON_IsArray(it) || sz < 2 || sz > 3)
            return fail(d, NULL, "expected [offset, size] or [offset, size, %s], found %s",
                        is_free ? "1" : "site",
                        cJSON_IsArray(it) ? "another array" : type_name(it));
        if (as_u64(d, cJSON_GetArrayItem(it, 0), "[0]", &e[i].offset) < 0 ||
            as_u64(d, cJSON_GetArrayItem(it, 1), "[1]", &e[i].size) < 0)
            return -1;
        e[i].site = -1;
        e[i].slots = 0;
        if (sz == 3) {
            uint64_t s;
            if (as_u64(d, cJSON_GetArrayItem(it, 2), "[2]", &s) < 0) return -1;
            if (is_free && s != 1) return fail(d, "[2]", "expected 1 (free slots)");
            if (is_free)
                e[i].slots = 1;
            else
                e[i].site = s < 0x7fffffff ? (long)s : -1;
        }
        if (e[i].size == 0) return fail(d, NULL, "block of size 0");
        pop(d);
        i++;
    }
    pop(d);
    *n = cnt;
    return 0;
}

static int read_buckets(rd_t *d, const cJSON *dev, report_device_t *o)
{
    cJSON *arr;
    int rc = get_arr(d, dev, "buckets", 0, &arr);
    if (rc != 0) return rc < 0 ? -1 : 0;
    size_t cnt = (size_t)cJSON_GetArraySize(arr);
    if (cnt == 0) return 0;
    o->buckets = calloc(cnt, sizeof *o->buckets);
    if (o->buckets == NULL) return fail(d, "buckets", "out of memory");
    push_key(d, "buckets");
    size_t i = 0;
    cJSON *b;
    cJSON_ArrayForEach(b, arr)
    {
        push_idx(d, i);
        if (!cJSON_IsObject(b))
            return fail(d, NULL, "expected a bucket object, found %s", type_name(b));
        report_bucket_t *x = &o->buckets[i];
        cJSON *range = member(b, "range");
        if (range && cJSON_IsArray(range) && cJSON_GetArraySize(range) == 2) {
            cJSON *hi = cJSON_GetArrayItem(range, 1);
            if (as_u64(d, cJSON_GetArrayItem(range, 0), "range[0]", &x->lo) < 0) return -1;
            if (cJSON_IsNull(hi))
                x->hi = UINT64_MAX;
            else if (as_u64(d, hi, "range[1]", &x->hi) < 0)
                return -1;
            x->has_range = 1;
        } else if (range && !cJSON_IsNull(range)) {
            return fail(d, "range", "expected [min_bytes, max_bytes or null], found %s",
                        type_name(range));
        } else {
            uint64_t lo = 0, hi = 0;
            int a = get_u64(d, b, "min_bytes", 0, &lo), c = get_u64(d, b, "max_bytes", 0, &hi);
            if (a < 0 || c < 0) return -1;
            if (a == 0) {
                x->lo = lo;
                x->hi = c == 0 ? hi : UINT64_MAX;
                x->has_range = 1;
            }
        }
        if (get_str(d, b, "label", 0, &x->label) < 0) return -1;
        if (get_u64(d, b, "live_blocks", 0, &x->live_blocks) < 0 ||
            get_u64(d, b, "free_blocks", 0, &x->free_blocks) < 0 ||
            get_u64(d, b, "free_bytes", 0, &x->free_bytes) < 0)
            return -1;
        int r = get_u64(d, b, "live_bytes", 0, &x->live_bytes);
        if (r < 0 || (r == 1 && get_u64(d, b, "bytes", 0, &x->live_bytes) < 0)) return -1;
        pop(d);
        i++;
    }
    pop(d);
    o->nbuckets = cnt;
    return 0;
}

static int read_device(rd_t *d, const cJSON *dev, report_device_t *o)
{
    if (!cJSON_IsObject(dev))
        return fail(d, NULL, "expected a device object, found %s", type_name(dev));
    if (get_device(d, dev, 1, &o->device) < 0) return -1;
    cJSON *pool = member(dev, "pool");
    if (pool == NULL)
        return fail(d, "pool", "missing (required; null when the device has no pool)");
    if (cJSON_IsNull(pool)) goto after_pool;
    if (!cJSON_IsObject(pool))
        return fail(d, "pool", "expected an object or null, found %s", type_name(pool));
    o->has_pool = 1;
    push_key(d, "pool");
    if (get_u64(d, pool, "reserved_bytes", 1, &o->reserved) < 0 ||
        get_u64(d, pool, "allocated_bytes", 1, &o->allocated) < 0 ||
        get_u64(d, pool, "free_bytes", 1, &o->free_bytes) < 0 ||
        get_u64(d, pool, "largest_free_bytes", 1, &o->largest_free) < 0 ||
        get_double(d, pool, "fragmentation", 1, &o->fragmentation) < 0 ||
        get_u64(d, pool, "requested_bytes", 0, &o->requested) < 0 ||
        get_u64(d, pool, "peak_allocated_bytes", 0, &o->peak_allocated) < 0 ||
        get_u64(d, pool, "free_blocks", 0, &o->free_blocks) < 0 ||
        get_u64(d, pool, "overhead_bytes", 0, &o->overhead) < 0)
        return -1;
    cJSON *base = member(pool, "base");
    if (base && cJSON_IsString(base)) {
        if (parse_address(base->valuestring, &o->base) != 0)
            return fail(d, "base", "expected an address, found '%.40s'", base->valuestring);
    } else if (get_u64(d, pool, "base", 0, &o->base) < 0) {
        return -1;
    }
    if (o->fragmentation < 0 || o->fragmentation > 1)
        return fail(d, "fragmentation", "expected a fraction in [0, 1], found %g",
                    o->fragmentation);
    if (o->largest_free > o->free_bytes)
        return fail(d, "largest_free_bytes", "larger than free_bytes (%" PRIu64 " > %" PRIu64 ")",
                    o->largest_free, o->free_bytes);
    pop(d);
after_pool:
    if (read_buckets(d, dev, o) < 0) return -1;
    if (read_pair_list(d, dev, "free_map", &o->free_map, &o->nfree_map) < 0) return -1;
    if (read_pair_list(d, dev, "live_map", &o->live_map, &o->nlive_map) < 0) return -1;
    uint64_t om = 0;
    int r = get_u64(d, dev, "free_map_omitted", 0, &om);
    if (r < 0) return -1;
    o->free_map_omitted = r == 0 ? om : 0;
    if (get_u64(d, dev, "free_map_omitted_bytes", 0, &o->free_map_omitted_bytes) < 0) return -1;
    cJSON *ctr;
    if (get_obj(d, dev, "counters", 0, &ctr) < 0) return -1;
    if (ctr) {
        size_t cnt = (size_t)cJSON_GetArraySize(ctr);
        o->counters = cnt ? calloc(cnt, sizeof *o->counters) : NULL;
        if (cnt && o->counters == NULL) return fail(d, "counters", "out of memory");
        push_key(d, "counters");
        cJSON *c;
        size_t i = 0;
        cJSON_ArrayForEach(c, ctr)
        {
            o->counters[i].name = c->string;
            if (as_u64(d, c, c->string, &o->counters[i].value) < 0) return -1;
            i++;
        }
        pop(d);
        o->ncounters = cnt;
    }
    return 0;
}

static int read_leak(rd_t *d, const cJSON *lk, report_leak_t *o)
{
    if (!cJSON_IsObject(lk))
        return fail(d, NULL, "expected a leak object, found %s", type_name(lk));
    if (get_device(d, lk, 1, &o->device) < 0 || get_u64(d, lk, "count", 1, &o->count) < 0 ||
        get_u64(d, lk, "bytes", 1, &o->bytes) < 0 ||
        get_u64(d, lk, "granted_bytes", 0, &o->granted) < 0 ||
        get_double(d, lk, "oldest_age_s", 0, &o->oldest_age_s) < 0)
        return -1;
    if (get_text(d, lk, "stack_id", o->stack_id, sizeof o->stack_id, NULL) < 0) return -1;
    cJSON *g;
    int r = get_obj(d, lk, "growth", 0, &g);
    if (r < 0) return -1;
    if (r == 0) {
        push_key(d, "growth");
        if (get_i64(d, g, "count", 1, &o->growth_count) < 0 ||
            get_i64(d, g, "bytes", 1, &o->growth_bytes) < 0)
            return -1;
        pop(d);
        o->has_growth = 1;
    }
    if (get_str(d, lk, "python_frames", 0, &o->python_frames) < 0) return -1;
    return read_frames(d, lk, &o->frames, &o->nframes);
}

static void join_cmdline(const cJSON *v, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (cJSON_IsString(v)) {
        snprintf(buf, cap, "%s", v->valuestring);
    } else if (cJSON_IsArray(v)) {
        size_t n = 0;
        cJSON *a;
        cJSON_ArrayForEach(a, v)
        {
            if (!cJSON_IsString(a) || n + 2 >= cap) continue;
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? " " : "", a->valuestring);
            if (n >= cap) n = cap - 1;
        }
    }
}

static int read_report(rd_t *d, report_t *r)
{
    cJSON *root = r->root;
    if (!cJSON_IsObject(root))
        return fail(d, NULL, "a report is a JSON object, found %s", type_name(root));
    cJSON *sch = member(root, "schema");
    if (sch == NULL) return fail(d, "schema", "missing: not an npupool report");
    if (!cJSON_IsString(sch))
        return fail(d, "schema", "expected a string, found %s", type_name(sch));
    if (strcmp(sch->valuestring, WIRE_REPORT_SCHEMA) != 0)
        return fail(d, "schema", "report of schema '%.60s'; this npupool reads '%s'",
                    sch->valuestring, WIRE_REPORT_SCHEMA);
    r->schema = sch->valuestring;
    if (get_str(d, root, "trigger", 1, &r->trigger) < 0) return -1;
    cJSON *proc;
    if (get_obj(d, root, "process", 1, &proc) < 0) return -1;
    push_key(d, "process");
    if (get_long(d, proc, "pid", 1, &r->pid) < 0 || get_long(d, proc, "rank", 0, &r->rank) < 0 ||
        get_str(d, proc, "exe", 0, &r->exe) < 0 ||
        get_str(d, proc, "hostname", 0, &r->hostname) < 0 ||
        get_text(d, proc, "start_time", r->start_time, sizeof r->start_time, NULL) < 0 ||
        get_text(d, proc, "dump_time", r->dump_time, sizeof r->dump_time, &r->dump_time_s) < 0)
        return -1;
    r->uptime_s = -1;
    if (get_double(d, proc, "uptime_s", 0, &r->uptime_s) < 0) return -1;
    cJSON *cl = member(proc, "cmdline");
    if (cl && !cJSON_IsString(cl) && !cJSON_IsArray(cl) && !cJSON_IsNull(cl))
        return fail(d, "cmdline", "expected a string or an array of strings, found %s",
                    type_name(cl));
    join_cmdline(cl, r->cmdline, sizeof r->cmdline);
    if (r->exe == NULL) r->exe = "";
    if (r->hostname == NULL) r->hostname = "";
    pop(d);
    if (get_obj(d, root, "config", 0, &r->config) < 0) return -1;
    r->sequence = -1;
    if (get_long(d, root, "sequence", 0, &r->sequence) < 0) return -1;

    cJSON *devs;
    if (get_arr(d, root, "devices", 1, &devs) < 0) return -1;
    size_t nd = (size_t)cJSON_GetArraySize(devs);
    if (nd) {
        r->devices = calloc(nd, sizeof *r->devices);
        if (r->devices == NULL) return fail(d, "devices", "out of memory");
    }
    push_key(d, "devices");
    size_t i = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, devs)
    {
        push_idx(d, i);
        r->ndevices = i + 1; /* so release frees what was read */
        if (read_device(d, it, &r->devices[i]) < 0) return -1;
        pop(d);
        i++;
    }
    pop(d);

    cJSON *leaks;
    if (get_arr(d, root, "leaks", 1, &leaks) < 0) return -1;
    size_t nl = (size_t)cJSON_GetArraySize(leaks);
    if (nl) {
        r->leaks = calloc(nl, sizeof *r->leaks);
        if (r->leaks == NULL) return fail(d, "leaks", "out of memory");
    }
    push_key(d, "leaks");
    i = 0;
    cJSON_ArrayForEach(it, leaks)
    {
        push_idx(d, i);
        r->nleaks = i + 1;
        if (read_leak(d, it, &r->leaks[i]) < 0) return -1;
        pop(d);
        i++;
    }
    pop(d);
    if (get_u64(d, root, "leaks_omitted", 0, &r->leaks_omitted) < 0) return -1;
    for (size_t k = 0; k < r->ndevices; k++)
        for (size_t j = 0; j < r->devices[k].nlive_map; j++)
            if (r->devices[k].live_map[j].site >= (long)r->nleaks)
                r->devices[k].live_map[j].site = -1;

    cJSON *oom;
    int rc = get_obj(d, root, "oom", 0, &oom);
    if (rc < 0) return -1;
    if (rc == 0) {
        report_oom_t *o = &r->oom;
        o->present = 1;
        o->written_after_ms = -1;
        push_key(d, "oom");
        if (get_u64(d, oom, "requested_bytes", 1, &o->requested) < 0 ||
            get_device(d, oom, 0, &o->device) < 0 ||
            get_str(d, oom, "entry_point", 0, &o->entry_point) < 0 ||
            get_u64(d, oom, "free_bytes", 0, &o->free_bytes) < 0 ||
            get_u64(d, oom, "largest_free_bytes", 0, &o->largest_free) < 0 ||
            get_str(d, oom, "reason", 0, &o->reason) < 0 ||
            get_double(d, oom, "written_after_refusal_ms", 0, &o->written_after_ms) < 0 ||
            read_frames(d, oom, &o->frames, &o->nframes) < 0)
            return -1;
        pop(d);
    }
    return 0;
}

/* Line and column (1-based) of byte `pos`. */
static void line_col(const char *buf, size_t pos, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < pos; i++) {
        if (buf[i] == '\n')
            (*line)++, *col = 1;
        else
            (*col)++;
    }
}

/* "FILE:LINE:COL: invalid JSON near '...'" for the byte at pos (buf holds len bytes). */
static void invalid_near(const char *name, const char *buf, size_t len, size_t pos)
{
    size_t line, col;
    line_col(buf, pos, &line, &col);
    char near[24];
    size_t k = 0;
    for (size_t i = pos; i < len && k < 16; i++)
        near[k++] = (buf[i] >= 32 && buf[i] < 127) ? buf[i] : '?';
    near[k] = '\0';
    tools_err("%s:%zu:%zu: invalid JSON near '%s'%s", name, line, col, near,
              len - pos > 16 ? "..." : "");
}

/* The message for a failed jsonscan_feed over buf[0..len). */
static void scan_error(const char *name, const jsonscan_t *s, const char *buf, size_t len)
{
    size_t line, col;
    unsigned c = (unsigned char)buf[s->bad];
    line_col(buf, s->bad, &line, &col);
    switch (s->why) {
    case JSONSCAN_NUL: tools_err("%s:%zu:%zu: NUL byte: not JSON", name, line, col); break;
    case JSONSCAN_CONTROL:
        tools_err("%s:%zu:%zu: invalid JSON: control byte 0x%02x%s", name, line, col, c,
                  s->in_string ? " in a string" : "");
        break;
    case JSONSCAN_NOT_OBJECT:
        if (c >= 32 && c < 127)
            tools_err("%s:%zu:%zu: not a report: expected a JSON object ('{'), found '%c'", name,
                      line, col, (int)c);
        else
            tools_err("%s:%zu:%zu: not a report: expected a JSON object ('{'), found byte 0x%02x",
                      name, line, col, c);
        break;
    case JSONSCAN_DEPTH:
        tools_err("%s:%zu:%zu: JSON nested deeper than %d levels", name, line, col,
                  JSONSCAN_MAX_DEPTH);
        break;
    case JSONSCAN_TRAILING:
        tools_err("%s:%zu:%zu: unexpected data after the JSON document", name, line, col);
        break;
    default: invalid_near(name, buf, len, s->bad);
    }
}

typedef struct file_check {
    const char *name; /* file name for messages */
    jsonscan_t scan;  /* the pre-check, piece by piece */
} file_check_t;

static int file_check(void *ctx, const char *buf, size_t len)
{
    file_check_t *f = ctx;
    if (jsonscan_feed(&f->scan, buf, len) == 0) return 0;
    scan_error(f->name, &f->scan, buf, len);
    return TOOLS_BAD;
}

/* Literals of at most EXACT_DIGITS digits and no fraction or exponent are exact as doubles. */
static int literal_is_exact(const char *t, size_t n)
{
    size_t digits = n - (*t == '-');
    if (digits > EXACT_DIGITS) return 0;
    for (size_t i = *t == '-'; i < n; i++)
        if (t[i] < '0' || t[i] > '9') return 0;
    return 1;
}

/* Give each number node whose literal a double may not hold exactly that literal, as its
 * valuestring (cJSON_Delete frees it; cJSON reads and prints a number from valuedouble only).
 * The literals come in document order, which is the pre-order of the tree.  -1 when literals
 * and nodes do not pair up (never, for a document cJSON accepted) or on host OOM. */
static int attach_literals(cJSON *root, const char *buf, size_t len)
{
    cJSON *after[CJSON_NESTING_LIMIT + 2]; /* the next sibling of each level above */
    int depth = 0;
    size_t pos = 0, at, n;
    for (cJSON *v = root; v != NULL;) {
        if (cJSON_IsNumber(v)) {
            if (jsonscan_next_number(buf, len, pos, &at, &n) != 0) return -1;
            pos = at + n;
            if (!literal_is_exact(buf + at, n)) {
                v->valuestring = cJSON_malloc(n + 1);
                if (v->valuestring == NULL) return -1;
                memcpy(v->valuestring, buf + at, n);
                v->valuestring[n] = '\0';
            }
        }
        if (v->child) {
            if (depth == (int)(sizeof after / sizeof after[0])) return -1;
            after[depth++] = v->next;
            v = v->child;
            continue;
        }
        v = v->next;
        while (v == NULL && depth > 0) v = after[--depth];
    }
    return jsonscan_next_number(buf, len, pos, &at, &n) == 0 ? -1 : 0;
}

static int parse(const char *name, const char *buf, size_t len, report_t *r, int quiet, int scanned)
{
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", name);
    rd_t d = {.name = name, .quiet = quiet};
    const char *end = NULL;
    if (len == 0) {
        if (!quiet) tools_err("%s: empty file: not a report", name);
        return TOOLS_BAD;
    }
    jsonscan_t scan = {0};
    if (!scanned && jsonscan_feed(&scan, buf, len) != 0) {
        if (!quiet) scan_error(name, &scan, buf, len);
        return TOOLS_BAD;
    }
    r->root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (r->root == NULL) {
        if (!quiet) {
            size_t pos = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
            int at_end = 1;
            for (size_t i = pos; i < len; i++)
                if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\r' && buf[i] != '\t') {
                    at_end = 0;
                    break;
                }
            size_t line, col;
            line_col(buf, pos, &line, &col);
            if (at_end)
                tools_err("%s:%zu:%zu: truncated JSON (the document ends early)", name, line, col);
            else
                invalid_near(name, buf, len, pos);
        }
        return TOOLS_BAD;
    }
    /* Anything but white space after the document is an error too. */
    for (const char *p = end; p && p < buf + len; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            if (!quiet) {
                size_t line, col;
                line_col(buf, (size_t)(p - buf), &line, &col);
                tools_err("%s:%zu:%zu: unexpected data after the JSON document", name, line, col);
            }
            report_read_release(r);
            return TOOLS_BAD;
        }
    }
    if (attach_literals(r->root, buf, len) != 0) {
        if (!quiet) tools_err("%s: out of memory, or number literals out of step", name);
        report_read_release(r);
        return TOOLS_BAD;
    }
    if (read_report(&d, r) < 0) {
        report_read_release(r);
        return TOOLS_BAD;
    }
    return TOOLS_OK;
}

int report_read_buffer(const char *name, const char *buf, size_t len, report_t *r, int quiet)
{
    return parse(name, buf, len, r, quiet, 0);
}

int report_read_file(const char *path, report_t *r)
{
    char *buf;
    size_t len;
    memset(r, 0, sizeof *r);
    file_check_t check = {.name = path};
    int rc = input_load(path, file_check, &check, &buf, &len);
    if (rc != TOOLS_OK) return TOOLS_BAD;
    rc = parse(path, buf, len, r, 0, 1);
    free(buf);
    return rc;
}

static void keep_literals(cJSON *v)
{
    for (; v != NULL; v = v->next) {
        if (cJSON_IsNumber(v) && v->valuestring) v->type = cJSON_Raw;
        keep_literals(v->child);
    }
}

void report_read_keep_literals(report_t *r) { keep_literals(r->root); }

void report_read_release(report_t *r)
{
    for (size_t i = 0; i < r->ndevices; i++) {
        free(r->devices[i].buckets);
        free(r->devices[i].free_map);
        free(r->devices[i].live_map);
        free(r->devices[i].counters);
    }
    free(r->devices);
    for (size_t i = 0; i < r->nleaks; i++) free(r->leaks[i].frames);
    free(r->leaks);
    free(r->oom.frames);
    cJSON_Delete(r->root);
    memset(r, 0, sizeof *r);
}
