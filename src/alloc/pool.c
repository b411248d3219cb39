/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.c — pool ids, routing a capture's allocations to a private pool (allocation logs, a
 * budget and the capture's peak attached to a route included), and the references graphs hold
 * on private pools.
 *
 * A private pool is made by the first capture routed to it. It keeps its segments while a graph
 * references it or a capture routes to it; after that its free segments go back to the driver
 * on recap_empty_cache or an out-of-memory retry (cache_release.c), and a pool left with no
 * reference, route or segment is deleted. A graph reserves its route before its capture begins
 * (pending, with no capture id yet) and names the capture once CUDA gives the id, so that the
 * allocator holds event work back from the first moment the stream may capture. Every function
 * here takes the allocator's one lock itself; the malloc/free core (allocator.c and the files
 * below it) never calls into this file.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "alloc/accounting.h"
#include "alloc/alloc_lock.h"
#include "alloc/allocator.h"
#include "alloc/blocks.h"
#include "alloc/cache_release.h"
#include "alloc/events.h"
#include "alloc/pool.h"
#include "alloc/replay.h"
#include "alloc/segment_source.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/host.h"
#include "core/options.h"
#include "recap/sleep.h"

static _Atomic uint64_t next_handle_id = 1; /* recap_pool_handle(): {0, n} */
static _Atomic uint64_t next_graph_id = 1;  /* pools graphs make for themselves: {n, 0} */

/* ------------------------------------------------------------------------------------------
 * Pool ids
 * ---------------------------------------------------------------------------------------- */

int recap_pool_is_default(recap_pool_id_t pool) { return pool.a == 0 && pool.b == 0; }

recap_pool_id_t recap_pool_handle(void) {
  recap_pool_id_t id = {0, atomic_fetch_add(&next_handle_id, 1)};
  return id;
}

recap_pool_id_t recap__pool_id_for_graph(void) {
  recap_pool_id_t id = {atomic_fetch_add(&next_graph_id, 1), 0};
  return id;
}

/* ------------------------------------------------------------------------------------------
 * Routing and references
 * ---------------------------------------------------------------------------------------- */

static recap__pool_t *find_private_pool(recap__device_state_t *d, recap_pool_id_t id) {
  for (recap__pool_t *p = d->private_pools; p; p = p->next)
    if (recap__pool_id_equal(p->id, id)) return p;
  return NULL;
}

/* The route of capture_id on d, or -1 (lock held). Pending routes have no capture yet. */
static int find_route_of_capture(const recap__device_state_t *d, uint64_t capture_id) {
  for (int i = 0; i < d->route_count; i++)
    if (!d->routes[i].pending && d->routes[i].capture_id == capture_id) return i;
  return -1;
}

static recap_status_t already_routed(uint64_t capture_id) {
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "capture %" PRIu64 " already routes its allocations to a pool", capture_id);
}

/* Route pool id to capture_id, or reserve a pending route for a capture about to begin; the
 * route takes logs (which may be NULL) on success, and leaves them to the caller otherwise. */
static recap_status_t route_add(int device, recap_pool_id_t id, uint64_t capture_id, bool pending,
                                recap__route_logs_t *logs) {
  if (recap_pool_is_default(id))
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "routing a capture to the default pool {0,0} is not possible: use "
                        "recap_pool_handle() or let the graph make its own pool");
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  recap__device_state_t *d = recap__alloc_device_state(device);
  recap__pool_t *pool = d ? find_private_pool(d, id) : NULL;
  bool created = false;
  if (!d) {
    s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "out of host memory");
    goto out;
  }
  if (pool && pool->routed) {
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "pool {%" PRIu64 ",%" PRIu64
                     "} is already routed to another capture under "
                     "way; captures that run at the same time need pools of their own",
                     id.a, id.b);
    goto out;
  }
  if (pool && pool->state != RECAP_POOL_AWAKE) {
    s = recap__pool_asleep_error(pending ? "recap_graph_capture_begin" : "recap_pool_route_begin",
                                 pool);
    goto out;
  }
  if (!pending && find_route_of_capture(d, capture_id) >= 0) {
    s = already_routed(capture_id);
    goto out;
  }
  if (!pool) {
    pool = recap__host_calloc(1, sizeof *pool);
    if (!pool) {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "out of host memory");
      goto out;
    }
    pool->id = id;
    created = true;
  }
  if (d->route_count == d->route_capacity) {
    int capacity = d->route_capacity ? d->route_capacity * 2 : 4;
    recap__route_t *routes = recap__host_realloc(d->routes, (size_t)capacity * sizeof *routes);
    if (!routes) {
      if (created) recap__host_free(pool);
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "out of host memory");
      goto out;
    }
    d->routes = routes;
    d->route_capacity = capacity;
  }
  if (created) {
    pool->next = d->private_pools;
    d->private_pools = pool;
  }
  pool->references++;
  pool->routed = true;
  /* The capture's accounting starts over: its peak from what the pool holds now, no budget
   * until the graph sets one, no refusal. */
  pool->capture_peak = pool->allocated_bytes;
  pool->capture_reserved_start = pool->reserved_bytes;
  pool->budget = 0;
  pool->budget_refusals = 0;
  pool->budget_attempted = false;
  d->routes[d->route_count].pool = pool;
  d->routes[d->route_count].capture_id = capture_id;
  d->routes[d->route_count].pending = pending;
  d->routes[d->route_count].logs = logs;
  d->routes[d->route_count].stream = NULL;
  d->routes[d->route_count].thread = NULL;
  d->route_count++;
