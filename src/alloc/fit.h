/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fit.h — the size rules of placing a request in a free block: whether it splits the rest off
 * and whether the max_split_size rules let it take the block at all. Inline: the hot path of
 * recap_malloc (request.h), the front cache's admission (front_cache.c) and the replay
 * placement (replay.c) decide by them on every call, and must decide alike.
 */
#ifndef RECAP_ALLOC_FIT_H
#define RECAP_ALLOC_FIT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/options.h"

/* Whether handing a free block of block_size bytes (of the small size class or not, of a VMM
 * segment or not) to a request of `size` bytes (rounded) splits off the rest. Decided on the
 * request's size, as PyTorch does: a request of max_split_size or more keeps its whole block
 * (recap__find_free_block gives it none more than large_segment larger); a smaller request splits
 * even a new segment that rounding made max_split_size large. The max_split_size rules limit the
 * fragmentation of classic segments, which go back to the driver only whole; a VMM segment gives
 * back its free tail at any chunk boundary, so its blocks are ruled as if max_split_size were 0: a
 * request always splits off a rest larger than small_size, and never holds a tail much larger than
 * itself. A request of the small class served by a graph pool's large VMM segment
 * (docs/allocator.md, "Small requests in a graph pool's large segment") splits as in a small
 * segment: it holds no more than min_block_size beyond its size, as it would there. */
static inline bool recap__should_split(size_t block_size, bool small, bool vmm, size_t size,
                                       const recap__options_t *o) {
  size_t remaining = block_size - size;
  if (small || size <= o->small_size) return remaining >= o->min_block_size;
  if (o->max_split_size && !vmm && size >= o->max_split_size) return false;
  return remaining > o->small_size;
}

/* The max_split_size rules of best fit: whether a request of `size` bytes may take a free block
 * of block_size bytes (of a VMM segment or not: a VMM segment's blocks have no such rule, see
 * recap__should_split). */
static inline bool recap__fit_allowed(size_t size, size_t block_size, bool vmm,
                                      const recap__options_t *o) {
  if (!o->max_split_size || vmm) return true;
  /* A small request does not take an unsplittable big block... */
  if (size < o->max_split_size && block_size >= o->max_split_size) return false;
  /* ...and a big request does not take a block much bigger than itself. */
  if (size >= o->max_split_size && block_size >= size + o->large_segment) return false;
  return true;
}

#endif /* RECAP_ALLOC_FIT_H */
