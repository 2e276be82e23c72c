/* tools/cmd_map.c — `npupool map REPORT -o map.svg`: a picture of each pool.
 *
 * Owns: the SVG (and the self-contained HTML page around it).  Each device's address range is a
 * bar of MAP_ROWS rows x MAP_COLS cells; a cell covers reserved/(rows*cols) bytes.  A cell is
 * drawn in the colour of the live bytes that dominate it (size class or site, when the report has
 * a live_map; "in use" otherwise), and its free bytes as a pale band from the top whose height is
 * the free fraction — at least 2 px when anything in it is free, so even a 64-byte hole shows.
 * The largest free block is outlined in red, and the figures (free, largest free, fragmentation)
 * are written above the bar.  Equal neighbouring cells are merged into one <rect>, so the file
 * stays small for any number of blocks.  Cost: O(blocks + cells) per device.
 */
#define _GNU_SOURCE
#include "commands.h"
#include "fmt.h"
#include "pool.h"
#include "report_read.h"
#include "site.h"
#include "tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAP_ROWS 4   /* rows per device bar */
#define MAP_COLS 560 /* cells per row */
#define CELL_W 2     /* px per cell */
#define ROW_H 26     /* px per row */
#define ROW_GAP 6    /* px between rows */
#define LEFT 92      /* px left margin (offset labels) */
#define WIDTH (LEFT + MAP_COLS * CELL_W + 28)
#define NCOLORS 9 /* 8 classes / sites + "other" */
#define FREE_COLOR "#f2f2f2"
#define USED_COLOR "#4e79a7"
#define OTHER_COLOR "#a0a0a0"

enum { OPT_OUTPUT, OPT_HTML, OPT_BY };
enum { BY_CLASS, BY_SITE }; /* the words of --by, in order */
static const cli_opt_t map_opts[] = {
    [OPT_OUTPUT] = {"output", 'o', CLI_TEXT, "FILE", NULL, CLI_REQUIRED,
                    "where to write ('-' = standard output)"},
    [OPT_HTML] = {"html", 0, CLI_FLAG, NULL, NULL, 0,
                  "one self-contained HTML page (also when FILE ends in .html)"},
    [OPT_BY] = {"by", 0, CLI_CHOICE, "class|site", "class", 0,
                "colour live blocks by size class or by allocation site"},
    {NULL},
};

static const char *const palette[NCOLORS] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",  "#59a14f",
                                             "#edc948", "#b07aa1", "#ff9da7", OTHER_COLOR};

static void xml_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 32 || *s == '\t') fputc(*s, f);
        }
    }
}

typedef struct cell {
    uint64_t free_bytes;    /* free bytes in the cell */
    uint64_t live[NCOLORS]; /* live bytes per colour */
} cell_t;

typedef struct mapctx {
    const report_t *r;  /* the report */
    int by_site;        /* 1: colour by site */
    long site_color[8]; /* leak index of colour k (by_site) */
    int nsite_colors;   /* colours used for sites */
    cell_t *cells;      /* MAP_ROWS * MAP_COLS */
} mapctx_t;

static int class_of(const report_device_t *d, uint64_t size)
{
    for (size_t i = 0; i < d->nbuckets && i < 8; i++)
        if (d->buckets[i].has_range && size >= d->buckets[i].lo && size <= d->buckets[i].hi)
            return (int)i;
    int b = pool_bucket_of((size_t)size);
    return b < 8 ? b : 7;
}

static void class_label(const report_device_t *d, int k, char *buf, size_t cap)
{
    char lo[FMT_BYTES_LEN], hi[FMT_BYTES_LEN];
    uint64_t l, h;
    if ((size_t)k < d->nbuckets && d->buckets[k].has_range)
        l = d->buckets[k].lo, h = d->buckets[k].hi;
    else
        l = k ? pool_bucket_limit[k - 1] + 1 : 0,
        h = k < POOL_NBUCKETS - 1 ? pool_bucket_limit[k] : UINT64_MAX;
    if (h == UINT64_MAX)
        snprintf(buf, cap, "> %s", fmt_bytes(lo, l ? l - 1 : 0));
    else
        snprintf(buf, cap, "%s - %s", fmt_bytes(lo, l), fmt_bytes(hi, h));
}

