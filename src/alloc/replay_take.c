/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay_take.c — the allocation path of a route with allocation logs: replay.c decides where
 * the request goes by the replay rule (replay.h), this file carves exactly that range out of a
 * free block, grows a VMM segment for space no log entry claims, and, when the device is out of
 * memory, gives the request space a later entry claims rather than failing.
 *
 * Apart from the hot path (allocator.c) because only a capture that records or replays its
 * addresses takes it (recap__alloc_take_logged is RECAP__COLD); it shares the hot path's inline
 * placement (request.h) so that a miss is placed exactly as recap_malloc would place it.
 */
#include "alloc/replay_take.h"

#include "alloc/blocks.h"
#include "alloc/replay.h"
#include "alloc/segment_growth.h"
#include "core/assert.h"
#include "core/error.h"

/* Take exactly [at, at + rounded) out of the free block f (a member of the request's set), for a
 * replayed address, into *out: the part of f before `at` stays a free block in the set, the part
 * after is split off as recap__take_block decides. *out NULL, with nothing changed, when no block
 * record can be had for the part before; an error when f's holes there could not be mapped again (f
 * stays as it was; other blocks may have changed, recap__alloc_remap). */
static recap_status_t take_range(const recap__request_t *r, recap__block_t *f, char *at,
                                 recap__block_t **out) {
  *out = NULL;
  if (f->unmapped) RECAP__CHECK(recap__alloc_remap(r, f, at));
  size_t slot = recap__free_set_find(r->set, f);
  RECAP__ASSERT(slot < r->set->count && recap__block_is_free(f));
  RECAP__ASSERT(at >= f->ptr && (size_t)(at - f->ptr) + r->rounded <= f->size);
  if (at == f->ptr) {
    recap__take_block(r, f, slot, true);
    *out = f;
    return RECAP_SUCCESS;
  }
  recap__block_t *b = recap__block_new();
  if (!b) return RECAP_SUCCESS;
  bool already_split = recap__block_is_split(f);
  /* f keeps the part before `at`; b, from `at` on, takes f's slot; f goes back in the set
   * (request_begin kept room for two more blocks than the set has). */
  recap__block_split(r->set, f, b, (size_t)(at - f->ptr), slot, true);
  if (!recap__free_set_insert(r->set, f))
    RECAP__WARN("out of host memory: a free block of %zu bytes is lost to the cache", f->size);
  /* Both parts are free blocks of a split segment now. */
  recap_memory_stats_t *st = &r->d->stats;
  recap__stat_kind(st->inactive_split, r->small, already_split ? 1 : 2);
  if (!already_split)
    recap__stat_kind(st->inactive_split_bytes, r->small, (int64_t)(f->size + b->size));
  /* A record for recap__take_block's split of the rest; without one the block keeps the rest. */
  (void)recap__block_reserve();
  recap__take_block(r, b, recap__free_set_find(r->set, b), true);
  *out = b;
  return RECAP_SUCCESS;
}

/* The replay's "new segment" with VMM segments: the growth's free tail is no new segment, and an
 * unused entry of the replay log may claim it, so the request goes to unclaimed space after the
 * growth; when the log claims the grown tail, the segment grows by the whole request beyond it.
 * Should the log claim even that (addresses past a trim), the tail's start. */
static RECAP__COLD recap_status_t take_vmm_unclaimed(const recap__request_t *r,
                                                     recap__block_t **b) {
  recap__block_t *tail = NULL, *f = NULL;
  char *at = NULL;
  RECAP__CHECK(recap__alloc_grow_vmm(r, r->rounded, &tail));
  for (int round = 0; round < 2; round++) {
    /* take_range splits twice: room for two more blocks (the growth may have added one). */
    if (!recap__free_set_reserve_all(r->set, 2)) break;
    if (recap__replay_place_unclaimed(r->logs, r->set, r->stream, r->rounded, r->o, &f, &at)) {
      RECAP__CHECK(take_range(r, f, at, b));
      if (*b) return RECAP_SUCCESS;
      break;
    }
    if (round == 0) RECAP__CHECK(recap__alloc_grow_vmm(r, tail->size + r->rounded, &tail));
  }
  if (tail->unmapped) RECAP__CHECK(recap__alloc_remap(r, tail, tail->ptr));
  bool erased = recap__free_set_erase(r->set, tail);
  RECAP__ASSERT(erased);
  (void)erased;
  recap__take_block(r, tail, r->set->count, false);
  *b = tail;
  return RECAP_SUCCESS;
}

/* The allocation path of a route with logs attached (replay.c decides, this file carves). A
 * small request of a graph pool with VMM segments may be placed in the large set's blocks too
 * (recap__alloc_take_from_large's rule), after its own class's. */
RECAP__COLD recap_status_t recap__alloc_take_logged(recap__request_t *r, recap__block_t **b) {
  char *at = NULL;
  bool hit = false;
  recap_status_t s = RECAP_SUCCESS;
  recap__free_set_t *large = recap__alloc_large_set_for_small(r);
  switch (recap__replay_place(r->logs, r->set, large, r->stream, r->rounded, r->o, b, &at, &hit)) {
    case RECAP__REPLAY_AT: {
      recap__request_t own = *r;
      if (large && !(*b)->segment->small) recap__request_to_large(r, large);
      if (take_range(r, *b, at, b) == RECAP_SUCCESS && *b) break;
      *r = own; /* nothing was carved: the request is its own class's again */
      hit = false;
      s = recap__take_usual(r, b);
      break;
    }
    case RECAP__REPLAY_NEW_SEGMENT: {
      recap__saved_error_t saved;
      recap__error_save(&saved);
      if (r->o->expandable_segments) {
        s = take_vmm_unclaimed(r, b);
        if (s == RECAP_SUCCESS) break;
      } else {
        s = recap__alloc_malloc_slow(r, b);
        if (s == RECAP_SUCCESS) {
          recap__take_block(r, *b, r->set->count, false);
          break;
        }
      }
      /* Out of device memory: space that a later replayed address claims beats failing. */
      size_t slot = recap__find_free_block(r->set, r->stream, r->rounded, r->o);
      bool found = slot < r->set->count;
      if (s == RECAP_ERROR_OUT_OF_MEMORY && found) {
        *b = r->set->items[slot];
        found = !(*b)->unmapped || recap__alloc_remap(r, *b, (*b)->ptr) == RECAP_SUCCESS;
        if (found) recap__take_block(r, *b, recap__free_set_find(r->set, *b), true);
      }
      if (s == RECAP_ERROR_OUT_OF_MEMORY &&
          (found || (r->small && recap__alloc_take_from_large(r, b)))) {
        (void)recap__error_restore(&saved); /* the caller's last error, not this OOM */
        r->pool->budget_attempted = false;  /* nor a refusal of the budget */
        s = RECAP_SUCCESS;
      }
      break;
    }
    case RECAP__REPLAY_USUAL: s = recap__take_usual(r, b); break;
  }
  if (s == RECAP_SUCCESS) recap__replay_note(r->logs, (*b)->ptr, r->rounded, hit);
  return s;
}
