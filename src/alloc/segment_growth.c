/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment_growth.c — the slow path of recap_malloc: a request no free block serves gets a new
 * classic segment, or, with the expandable_segments option, its VMM segment grows
 * (vmm_segment.c); the holes of a free VMM block are mapped again before a request is carved
 * from it; a small request of a graph pool may take a free block of the pool's large VMM
 * segments; and a capture's budget refuses what would make its pool reserve too much.
 *
 * Apart from the hot path (allocator.c, request.h) because none of it runs on a cached hit: its
 * functions are out of recap_malloc's body (RECAP__COLD, or too large to inline), so calling them
 * across files costs what calling them did. Each device call goes through the out-of-memory
 * retry (out_of_memory.c).
 */
#include "alloc/segment_growth.h"

#include <inttypes.h>
#include <stdio.h>

#include "alloc/accounting.h"
#include "alloc/cache_release.h"
#include "alloc/out_of_memory.h"
#include "alloc/segment_source.h"
#include "alloc/vmm_holes.h"
#include "alloc/vmm_segment.h"
#include "core/error.h"
#include "core/host.h"

/* The size of a new classic segment for a request of `size` rounded bytes: a shared small or
 * large segment, or one of its own rounded to round_large for a big request. */
static size_t segment_size_for(const recap__options_t *o, size_t size) {
  if (size <= o->small_size) return (size_t)o->small_segment;
  if (size < o->large_threshold) return (size_t)o->large_segment;
  size_t unit = (size_t)o->round_large;
  return (size + unit - 1) / unit * unit;
}

/* Ask the driver for a segment. */
static recap_status_t raw_alloc(void **ptr, size_t size) {
  recap__capture_mode_t saved;
  bool relaxed = recap__alloc_relax_capture_mode(&saved);
  recap_status_t s = recap__device()->raw_malloc(ptr, size);
  recap__alloc_restore_capture_mode(relaxed, &saved);
  return s;
}

/* A classic segment's try (recap__memory_attempt_t): `size` bytes from the driver, unless the
 * memory_cap option forbids them. */
typedef struct classic_attempt {
  const recap__options_t *o;
  const recap__segment_source_t *source; /* NULL: raw_alloc */
  void *base;
  void *handle;
  size_t size;
} classic_attempt_t;

static recap_status_t classic_attempt(recap__device_state_t *d, void *ctx, size_t *bytes) {
  classic_attempt_t *a = ctx;
  *bytes = a->size;
  RECAP__CHECK(recap__alloc_capped(d, a->o, a->size));
  if (!a->source) return raw_alloc(&a->base, a->size);
  /* The source allocates device memory as raw_alloc does, so under the same relaxed mode. */
  recap__capture_mode_t saved;
  bool relaxed = recap__alloc_relax_capture_mode(&saved);
  recap_status_t s = a->source->alloc(a->source->ctx, &a->base, a->size, &a->handle);
  recap__alloc_restore_capture_mode(relaxed, &saved);
  return s;
}

/* Get a new segment of `size` bytes for pool: one free block that covers it, not yet in the
 * free set. */
static recap_status_t new_segment(recap__device_state_t *d, recap__pool_t *pool, bool small,
                                  size_t size, size_t request, recap_stream_t stream,
                                  const recap__options_t *o, recap__block_t **out) {
  recap__segment_t *seg = recap__host_calloc(1, sizeof *seg);
  recap__block_t *b = recap__block_new();
  if (!seg || !b) {
    recap__host_free(seg);
    if (b) recap__block_delete(b);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
  }
  classic_attempt_t attempt = {.o = o,
                               .size = size,
                               .source = recap__segment_source_find(pool->id)};
  recap_status_t s =
      recap__alloc_segment_memory(d, request, "a new segment", classic_attempt, &attempt, NULL);
  void *base = attempt.base;
  if (s != RECAP_SUCCESS) {
    recap__host_free(seg);
    recap__block_delete(b);
    return s;
  }
  seg->base = base;
  seg->size = size;
  seg->small = small;
  seg->device = d->device;
  seg->stream = stream;
  seg->pool = pool;
  seg->head = b;
  seg->source = attempt.source;
  seg->source_handle = attempt.handle;
  seg->next = pool->segments;
  if (seg->next) seg->next->prev = seg;
  pool->segments = seg;
  pool->segment_count++;
  pool->reserved_bytes += (int64_t)size;
  recap__free_set_of(pool, small)->blocks++;
  b->ptr = base;
  b->size = size;
  b->stream = stream;
  b->segment = seg;
  recap_memory_stats_t *st = &d->stats;
  recap__stat_kind(st->segment, small, 1);
  recap__stat_kind(st->reserved_bytes, small, (int64_t)size);
  st->num_device_alloc++;
  *out = b;
  return RECAP_SUCCESS;
}

