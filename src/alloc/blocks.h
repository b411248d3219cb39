/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blocks.h — block records and the splits and merges of blocks (blocks.c).
 *
 * The records are recycled through a free list in the allocator record so that splitting on the
 * hot path does not reach the host allocator; taking and giving one back are inline because
 * recap_malloc does it on every split.
 */
#ifndef RECAP_ALLOC_BLOCKS_H
#define RECAP_ALLOC_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "alloc/free_set.h"
#include "alloc/state.h"
#include "core/host.h"

/* A zeroed block record, from the spare list or the host; NULL without host memory. */
static inline recap__block_t *recap__block_new(void) {
  recap__block_t *b = recap__alloc.spare_blocks;
  if (b) {
    recap__alloc.spare_blocks = b->next;
  } else {
    b = recap__host_malloc(sizeof *b);
    if (!b) return NULL;
  }
  memset(b, 0, sizeof *b);
  return b;
}

/* Make sure one record is on the free list, so that a later recap__block_new cannot fail. */
static inline bool recap__block_reserve(void) {
  if (recap__alloc.spare_blocks) return true;
  recap__block_t *b = recap__host_malloc(sizeof *b);
  if (!b) return false;
  b->next = NULL;
  recap__alloc.spare_blocks = b;
  return true;
}

/* Give a record back to the spare list (its stream list freed). */
static inline void recap__block_delete(recap__block_t *b) {
  recap__host_free(b->stream_uses);
  b->stream_uses = NULL;
  b->next = recap__alloc.spare_blocks;
  recap__alloc.spare_blocks = b;
}

/* The free set of pool for blocks of the small size class or the large one. */
static inline recap__free_set_t *recap__free_set_of(recap__pool_t *pool, bool small) {
  return small ? &pool->small_free : &pool->large_free;
}

/* Keep the first `size` bytes of the free block b; rest (a fresh record) becomes the free block
 * after it, in b's set slot when in_set, else inserted (lock held). */
void recap__block_split(recap__free_set_t *set, recap__block_t *b, recap__block_t *rest,
                        size_t size, size_t slot, bool in_set);
/* b is no longer used by anyone: merge it with its free neighbours into its free set; the
 * changes of the inactive-split counters are returned, not counted (lock held). */
void recap__block_merge_into_set(recap__block_t *b, int64_t *split_blocks_out,
                                 int64_t *split_bytes_out);
/* recap__block_merge_into_set, counted in d's statistics (lock held). */
void recap__block_free(recap__device_state_t *d, recap__block_t *b);

/* Merge the front cache's block into its free set now (lock held; no-op when empty): what every
 * path that changes or walks the block structure by address calls first. */
void recap__alloc_settle(void);

#endif /* RECAP_ALLOC_BLOCKS_H */
