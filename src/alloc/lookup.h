/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lookup.h — blocks by address, for the liveness checks of the layers above (lookup.c).
 */
#ifndef RECAP_ALLOC_LOOKUP_H
#define RECAP_ALLOC_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recap/alloc.h"

/* What the liveness checks need to know about an address: the block holding it (allocated or
 * not), its start, size, generation and pool. Returns false if no segment of recap holds it. */
typedef struct recap__block_ref {
  void *base;
  size_t size;
  uint64_t generation;
  bool allocated;
  recap_pool_id_t pool;
  void *alloc_site; /* see recap__block_t; NULL unless recorded */
} recap__block_ref_t;
bool recap__alloc_find(const void *ptr, recap__block_ref_t *ref);

/* recap__alloc_find for n addresses under one lock: found[i] says whether refs[i] was filled.
 * Exact block starts cost one hash lookup; other addresses a binary search over the segments
 * and a walk of one segment's blocks. For the scan at capture end. */
void recap__alloc_find_many(const void *const *ptrs, size_t n, recap__block_ref_t *refs,
                            bool *found);

/* A block a graph reads: its start and the generation it had when the graph was captured. */
typedef struct recap__block_watch {
  const void *base;
  uint64_t generation;
} recap__block_watch_t;

/* How many of the n watched blocks are dead: no block starting at base is allocated now, or
 * the one there was handed out again since (another generation). With dead non-NULL, dead[i]
 * tells which. One lock and n hash lookups: what every replay with input-liveness checks pays. */
size_t recap__alloc_count_dead(const recap__block_watch_t *watch, size_t n, bool *dead);

#endif /* RECAP_ALLOC_LOOKUP_H */
