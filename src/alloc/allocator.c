/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * allocator.c — the caching, stream-ordered device allocator with graph-private pools.
 *
 * The design is PyTorch's CUDACachingAllocator, in C: requests round up to min_block_size;
 * small requests share small segments, medium ones large segments, big ones get their own.
 * A free block is reused best-fit on its own stream, split when the rest is worth keeping, and
 * merged with free neighbours when freed. A block used by other streams waits for events
 * recorded on them before it is reused. While captures are under way, allocations on streams of
 * a routed capture go to that capture's private pool; the pool's segments never return to the
 * default pool, so the addresses a graph baked in stay reserved for it.
 *
 * One lock guards everything (core/lock.h; other files take it through recap__alloc_lock). The
 * hot path (a cached hit, no capture) takes it once, does a binary search in a sorted array and a
 * hash-map insert, and touches no device; a repeated pair of the front cache does neither, and
 * counts its statistics later (front_cache.c: folding).
 *
 * This file is recap_malloc and recap_free: the hot path, and everything it inlines, in one
 * translation unit (with request.h's inline placement), so that a cached hit makes no call it
 * did not make before. The rest of the core sits in the files below it, which never call back
 * here: blocks.c (block records, splits and merges, the allocator record), events.c (events and
 * frees during captures, recap_record_stream), segment_growth.c (new segments, VMM growths and
 * remaps, budgets), out_of_memory.c (the retry and its report), cache_release.c (giving cached
 * memory back, recap_empty_cache) and replay_take.c (a route with allocation logs: replay.c
 * decides, replay_take.c carves). The front cache's rules are front_cache.c's (it decides whether
 * a freed block may wait unmerged and whether a request takes it, and counts both; this file
 * merges it when anything else needs the blocks: recap__alloc_settle). Pool routing and
 * references are in pool.c, the statistics queries in stats.c, lookups by address in lookup.c,
 * the allocation-site switch and lookup in sites.c and the reset in reset.c; they call into this
 * file, never the reverse. A request served by a pool that sleeps (sleep.c) is refused here
 * (recap__pool_asleep_error, which pool.c's routes use too).
 */
#include "alloc/allocator.h"

#include <inttypes.h>
#include <stdint.h>

#include "alloc/alloc_lock.h"
#include "alloc/blocks.h"
#include "alloc/events.h"
#include "alloc/front_cache.h"
#include "alloc/replay.h"
#include "alloc/replay_take.h"
#include "alloc/request.h"
#include "alloc/segment_growth.h"
#include "alloc/sites.h"
#include "alloc/sleep.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/host.h"

/* ------------------------------------------------------------------------------------------
 * Allocation sites, for the input-liveness checks' messages (the switch and the lookup are in
 * sites.c). Off by default: then the hot path pays one relaxed load and a branch, and the return
 * address is read but not kept.
 * ---------------------------------------------------------------------------------------- */

/* Keep a freed block's sites in the ring (called with the lock held). Best effort: without
 * host memory for the ring nothing is kept. */
static void remember_free(const recap__block_t *b, void *free_site) {
  if (!recap__alloc.freed) {
    recap__alloc.freed = recap__host_calloc(RECAP__FREE_HISTORY, sizeof *recap__alloc.freed);
    if (!recap__alloc.freed) return;
  }
  recap__free_record_t *r = &recap__alloc.freed[recap__alloc.freed_next++ % RECAP__FREE_HISTORY];
  r->base = b->ptr;
  r->size = b->size;
  r->generation = b->generation;
  r->alloc_site = b->alloc_site;
  r->free_site = free_site;
}

/* ------------------------------------------------------------------------------------------
 * Devices and pools
 * ---------------------------------------------------------------------------------------- */

recap__device_state_t *recap__alloc_device_state(int device) {
  recap__device_state_t *d = recap__alloc.devices[device];
  if (d) return d;
  d = recap__host_calloc(1, sizeof *d);
  if (!d) return NULL;
  d->device = device;
  recap__alloc.devices[device] = d;
  return d;
}

recap_status_t recap__alloc_current_device(int *device) {
  RECAP__CHECK(recap__device()->get_device(device));
  if (*device < 0 || *device >= RECAP__MAX_DEVICES)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED, "device %d: recap handles devices 0 to %d",
                        *device, RECAP__MAX_DEVICES - 1);
  return RECAP_SUCCESS;
}

static _Thread_local char thread_mark;

const void *recap__alloc_thread_mark(void) { return &thread_mark; }

/* The route whose capture recap made stream capture from this thread, or NULL (lock held): the
 * stream's capture known without asking the device (recap__route_t). */
static RECAP__HOT_INLINE const recap__route_t *route_of_own_stream(const recap__device_state_t *d,
                                                                   recap_stream_t stream) {
  for (int i = 0; i < d->route_count; i++)
    if (d->routes[i].stream == stream && stream && d->routes[i].thread == &thread_mark)
      return &d->routes[i];
  return NULL;
}

/* The pool an allocation on stream must come from: a routed capture's, if the stream belongs to
 * one, else the default pool; *logs, the allocation logs attached to that route, if any. Costs
 * nothing while no capture is routed, and asks the device only for a stream whose capture the
 * routes do not know (a side stream joined to a capture, another thread's stream, a stream
 * outside every capture). */
static recap_status_t pool_for_stream(recap__device_state_t *d, recap_stream_t stream,
                                      recap__pool_t **pool, recap__route_logs_t **logs) {
  *pool = &d->default_pool;
  *logs = NULL;
  if (d->route_count == 0) return RECAP_SUCCESS;
  const recap__route_t *own = route_of_own_stream(d, stream);
  if (own) {
    *pool = own->pool;
    *logs = own->logs;
    return RECAP_SUCCESS;
  }
  recap__capture_status_t status;
  uint64_t id = 0;
  /* A routed capture means a context exists: the cheap query is enough. */
  RECAP__CHECK(recap__device()->stream_capture_id(stream, &status, &id));
  if (status == RECAP__CAPTURE_NONE) return RECAP_SUCCESS;
  for (int i = 0; i < d->route_count; i++) {
    if (!d->routes[i].pending && d->routes[i].capture_id == id) {
      *pool = d->routes[i].pool;
      *logs = d->routes[i].logs;
      return RECAP_SUCCESS;
    }
  }
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * The front cache (its rules are in front_cache.c, its merge, recap__alloc_settle, in blocks.c):
 * the latest freed block, counted free but not merged yet
 * ---------------------------------------------------------------------------------------- */

void recap__alloc_front_cache_enable(bool on) {
  recap__alloc_lock();
  recap__alloc_settle();
  recap__alloc.front.off = !on;
  recap__alloc_unlock();
}

/* ------------------------------------------------------------------------------------------
 * Allocation
 * ---------------------------------------------------------------------------------------- */

/* The block size of a request: a multiple of min_block_size (a power of two). */
static size_t round_size(const recap__options_t *o, size_t size) {
  size_t unit = (size_t)o->min_block_size;
  if (size < unit) return unit;
  return (size + unit - 1) & ~(unit - 1);
}

/* The options, from a copy refreshed only when the registry changed: the registry's own lock
 * stays off the hot path. Called with the allocator's lock held. */
static recap_status_t current_options(const recap__options_t **o, uint64_t before) {
  static recap__options_t cached;
  static uint64_t cached_version; /* 0: nothing cached */
  if (RECAP__UNLIKELY(before == 0 || before != cached_version)) {
    RECAP__CHECK(recap__options_get(&cached));
    /* Trust the copy only if nothing changed while it was taken. */
    uint64_t after = recap__options_version();
    cached_version = before == after ? after : 0;
  }
  *o = &cached;
  return RECAP_SUCCESS;
}

recap_status_t recap__pool_asleep_error(const char *call, const recap__pool_t *pool) {
  return recap__error(RECAP_ERROR_POOL_ASLEEP,
                      "%s: pool {%" PRIu64 ",%" PRIu64
                      "}%s is %s (recap_pool_sleep); it hands out no memory and takes no "
                      "capture until it wakes: call recap_pool_wake (or recap_wake) first",
                      call, pool->id.a, pool->id.b,
                      pool->id.a == 0 && pool->id.b == 0 ? " (the default pool)" : "",
                      recap__pool_state_text(pool->state));
}

/* Find the pool and free set the request goes to, let completed events free their blocks, and
 * reserve every bit of host memory the call may need, so that nothing can fail once the block
 * structure starts to change. Called with the lock held. */
static recap_status_t request_begin(recap__request_t *r, int device, size_t size,
                                    recap_stream_t stream) {
  recap__device_state_t *d = recap__alloc_device_state(device);
  /* One read of the options' version serves the whole call. */
  uint64_t version = recap__options_version();
  RECAP__CHECK(current_options(&r->o, version));
  r->stream = stream;
  r->size = size;
  r->rounded = round_size(r->o, size);
  r->small = r->rounded <= r->o->small_size;
  if (RECAP__UNLIKELY(!d))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
  r->d = d;
  RECAP__CHECK(pool_for_stream(d, stream, &r->pool, &r->logs));
  if (RECAP__UNLIKELY(r->pool->state != RECAP_POOL_AWAKE))
    return recap__pool_asleep_error("recap_malloc", r->pool);
  if (recap__alloc.front.block) {
    /* The front cache serves the request when the slow path would give it the same block; a
     * route that only records its allocations places them as the slow path does (a replay log
     * places them by its own rule). */
    if ((!r->logs || !recap__route_logs_replay(r->logs)) &&
        (r->cached = recap__front_take(&recap__alloc.front, d, r->pool, stream, r->rounded, size,
                                       version, &r->folded)))
      return RECAP_SUCCESS;
  }
  /* Any other path: the cached block merges, and a folded run is counted. */
  recap__alloc_settle();
  if (RECAP__UNLIKELY(d->pending_count || d->deferred_count)) recap__alloc_process_events(d, false);
  r->set = recap__free_set_of(r->pool, r->small);
  /* Room in the free set for every block of it to be free, and for the two this call may add
   * (a new segment's, a split's rest): no later free needs host memory. */
  if (RECAP__UNLIKELY(!recap__block_reserve() || !recap__free_set_reserve_all(r->set, 2) ||
                      !recap__ptr_map_reserve(&recap__alloc.allocated, 1)))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
  return RECAP_SUCCESS;
}

/* Hand b out: mark it allocated, put it in the pointer map (the front cache's block is there
 * already) and count it. */
static void account_alloc(const recap__request_t *r, recap__block_t *b, void *site) {
  RECAP__ASSERT(!b->unmapped); /* recap__alloc_remap mapped its holes */
  RECAP__ASSERT(!b->allocated &&
                recap__ptr_map_get(&recap__alloc.allocated, b->ptr) == (r->cached ? b : NULL));
  b->allocated = true;
  b->requested = r->size;
  b->generation = ++recap__alloc.last_generation;
  b->alloc_site = recap__alloc_sites_enabled() ? site : NULL;
  if (!r->cached) recap__ptr_map_insert(&recap__alloc.allocated, b->ptr, b);
  r->pool->allocated_bytes += (int64_t)b->size;
  if (r->pool->allocated_bytes > r->pool->capture_peak)
    r->pool->capture_peak = r->pool->allocated_bytes;
  recap_memory_stats_t *st = &r->d->stats;
  recap__stat_kind(st->allocation, r->small, 1);
  recap__stat_kind(st->allocated_bytes, r->small, (int64_t)b->size);
  recap__stat_kind(st->requested_bytes, r->small, (int64_t)r->size);
  recap__stat_kind(st->active, r->small, 1);
  recap__stat_kind(st->active_bytes, r->small, (int64_t)b->size);
}

/* Hand out the block of a folded take (front_cache.c): everything account_alloc does but the
 * statistics, which recap__front_fold_end counts. The pool's bytes stay exact: a route's
 * capture peak is reset from them. */
static RECAP__HOT_INLINE void account_folded(recap__block_t *b, size_t size, void *site) {
  b->allocated = true;
  b->requested = size;
  b->generation = ++recap__alloc.last_generation;
  b->alloc_site = recap__alloc_sites_enabled() ? site : NULL;
  recap__pool_t *pool = b->segment->pool;
  pool->allocated_bytes += (int64_t)b->size;
  if (pool->allocated_bytes > pool->capture_peak) pool->capture_peak = pool->allocated_bytes;
}

/* The folded take (front_cache.c) of a request that repeats the armed pair, checked without
 * request_begin: the same requested size (so, under the same options, the same rounded size),
 * the same stream and device, the block's pool the one the stream's allocations go to (the
 * default pool with no capture routed on the device; a route's, when this thread made the
 * stream capture into it and the route places nothing by a replay log), and no event or
 * deferred block waiting: all that request_begin and recap__front_take check before they fold a
 * take. The route's record log notes the take. NULL, with nothing changed, otherwise (a stream
 * the routes do not know takes request_begin's way, which asks the device). */
static RECAP__HOT_INLINE recap__block_t *take_folded(int device, size_t size,
                                                     recap_stream_t stream) {
  recap__front_t *f = &recap__alloc.front;
  recap__block_t *b = f->block;
  if (!b || !f->armed || size != f->fold_requested || b->stream != stream) return NULL;
  recap__device_state_t *d = recap__alloc.devices[device];
  if (d != f->fold_d || d->pending_count || d->deferred_count ||
      recap__options_version() != f->options_version)
    return NULL;
  const recap__pool_t *pool = &d->default_pool;
  recap__route_logs_t *logs = NULL;
  if (d->route_count) {
    const recap__route_t *own = route_of_own_stream(d, stream);
    if (!own || (own->logs && recap__route_logs_replay(own->logs))) return NULL;
    pool = own->pool;
    logs = own->logs;
  }
  if (b->segment->pool != pool) return NULL;
  f->block = f->rest = NULL;
  f->lent = b;
  f->hits++;
  if (logs) recap__replay_note(logs, b->ptr, b->size, false);
  return b;
}

/* The free of the block a folded take lent: back into the cache as it was admitted, counted
 * in f->folded. Nothing else took the lock since the take, so the admission rules give what
 * they gave then. */
static RECAP__HOT_INLINE void free_folded(recap__front_t *f, recap__block_t *b, void *site) {
  RECAP__ASSERT(f->armed && !f->block && b->allocated && b->stream_use_count == 0);
  if (recap__alloc_sites_enabled()) remember_free(b, site);
  b->allocated = false;
  b->requested = 0;
  b->segment->pool->allocated_bytes -= (int64_t)b->size;
  f->block = b;
  f->rest = f->fold_rest;
  f->lent = NULL;
  f->folded++;
  f->folds++;
  f->admitted++;
}

/* recap_malloc under the lock, when the request is not a folded pair's. */
static RECAP__NOINLINE recap_status_t malloc_locked(void **ptr, size_t size, recap_stream_t stream,
                                                    int device, void *site) {
  recap__request_t r = {0};
  recap_status_t s = request_begin(&r, device, size, stream);
  if (RECAP__LIKELY(s == RECAP_SUCCESS)) {
    recap__block_t *b = r.cached;
    if (b) {
      /* Taken from the front cache: its place was counted there; a route's record log notes
       * it as recap__alloc_take_logged notes the slow path's. */
      if (r.logs) recap__replay_note(r.logs, b->ptr, r.rounded, false);
    } else if (RECAP__UNLIKELY(r.logs != NULL)) {
      /* A route with logs: a capture that records or replays its addresses (replay.c). */
      s = recap__alloc_take_logged(&r, &b);
    } else {
      s = recap__take_usual(&r, &b);
    }
    if (r.folded) {
      account_folded(b, size, site);
      *ptr = b->ptr;
    } else if (RECAP__LIKELY(s == RECAP_SUCCESS)) {
      account_alloc(&r, b, site);
      *ptr = b->ptr;
    } else if (r.pool->budget_attempted) {
      recap__alloc_budget_settle(r.d, r.pool);
    }
  }
  return s;
}

recap_status_t recap_malloc(void **ptr, size_t size, recap_stream_t stream) {
  void *site = RECAP__CALLER_ADDRESS();
  RECAP__ARG(ptr != NULL, "recap_malloc: ptr is NULL");
  *ptr = NULL;
  if (RECAP__UNLIKELY(size == 0)) return RECAP_SUCCESS;
  if (RECAP__UNLIKELY(size > SIZE_MAX / 2))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: %zu bytes can never be had",
                        size);
  int device;
  RECAP__CHECK(recap__alloc_current_device(&device));

  /* The lock without recap__alloc_lock's settling: request_begin settles the front cache unless
   * it serves the request. */
  recap__lock_acquire(&recap__alloc.lock);
  recap_status_t s = RECAP_SUCCESS;
  recap__block_t *folded = take_folded(device, size, stream);
  if (RECAP__LIKELY(folded != NULL)) {
    account_folded(folded, size, site);
    *ptr = folded->ptr;
  } else {
    s = malloc_locked(ptr, size, stream, device, site);
  }
  recap__lock_release(&recap__alloc.lock);
  return s;
}

/* Offer the freed block b, which needs no event, to the front cache (empty: recap_free settled
 * it). False: it takes the slow path. */
static bool front_put(recap__device_state_t *d, recap__block_t *b, size_t requested) {
  if (recap__alloc.front.off) return false;
  uint64_t version = recap__options_version();
  const recap__options_t *o;
  if (version == 0 || current_options(&o, version) != RECAP_SUCCESS) return false;
  recap__segment_t *seg = b->segment;
  return recap__front_put(&recap__alloc.front, d, b, recap__free_set_of(seg->pool, seg->small), o,
                          version, requested);
}

/* recap_free under the lock, when ptr is not a folded pair's block. Releases the lock. */
static RECAP__NOINLINE recap_status_t free_locked(void *ptr, void *site) {
  recap__front_t *f = &recap__alloc.front;
  /* The previous free's block merges now: this free may need it merged (a neighbour), and the
   * cache holds one block. A pair counted in full arms the cache when its block comes back
   * here with nothing between its take and this free. */
  recap__block_t *taken = f->taken;
  size_t taken_requested = f->taken_requested;
  recap__alloc_settle();
  /* Out of the map at once (one probe). Nothing below needs host memory: recap_malloc kept
   * room in the free set for every block of it, and recap_record_stream room in the deferred
   * list for every block used by other streams, so a free cannot fail once the block is found. */
  recap__ptr_map_t *map = &recap__alloc.allocated;
  size_t slot = recap__ptr_map_slot(map, ptr);
  recap__block_t *b = slot < map->capacity ? map->slots[slot].value : NULL;
  if (!b) {
    recap__lock_release(&recap__alloc.lock);
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "recap_free(%p): not a pointer recap_malloc returned, or already freed",
                        ptr);
  }
  RECAP__ASSERT(b->allocated && b->ptr == ptr);
  recap__segment_t *seg = b->segment;
  recap__device_state_t *d = recap__alloc.devices[seg->device];
  RECAP__ASSERT(recap__free_set_of(seg->pool, seg->small)->blocks <=
                recap__free_set_of(seg->pool, seg->small)->capacity);
  RECAP__ASSERT(!b->stream_use_count || d->deferred_count < d->deferred_capacity);
  if (recap__alloc_sites_enabled()) remember_free(b, site);
  b->allocated = false;
  seg->pool->allocated_bytes -= (int64_t)b->size;
  recap_memory_stats_t *st = &d->stats;
  recap__stat_kind(st->allocation, seg->small, -1);
  recap__stat_kind(st->allocated_bytes, seg->small, -(int64_t)b->size);
  recap__stat_kind(st->requested_bytes, seg->small, -(int64_t)b->requested);
  size_t requested = b->requested;
  b->requested = 0;
  if (b->stream_use_count) {
    recap__ptr_map_remove_at(map, slot);
    if (d->route_count) {
      b->deferred = true;
      d->deferred[d->deferred_count++] = b;
    } else {
      recap__alloc_insert_events(d, b);
      if (b->event_count == 0) recap__block_free(d, b);
    }
  } else {
    /* Restored for front_put only: settle cleared it, so that nothing else arms the cache. */
    f->taken = taken;
    f->taken_requested = taken_requested;
    if (!front_put(d, b, requested)) {
      f->taken = NULL;
      recap__ptr_map_remove_at(map, slot);
      recap__block_free(d, b);
    }
  }
  recap__lock_release(&recap__alloc.lock);
  return RECAP_SUCCESS;
}

recap_status_t recap_free(void *ptr) {
  void *site = RECAP__CALLER_ADDRESS();
  if (!ptr) return RECAP_SUCCESS;
  recap__lock_acquire(&recap__alloc.lock);
  recap__front_t *f = &recap__alloc.front;
  recap__block_t *lent = f->lent;
  if (lent && lent->ptr == ptr && RECAP__LIKELY(recap__options_version() == f->options_version)) {
    /* The free of a folded pair (front_cache.c): the block goes back as it came, uncounted. */
    free_folded(f, lent, site);
    recap__lock_release(&recap__alloc.lock);
    return RECAP_SUCCESS;
  }
  return free_locked(ptr, site);
}
