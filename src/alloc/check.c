/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check.c — the allocator's invariant checker.
 *
 * Walks every device, pool, segment and block and verifies what the allocator relies on. Tests
 * call it after every step; it is also public so a user can call it when hunting a corruption.
 * It recounts the statistics from the walk and compares them, so a wrong counter is caught as
 * surely as a broken block list.
 */
#include <inttypes.h>

#include "alloc/alloc_lock.h"
#include "alloc/pinned_cache.h"
#include "alloc/sleep.h"
#include "alloc/vmm_holes.h"
#include "core/error.h"

typedef struct tally {
  int64_t segments[RECAP_STAT_KINDS], reserved[RECAP_STAT_KINDS];
  int64_t allocations[RECAP_STAT_KINDS], allocated_bytes[RECAP_STAT_KINDS];
  int64_t active[RECAP_STAT_KINDS], active_bytes[RECAP_STAT_KINDS];
  int64_t split[RECAP_STAT_KINDS], split_bytes[RECAP_STAT_KINDS];
  size_t free_blocks;
  size_t allocated_blocks;
} tally_t;

#define FAIL(...) return recap__error(RECAP_ERROR_INTERNAL, "recap_memory_check: " __VA_ARGS__)

static void add(int64_t *array, bool small, int64_t amount) {
  array[RECAP_STAT_ALL] += amount;
  array[small ? RECAP_STAT_SMALL : RECAP_STAT_LARGE] += amount;
}

static bool set_contains(const recap__free_set_t *set, const recap__block_t *b) {
  for (size_t i = 0; i < set->count; i++)
    if (set->items[i] == b) return true;
  return false;
}

static recap_status_t check_set_order(const recap__free_set_t *set, const char *which) {
  for (size_t i = 1; i < set->count; i++) {
    const recap__block_t *x = set->items[i - 1], *y = set->items[i];
    bool ordered =
        (uintptr_t)x->stream < (uintptr_t)y->stream ||
        (x->stream == y->stream && (x->size < y->size || (x->size == y->size && x->ptr < y->ptr)));
    if (!ordered) FAIL("the %s free set is out of order at index %zu", which, i);
  }
  return RECAP_SUCCESS;
}

/* The front cache's block b (in seg): free, in no free set, with no free block before it; its
 * rest, if any, is its free next neighbour and in the set, and the block after the rest is not
 * free; without rest, the block after b is not free. */
static recap_status_t check_cached(const recap__front_t *f, const recap__free_set_t *set,
                                   const recap__free_set_t *other, const recap__segment_t *seg) {
  const recap__block_t *b = f->block;
  if (!recap__block_is_free(b) || b->stream_use_count)
    FAIL("the front cache's block %p is not free", (void *)b->ptr);
  if (set_contains(set, b) || set_contains(other, b))
    FAIL("the front cache's block %p is in a free set", (void *)b->ptr);
  if (b->prev && recap__block_is_free(b->prev))
    FAIL("the front cache's block %p follows a free block", (void *)b->ptr);
  if (f->rest) {
    if (b->next != f->rest || !recap__block_is_free(f->rest) || !set_contains(set, f->rest))
      FAIL("the front cache's block %p: its rest is not its free next neighbour in the set",
           (void *)b->ptr);
    if (f->rest->next && recap__block_is_free(f->rest->next))
      FAIL("free blocks %p and %p are neighbours but were not merged", (void *)f->rest->ptr,
           (void *)f->rest->next->ptr);
  } else if (b->next && recap__block_is_free(b->next)) {
    FAIL("the front cache's block %p has a free next neighbour that is not its rest",
         (void *)b->ptr);
  }
  if (b->segment != seg || b->stream != seg->stream)
    FAIL("the front cache's block %p names another segment or stream", (void *)b->ptr);
  return RECAP_SUCCESS;
}

/* A segment's VMM fields: a classic one has none; a VMM segment maps at most its range, in
 * multiples of the device's (recommended) granularity gran, from a start aligned to the minimum
 * granularity align (all cuMemAddressReserve is asked for), and, in an awake pool, its chunks
 * lie in [0, size) in offset order without overlap, leaving `unmapped` bytes of holes, each
 * wholly inside one free block whose `unmapped` counts it; every block not free lies wholly in
 * chunks (the granules it touches are mapped). Its reserved bytes are size - unmapped. */
