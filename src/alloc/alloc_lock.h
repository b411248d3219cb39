/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_lock.h — the allocator's one lock as every caller but recap_malloc's and recap_free's
 * own paths takes it. Inline (taking it is one atomic exchange); a header of its own because
 * taking it ends a folded run of the front cache (front_cache.h), which the structures alone
 * (state.h) need not know.
 */
#ifndef RECAP_ALLOC_ALLOC_LOCK_H
#define RECAP_ALLOC_ALLOC_LOCK_H

#include "alloc/front_cache.h"
#include "alloc/state.h"
#include "core/assert.h"
#include "core/lock.h"

/* The allocator's lock, for every caller but recap_malloc's and recap_free's own paths: it
 * brings the statistics up to date (a folded run of pairs ends) and ends what a pair in progress
 * would otherwise take for "nothing between", so that whatever the caller reads or changes is
 * exact. The cached block stays cached (recap__alloc_settle, allocator.h, merges it). */
static inline void recap__alloc_lock(void) {
  recap__lock_acquire(&recap__alloc.lock);
  recap__alloc.front.taken = NULL;
  if (RECAP__UNLIKELY(recap__alloc.front.armed)) recap__front_fold_end(&recap__alloc.front);
}
static inline void recap__alloc_unlock(void) { recap__lock_release(&recap__alloc.lock); }

#endif /* RECAP_ALLOC_ALLOC_LOCK_H */
