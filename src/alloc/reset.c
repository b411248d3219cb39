/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reset.c — recap__alloc_reset: drop every piece of allocator state without calling the device.
 *
 * For the tests, after the fake device was reset: the host records (devices, pools, segments,
 * blocks, the pointer map, the free ring) are freed, and the device is not called.
 */
#include <stdlib.h>

#include <string.h>

#include "alloc/alloc_lock.h"
#include "alloc/pinned_cache.h"
#include "alloc/replay.h"
#include "alloc/reset.h"
#include "alloc/sleep.h"
#include "core/host.h"

static void free_pool_memory_records(recap__pool_t *pool) {
  for (recap__segment_t *seg = pool->segments, *next; seg; seg = next) {
    next = seg->next;
    for (recap__block_t *b = seg->head, *bn; b; b = bn) {
      bn = b->next;
      recap__host_free(b->stream_uses);
      recap__host_free(b);
    }
    recap__host_free(seg->chunks);
    recap__host_free(seg->asleep_runs);
    recap__host_free(seg);
  }
  recap__free_set_clear(&pool->small_free);
  recap__free_set_clear(&pool->large_free);
  /* An asleep pool's host record of its copy; the pinned buffer went with the fake. */
  recap__host_free(pool->offload);
  pool->offload = NULL;
}

void recap__alloc_reset(void) {
  recap__alloc_lock();
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    free_pool_memory_records(&d->default_pool);
    for (recap__pool_t *p = d->private_pools, *next; p; p = next) {
      next = p->next;
      free_pool_memory_records(p);
      recap__host_free(p);
    }
    for (int r = 0; r < d->route_count; r++) recap__route_logs_delete(d->routes[r].logs);
    recap__host_free(d->routes);
    recap__host_free(d->pending);
    recap__host_free(d->deferred);
    recap__host_free(d->spare_events);
    /* The address ranges whose release failed went with the fake too. */
    recap__host_free(d->stuck_ranges);
    recap__host_free(d);
    recap__alloc.devices[i] = NULL;
  }
  /* The cached block's record went with its segment, and so did the device state folded pairs
   * are owed to: the whole cache starts over (an armed cache would count them into the next
   * device state made); the switch stays as it was. */
  bool off = recap__alloc.front.off;
  memset(&recap__alloc.front, 0, sizeof recap__alloc.front);
  recap__alloc.front.off = off;
  recap__ptr_map_clear(&recap__alloc.allocated);
  for (recap__block_t *b = recap__alloc.spare_blocks, *next; b; b = next) {
    next = b->next;
    recap__host_free(b);
  }
  recap__alloc.spare_blocks = NULL;
  recap__host_free(recap__alloc.freed);
  recap__alloc.freed = NULL;
  recap__alloc.freed_next = 0;
  atomic_store(&recap__alloc_sleeping, 0);
  /* The kept pinned buffers went with the fake too. */
  recap__pinned_reset();
  recap__alloc_unlock();
}
