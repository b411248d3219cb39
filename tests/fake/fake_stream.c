/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_stream.c — the CPU fake device's streams and events. A stream is a pair of counters,
 * work items enqueued and completed, that the test moves by hand; an event remembers the stream
 * and the item its record enqueued, and is done once that item completed; a stream wait is a
 * marker item whose completion completes the work it waits for on another stream. Also the copies,
 * capture queries and capture mode of a stream, device-wide synchronisation, and the test
 * controls that launch work on a stream.
 */
#include <stdlib.h>
#include <string.h>

#include "fake/fake_state.h"

/* ---- handles ---------------------------------------------------------------------------- */

fake_stream_t *recap__fake_stream_of(recap_stream_t handle) {
  if (!handle) return &recap__fake.legacy;
  for (fake_stream_t *s = recap__fake.streams; s; s = s->next)
    if ((recap_stream_t)s == handle) return s;
  return NULL;
}

/* Event handles come from recap's own code, so a magic word suffices to catch a mix-up; a
 * destroyed event read here is a use after free that the sanitizers report. */
static bool event_valid(recap__event_t e) { return e && e->magic == FAKE_EVENT_MAGIC; }

/* The fake's answers to a handle it does not know, worded as CUDA's errors. */
recap_status_t recap__fake_note_bad_stream(fake_failure_t *f, const char *call,
                                           recap_stream_t stream) {
  return recap__fake_note(
      f, RECAP_ERROR_CUDA,
      "%s: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not a fake "
      "stream",
      call, (void *)stream);
}

static recap_status_t note_bad_event(fake_failure_t *f, const char *call, recap__event_t event) {
  return recap__fake_note(
      f, RECAP_ERROR_CUDA,
      "%s: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not a live "
      "fake event",
      call, (void *)event);
}

/* ---- progress and waits between streams ------------------------------------------------- */

void recap__fake_stream_waits_free(fake_stream_t *s) {
  free(s->waits);
  s->waits = NULL;
  s->wait_head = s->wait_count = s->wait_cap = 0;
}

/* The streams in turn: the legacy one, then the list. */
static fake_stream_t *stream_after(fake_stream_t *t) {
  return t == &recap__fake.legacy ? recap__fake.streams : t->next;
}

/* Complete, on every stream, the waits whose marker completed, until nothing moves. A loop
 * over the streams rather than a recursion, so that a long chain of waits (s1 waits for s2,
 * which waits for s3, ...) costs passes, not stack. It ends: completed only grows, and never
 * past what a stream enqueued. */
static void complete_waits(void) {
  bool moved = true;
  while (moved) {
    moved = false;
    for (fake_stream_t *t = &recap__fake.legacy; t; t = stream_after(t)) {
      while (t->wait_head < t->wait_count && t->waits[t->wait_head].at <= t->completed) {
        fake_wait_t w = t->waits[t->wait_head++];
        if (w.on->completed < w.item) {
          w.on->completed = w.item;
          moved = true;
        }
      }
      if (t->wait_head == t->wait_count) t->wait_head = t->wait_count = 0;
    }
  }
}

void recap__fake_stream_advance(fake_stream_t *s, uint64_t item) {
  if (s->completed >= item) return;
  s->completed = item;
  complete_waits();
}

/* Append a wait to s's list; false when out of host memory (s unchanged). */
static bool wait_push(fake_stream_t *s, fake_wait_t w) {
  if (s->wait_count == s->wait_cap && s->wait_head > 0) {
    memmove(s->waits, s->waits + s->wait_head, (s->wait_count - s->wait_head) * sizeof *s->waits);
    s->wait_count -= s->wait_head;
    s->wait_head = 0;
  }
  if (s->wait_count == s->wait_cap) {
    size_t cap = s->wait_cap ? 2 * s->wait_cap : 4;
    fake_wait_t *v = realloc(s->waits, cap * sizeof *v);
    if (!v) return false;
    s->waits = v;
    s->wait_cap = cap;
  }
  s->waits[s->wait_count++] = w;
  return true;
}

/* s is going away with all its work completed: drop the other streams' waits for it, which
 * that work satisfied. */
static void waits_drop_on(const fake_stream_t *s) {
  for (fake_stream_t *t = &recap__fake.legacy; t; t = stream_after(t)) {
    size_t kept = t->wait_head;
    for (size_t i = t->wait_head; i < t->wait_count; i++)
      if (t->waits[i].on != s) t->waits[kept++] = t->waits[i];
    t->wait_count = kept;
  }
}

