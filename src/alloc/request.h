/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * request.h — one recap_malloc call (recap__request_t) and the inline placement of its hot path:
 * the best fitting free block, whether it splits, taking it out of its free set.
 *
 * A header of inline functions because the hot path (allocator.c) must keep them in its body,
 * while the replay path (replay_take.c) places a miss exactly as the hot path does; both include
 * it, neither calls the other for it. The slow paths these functions fall back on, out of
 * recap_malloc's body, are declared here and defined in segment_growth.c.
 */
#ifndef RECAP_ALLOC_REQUEST_H
#define RECAP_ALLOC_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/blocks.h"
#include "alloc/fit.h"
#include "alloc/free_set.h"
#include "alloc/state.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/options.h"

#if defined(__GNUC__)
#  define RECAP__CALLER_ADDRESS() __builtin_return_address(0)
/* The helpers of the hot path that the replay hook calls too: inlined into recap_malloc
 * whatever the compiler thinks of their several callers, so the hot path stays one body. */
#  define RECAP__HOT_INLINE inline __attribute__((always_inline))
/* The replay hook's path: out of recap_malloc's body, so the hot path's code stays as it was. */
#  define RECAP__COLD __attribute__((noinline, cold))
/* The rest of recap_malloc and recap_free after a folded pair's check: out of their bodies, so
 * that the folded pair saves and restores no registers for it. */
#  define RECAP__NOINLINE __attribute__((noinline))
#else
#  define RECAP__CALLER_ADDRESS() NULL
#  define RECAP__HOT_INLINE inline
#  define RECAP__COLD
#  define RECAP__NOINLINE
#endif

/* What one recap_malloc call works with, found under the lock by request_begin. */
typedef struct request {
  recap__device_state_t *d;
  recap__pool_t *pool;
  recap__free_set_t *set; /* the pool's free set of the request's size class */
  const recap__options_t *o;
  recap_stream_t stream;
  size_t size;    /* what the caller asked for */
  size_t rounded; /* the block size it gets */
  bool small;
  recap__route_logs_t *logs; /* the route's allocation logs (replay.c), or NULL */
  recap__block_t *cached;    /* the front cache's block, when it serves the request */
  bool folded;               /* ...in a folded pair: nothing to count (front_cache.c) */
} recap__request_t;

/* The slow paths the placement falls back on (segment_growth.c, which says what each does). */
RECAP__COLD recap_status_t recap__alloc_remap(const recap__request_t *r, recap__block_t *b,
                                              const char *at);
recap_status_t recap__alloc_malloc_slow(const recap__request_t *r, recap__block_t **b);
RECAP__COLD bool recap__alloc_take_from_large(recap__request_t *r, recap__block_t **b);

/* The set index of the best fit among the free blocks of `stream`, under the max_split_size
 * rules; set->count if none fits. The block stays in the set: the caller takes it out, or puts
 * the rest of a split in its place. */
static RECAP__HOT_INLINE size_t recap__find_free_block(const recap__free_set_t *set,
                                                       recap_stream_t stream, size_t size,
                                                       const recap__options_t *o) {
  size_t i = recap__free_set_lower_bound(set, stream, size);
  if (i == set->count) return i;
  const recap__block_t *b = set->items[i];
  if (b->stream != stream) return set->count;
  /* The segment is looked at only under max_split_size, off the common path. */
  if (o->max_split_size && !recap__fit_allowed(size, b->size, b->segment->vmm, o))
    return set->count;
  return i;
}

/* Whether handing b to a request of `size` bytes (rounded) splits off the rest
 * (recap__should_split). */
static inline bool recap__block_should_split(const recap__block_t *b, size_t size,
                                             const recap__options_t *o) {
  return recap__should_split(b->size, b->segment->small, b->segment->vmm, size, o);
}

/* Take the free block b out of the free set for the request, splitting off what it does not
 * need. The inactive-split statistics count free blocks that are part of a split segment. */
static RECAP__HOT_INLINE void recap__take_block(const recap__request_t *r, recap__block_t *b,
                                                size_t slot, bool in_set) {
  RECAP__ASSERT(recap__block_is_free(b));
  RECAP__ASSERT(b->size >= r->rounded && b->stream == r->stream);
  recap_memory_stats_t *st = &r->d->stats;
  bool already_split = recap__block_is_split(b);
  /* A record for the rest was reserved in request_begin; should new_segment have used it and
   * the host be out of memory now, the caller simply gets the whole block. */
  recap__block_t *rest = recap__block_should_split(b, r->rounded, r->o) ? recap__block_new() : NULL;
  if (rest) {
    recap__block_split(r->set, b, rest, r->rounded, slot, in_set);
    if (already_split) {
      recap__stat_kind(st->inactive_split_bytes, r->small, -(int64_t)r->rounded);
    } else {
      recap__stat_kind(st->inactive_split, r->small, 1);
      recap__stat_kind(st->inactive_split_bytes, r->small, (int64_t)rest->size);
    }
    return;
  }
  if (in_set) recap__free_set_erase_at(r->set, slot);
  if (already_split) {
    recap__stat_kind(st->inactive_split, r->small, -1);
    recap__stat_kind(st->inactive_split_bytes, r->small, -(int64_t)b->size);
  }
}

/* The request belongs to its block's segment's class from now on: it is carved from the large
 * set and counted in the large class (recap__take_block, account_alloc), as its free counts it. */
static inline void recap__request_to_large(recap__request_t *r, recap__free_set_t *large) {
  r->small = false;
  r->set = large;
}

/* The usual placement: the best fitting free block of the request's stream, else (a graph
 * pool's small request) a free block of its large VMM segments, else a new segment; what the
 * block does not need is split off. recap_malloc's hot path. */
static RECAP__HOT_INLINE recap_status_t recap__take_usual(recap__request_t *r, recap__block_t **b) {
  /* A cached block stays in the set, at `slot`, until recap__take_block decides what takes its
   * place; a new segment's block was never in it. */
  size_t slot = recap__find_free_block(r->set, r->stream, r->rounded, r->o);
  bool in_set = slot < r->set->count;
  *b = in_set ? r->set->items[slot] : NULL;
  if (RECAP__UNLIKELY(!in_set)) {
    if (r->small && recap__alloc_take_from_large(r, b)) return RECAP_SUCCESS;
    RECAP__CHECK(recap__alloc_malloc_slow(r, b));
  } else if (RECAP__UNLIKELY((*b)->unmapped)) {
    RECAP__CHECK(recap__alloc_remap(r, *b, (*b)->ptr));
    slot = recap__free_set_find(r->set, *b);
  }
  recap__take_block(r, *b, slot, in_set);
  return RECAP_SUCCESS;
}

#endif /* RECAP_ALLOC_REQUEST_H */