out:
  recap__alloc_unlock();
  return s;
}

recap_status_t recap__pool_route_begin(int device, recap_pool_id_t id, uint64_t capture_id) {
  return route_add(device, id, capture_id, false, NULL);
}

recap_status_t recap__pool_route_reserve(int device, recap_pool_id_t id) {
  return route_add(device, id, 0, true, NULL);
}

/* The route's state for logs record and replay (both NULL: *logs NULL, nothing to attach),
 * made before the lock: sorting the replay log is the only costly part. */
static recap_status_t new_logs(int device, const char *function, recap__alloc_log_t *record,
                               const recap__alloc_log_t *replay, recap__route_logs_t **logs) {
  *logs = NULL;
  if (device < 0 || device >= RECAP__MAX_DEVICES)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: device %d is not one recap handles (0 to %d)", function, device,
                        RECAP__MAX_DEVICES - 1);
  if (record && record == replay)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: record and replay are the same log; record the capture into a new "
                        "log and replay the previous capture's",
                        function);
  if (!record && !replay) return RECAP_SUCCESS;
  *logs = recap__route_logs_new(record, replay);
  if (!*logs)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "%s: out of host memory for the route's state of a replay log of %zu "
                        "entries; nothing was attached",
                        function, replay ? replay->count : 0);
  return RECAP_SUCCESS;
}

recap_status_t recap__pool_route_reserve_logged(int device, recap_pool_id_t id,
                                                recap__alloc_log_t *record,
                                                const recap__alloc_log_t *replay) {
  recap__route_logs_t *logs;
  RECAP__CHECK(new_logs(device, "recap__pool_route_reserve_logged", record, replay, &logs));
  recap_status_t s = route_add(device, id, 0, true, logs);
  if (s != RECAP_SUCCESS) recap__route_logs_delete(logs);
  return s;
}

/* The index of pool id's route on d, or -1 (lock held). */
static int find_route_of_pool(const recap__device_state_t *d, recap_pool_id_t id) {
  for (int i = 0; d && i < d->route_count; i++)
    if (recap__pool_id_equal(d->routes[i].pool->id, id)) return i;
  return -1;
}

static recap_status_t not_routed(int device, recap_pool_id_t id) {
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "pool {%" PRIu64 ",%" PRIu64 "} is not routed to a capture on device %d",
                      id.a, id.b, device);
}

/* The index of pool id's route on device, with *d the device's state, or -1 with *s the error
 * that says the pool is not routed (lock held). */
static int route_of_pool_or_error(int device, recap_pool_id_t id, recap__device_state_t **d,
                                  recap_status_t *s) {
  *d = recap__alloc.devices[device];
  int found = find_route_of_pool(*d, id);
  if (found < 0) *s = not_routed(device, id);
  return found;
}

/* The route's stream, known to capture under its capture id (recap__route_t). A stream
 * captures into one capture at a time: another route that named it from this thread (its
 * capture ended behind recap's back, say by cudaStreamEndCapture) forgets it, and asks the
 * device again. */
static void name_stream(recap__device_state_t *d, recap__route_t *route, recap_stream_t stream) {
  const void *thread = stream ? recap__alloc_thread_mark() : NULL;
  for (int i = 0; stream && i < d->route_count; i++)
    if (d->routes[i].stream == stream && d->routes[i].thread == thread) {
      d->routes[i].stream = NULL;
      d->routes[i].thread = NULL;
    }
  route->stream = stream;
  route->thread = thread;
}

recap_status_t recap__pool_route_set_capture(int device, recap_pool_id_t id, uint64_t capture_id,
                                             recap_stream_t stream) {
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  recap__device_state_t *d;
  int found = route_of_pool_or_error(device, id, &d, &s);
  if (found < 0) goto out;
  if (!d->routes[found].pending) {
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "pool {%" PRIu64 ",%" PRIu64 "} routes capture %" PRIu64 " already", id.a,
                     id.b, d->routes[found].capture_id);
  } else if (find_route_of_capture(d, capture_id) >= 0) {
    s = already_routed(capture_id);
  } else {
    d->routes[found].capture_id = capture_id;
    d->routes[found].pending = false;
    name_stream(d, &d->routes[found], stream);
  }
