/* base/rank.c — see rank.h. */
#include "rank.h"

#include <stdlib.h>

static int rank_parse(const char *s)
{
    if (!s || !*s) return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > 1000000) return -1;
    }
    return (int)v;
}

int rank_get(void)
{
    int r = rank_parse(getenv("RANK"));
    return r >= 0 ? r : rank_parse(getenv("LOCAL_RANK"));
}
