/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * assert.h — internal invariants, checked where the data changes, in Debug builds.
 *
 * RECAP__ASSERT(cond) states something the library's own code guarantees (a free set stays
 * sorted, a block is not freed twice, a pool is deleted only when nobody references it). A
 * caller's mistake is never an assert: that returns a status. Debug builds define RECAP_DEBUG
 * (cmake/RecapCompileOptions.cmake); there a failed assert writes file:line and the expression
 * to stderr and aborts, because the state it guards is already broken and going on would only
 * move the damage further from its cause. Elsewhere the macro compiles to nothing and its
 * condition is not evaluated, so the hot path pays nothing for it.
 *
 * RECAP__LIKELY/RECAP__UNLIKELY mark the rare branches of hot paths for the compiler.
 */
#ifndef RECAP_CORE_ASSERT_H
#define RECAP_CORE_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#  define RECAP__LIKELY(x) __builtin_expect(!!(x), 1)
#  define RECAP__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define RECAP__LIKELY(x) (x)
#  define RECAP__UNLIKELY(x) (x)
#endif

#ifdef RECAP_DEBUG
/* Straight to stderr, not through the user's log callback: the process is about to abort, and
 * the message must not depend on state that may be part of what broke. */
static inline void recap__assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "recap: internal assertion failed at %s:%d: %s\n", file, line, expr);
  fflush(stderr);
  abort();
}
#  define RECAP__ASSERT(cond) \
    (RECAP__LIKELY(cond) ? (void)0 : recap__assert_fail(#cond, __FILE__, __LINE__))
#else
/* The condition is not compiled: a helper used only in asserts sits under #ifdef RECAP_DEBUG,
 * and no value is computed just to be asserted. */
#  define RECAP__ASSERT(cond) ((void)0)
#endif

#endif /* RECAP_CORE_ASSERT_H */