out:
  recap__alloc_unlock();
  return s;
}

recap_status_t recap__pool_route_move(int device, recap_pool_id_t id, uint64_t capture_id,
                                      recap_stream_t stream) {
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  recap__device_state_t *d;
  int found = route_of_pool_or_error(device, id, &d, &s);
  if (found < 0) goto out;
  int other = find_route_of_capture(d, capture_id);
  if (d->routes[found].pending)
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "pool {%" PRIu64 ",%" PRIu64 "} routes no capture yet (its route is pending)",
                     id.a, id.b);
  else if (other >= 0 && other != found)
    s = already_routed(capture_id);
  else {
    d->routes[found].capture_id = capture_id;
    name_stream(d, &d->routes[found], stream);
  }
out:
  recap__alloc_unlock();
  return s;
}

void recap__pool_route_forget_stream(int device, recap_pool_id_t id) {
  recap__alloc_lock();
  recap__device_state_t *d = recap__alloc.devices[device];
  int found = find_route_of_pool(d, id);
  if (found >= 0) name_stream(d, &d->routes[found], NULL);
  recap__alloc_unlock();
}

/* What the capture routed to pool did (lock held). */
static void capture_result(const recap__pool_t *pool, recap__capture_result_t *result) {
  result->peak = pool->capture_peak;
  result->grew = pool->reserved_bytes - pool->capture_reserved_start;
  result->refusals = pool->budget_refusals;
  result->first = pool->budget_first;
}

recap_status_t recap__pool_route_end(int device, recap_pool_id_t id) {
  return recap__pool_route_end_result(device, id, NULL);
}

recap_status_t recap__pool_route_end_result(int device, recap_pool_id_t id,
                                            recap__capture_result_t *result) {
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  recap__device_state_t *d;
  int found = route_of_pool_or_error(device, id, &d, &s);
  if (found < 0) goto out;
  recap__pool_t *pool = d->routes[found].pool;
  if (result) capture_result(pool, result);
  pool->routed = false;
  pool->budget = 0;
  if (pool->capture_peak > pool->capture_peak_max) pool->capture_peak_max = pool->capture_peak;
  recap__route_logs_delete(d->routes[found].logs); /* the logs themselves are the caller's */
  d->routes[found] = d->routes[--d->route_count];
  /* Once no capture is under way, blocks freed during captures that other streams used get
   * their events, and blocks whose events completed come back: with captures back to back, no
   * recap_malloc may ever run outside one to collect them.
   * A failure there is handled (the allocator waits for the stream instead) and logged; it must
   * not become the last error of a call that ends a capture for another reason. */
  if (d->deferred_count || d->pending_count) {
    recap__saved_error_t saved;
    recap__error_save(&saved);
    recap__alloc_collect_events(d);
    recap__error_restore(&saved);
  }
out:
  recap__alloc_unlock();
  return s;
}

/* The logs of a recapture (replay.c keeps their state; the route holds it). */
recap_status_t recap__pool_route_set_logs(int device, recap_pool_id_t pool,
                                          recap__alloc_log_t *record,
                                          const recap__alloc_log_t *replay) {
  recap__route_logs_t *logs;
  RECAP__CHECK(new_logs(device, "recap__pool_route_set_logs", record, replay, &logs));
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  recap__device_state_t *d;
  int found = route_of_pool_or_error(device, pool, &d, &s);
  if (found >= 0) {
    recap__route_logs_t *old = d->routes[found].logs;
    d->routes[found].logs = logs;
    logs = old;
  }
  recap__alloc_unlock();
  recap__route_logs_delete(logs); /* the replaced state, or the new one when not routed */
  return s;
}

recap_status_t recap__pool_route_replay_stats(int device, recap_pool_id_t pool, uint64_t *hits,
                                              uint64_t *misses) {
  if (device < 0 || device >= RECAP__MAX_DEVICES || !hits || !misses)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "recap__pool_route_replay_stats: device %d, hits %p, misses %p: a device "
                        "from 0 to %d and two counters are needed",
                        device, (void *)hits, (void *)misses, RECAP__MAX_DEVICES - 1);
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  recap__device_state_t *d;
  int found = route_of_pool_or_error(device, pool, &d, &s);
  if (found >= 0) {
    recap__route_logs_counts(d->routes[found].logs, hits, misses);
  }
  recap__alloc_unlock();
  return s;
}

