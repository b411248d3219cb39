/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * free_set.c — the ordered free-block set of free_set.h.
 */
#include "alloc/free_set.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/free_set.h"
#include "alloc/state.h"
#include "core/assert.h"
#include "core/host.h"

static int compare(recap_stream_t sa, size_t za, uintptr_t pa, const recap__block_t *b) {
  uintptr_t sb = (uintptr_t)b->stream;
  if ((uintptr_t)sa != sb) return (uintptr_t)sa < sb ? -1 : 1;
  if (za != b->size) return za < b->size ? -1 : 1;
  uintptr_t pb = (uintptr_t)b->ptr;
  if (pa != pb) return pa < pb ? -1 : 1;
  return 0;
}

#ifdef RECAP_DEBUG
/* Whether the member at i sorts strictly between its neighbours: what every change to the set
 * must keep true around the slot it touched (checked in Debug builds). A block in the set
 * twice breaks it too, since it compares equal to itself. */
static inline bool sorted_at(const recap__free_set_t *s, size_t i) {
  const recap__block_t *b = s->items[i];
  uintptr_t p = (uintptr_t)b->ptr;
  if (i > 0 && compare(b->stream, b->size, p, s->items[i - 1]) <= 0) return false;
  if (i + 1 < s->count && compare(b->stream, b->size, p, s->items[i + 1]) >= 0) return false;
  return true;
}
#endif

/* The first index in [lo, hi) whose member is not below the key; hi if none. */
static size_t lower_bound_in(const recap__free_set_t *s, size_t lo, size_t hi,
                             recap_stream_t stream, size_t size, uintptr_t ptr) {
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (compare(stream, size, ptr, s->items[mid]) > 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static size_t lower_bound(const recap__free_set_t *s, recap_stream_t stream, size_t size,
                          uintptr_t ptr) {
  return lower_bound_in(s, 0, s->count, stream, size, ptr);
}

size_t recap__free_set_lower_bound(const recap__free_set_t *s, recap_stream_t stream, size_t size) {
  return lower_bound(s, stream, size, 0);
}

bool recap__free_set_grow(recap__free_set_t *s, size_t extra) {
  if (s->count + extra <= s->capacity) return true;
  size_t capacity = s->capacity ? s->capacity : 16;
  while (capacity < s->count + extra) capacity *= 2;
  recap__block_t **items = recap__host_realloc(s->items, capacity * sizeof *items);
  if (!items) return false;
  s->items = items;
  s->capacity = capacity;
  return true;
}

bool recap__free_set_insert(recap__free_set_t *s, recap__block_t *b) {
  if (!recap__free_set_reserve(s, 1)) return false;
  size_t at = lower_bound(s, b->stream, b->size, (uintptr_t)b->ptr);
  memmove(s->items + at + 1, s->items + at, (s->count - at) * sizeof *s->items);
  s->items[at] = b;
  s->count++;
  RECAP__ASSERT(sorted_at(s, at));
  return true;
}

void recap__free_set_erase_at(recap__free_set_t *s, size_t at) {
  RECAP__ASSERT(at < s->count);
  memmove(s->items + at, s->items + at + 1, (s->count - at - 1) * sizeof *s->items);
  s->count--;
  RECAP__ASSERT(at == s->count || sorted_at(s, at));
}

size_t recap__free_set_find(const recap__free_set_t *s, const recap__block_t *b) {
  size_t at = lower_bound(s, b->stream, b->size, (uintptr_t)b->ptr);
  return at < s->count && s->items[at] == b ? at : s->count;
}

bool recap__free_set_erase(recap__free_set_t *s, recap__block_t *b) {
  size_t at = recap__free_set_find(s, b);
  if (at == s->count) return false;
  recap__free_set_erase_at(s, at);
  return true;
}

void recap__free_set_replace_at(recap__free_set_t *s, size_t i, recap__block_t *b) {
  RECAP__ASSERT(i < s->count);
  recap_stream_t stream = b->stream;
  size_t size = b->size;
  uintptr_t ptr = (uintptr_t)b->ptr;
  recap__block_t **items = s->items;
  if (i > 0 && compare(stream, size, ptr, items[i - 1]) < 0) {
    /* b goes before slot i: shift [at, i) one up. */
    size_t at = lower_bound_in(s, 0, i, stream, size, ptr);
    memmove(items + at + 1, items + at, (i - at) * sizeof *items);
    items[at] = b;
    RECAP__ASSERT(sorted_at(s, at));
  } else if (i + 1 < s->count && compare(stream, size, ptr, items[i + 1]) > 0) {
    /* b goes after slot i: shift (i, at) one down. */
    size_t at = lower_bound_in(s, i + 1, s->count, stream, size, ptr);
    memmove(items + i, items + i + 1, (at - i - 1) * sizeof *items);
    items[at - 1] = b;
    RECAP__ASSERT(sorted_at(s, at - 1));
  } else {
    items[i] = b;
    RECAP__ASSERT(sorted_at(s, i));
  }
}

void recap__free_set_clear(recap__free_set_t *s) {
  recap__host_free(s->items);
  s->items = NULL;
  s->count = s->capacity = s->blocks = 0;
}