static recap_status_t check_vmm(const recap__pool_t *pool, const recap__segment_t *seg, size_t gran,
                                size_t align) {
  if (!seg->vmm) {
    if (seg->chunk_count != 0 || seg->va_size != 0 || seg->unmapped != 0)
      FAIL("classic segment %p has VMM chunks, a range or holes", (void *)seg->base);
    for (const recap__block_t *b = seg->head; b; b = b->next)
      if (b->unmapped) FAIL("block %p of a classic segment has holes", (void *)b->ptr);
    return RECAP_SUCCESS;
  }
  if (gran == 0)
    FAIL("VMM segment %p on a device whose granularity was never asked", (void *)seg->base);
  if (seg->size > seg->va_size)
    FAIL("VMM segment %p spans %zu bytes of a range of %zu", (void *)seg->base, seg->size,
         seg->va_size);
  if (seg->size % gran || seg->va_size % gran || seg->unmapped % gran || seg->unmapped > seg->size)
    FAIL(
        "VMM segment %p (%zu bytes, %zu of them unmapped, of %zu) is not in multiples of the "
        "granularity %zu",
        (void *)seg->base, seg->size, seg->unmapped, seg->va_size, gran);
  if (align == 0 || (uintptr_t)seg->base % align)
    FAIL("VMM segment %p does not start at a multiple of the minimum granularity %zu",
         (void *)seg->base, align);
  if (seg->chunk_count < 0 || seg->chunk_count > seg->chunk_capacity)
    FAIL("VMM segment %p counts %d chunks with room for %d", (void *)seg->base, seg->chunk_count,
         seg->chunk_capacity);
  if (pool->state != 0) return RECAP_SUCCESS; /* asleep: sleep.c's rules */
  size_t end = 0, mapped = 0;
  for (int i = 0; i < seg->chunk_count; i++) {
    const recap__vmm_chunk_t *c = &seg->chunks[i];
    if (c->offset < end || c->size == 0 || c->size % gran || c->offset % gran || c->handle == 0 ||
        c->offset + c->size > seg->size || c->held)
      FAIL(
          "VMM segment %p: chunk %d (%zu bytes at offset %zu%s) does not lie after offset %zu "
          "inside the segment's %zu bytes, in multiples of %zu, mapped",
          (void *)seg->base, i, c->size, c->offset, c->held ? ", unmapped" : "", end, seg->size,
          gran);
    end = c->offset + c->size;
    mapped += c->size;
  }
  if (mapped + seg->unmapped != seg->size)
    FAIL("VMM segment %p: its chunks map %zu bytes and it counts %zu unmapped of %zu",
         (void *)seg->base, mapped, seg->unmapped, seg->size);
  size_t holes = 0;
  for (const recap__block_t *b = seg->head; b; b = b->next) {
    const recap__front_t *f = &recap__alloc.front;
    bool free_block = b == f->block || recap__block_is_free(b);
    size_t lo = (size_t)(b->ptr - seg->base), hi = lo + b->size;
    if (!free_block) {
      lo = lo / gran * gran;
      hi = (hi + gran - 1) / gran * gran;
    }
    size_t unmapped = recap__vmm_unmapped_in(seg, seg->base + lo, hi - lo);
    if (!free_block && unmapped)
      FAIL("VMM segment %p: block %p, in use, touches %zu unmapped bytes", (void *)seg->base,
           (void *)b->ptr, unmapped);
    if (free_block && unmapped != b->unmapped)
      FAIL("VMM segment %p: free block %p holds %zu unmapped bytes but counts %zu",
           (void *)seg->base, (void *)b->ptr, unmapped, b->unmapped);
    holes += unmapped;
  }
  if (holes != seg->unmapped)
    FAIL("VMM segment %p: its blocks hold %zu unmapped bytes but it counts %zu", (void *)seg->base,
         holes, seg->unmapped);
  return RECAP_SUCCESS;
}

