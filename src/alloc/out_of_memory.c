/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * out_of_memory.c — what happens when the device (or the memory_cap option) says no to a
 * segment or a growth: free the cache and try once more, and, when that fails too, the message
 * that says where the device's memory is (allocated, cached, waiting for events or for captures).
 *
 * Apart from the segments it serves (segment_growth.c) because the retry and its report are one
 * rule for classic segments, VMM growths and the remapping of holes alike: each gives a
 * recap__memory_attempt_t, this file tries it.
 */
#include "alloc/out_of_memory.h"

#include <inttypes.h>
#include <stdio.h>

#include "alloc/cache_release.h"
#include "core/error.h"

/* OUT_OF_MEMORY when reserving `bytes` more would exceed the memory_cap option. */
recap_status_t recap__alloc_capped(const recap__device_state_t *d, const recap__options_t *o,
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

/* Device memory with the out-of-memory retry, for classic and VMM segments alike: when attempt
 * says OUT_OF_MEMORY (the device, or memory_cap), free every cached unused segment and give back
 * the chunks inside the VMM segments' free blocks (but keep's: the block the attempt maps into,
 * or NULL), and try once more; a second no becomes the out-of-memory report for a request of
 * `request` bytes, which names `what` ("a new segment") and its bytes. attempt looks at the pool
 * afresh each time: the release may have cut or deleted segments and blocks other than keep. */
recap_status_t recap__alloc_segment_memory(recap__device_state_t *d, size_t request,
                                           const char *what, recap__memory_attempt_t attempt,
                                           void *ctx, const recap__block_t *keep) {
  size_t bytes = 0;
  recap_status_t s = attempt(d, ctx, &bytes);
  if (s == RECAP_ERROR_OUT_OF_MEMORY) {
    d->stats.num_alloc_retries++;
    recap__alloc_release_cached(d, keep);
    s = attempt(d, ctx, &bytes);
  }
  if (s == RECAP_ERROR_OUT_OF_MEMORY) {
    d->stats.num_ooms++;
    return report_oom(d, request, what, bytes, recap_last_error());
  }
  return s;
}