/* Spread [off, off+size) over the cells; add to free or to live[color]. */
static void spread(cell_t *cells, uint64_t reserved, uint64_t off, uint64_t size, int color)
{
    const uint64_t n = (uint64_t)MAP_ROWS * MAP_COLS;
    if (reserved == 0 || off >= reserved) return;
    if (size > reserved - off) size = reserved - off;
    uint64_t end = off + size;
    /* cell i covers [i*reserved/n, (i+1)*reserved/n) */
    uint64_t c = (uint64_t)((unsigned __int128)off * n / reserved);
    while (off < end && c < n) {
        uint64_t cend = (uint64_t)((unsigned __int128)(c + 1) * reserved / n);
        uint64_t take = (end < cend ? end : cend) - off;
        if (color < 0)
            cells[c].free_bytes += take;
        else
            cells[c].live[color] += take;
        off += take;
        c++;
    }
}

static int ext_by_offset(const void *a, const void *b)
{
    const report_extent_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int leak_idx_cmp(const void *a, const void *b, void *ctx)
{
    const report_t *r = ctx;
    long x = *(const long *)a, y = *(const long *)b;
    if (r->leaks[x].bytes != r->leaks[y].bytes)
        return r->leaks[x].bytes < r->leaks[y].bytes ? 1 : -1;
    return x < y ? -1 : x > y;
}

static int color_of_site(const mapctx_t *m, long site)
{
    for (int k = 0; k < m->nsite_colors; k++)
        if (m->site_color[k] == site) return k;
    return NCOLORS - 1;
}

/* Draw one device; y = top.  Returns the height used. */
static int draw_device(FILE *f, mapctx_t *m, const report_device_t *d, int y)
{
    char b1[FMT_BYTES_LEN], b2[FMT_BYTES_LEN], b3[FMT_BYTES_LEN], b4[FMT_BYTES_LEN];
    int y0 = y;
    fprintf(f, "<g class=\"device\" id=\"device-%ld\">\n", d->device);
    fprintf(f, "<text x=\"12\" y=\"%d\" class=\"h\">device %ld</text>\n", y + 14, d->device);
    if (!d->has_pool) {
        fprintf(f,
                "<text x=\"%d\" y=\"%d\">no pool on this device (live allocations served outside "
                "it)</text>\n</g>\n",
                LEFT, y + 14);
        return 30;
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\">pool %s at 0x%" PRIx64 ": allocated %s, free %s in %" PRIu64
            " blocks</text>\n",
            LEFT, y + 14, fmt_bytes(b1, d->reserved), d->base, fmt_bytes(b2, d->allocated),
            fmt_bytes(b3, d->free_bytes), d->free_blocks);
    y += 20;
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" class=\"fig\">largest free block %s, fragmentation "
            "%.1f%%</text>\n",
            LEFT, y + 14, fmt_bytes(b4, d->largest_free), d->fragmentation * 100.0);
    y += 24;
    memset(m->cells, 0, sizeof(cell_t) * MAP_ROWS * MAP_COLS);
    const uint64_t reserved = d->reserved;
    for (size_t i = 0; i < d->nfree_map; i++)
        spread(m->cells, reserved, d->free_map[i].offset, d->free_map[i].size, -1);
    int have_live = d->nlive_map > 0;
    for (size_t i = 0; i < d->nlive_map; i++) {
        const report_extent_t *e = &d->live_map[i];
        int col = m->by_site ? color_of_site(m, e->site) : class_of(d, e->size);
        spread(m->cells, reserved, e->offset, e->size, col);
    }
    /* Largest listed free block. */
    const report_extent_t *big = NULL;
    for (size_t i = 0; i < d->nfree_map; i++)
        if (!d->free_map[i].slots && (big == NULL || d->free_map[i].size > big->size))
            big = &d->free_map[i];

    const uint64_t ncell = (uint64_t)MAP_ROWS * MAP_COLS;
    for (int row = 0; row < MAP_ROWS; row++) {
        int ry = y + row * (ROW_H + ROW_GAP);
        uint64_t row_off = (uint64_t)((unsigned __int128)row * MAP_COLS * reserved / ncell);
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"off\" text-anchor=\"end\">+%s</text>\n",
                LEFT - 6, ry + 17, row ? fmt_bytes(b1, row_off) : "0");
        /* Row background = in use; cells overwrite it. */
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", LEFT, ry,
                MAP_COLS * CELL_W, ROW_H, have_live ? FREE_COLOR : USED_COLOR);
        /* Pass 1: live colour runs (only with a live map). */
        if (have_live) {
            int run_start = 0, run_color = -2;
            for (int c = 0; c <= MAP_COLS; c++) {
                int color = -2;
                if (c < MAP_COLS) {
                    const cell_t *ce = &m->cells[row * MAP_COLS + c];
                    uint64_t best = 0;
                    for (int k = 0; k < NCOLORS; k++)
                        if (ce->live[k] > best) best = ce->live[k], color = k;
                    if (color < 0) color = -1; /* no live bytes: overhead or free */
                }
                if (color != run_color) {
                    if (run_color >= 0)
                        fprintf(
                            f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n",
                            LEFT + run_start * CELL_W, ry, (c - run_start) * CELL_W, ROW_H,
                            palette[run_color]);
                    run_start = c;
                    run_color = color;
                }
            }
        }
        /* Pass 2: free bands, height = free fraction of the cell, quantised to 1/13. */
        int run_start = 0, run_h = 0;
        for (int c = 0; c <= MAP_COLS; c++) {
            int h = 0;
            if (c < MAP_COLS) {
                uint64_t ci = (uint64_t)row * MAP_COLS + (uint64_t)c;
                uint64_t cs = (uint64_t)((unsigned __int128)ci * reserved / ncell);
                uint64_t ce = (uint64_t)((unsigned __int128)(ci + 1) * reserved / ncell);
                uint64_t fb = m->cells[ci].free_bytes, span = ce > cs ? ce - cs : 1;
                if (fb) {
                    h = (int)((fb * 13 + span - 1) / span) * 2;
                    if (h > ROW_H) h = ROW_H;
                    if (h < 2) h = 2;
                    /* Something in the cell is in use: keep 4 px of it visible too. */
                    if (fb < span && h > ROW_H - 4) h = ROW_H - 4;
                }
            }
            if (h != run_h) {
                if (run_h > 0)
                    fprintf(f,
                            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                            "class=\"free\"/>\n",
                            LEFT + run_start * CELL_W, ry, (c - run_start) * CELL_W, run_h,
                            FREE_COLOR);
                run_start = c;
                run_h = h;
            }
        }
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#555\" "
                "stroke-width=\"0.5\"/>\n",
                LEFT, ry, MAP_COLS * CELL_W, ROW_H);
    }
    /* The largest free block, outlined (one rect per row it touches). */
    if (big && reserved) {
        uint64_t s = (uint64_t)((unsigned __int128)big->offset * ncell / reserved);
        uint64_t e =
            (uint64_t)(((unsigned __int128)(big->offset + big->size) * ncell + reserved - 1) /
                       reserved);
        if (e > ncell) e = ncell;
        if (e <= s) e = s + 1;
        for (uint64_t c = s; c < e;) {
            uint64_t row = c / MAP_COLS, rend = (row + 1) * MAP_COLS, stop = e < rend ? e : rend;
            int ry = y + (int)row * (ROW_H + ROW_GAP);
            fprintf(f,
                    "<rect class=\"largest\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                    "fill=\"none\" "
                    "stroke=\"#d62728\" stroke-width=\"2\"/>\n",
                    LEFT + (int)(c % MAP_COLS) * CELL_W, ry - 1, (int)(stop - c) * CELL_W,
                    ROW_H + 2);
            c = stop;
        }
    }
    y += MAP_ROWS * (ROW_H + ROW_GAP);
    if (big)
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" class=\"note\">red outline: largest free block, %s at "
                "+0x%" PRIx64 "</text>\n",
                LEFT, y + 10, fmt_bytes(b1, big->size), big->offset);
    else
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"note\">no free block listed</text>\n", LEFT,
                y + 10);
    y += 16;
    if (d->free_map_omitted) {
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" class=\"note\">%" PRIu64
                " smaller free blocks (%s) not listed in the report: "
                "drawn as in use</text>\n",
                LEFT, y + 10, d->free_map_omitted, fmt_bytes(b1, d->free_map_omitted_bytes));
        y += 16;
    }
    /* Legend. */
    int lx = LEFT;
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#555\" "
            "stroke-width=\"0.5\"/>"
            "<text x=\"%d\" y=\"%d\" class=\"note\">free</text>\n",
            lx, y + 2, FREE_COLOR, lx + 16, y + 12);
    lx += 60;
    if (!have_live) {
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%d\" y=\"%d\" class=\"note\">in use (live blocks + overhead; the report "
                "lists no live "
                "blocks)</text>\n",
                lx, y + 2, USED_COLOR, lx + 16, y + 12);
        y += 20;
    } else {
        y += 20;
        lx = LEFT;
        int ncol = m->by_site ? m->nsite_colors + 1 : 8;
        for (int k = 0; k < ncol; k++) {
            char label[200];
            int color = k;
            if (m->by_site) {
                if (k == m->nsite_colors) {
                    snprintf(label, sizeof label, "other sites");
                    color = NCOLORS - 1;
                } else {
                    site_stack_label(&m->r->leaks[m->site_color[k]], label, sizeof label);
                }
            } else {
                class_label(d, k, label, sizeof label);
            }
            int w = m->by_site ? 300 : 150;
            if (lx + w > WIDTH) {
                lx = LEFT;
                y += 18;
            }
            fprintf(f,
                    "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text "
                    "x=\"%d\" y=\"%d\" class=\"note\">",
                    lx, y + 2, palette[color], lx + 16, y + 12);
            xml_escape(f, label);
            fputs("</text>\n", f);
            lx += w;
        }
        y += 20;
    }
    fputs("</g>\n", f);
    return y - y0 + 10;
}