static recap_status_t check_pool(const recap__pool_t *pool, size_t gran, size_t align, tally_t *t) {
  int64_t segments = 0, reserved = 0, allocated = 0;
  size_t free_in_pool = 0, blocks[2] = {0, 0}; /* [small] */
  size_t cached_outside_set = 0; /* the front cache's block when it has no rest in the set */
  RECAP__CHECK(check_set_order(&pool->small_free, "small"));
  RECAP__CHECK(check_set_order(&pool->large_free, "large"));
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    if (seg->pool != pool) FAIL("segment %p names another pool", (void *)seg->base);
    if (seg->next && seg->next->prev != seg) FAIL("segment list of a pool is broken");
    if (!seg->head || seg->head->ptr != seg->base || seg->head->prev)
      FAIL("segment %p does not start with its first block", (void *)seg->base);
    RECAP__CHECK(check_vmm(pool, seg, gran, align));
    segments++;
    reserved += (int64_t)(seg->size - seg->unmapped);
    add(t->segments, seg->small, 1);
    add(t->reserved, seg->small, (int64_t)(seg->size - seg->unmapped));
    const recap__free_set_t *set = seg->small ? &pool->small_free : &pool->large_free;
    const recap__free_set_t *other = seg->small ? &pool->large_free : &pool->small_free;
    char *expected = seg->base;
    bool split = seg->head->next != NULL;
    const recap__front_t *f = &recap__alloc.front;
    for (const recap__block_t *b = seg->head; b; b = b->next) {
      if (b == f->block) {
        /* The front cache's block: free, out of the free set, counted as the block it and its
         * rest merge into; rest, when there is one, is the free block after it, in the set. */
        RECAP__CHECK(check_cached(f, set, other, seg));
        size_t merged = recap__front_merged_size(f);
        blocks[seg->small] += f->rest ? 2 : 1;
        free_in_pool++;
        if (!f->rest) cached_outside_set++;
        if (merged != seg->size) {
          add(t->split, seg->small, 1);
          add(t->split_bytes, seg->small, (int64_t)merged);
        }
        expected = b->ptr + merged;
        if (f->rest) b = f->rest;
        continue;
      }
      if (b->segment != seg) FAIL("block %p names another segment", (void *)b->ptr);
      if (b->ptr != expected)
        FAIL("segment %p: block %p should start at %p (gap or overlap)", (void *)seg->base,
             (void *)b->ptr, (void *)expected);
      if (b->size == 0) FAIL("block %p has size 0", (void *)b->ptr);
      blocks[seg->small]++;
      if (b->next && b->next->prev != b)
        FAIL("block list of segment %p is broken", (void *)seg->base);
      if (b->stream != seg->stream)
        FAIL("block %p has another stream than its segment", (void *)b->ptr);
      expected = b->ptr + b->size;
      bool in_set = set_contains(set, b);
      if (set_contains(other, b)) FAIL("block %p is in the wrong size class", (void *)b->ptr);
      if (b->allocated) {
        if (in_set) FAIL("allocated block %p is in a free set", (void *)b->ptr);
        if (recap__ptr_map_get(&recap__alloc.allocated, b->ptr) != b)
          FAIL("allocated block %p is missing from the pointer map", (void *)b->ptr);
        allocated += (int64_t)b->size;
        t->allocated_blocks++;
        add(t->allocations, seg->small, 1);
        add(t->allocated_bytes, seg->small, (int64_t)b->size);
        add(t->active, seg->small, 1);
        add(t->active_bytes, seg->small, (int64_t)b->size);
      } else if (!recap__block_is_free(b)) {
        /* Freed by the user, waiting on events: active but not allocated. */
        if (in_set) FAIL("block %p waits on events but is in a free set", (void *)b->ptr);
        add(t->active, seg->small, 1);
        add(t->active_bytes, seg->small, (int64_t)b->size);
      } else {
        if (!in_set) FAIL("free block %p is missing from its free set", (void *)b->ptr);
        if (b->next && recap__block_is_free(b->next))
          FAIL("free blocks %p and %p are neighbours but were not merged", (void *)b->ptr,
               (void *)b->next->ptr);
        free_in_pool++;
        if (split) {
          add(t->split, seg->small, 1);
          add(t->split_bytes, seg->small, (int64_t)b->size);
        }
      }
    }
    if (expected != seg->base + seg->size)
      FAIL("the blocks of segment %p do not cover it", (void *)seg->base);
  }
  /* Every block could be freed without host memory: the sets have room for all of them. */
  for (int small = 0; small < 2; small++) {
    const recap__free_set_t *set = small ? &pool->small_free : &pool->large_free;
    if (set->blocks != blocks[small] || set->capacity < set->blocks)
      FAIL("pool {%" PRIu64 ",%" PRIu64
           "}: the %s free set counts %zu blocks with room for "
           "%zu; the walk finds %zu",
           pool->id.a, pool->id.b, small ? "small" : "large", set->blocks, set->capacity,
           blocks[small]);
  }
  if (free_in_pool != pool->small_free.count + pool->large_free.count + cached_outside_set)
    FAIL("pool {%" PRIu64 ",%" PRIu64 "}: %zu free blocks in segments but %zu in free sets",
         pool->id.a, pool->id.b, free_in_pool, pool->small_free.count + pool->large_free.count);
  if (segments != pool->segment_count || reserved != pool->reserved_bytes ||
      allocated != pool->allocated_bytes)
    FAIL("pool {%" PRIu64 ",%" PRIu64 "}: its totals (%" PRId64 " segments, %" PRId64
         " reserved, %" PRId64 " allocated) differ from the walk (%" PRId64 ", %" PRId64
         ", %" PRId64 ")",
         pool->id.a, pool->id.b, pool->segment_count, pool->reserved_bytes, pool->allocated_bytes,
         segments, reserved, allocated);
  t->free_blocks += free_in_pool;
  return RECAP_SUCCESS;
}

