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
 * This file is the malloc/free core: blocks, events, merges and splits, segments, out of memory,
 * recap_malloc, recap_free, recap_record_stream, recap_block_info and recap_empty_cache. Pool
 * routing and references are in pool.c, the statistics queries in stats.c, lookups by address in
 * lookup.c, the allocation-site switch and lookup in sites.c and the reset in reset.c; they call
 * into this file, never the reverse. Three calls go out: the replay hook (for a route with
 * allocation logs, replay.c decides where an allocation goes, reading the free set only, and this
 * file carves the block: take_range), the front cache's rules (front_cache.c decides whether
 * a freed block may wait unmerged and whether a request takes it, and counts both; this file
 * merges it when anything else needs the blocks: recap__alloc_settle), and segments on virtual
 * memory (with the expandable_segments option, vmm_segment.c grows a segment by one try, which
 * this file wraps in the out-of-memory retry classic segments have, and trims free tails). A
 * request served by a pool that sleeps (sleep.c) is refused here (recap__pool_asleep_error,
 * which pool.c's routes use too), and recap_empty_cache leaves such a pool alone.
 * recap_empty_cache also frees the pinned host buffers kept for OFFLOAD sleeps
 * (pinned_cache.c, which sleep.c takes its buffers from).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "alloc/pinned_cache.h"
#include "core/assert.h"
#include "core/args.h"
#include "core/error.h"
#include "core/host.h"

recap__allocator_t recap__alloc = {.lock = RECAP__LOCK_INIT};

/* ------------------------------------------------------------------------------------------
 * Allocation sites, for the input-liveness checks' messages (the switch and the lookup are in
 * sites.c). Off by default: then the hot path pays one relaxed load and a branch, and the return
 * address is read but not kept.
 * ---------------------------------------------------------------------------------------- */

#if defined(__GNUC__)
#  define CALLER_ADDRESS() __builtin_return_address(0)
/* The helpers of the hot path that the replay hook calls too: inlined into recap_malloc
 * whatever the compiler thinks of their several callers, so the hot path stays one body. */
#  define HOT_INLINE inline __attribute__((always_inline))
/* The replay hook's path: out of recap_malloc's body, so the hot path's code stays as it was. */
#  define COLD __attribute__((noinline, cold))
/* The rest of recap_malloc and recap_free after a folded pair's check: out of their bodies, so
 * that the folded pair saves and restores no registers for it. */
#  define NOINLINE __attribute__((noinline))
#else
#  define CALLER_ADDRESS() NULL
#  define HOT_INLINE inline
#  define COLD
#  define NOINLINE
#endif

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
 * Block records. Recycled through a free list so that splitting on the hot path does not
 * reach the host allocator.
 * ---------------------------------------------------------------------------------------- */

static recap__block_t *block_new(void) {
  recap__block_t *b = recap__alloc.spare_blocks;
  if (b) {
    recap__alloc.spare_blocks = b->next;
  } else {
    b = recap__host_malloc(sizeof *b);
    if (!b) return NULL;
  }
  memset(b, 0, sizeof *b);
  return b;
}

/* Make sure one record is on the free list, so that a later block_new cannot fail. */
static bool block_reserve(void) {
  if (recap__alloc.spare_blocks) return true;
  recap__block_t *b = recap__host_malloc(sizeof *b);
  if (!b) return false;
  b->next = NULL;
  recap__alloc.spare_blocks = b;
  return true;
}

static void block_delete(recap__block_t *b) {
  recap__host_free(b->stream_uses);
  b->stream_uses = NULL;
  b->next = recap__alloc.spare_blocks;
  recap__alloc.spare_blocks = b;
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

void recap__alloc_pool_delete(recap__device_state_t *d, recap__pool_t *pool) {
  /* A pool goes only when no graph holds it, no capture routes to it and it holds no memory. */
  RECAP__ASSERT(pool != &d->default_pool);
  RECAP__ASSERT(pool->references == 0 && !pool->routed);
  RECAP__ASSERT(pool->segment_count == 0 && pool->segments == NULL);
  for (recap__pool_t **link = &d->private_pools; *link; link = &(*link)->next) {
    if (*link == pool) {
      *link = pool->next;
      break;
    }
  }
  recap__free_set_clear(&pool->small_free);
  recap__free_set_clear(&pool->large_free);
  recap__host_free(pool);
}

static recap__free_set_t *free_set_of(recap__pool_t *pool, bool small) {
  return small ? &pool->small_free : &pool->large_free;
}

/* The pool an allocation on stream must come from: a routed capture's, if the stream belongs to
 * one, else the default pool; *logs, the allocation logs attached to that route, if any. Costs
 * nothing while no capture is routed. */
static recap_status_t pool_for_stream(recap__device_state_t *d, recap_stream_t stream,
                                      recap__pool_t **pool, recap__route_logs_t **logs) {
  *pool = &d->default_pool;
  *logs = NULL;
  if (d->route_count == 0) return RECAP_SUCCESS;
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
 * Events: a freed block used by other streams waits for them
 * ---------------------------------------------------------------------------------------- */

static bool grow_array(void **items, size_t *capacity, size_t needed, size_t item_size) {
  if (needed <= *capacity) return true;
  size_t cap = *capacity ? *capacity : 8;
  while (cap < needed) cap *= 2;
  void *grown = recap__host_realloc(*items, cap * item_size);
  if (!grown) return false;
  *items = grown;
  *capacity = cap;
  return true;
}

static void free_block(recap__device_state_t *d, recap__block_t *b);

/* Whether a capture is routed on any device. CUDA's global capture mode forbids cudaMalloc,
 * cudaFree and event queries in every thread whatever the device, so a capture on device 0
 * constrains what recap may do for device 1 too. Off the hot path: only the slow paths ask. */
static bool capture_under_way(int *device) {
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    const recap__device_state_t *d = recap__alloc.devices[i];
    if (d && d->route_count) {
      if (device) *device = i;
      return true;
    }
  }
  return false;
}

static void release_event(recap__device_state_t *d, recap__event_t e) {
  if (grow_array((void **)&d->spare_events, &d->spare_capacity, d->spare_count + 1,
                 sizeof *d->spare_events))
    d->spare_events[d->spare_count++] = e;
  else
    recap__device()->event_destroy(e);
}

/* Record an event on every stream that used b, so b is reused only after their work. If an
 * event cannot be had, wait for that stream instead: slower, never wrong. */
static void insert_events(recap__device_state_t *d, recap__block_t *b) {
  const recap__device_ops_t *dev = recap__device();
  for (int i = 0; i < b->stream_use_count; i++) {
    recap_stream_t s = b->stream_uses[i];
    recap__event_t e = NULL;
    bool recorded = false;
    if (grow_array((void **)&d->pending, &d->pending_capacity, d->pending_count + 1,
                   sizeof *d->pending)) {
      if (d->spare_count)
        e = d->spare_events[--d->spare_count];
      else if (dev->event_create(&e) != RECAP_SUCCESS)
        e = NULL;
      if (e && dev->event_record(e, s) == RECAP_SUCCESS) {
        d->pending[d->pending_count].event = e;
        d->pending[d->pending_count].block = b;
        d->pending[d->pending_count].stream = s;
        d->pending_count++;
        b->event_count++;
        recorded = true;
      } else if (e) {
        release_event(d, e);
      }
    }
    if (!recorded) {
      RECAP__WARN("could not record an event for a freed block (%s); waiting for its stream",
                  recap_last_error());
      dev->stream_synchronize(s);
    }
  }
  if (b->stream_use_count) d->blocks_with_uses--;
  b->stream_use_count = 0;
}

/* Whether a route is pending on any device: a capture is about to begin on a stream recap
 * does not know yet. */
static bool route_pending(void) {
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    const recap__device_state_t *d = recap__alloc.devices[i];
    for (int k = 0; d && k < d->route_count; k++)
      if (d->routes[k].pending) return true;
  }
  return false;
}

/* Whether an event recorded on stream may be waited for while captures are under way: the
 * stream does not capture (and is not the legacy stream, which no call may use then). A stream
 * whose status cannot be read counts as capturing. */
static bool stream_outside_captures(recap_stream_t stream) {
  recap__capture_status_t status;
  uint64_t id = 0;
  return stream && recap__device()->stream_capture_id(stream, &status, &id) == RECAP_SUCCESS &&
         status == RECAP__CAPTURE_NONE;
}

/* Release the event of pending[i] and free its block when it was the block's last. */
static void event_done(recap__device_state_t *d, recap__pending_event_t p) {
  release_event(d, p.event);
  if (--p.block->event_count == 0) free_block(d, p.block);
}

/* The out-of-memory retry during captures: wait for the pending events recorded on streams that
 * capture nothing now, so that their blocks are free to serve the request. CUDA's global
 * capture mode forbids the calling thread event waits while another thread captures: the
 * thread's mode is relaxed around them, which allows waiting for an event recorded outside any
 * capture (every pending event is: events are recorded only while no capture is under way).
 * The events of a stream that captures now are left for later, and so is everything while a
 * route is pending (its stream, unknown here, is beginning a capture). */
static void wait_outside_captures(recap__device_state_t *d) {
  const recap__device_ops_t *dev = recap__device();
  recap__capture_mode_t saved = RECAP__CAPTURE_MODE_RELAXED;
  if (!d->pending_count || route_pending() || dev->exchange_capture_mode(&saved) != RECAP_SUCCESS)
    return;
  size_t kept = 0;
  for (size_t i = 0; i < d->pending_count; i++) {
    recap__pending_event_t p = d->pending[i];
    if (stream_outside_captures(p.stream) && dev->event_synchronize(p.event) == RECAP_SUCCESS)
      event_done(d, p);
    else
      d->pending[kept++] = p;
  }
  d->pending_count = kept;
  dev->exchange_capture_mode(&saved);
}

/* Free the blocks whose events have completed, after giving the blocks freed during captures
 * their events. With `wait`, wait for every event first. Event work needs a moment with no
 * capture under way on any device (CUDA's global mode forbids event calls in every thread,
 * and a stream may join another thread's capture at any time, so an event recorded on it could
 * land in that capture): during captures only the out-of-memory retry (`wait`) does what it
 * can, wait_outside_captures. */
static void process_events(recap__device_state_t *d, bool wait) {
  if (capture_under_way(NULL)) {
    if (wait) wait_outside_captures(d);
    return;
  }
  /* Blocks freed during a capture get their events now. */
  for (size_t i = 0; i < d->deferred_count; i++) {
    recap__block_t *b = d->deferred[i];
    b->deferred = false;
    insert_events(d, b);
    if (b->event_count == 0) free_block(d, b);
  }
  d->deferred_count = 0;
  const recap__device_ops_t *dev = recap__device();
  size_t kept = 0;
  for (size_t i = 0; i < d->pending_count; i++) {
    recap__pending_event_t p = d->pending[i];
    bool done = false;
    recap_status_t s = wait ? dev->event_synchronize(p.event) : dev->event_query(p.event, &done);
    if (wait && s == RECAP_SUCCESS) done = true;
    if (s != RECAP_SUCCESS) {
      /* A broken event must not pin the block forever: wait for the device instead. */
      RECAP__WARN("event query failed (%s); synchronizing the device", recap_last_error());
      dev->device_synchronize();
      done = true;
    }
    if (done)
      event_done(d, p);
    else
      d->pending[kept++] = p;
  }
  d->pending_count = kept;
}

void recap__alloc_collect_events(recap__device_state_t *d) {
  if (d->pending_count || d->deferred_count) process_events(d, false);
}

/* ------------------------------------------------------------------------------------------
 * Freeing a block into its pool, with merges
 * ---------------------------------------------------------------------------------------- */

/* Absorb the free neighbour `other`, already out of the free set, into b. Returns the bytes
 * absorbed. */
static size_t merge(recap__block_t *b, recap__block_t *other) {
  RECAP__ASSERT(recap__block_is_free(other) && other->segment == b->segment);
  RECAP__ASSERT(other == b->prev ? other->ptr + other->size == b->ptr
                                 : other == b->next && b->ptr + b->size == other->ptr);
  size_t absorbed = other->size;
  if (other == b->prev) {
    b->ptr = other->ptr;
    b->prev = other->prev;
    if (b->prev)
      b->prev->next = b;
    else
      b->segment->head = b;
  } else {
    b->next = other->next;
    if (b->next) b->next->prev = b;
  }
  b->size += absorbed;
  b->unmapped += other->unmapped; /* holes of a VMM segment stay where they are */
  free_set_of(b->segment->pool, b->segment->small)->blocks--;
  RECAP__ASSERT(b->ptr >= b->segment->base &&
                b->ptr + b->size <= b->segment->base + b->segment->size);
  block_delete(other);
  return absorbed;
}

/* b is no longer used by anyone: merge it with free neighbours and put it in its free set. The
 * merged block takes the set slot of a neighbour it absorbs (recap__free_set_replace_at), so the
 * common free, which undoes a split, moves nothing in the set. The set's capacity was reserved by
 * the caller's path (recap_free reserves before it starts), so the insert cannot fail here. */
static void merge_into_set(recap__block_t *b, int64_t *split_blocks_out, int64_t *split_bytes_out) {
  /* Freed once: the caller cleared `allocated`, and no event or capture still holds it. */
  RECAP__ASSERT(recap__block_is_free(b));
  recap__segment_t *seg = b->segment;
  recap__free_set_t *set = free_set_of(seg->pool, seg->small);
  int64_t split_blocks = 0, split_bytes = 0;
  recap__block_t *prev = b->prev && recap__block_is_free(b->prev) ? b->prev : NULL;
  recap__block_t *next = b->next && recap__block_is_free(b->next) ? b->next : NULL;
  /* With both free, the previous one leaves the set and b takes the next one's slot. */
  if (prev && next) recap__free_set_erase(set, prev);
  recap__block_t *slot_owner = next ? next : prev;
  size_t slot = slot_owner ? recap__free_set_find(set, slot_owner) : set->count;
  if (prev) {
    split_blocks--;
    split_bytes -= (int64_t)merge(b, prev);
  }
  if (next) {
    split_blocks--;
    split_bytes -= (int64_t)merge(b, next);
  }
  if (recap__block_is_split(b)) {
    split_blocks++;
    split_bytes += (int64_t)b->size;
  }
  RECAP__ASSERT(slot == set->count || set->items[slot] == slot_owner);
  if (slot < set->count)
    recap__free_set_replace_at(set, slot, b);
  else if (!recap__free_set_insert(set, b))
    RECAP__WARN("out of host memory: a free block of %zu bytes is lost to the cache", b->size);
  *split_blocks_out = split_blocks;
  *split_bytes_out = split_bytes;
}

/* b is no longer used by anyone: merge it into its free set (merge_into_set) and count it. */
static void free_block(recap__device_state_t *d, recap__block_t *b) {
  bool small = b->segment->small;
  size_t original = b->size;
  int64_t split_blocks, split_bytes;
  merge_into_set(b, &split_blocks, &split_bytes);
  recap_memory_stats_t *st = &d->stats;
  recap__stat_kind(st->inactive_split, small, split_blocks);
  recap__stat_kind(st->inactive_split_bytes, small, split_bytes);
  recap__stat_kind(st->active, small, -1);
  recap__stat_kind(st->active_bytes, small, -(int64_t)original);
}

/* ------------------------------------------------------------------------------------------
 * The front cache (its rules are in front_cache.c): the latest freed block, counted free but
 * not merged yet
 * ---------------------------------------------------------------------------------------- */

void recap__alloc_settle(void) {
  recap__front_t *f = &recap__alloc.front;
  f->taken = NULL;
  if (f->armed) recap__front_fold_end(f);
  recap__block_t *b = f->block;
  if (RECAP__LIKELY(!b)) return;
  f->block = f->rest = NULL;
  /* It stayed in the pointer map (not allocated), so that a pair skips a removal and an insert:
   * out now. Its statistics were counted when it was admitted: only the blocks move now. */
  recap__block_t *mapped = recap__ptr_map_remove(&recap__alloc.allocated, b->ptr);
  RECAP__ASSERT(mapped == b);
  (void)mapped;
  int64_t split_blocks, split_bytes;
  merge_into_set(b, &split_blocks, &split_bytes);
  RECAP__ASSERT(split_blocks == f->split_blocks && split_bytes == f->split_bytes);
  (void)split_blocks;
  (void)split_bytes;
}

void recap__alloc_front_cache_enable(bool on) {
  recap__alloc_lock();
  recap__alloc_settle();
  recap__alloc.front.off = !on;
  recap__alloc_unlock();
}

/* ------------------------------------------------------------------------------------------
 * Segments
 * ---------------------------------------------------------------------------------------- */

static size_t round_size(const recap__options_t *o, size_t size) {
  size_t unit = (size_t)o->min_block_size;
  if (size < unit) return unit;
  return (size + unit - 1) & ~(unit - 1);
}

static size_t segment_size_for(const recap__options_t *o, size_t size) {
  if (size <= o->small_size) return (size_t)o->small_segment;
  if (size < o->large_threshold) return (size_t)o->large_segment;
  size_t unit = (size_t)o->round_large;
  return (size + unit - 1) / unit * unit;
}

/* While a capture is under way on any device, a driver allocation or free from this thread
 * would invalidate it in global mode, though the memory is no part of the graph's work: relax
 * the thread's capture mode around such calls. */
static bool relax_capture_mode(recap__capture_mode_t *saved) {
  if (!capture_under_way(NULL)) return false;
  *saved = RECAP__CAPTURE_MODE_RELAXED;
  return recap__device()->exchange_capture_mode(saved) == RECAP_SUCCESS;
}

static void restore_capture_mode(bool relaxed, recap__capture_mode_t *saved) {
  if (relaxed) recap__device()->exchange_capture_mode(saved);
}

/* Give a segment whose only block is free back to the driver. */
static recap_status_t release_segment(recap__device_state_t *d, recap__block_t *b) {
  recap__segment_t *seg = b->segment;
  RECAP__ASSERT(recap__block_is_free(b) && !recap__block_is_split(b));
  RECAP__ASSERT(seg->head == b && b->ptr == seg->base && b->size == seg->size);
  recap__pool_t *pool = seg->pool;
  recap__capture_mode_t saved;
  bool relaxed = relax_capture_mode(&saved);
  recap_status_t s = seg->source
                         ? seg->source->free(seg->source->ctx, seg->base, seg->source_handle)
                         : recap__device()->raw_free(seg->base);
  restore_capture_mode(relaxed, &saved);
  RECAP__CHECK(s);
  RECAP__ASSERT(recap__free_set_find(free_set_of(pool, seg->small), b) <
                free_set_of(pool, seg->small)->count);
  recap__free_set_erase(free_set_of(pool, seg->small), b);
  free_set_of(pool, seg->small)->blocks--;
  recap__segment_unlink(seg);
  pool->reserved_bytes -= (int64_t)seg->size;
  RECAP__ASSERT(pool->segment_count >= 0 && pool->reserved_bytes >= 0);
  recap_memory_stats_t *st = &d->stats;
  recap__stat_kind(st->segment, seg->small, -1);
  recap__stat_kind(st->reserved_bytes, seg->small, -(int64_t)seg->size);
  st->num_device_free++;
  block_delete(b);
  recap__host_free(seg);
  return RECAP_SUCCESS;
}

/* Release every unsplit free block of one free set. */
static recap_status_t release_free_segments(recap__device_state_t *d, recap__free_set_t *set) {
  recap_status_t result = RECAP_SUCCESS;
  for (size_t i = set->count; i-- > 0;) {
    if (i >= set->count) continue;
    recap__block_t *b = set->items[i];
    /* A VMM segment gives back its free chunks instead (release_vmm_segments). */
    if (recap__block_is_split(b) || b->segment->vmm) continue;
    recap_status_t s = release_segment(d, b);
    if (s != RECAP_SUCCESS) result = s;
  }
  return result;
}

/* Whether release_cached may unmap VMM chunks, decided at the first segment with something to
 * give back. A free block may still be in use by work queued before its free: a block freed on
 * its own stream is reused stream-ordered at once, and the events of blocks used on other
 * streams say only that those streams got that far. cudaFree waits for the device, so a classic
 * segment's release is safe; cuMemUnmap does not wait. So the first unmap of a release_cached
 * call synchronises the device once: that covers the segment's stream and every stream a free
 * block was used on, whatever the block's history, at the cost of one wait per call that
 * unmaps (an empty_cache or an out-of-memory retry, both slow paths already). During a capture,
 * on any device, a synchronisation would invalidate it: no VMM chunk is given back then (the
 * out-of-memory retry of a capture frees what classic segments can give and leaves the chunks
 * mapped). A failed synchronisation gives back nothing either. */
typedef struct unmap_gate {
  bool decided;
  bool open;
} unmap_gate_t;

static recap_status_t unmap_gate_open(unmap_gate_t *gate) {
  if (gate->decided) return RECAP_SUCCESS;
  gate->decided = true;
  if (capture_under_way(NULL)) return RECAP_SUCCESS;
  recap_status_t s = recap__device()->device_synchronize();
  gate->open = s == RECAP_SUCCESS;
  return s;
}

/* Give back the chunks inside free blocks of pool's VMM segments, but keep's; those left with
 * no block go. */
static recap_status_t release_vmm_segments(recap__device_state_t *d, recap__pool_t *pool,
                                           unmap_gate_t *gate, const recap__block_t *keep) {
  recap_status_t result = RECAP_SUCCESS;
  for (recap__segment_t *seg = pool->segments, *next; seg; seg = next) {
    next = seg->next; /* the release may delete seg */
    if (!seg->vmm || !recap__vmm_segment_releasable(seg, keep)) continue;
    recap_status_t s = unmap_gate_open(gate);
    if (!gate->open) return s;
    s = recap__vmm_segment_release(d, seg, keep);
    if (s != RECAP_SUCCESS) result = s;
  }
  return result;
}

/* Free the cached memory of device d: the default pool's unused segments and those of private
 * pools nobody references, and the chunks inside free blocks of their VMM segments, but those
 * of keep (a free block a request is about to take; NULL: none). Pools left with no segment are
 * deleted. Events are waited for first (process_events: during captures, those of streams
 * outside them), so that the blocks waiting for them are free to go; during a capture VMM
 * segments keep their chunks (unmap_gate_t says why). */
static recap_status_t release_cached(recap__device_state_t *d, const recap__block_t *keep) {
  process_events(d, true);
  recap_status_t result = RECAP_SUCCESS, s;
  unmap_gate_t gate = {false, false};
  /* An asleep pool (sleep.c) has nothing mapped to give back: its segments wait for the wake. */
  if (d->default_pool.state == RECAP_POOL_AWAKE) {
    if ((s = release_free_segments(d, &d->default_pool.large_free))) result = s;
    if ((s = release_free_segments(d, &d->default_pool.small_free))) result = s;
    if ((s = release_vmm_segments(d, &d->default_pool, &gate, keep))) result = s;
  }
  for (recap__pool_t *p = d->private_pools, *next; p; p = next) {
    next = p->next;
    /* A pool still routed to a capture is in use even with no reference left. */
    if (p->references > 0 || p->routed || p->state != RECAP_POOL_AWAKE) continue;
    if ((s = release_free_segments(d, &p->large_free))) result = s;
    if ((s = release_free_segments(d, &p->small_free))) result = s;
    if ((s = release_vmm_segments(d, p, &gate, keep))) result = s;
    if (p->segment_count == 0) recap__alloc_pool_delete(d, p);
  }
  return result;
}

recap_status_t recap__alloc_pool_release_free(recap__device_state_t *d, recap__pool_t *pool) {
  process_events(d, true);
  recap_status_t result = RECAP_SUCCESS, s;
  if ((s = release_free_segments(d, &pool->large_free))) result = s;
  if ((s = release_free_segments(d, &pool->small_free))) result = s;
  return result;
}

/* Ask the driver for a segment. */
static recap_status_t raw_alloc(void **ptr, size_t size) {
  recap__capture_mode_t saved;
  bool relaxed = relax_capture_mode(&saved);
  recap_status_t s = recap__device()->raw_malloc(ptr, size);
  restore_capture_mode(relaxed, &saved);
  return s;
}

/* OUT_OF_MEMORY when reserving `bytes` more would exceed the memory_cap option. */
static recap_status_t capped(const recap__device_state_t *d, const recap__options_t *o,
                             size_t bytes) {
  if (o->memory_cap && (uint64_t)d->stats.reserved_bytes[0].current + bytes > o->memory_cap)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "the memory_cap option (%" PRIu64 " bytes) would be exceeded",
                        o->memory_cap);
  return RECAP_SUCCESS;
}