/* ---- events ----------------------------------------------------------------------------- */

/* event_create and timing_event_create: the same event, counted as different calls. */
static recap_status_t event_create(recap__event_t *event, recap__fake_fault_t kind,
                                   const char *what, bool timing) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(kind);
  if (event) *event = NULL;
  if (inject) {
    recap__fake_note_injected(&f, "cudaEventCreateWithFlags", kind, what);
  } else if (!event) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventCreateWithFlags: event is NULL");
  } else {
    struct recap__event *e = calloc(1, sizeof *e);
    if (!e) {
      recap__fake_note(
          &f, RECAP_ERROR_CUDA,
          "cudaEventCreateWithFlags: out of memory (cudaErrorMemoryAllocation): no host memory "
          "for a fake event");
    } else {
      e->magic = FAKE_EVENT_MAGIC;
      e->timing = timing;
      e->next = recap__fake.events;
      if (recap__fake.events) recap__fake.events->prev = e;
      recap__fake.events = e;
      recap__fake.live_events++;
      *event = e;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_event_create(recap__event_t *event) {
  return event_create(event, RECAP__FAKE_FAULT_EVENT_CREATE, "event creation", false);
}

recap_status_t recap__fake_op_timing_event_create(recap__event_t *event) {
  return event_create(event, RECAP__FAKE_FAULT_TIMING, "timing event creation", true);
}

/* The timing model (fake.h): the difference of the clocks the two records saw. */
recap_status_t recap__fake_op_event_elapsed(recap__event_t start, recap__event_t end, float *ms) {
  RECAP__ARG(ms, "cudaEventElapsedTime: ms is NULL");
  *ms = 0.0f;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  recap__event_t both[2] = {start, end};
  for (int i = 0; i < 2 && f.status == RECAP_SUCCESS; i++) {
    recap__event_t e = both[i];
    const char *which = i == 0 ? "start" : "end";
    if (!e) {
      recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventElapsedTime: %s is NULL", which);
    } else if (!event_valid(e)) {
      note_bad_event(&f, "cudaEventElapsedTime", e);
    } else if (!e->timing) {
      recap__fake_note(
          &f, RECAP_ERROR_CUDA,
          "cudaEventElapsedTime: invalid resource handle (cudaErrorInvalidResourceHandle): the "
          "%s event %p was created without timing; make it with timing_event_create",
          which, (void *)e);
    } else if (e->item == 0) {
      recap__fake_note(
          &f, RECAP_ERROR_CUDA,
          "cudaEventElapsedTime: invalid resource handle (cudaErrorInvalidResourceHandle): the "
          "%s event %p was never recorded",
          which, (void *)e);
    } else if (e->stream && e->stream->completed < e->item) {
      recap__fake_note(
          &f, RECAP_ERROR_CUDA,
          "cudaEventElapsedTime: device not ready (cudaErrorNotReady): the work before the %s "
          "event %p has not completed; synchronize the event first",
          which, (void *)e);
    }
  }
  if (f.status == RECAP_SUCCESS) *ms = (float)((end->clock_us - start->clock_us) / 1000.0);
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_event_destroy(recap__event_t event) {
  fake_failure_t f = {0};
  if (!event)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "cudaEventDestroy: the event is NULL");
  pthread_mutex_lock(&recap__fake.lock);
  if (!event_valid(event)) {
    note_bad_event(&f, "cudaEventDestroy", event);
  } else {
    if (event->prev)
      event->prev->next = event->next;
    else
      recap__fake.events = event->next;
    if (event->next) event->next->prev = event->prev;
    event->magic = FAKE_EVENT_DEAD;
    free(event);
    recap__fake.live_events--;
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_event_record(recap__event_t event, recap_stream_t stream) {
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_EVENT_RECORD, "cudaEventRecord", "event record");
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (!event) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventRecord: the event is NULL");
  } else if (!event_valid(event)) {
    note_bad_event(&f, "cudaEventRecord", event);
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaEventRecord", stream);
  } else if (s->capture) {
    /* CUDA would turn the record into a graph node; an allocator must never rely on that. */
    recap__fake_note_capturing_stream(&f, "cudaEventRecord", s, false);
  } else {
    s->enqueued++; /* a record is a marker: the timing model's clock does not move */
    event->stream = s;
    event->item = s->enqueued;
    event->clock_us = s->clock_us;
  }
  return recap__fake_unlock_and_report(&f);
}

/* Checks shared by query and synchronize; RECAP_SUCCESS when the event may be waited on. */
static recap_status_t check_event_wait(fake_failure_t *f, recap__event_t event, const char *call) {
  if (!event)
    return recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT, "%s: the event is NULL", call);
  if (!event_valid(event)) return note_bad_event(f, call, event);
  if (event->stream && event->stream->capture) {
    /* Waiting on work of a capturing stream is illegal and invalidates its capture. */
    event->stream->capture->invalidated = true;
    return recap__fake_note_capturing_stream(f, call, event->stream, true);
  }
  return RECAP_SUCCESS;
}

recap_status_t recap__fake_op_event_query(recap__event_t event, bool *done) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  if (!done) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventQuery: done is NULL");
  } else if (check_event_wait(&f, event, "cudaEventQuery") == RECAP_SUCCESS) {
    /* An event never recorded (or whose stream is gone, its work finished) is done. */
    *done = !event->stream || event->stream->completed >= event->item;
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_event_synchronize(recap__event_t event) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  if (check_event_wait(&f, event, "cudaEventSynchronize") == RECAP_SUCCESS && event->stream)
    recap__fake_stream_advance(event->stream, event->item);
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_stream_wait_event(recap_stream_t stream, recap__event_t event) {
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_STREAM_WAIT_EVENT, "cudaStreamWaitEvent",
                       "stream wait");
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (!event) {
    /* CUDA answers a NULL event as it answers a destroyed one. */
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaStreamWaitEvent: invalid resource handle "
                     "(cudaErrorInvalidResourceHandle): the event is NULL");
  } else if (!event_valid(event)) {
    note_bad_event(&f, "cudaStreamWaitEvent", event);
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamWaitEvent", stream);
  } else if (s->capture) {
    /* Records on capturing streams are refused, so an event ever recorded was recorded outside
     * the capture: CUDA refuses to make the capture depend on uncaptured work. A never-recorded
     * event waits for nothing, and adds nothing to the capture. */
    if (event->item != 0) {
      s->capture->invalidated = true;
      recap__fake_note(
          &f, RECAP_ERROR_CAPTURE_INVALIDATED,
          "cudaStreamWaitEvent: dependency created on uncaptured work in another stream "
          "(cudaErrorStreamCaptureIsolation): event %p was recorded outside capture %llu, in "
          "which stream %p takes part; the capture is now invalidated",
          (void *)event, (unsigned long long)s->capture->id, (void *)stream);
    }
  } else {
    /* A marker item (the timing model's clock does not move). It depends on nothing when the
     * event was never recorded, its stream is gone (its work finished), it is s itself (its
     * work comes before the marker), or its work completed already. */
    fake_stream_t *t = event->stream;
    bool depends = t && t != s && t->completed < event->item;
    if (depends && !wait_push(s, (fake_wait_t){s->enqueued + 1, t, event->item}))
      recap__fake_note(&f, RECAP_ERROR_CUDA,
                       "cudaStreamWaitEvent: out of memory (cudaErrorMemoryAllocation): no host "
                       "memory for a wait of fake stream %p",
                       (void *)stream);
    else
      s->enqueued++;
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- streams ---------------------------------------------------------------------------- */

static fake_stream_t *stream_new_locked(void) {
  fake_stream_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->device = recap__fake_tl_device;
  s->next = recap__fake.streams;
  recap__fake.streams = s;
  return s;
}

recap_status_t recap__fake_op_stream_create(recap_stream_t *stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_STREAM_CREATE);
  if (stream) *stream = NULL;
  if (inject) {
    recap__fake_note_injected(&f, "cudaStreamCreateWithFlags", RECAP__FAKE_FAULT_STREAM_CREATE,
                              "stream creation");
  } else if (!stream) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaStreamCreateWithFlags: stream is NULL");
  } else {
    fake_stream_t *s = stream_new_locked();
    if (!s)
      recap__fake_note(
          &f, RECAP_ERROR_CUDA,
          "cudaStreamCreateWithFlags: out of memory (cudaErrorMemoryAllocation): no host memory "
          "for a fake stream");
    else
      *stream = (recap_stream_t)s;
  }
  return recap__fake_unlock_and_report(&f);
}