/* The sleep invariants (sleep.c): awake, nothing sleeps and no copy is kept; asleep, every
 * segment is on virtual memory and its chunk list holds only what a failure left for the next
 * wake (a handle whose release failed, held, or a chunk whose unmap failed, still mapped), each
 * with a handle, inside its segment, in offset order without overlap; sleeping_bytes is the
 * bytes the segments had mapped (size - unmapped), and the
 * pinned copy, kept exactly after OFFLOAD, holds runs inside the pool's segments, in a buffer
 * large enough that is not also kept for the next sleep (pinned_cache.c). *asleep
 * counts the asleep pools. */
static recap_status_t check_sleep(const recap__pool_t *pool, int *asleep) {
  if (pool->state == RECAP_POOL_AWAKE) {
    if (pool->sleeping_bytes != 0 || pool->offload)
      FAIL("pool {%" PRIu64 ",%" PRIu64 "} is awake but keeps %" PRId64
           " sleeping bytes and %s host copy",
           pool->id.a, pool->id.b, pool->sleeping_bytes, pool->offload ? "a" : "no");
    return RECAP_SUCCESS;
  }
  if (pool->state != RECAP_POOL_ASLEEP_DISCARDED && pool->state != RECAP_POOL_ASLEEP_OFFLOADED)
    FAIL("pool {%" PRIu64 ",%" PRIu64 "} has the unknown state %d", pool->id.a, pool->id.b,
         pool->state);
  (*asleep)++;
  int64_t bytes = 0;
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    if (!seg->vmm)
      FAIL("asleep pool {%" PRIu64 ",%" PRIu64 "} keeps the classic segment %p", pool->id.a,
           pool->id.b, (void *)seg->base);
    size_t end = 0;
    for (int i = 0; i < seg->chunk_count; i++) {
      const recap__vmm_chunk_t *c = &seg->chunks[i];
      if (c->size == 0 || c->handle == 0 || c->offset < end || c->offset > seg->size ||
          c->size > seg->size - c->offset)
        FAIL("asleep pool {%" PRIu64 ",%" PRIu64
             "}: the %s chunk [%zu, +%zu) left by a failure has no handle, overlaps the one "
             "before it or lies outside its segment %p of %zu bytes",
             pool->id.a, pool->id.b, c->held ? "held" : "mapped", c->offset, c->size,
             (void *)seg->base, seg->size);
      end = c->offset + c->size;
    }
    bytes += (int64_t)(seg->size - seg->unmapped);
    size_t runs = 0, run_end = 0;
    for (int i = 0; i < seg->asleep_run_count; i++) {
      const recap__vmm_run_t *r = &seg->asleep_runs[i];
      if (r->offset < run_end || r->size == 0 || r->offset + r->size > seg->size)
        FAIL("asleep pool {%" PRIu64 ",%" PRIu64
             "}: the range [%zu, +%zu) its wake maps does "
             "not lie after offset %zu in its segment %p of %zu bytes",
             pool->id.a, pool->id.b, r->offset, r->size, run_end, (void *)seg->base, seg->size);
      run_end = r->offset + r->size;
      runs += r->size;
    }
    if (runs != seg->size - seg->unmapped)
      FAIL("asleep pool {%" PRIu64 ",%" PRIu64
           "}: its wake maps %zu bytes of segment %p, which "
           "had %zu mapped",
           pool->id.a, pool->id.b, runs, (void *)seg->base, seg->size - seg->unmapped);
  }
  if (bytes != pool->sleeping_bytes)
    FAIL("asleep pool {%" PRIu64 ",%" PRIu64 "}: sleeping_bytes says %" PRId64
         " but its segments hold %" PRId64,
         pool->id.a, pool->id.b, pool->sleeping_bytes, bytes);
  const recap__offload_t *off = pool->offload;
  if ((off != NULL) != (pool->state == RECAP_POOL_ASLEEP_OFFLOADED))
    FAIL("pool {%" PRIu64 ",%" PRIu64 "} is %s but %s a host copy", pool->id.a, pool->id.b,
         pool->state == RECAP_POOL_ASLEEP_OFFLOADED ? "offloaded" : "discarded",
         off ? "keeps" : "has no");
  if (!off) return RECAP_SUCCESS;
  size_t sum = 0;
  for (size_t r = 0; r < off->count; r++) {
    const char *p = off->runs[r].ptr;
    size_t size = off->runs[r].size;
    bool inside = false;
    for (const recap__segment_t *seg = pool->segments; seg && !inside; seg = seg->next)
      inside = p >= seg->base && size <= seg->size && (size_t)(p - seg->base) <= seg->size - size;
    if (!inside || size == 0)
      FAIL("asleep pool {%" PRIu64 ",%" PRIu64
           "}: its copied run %p (%zu bytes) lies outside "
           "its segments",
           pool->id.a, pool->id.b, (const void *)p, size);
    sum += size;
  }
  if (sum != off->bytes || (off->bytes != 0) != (off->host != NULL) ||
      (off->host && off->host_bytes < off->bytes))
    FAIL("asleep pool {%" PRIu64 ",%" PRIu64
         "}: its runs hold %zu bytes, its copy %zu at %p in a buffer of %zu",
         pool->id.a, pool->id.b, sum, off->bytes, off->host, off->host_bytes);
  if (off->host && recap__pinned_is_kept(off->host))
    FAIL("asleep pool {%" PRIu64 ",%" PRIu64
         "}: its copy at %p is also a pinned buffer kept for the next sleep",
         pool->id.a, pool->id.b, off->host);
  return RECAP_SUCCESS;
}

