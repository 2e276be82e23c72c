/* report/report_cjson.c — the private handle on cJSON (contract in report_cjson.h). */
#define _GNU_SOURCE
#define REPORT_CJSON_TABLE_ITSELF /* this file names the table's fields, not the macros */
#include "report_cjson.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "ledger.h"
#include "log.h"

REPORT_HIDDEN report_cjson_table_t report_cjson;

static pthread_once_t cjson_once = PTHREAD_ONCE_INIT;
static int cjson_ok;        /* 1 when every function was found */
static char cjson_why[256]; /* why not (dlerror's text, or the missing function) */
static int cjson_said;      /* the "no reports" line was written (atomic) */

static void cjson_open(void)
{
    void *h = dlopen(REPORT_CJSON_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(cjson_why, sizeof cjson_why, "%s", e ? e : "not found");
        return;
    }
    ledger_dlsym_fn sym = ledger_dlsym();
    report_cjson_table_t t;
#define REPORT_CJSON_LOOK(name)                                       \
    t.name = (__typeof__(&name))sym(h, #name);                        \
    if (!t.name) {                                                    \
        snprintf(cjson_why, sizeof cjson_why, "it has no %s", #name); \
        return;                                                       \
    }
    REPORT_CJSON_FUNCS(REPORT_CJSON_LOOK)
#undef REPORT_CJSON_LOOK
    report_cjson = t;
    cjson_ok = 1;
}

REPORT_HIDDEN int report_cjson_load(int say)
{
    pthread_once(&cjson_once, cjson_open);
    if (!cjson_ok && say && !__atomic_exchange_n(&cjson_said, 1, __ATOMIC_RELAXED))
        log_warn("no reports: cannot load %s (%s); install cJSON (Debian libcjson1, openEuler "
                 "cjson)",
                 REPORT_CJSON_SONAME, cjson_why);
    return cjson_ok;
}