static int write_svg(FILE *f, mapctx_t *m)
{
    const report_t *r = m->r;
    /* The body goes to memory first: its height is known only once it is drawn. */
    char *body = NULL;
    size_t blen = 0;
    FILE *mb = open_memstream(&body, &blen);
    if (mb == NULL) return -1;
    int y = 40;
    for (size_t i = 0; i < r->ndevices; i++) y += draw_device(mb, m, &r->devices[i], y);
    if (r->ndevices == 0) {
        fprintf(mb, "<text x=\"12\" y=\"%d\">no devices in this report</text>\n", y + 14);
        y += 30;
    }
    if (fclose(mb) != 0) {
        free(body);
        return -1;
    }
    int height = y + 10;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
            "%d\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
            WIDTH, height, WIDTH, height);
    fputs("<style>.h{font-weight:bold;font-size:13px}.fig{font-weight:bold;fill:#d62728}.off{font-"
          "size:10px;fill:#555}"
          ".note{font-size:11px;fill:#333}</style>\n",
          f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", WIDTH, height);
    fputs("<text x=\"12\" y=\"22\" class=\"h\">npupool pool map: ", f);
    xml_escape(f, r->exe[0] ? site_basename(r->exe) : "?");
    fprintf(f, " (pid %ld, trigger %s", r->pid, r->trigger);
    if (r->dump_time[0]) {
        fputs(", ", f);
        xml_escape(f, r->dump_time);
    }
    fputs(")</text>\n", f);
    fwrite(body, 1, blen, f);
    free(body);
    fputs("</svg>\n", f);
    return 0;
}