/* What the reserved bytes of device d not allocated are doing: free in blocks (the cache),
 * waiting for events recorded on other streams that used them, or freed during a capture and
 * waiting for its end. */
typedef struct unallocated {
  uint64_t free, events, captures;
} unallocated_t;

static void unallocated_add(unallocated_t *u, const recap__pool_t *pool) {
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    for (const recap__block_t *b = seg->head; b; b = b->next) {
      if (b->deferred)
        u->captures += b->size;
      else if (!b->allocated && b->event_count > 0)
        u->events += b->size;
    }
}

static unallocated_t unallocated_of(const recap__device_state_t *d) {
  unallocated_t u = {0, 0, 0};
  unallocated_add(&u, &d->default_pool);
  for (const recap__pool_t *p = d->private_pools; p; p = p->next) unallocated_add(&u, p);
  uint64_t unallocated =
      (uint64_t)(d->stats.reserved_bytes[0].current - d->stats.allocated_bytes[0].current);
  u.free = unallocated - u.events - u.captures;
  return u;
}

static recap_status_t report_oom(recap__device_state_t *d, size_t request, const char *what,
                                 size_t segment, const char *cause) {
  const recap_memory_stats_t *st = &d->stats;
  size_t free_bytes = 0, total_bytes = 0;
  char cause_copy[512];
  snprintf(cause_copy, sizeof cause_copy, "%s", cause);
  recap__device()->mem_get_info(&free_bytes, &total_bytes);
  unallocated_t u = unallocated_of(d);
  char req[32], seg[32], alloc[32], reserved[32], cached[32], events[32], captures[32], dfree[32],
      dtotal[32];
  recap__format_bytes(req, sizeof req, request);
  recap__format_bytes(seg, sizeof seg, segment);
  recap__format_bytes(alloc, sizeof alloc, (uint64_t)st->allocated_bytes[0].current);
  recap__format_bytes(reserved, sizeof reserved, (uint64_t)st->reserved_bytes[0].current);
  recap__format_bytes(cached, sizeof cached, u.free);
  recap__format_bytes(events, sizeof events, u.events);
  recap__format_bytes(captures, sizeof captures, u.captures);
  recap__format_bytes(dfree, sizeof dfree, free_bytes);
  recap__format_bytes(dtotal, sizeof dtotal, total_bytes);
  /* What VMM calls could not give back (address ranges, and the mappings and chunks of failed
   * growths) says that recap_empty_cache has something left to do. */
  char stuck[160] = "";
  if (d->stuck_count)
    snprintf(stuck, sizeof stuck,
             "; %zu piece(s) of VMM memory (address ranges, mappings or chunks) could not be "
             "given back yet (the next recap_empty_cache tries again)",
             d->stuck_count);
  return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                      "recap_malloc: out of memory on device %d: asked for %s (%s of %s); recap "
                      "has %s allocated and %s reserved, of which %s cached in free blocks, %s "
                      "freed and waiting for other streams' events and %s freed during captures "
                      "and waiting for them to end; the device has %s free of %s%s. Cause: %s",
                      d->device, req, what, seg, alloc, reserved, cached, events, captures, dfree,
                      dtotal, stuck, cause_copy);
}

