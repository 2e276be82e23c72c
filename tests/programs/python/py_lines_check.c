/* tests/programs/python/py_lines_check.c — npupool's line-table decoder (ledger_py_line) against
 * the interpreter's own answers (py_lines.py on stdin).
 *
 * For every code object and every instruction offset of it, the line npupool computes must be
 * the one Python gives (-1: the instruction has no line).  Prints the first disagreements and a
 * count; exits 1 on any, 2 when the input is malformed or empty.  Linked with the ledger
 * archive (ledger_py_line is hidden in libnpupool.so, visible to a static link).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_internal.h"

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    unsigned long codes = 0, offsets = 0, bad = 0;
    while (getline(&line, &cap, stdin) > 0) {
        char *save = NULL;
        char *fmt = strtok_r(line, " \n", &save), *first = strtok_r(NULL, " \n", &save);
        char *hex = strtok_r(NULL, " \n", &save), *pairs = strtok_r(NULL, " \n", &save);
        if (!fmt || !first || !hex || !pairs) return 2;
        size_t n = strcmp(hex, "-") ? strlen(hex) / 2 : 0;
        uint8_t *table = malloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
            if (hi < 0 || lo < 0) return 2;
            table[i] = (uint8_t)(hi << 4 | lo);
        }
        codes++;
        char *psave = NULL;
        for (char *p = strcmp(pairs, "-") ? strtok_r(pairs, ",", &psave) : NULL; p;
             p = strtok_r(NULL, ",", &psave)) {
            int off, want;
            if (sscanf(p, "%d:%d", &off, &want) != 2) return 2;
            int got = ledger_py_line(atoi(fmt), table, n, atoi(first), off);
            offsets++;
            if (got != want && bad++ < 10)
                printf("format %s, first line %s, offset %d: npupool says %d, Python %d\n", fmt,
                       first, off, got, want);
        }
        free(table);
    }
    free(line);
    printf("%lu code objects, %lu offsets, %lu disagreements\n", codes, offsets, bad);
    return codes == 0 ? 2 : bad ? 1 : 0;
}