/* Whether the work of s (found for the handle stream) may be finished by call: not when s is no
 * stream, nor while it captures (the call invalidates that capture). The refusal is noted in
 * f. Lock held. */
static bool stream_may_finish(fake_failure_t *f, const char *call, recap_stream_t stream,
                              fake_stream_t *s) {
  if (!s) {
    recap__fake_note_bad_stream(f, call, stream);
    return false;
  }
  if (s->capture) {
    s->capture->invalidated = true;
    recap__fake_note_capturing_stream(f, call, s, true);
    return false;
  }
  return true;
}

recap_status_t recap__fake_op_stream_destroy(recap_stream_t stream) {
  fake_failure_t f = {0};
  if (!stream)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "cudaStreamDestroy: the legacy default stream cannot be destroyed");
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t **link = &recap__fake.streams;
  while (*link && (recap_stream_t)*link != stream) link = &(*link)->next;
  fake_stream_t *s = *link;
  if (stream_may_finish(&f, "cudaStreamDestroy", stream, s)) {
    /* CUDA finishes the work of a destroyed stream, so events recorded on it become done, the
     * work its markers waited for completes, and other streams' waits for it are satisfied. */
    recap__fake_stream_advance(s, s->enqueued);
    waits_drop_on(s);
    for (struct recap__event *e = recap__fake.events; e; e = e->next)
      if (e->stream == s) e->stream = NULL;
    *link = s->next;
    recap__fake_stream_waits_free(s);
    free(s);
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_stream_synchronize(recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (stream_may_finish(&f, "cudaStreamSynchronize", stream, s))
    recap__fake_stream_advance(s, s->enqueued);
  return recap__fake_unlock_and_report(&f);
}

/* Eagerly the copy happens at once (the fake's device memory is host memory); in a capture it
 * becomes a memcpy node, which copies at every replay of an executable made from the graph. */
recap_status_t recap__fake_op_memcpy_async(void *dst, const void *src, size_t bytes,
                                           recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (!s) {
    recap__fake_note_bad_stream(&f, "cudaMemcpyAsync", stream);
  } else if ((!dst || !src) && bytes) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaMemcpyAsync: invalid argument (cudaErrorInvalidValue)");
  } else if (s->capture) {
    if (!recap__fake_capture_append(s, RECAP_NODE_MEMCPY, NULL))
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                       "cudaMemcpyAsync: out of host memory in the fake");
    else if (!s->capture->invalidated) {
      fake_node_t *node = &s->capture->graph->nodes.v[s->tail - 1];
      node->src = src;
      node->dst = dst;
      node->bytes = bytes;
    }
  } else {
    if (bytes) memmove(dst, src, bytes);
    recap__fake.eager_copies++;
    recap__fake_work(s, 1);
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_stream_capture_info(recap_stream_t stream,
                                                  recap__capture_status_t *status,
                                                  uint64_t *capture_id) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.capture_queries++;
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (!status) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaStreamGetCaptureInfo: status is NULL");
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamGetCaptureInfo", stream);
  } else if (!s->capture) {
    *status = RECAP__CAPTURE_NONE;
    if (capture_id) *capture_id = 0;
  } else {
    *status = s->capture->invalidated ? RECAP__CAPTURE_INVALIDATED : RECAP__CAPTURE_ACTIVE;
    if (capture_id) *capture_id = s->capture->id;
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_exchange_capture_mode(recap__capture_mode_t *mode) {
  RECAP__ARG(mode, "cudaThreadExchangeStreamCaptureMode: mode is NULL");
  RECAP__ARG(*mode == RECAP__CAPTURE_MODE_GLOBAL || *mode == RECAP__CAPTURE_MODE_THREAD_LOCAL ||
                 *mode == RECAP__CAPTURE_MODE_RELAXED,
             "cudaThreadExchangeStreamCaptureMode: invalid argument (cudaErrorInvalidValue): "
             "mode %d is not a capture mode",
             (int)*mode);
  recap__capture_mode_t old = recap__fake_tl_capture_mode;
  recap__fake_tl_capture_mode = *mode;
  *mode = old;
  return RECAP_SUCCESS;
}

/* ---- the whole device ------------------------------------------------------------------- */

recap_status_t recap__fake_op_device_synchronize(void) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  if (!recap__fake_refuse_forbidden(&f, "cudaDeviceSynchronize")) {
    recap__fake_stream_advance(&recap__fake.legacy, recap__fake.legacy.enqueued);
    for (fake_stream_t *s = recap__fake.streams; s; s = s->next)
      recap__fake_stream_advance(s, s->enqueued);
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_stream_blocking(recap_stream_t stream, bool *blocking) {
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_STREAM_BLOCKING, "cudaStreamGetFlags",
                       "stream flags query");
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (!blocking)
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaStreamGetFlags: flags is NULL");
  else if (!s)
    recap__fake_note_bad_stream(&f, "cudaStreamGetFlags", stream);
  else
    *blocking = s == &recap__fake.legacy || s->blocking;
  return recap__fake_unlock_and_report(&f);
}

/* ---- test controls: streams and the work launched on them ------------------------------- */

static recap_stream_t stream_new(bool blocking) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = stream_new_locked();
  if (s) s->blocking = blocking;
  pthread_mutex_unlock(&recap__fake.lock);
  if (!s) abort(); /* a test control: no host memory for a few bytes leaves nothing to test */
  return (recap_stream_t)s;
}

