/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * front_cache.c — the rules of the front cache: when a freed block may skip its merge, and when
 * a malloc may take it back.
 *
 * The commonest pair of a training step is a free followed by a malloc of the same size on the
 * same stream. The slow path undoes its own work there: the free merges the block with its free
 * neighbour (a search in the free set, a merge, a record recycled), and the malloc finds the
 * merged block again by best fit and splits it at the same place. The front cache keeps the
 * freed block as it is instead, out of the free set, and the malloc takes it back in O(1).
 *
 * It is exact, not approximate: a block is admitted only when the slow path's next malloc of
 * its size on its stream would produce the very same blocks (the merged block is that request's
 * best fit under the current options, and it would be split back at the same address), and the
 * statistics are counted at admission and at the take as the slow path's merge and split count
 * them, counter by counter. Every path that changes the block structure otherwise, or looks
 * blocks up by address, merges the cached block first (recap__alloc_settle), so nothing else
 * ever sees it; the snapshot and recap_memory_check show it as the merged free block it stands
 * for. The cache holds one block: the latest free. These functions decide and count; allocator.c
 * and blocks.c move the blocks.
 *
 * Folding. A loop that allocates and frees one size on one stream repeats one pair: the take of
 * the cached block, its hand-out, its free and its admission, and each changes a dozen counters
 * by the same amounts, back and forth. Once one such pair was counted in full with nothing else
 * between its take and its admission, the cache is armed: the state after the admission is the
 * state before the take (the same block, the same rest, the same counters), so a pair that
 * repeats it (the same block, the same requested size, the same options, nothing else under the
 * lock between) goes through the very states the counted one went through. Counted, it would
 * leave every `current` and every `peak` as they are (the peaks already hold the states it
 * passes through) and add the same amounts to the `allocated` and `freed` totals. So a folded
 * pair counts nothing, and recap__front_fold_end adds k times those amounts for k pairs, plus
 * the take and the hand-out of a block still lent (counted as front_take and account_alloc count
 * them). Everything else that takes the allocator's lock calls it first (recap__alloc_lock), and
 * so do recap_malloc and recap_free before any other path; so every reader and every writer of
 * a statistic finds it exact, peaks included, and a reset of the peaks, or any other change,
 * disarms the cache until a pair is again counted in full.
 */
#include "alloc/fit.h"
#include "alloc/front_cache.h"
#include "core/assert.h"

/* Whether the free block that b and rest merge into (merged bytes, starting at b) would be the
 * best fit of a request of b's size on b's stream: no other free block of the stream at least
 * that large sorts before it. rest is in the set, b is not; the merged block sorts where rest's
 * place would not matter, so rest is skipped. */
static bool merged_is_best_fit(const recap__free_set_t *set, const recap__block_t *b,
                               const recap__block_t *rest, size_t merged) {
  size_t i = recap__free_set_lower_bound(set, b->stream, b->size);
  if (i < set->count && set->items[i] == rest) i++;
  if (i == set->count) return true;
  const recap__block_t *x = set->items[i];
  return x->stream != b->stream || x->size > merged || (x->size == merged && x->ptr > b->ptr);
}

bool recap__front_put(recap__front_t *f, recap__device_state_t *d, recap__block_t *b,
                      const recap__free_set_t *set, const recap__options_t *o, uint64_t version,
                      size_t requested) {
  RECAP__ASSERT(!f->block && !f->armed && recap__block_is_free(b) && b->stream_use_count == 0);
  if (f->off || version == 0) return false;
  /* A small request's block in a graph pool's large VMM segment (segment_growth.c
   * recap__alloc_take_from_large): the slow path's malloc of its size looks in the small set first,
   * which this rule does not see, so the block takes the slow path and merges at once. */
  if (b->size <= o->small_size && !b->segment->small) return false;
  /* A free block before b would absorb it: the merged block would start elsewhere. */
  if (b->prev && recap__block_is_free(b->prev)) return false;
  recap__block_t *rest = b->next && recap__block_is_free(b->next) ? b->next : NULL;
  const recap__segment_t *seg = b->segment;
  size_t merged = b->size + (rest ? rest->size : 0);
  /* The slow path's malloc of b->size must take the merged block and split it back into b and
   * rest (or, without rest, take b whole: a split of nothing never happens). */
  if (rest && !recap__should_split(merged, seg->small, seg->vmm, b->size, o)) return false;
  if (!recap__fit_allowed(b->size, merged, seg->vmm, o)) return false;
  if (!merged_is_best_fit(set, b, rest, merged)) return false;
  /* recap__block_free's counts: the merge with rest removes one split block of rest's bytes, and
   * the merged block is one of a split segment unless it covers the whole segment. */
  bool split = merged != seg->size;
  f->split_blocks = (split ? 1 : 0) - (rest ? 1 : 0);
  f->split_bytes = (split ? (int64_t)merged : 0) - (rest ? (int64_t)rest->size : 0);
  recap_memory_stats_t *st = &d->stats;
  recap__stat_kind(st->inactive_split, seg->small, f->split_blocks);
  recap__stat_kind(st->inactive_split_bytes, seg->small, f->split_bytes);
  recap__stat_kind(st->active, seg->small, -1);
  recap__stat_kind(st->active_bytes, seg->small, -(int64_t)b->size);
  f->block = b;
  f->rest = rest;
  f->options_version = version;
  f->admitted++;
  /* The pair that ends here was counted in full, with nothing between its take and now: arm. */
  if (f->taken == b && f->taken_requested == requested) {
    f->armed = true;
    f->folded = 0;
    f->fold_d = d;
    f->fold_rest = rest;
    f->fold_small = seg->small;
    f->fold_size = b->size;
    f->fold_requested = requested;
    f->fold_split_blocks = f->split_blocks;
    f->fold_split_bytes = f->split_bytes;
  }
  f->taken = NULL;
  return true;
}

