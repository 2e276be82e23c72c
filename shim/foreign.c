/* shim/foreign.c — the forwarded-allocation table (see foreign.h).
 * Values pack the record into 64 bits: granted (46 bits, saturated) << 18 | origin << 16 | the
 * device as a 16-bit two's complement (-1 = unknown). */
#include "foreign.h"

#include <pthread.h>
#include <stdlib.h>

#include "addrmap.h"

static pthread_mutex_t foreign_lock = PTHREAD_MUTEX_INITIALIZER;
static addrmap_t foreign_map; /* guarded by foreign_lock */
static int foreign_ready;     /* foreign_map initialised; guarded by foreign_lock */

#define GRANTED_MAX (((uint64_t)1 << 46) - 1)

static uint64_t pack(const foreign_rec_t *r)
{
    uint64_t g = r->granted > GRANTED_MAX ? GRANTED_MAX : r->granted;
    return g << 18 | (uint64_t)(r->origin & 3) << 16 | (uint16_t)(int16_t)vocab_device(r->device);
}

static void unpack(uint64_t v, foreign_rec_t *r)
{
    r->device = (int16_t)(uint16_t)(v & 0xffff);
    r->origin = (enum vocab_origin)((v >> 16) & 3);
    r->granted = (size_t)(v >> 18);
}

int foreign_add(uintptr_t addr, const foreign_rec_t *rec)
{
    int rc = -1;
    pthread_mutex_lock(&foreign_lock);
    if (!foreign_ready && addrmap_init(&foreign_map, 256) == 0) foreign_ready = 1;
    if (foreign_ready) rc = addrmap_put(&foreign_map, addr, pack(rec)) < 0 ? -1 : 0;
    pthread_mutex_unlock(&foreign_lock);
    return rc;
}

int foreign_take(uintptr_t addr, foreign_rec_t *out)
{
    uint64_t v = 0;
    int found = 0;
    pthread_mutex_lock(&foreign_lock);
    if (foreign_ready) found = addrmap_del(&foreign_map, addr, &v);
    pthread_mutex_unlock(&foreign_lock);
    if (found && out) unpack(v, out);
    return found;
}

typedef struct collect_ctx {
    int device;      /* device whose keys are wanted */
    uintptr_t *keys; /* output array */
    size_t n, cap;   /* used / allocated */
} collect_ctx_t;

static int collect(void *ctx, uintptr_t key, uint64_t val)
{
    collect_ctx_t *c = ctx;
    foreign_rec_t r;
    unpack(val, &r);
    if (r.device == c->device && c->n < c->cap) c->keys[c->n++] = key;
    return 0;
}

size_t foreign_drop_device(int device)
{
    pthread_mutex_lock(&foreign_lock);
    collect_ctx_t c = {.device = device};
    if (foreign_ready && addrmap_count(&foreign_map) > 0) {
        c.cap = addrmap_count(&foreign_map);
        c.keys = malloc(c.cap * sizeof *c.keys);
        if (c.keys) {
            addrmap_foreach(&foreign_map, collect, &c);
            for (size_t i = 0; i < c.n; i++) addrmap_del(&foreign_map, c.keys[i], NULL);
            free(c.keys);
        }
    }
    pthread_mutex_unlock(&foreign_lock);
    return c.n;
}

void foreign_fork_prepare(void) { pthread_mutex_lock(&foreign_lock); }
void foreign_fork_parent(void) { pthread_mutex_unlock(&foreign_lock); }
void foreign_fork_child(void) { pthread_mutex_unlock(&foreign_lock); }