void recap__budget_format(char *out, size_t cap, const recap__budget_refusal_t *x) {
  uint64_t over = (uint64_t)x->reserved + x->segment - x->budget;
  char budget[32], by[32];
  recap__format_bytes(budget, sizeof budget, x->budget);
  recap__format_bytes(by, sizeof by, over);
  snprintf(out, cap,
           "the capture's budget of %" PRIu64 " bytes (%s) for pool {%" PRIu64 ",%" PRIu64
           "} would be exceeded by %" PRIu64
           " bytes (%s): the request of %zu bytes needs a new "
           "segment of %zu bytes, and the pool reserves %" PRId64 " bytes already (%" PRId64
           " allocated); nothing was allocated. Raise budget_bytes in the capture options, or "
           "allocate less during the capture",
           x->budget, budget, x->pool.a, x->pool.b, over, by, x->request, x->segment, x->reserved,
           x->allocated);
}

/* A capture's budget (recap__pool_route_set_budget): refuse a new segment that would make the
 * pool reserve more than it, before any device call. The refusal is held in the pool until
 * recap_malloc knows whether the call failed (recap__alloc_budget_settle). */
static RECAP__COLD recap_status_t budget_refuse(const recap__request_t *r, size_t segment) {
  recap__pool_t *pool = r->pool;
  pool->budget_attempt = (recap__budget_refusal_t){.pool = pool->id,
                                                   .budget = pool->budget,
                                                   .reserved = pool->reserved_bytes,
                                                   .allocated = pool->allocated_bytes,
                                                   .request = r->size,
                                                   .segment = segment};
  pool->budget_attempted = true;
  char text[512];
  recap__budget_format(text, sizeof text, &pool->budget_attempt);
  return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: %s", text);
}

/* recap_malloc failed after the budget refused a segment: count the refusal (the first is kept
 * for capture_end's message) and the failed allocation. */
RECAP__COLD void recap__alloc_budget_settle(recap__device_state_t *d, recap__pool_t *pool) {
  pool->budget_attempted = false;
  if (pool->budget_refusals++ == 0) pool->budget_first = pool->budget_attempt;
  d->stats.num_ooms++;
}

/* A VMM growth's try (recap__memory_attempt_t): the bytes it needs, within memory_cap, mapped. */
typedef struct vmm_attempt {
  const recap__request_t *r;
  size_t size; /* what the free last block must hold */
  recap__block_t **out;
} vmm_attempt_t;

static recap_status_t vmm_attempt(recap__device_state_t *d, void *ctx, size_t *bytes) {
  vmm_attempt_t *a = ctx;
  const recap__request_t *r = a->r;
  RECAP__CHECK(recap__vmm_segment_need(d, r->pool, r->small, a->size, r->stream, r->o, bytes));
  if (*bytes) RECAP__CHECK(recap__alloc_capped(d, r->o, *bytes));
  return recap__vmm_segment_grow(d, r->pool, r->small, a->size, r->stream, r->o, a->out);
}

/* Grow the request's VMM segment until its free last block, *b (in the free set), holds `size`
 * bytes: within the capture's budget, with the out-of-memory retry. */
recap_status_t recap__alloc_grow_vmm(const recap__request_t *r, size_t size, recap__block_t **b) {
  r->pool->budget_attempted = false;
  if (RECAP__UNLIKELY(r->pool->budget != 0)) {
    size_t bytes = 0;
    RECAP__CHECK(recap__vmm_segment_need(r->d, r->pool, r->small, size, r->stream, r->o, &bytes));
    if (bytes && (uint64_t)r->pool->reserved_bytes + bytes > r->pool->budget)
      return budget_refuse(r, bytes);
  }
  vmm_attempt_t attempt = {.r = r, .size = size, .out = b};
  return recap__alloc_segment_memory(r->d, r->size, "a growth of its VMM segment", vmm_attempt,
                                     &attempt, NULL);
}

/* Mapping the holes a request needs again (recap__memory_attempt_t): within memory_cap, one try. */
typedef struct remap_attempt {
  const recap__request_t *r;
  recap__block_t *b;
  const char *at;
  size_t size; /* what the request holds from at */
} remap_attempt_t;

static recap_status_t remap_attempt(recap__device_state_t *d, void *ctx, size_t *bytes) {
  remap_attempt_t *a = ctx;
  *bytes = recap__vmm_segment_map_need(d, a->b, a->at, a->size);
  if (*bytes) RECAP__CHECK(recap__alloc_capped(d, a->r->o, *bytes));
  return recap__vmm_segment_map(d, a->b, a->at, a->size);
}