static recap_status_t compare(const char *name, const recap_stat_t *stat, const int64_t *walk) {
  static const char *const kinds[RECAP_STAT_KINDS] = {"all", "small", "large"};
  for (int k = 0; k < RECAP_STAT_KINDS; k++)
    if (stat[k].current != walk[k])
      FAIL("stat %s[%s] says %" PRId64 " but the walk counts %" PRId64, name, kinds[k],
           stat[k].current, walk[k]);
  return RECAP_SUCCESS;
}

static recap_status_t check_device(const recap__device_state_t *d, size_t *allocated_blocks,
                                   int *asleep) {
  tally_t t = {0};
  RECAP__CHECK(check_pool(&d->default_pool, d->vmm_granularity, d->vmm_min_granularity, &t));
  RECAP__CHECK(check_sleep(&d->default_pool, asleep));
  if (d->default_pool.graphs != 0)
    FAIL("device %d: %d graphs hold the default pool", d->device, d->default_pool.graphs);
  int routed = 0;
  for (const recap__pool_t *p = d->private_pools; p; p = p->next) {
    RECAP__CHECK(check_pool(p, d->vmm_granularity, d->vmm_min_granularity, &t));
    RECAP__CHECK(check_sleep(p, asleep));
    if (p->references < 0)
      FAIL("pool {%" PRIu64 ",%" PRIu64 "} has negative references", p->id.a, p->id.b);
    /* Each graph that holds the pool holds one of its references. */
    if (p->graphs < 0 || p->graphs > p->references || p->exec_bytes < 0 || p->nodes < 0 ||
        (p->graphs == 0 && (p->exec_bytes != 0 || p->nodes != 0)))
      FAIL("pool {%" PRIu64 ",%" PRIu64 "}: its graph totals (%d graphs of %d references, %" PRId64
           " executable bytes, %" PRId64 " nodes) do not add up",
           p->id.a, p->id.b, p->graphs, p->references, p->exec_bytes, p->nodes);
    if (p->capture_peak < p->allocated_bytes && p->routed)
      FAIL("pool {%" PRIu64 ",%" PRIu64 "}: the capture's peak %" PRId64 " is below the %" PRId64
           " bytes allocated now",
           p->id.a, p->id.b, p->capture_peak, p->allocated_bytes);
    routed += p->routed;
  }
  if (routed != d->route_count)
    FAIL("device %d: %d pools are marked routed but %d routes exist", d->device, routed,
         d->route_count);
  /* A route's stream is known only once its capture is named; two routes never share one
   * stream and thread, which can capture into one capture at a time. */
  for (int i = 0; i < d->route_count; i++) {
    const recap__route_t *r = &d->routes[i];
    if (r->stream && (r->pending || !r->thread))
      FAIL("device %d: route %d names stream %p but %s", d->device, i, (void *)r->stream,
           r->pending ? "is pending" : "no thread");
    for (int j = 0; r->stream && j < i; j++)
      if (d->routes[j].stream == r->stream && d->routes[j].thread == r->thread)
        FAIL("device %d: routes %d and %d both name stream %p of one thread", d->device, j, i,
             (void *)r->stream);
  }
  if (d->stuck_count > d->stuck_capacity)
    FAIL("device %d lists %zu pieces of VMM memory to give back with room for %zu", d->device,
         d->stuck_count, d->stuck_capacity);
  for (size_t i = 0; i < d->stuck_count; i++) {
    const recap__stuck_range_t *r = &d->stuck_ranges[i];
    bool addressed = r->kind != RECAP__STUCK_CHUNK;
    if ((unsigned)r->kind >= RECAP__STUCK_KINDS || r->size == 0 || (addressed && !r->base))
      FAIL("device %d: the piece %zu of VMM memory to give back is empty", d->device, i);
  }
  const recap_memory_stats_t *st = &d->stats;
  RECAP__CHECK(compare("segment", st->segment, t.segments));
  RECAP__CHECK(compare("reserved_bytes", st->reserved_bytes, t.reserved));
  RECAP__CHECK(compare("allocation", st->allocation, t.allocations));
  RECAP__CHECK(compare("allocated_bytes", st->allocated_bytes, t.allocated_bytes));
  RECAP__CHECK(compare("active", st->active, t.active));
  RECAP__CHECK(compare("active_bytes", st->active_bytes, t.active_bytes));
  RECAP__CHECK(compare("inactive_split", st->inactive_split, t.split));
  RECAP__CHECK(compare("inactive_split_bytes", st->inactive_split_bytes, t.split_bytes));
  *allocated_blocks += t.allocated_blocks;
  return RECAP_SUCCESS;
}

