/* tools/tools.c — the command's message line, cJSON arena and document writer (tools.h). */
#include "tools.h"

#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

void tools_err(const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fflush(stdout);
    log_error("%s", buf);
}

/* ---- JSON arena ---------------------------------------------------------------------------
 * A report becomes millions of small cJSON nodes; with libc malloc that is most of the time of
 * `summary` on a large report.  The command reads a report, answers and exits, so its nodes come
 * from a bump arena that is never freed (chunks of ARENA_CHUNK bytes; larger requests get their
 * own block).  The fuzz targets do not call this and keep cJSON on malloc/free.
 */
#define ARENA_CHUNK ((size_t)16 << 20) /* bytes per arena chunk */

static struct {
    char *cur;   /* next free byte of the current chunk */
    size_t left; /* bytes left in it */
} arena;

static void *arena_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > ARENA_CHUNK / 4) return malloc(n); /* never freed either: cJSON_Delete is a no-op */
    if (n > arena.left) {
        /* Pre-faulted in one call: page faults one by one cost more than parsing. */
        char *c = mmap(NULL, ARENA_CHUNK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (c == MAP_FAILED) return NULL;
        arena.cur = c;
        arena.left = ARENA_CHUNK;
    }
    void *p = arena.cur;
    arena.cur += n;
    arena.left -= n;
    return p;
}

static void arena_free(void *p) { (void)p; }

void tools_json_arena(void)
{
    cJSON_Hooks h = {.malloc_fn = arena_alloc, .free_fn = arena_free};
    cJSON_InitHooks(&h);
}

int tools_write_text(const char *out, const char *text, size_t len)
{
    if (out == NULL || strcmp(out, "-") == 0) {
        if (fwrite(text, 1, len, stdout) != len || fputc('\n', stdout) == EOF ||
            fflush(stdout) != 0) {
            tools_err("standard output: write failed");
            return TOOLS_BAD;
        }
        return TOOLS_OK;
    }
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* /dev/null, /dev/stdout, a FIFO: written in place (a rename would replace the device) */
        FILE *f = fopen(out, "w");
        int bad = f == NULL || fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF;
        if ((f && fclose(f) != 0) || bad) {
            tools_err("%s: write failed: %s", out, strerror(errno));
            return TOOLS_BAD;
        }
        return TOOLS_OK;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        tools_err("%s: cannot write: %s", tmp, strerror(errno));
        return TOOLS_BAD;
    }
    int bad = fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, out) != 0) {
        tools_err("%s: write failed: %s", out, strerror(errno));
        unlink(tmp);
        return TOOLS_BAD;
    }
    return TOOLS_OK;
}