static int write_html(FILE *f, mapctx_t *m)
{
    const report_t *r = m->r;
    char b[6][FMT_BYTES_LEN];
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>npupool pool "
          "map</title>\n"
          "<style>body{font-family:sans-serif;margin:16px}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:3px "
          "8px;text-align:right}th{background:#eee}</style></head><body>\n",
          f);
    fputs("<h1>npupool pool map</h1>\n<p>", f);
    xml_escape(f, r->path);
    fprintf(f, ": pid %ld, trigger %s", r->pid, r->trigger);
    if (r->dump_time[0]) {
        fputs(", dumped ", f);
        xml_escape(f, r->dump_time);
    }
    fputs("</p>\n<table><tr><th>device</th><th>reserved</th><th>allocated</th><th>free</"
          "th><th>largest free</th>"
          "<th>fragmentation</th><th>free blocks</th></tr>\n",
          f);
    for (size_t i = 0; i < r->ndevices; i++) {
        const report_device_t *d = &r->devices[i];
        if (!d->has_pool) {
            fprintf(f, "<tr><td>%ld</td><td colspan=\"6\">no pool</td></tr>\n", d->device);
            continue;
        }
        fprintf(f,
                "<tr><td>%ld</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.1f%%</"
                "td><td>%" PRIu64 "</td></tr>\n",
                d->device, fmt_bytes(b[0], d->reserved), fmt_bytes(b[1], d->allocated),
                fmt_bytes(b[2], d->free_bytes), fmt_bytes(b[3], d->largest_free),
                d->fragmentation * 100.0, d->free_blocks);
    }
    fputs("</table>\n<div>\n", f);
    int rc = write_svg(f, m);
    fputs("</div>\n</body></html>\n", f);
    return rc;
}