recap_status_t recap_memory_check(void) {
  recap_status_t s = RECAP_SUCCESS;
  size_t allocated_blocks = 0;
  int asleep = 0;
  recap__alloc_lock();
  for (int i = 0; i < RECAP__MAX_DEVICES && s == RECAP_SUCCESS; i++)
    if (recap__alloc.devices[i])
      s = check_device(recap__alloc.devices[i], &allocated_blocks, &asleep);
  int sleeping = atomic_load(&recap__alloc_sleeping);
  if (s == RECAP_SUCCESS && sleeping != asleep)
    s = recap__error(RECAP_ERROR_INTERNAL,
                     "recap_memory_check: %d pools are asleep but the count of sleeping pools "
                     "says %d",
                     asleep, sleeping);
  /* The front cache's block stays in the map while it waits. */
  const recap__block_t *cached = recap__alloc.front.block;
  if (s == RECAP_SUCCESS && cached &&
      recap__ptr_map_get(&recap__alloc.allocated, cached->ptr) != cached)
    s = recap__error(RECAP_ERROR_INTERNAL,
                     "recap_memory_check: the front cache's block %p is missing from the "
                     "pointer map",
                     (void *)cached->ptr);
  if (s == RECAP_SUCCESS && allocated_blocks + (cached != NULL) != recap__alloc.allocated.count)
    s = recap__error(RECAP_ERROR_INTERNAL,
                     "recap_memory_check: the pointer map holds %zu blocks but the walk found "
                     "%zu allocated",
                     recap__alloc.allocated.count, allocated_blocks);
  recap__alloc_unlock();
  return s;
}
