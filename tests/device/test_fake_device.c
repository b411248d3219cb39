/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_device.c — tests of the CPU fake device's devices and memory, streams and events,
 * waits between streams, capture modes and the calls a capture forbids, from one thread and
 * several, and its reset (tests/fake/fake_memory.c, fake_stream.c, the capture rules of
 * fake_capture.c, fake.c).
 *
 * The allocator's tests trust the fake's accounting, event and capture semantics; these tests
 * pin those semantics down, calling the fake's ops table directly so that nothing above the
 * seam is involved. The graphs the fake builds from captures, its injected faults and its node
 * inspection are tested in test_fake_graphs.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake/fake.h"
#include "fake_device_util.h"
#include "harness.h"

/* ---- memory ----------------------------------------------------------------------------- */

RECAP_TEST(memory_accounting) {
  recap__fake_reset(NULL);
  assert_string_equal(ops->name, "fake");

  size_t free_bytes = 0, total = 0;
  assert_int_equal(ops->mem_get_info(&free_bytes, &total), RECAP_SUCCESS);
  assert_true(total == (size_t)64 << 30);
  assert_true(free_bytes == total);

  void *a = NULL, *b = NULL;
  assert_int_equal(ops->raw_malloc(&a, 1000), RECAP_SUCCESS);
  assert_non_null(a);
  assert_int_equal((uintptr_t)a % 512, 0);
  memset(a, 0xab, 1000); /* real, writable memory */
  assert_int_equal(recap__fake_now().bytes_in_use[0], 1000);
  assert_int_equal(ops->raw_malloc(&b, (size_t)20 << 20), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 1000 + ((size_t)20 << 20));
  assert_int_equal(ops->mem_get_info(&free_bytes, &total), RECAP_SUCCESS);
  assert_true(free_bytes == total - 1000 - ((size_t)20 << 20));

  assert_int_equal(ops->raw_free(a), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().bytes_in_use[0], (size_t)20 << 20);

  /* Freeing twice, or something the fake never handed out, is cudaErrorInvalidValue. */
  recap_clear_last_error();
  assert_int_equal(ops->raw_free(a), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidValue");
  int local;
  assert_int_equal(ops->raw_free(&local), RECAP_ERROR_CUDA);
  assert_int_equal(recap__fake_now().bytes_in_use[0], (size_t)20 << 20);

  assert_int_equal(ops->raw_free(b), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(NULL), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);

  /* Size 0 succeeds with NULL, as cudaMalloc does. */
  void *z = &local;
  assert_int_equal(ops->raw_malloc(&z, 0), RECAP_SUCCESS);
  assert_null(z);
  assert_int_equal(ops->raw_malloc(NULL, 16), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

RECAP_TEST(capacity_out_of_memory) {
  recap__fake_reset(NULL);

  /* A tebibyte fails by capacity alone; the host allocator is never asked. */
  void *p = &p;
  recap_clear_last_error();
  assert_int_equal(ops->raw_malloc(&p, (size_t)1 << 40), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  assert_int_equal(recap_last_status(), RECAP_ERROR_OUT_OF_MEMORY);
  assert_last_error_has("cudaMalloc: out of memory (cudaErrorMemoryAllocation)");
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(ops->raw_malloc(&p, SIZE_MAX), RECAP_ERROR_OUT_OF_MEMORY);

  recap__fake_reset(&(recap__fake_config_t){.memory_per_device = (size_t)1 << 20});
  size_t free_bytes, total;
  assert_int_equal(ops->mem_get_info(&free_bytes, &total), RECAP_SUCCESS);
  assert_int_equal(total, (size_t)1 << 20);
  void *a, *b;
  assert_int_equal(ops->raw_malloc(&a, 768 << 10), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc(&b, 512 << 10), RECAP_ERROR_OUT_OF_MEMORY);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 768 << 10);
  assert_int_equal(ops->raw_malloc(&b, 256 << 10), RECAP_SUCCESS); /* exactly full */
  assert_int_equal(ops->mem_get_info(&free_bytes, &total), RECAP_SUCCESS);
  assert_int_equal(free_bytes, 0);
  assert_int_equal(ops->raw_malloc(&p, 1), RECAP_ERROR_OUT_OF_MEMORY);
  assert_int_equal(ops->raw_free(a), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc(&a, 768 << 10), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(a), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(b), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* Thousands of live blocks, freed in a scrambled order: the table of blocks stays exact. */
RECAP_TEST(many_blocks) {
  recap__fake_reset(NULL);
  enum { N = 5000 };
  void **ptrs = calloc(N, sizeof *ptrs);
  size_t *sizes = calloc(N, sizeof *sizes);
  assert_non_null(ptrs);
  assert_non_null(sizes);
  size_t total = 0;
  for (size_t i = 0; i < N; i++) {
    sizes[i] = 1 + (i * 7919) % 4096;
    assert_int_equal(ops->raw_malloc(&ptrs[i], sizes[i]), RECAP_SUCCESS);
    total += sizes[i];
  }
  assert_int_equal(recap__fake_now().bytes_in_use[0], total);
  /* 2089 is prime to N, so i * 2089 % N visits every index once. */
  for (size_t i = 0; i < N; i++) {
    size_t k = (i * 2089) % N;
    assert_int_equal(ops->raw_free(ptrs[k]), RECAP_SUCCESS);
    total -= sizes[k];
    assert_int_equal(recap__fake_now().bytes_in_use[0], total);
    if (i % 97 == 0) assert_int_equal(ops->raw_free(ptrs[k]), RECAP_ERROR_CUDA);
  }
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  free(ptrs);
  free(sizes);
}

RECAP_TEST(devices) {
  recap__fake_reset(NULL);
  int count = 0, device = -1;
  assert_int_equal(ops->device_count(&count), RECAP_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(ops->get_device(&device), RECAP_SUCCESS);
  assert_int_equal(device, 0);
  assert_int_equal(ops->set_device(1), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cudaErrorInvalidDevice");

  recap__fake_reset(&(recap__fake_config_t){.device_count = 2, .memory_per_device = 4096});
  assert_int_equal(ops->device_count(&count), RECAP_SUCCESS);
  assert_int_equal(count, 2);
  assert_int_equal(ops->set_device(1), RECAP_SUCCESS);
  assert_int_equal(ops->get_device(&device), RECAP_SUCCESS);
  assert_int_equal(device, 1);
  void *p;
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 4096);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(ops->set_device(0), RECAP_SUCCESS);
  void *q;
  assert_int_equal(ops->raw_malloc(&q, 4096), RECAP_SUCCESS); /* device 0 has its own room */
  /* A block is given back to the device it came from, whatever the current device. */
  assert_int_equal(ops->raw_free(p), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
  assert_int_equal(ops->raw_free(q), RECAP_SUCCESS);
  assert_int_equal(ops->set_device(-1), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ops->set_device(2), RECAP_ERROR_INVALID_ARGUMENT);

  /* A negative count simulates a machine without a device. */
  recap__fake_reset(&(recap__fake_config_t){.device_count = -1});
  assert_int_equal(ops->device_count(&count), RECAP_ERROR_NO_DEVICE);
  assert_last_error_has("cudaErrorNoDevice");
}

/* ---- streams and events ----------------------------------------------------------------- */

RECAP_TEST(events_follow_streams) {
  recap_stream_t s = fresh_stream();
  recap__event_t e1, e2, never;
  assert_int_equal(ops->event_create(&e1), RECAP_SUCCESS);
  assert_int_equal(ops->event_create(&e2), RECAP_SUCCESS);
  assert_int_equal(ops->event_create(&never), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_events, 3);

  assert_true(query(never)); /* never recorded: done, as in CUDA */

  recap__fake_stream_enqueue(s);
  assert_int_equal(ops->event_record(e1, s), RECAP_SUCCESS);
  assert_false(query(e1));
  recap__fake_stream_enqueue(s);
  assert_int_equal(ops->event_record(e2, s), RECAP_SUCCESS);
  assert_false(query(e2));

  /* Synchronizing e1 finishes the stream up to e1 only. */
  assert_int_equal(ops->event_synchronize(e1), RECAP_SUCCESS);
  assert_true(query(e1));
  assert_false(query(e2));
  recap__fake_stream_complete(s);
  assert_true(query(e2));

  /* Re-recording moves the event to the new point. */
  assert_int_equal(ops->event_record(e1, s), RECAP_SUCCESS);
  assert_false(query(e1));
  assert_int_equal(ops->stream_synchronize(s), RECAP_SUCCESS);
  assert_true(query(e1));

  /* The legacy default stream (NULL) works like any other. */
  assert_int_equal(ops->event_record(e1, NULL), RECAP_SUCCESS);
  assert_false(query(e1));
  assert_int_equal(ops->event_record(e2, s), RECAP_SUCCESS);
  assert_int_equal(ops->device_synchronize(), RECAP_SUCCESS);
  assert_true(query(e1));
  assert_true(query(e2));

  assert_int_equal(ops->event_destroy(e1), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(e2), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(never), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_events, 0);
  assert_int_equal(ops->event_destroy(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  bool done;
  assert_int_equal(ops->event_query(NULL, &done), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ops->event_record(NULL, s), RECAP_ERROR_INVALID_ARGUMENT);
}

RECAP_TEST(stream_create_destroy) {
  recap__fake_reset(NULL);
  recap_stream_t s = NULL;
  assert_int_equal(ops->stream_create(&s), RECAP_SUCCESS);
  assert_non_null(s);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  recap__event_t e;
  assert_int_equal(ops->event_create(&e), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
  assert_false(query(e));
  /* CUDA finishes the work of a destroyed stream: the event becomes done. */
  assert_int_equal(ops->stream_destroy(s), RECAP_SUCCESS);
  assert_true(query(e));
  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);

  assert_int_equal(ops->stream_destroy(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap_stream_t bogus = (recap_stream_t)&s;
  assert_int_equal(ops->stream_destroy(bogus), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidResourceHandle");
  assert_int_equal(ops->stream_synchronize(bogus), RECAP_ERROR_CUDA);
  recap__capture_status_t status;
  assert_int_equal(ops->stream_capture_info(bogus, &status, NULL), RECAP_ERROR_CUDA);

  /* A capturing stream cannot be destroyed; the attempt invalidates the capture. */
  recap_stream_t c = recap__fake_stream_new();
  assert_int_not_equal(recap__fake_capture_begin(c, RECAP__CAPTURE_MODE_GLOBAL), 0);
  assert_int_equal(ops->stream_destroy(c), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureUnsupported");
  assert_int_equal(capture_status(c, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(c));
  assert_int_equal(ops->stream_destroy(c), RECAP_SUCCESS);
}

/* ---- waits between streams ------------------------------------------------------------- */

static recap__event_t event_new(void) {
  recap__event_t e = NULL;
  assert_int_equal(ops->event_create(&e), RECAP_SUCCESS);
  return e;
}

static void record(recap__event_t e, recap_stream_t s) {
  assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
}

static void wait_event(recap_stream_t s, recap__event_t e) {
  assert_int_equal(ops->stream_wait_event(s, e), RECAP_SUCCESS);
}

/* One item of work on s, and e recorded after it. */
static void work_then_record(recap_stream_t s, recap__event_t e) {
  recap__fake_stream_enqueue(s);
  record(e, s);
}

/* As work_then_record on `from`, and `to` waiting for e. */
static void after_work(recap_stream_t from, recap__event_t e, recap_stream_t to) {
  work_then_record(from, e);
  wait_event(to, e);
}

RECAP_TEST(stream_waits_order_streams) {
  recap__fake_reset(NULL);
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  recap__event_t e = event_new(), late = event_new(), a = event_new(), b = event_new();

  /* s2's marker waits for s1 up to e: nothing moves on the host, completing s2 up to its
   * work before the marker leaves s1 alone, completing the marker finishes s1 up to e, and
   * not beyond. */
  work_then_record(s1, e);
  work_then_record(s1, late);
  work_then_record(s2, a);
  wait_event(s2, e);
  work_then_record(s2, b);
  assert_false(query(e));
  assert_int_equal(ops->event_synchronize(a), RECAP_SUCCESS);
  assert_true(query(a));
  assert_false(query(e));
  assert_int_equal(ops->event_synchronize(b), RECAP_SUCCESS);
  assert_true(query(e));
  assert_false(query(late));
  /* Completing s1 does nothing to s2. */
  work_then_record(s2, b);
  recap__fake_stream_complete(s1);
  assert_true(query(late));
  assert_false(query(b));
  recap__fake_stream_complete(s2);

  /* The wait takes the event's record at the time of the call: recording it again later
   * does not move what the marker waits for. */
  recap__fake_stream_enqueue(s1);
  record(a, s1); /* just before e's first record */
  record(e, s1);
  wait_event(s2, e);
  work_then_record(s1, e);
  recap__fake_stream_complete(s2);
  assert_true(query(a));
  assert_false(query(e));
  recap__fake_stream_complete(s1);

  /* Markers that wait for nothing: an event never recorded (recorded on s1 only after the
   * wait), one recorded on the waiting stream itself, one whose work completed. */
  recap__event_t never = event_new();
  wait_event(s2, never);
  work_then_record(s1, never);
  recap__fake_stream_complete(s2);
  assert_false(query(never));
  after_work(s2, a, s2);
  assert_false(query(a));
  recap__fake_stream_complete(s2);
  assert_true(query(a));
  recap__fake_stream_complete(s1);
  wait_event(s2, never); /* completed already */
  work_then_record(s1, late);
  recap__fake_stream_complete(s2);
  assert_false(query(late));
  recap__fake_stream_complete(s1);

  /* The legacy stream waits and is waited for like any other; stream_synchronize and
   * device_synchronize complete through the waits too. */
  after_work(s1, e, NULL);
  after_work(NULL, a, s2);
  assert_int_equal(ops->stream_synchronize(s2), RECAP_SUCCESS);
  assert_true(query(a));
  assert_true(query(e));
  after_work(s1, e, s2);
  assert_int_equal(ops->device_synchronize(), RECAP_SUCCESS);
  assert_true(query(e));

  /* Destroying a stream finishes its work: its markers complete what they waited for, and
   * other streams' waits for it are dropped (ASan and valgrind see no dangling stream). */
  recap_stream_t gone = recap__fake_stream_new();
  after_work(s1, e, gone);
  after_work(gone, a, s2);
  assert_int_equal(ops->stream_destroy(gone), RECAP_SUCCESS);
  assert_true(query(e));
  assert_true(query(a));
  gone = recap__fake_stream_new();
  after_work(gone, a, s2);
  work_then_record(s2, b);
  assert_int_equal(ops->stream_destroy(gone), RECAP_SUCCESS);
  assert_true(query(a));
  assert_false(query(b));
  recap__fake_stream_complete(s2);
  assert_true(query(b));

  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(late), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(a), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(b), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(never), RECAP_SUCCESS);
}

/* A chain of waits across many streams completes through one completion, in either order of
 * the streams, without recursion. */
enum { CHAIN = 1000 };

RECAP_TEST(stream_waits_chain) {
  for (int direction = 0; direction < 2; direction++) {
    recap__fake_reset(NULL);
    static recap_stream_t s[CHAIN];
    static recap__event_t e[CHAIN];
    for (int i = 0; i < CHAIN; i++) {
      s[i] = recap__fake_stream_new();
      e[i] = event_new();
    }
    /* Stream i's work, then its record; stream next(i) waits for it before its own work.
     * Streams are listed newest first: one direction completes in one pass, the other in
     * one pass per link. */
    for (int k = 0; k < CHAIN; k++) {
      int i = direction ? CHAIN - 1 - k : k;
      if (k > 0) wait_event(s[i], e[direction ? i + 1 : i - 1]);
      recap__fake_stream_enqueue(s[i]);
      record(e[i], s[i]);
    }
    int last = direction ? 0 : CHAIN - 1;
    for (int i = 0; i < CHAIN; i++) assert_false(query(e[i]));
    recap__fake_stream_complete(s[last]);
    for (int i = 0; i < CHAIN; i++) assert_true(query(e[i]));
    for (int i = 0; i < CHAIN; i++) assert_int_equal(ops->event_destroy(e[i]), RECAP_SUCCESS);
  }
  recap__fake_reset(NULL);
}

RECAP_TEST(stream_wait_refusals_and_faults) {
  recap__fake_reset(NULL);
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  recap__event_t e = event_new();
  work_then_record(s1, e);

  /* An injected fault fails the call before it enqueues anything. */
  uint64_t calls = recap__fake_now().calls[RECAP__FAKE_FAULT_STREAM_WAIT_EVENT];
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_WAIT_EVENT, 1);
  recap_clear_last_error();
  assert_int_equal(ops->stream_wait_event(s2, e), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaStreamWaitEvent: unknown error (cudaErrorUnknown)");
  assert_last_error_has("fault injected");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_STREAM_WAIT_EVENT], calls + 1);
  recap__fake_stream_complete(s2);
  assert_false(query(e));

  /* Handles CUDA refuses. */
  recap_clear_last_error();
  assert_int_equal(ops->stream_wait_event(s2, NULL), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaStreamWaitEvent: invalid resource handle");
  assert_last_error_has("cudaErrorInvalidResourceHandle");
  assert_last_error_has("the event is NULL");
  uint32_t not_an_event[16] = {0};
  recap_clear_last_error();
  assert_int_equal(ops->stream_wait_event(s2, (recap__event_t)(void *)not_an_event),
                   RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidResourceHandle");
  assert_last_error_has("is not a live fake event");
  recap_stream_t bogus = (recap_stream_t)&s1;
  recap_clear_last_error();
  assert_int_equal(ops->stream_wait_event(bogus, e), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaStreamWaitEvent: invalid resource handle");
  assert_last_error_has("is not a fake stream");
  recap__fake_stream_complete(s2);
  assert_false(query(e));

  /* On a capturing stream: an event recorded outside the capture is CUDA's isolation error
   * and invalidates the capture; a never-recorded one adds nothing. */
  recap__event_t never = event_new();
  uint64_t id = recap__fake_capture_begin(s2, RECAP__CAPTURE_MODE_RELAXED);
  assert_int_not_equal(id, 0);
  wait_event(s2, never);
  assert_int_equal(capture_status(s2, NULL), RECAP__CAPTURE_ACTIVE);
  recap_clear_last_error();
  assert_int_equal(ops->stream_wait_event(s2, e), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaStreamWaitEvent: dependency created on uncaptured work");
  assert_last_error_has("cudaErrorStreamCaptureIsolation");
  assert_last_error_has("now invalidated");
  assert_int_equal(capture_status(s2, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(s2));
  assert_false(query(e)); /* nothing was enqueued */
  recap__fake_stream_complete(s2);
  assert_false(query(e));
  recap__fake_stream_complete(s1);
  assert_true(query(e));
  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(never), RECAP_SUCCESS);
}

/* ---- captures --------------------------------------------------------------------------- */

RECAP_TEST(capture_ids_and_statuses) {
  recap__fake_reset(NULL);
  recap_stream_t a = recap__fake_stream_new();
  recap_stream_t b = recap__fake_stream_new();
  recap_stream_t c = recap__fake_stream_new();
  recap_stream_t d = recap__fake_stream_new();
  uint64_t id = 99;

  assert_int_equal(capture_status(a, &id), RECAP__CAPTURE_NONE);
  assert_int_equal(id, 0);
  assert_int_equal(recap__fake_capture_begin(NULL, RECAP__CAPTURE_MODE_GLOBAL), 0);
  assert_int_equal(recap__fake_capture_begin(a, RECAP__CAPTURE_MODE_GLOBAL), 1);
  assert_int_equal(recap__fake_capture_begin(a, RECAP__CAPTURE_MODE_GLOBAL), 0);
  assert_int_equal(capture_status(a, &id), RECAP__CAPTURE_ACTIVE);
  assert_int_equal(id, 1);

  assert_true(recap__fake_capture_join(b, a));
  assert_true(recap__fake_capture_join(c, b));     /* joining a joined stream joins the capture */
  assert_false(recap__fake_capture_join(b, a));    /* already capturing */
  assert_false(recap__fake_capture_join(d, NULL)); /* the legacy stream never captures */
  assert_false(recap__fake_capture_join(NULL, a));
  assert_int_equal(capture_status(b, &id), RECAP__CAPTURE_ACTIVE);
  assert_int_equal(id, 1);
  assert_int_equal(capture_status(c, &id), RECAP__CAPTURE_ACTIVE);
  assert_int_equal(id, 1);
  assert_int_equal(capture_status(NULL, &id), RECAP__CAPTURE_NONE);

  /* A second, concurrent capture gets the next id. */
  assert_int_equal(recap__fake_capture_begin(d, RECAP__CAPTURE_MODE_RELAXED), 2);
  assert_false(recap__fake_capture_join(d, a));

  assert_true(recap__fake_capture_end(a));
  assert_int_equal(capture_status(a, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(capture_status(b, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(capture_status(c, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(capture_status(d, &id), RECAP__CAPTURE_ACTIVE);
  assert_int_equal(id, 2);
  assert_false(recap__fake_capture_end(a)); /* nothing to end */
  assert_true(recap__fake_capture_end(d));

  /* Ids keep increasing; they are never reused. */
  assert_int_equal(recap__fake_capture_begin(b, RECAP__CAPTURE_MODE_THREAD_LOCAL), 3);
  assert_false(recap__fake_capture_join(b, c)); /* origin not capturing */
  recap__fake_capture_invalidate(b);
  assert_int_equal(capture_status(b, &id), RECAP__CAPTURE_INVALIDATED);
  assert_int_equal(id, 3);
  assert_false(recap__fake_capture_end(b));
  assert_int_equal(capture_status(b, NULL), RECAP__CAPTURE_NONE);

  /* Ending from a joined stream is unmatched: it invalidates, and the origin must still end. */
  assert_int_equal(recap__fake_capture_begin(a, RECAP__CAPTURE_MODE_GLOBAL), 4);
  assert_true(recap__fake_capture_join(b, a));
  assert_false(recap__fake_capture_end(b));
  assert_int_equal(capture_status(b, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_int_equal(capture_status(a, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(a));
  assert_int_equal(capture_status(b, NULL), RECAP__CAPTURE_NONE);
}

RECAP_TEST(events_refused_on_capturing_streams) {
  recap_stream_t s = fresh_stream();
  recap_stream_t side = recap__fake_stream_new();
  recap_stream_t other = recap__fake_stream_new();
  recap__event_t before, e;
  assert_int_equal(ops->event_create(&before), RECAP_SUCCESS);
  assert_int_equal(ops->event_create(&e), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(before, s), RECAP_SUCCESS);

  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 1);
  assert_true(recap__fake_capture_join(side, s));

  /* Recording on the capturing stream, or on a stream joined to it, is refused. */
  recap_clear_last_error();
  assert_int_equal(ops->event_record(e, s), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureUnsupported");
  assert_int_equal(ops->event_record(e, side), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
  /* Other streams are free to record and query. */
  assert_int_equal(ops->event_record(e, other), RECAP_SUCCESS);
  assert_false(query(e));

  /* Querying an event recorded on a now capturing stream is refused and invalidates. */
  bool done = true;
  recap_clear_last_error();
  assert_int_equal(ops->event_query(before, &done), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureUnsupported");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_int_equal(ops->event_synchronize(before), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(ops->stream_synchronize(side), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(s));

  /* After the capture everything is allowed again. */
  assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
  assert_false(query(before));
  assert_int_equal(ops->stream_synchronize(s), RECAP_SUCCESS);
  assert_true(query(before));
  assert_true(query(e));
  assert_int_equal(ops->event_destroy(before), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);
}

/* Capture number id, begun on s in global mode, and an unrelaxed cudaMalloc that fails, with
 * the last error holding needle, and invalidates the capture (left to end). */
static void malloc_invalidates_a_global_capture(recap_stream_t s, int id, const char *needle) {
  void *p = &p;
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), id);
  recap_clear_last_error();
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_null(p);
  assert_last_error_has(needle);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_INVALIDATED);
}

RECAP_TEST(malloc_during_capture) {
  recap_stream_t s = fresh_stream();
  void *early, *p = &p;
  assert_int_equal(ops->raw_malloc(&early, 4096), RECAP_SUCCESS);

  /* Global capture: an unrelaxed cudaMalloc fails and invalidates it. */
  malloc_invalidates_a_global_capture(s, 1, "cudaErrorStreamCaptureUnsupported");
  assert_int_equal(recap__fake_now().bytes_in_use[0], 4096);
  assert_false(recap__fake_capture_end(s));

  /* The same call in relaxed mode is allowed and leaves the capture intact; so is cudaFree. */
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 2);
  recap__capture_mode_t mode = RECAP__CAPTURE_MODE_RELAXED;
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  assert_int_equal(mode, RECAP__CAPTURE_MODE_GLOBAL);
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(p), RECAP_SUCCESS);
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  assert_int_equal(mode, RECAP__CAPTURE_MODE_RELAXED);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);

  /* cudaFree and device-wide synchronisation are unsafe too. */
  assert_int_equal(ops->raw_free(early), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureUnsupported");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_int_equal(ops->device_synchronize(), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(s));
  assert_int_equal(ops->device_synchronize(), RECAP_SUCCESS);

  /* A capture begun in relaxed mode forbids nothing. */
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_RELAXED), 3);
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(p), RECAP_SUCCESS);
  assert_true(recap__fake_capture_end(s));

  assert_int_equal(ops->raw_free(early), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);

  mode = (recap__capture_mode_t)7;
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ops->exchange_capture_mode(NULL), RECAP_ERROR_INVALID_ARGUMENT);
}

/* CUDA's global mode knows no devices: a global capture on device 0 forbids an unrelaxed
 * cudaMalloc or cudaFree made on device 1, and the call invalidates the capture. */
RECAP_TEST(global_capture_on_device_0_forbids_malloc_on_device_1) {
  recap__fake_reset(&(recap__fake_config_t){.device_count = 2});
  recap_stream_t s = recap__fake_stream_new(); /* device 0's */
  assert_int_equal(ops->set_device(1), RECAP_SUCCESS);
  void *early, *p = &p;
  assert_int_equal(ops->raw_malloc(&early, 4096), RECAP_SUCCESS);

  malloc_invalidates_a_global_capture(
      s, 1,
      "cudaMalloc: operation not permitted when stream is capturing "
      "(cudaErrorStreamCaptureUnsupported) on the fake device: capture 1 "
      "(global mode, on device 0) forbids it in this thread's global capture "
      "mode, on device 1; it is now invalidated");
  assert_int_equal(recap__fake_now().bytes_in_use[1], 4096);
  assert_false(recap__fake_capture_end(s));

  /* cudaFree on device 1 too; relaxed, both are allowed and the capture goes on. */
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 2);
  assert_int_equal(ops->raw_free(early), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaFree: operation not permitted");
  assert_false(recap__fake_capture_end(s));
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 3);
  recap__capture_mode_t mode = RECAP__CAPTURE_MODE_RELAXED;
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(p), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(early), RECAP_SUCCESS);
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
  assert_true(recap__fake_capture_end(s));
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
  assert_int_equal(ops->set_device(0), RECAP_SUCCESS);
}

/* ---- captures and threads --------------------------------------------------------------- */

typedef struct capture_thread {
  recap_stream_t stream;
  recap__capture_mode_t mode;
  pthread_barrier_t *barrier;
  uint64_t id;
  recap_status_t own_malloc; /* the capturing thread's own raw_malloc, after the main thread's */
  void *ptr;
  bool ended;
} capture_thread_t;

static void *capture_thread_main(void *arg) {
  capture_thread_t *t = arg;
  t->id = recap__fake_capture_begin(t->stream, t->mode);
  pthread_barrier_wait(t->barrier); /* capture under way */
  pthread_barrier_wait(t->barrier); /* the main thread made its calls */
  t->own_malloc = recap__fake_ops.raw_malloc(&t->ptr, 4096);
  t->ended = recap__fake_capture_end(t->stream);
  pthread_barrier_wait(t->barrier);
  return NULL;
}

static void run_with_capture_thread(capture_thread_t *t, void (*in_between)(capture_thread_t *)) {
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, 2);
  t->barrier = &barrier;
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, capture_thread_main, t), 0);
  pthread_barrier_wait(&barrier);
  in_between(t);
  pthread_barrier_wait(&barrier);
  pthread_barrier_wait(&barrier);
  pthread_join(thread, NULL);
  pthread_barrier_destroy(&barrier);
}

static recap_status_t main_malloc_status;
static recap__capture_status_t status_after_main_malloc;

static void main_thread_mallocs(capture_thread_t *t) {
  void *p = NULL;
  main_malloc_status = ops->raw_malloc(&p, 4096);
  if (p) ops->raw_free(p);
  recap__capture_status_t status = RECAP__CAPTURE_NONE;
  uint64_t id;
  ops->stream_capture_info(t->stream, &status, &id);
  status_after_main_malloc = status;
}

RECAP_TEST(thread_local_capture) {
  recap__fake_reset(NULL);
  capture_thread_t t = {.stream = recap__fake_stream_new(),
                        .mode = RECAP__CAPTURE_MODE_THREAD_LOCAL};
  run_with_capture_thread(&t, main_thread_mallocs);
  assert_int_equal(t.id, 1);
  /* Another thread's thread-local capture does not concern this thread... */
  assert_int_equal(main_malloc_status, RECAP_SUCCESS);
  assert_int_equal(status_after_main_malloc, RECAP__CAPTURE_ACTIVE);
  /* ...but the capturing thread itself may not call cudaMalloc. */
  assert_int_equal(t.own_malloc, RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_null(t.ptr);
  assert_false(t.ended);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

RECAP_TEST(global_capture_in_other_thread) {
  recap__fake_reset(NULL);
  capture_thread_t t = {.stream = recap__fake_stream_new(), .mode = RECAP__CAPTURE_MODE_GLOBAL};
  run_with_capture_thread(&t, main_thread_mallocs);
  /* A global capture in any thread forbids a global-mode thread's cudaMalloc. */
  assert_int_equal(main_malloc_status, RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(status_after_main_malloc, RECAP__CAPTURE_INVALIDATED);
  assert_false(t.ended);

  /* A thread in thread-local mode ignores other threads' captures, as in CUDA. */
  recap__fake_reset(NULL);
  recap__capture_mode_t mode = RECAP__CAPTURE_MODE_THREAD_LOCAL;
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  capture_thread_t u = {.stream = recap__fake_stream_new(), .mode = RECAP__CAPTURE_MODE_GLOBAL};
  run_with_capture_thread(&u, main_thread_mallocs);
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  assert_int_equal(main_malloc_status, RECAP_SUCCESS);
  assert_int_equal(status_after_main_malloc, RECAP__CAPTURE_ACTIVE);
  assert_int_equal(u.own_malloc, RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_false(u.ended);
}

/* Several threads hammer the fake at once; the accounting must come out exact. */
typedef struct stress_thread {
  recap_stream_t stream;
  int failures;
} stress_thread_t;

static void *stress_main(void *arg) {
  stress_thread_t *t = arg;
  recap__event_t e;
  if (recap__fake_ops.event_create(&e) != RECAP_SUCCESS) {
    t->failures++;
    return NULL;
  }
  void *held[16] = {0};
  for (int i = 0; i < 4000; i++) {
    void **slot = &held[i % 16];
    if (*slot && recap__fake_ops.raw_free(*slot) != RECAP_SUCCESS) t->failures++;
    *slot = NULL;
    if (recap__fake_ops.raw_malloc(slot, 512 + (size_t)(i % 7) * 512) != RECAP_SUCCESS)
      t->failures++;
    recap__fake_stream_enqueue(t->stream);
    if (recap__fake_ops.event_record(e, t->stream) != RECAP_SUCCESS) t->failures++;
    bool done = true;
    if (recap__fake_ops.event_query(e, &done) != RECAP_SUCCESS || done) t->failures++;
    recap__fake_stream_complete(t->stream);
    if (recap__fake_ops.event_query(e, &done) != RECAP_SUCCESS || !done) t->failures++;
  }
  for (int i = 0; i < 16; i++)
    if (held[i] && recap__fake_ops.raw_free(held[i]) != RECAP_SUCCESS) t->failures++;
  if (recap__fake_ops.event_destroy(e) != RECAP_SUCCESS) t->failures++;
  return NULL;
}

RECAP_TEST(threads_stress) {
  recap__fake_reset(NULL);
  enum { THREADS = 4 };
  pthread_t threads[THREADS];
  stress_thread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    t[i] = (stress_thread_t){.stream = recap__fake_stream_new()};
    assert_int_equal(pthread_create(&threads[i], NULL, stress_main, &t[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < THREADS; i++) assert_int_equal(t[i].failures, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().live_events, 0);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_RAW_MALLOC], THREADS * 4000);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], THREADS * 4000);
}

/* ---- reset ------------------------------------------------------------------------------ */

RECAP_TEST(reset_frees_everything) {
  recap__fake_reset(&(recap__fake_config_t){.device_count = 2});
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t t;
  assert_int_equal(ops->stream_create(&t), RECAP_SUCCESS);
  recap__event_t e;
  for (int i = 0; i < 10; i++) {
    assert_int_equal(ops->event_create(&e), RECAP_SUCCESS);
    assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
  }
  void *p;
  for (int i = 0; i < 100; i++) assert_int_equal(ops->raw_malloc(&p, 100000), RECAP_SUCCESS);
  assert_int_equal(ops->set_device(1), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc(&p, 100), RECAP_SUCCESS);
  assert_int_equal(recap__fake_capture_begin(t, RECAP__CAPTURE_MODE_GLOBAL), 1);
  assert_true(recap__fake_capture_join(s, t));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_CREATE, 1);
  recap__capture_mode_t mode = RECAP__CAPTURE_MODE_RELAXED;
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  recap__fake_stream_enqueue(NULL);
  recap__event_t x;
  assert_int_equal(ops->event_create(&x), RECAP_ERROR_CUDA);

  /* Everything goes: memory, streams, events, captures, counters, armed faults, and this
   * thread's device and capture mode. The sanitizer's leak check confirms nothing is left. */
  recap__fake_reset(NULL);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
  assert_int_equal(recap__fake_now().live_events, 0);
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) assert_int_equal(recap__fake_now().calls[k], 0);
  int device = -1;
  assert_int_equal(ops->get_device(&device), RECAP_SUCCESS);
  assert_int_equal(device, 0);
  mode = RECAP__CAPTURE_MODE_GLOBAL;
  assert_int_equal(ops->exchange_capture_mode(&mode), RECAP_SUCCESS);
  assert_int_equal(mode, RECAP__CAPTURE_MODE_GLOBAL);
  int count;
  assert_int_equal(ops->device_count(&count), RECAP_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(ops->event_create(&e), RECAP_SUCCESS); /* the armed fault is gone */
  assert_int_equal(ops->event_record(e, NULL), RECAP_SUCCESS);
  assert_false(query(e)); /* the legacy stream starts over: one item queued, none completed */
  recap__fake_stream_complete(NULL);
  assert_true(query(e));
  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);
  recap_stream_t u = recap__fake_stream_new();
  assert_int_equal(recap__fake_capture_begin(u, RECAP__CAPTURE_MODE_GLOBAL), 1);
  assert_true(recap__fake_capture_end(u));
  recap__fake_reset(NULL);
}

/* stream_blocking: the legacy stream and streams made blocking say so; work on the legacy
 * stream invalidates a capture of a blocking stream, not one of a non-blocking stream. */
RECAP_TEST(blocking_streams_and_the_legacy_stream) {
  recap__fake_reset(NULL);
  recap_stream_t plain = recap__fake_stream_new(), blocking = recap__fake_stream_new_blocking();
  bool b = true;
  assert_int_equal(ops->stream_blocking(plain, &b), RECAP_SUCCESS);
  assert_false(b);
  assert_int_equal(ops->stream_blocking(blocking, &b), RECAP_SUCCESS);
  assert_true(b);
  b = false;
  assert_int_equal(ops->stream_blocking(NULL, &b), RECAP_SUCCESS);
  assert_true(b);
  int not_a_stream;
  assert_int_equal(ops->stream_blocking((recap_stream_t)&not_a_stream, &b), RECAP_ERROR_CUDA);
  assert_int_equal(ops->stream_blocking(plain, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  recap_cuda_graph_t g = NULL;
  for (int k = 0; k < 2; k++) {
    recap_stream_t s = k ? blocking : plain;
    assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED), RECAP_SUCCESS);
    recap__fake_stream_enqueue(s);
    recap__fake_launch_kernel(NULL, "on_the_legacy_stream");
    recap_status_t expected = k ? RECAP_ERROR_CAPTURE_INVALIDATED : RECAP_SUCCESS;
    assert_int_equal(ops->stream_end_capture(s, &g), expected);
    if (g) assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
    g = NULL;
  }
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(memory_accounting),
    cmocka_unit_test(capacity_out_of_memory),
    cmocka_unit_test(many_blocks),
    cmocka_unit_test(devices),
    cmocka_unit_test(events_follow_streams),
    cmocka_unit_test(stream_create_destroy),
    cmocka_unit_test(stream_waits_order_streams),
    cmocka_unit_test(stream_waits_chain),
    cmocka_unit_test(stream_wait_refusals_and_faults),
    cmocka_unit_test(capture_ids_and_statuses),
    cmocka_unit_test(events_refused_on_capturing_streams),
    cmocka_unit_test(malloc_during_capture),
    cmocka_unit_test(global_capture_on_device_0_forbids_malloc_on_device_1),
    cmocka_unit_test(thread_local_capture),
    cmocka_unit_test(global_capture_in_other_thread),
    cmocka_unit_test(threads_stress),
    cmocka_unit_test(reset_frees_everything),
    cmocka_unit_test(blocking_streams_and_the_legacy_stream),
};

RECAP_TEST_MAIN(tests)
