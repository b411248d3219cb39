/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blocks.c — the blocks that tile a segment: the one allocator record (recap__alloc, whose spare
 * block records blocks.h recycles), a free block split in two, and a block no longer used merged
 * with its free neighbours into its free set.
 *
 * Apart from the malloc/free path (allocator.c) because everything below it splits or merges
 * too: events free blocks whose last event completed (events.c), a new segment's block is split
 * at the request (segment_growth.c) and a replayed address carved out of a free block
 * (replay_take.c). This file calls none of them, so each may call it.
 */
#include "alloc/blocks.h"
#include "alloc/front_cache.h"
#include "alloc/ptr_map.h"
#include "alloc/vmm_holes.h"
#include "core/assert.h"
#include "core/error.h"

recap__allocator_t recap__alloc = {.lock = RECAP__LOCK_INIT};

/* Keep the first `size` bytes of the free block b; `rest`, a fresh record, becomes the free
 * block right after it. The rest takes b's free-set slot when b is in the set (in_set), which
 * usually moves nothing; a new segment's block never was in the set, so the rest is inserted
 * (the caller reserved room). */
void recap__block_split(recap__free_set_t *set, recap__block_t *b, recap__block_t *rest,
                        size_t size, size_t slot, bool in_set) {
  RECAP__ASSERT(size < b->size);
  RECAP__ASSERT(!in_set || set->items[slot] == b);
  rest->ptr = b->ptr + size;
  rest->size = b->size - size;
  rest->stream = b->stream;
  rest->segment = b->segment;
  rest->prev = b;
  rest->next = b->next;
  if (rest->next) rest->next->prev = rest;
  b->next = rest;
  b->size = size;
  if (RECAP__UNLIKELY(b->unmapped)) {
    /* Holes of a VMM segment: each part keeps those inside it. */
    rest->unmapped = recap__vmm_unmapped_in(b->segment, rest->ptr, rest->size);
    b->unmapped -= rest->unmapped;
  }
  set->blocks++;
  if (in_set)
    recap__free_set_replace_at(set, slot, rest);
  else
    recap__free_set_insert(set, rest);
  RECAP__ASSERT(b->ptr + b->size == rest->ptr);
  RECAP__ASSERT(!rest->next || rest->ptr + rest->size == rest->next->ptr);
  RECAP__ASSERT(rest->ptr + rest->size <= b->segment->base + b->segment->size);
}

/* Absorb the free neighbour `other`, already out of the free set, into b. Returns the bytes
 * absorbed. */
static size_t merge(recap__block_t *b, recap__block_t *other) {
  RECAP__ASSERT(recap__block_is_free(other) && other->segment == b->segment);
  RECAP__ASSERT(other == b->prev ? other->ptr + other->size == b->ptr
                                 : other == b->next && b->ptr + b->size == other->ptr);
  size_t absorbed = other->size;
  if (other == b->prev) {
    b->ptr = other->ptr;
    b->prev = other->prev;
    if (b->prev)
      b->prev->next = b;
    else
      b->segment->head = b;
  } else {
    b->next = other->next;
    if (b->next) b->next->prev = b;
  }
  b->size += absorbed;
  b->unmapped += other->unmapped; /* holes of a VMM segment stay where they are */
  recap__free_set_of(b->segment->pool, b->segment->small)->blocks--;
  RECAP__ASSERT(b->ptr >= b->segment->base &&
                b->ptr + b->size <= b->segment->base + b->segment->size);
  recap__block_delete(other);
  return absorbed;
}

/* b is no longer used by anyone: merge it with free neighbours and put it in its free set. The
 * merged block takes the set slot of a neighbour it absorbs (recap__free_set_replace_at), so the
 * common free, which undoes a split, moves nothing in the set. The set's capacity was reserved by
 * the caller's path (recap_free reserves before it starts), so the insert cannot fail here. */
void recap__block_merge_into_set(recap__block_t *b, int64_t *split_blocks_out,
                                 int64_t *split_bytes_out) {
  /* Freed once: the caller cleared `allocated`, and no event or capture still holds it. */
  RECAP__ASSERT(recap__block_is_free(b));
  recap__segment_t *seg = b->segment;
  recap__free_set_t *set = recap__free_set_of(seg->pool, seg->small);
  int64_t split_blocks = 0, split_bytes = 0;
  recap__block_t *prev = b->prev && recap__block_is_free(b->prev) ? b->prev : NULL;
  recap__block_t *next = b->next && recap__block_is_free(b->next) ? b->next : NULL;
  /* With both free, the previous one leaves the set and b takes the next one's slot. */
  if (prev && next) recap__free_set_erase(set, prev);
  recap__block_t *slot_owner = next ? next : prev;
  size_t slot = slot_owner ? recap__free_set_find(set, slot_owner) : set->count;
  if (prev) {
    split_blocks--;
    split_bytes -= (int64_t)merge(b, prev);
  }
  if (next) {
    split_blocks--;
    split_bytes -= (int64_t)merge(b, next);
  }
  if (recap__block_is_split(b)) {
    split_blocks++;
    split_bytes += (int64_t)b->size;
  }
  RECAP__ASSERT(slot == set->count || set->items[slot] == slot_owner);
  if (slot < set->count)
    recap__free_set_replace_at(set, slot, b);
  else if (!recap__free_set_insert(set, b))
    RECAP__WARN("out of host memory: a free block of %zu bytes is lost to the cache", b->size);
  *split_blocks_out = split_blocks;
  *split_bytes_out = split_bytes;
}

/* b is no longer used by anyone: merge it into its free set (recap__block_merge_into_set) and
 * count it. */
void recap__block_free(recap__device_state_t *d, recap__block_t *b) {
  bool small = b->segment->small;
  size_t original = b->size;
  int64_t split_blocks, split_bytes;
  recap__block_merge_into_set(b, &split_blocks, &split_bytes);
  recap_memory_stats_t *st = &d->stats;
  recap__stat_kind(st->inactive_split, small, split_blocks);
  recap__stat_kind(st->inactive_split_bytes, small, split_bytes);
  recap__stat_kind(st->active, small, -1);
  recap__stat_kind(st->active_bytes, small, -(int64_t)original);
}

/* The front cache's block (front_cache.c), counted free but not merged yet, merges now. */
void recap__alloc_settle(void) {
  recap__front_t *f = &recap__alloc.front;
  f->taken = NULL;
  if (f->armed) recap__front_fold_end(f);
  recap__block_t *b = f->block;
  if (RECAP__LIKELY(!b)) return;
  f->block = f->rest = NULL;
  /* It stayed in the pointer map (not allocated), so that a pair skips a removal and an insert:
   * out now. Its statistics were counted when it was admitted: only the blocks move now. */
  recap__block_t *mapped = recap__ptr_map_remove(&recap__alloc.allocated, b->ptr);
  RECAP__ASSERT(mapped == b);
  (void)mapped;
  int64_t split_blocks, split_bytes;
  recap__block_merge_into_set(b, &split_blocks, &split_bytes);
  RECAP__ASSERT(split_blocks == f->split_blocks && split_bytes == f->split_bytes);
  (void)split_blocks;
  (void)split_bytes;
}