/* A counter's totals after k back-and-forth changes of `amount` (either sign first): its current
 * and its peak are where one change and its undoing leave them. */
static void add_cycles(recap_stat_t *array, bool small, int64_t amount, uint64_t k) {
  int64_t total = (int64_t)k * (amount < 0 ? -amount : amount);
  recap_stat_t *kind = &array[small ? RECAP_STAT_SMALL : RECAP_STAT_LARGE];
  array[RECAP_STAT_ALL].allocated += total;
  array[RECAP_STAT_ALL].freed += total;
  kind->allocated += total;
  kind->freed += total;
}

void recap__front_fold_end(recap__front_t *f) {
  RECAP__ASSERT(f->armed && (!f->lent || !f->block));
  recap_memory_stats_t *st = &f->fold_d->stats;
  bool small = f->fold_small;
  uint64_t k = f->folded;
  if (k) {
    int64_t size = (int64_t)f->fold_size;
    add_cycles(st->inactive_split, small, f->fold_split_blocks, k);
    add_cycles(st->inactive_split_bytes, small, f->fold_split_bytes, k);
    add_cycles(st->allocation, small, 1, k);
    add_cycles(st->allocated_bytes, small, size, k);
    add_cycles(st->requested_bytes, small, (int64_t)f->fold_requested, k);
    add_cycles(st->active, small, 1, k);
    add_cycles(st->active_bytes, small, size, k);
  }
  if (f->lent) {
    /* front_take's count of the take (the admission's, undone), then account_alloc's. */
    int64_t size = (int64_t)f->fold_size;
    recap__stat_kind(st->inactive_split, small, -f->fold_split_blocks);
    recap__stat_kind(st->inactive_split_bytes, small, -f->fold_split_bytes);
    recap__stat_kind(st->allocation, small, 1);
    recap__stat_kind(st->allocated_bytes, small, size);
    recap__stat_kind(st->requested_bytes, small, (int64_t)f->fold_requested);
    recap__stat_kind(st->active, small, 1);
    recap__stat_kind(st->active_bytes, small, size);
    f->lent = NULL;
  }
  f->folded = 0;
  f->armed = false;
}

recap__block_t *recap__front_take(recap__front_t *f, recap__device_state_t *d,
                                  const recap__pool_t *pool, recap_stream_t stream, size_t rounded,
                                  size_t size, uint64_t version, bool *folded) {
  recap__block_t *b = f->block;
  RECAP__ASSERT(b != NULL);
  if (b->segment->pool != pool || b->stream != stream || b->size != rounded ||
      version != f->options_version)
    return NULL;
  /* The slow path would first free the blocks whose events completed: the structure may
   * change, so the request takes that path. */
  if (d->pending_count || d->deferred_count) return NULL;
  if (f->armed) {
    if (RECAP__LIKELY(size == f->fold_requested && d == f->fold_d)) {
      /* The pair repeats the counted one: nothing to count until recap__front_fold_end. */
      f->block = f->rest = NULL;
      f->lent = b;
      f->hits++;
      *folded = true;
      return b;
    }
    recap__front_fold_end(f);
  }
  *folded = false;
  /* Nothing changed the block structure since the admission: every path that does settles. */
  RECAP__ASSERT(recap__block_is_free(b) && (!b->prev || !recap__block_is_free(b->prev)));
  RECAP__ASSERT(f->rest ? b->next == f->rest && recap__block_is_free(f->rest)
                        : !b->next || !recap__block_is_free(b->next));
  /* recap__take_block's counts on the merged block: split back (rest) or taken whole. */
  bool small = b->segment->small;
  size_t merged = recap__front_merged_size(f);
  bool already_split = merged != b->segment->size;
  recap_memory_stats_t *st = &d->stats;
  if (f->rest) {
    if (already_split) {
      recap__stat_kind(st->inactive_split_bytes, small, -(int64_t)rounded);
    } else {
      recap__stat_kind(st->inactive_split, small, 1);
      recap__stat_kind(st->inactive_split_bytes, small, (int64_t)f->rest->size);
    }
  } else if (already_split) {
    recap__stat_kind(st->inactive_split, small, -1);
    recap__stat_kind(st->inactive_split_bytes, small, -(int64_t)b->size);
  }
  f->block = f->rest = NULL;
  f->hits++;
  f->taken = b;
  f->taken_requested = size;
  return b;
}
