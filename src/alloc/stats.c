/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.c — the public statistics queries: recap_memory_stats and recap_memory_reset_peak.
 *
 * The counters themselves are updated by the malloc/free core (allocator.c and the files below it:
 * blocks.c, events.c, segment_growth.c, cache_release.c), under the allocator's lock; these
 * functions copy or reset them under the same lock.
 */
#include <stddef.h>
#include <string.h>

#include "alloc/alloc_lock.h"
#include "alloc/allocator.h"
#include "core/args.h"
#include "core/error.h"

static recap_status_t resolve_device(int *device) {
  if (*device == -1) return recap__alloc_current_device(device);
  RECAP__ARG(*device >= 0 && *device < RECAP__MAX_DEVICES, "device %d is out of range", *device);
  return RECAP_SUCCESS;
}

recap_status_t recap_memory_stats(int device, recap_memory_stats_t *stats) {
  RECAP__ARG(stats != NULL, "recap_memory_stats: stats is NULL");
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(stats, recap_memory_stats_t, num_device_free,
                                        "recap_memory_stats", "stats->size",
                                        "RECAP_MEMORY_STATS_INIT"));
  RECAP__CHECK(resolve_device(&device));
  size_t size = stats->size;
  recap_memory_stats_t out;
  recap__alloc_lock();
  recap__device_state_t *d = recap__alloc.devices[device];
  if (d)
    out = d->stats;
  else
    memset(&out, 0, sizeof out);
  recap__alloc_unlock();
  out.size = size;
  memcpy(stats, &out, size);
  return RECAP_SUCCESS;
}

recap_status_t recap_memory_reset_peak(int device) {
  RECAP__CHECK(resolve_device(&device));
  recap__alloc_lock();
  recap__device_state_t *d = recap__alloc.devices[device];
  if (d) {
    recap_stat_t *stat = d->stats.allocation; /* the counter arrays follow one another */
    size_t counters = (offsetof(recap_memory_stats_t, num_alloc_retries) -
                       offsetof(recap_memory_stats_t, allocation)) /
                      sizeof(recap_stat_t);
    for (size_t i = 0; i < counters; i++) stat[i].peak = stat[i].current;
  }
  recap__alloc_unlock();
  return RECAP_SUCCESS;
}