/* One try at device memory for a segment or a growth: *bytes receives what it asked for. */
typedef recap_status_t (*memory_attempt_t)(recap__device_state_t *d, void *ctx, size_t *bytes);

/* Device memory with the out-of-memory retry, for classic and VMM segments alike: when attempt
 * says OUT_OF_MEMORY (the device, or memory_cap), free every cached unused segment and give back
 * the chunks inside the VMM segments' free blocks (but keep's: the block the attempt maps into,
 * or NULL), and try once more; a second no becomes the out-of-memory report for a request of
 * `request` bytes, which names `what` ("a new segment") and its bytes. attempt looks at the pool
 * afresh each time: the release may have cut or deleted segments and blocks other than keep. */
static recap_status_t segment_memory(recap__device_state_t *d, size_t request, const char *what,
                                     memory_attempt_t attempt, void *ctx,
                                     const recap__block_t *keep) {
  size_t bytes = 0;
  recap_status_t s = attempt(d, ctx, &bytes);
  if (s == RECAP_ERROR_OUT_OF_MEMORY) {
    d->stats.num_alloc_retries++;
    release_cached(d, keep);
    s = attempt(d, ctx, &bytes);
  }
  if (s == RECAP_ERROR_OUT_OF_MEMORY) {
    d->stats.num_ooms++;
    return report_oom(d, request, what, bytes, recap_last_error());
  }
  return s;
}

