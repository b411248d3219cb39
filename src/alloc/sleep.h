/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep.h — what sleep.c (pools that sleep and wake, recap/sleep.h) gives the rest of the
 * library: the count of sleeping pools and the replay check the graph layer asks, the text of a
 * pool's state, and the pinned copy an OFFLOAD sleep keeps (sleep_offload.c).
 */
#ifndef RECAP_ALLOC_SLEEP_H
#define RECAP_ALLOC_SLEEP_H

#include <stdatomic.h>
#include <stddef.h>

#include "recap/alloc.h"
#include "recap/core.h"
#include "recap/sleep.h"

/* How many pools sleep, on every device: graph replays read it without the lock and ask
 * recap__pool_replay_check only when it is not 0, so an awake process pays one load. */
extern _Atomic int recap__alloc_sleeping;
/* Whether a graph holding pool on device may replay now: RECAP_SUCCESS, or
 * RECAP_ERROR_POOL_ASLEEP with a message naming the pool (or the device's default pool) that
 * sleeps. Takes the lock. */
recap_status_t recap__pool_replay_check(int device, recap_pool_id_t pool);
/* recap_pool_state_name's text of a pool's state (recap_pool_state_t values). */
static inline const char *recap__pool_state_text(int state) {
  switch (state) {
    case RECAP_POOL_AWAKE: return "awake";
    case RECAP_POOL_ASLEEP_DISCARDED: return "asleep (discarded)";
    case RECAP_POOL_ASLEEP_OFFLOADED: return "asleep (offloaded)";
    default: return "unknown";
  }
}
/* The pinned host copy of an asleep pool's blocks in use (RECAP_SLEEP_OFFLOAD): one host
 * record (recap__host_free frees it, runs included) and one pinned buffer holding the runs
 * back to back, in the order of runs[]. A run is a stretch of consecutive blocks in use
 * (allocated, or freed and waiting on events) of one segment. */
typedef struct recap__offload {
  void *host;        /* pinned (pinned_cache.c); NULL when bytes is 0 */
  size_t bytes;      /* the sum of the runs' sizes */
  size_t host_bytes; /* the buffer's size: bytes, or more for a kept buffer reused */
  size_t count;
  struct recap__offload_run {
    char *ptr; /* device address, inside a segment of the pool */
    size_t size;
  } runs[];
} recap__offload_t;

#endif /* RECAP_ALLOC_SLEEP_H */
