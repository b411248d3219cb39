/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cache_release.c — giving cached device memory back: the free segments of pools nobody holds,
 * the chunks inside free blocks of VMM segments (with the synchronisation that gates their
 * unmap), pools left empty, and recap_empty_cache, which also frees the pinned host buffers kept
 * for OFFLOAD sleeps (pinned_cache.c).
 *
 * Apart because two callers share it that are otherwise unrelated: recap_empty_cache and the
 * out-of-memory retry (out_of_memory.c), which frees the cache before it tries again. A pool that
 * sleeps (sleep.c) is left alone: it has nothing mapped to give back.
 */
#include "alloc/cache_release.h"

#include "alloc/alloc_lock.h"
#include "alloc/blocks.h"
#include "alloc/events.h"
#include "alloc/pinned_cache.h"
#include "alloc/segment_source.h"
#include "alloc/vmm_holes.h"
#include "alloc/vmm_segment.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/host.h"
#include "recap/sleep.h"

/* While a capture is under way on any device, a driver allocation or free from this thread
 * would invalidate it in global mode, though the memory is no part of the graph's work: relax
 * the thread's capture mode around such calls. */
bool recap__alloc_relax_capture_mode(recap__capture_mode_t *saved) {
  if (!recap__alloc_capture_under_way(NULL)) return false;
  *saved = RECAP__CAPTURE_MODE_RELAXED;
  return recap__device()->exchange_capture_mode(saved) == RECAP_SUCCESS;
}

void recap__alloc_restore_capture_mode(bool relaxed, recap__capture_mode_t *saved) {
  if (relaxed) recap__device()->exchange_capture_mode(saved);
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

/* Give a segment whose only block is free back to the driver. */
static recap_status_t release_segment(recap__device_state_t *d, recap__block_t *b) {
  recap__segment_t *seg = b->segment;
  RECAP__ASSERT(recap__block_is_free(b) && !recap__block_is_split(b));
  RECAP__ASSERT(seg->head == b && b->ptr == seg->base && b->size == seg->size);
  recap__pool_t *pool = seg->pool;
  recap__capture_mode_t saved;
  bool relaxed = recap__alloc_relax_capture_mode(&saved);
  recap_status_t s = seg->source
                         ? seg->source->free(seg->source->ctx, seg->base, seg->source_handle)
                         : recap__device()->raw_free(seg->base);
  recap__alloc_restore_capture_mode(relaxed, &saved);
  RECAP__CHECK(s);
  RECAP__ASSERT(recap__free_set_find(recap__free_set_of(pool, seg->small), b) <
                recap__free_set_of(pool, seg->small)->count);
  recap__free_set_erase(recap__free_set_of(pool, seg->small), b);
  recap__free_set_of(pool, seg->small)->blocks--;
  recap__segment_unlink(seg);
  pool->reserved_bytes -= (int64_t)seg->size;
  RECAP__ASSERT(pool->segment_count >= 0 && pool->reserved_bytes >= 0);
  recap_memory_stats_t *st = &d->stats;
  recap__stat_kind(st->segment, seg->small, -1);
  recap__stat_kind(st->reserved_bytes, seg->small, -(int64_t)seg->size);
  st->num_device_free++;
  recap__block_delete(b);
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

/* Whether recap__alloc_release_cached may unmap VMM chunks, decided at the first segment with
 * something to give back. A free block may still be in use by work queued before its free: a block
 * freed on its own stream is reused stream-ordered at once, and the events of blocks used on other
 * streams say only that those streams got that far. cudaFree waits for the device, so a classic
 * segment's release is safe; cuMemUnmap does not wait. So the first unmap of a
 * recap__alloc_release_cached call synchronises the device once: that covers the segment's stream
 * and every stream a free block was used on, whatever the block's history, at the cost of one wait
 * per call that unmaps (an empty_cache or an out-of-memory retry, both slow paths already). During
 * a capture, on any device, a synchronisation would invalidate it: no VMM chunk is given back then
 * (the out-of-memory retry of a capture frees what classic segments can give and leaves the chunks
 * mapped). A failed synchronisation gives back nothing either. */
typedef struct unmap_gate {
  bool decided;
  bool open;
} unmap_gate_t;

static recap_status_t unmap_gate_open(unmap_gate_t *gate) {
  if (gate->decided) return RECAP_SUCCESS;
  gate->decided = true;
  if (recap__alloc_capture_under_way(NULL)) return RECAP_SUCCESS;
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

/* Free the cached memory of device d: the default pool's unused segments and those of private pools
 * nobody references, and the chunks inside free blocks of their VMM segments, but those of keep (a
 * free block a request is about to take; NULL: none). Pools left with no segment are deleted.
 * Events are waited for first (recap__alloc_process_events: during captures, those of streams
 * outside them), so that the blocks waiting for them are free to go; during a capture VMM segments
 * keep their chunks (unmap_gate_t says why). */
recap_status_t recap__alloc_release_cached(recap__device_state_t *d, const recap__block_t *keep) {
  recap__alloc_process_events(d, true);
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
  recap__alloc_process_events(d, true);
  recap_status_t result = RECAP_SUCCESS, s;
  if ((s = release_free_segments(d, &pool->large_free))) result = s;
  if ((s = release_free_segments(d, &pool->small_free))) result = s;
  return result;
}

recap_status_t recap_empty_cache(void) {
  const recap__device_ops_t *dev = recap__device();
  recap_status_t result = RECAP_SUCCESS;
  recap__alloc_lock();
  /* A capture on any device refuses the whole call: in global mode, cudaFree on another device
   * would invalidate it too. */
  recap__alloc_settle();
  int capturing;
  if (recap__alloc_capture_under_way(&capturing)) {
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
    recap_status_t s = recap__alloc_release_cached(d, NULL);
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
