/* fuzz/fuzz_suppress.c — libFuzzer target: the suppressions parser and the glob matcher
 * (base/suppress.c) on any bytes.  The input up to its first NUL byte is a suppressions file; the
 * rest, split at NUL bytes, are names (function or module) matched against every rule.  Checks:
 * the parser never overruns its fixed storage, every rule it keeps is a well-formed pattern
 * (NUL-terminated, non-empty, no longer than SUPPRESS_PATTERN_MAX) that matches itself when it
 * has no glob characters, an error always names its source, and the matcher terminates on any
 * pair.  `make fuzz` runs it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "suppress.h"

static suppress_list_t list; /* 80 KiB: not on the fuzzer's stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    size_t tlen = nul ? (size_t)(nul - text) : size;
    suppress_init(&list);
    if (suppress_parse(&list, text, tlen, "fuzz") != 0) {
        if (strncmp(list.err, "fuzz", 4) != 0 || strchr(list.err, '\n')) abort();
    }
    if (list.n < 0 || list.n > SUPPRESS_MAX_RULES) abort();
    for (int i = 0; i < list.n; i++) {
        const suppress_rule_t *r = &list.rule[i];
        size_t n = strnlen(r->pattern, sizeof r->pattern);
        if (n == 0 || n > SUPPRESS_PATTERN_MAX || r->kind > SUPPRESS_MODULE) abort();
        if (strpbrk(r->pattern, "*?[\\") == NULL && !suppress_glob(r->pattern, r->pattern)) abort();
    }
    /* the names after the text: each matched as a function and as a module path */
    char name[512];
    for (const char *p = nul ? nul + 1 : text + size; p < text + size;) {
        const char *end = memchr(p, '\0', (size_t)(text + size - p));
        size_t k = (size_t)((end ? end : text + size) - p);
        if (k >= sizeof name) k = sizeof name - 1;
        memcpy(name, p, k);
        name[k] = '\0';
        int hit = suppress_match(&list, name, name);
        if (hit < -1 || hit >= list.n) abort();
        p = end ? end + 1 : text + size;
    }
    return 0;
}