/* Before the request is carved from the free block b at `at`: map the holes it touches again
 * (vmm_segment.c), with the out-of-memory retry, which keeps b as it is. What it touches is what it
 * will hold: its rounded size when recap__take_block splits the rest off, else everything from at
 * to b's end (a rest too small to split stays with the block, holes and all). Nothing to do, and
 * one load on the hot path, for a block without holes. The free set may change meanwhile: the
 * caller finds b's slot again. */
RECAP__COLD recap_status_t recap__alloc_remap(const recap__request_t *r, recap__block_t *b,
                                              const char *at) {
  size_t from_at = (size_t)(b->ptr + b->size - at);
  bool split = recap__should_split(from_at, b->segment->small, b->segment->vmm, r->rounded, r->o);
  remap_attempt_t attempt = {.r = r, .b = b, .at = at, .size = split ? r->rounded : from_at};
  return recap__alloc_segment_memory(r->d, r->size, "mapping its VMM segment's free pages again",
                                     remap_attempt, &attempt, b);
}

/* The slow path with the expandable_segments option: the (pool, class, stream) VMM segment
 * grows (vmm_segment.c). The grown last block leaves the free set, as a new segment's block is
 * outside it. */
static RECAP__COLD recap_status_t malloc_vmm(const recap__request_t *r, recap__block_t **b) {
  RECAP__CHECK(recap__alloc_grow_vmm(r, r->rounded, b));
  /* The grown block may hold holes (a free last block's) where the request goes. */
  if ((*b)->unmapped) RECAP__CHECK(recap__alloc_remap(r, *b, (*b)->ptr));
  bool erased = recap__free_set_erase(r->set, *b);
  RECAP__ASSERT(erased);
  (void)erased;
  return RECAP_SUCCESS;
}

/* The slow path: no cached block fits, so the request gets a new segment (new_segment retries
 * once after freeing the cache when the device is out of memory), within the capture's budget. */
recap_status_t recap__alloc_malloc_slow(const recap__request_t *r, recap__block_t **b) {
  if (r->o->expandable_segments) {
    if (RECAP__UNLIKELY(recap__segment_source_find(r->pool->id) != NULL))
      return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                          "recap_malloc: pool {%" PRIu64 ",%" PRIu64
                          "} takes its segments from NCCL (recap_pool_nccl), which cannot be "
                          "virtual memory; turn the expandable_segments option off",
                          r->pool->id.a, r->pool->id.b);
    return malloc_vmm(r, b);
  }
  size_t segment = segment_size_for(r->o, r->rounded);
  r->pool->budget_attempted = false;
  if (RECAP__UNLIKELY(r->pool->budget != 0) &&
      (uint64_t)r->pool->reserved_bytes + segment > r->pool->budget)
    return budget_refuse(r, segment);
  return new_segment(r->d, r->pool, r->small, segment, r->size, r->stream, r->o, b);
}

/* Small requests in a graph pool's large segment (docs/allocator.md says why): with the
 * expandable_segments option, a request of the small class routed to a private pool may take a
 * free block of the pool's large-class VMM segments, already mapped, when no free small block
 * fits it: graphs captured one after another into one pool then share its physical memory
 * whatever their sizes, as the driver's graph memory nodes share one physical pool. The default
 * pool keeps PyTorch's classes. The large set, prepared for the request: room in it for the
 * split this call may add (as request_begin made in the small set), so that later frees need no
 * host memory; NULL when the request is not such a one, or without host memory (it then takes
 * the small class's way, as it would have). */
recap__free_set_t *recap__alloc_large_set_for_small(const recap__request_t *r) {
  if (!r->small || !r->o->expandable_segments || r->pool == &r->d->default_pool) return NULL;
  recap__free_set_t *large = &r->pool->large_free;
  return recap__free_set_reserve_all(large, 2) ? large : NULL;
}

/* The best fitting free block of the pool's large VMM segments on the request's stream for a small
 * request (recap__alloc_large_set_for_small), taken and split: true; false, with nothing changed,
 * when none fits. Never grows a segment: only what is mapped already serves. */
RECAP__COLD bool recap__alloc_take_from_large(recap__request_t *r, recap__block_t **b) {
  recap__free_set_t *large = recap__alloc_large_set_for_small(r);
  if (!large) return false;
  for (size_t i = recap__free_set_lower_bound(large, r->stream, r->rounded);
       i < large->count && large->items[i]->stream == r->stream; i++) {
    if (!large->items[i]->segment->vmm) continue; /* a classic segment made with the option off */
    *b = large->items[i];
    if ((*b)->unmapped) {
      /* Its holes mapped again, or none of it: the request then takes its own class's way. */
      if (recap__alloc_remap(r, *b, (*b)->ptr) != RECAP_SUCCESS) return false;
      i = recap__free_set_find(large, *b);
    }
    recap__request_to_large(r, large);
    recap__take_block(r, *b, i, true);
    return true;
  }
  return false;
}
