/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * front_cache.h — the rules of the front cache (front_cache.c): which freed block waits
 * unmerged for the next malloc of its size, which request takes it, and the count of folded
 * pairs. The cache's state (recap__front_t) is part of the allocator record (state.h).
 */
#ifndef RECAP_ALLOC_FRONT_CACHE_H
#define RECAP_ALLOC_FRONT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/free_set.h"
#include "alloc/state.h"
#include "core/options.h"
#include "recap/core.h"

/* The front cache's rules (front_cache.c; lock held). put: whether the block b, just freed by the
 * user and needing no event, may wait in the empty cache f: only when the slow path's next malloc
 * of b's size on b's stream would take the block b merges into and split it back exactly into b and
 * its rest, under the options of `version`. Admitted, b's free is counted in d's statistics as
 * recap__block_free counts it (merged), and f holds it. take: the cached block, when a request of
 * `rounded` bytes on stream from pool (no logs) is one the slow path would serve with it; its take
 * is counted as recap__take_block counts it, and f is emptied. NULL otherwise. `requested` is what
 * the freed block was asked for, `size` what the request asks for: with them put arms the cache
 * after a pair counted in full, and take folds (*folded: nothing counted; the caller skips
 * account_alloc's counts too) a pair that repeats it. */
bool recap__front_put(recap__front_t *f, recap__device_state_t *d, recap__block_t *b,
                      const recap__free_set_t *set, const recap__options_t *o, uint64_t version,
                      size_t requested);
recap__block_t *recap__front_take(recap__front_t *f, recap__device_state_t *d,
                                  const recap__pool_t *pool, recap_stream_t stream, size_t rounded,
                                  size_t size, uint64_t version, bool *folded);
/* Count what the folded pairs owe (and the lent block's take and hand-out) and disarm: the
 * statistics are then exactly the slow path's. Lock held; call it only when f->armed. */
void recap__front_fold_end(recap__front_t *f);
/* The size of the free block the cached block stands for (itself and its rest). */
static inline size_t recap__front_merged_size(const recap__front_t *f) {
  return f->block->size + (f->rest ? f->rest->size : 0);
}

#endif /* RECAP_ALLOC_FRONT_CACHE_H */