static int run(const cli_cmd_t *cmd, const cli_args_t *a)
{
    (void)cmd;
    const char *out = a->v[OPT_OUTPUT].text;
    int html = a->v[OPT_HTML].given;
    const int by_site = a->v[OPT_BY].choice == BY_SITE;
    size_t ol = strlen(out);
    if (ol > 5 && strcmp(out + ol - 5, ".html") == 0) html = 1;
    report_t r;
    int rc = report_read_file(a->operand[0], &r);
    if (rc != TOOLS_OK) return rc;
    mapctx_t m = {.r = &r, .by_site = by_site};
    m.cells = malloc(sizeof(cell_t) * MAP_ROWS * MAP_COLS);
    long *order = malloc((r.nleaks ? r.nleaks : 1) * sizeof *order);
    if (m.cells == NULL || order == NULL) {
        free(m.cells), free(order), report_read_release(&r);
        tools_err("out of memory");
        return TOOLS_BAD;
    }
    for (size_t i = 0; i < r.nleaks; i++) order[i] = (long)i;
    qsort_r(order, r.nleaks, sizeof *order, leak_idx_cmp, &r);
    for (size_t i = 0; i < r.nleaks && i < 8; i++) m.site_color[m.nsite_colors++] = order[i];
    free(order);
    for (size_t i = 0; i < r.ndevices; i++) {
        report_device_t *d = &r.devices[i];
        if (d->nfree_map > 1) qsort(d->free_map, d->nfree_map, sizeof *d->free_map, ext_by_offset);
    }
    FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
    if (f == NULL) {
        tools_err("%s: cannot write: %m", out);
        free(m.cells);
        report_read_release(&r);
        return TOOLS_BAD;
    }
    int bad = (html ? write_html(f, &m) : write_svg(f, &m)) != 0;
    bad |= ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(f) != 0;
    if (bad) {
        tools_err("%s: write failed", out);
        rc = TOOLS_BAD;
    }
    free(m.cells);
    report_read_release(&r);
    return rc;
}

const cli_cmd_t cmd_map = {
    .name = "map",
    .operands = "REPORT",
    .purpose = "SVG/HTML picture of each pool",
    .about = "Draw each device's pool: the address range as a bar, live memory coloured by size "
             "class or by\nsite (when the report lists live blocks; else one 'in use' colour), "
             "free blocks as pale bands,\nthe largest free block outlined in red, free / largest "
             "free / fragmentation written on it.",
    .opts = map_opts,
    .run = run,
};
