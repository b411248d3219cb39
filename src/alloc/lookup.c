/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lookup.c — finding blocks by address: recap_block_info for the user, and for the layers
 * above recap__alloc_find, recap__alloc_find_many (the scan at capture end) and
 * recap__alloc_count_dead (the input-liveness check of every replay).
 *
 * Each takes the allocator's lock once for the whole lookup. Allocated blocks are found by one
 * hash lookup in the pointer map; any other address by a walk of the segments that hold it.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_lock.h"
#include "alloc/blocks.h"
#include "alloc/lookup.h"
#include "core/args.h"
#include "core/error.h"
#include "core/host.h"

static recap__block_ref_t ref_of(const recap__block_t *b) {
  return (recap__block_ref_t){.base = b->ptr,
                              .size = b->size,
                              .generation = b->generation,
                              .allocated = b->allocated,
                              .pool = b->segment->pool->id,
                              .alloc_site = b->allocated ? b->alloc_site : NULL};
}

/* The block of seg that holds p, if any. */
static bool find_in_segment(const recap__segment_t *seg, const char *p, recap__block_ref_t *ref) {
  for (const recap__block_t *b = seg->head; b; b = b->next) {
    if (p >= b->ptr && p < b->ptr + b->size) {
      *ref = ref_of(b);
      return true;
    }
  }
  return false;
}

static bool find_in_pool(const recap__pool_t *pool, const char *p, recap__block_ref_t *ref) {
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    if (p >= seg->base && p < seg->base + seg->size) return find_in_segment(seg, p, ref);
  return false;
}

/* The lookup of recap__alloc_find, with the lock held: the allocated map, then every pool. */
static bool find_locked(const void *ptr, recap__block_ref_t *ref) {
  const recap__block_t *b = recap__ptr_map_get(&recap__alloc.allocated, ptr);
  if (b) {
    *ref = ref_of(b);
    return true;
  }
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    const recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    if (find_in_pool(&d->default_pool, ptr, ref)) return true;
    for (const recap__pool_t *p = d->private_pools; p; p = p->next)
      if (find_in_pool(p, ptr, ref)) return true;
  }
  return false;
}

bool recap__alloc_find(const void *ptr, recap__block_ref_t *ref) {
  recap__alloc_lock();
  recap__alloc_settle(); /* blocks by address: the cached one merged, as the slow path has it */
  bool found = find_locked(ptr, ref);
  recap__alloc_unlock();
  return found;
}

/* Every segment of every pool, sorted by address, for the batch lookup (lock held). */
typedef struct segment_span {
  const char *base, *end;
  recap__segment_t *segment;
} segment_span_t;

static int compare_spans(const void *a, const void *b) {
  const char *x = ((const segment_span_t *)a)->base, *y = ((const segment_span_t *)b)->base;
  return (x > y) - (x < y);
}

static segment_span_t *segment_spans(size_t *count) {
  size_t n = 0;
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    n += (size_t)d->default_pool.segment_count;
    for (recap__pool_t *p = d->private_pools; p; p = p->next) n += (size_t)p->segment_count;
  }
  *count = 0;
  segment_span_t *spans = recap__host_malloc((n ? n : 1) * sizeof *spans);
  if (!spans) return NULL;
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    /* The default pool first, then the private ones. */
    for (recap__pool_t *p = &d->default_pool; p;
         p = p == &d->default_pool ? d->private_pools : p->next)
      for (recap__segment_t *seg = p->segments; seg && *count < n; seg = seg->next)
        spans[(*count)++] = (segment_span_t){seg->base, seg->base + seg->size, seg};
  }
  qsort(spans, *count, sizeof *spans, compare_spans);
  return spans;
}

static bool find_in_spans(const segment_span_t *spans, size_t n, const char *p,
                          recap__block_ref_t *ref) {
  size_t lo = 0, hi = n; /* the last span whose base <= p */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (spans[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || p >= spans[lo - 1].end) return false;
  return find_in_segment(spans[lo - 1].segment, p, ref);
}

void recap__alloc_find_many(const void *const *ptrs, size_t n, recap__block_ref_t *refs,
                            bool *found) {
  recap__alloc_lock();
  recap__alloc_settle();
  segment_span_t *spans = NULL;
  size_t span_count = 0;
  bool spans_tried = false;
  for (size_t i = 0; i < n; i++) {
    found[i] = false;
    const recap__block_t *b = recap__ptr_map_get(&recap__alloc.allocated, ptrs[i]);
    if (b) {
      refs[i] = ref_of(b);
      found[i] = true;
      continue;
    }
    if (!spans_tried) {
      spans = segment_spans(&span_count);
      spans_tried = true;
    }
    if (spans) {
      found[i] = find_in_spans(spans, span_count, ptrs[i], &refs[i]);
    } else {
      /* No host memory for the table: the slow walk, one address at a time. */
      found[i] = find_locked(ptrs[i], &refs[i]);
    }
  }
  recap__alloc_unlock();
  recap__host_free(spans);
}

size_t recap__alloc_count_dead(const recap__block_watch_t *watch, size_t n, bool *dead) {
  size_t dead_count = 0;
  recap__alloc_lock();
  for (size_t i = 0; i < n; i++) {
    const recap__block_t *b = recap__ptr_map_get(&recap__alloc.allocated, watch[i].base);
    /* The front cache's block is in the map but not allocated. */
    bool is_dead = !b || !b->allocated || b->generation != watch[i].generation;
    dead_count += is_dead;
    if (dead) dead[i] = is_dead;
  }
  recap__alloc_unlock();
  return dead_count;
}
recap_status_t recap_block_info(const void *ptr, recap_block_info_t *info) {
  RECAP__ARG(ptr != NULL, "recap_block_info: ptr is NULL");
  RECAP__ARG(info != NULL, "recap_block_info: info is NULL");
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(info, recap_block_info_t, device, "recap_block_info",
                                        "info->size", "RECAP_BLOCK_INFO_INIT"));
  size_t size = info->size;
  recap_block_info_t out = {0};
  recap__alloc_lock();
  recap__block_t *b = recap__ptr_map_get(&recap__alloc.allocated, ptr);
  if (b && !b->allocated) b = NULL; /* the front cache's block */
  if (b) {
    const recap__segment_t *seg = b->segment;
    out = (recap_block_info_t){.size = size,
                               .base = b->ptr,
                               .bytes = b->size,
                               .requested = b->requested,
                               .pool = seg->pool->id,
                               .stream = b->stream,
                               .device = seg->device};
  }
  recap__alloc_unlock();
  if (!b)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "recap_block_info(%p): not an allocated pointer of recap", ptr);
  memcpy(info, &out, size);
  return RECAP_SUCCESS;
}
