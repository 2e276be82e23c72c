/* tools/input.c — bounded reading of the command's inputs (input.h). */
#include "input.h"

#include "fmt.h"
#include "parse.h"
#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t input_max(void)
{
    static uint64_t max; /* 0 = not read yet */
    if (max == 0) {
        const char *v = getenv(INPUT_MAX_ENV);
        max = INPUT_MAX_DEFAULT;
        if (v && *v && (parse_bytes(v, &max) != 0 || max == 0)) {
            char b[FMT_BYTES_LEN];
            max = INPUT_MAX_DEFAULT;
            tools_err("%s: '%.40s' is not a size; the limit stays %s", INPUT_MAX_ENV, v,
                      fmt_bytes(b, max));
        }
    }
    return max;
}

static int too_large(const char *path)
{
    char b[FMT_BYTES_LEN];
    tools_err("%s: larger than %s, the input limit (%s raises it)", path, fmt_bytes(b, input_max()),
              INPUT_MAX_ENV);
    return TOOLS_BAD;
}

/* A regular file in one mapped piece.  Returns 1 when it could not be mapped (read it instead). */
static int take_mapped(int fd, size_t size, input_take_fn take, void *ctx)
{
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) return 1;
    madvise(m, size, MADV_SEQUENTIAL);
    int rc = take(ctx, m, size);
    munmap(m, size);
    return rc;
}

int input_stream(const char *path, input_take_fn take, void *ctx)
{
    int is_stdin = strcmp(path, "-") == 0;
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tools_err("%s: cannot open: %s", path, strerror(errno));
        return TOOLS_BAD;
    }
    const uint64_t max = input_max();
    int rc = 1;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if ((uint64_t)st.st_size > max) {
            rc = too_large(path);
        } else if (!is_stdin && st.st_size > 0) {
            /* stdin may be a file read partly already: read it from where it stands */
            rc = take_mapped(fd, (size_t)st.st_size, take, ctx);
        }
    }
    if (rc == 1) {
        rc = 0;
        char *piece = malloc(INPUT_PIECE);
        uint64_t total = 0;
        if (piece == NULL) {
            tools_err("%s: out of memory", path);
            rc = TOOLS_BAD;
        }
        while (rc == 0) {
            ssize_t n = read(fd, piece, INPUT_PIECE);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                tools_err("%s: read error: %s", path, strerror(errno));
                rc = TOOLS_BAD;
            } else if (n == 0) {
                break;
            } else if ((total += (uint64_t)n) > max) {
                rc = too_large(path);
            } else {
                rc = take(ctx, piece, (size_t)n);
            }
        }
        free(piece);
    }
    if (!is_stdin) close(fd);
    return rc;
}

typedef struct loader {
    const char *path;     /* for messages */
    char *buf;            /* everything read so far, NUL-terminated */
    size_t len;           /* bytes in buf */
    size_t cap;           /* bytes allocated for buf */
    input_check_fn check; /* the caller's look at each piece, or NULL */
    void *ctx;            /* its context */
} loader_t;

static int load_take(void *ctx, const char *data, size_t n)
{
    loader_t *l = ctx;
    if (l->len + n + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : n + 1;
        while (cap < l->len + n + 1) cap *= 2;
        char *b = realloc(l->buf, cap);
        if (b == NULL) {
            tools_err("%s: out of memory reading %zu bytes", l->path, l->len + n);
            return TOOLS_BAD;
        }
        l->buf = b;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, data, n);
    l->len += n;
    l->buf[l->len] = '\0';
    return l->check ? l->check(l->ctx, l->buf, l->len) : 0;
}

int input_load(const char *path, input_check_fn check, void *ctx, char **buf, size_t *len)
{
    loader_t l = {.path = path, .check = check, .ctx = ctx};
    int rc = input_stream(path, load_take, &l);
    if (rc == 0 && l.buf == NULL) rc = load_take(&l, "", 0); /* empty: "" */
    if (rc != 0) {
        free(l.buf);
        l.buf = NULL;
        l.len = 0;
    }
    *buf = l.buf;
    *len = l.len;
    return rc;
}