recap_stream_t recap__fake_stream_new(void) { return stream_new(false); }

recap_stream_t recap__fake_stream_new_blocking(void) { return stream_new(true); }

/* Work on the legacy stream waits for every blocking stream, which CUDA cannot record in a
 * capture: each capture a blocking stream takes part in is invalidated. */
static void legacy_work_invalidates_locked(void) {
  for (fake_stream_t *t = recap__fake.streams; t; t = t->next)
    if (t->blocking && t->capture) t->capture->invalidated = true;
}

void recap__fake_stream_complete(recap_stream_t stream) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (s) recap__fake_stream_advance(s, s->enqueued);
  pthread_mutex_unlock(&recap__fake.lock);
}

void recap__fake_launch_kernel(recap_stream_t stream, const char *name) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  bool ok = true;
  /* Work launched on a capturing stream goes into the graph; it does not run. */
  if (s && s->capture)
    ok = recap__fake_capture_append(s, RECAP_NODE_KERNEL, name ? name : "fake_kernel");
  else if (s)
    recap__fake_work(s, 1);
  if (s == &recap__fake.legacy) legacy_work_invalidates_locked();
  pthread_mutex_unlock(&recap__fake.lock);
  if (!ok) abort(); /* a test control: see recap__fake_stream_new */
}

