/* tests/unit/ledger_test_util.h — what the ledger's unit tests share: the invariant check they
 * call after every phase, and a setup that empties the ledger.  Header-only (static functions),
 * included after <cmocka.h>, so each test binary stays one file.
 */
#ifndef NPUPOOL_LEDGER_TEST_UTIL_H
#define NPUPOOL_LEDGER_TEST_UTIL_H

#include "ledger.h"

/* ledger_check() finds nothing wrong, or the test fails with what it found. */
static void check_ledger(void)
{
    char why[256] = "";
    int bad = ledger_check(why, sizeof why);
    if (bad) fail_msg("ledger_check: %d violations: %s", bad, why);
}

/* A cmocka setup: every test starts with an empty ledger. */
static int __attribute__((unused)) setup_empty_ledger(void **state)
{
    (void)state;
    ledger_clear();
    return 0;
}

#endif