/* A classic segment's try (memory_attempt_t): `size` bytes from the driver, unless the
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
  RECAP__CHECK(capped(d, a->o, a->size));
  if (!a->source) return raw_alloc(&a->base, a->size);
  /* The source allocates device memory as raw_alloc does, so under the same relaxed mode. */
  recap__capture_mode_t saved;
  bool relaxed = relax_capture_mode(&saved);
  recap_status_t s = a->source->alloc(a->source->ctx, &a->base, a->size, &a->handle);
  restore_capture_mode(relaxed, &saved);
  return s;
}

/* Get a new segment of `size` bytes for pool: one free block that covers it, not yet in the
 * free set. */
static recap_status_t new_segment(recap__device_state_t *d, recap__pool_t *pool, bool small,
                                  size_t size, size_t request, recap_stream_t stream,
                                  const recap__options_t *o, recap__block_t **out) {
  recap__segment_t *seg = recap__host_calloc(1, sizeof *seg);
  recap__block_t *b = block_new();
  if (!seg || !b) {
    recap__host_free(seg);
    if (b) block_delete(b);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
  }
  classic_attempt_t attempt = {.o = o,
                               .size = size,
                               .source = recap__segment_source_find(pool->id)};
  recap_status_t s = segment_memory(d, request, "a new segment", classic_attempt, &attempt, NULL);
  void *base = attempt.base;
  if (s != RECAP_SUCCESS) {
    recap__host_free(seg);
    block_delete(b);
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
  free_set_of(pool, small)->blocks++;
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

/* ------------------------------------------------------------------------------------------
 * Allocation
 * ---------------------------------------------------------------------------------------- */

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

/* The set index of the best fit among the free blocks of `stream`, under the max_split_size
 * rules; set->count if none fits. The block stays in the set: the caller takes it out, or puts
 * the rest of a split in its place. */
static HOT_INLINE size_t find_free_block(const recap__free_set_t *set, recap_stream_t stream,
                                         size_t size, const recap__options_t *o) {
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
static bool should_split(const recap__block_t *b, size_t size, const recap__options_t *o) {
  return recap__should_split(b->size, b->segment->small, b->segment->vmm, size, o);
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
} request_t;

/* Find the pool and free set the request goes to, let completed events free their blocks, and
 * reserve every bit of host memory the call may need, so that nothing can fail once the block
 * structure starts to change. Called with the lock held. */
static recap_status_t request_begin(request_t *r, int device, size_t size, recap_stream_t stream) {
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
    /* The front cache serves the request when the slow path would give it the same block. */
    if (!r->logs && (r->cached = recap__front_take(&recap__alloc.front, d, r->pool, stream,
                                                   r->rounded, size, version, &r->folded)))
      return RECAP_SUCCESS;
  }
  /* Any other path: the cached block merges, and a folded run is counted. */
  recap__alloc_settle();
  if (RECAP__UNLIKELY(d->pending_count || d->deferred_count)) process_events(d, false);
  r->set = free_set_of(r->pool, r->small);
  /* Room in the free set for every block of it to be free, and for the two this call may add
   * (a new segment's, a split's rest): no later free needs host memory. */
  if (RECAP__UNLIKELY(!block_reserve() || !recap__free_set_reserve_all(r->set, 2) ||
                      !recap__ptr_map_reserve(&recap__alloc.allocated, 1)))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
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
 * recap_malloc knows whether the call failed (budget_settle). */
static COLD recap_status_t budget_refuse(const request_t *r, size_t segment) {
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
static COLD void budget_settle(recap__device_state_t *d, recap__pool_t *pool) {
  pool->budget_attempted = false;
  if (pool->budget_refusals++ == 0) pool->budget_first = pool->budget_attempt;
  d->stats.num_ooms++;
}

/* A VMM growth's try (memory_attempt_t): the bytes it needs, within memory_cap, mapped. */
typedef struct vmm_attempt {
  const request_t *r;
  size_t size; /* what the free last block must hold */
  recap__block_t **out;
} vmm_attempt_t;

static recap_status_t vmm_attempt(recap__device_state_t *d, void *ctx, size_t *bytes) {
  vmm_attempt_t *a = ctx;
  const request_t *r = a->r;
  RECAP__CHECK(recap__vmm_segment_need(d, r->pool, r->small, a->size, r->stream, r->o, bytes));
  if (*bytes) RECAP__CHECK(capped(d, r->o, *bytes));
  return recap__vmm_segment_grow(d, r->pool, r->small, a->size, r->stream, r->o, a->out);
}

/* Grow the request's VMM segment until its free last block, *b (in the free set), holds `size`
 * bytes: within the capture's budget, with the out-of-memory retry. */
static recap_status_t grow_vmm(const request_t *r, size_t size, recap__block_t **b) {
  r->pool->budget_attempted = false;
  if (RECAP__UNLIKELY(r->pool->budget != 0)) {
    size_t bytes = 0;
    RECAP__CHECK(recap__vmm_segment_need(r->d, r->pool, r->small, size, r->stream, r->o, &bytes));
    if (bytes && (uint64_t)r->pool->reserved_bytes + bytes > r->pool->budget)
      return budget_refuse(r, bytes);
  }
  vmm_attempt_t attempt = {.r = r, .size = size, .out = b};
  return segment_memory(r->d, r->size, "a growth of its VMM segment", vmm_attempt, &attempt, NULL);
}

/* Mapping the holes a request needs again (memory_attempt_t): within memory_cap, one try. */
typedef struct remap_attempt {
  const request_t *r;
  recap__block_t *b;
  const char *at;
  size_t size; /* what the request holds from at */
} remap_attempt_t;

static recap_status_t remap_attempt(recap__device_state_t *d, void *ctx, size_t *bytes) {
  remap_attempt_t *a = ctx;
  *bytes = recap__vmm_segment_map_need(d, a->b, a->at, a->size);
  if (*bytes) RECAP__CHECK(capped(d, a->r->o, *bytes));
  return recap__vmm_segment_map(d, a->b, a->at, a->size);
}

/* Before the request is carved from the free block b at `at`: map the holes it touches again
 * (vmm_segment.c), with the out-of-memory retry, which keeps b as it is. What it touches is what
 * it will hold: its rounded size when take_block splits the rest off, else everything from at to
 * b's end (a rest too small to split stays with the block, holes and all). Nothing to do, and
 * one load on the hot path, for a block without holes. The free set may change meanwhile: the
 * caller finds b's slot again. */
static COLD recap_status_t remap(const request_t *r, recap__block_t *b, const char *at) {
  size_t from_at = (size_t)(b->ptr + b->size - at);
  bool split = recap__should_split(from_at, b->segment->small, b->segment->vmm, r->rounded, r->o);
  remap_attempt_t attempt = {.r = r, .b = b, .at = at, .size = split ? r->rounded : from_at};
  return segment_memory(r->d, r->size, "mapping its VMM segment's free pages again", remap_attempt,
                        &attempt, b);
}

/* The slow path with the expandable_segments option: the (pool, class, stream) VMM segment
 * grows (vmm_segment.c). The grown last block leaves the free set, as a new segment's block is
 * outside it. */
static COLD recap_status_t malloc_vmm(const request_t *r, recap__block_t **b) {
  RECAP__CHECK(grow_vmm(r, r->rounded, b));
  /* The grown block may hold holes (a free last block's) where the request goes. */
  if ((*b)->unmapped) RECAP__CHECK(remap(r, *b, (*b)->ptr));
  bool erased = recap__free_set_erase(r->set, *b);
  RECAP__ASSERT(erased);
  (void)erased;
  return RECAP_SUCCESS;
}

/* The slow path: no cached block fits, so the request gets a new segment (new_segment retries
 * once after freeing the cache when the device is out of memory), within the capture's budget. */
static recap_status_t malloc_slow(const request_t *r, recap__block_t **b) {
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

/* Keep the first `size` bytes of the free block b; `rest`, a fresh record, becomes the free
 * block right after it. The rest takes b's free-set slot when b is in the set (in_set), which
 * usually moves nothing; a new segment's block never was in the set, so the rest is inserted
 * (the caller reserved room). */
static void split_block(recap__free_set_t *set, recap__block_t *b, recap__block_t *rest,
                        size_t size, size_t slot, bool in_set) {
  RECAP__ASSERT(size < b->size);
  RECAP__ASSERT(!in_set || set->items[slot] == b);
  rest->ptr = b->ptr + size;
  rest->size = b->size - size;
  rest->stream = b->stream;
  rest->segment = b->segment;
  rest->prev = b;
  rest->next = b->next;
  if (rest->next) rest->next->prev = rest;
  b->next = rest;
  b->size = size;
  if (RECAP__UNLIKELY(b->unmapped)) {
    /* Holes of a VMM segment: each part keeps those inside it. */
    rest->unmapped = recap__vmm_unmapped_in(b->segment, rest->ptr, rest->size);
    b->unmapped -= rest->unmapped;
  }
  set->blocks++;
  if (in_set)
    recap__free_set_replace_at(set, slot, rest);
  else
    recap__free_set_insert(set, rest);
  RECAP__ASSERT(b->ptr + b->size == rest->ptr);
  RECAP__ASSERT(!rest->next || rest->ptr + rest->size == rest->next->ptr);
  RECAP__ASSERT(rest->ptr + rest->size <= b->segment->base + b->segment->size);
}

/* Take the free block b out of the free set for the request, splitting off what it does not
 * need. The inactive-split statistics count free blocks that are part of a split segment. */
static HOT_INLINE void take_block(const request_t *r, recap__block_t *b, size_t slot, bool in_set) {
  RECAP__ASSERT(recap__block_is_free(b));
  RECAP__ASSERT(b->size >= r->rounded && b->stream == r->stream);
  recap_memory_stats_t *st = &r->d->stats;
  bool already_split = recap__block_is_split(b);
  /* A record for the rest was reserved in request_begin; should new_segment have used it and
   * the host be out of memory now, the caller simply gets the whole block. */
  recap__block_t *rest = should_split(b, r->rounded, r->o) ? block_new() : NULL;
  if (rest) {
    split_block(r->set, b, rest, r->rounded, slot, in_set);
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

/* Small requests in a graph pool's large segment (docs/allocator.md says why): with the
 * expandable_segments option, a request of the small class routed to a private pool may take a
 * free block of the pool's large-class VMM segments, already mapped, when no free small block
 * fits it: graphs captured one after another into one pool then share its physical memory
 * whatever their sizes, as the driver's graph memory nodes share one physical pool. The default
 * pool keeps PyTorch's classes. The large set, prepared for the request: room in it for the
 * split this call may add (as request_begin made in the small set), so that later frees need no
 * host memory; NULL when the request is not such a one, or without host memory (it then takes
 * the small class's way, as it would have). */
static recap__free_set_t *large_set_for_small(const request_t *r) {
  if (!r->small || !r->o->expandable_segments || r->pool == &r->d->default_pool) return NULL;
  recap__free_set_t *large = &r->pool->large_free;
  return recap__free_set_reserve_all(large, 2) ? large : NULL;
}

/* The request belongs to its block's segment's class from now on: it is carved from the large
 * set and counted in the large class (take_block, account_alloc), as its free counts it. */
static void request_to_large(request_t *r, recap__free_set_t *large) {
  r->small = false;
  r->set = large;
}

/* The best fitting free block of the pool's large VMM segments on the request's stream for a
 * small request (large_set_for_small), taken and split: true; false, with nothing changed, when
 * none fits. Never grows a segment: only what is mapped already serves. */
static COLD bool take_from_large(request_t *r, recap__block_t **b) {
  recap__free_set_t *large = large_set_for_small(r);
  if (!large) return false;
  for (size_t i = recap__free_set_lower_bound(large, r->stream, r->rounded);
       i < large->count && large->items[i]->stream == r->stream; i++) {
    if (!large->items[i]->segment->vmm) continue; /* a classic segment made with the option off */
    *b = large->items[i];
    if ((*b)->unmapped) {
      /* Its holes mapped again, or none of it: the request then takes its own class's way. */
      if (remap(r, *b, (*b)->ptr) != RECAP_SUCCESS) return false;
      i = recap__free_set_find(large, *b);
    }
    request_to_large(r, large);
    take_block(r, *b, i, true);
    return true;
  }
  return false;
}

/* The usual placement: the best fitting free block of the request's stream, else (a graph
 * pool's small request) a free block of its large VMM segments, else a new segment; what the
 * block does not need is split off. recap_malloc's hot path. */
static HOT_INLINE recap_status_t take_usual(request_t *r, recap__block_t **b) {
  /* A cached block stays in the set, at `slot`, until take_block decides what takes its place;
   * a new segment's block was never in it. */
  size_t slot = find_free_block(r->set, r->stream, r->rounded, r->o);
  bool in_set = slot < r->set->count;
  *b = in_set ? r->set->items[slot] : NULL;
  if (RECAP__UNLIKELY(!in_set)) {
    if (r->small && take_from_large(r, b)) return RECAP_SUCCESS;
    RECAP__CHECK(malloc_slow(r, b));
  } else if (RECAP__UNLIKELY((*b)->unmapped)) {
    RECAP__CHECK(remap(r, *b, (*b)->ptr));
    slot = recap__free_set_find(r->set, *b);
  }
  take_block(r, *b, slot, in_set);
  return RECAP_SUCCESS;
}

/* Take exactly [at, at + rounded) out of the free block f (a member of the request's set), for
 * a replayed address, into *out: the part of f before `at` stays a free block in the set, the
 * part after is split off as take_block decides. *out NULL, with nothing changed, when no block
 * record can be had for the part before; an error when f's holes there could not be mapped
 * again (f stays as it was; other blocks may have changed, remap). */
static recap_status_t take_range(const request_t *r, recap__block_t *f, char *at,
                                 recap__block_t **out) {
  *out = NULL;
  if (f->unmapped) RECAP__CHECK(remap(r, f, at));
  size_t slot = recap__free_set_find(r->set, f);
  RECAP__ASSERT(slot < r->set->count && recap__block_is_free(f));
  RECAP__ASSERT(at >= f->ptr && (size_t)(at - f->ptr) + r->rounded <= f->size);
  if (at == f->ptr) {
    take_block(r, f, slot, true);
    *out = f;
    return RECAP_SUCCESS;
  }
  recap__block_t *b = block_new();
  if (!b) return RECAP_SUCCESS;
  bool already_split = recap__block_is_split(f);
  /* f keeps the part before `at`; b, from `at` on, takes f's slot; f goes back in the set
   * (request_begin kept room for two more blocks than the set has). */
  split_block(r->set, f, b, (size_t)(at - f->ptr), slot, true);
  if (!recap__free_set_insert(r->set, f))
    RECAP__WARN("out of host memory: a free block of %zu bytes is lost to the cache", f->size);
  /* Both parts are free blocks of a split segment now. */
  recap_memory_stats_t *st = &r->d->stats;
  recap__stat_kind(st->inactive_split, r->small, already_split ? 1 : 2);
  if (!already_split)
    recap__stat_kind(st->inactive_split_bytes, r->small, (int64_t)(f->size + b->size));
  /* A record for take_block's split of the rest; without one the block keeps the rest. */
  (void)block_reserve();
  take_block(r, b, recap__free_set_find(r->set, b), true);
  *out = b;
  return RECAP_SUCCESS;
}

/* The replay's "new segment" with VMM segments: the growth's free tail is no new segment, and an
 * unused entry of the replay log may claim it, so the request goes to unclaimed space after the
 * growth; when the log claims the grown tail, the segment grows by the whole request beyond it.
 * Should the log claim even that (addresses past a trim), the tail's start. */
static COLD recap_status_t take_vmm_unclaimed(const request_t *r, recap__block_t **b) {
  recap__block_t *tail = NULL, *f = NULL;
  char *at = NULL;
  RECAP__CHECK(grow_vmm(r, r->rounded, &tail));
  for (int round = 0; round < 2; round++) {
    /* take_range splits twice: room for two more blocks (the growth may have added one). */
    if (!recap__free_set_reserve_all(r->set, 2)) break;
    if (recap__replay_place_unclaimed(r->logs, r->set, r->stream, r->rounded, r->o, &f, &at)) {
      RECAP__CHECK(take_range(r, f, at, b));
      if (*b) return RECAP_SUCCESS;
      break;
    }
    if (round == 0) RECAP__CHECK(grow_vmm(r, tail->size + r->rounded, &tail));
  }
  if (tail->unmapped) RECAP__CHECK(remap(r, tail, tail->ptr));
  bool erased = recap__free_set_erase(r->set, tail);
  RECAP__ASSERT(erased);
  (void)erased;
  take_block(r, tail, r->set->count, false);
  *b = tail;
  return RECAP_SUCCESS;
}

/* The allocation path of a route with logs attached (replay.c decides, this file carves). A
 * small request of a graph pool with VMM segments may be placed in the large set's blocks too
 * (take_from_large's rule), after its own class's. */
static COLD recap_status_t take_logged(request_t *r, recap__block_t **b) {
  char *at = NULL;
  bool hit = false;
  recap_status_t s = RECAP_SUCCESS;
  recap__free_set_t *large = large_set_for_small(r);
  switch (recap__replay_place(r->logs, r->set, large, r->stream, r->rounded, r->o, b, &at, &hit)) {
    case RECAP__REPLAY_AT: {
      request_t own = *r;
      if (large && !(*b)->segment->small) request_to_large(r, large);
      if (take_range(r, *b, at, b) == RECAP_SUCCESS && *b) break;
      *r = own; /* nothing was carved: the request is its own class's again */
      hit = false;
      s = take_usual(r, b);
      break;
    }
    case RECAP__REPLAY_NEW_SEGMENT: {
      recap__saved_error_t saved;
      recap__error_save(&saved);
      if (r->o->expandable_segments) {
        s = take_vmm_unclaimed(r, b);
        if (s == RECAP_SUCCESS) break;
      } else {
        s = malloc_slow(r, b);
        if (s == RECAP_SUCCESS) {
          take_block(r, *b, r->set->count, false);
          break;
        }
      }
      /* Out of device memory: space that a later replayed address claims beats failing. */
      size_t slot = find_free_block(r->set, r->stream, r->rounded, r->o);
      bool found = slot < r->set->count;
      if (s == RECAP_ERROR_OUT_OF_MEMORY && found) {
        *b = r->set->items[slot];
        found = !(*b)->unmapped || remap(r, *b, (*b)->ptr) == RECAP_SUCCESS;
        if (found) take_block(r, *b, recap__free_set_find(r->set, *b), true);
      }
      if (s == RECAP_ERROR_OUT_OF_MEMORY && (found || (r->small && take_from_large(r, b)))) {
        (void)recap__error_restore(&saved); /* the caller's last error, not this OOM */
        r->pool->budget_attempted = false;  /* nor a refusal of the budget */
        s = RECAP_SUCCESS;
      }
      break;
    }
    case RECAP__REPLAY_USUAL: s = take_usual(r, b); break;
  }
  if (s == RECAP_SUCCESS) recap__replay_note(r->logs, (*b)->ptr, r->rounded, hit);
  return s;
}

/* Hand b out: mark it allocated, put it in the pointer map (the front cache's block is there
 * already) and count it. */
static void account_alloc(const request_t *r, recap__block_t *b, void *site) {
  RECAP__ASSERT(!b->unmapped); /* remap mapped its holes */
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
static HOT_INLINE void account_folded(recap__block_t *b, size_t size, void *site) {
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
 * the same stream and device, no capture routed on the device (so the default pool, the
 * block's), and no event or deferred block waiting: all that request_begin and
 * recap__front_take check before they fold a take. NULL, with nothing changed, otherwise. */
static HOT_INLINE recap__block_t *take_folded(int device, size_t size, recap_stream_t stream) {
  recap__front_t *f = &recap__alloc.front;
  recap__block_t *b = f->block;
  if (!b || !f->armed || size != f->fold_requested || b->stream != stream) return NULL;
  recap__device_state_t *d = recap__alloc.devices[device];
  if (d != f->fold_d || d->route_count || d->pending_count || d->deferred_count ||
      b->segment->pool != &d->default_pool || recap__options_version() != f->options_version)
    return NULL;
  f->block = f->rest = NULL;
  f->lent = b;
  f->hits++;
  return b;
}

/* The free of the block a folded take lent: back into the cache as it was admitted, counted
 * in f->folded. Nothing else took the lock since the take, so the admission rules give what
 * they gave then. */
static HOT_INLINE void free_folded(recap__front_t *f, recap__block_t *b, void *site) {
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
static NOINLINE recap_status_t malloc_locked(void **ptr, size_t size, recap_stream_t stream,
                                             int device, void *site) {
  request_t r = {0};
  recap_status_t s = request_begin(&r, device, size, stream);
  if (RECAP__LIKELY(s == RECAP_SUCCESS)) {
    recap__block_t *b = r.cached;
    if (b) {
      /* Taken from the front cache: its place was counted there. */
    } else if (RECAP__UNLIKELY(r.logs != NULL)) {
      /* A route with logs: a capture that records or replays its addresses (replay.c). */
      s = take_logged(&r, &b);
    } else {
      s = take_usual(&r, &b);
    }
    if (r.folded) {
      account_folded(b, size, site);
      *ptr = b->ptr;
    } else if (RECAP__LIKELY(s == RECAP_SUCCESS)) {
      account_alloc(&r, b, site);
      *ptr = b->ptr;
    } else if (r.pool->budget_attempted) {
      budget_settle(r.d, r.pool);
    }
  }
  return s;
}

recap_status_t recap_malloc(void **ptr, size_t size, recap_stream_t stream) {
  void *site = CALLER_ADDRESS();
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
  return recap__front_put(&recap__alloc.front, d, b, free_set_of(seg->pool, seg->small), o, version,
                          requested);
}

/* recap_free under the lock, when ptr is not a folded pair's block. Releases the lock. */
static NOINLINE recap_status_t free_locked(void *ptr, void *site) {
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
  RECAP__ASSERT(free_set_of(seg->pool, seg->small)->blocks <=
                free_set_of(seg->pool, seg->small)->capacity);
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
      insert_events(d, b);
      if (b->event_count == 0) free_block(d, b);
    }
  } else {
    /* Restored for front_put only: settle cleared it, so that nothing else arms the cache. */
    f->taken = taken;
    f->taken_requested = taken_requested;
    if (!front_put(d, b, requested)) {
      f->taken = NULL;
      recap__ptr_map_remove_at(map, slot);
      free_block(d, b);
    }
  }
  recap__lock_release(&recap__alloc.lock);
  return RECAP_SUCCESS;
}

recap_status_t recap_free(void *ptr) {
  void *site = CALLER_ADDRESS();
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

recap_status_t recap_record_stream(void *ptr, recap_stream_t stream) {
  RECAP__ARG(ptr != NULL, "recap_record_stream: ptr is NULL");
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__block_t *b = recap__ptr_map_get(&recap__alloc.allocated, ptr);
  if (!b || !b->allocated) { /* the front cache's block is in the map, free */
    s = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                     "recap_record_stream(%p): not an allocated pointer of recap", ptr);
    goto out;
  }
  if (stream == b->stream) goto out; /* the block's own stream needs no event */
  for (int i = 0; i < b->stream_use_count; i++)
    if (b->stream_uses[i] == stream) goto out;
  if (b->stream_use_count == b->stream_use_capacity) {
    int capacity = b->stream_use_capacity ? b->stream_use_capacity * 2 : 2;
    recap_stream_t *uses = recap__host_realloc(b->stream_uses, (size_t)capacity * sizeof *uses);
    if (!uses) {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_record_stream: out of host memory");
      goto out;
    }
    b->stream_uses = uses;
    b->stream_use_capacity = capacity;
  }
  if (b->stream_use_count == 0) {
    /* The block's first other stream: make room for it in the deferred list now, so that
     * freeing it during a capture needs no host memory. */
    recap__device_state_t *d = recap__alloc.devices[b->segment->device];
    if (!grow_array((void **)&d->deferred, &d->deferred_capacity, d->blocks_with_uses + 1,
                    sizeof *d->deferred)) {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_record_stream: out of host memory");
      goto out;
    }
    d->blocks_with_uses++;
  }
  b->stream_uses[b->stream_use_count++] = stream;
out:
  recap__alloc_unlock();
  return s;
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

/* ------------------------------------------------------------------------------------------
 * Cache control
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_empty_cache(void) {
  const recap__device_ops_t *dev = recap__device();
  recap_status_t result = RECAP_SUCCESS;
  recap__alloc_lock();
  /* A capture on any device refuses the whole call: in global mode, cudaFree on another device
   * would invalidate it too. */
  recap__alloc_settle();
  int capturing;
  if (capture_under_way(&capturing)) {
    recap__alloc_unlock();
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_empty_cache: a capture is under way on device %d; freeing device "
                        "memory now could invalidate it. Call it before the capture begins or "
                        "after it ends",
                        capturing);
  }
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    int previous = 0;
    bool switched = false;
    if (dev->get_device(&previous) == RECAP_SUCCESS && previous != i)
      switched = dev->set_device(i) == RECAP_SUCCESS;
    /* The address ranges whose release failed before are tried again first; those that fail
     * now, or in this release, are reported. */
    recap__vmm_ranges_retry(d);
    recap_status_t s = release_cached(d, NULL);
    if (s != RECAP_SUCCESS) result = s;
    s = recap__vmm_ranges_report(d, "recap_empty_cache");
    if (s != RECAP_SUCCESS) result = s;
    if (switched) dev->set_device(previous);
  }
  /* The pinned host buffers kept for OFFLOAD sleeps (offload_keep_pinned) are cached memory
   * too. */
  recap_status_t s = recap__pinned_release_all("recap_empty_cache");
  if (s != RECAP_SUCCESS) result = s;
  recap__alloc_unlock();
  return result;
}