void recap__fake_stream_enqueue(recap_stream_t stream) { recap__fake_launch_kernel(stream, NULL); }

void recap__fake_launch_kernel_fn(recap_stream_t stream, const char *name,
                                  recap__fake_kernel_fn_t fn, const void *const *args, size_t n) {
  recap__fake_launch_kernel_sized(stream, name, fn, args, n, 0);
}

void recap__fake_launch_kernel_sized(recap_stream_t stream, const char *name,
                                     recap__fake_kernel_fn_t fn, const void *const *args, size_t n,
                                     uint32_t narrow) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  bool ok = true, run = false;
  if (s && s->capture) {
    ok = recap__fake_capture_append(s, RECAP_NODE_KERNEL, name ? name : "fake_kernel");
    if (ok && !s->capture->invalidated) {
      fake_node_t *node = &s->capture->graph->nodes.v[s->tail - 1];
      node->fn = fn;
      node->narrow = narrow;
      if (n > 0) {
        node->args = malloc(n * sizeof *node->args);
        ok = node->args != NULL;
        if (ok) {
          for (size_t i = 0; i < n; i++) node->args[i] = args[i];
          node->arg_count = n;
        }
      }
    }
  } else if (s) {
    recap__fake_work(s, 1);
    run = fn != NULL;
  }
  pthread_mutex_unlock(&recap__fake.lock);
  if (!ok) abort(); /* a test control: see recap__fake_stream_new */
  /* Eager work runs at once, unlocked: the function is the test's. */
  if (run) fn((void *const *)args, n);
}

void recap__fake_launch_kernel_args(recap_stream_t stream, const char *name,
                                    const void *const *args, size_t n) {
  recap__fake_launch_kernel_fn(stream, name, NULL, args, n);
}

void recap__fake_memset_async(recap_stream_t stream, void *dst, int value, size_t bytes) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  bool ok = true;
  if (s && s->capture) {
    ok = recap__fake_capture_append(s, RECAP_NODE_MEMSET, NULL);
    if (ok && !s->capture->invalidated) {
      fake_node_t *node = &s->capture->graph->nodes.v[s->tail - 1];
      node->dst = dst;
      node->bytes = bytes; /* what cudaGraphMemsetNodeGetParams reports as width * elementSize */
      node->value = value;
    }
  } else if (s) {
    if (dst && bytes) memset(dst, value, bytes); /* the fake's device memory is host memory */
    recap__fake_work(s, 1);
  }
  pthread_mutex_unlock(&recap__fake.lock);
  if (!ok) abort();
}