recap_status_t recap__pool_route_set_budget(int device, recap_pool_id_t id, uint64_t budget) {
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__device_state_t *d;
  int found = route_of_pool_or_error(device, id, &d, &s);
  if (found >= 0) d->routes[found].pool->budget = budget;
  recap__alloc_unlock();
  return s;
}

recap_status_t recap__pool_capture_result(int device, recap_pool_id_t id,
                                          recap__capture_result_t *result) {
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__device_state_t *d;
  int found = route_of_pool_or_error(device, id, &d, &s);
  if (found >= 0) capture_result(d->routes[found].pool, result);
  recap__alloc_unlock();
  return s;
}

recap_status_t recap__pool_retain(int device, recap_pool_id_t id) {
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__device_state_t *d = recap__alloc.devices[device];
  recap__pool_t *pool = d ? find_private_pool(d, id) : NULL;
  if (!pool || pool->references == 0)
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "pool {%" PRIu64 ",%" PRIu64
                     "} is held by nobody on device %d, so no "
                     "further reference can be taken",
                     id.a, id.b, device);
  else
    pool->references++;
  recap__alloc_unlock();
  return s;
}

recap_status_t recap__pool_release(int device, recap_pool_id_t id) {
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  recap__device_state_t *d = recap__alloc.devices[device];
  recap__pool_t *pool = d ? find_private_pool(d, id) : NULL;
  if (!pool || pool->references == 0) {
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "pool {%" PRIu64 ",%" PRIu64 "} holds no reference to release on device %d",
                     id.a, id.b, device);
  } else {
    pool->references--;
    RECAP__ASSERT(pool->references >= 0);
    /* A pool nobody references and that holds no memory is gone at once. Otherwise its free
     * segments go back on the next recap_empty_cache() or out-of-memory retry. An asleep pool
     * stays until it wakes (sleep.c keeps its state there). */
    if (pool->references == 0 && pool->segment_count == 0 && !pool->routed &&
        pool->state == RECAP_POOL_AWAKE)
      recap__alloc_pool_delete(d, pool);
  }
  recap__alloc_unlock();
  return s;
}

static recap_status_t capture_id_of(recap_stream_t stream, uint64_t *id) {
  recap__capture_status_t status;
  RECAP__CHECK(recap__device()->stream_capture_info(stream, &status, id));
  if (status != RECAP__CAPTURE_ACTIVE)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_pool_route_begin: the stream is not capturing (%s); begin the "
                        "capture first",
                        status == RECAP__CAPTURE_NONE ? "no capture" : "capture invalidated");
  return RECAP_SUCCESS;
}

recap_status_t recap_pool_route_begin(recap_pool_id_t pool, recap_stream_t capturing_stream) {
  int device;
  uint64_t id;
  RECAP__CHECK(recap__alloc_current_device(&device));
  RECAP__CHECK(capture_id_of(capturing_stream, &id));
  return recap__pool_route_begin(device, pool, id);
}

recap_status_t recap_pool_route_end(recap_pool_id_t pool) {
  int device;
  RECAP__CHECK(recap__alloc_current_device(&device));
  return recap__pool_route_end(device, pool);
}

recap_status_t recap_pool_release(recap_pool_id_t pool) {
  int device;
  RECAP__CHECK(recap__alloc_current_device(&device));
  return recap__pool_release(device, pool);
}

/* ------------------------------------------------------------------------------------------
 * Segment sources (segment_source.c)
 * ---------------------------------------------------------------------------------------- */

/* Whether pool id holds a segment on some device (lock held). */
static bool holds_segments(recap_pool_id_t id) {
  for (int dev = 0; dev < RECAP__MAX_DEVICES; dev++) {
    const recap__device_state_t *d = recap__alloc.devices[dev];
    for (const recap__pool_t *p = d ? d->private_pools : NULL; p; p = p->next)
      if (recap__pool_id_equal(p->id, id) && p->segment_count > 0) return true;
  }
  return false;
}

recap_status_t recap__pool_set_source(recap_pool_id_t id, const recap__segment_source_t *source,
                                      const char *function) {
  recap__options_t o;
  RECAP__CHECK(recap__options_get(&o));
  if (o.expandable_segments)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the expandable_segments option is on, and its segments are virtual "
                        "memory, which cannot come from NCCL; turn the option off first",
                        function);
  recap__alloc_lock();
  recap__alloc_settle();
  recap_status_t s =
      holds_segments(id)
          ? recap__error(RECAP_ERROR_INVALID_USAGE,
                         "%s: pool {%" PRIu64 ",%" PRIu64
                         "} holds segments already; choose where its segments come from before "
                         "its first allocation (or after recap_empty_cache gave them all back)",
                         function, id.a, id.b)
          : recap__segment_source_put(id, source, function);
  recap__alloc_unlock();
  return s;
}
