/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * events.c — a freed block used by other streams waits for events recorded on them, and a block
 * freed during a capture waits for the capture to end before its events are recorded
 * (recap_record_stream says which streams used a block).
 *
 * Apart because event work has rules of its own, all about captures: CUDA's global capture mode
 * forbids event calls while any capture is under way, so events are recorded and collected only
 * when none is (recap__alloc_process_events), and the out-of-memory retry during a capture waits
 * only for what is outside it (wait_outside_captures). The malloc/free path (allocator.c), the
 * release of cached memory (cache_release.c) and the end of a route (pool.c) call it; it calls only
 * the merges of blocks.c.
 */
#include "alloc/events.h"

#include "alloc/alloc_lock.h"
#include "alloc/blocks.h"
#include "core/error.h"
#include "core/host.h"

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

/* Whether a capture is routed on any device. CUDA's global capture mode forbids cudaMalloc,
 * cudaFree and event queries in every thread whatever the device, so a capture on device 0
 * constrains what recap may do for device 1 too. Off the hot path: only the slow paths ask. */
bool recap__alloc_capture_under_way(int *device) {
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
void recap__alloc_insert_events(recap__device_state_t *d, recap__block_t *b) {
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
  if (--p.block->event_count == 0) recap__block_free(d, p.block);
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
void recap__alloc_process_events(recap__device_state_t *d, bool wait) {
  if (recap__alloc_capture_under_way(NULL)) {
    if (wait) wait_outside_captures(d);
    return;
  }
  /* Blocks freed during a capture get their events now. */
  for (size_t i = 0; i < d->deferred_count; i++) {
    recap__block_t *b = d->deferred[i];
    b->deferred = false;
    recap__alloc_insert_events(d, b);
    if (b->event_count == 0) recap__block_free(d, b);
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
  if (d->pending_count || d->deferred_count) recap__alloc_process_events(d, false);
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
