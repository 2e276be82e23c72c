/* base/debug.h — leveled assertions, in the style of mimalloc's mi_assert / _internal / _expensive.
 *
 * Owns: the preconditions and invariants checked where the code is (the walkers such as
 * pool_check() check everything at once; these check one fact at the moment it must hold).
 *   debug_assert(c)            level 1: contracts of public functions
 *   debug_assert_internal(c)   level 2: invariants between the files of a module
 *   debug_assert_expensive(c)  level 3: checks that cost more than the operation itself
 * NPUPOOL_DEBUG selects the level at compile time: 0 (release: every macro compiles to nothing,
 * the expression is not evaluated) in the plain build, 2 in the sanitizer builds of `make test`.
 * A failed assertion prints one "assertion failed" line (log.h's head first) and aborts: only test builds
 * have them, and a preload library never aborts its host in a release build.
 */
#ifndef NPUPOOL_BASE_DEBUG_H
#define NPUPOOL_BASE_DEBUG_H

#ifndef NPUPOOL_DEBUG
#define NPUPOOL_DEBUG 0
#endif

__attribute__((noreturn, cold)) void debug_assert_fail(const char *expr, const char *file, int line,
                                                       const char *func);

#define DEBUG_ASSERT_AT(level, c)                                                             \
    ((NPUPOOL_DEBUG >= (level) && !(c)) ? debug_assert_fail(#c, __FILE__, __LINE__, __func__) \
                                        : (void)0)

#if NPUPOOL_DEBUG >= 1
#define debug_assert(c) DEBUG_ASSERT_AT(1, c)
#else
#define debug_assert(c) ((void)0)
#endif
#if NPUPOOL_DEBUG >= 2
#define debug_assert_internal(c) DEBUG_ASSERT_AT(2, c)
#else
#define debug_assert_internal(c) ((void)0)
#endif
#if NPUPOOL_DEBUG >= 3
#define debug_assert_expensive(c) DEBUG_ASSERT_AT(3, c)
#else
#define debug_assert_expensive(c) ((void)0)
#endif

#endif
