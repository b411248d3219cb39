/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * free_set.h — the free blocks of one pool and size class, ordered for best fit.
 *
 * Blocks are ordered by (stream, size, address), so the smallest free block of a stream that
 * fits a request is one binary search away, and ties go to the lowest address (which keeps
 * placement deterministic for tests). A sorted array beats a tree here: a pool holds tens to
 * hundreds of free blocks, and the hot path (a split, then the merge that undoes it) is a
 * search and a replace in place, which moves nothing when the new block sorts where the old
 * one was.
 */
#ifndef RECAP_ALLOC_FREE_SET_H
#define RECAP_ALLOC_FREE_SET_H

#include <stdbool.h>
#include <stddef.h>

#include "recap/alloc.h"
#include "recap/core.h"

struct recap__block;

typedef struct recap__free_set {
  struct recap__block **items;
  size_t count, capacity;
  /* The blocks of the set's pool and size class, free or not: the most the set can ever hold
   * at once. recap_malloc keeps the capacity above it (recap__free_set_reserve_all), so that
   * recap_free, and the frees that events complete, never need host memory. */
  size_t blocks;
} recap__free_set_t;

/* Make room for `extra` more members, so the inserts that follow cannot fail. False when out
 * of host memory. Inline: it is on every malloc and free, and nearly always has room. */
bool recap__free_set_grow(recap__free_set_t *s, size_t extra);
static inline bool recap__free_set_reserve(recap__free_set_t *s, size_t extra) {
  return s->count + extra <= s->capacity || recap__free_set_grow(s, extra);
}
/* Make room for every block of the set to be free at once, and `extra` more blocks. False
 * when out of host memory. */
static inline bool recap__free_set_reserve_all(recap__free_set_t *s, size_t extra) {
  return s->blocks + extra <= s->capacity || recap__free_set_grow(s, s->blocks + extra - s->count);
}
/* False when out of host memory (never after a successful reserve). */
bool recap__free_set_insert(recap__free_set_t *s, struct recap__block *b);
/* Remove b, which must be a member. Returns false if it was not. */
bool recap__free_set_erase(recap__free_set_t *s, struct recap__block *b);
/* Remove the member at index i (as found by recap__free_set_lower_bound). */
void recap__free_set_erase_at(recap__free_set_t *s, size_t i);
/* Put b in place of the member at index i, keeping the order: what a split (the rest replaces
 * the block taken) and a merge (the merged block replaces the neighbour it absorbed) do on
 * every malloc and free. The new member usually belongs at i or next to it, so this moves
 * nothing, where an erase and an insert would move the array's tail twice. Cannot fail. */
void recap__free_set_replace_at(recap__free_set_t *s, size_t i, struct recap__block *b);
/* The index of member b; s->count if b is not a member. */
size_t recap__free_set_find(const recap__free_set_t *s, const struct recap__block *b);
/* Index of the first block with (stream, size) >= the key; s->count if none. */
size_t recap__free_set_lower_bound(const recap__free_set_t *s, recap_stream_t stream, size_t size);
void recap__free_set_clear(recap__free_set_t *s);

#endif /* RECAP_ALLOC_FREE_SET_H */
