/* report/report_cjson.h — cJSON inside libnpupool.so, loaded privately.
 *
 * Owns: the one handle on cJSON of the preload library.  The library links no cJSON (it depends
 * on libc alone at load time): report_cjson_load() dlopen()s libcjson.so.1 with RTLD_LOCAL and
 * looks its functions up in that handle with glibc's real dlsym (ledger_dlsym(): inside the
 * library a plain dlsym would answer for the application).  So the host's own cJSON, a copy
 * linked into the program or into another library, exported or not, and npupool's never meet:
 * npupool calls libcjson.so.1's definitions, the host its own; and a host without cJSON still
 * starts (it gets no report, and one line saying why).
 *
 * The files of report/ that build documents include this header and write cJSON calls by their
 * usual names: the macros below turn those names into calls through the table, so no object of
 * report/ references a cJSON symbol (tests/cases/shim_selfcontained.sh reads the library's
 * dynamic section and undefined symbols).
 * What libcjson itself calls through its PLT (and so a host's exported cJSON_* would answer):
 * nothing on the paths npupool uses but the out-of-memory paths of cJSON_CreateString and
 * cJSON_CreateRaw, which call cJSON_Delete (cJSON_Delete's own recursion is a direct call).
 * Text from cJSON_PrintBuffered is freed with cJSON_free, so it goes back to the allocator
 * libcjson took it from.
 *
 * Locking: report_cjson_load runs once (pthread_once); the table is read-only afterwards.  It
 * takes the loader's lock: call it first at report_init (no npupool lock held); the report
 * writer calls it again under the report lock, a no-op once loaded.
 */
#ifndef NPUPOOL_REPORT_CJSON_H
#define NPUPOOL_REPORT_CJSON_H

#include <cjson/cJSON.h>

#include "report_internal.h"

#define REPORT_CJSON_SONAME "libcjson.so.1" /* cJSON 1.x: every function below exists since 1.5 */

// clang-format off
#define REPORT_CJSON_FUNCS(X) \
    X(cJSON_CreateObject) \
    X(cJSON_CreateArray) \
    X(cJSON_CreateNumber) \
    X(cJSON_CreateString) \
    X(cJSON_CreateStringReference) \
    X(cJSON_CreateRaw) \
    X(cJSON_CreateNull) \
    X(cJSON_CreateBool) \
    X(cJSON_AddItemToObject) \
    X(cJSON_AddItemToArray) \
    X(cJSON_GetObjectItemCaseSensitive) \
    X(cJSON_PrintBuffered) \
    X(cJSON_Delete) \
    X(cJSON_free)
// clang-format on

/* The functions of libcjson.so.1, by their names (NULL until loaded). */
typedef struct report_cjson_table {
#define REPORT_CJSON_FIELD(name) __typeof__(&name) name; /* libcjson.so.1's name */
    REPORT_CJSON_FUNCS(REPORT_CJSON_FIELD)
#undef REPORT_CJSON_FIELD
} report_cjson_table_t;

REPORT_HIDDEN extern report_cjson_table_t report_cjson;

/* Load libcjson.so.1 once.  1 when every function was found; 0 otherwise, after one stderr
 * line the first time a caller asks with `say` set (the report writer: "no report"). */
REPORT_HIDDEN int report_cjson_load(int say);

#ifndef REPORT_CJSON_TABLE_ITSELF
#define cJSON_CreateObject report_cjson.cJSON_CreateObject
#define cJSON_CreateArray report_cjson.cJSON_CreateArray
#define cJSON_CreateNumber report_cjson.cJSON_CreateNumber
#define cJSON_CreateString report_cjson.cJSON_CreateString
#define cJSON_CreateStringReference report_cjson.cJSON_CreateStringReference
#define cJSON_CreateRaw report_cjson.cJSON_CreateRaw
#define cJSON_CreateNull report_cjson.cJSON_CreateNull
#define cJSON_CreateBool report_cjson.cJSON_CreateBool
#define cJSON_AddItemToObject report_cjson.cJSON_AddItemToObject
#define cJSON_AddItemToArray report_cjson.cJSON_AddItemToArray
#define cJSON_GetObjectItemCaseSensitive report_cjson.cJSON_GetObjectItemCaseSensitive
#define cJSON_PrintBuffered report_cjson.cJSON_PrintBuffered
#define cJSON_Delete report_cjson.cJSON_Delete
#define cJSON_free report_cjson.cJSON_free
#endif

#endif /* NPUPOOL_REPORT_CJSON_H */
