/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_device.c — tests of the CPU fake device itself (src/device/fake*.c).
 *
 * The allocator's tests trust the fake's accounting, event and capture semantics; these tests
 * pin those semantics down, calling the fake's ops table directly so that nothing above the
 * seam is involved.
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
#include <unistd.h>

#include "device/fake.h"
#include "device/rng_launch.h"
#include "harness.h"

static const recap__device_ops_t *const ops = &recap__fake_ops;

static void assert_last_error_has(const char *needle) {
  const char *message = recap_last_error();
  if (!strstr(message, needle)) fail_msg("last error \"%s\" lacks \"%s\"", message, needle);
}

static recap__capture_status_t capture_status(recap_stream_t s, uint64_t *id) {
  recap__capture_status_t status = RECAP__CAPTURE_NONE;
  uint64_t ignored;
  assert_int_equal(ops->stream_capture_info(s, &status, id ? id : &ignored), RECAP_SUCCESS);
  return status;
}

static bool query(recap__event_t e) {
  bool done = false;
  assert_int_equal(ops->event_query(e, &done), RECAP_SUCCESS);
  return done;
}

/* ---- memory ----------------------------------------------------------------------------- */

static void memory_accounting(void **state) {
  (void)state;
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

static void capacity_out_of_memory(void **state) {
  (void)state;
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
static void many_blocks(void **state) {
  (void)state;
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

static void devices(void **state) {
  (void)state;
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

static void events_follow_streams(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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

static void stream_create_destroy(void **state) {
  (void)state;
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

/* ---- captures --------------------------------------------------------------------------- */

static void capture_ids_and_statuses(void **state) {
  (void)state;
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

static void events_refused_on_capturing_streams(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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

static void malloc_during_capture(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  void *early, *p = &p;
  assert_int_equal(ops->raw_malloc(&early, 4096), RECAP_SUCCESS);

  /* Global capture: an unrelaxed cudaMalloc fails and invalidates it. */
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 1);
  recap_clear_last_error();
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_null(p);
  assert_last_error_has("cudaErrorStreamCaptureUnsupported");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_INVALIDATED);
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

static void thread_local_capture(void **state) {
  (void)state;
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

static void global_capture_in_other_thread(void **state) {
  (void)state;
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

static void threads_stress(void **state) {
  (void)state;
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

/* ---- graphs ----------------------------------------------------------------------------- */

static recap_cuda_graph_t end_capture(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_SUCCESS);
  assert_non_null(g);
  return g;
}

static void assert_indices(const size_t *got, size_t count, const size_t *want, size_t want_count) {
  assert_int_equal(count, want_count);
  if (want_count == 0) assert_null(got);
  for (size_t i = 0; i < want_count; i++) assert_int_equal(got[i], want[i]);
}

/* Reads a whole small file into buf; returns its length. */
static size_t read_file(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose(f);
  return n;
}

static void begin_capture_rules(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t side = recap__fake_stream_new();

  /* The legacy stream is refused before the "device" is asked: no call is counted. */
  recap_clear_last_error();
  assert_int_equal(ops->stream_begin_capture(NULL, RECAP__CAPTURE_MODE_GLOBAL),
                   RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("legacy default stream");
  assert_last_error_has("cudaStreamNonBlocking");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_BEGIN], 0);

  assert_int_equal(ops->stream_begin_capture(s, (recap__capture_mode_t)9),
                   RECAP_ERROR_INVALID_ARGUMENT);
  recap_stream_t bogus = (recap_stream_t)&s;
  assert_int_equal(ops->stream_begin_capture(bogus, RECAP__CAPTURE_MODE_GLOBAL), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidResourceHandle");

  /* The ops and the test controls drive the same captures and ids. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  uint64_t id = 0;
  assert_int_equal(capture_status(s, &id), RECAP__CAPTURE_ACTIVE);
  assert_int_equal(id, 1);
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL),
                   RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("already capturing");
  assert_true(recap__fake_capture_join(side, s));
  assert_int_equal(ops->stream_begin_capture(side, RECAP__CAPTURE_MODE_RELAXED),
                   RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("joined");
  /* Refusals leave the capture intact. */
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
  assert_true(recap__fake_capture_end(s));
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 2);
  assert_true(recap__fake_capture_end(s));
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_BEGIN], 5);
}

static void capture_builds_graph(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t side = recap__fake_stream_new();

  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(s, "a"); /* 0 */
  recap__fake_launch_kernel(s, "b"); /* 1 <- 0 */
  assert_true(recap__fake_capture_join(side, s));
  recap__fake_launch_kernel(side, "c");      /* 2 <- 1: the origin's last node at the join */
  recap__fake_stream_enqueue(s);             /* 3 <- 1: "fake_kernel" */
  recap__fake_launch_kernel(side, NULL);     /* 4 <- 2 */
  recap__fake_launch_kernel(side, "q\"x\\"); /* 5 <- 4: a name DOT must escape */
  recap_cuda_graph_t g = end_capture(s);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 1);

  size_t count = 0;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 6);
  assert_int_equal(ops->graph_node_count(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(g, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 6);
  assert_int_equal(info.edge_count, 5);
  assert_false(info.tools_ids_available);
  const char *names[] = {"a", "b", "c", "fake_kernel", "fake_kernel", "q\"x\\"};
  for (size_t i = 0; i < 6; i++) {
    const recap_graph_node_t *n = &info.nodes[i];
    assert_int_equal(n->type, RECAP_NODE_KERNEL);
    assert_string_equal(n->kernel_name, names[i]);
    for (int d = 0; d < 3; d++) {
      assert_int_equal(n->grid[d], 1);
      assert_int_equal(n->block[d], 1);
    }
    assert_int_equal(n->shared_bytes, 0);
    assert_int_equal(n->bytes, 0);
    assert_null(n->annotation);
    assert_false(n->has_tools_id);
  }
  assert_indices(info.nodes[0].dependencies, info.nodes[0].dependency_count, NULL, 0);
  assert_indices(info.nodes[0].dependents, info.nodes[0].dependent_count, (size_t[]){1}, 1);
  assert_indices(info.nodes[1].dependencies, info.nodes[1].dependency_count, (size_t[]){0}, 1);
  assert_indices(info.nodes[1].dependents, info.nodes[1].dependent_count, (size_t[]){2, 3}, 2);
  assert_indices(info.nodes[2].dependencies, info.nodes[2].dependency_count, (size_t[]){1}, 1);
  assert_indices(info.nodes[2].dependents, info.nodes[2].dependent_count, (size_t[]){4}, 1);
  assert_indices(info.nodes[3].dependencies, info.nodes[3].dependency_count, (size_t[]){1}, 1);
  assert_indices(info.nodes[3].dependents, info.nodes[3].dependent_count, NULL, 0);
  assert_indices(info.nodes[4].dependencies, info.nodes[4].dependency_count, (size_t[]){2}, 1);
  assert_indices(info.nodes[4].dependents, info.nodes[4].dependent_count, (size_t[]){5}, 1);
  assert_indices(info.nodes[5].dependencies, info.nodes[5].dependency_count, (size_t[]){4}, 1);
  assert_indices(info.nodes[5].dependents, info.nodes[5].dependent_count, NULL, 0);
  recap__graph_info_clear(&info);
  assert_int_equal(info.node_count, 0);
  assert_null(info.nodes);
  assert_int_equal(info.edge_count, 0);
  recap__graph_info_clear(&info); /* twice is harmless */
  recap__graph_info_clear(NULL);
  assert_int_equal(ops->graph_inspect(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  /* DOT, and an unwritable path. */
  char path[64], dot[1024];
  snprintf(path, sizeof path, "/tmp/recap_fake_%ld.dot", (long)getpid());
  assert_int_equal(ops->graph_debug_dot(g, path), RECAP_SUCCESS);
  read_file(path, dot, sizeof dot);
  remove(path);
  assert_true(strncmp(dot, "digraph fake {", 14) == 0);
  assert_non_null(strstr(dot, "n0 [label=\"0: kernel a\"];"));
  assert_non_null(strstr(dot, "n5 [label=\"5: kernel q\\\"x\\\\\"];"));
  assert_non_null(strstr(dot, "n1 -> n2;"));
  assert_non_null(strstr(dot, "n1 -> n3;"));
  assert_non_null(strstr(dot, "n4 -> n5;"));
  assert_non_null(strstr(dot, "}\n"));
  recap_clear_last_error();
  assert_int_equal(ops->graph_debug_dot(g, "/nonexistent-recap-dir/g.dot"), RECAP_ERROR_IO);
  assert_last_error_has("/nonexistent-recap-dir/g.dot");
  assert_int_equal(ops->graph_debug_dot(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  /* A destroyed or foreign graph is an invalid value, found without touching it. */
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_inspect(g, &info), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_debug_dot(g, path), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_destroy(g), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidValue");
  assert_int_equal(ops->graph_destroy(NULL), RECAP_SUCCESS);
}

static void instantiate_and_launch(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t other = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_THREAD_LOCAL), RECAP_SUCCESS);
  for (int i = 0; i < 3; i++) recap__fake_stream_enqueue(s);
  recap_cuda_graph_t g = end_capture(s);

  recap_cuda_graph_exec_t x = NULL, y = NULL;
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  assert_non_null(x);
  assert_int_equal(ops->graph_instantiate(&y, g), RECAP_SUCCESS); /* as many as wanted */
  assert_int_equal(recap__fake_now().live_execs, 2);
  assert_int_equal(ops->graph_instantiate(NULL, g), RECAP_ERROR_INVALID_ARGUMENT);
  recap_cuda_graph_exec_t z = (recap_cuda_graph_exec_t)&z;
  assert_int_equal(ops->graph_instantiate(&z, (recap_cuda_graph_t)&z), RECAP_ERROR_CUDA);
  assert_null(z);

  /* A launch is work on its stream: an event recorded after it waits for it. */
  recap__event_t e;
  assert_int_equal(ops->event_create(&e), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, other), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(e, other), RECAP_SUCCESS);
  assert_false(query(e));
  recap__fake_stream_complete(other);
  assert_true(query(e));
  assert_int_equal(recap__fake_now().graph_launches, 1);

  /* The template may go before its executables, which live on (as in CUDA). */
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  for (int i = 0; i < 3; i++) assert_int_equal(ops->graph_launch(x, s), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(y, NULL), RECAP_SUCCESS); /* the legacy stream is fine */
  assert_int_equal(recap__fake_now().graph_launches, 5);
  assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
  assert_false(query(e));
  assert_int_equal(ops->stream_synchronize(s), RECAP_SUCCESS);
  assert_true(query(e));

  /* An empty capture makes an empty graph, whose launches do nothing. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED), RECAP_SUCCESS);
  recap_cuda_graph_t empty = end_capture(s);
  size_t count = 99;
  assert_int_equal(ops->graph_node_count(empty, &count), RECAP_SUCCESS);
  assert_int_equal(count, 0);
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(empty, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 0);
  assert_null(info.nodes);
  assert_int_equal(info.edge_count, 0);
  recap_cuda_graph_exec_t ex;
  assert_int_equal(ops->graph_instantiate(&ex, empty), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(ex, s), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
  recap__fake_stream_complete(s);
  assert_true(query(e));
  assert_int_equal(recap__fake_now().graph_launches, 6);

  assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
  assert_int_equal(ops->graph_exec_destroy(y), RECAP_SUCCESS);
  assert_int_equal(ops->graph_exec_destroy(ex), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(empty), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_execs, 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(ops->graph_launch(x, s), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_exec_destroy(x), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_exec_destroy(NULL), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().graph_launches, 6);
  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);
}

static void launch_into_capture(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t t = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(s, "inner");
  recap_cuda_graph_t inner = end_capture(s);
  recap_cuda_graph_exec_t x;
  assert_int_equal(ops->graph_instantiate(&x, inner), RECAP_SUCCESS);

  /* Launched on a capturing stream, a graph becomes a child-graph node and does not run. */
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, t), RECAP_SUCCESS);
  recap__fake_launch_kernel(t, "after");
  recap_cuda_graph_t outer = end_capture(t);
  assert_int_equal(recap__fake_now().graph_launches, 0);
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(outer, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 2);
  assert_int_equal(info.nodes[0].type, RECAP_NODE_GRAPH);
  assert_null(info.nodes[0].kernel_name);
  assert_int_equal(info.nodes[0].grid[0], 0);
  assert_int_equal(info.nodes[1].type, RECAP_NODE_KERNEL);
  assert_string_equal(info.nodes[1].kernel_name, "after");
  assert_indices(info.nodes[1].dependencies, info.nodes[1].dependency_count, (size_t[]){0}, 1);
  assert_int_equal(info.edge_count, 1);
  recap__graph_info_clear(&info);

  char path[64], dot[512];
  snprintf(path, sizeof path, "/tmp/recap_fake_outer_%ld.dot", (long)getpid());
  assert_int_equal(ops->graph_debug_dot(outer, path), RECAP_SUCCESS);
  read_file(path, dot, sizeof dot);
  remove(path);
  assert_non_null(strstr(dot, "n0 [label=\"0: graph\"];"));
  assert_non_null(strstr(dot, "n1 [label=\"1: kernel after\"];"));

  /* Into an invalidated capture, the launch fails as CUDA's does. */
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_capture_invalidate(t);
  recap_clear_last_error();
  assert_int_equal(ops->graph_launch(x, t), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureInvalidated");
  assert_false(recap__fake_capture_end(t));

  assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(inner), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(outer), RECAP_SUCCESS);
}

static void end_capture_errors(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t side = recap__fake_stream_new();
  recap_cuda_graph_t g = (recap_cuda_graph_t)&g;

  /* Not capturing, or no place for the graph. */
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_ERROR_INVALID_USAGE);
  assert_null(g);
  assert_last_error_has("not capturing");
  assert_int_equal(ops->stream_end_capture(NULL, &g), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(ops->stream_end_capture((recap_stream_t)&g, &g), RECAP_ERROR_CUDA);
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->stream_end_capture(s, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);

  /* An illegal call invalidates the capture: ending it fails and names the cause, the stream
   * stops capturing, no graph is left, and the stream can capture again. */
  recap__fake_stream_enqueue(s);
  void *p = &p;
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_ERROR_CAPTURE_INVALIDATED);
  recap__fake_stream_enqueue(s); /* ignored: the capture records nothing more */
  g = (recap_cuda_graph_t)&g;
  recap_clear_last_error();
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(recap_last_status(), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureInvalidated");
  assert_last_error_has("illegal call");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_stream_enqueue(s);
  g = end_capture(s);
  size_t count = 0;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 1); /* nothing of the invalidated capture is carried over */
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);

  /* Ending from a joined stream is unmatched: refused, and the capture is invalidated. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_true(recap__fake_capture_join(side, s));
  recap_clear_last_error();
  assert_int_equal(ops->stream_end_capture(side, &g), RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("cudaErrorStreamCaptureUnmatched");
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

typedef struct end_thread {
  recap_stream_t stream;
  recap_status_t status;
  recap_cuda_graph_t graph;
} end_thread_t;

static void *end_thread_main(void *arg) {
  end_thread_t *t = arg;
  t->status = recap__fake_ops.stream_end_capture(t->stream, &t->graph);
  return NULL;
}

static recap_status_t end_in_other_thread(recap_stream_t s, recap_cuda_graph_t *g) {
  end_thread_t t = {.stream = s};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, end_thread_main, &t), 0);
  pthread_join(thread, NULL);
  *g = t.graph;
  return t.status;
}

static void end_capture_from_other_thread(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_cuda_graph_t g = NULL;

  /* Global and thread-local captures must end in the thread that began them... */
  for (int m = RECAP__CAPTURE_MODE_GLOBAL; m <= RECAP__CAPTURE_MODE_THREAD_LOCAL; m++) {
    assert_int_equal(ops->stream_begin_capture(s, (recap__capture_mode_t)m), RECAP_SUCCESS);
    recap__fake_stream_enqueue(s);
    assert_int_equal(end_in_other_thread(s, &g), RECAP_ERROR_INVALID_USAGE);
    assert_null(g);
    /* ...and the attempt leaves the capture intact. */
    assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
    g = end_capture(s);
    assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  }
  /* A relaxed one may end anywhere. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED), RECAP_SUCCESS);
  recap__fake_stream_enqueue(s);
  assert_int_equal(end_in_other_thread(s, &g), RECAP_SUCCESS);
  size_t count = 0;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

/* Graphs, executables and captures under way all go with a reset (the leak check confirms). */
static void reset_frees_graphs(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t t = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(s, "kept");
  recap_cuda_graph_t g = end_capture(s);
  recap_cuda_graph_exec_t x;
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, s), RECAP_SUCCESS);
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(t, "pending");
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 1);

  recap__fake_reset(NULL);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
  assert_int_equal(recap__fake_now().graph_launches, 0);
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) assert_int_equal(recap__fake_now().calls[k], 0);
  /* The armed fault went too. */
  recap_stream_t u = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(u, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  g = end_capture(u);
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, u), RECAP_SUCCESS);
  recap__fake_reset(NULL);
}

/* ---- fault injection -------------------------------------------------------------------- */

/* What the calls of every kind need, made before any fault is armed. */
typedef struct fault_fixture {
  recap_stream_t stream;
  recap__event_t event;
  recap_cuda_graph_t graph; /* two kernel nodes */
  recap_cuda_graph_exec_t exec;
} fault_fixture_t;

static void fixture_make(fault_fixture_t *fx) {
  fx->stream = recap__fake_stream_new();
  assert_int_equal(ops->event_create(&fx->event), RECAP_SUCCESS);
  /* Begun through the test control, so that only the end counts as a call. */
  assert_int_not_equal(recap__fake_capture_begin(fx->stream, RECAP__CAPTURE_MODE_GLOBAL), 0);
  recap__fake_stream_enqueue(fx->stream);
  recap__fake_stream_enqueue(fx->stream);
  assert_int_equal(ops->stream_end_capture(fx->stream, &fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->graph_instantiate(&fx->exec, fx->graph), RECAP_SUCCESS);
}

static void fixture_free(fault_fixture_t *fx) {
  assert_int_equal(ops->graph_exec_destroy(fx->exec), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(fx->event), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

/* One call of kind, cleaning up after itself on success. Calls of other kinds it needs go
 * through the test controls, which are not counted and never fail. */
static recap_status_t call_kind(recap__fake_fault_t kind, fault_fixture_t *fx) {
  recap_stream_t s = fx->stream;
  recap_status_t st = RECAP_SUCCESS;
  switch (kind) {
    case RECAP__FAKE_FAULT_RAW_MALLOC: {
      void *p;
      st = ops->raw_malloc(&p, 1024);
      if (st == RECAP_SUCCESS) ops->raw_free(p);
      break;
    }
    case RECAP__FAKE_FAULT_EVENT_CREATE: {
      recap__event_t x;
      st = ops->event_create(&x);
      if (st == RECAP_SUCCESS) ops->event_destroy(x);
      break;
    }
    case RECAP__FAKE_FAULT_EVENT_RECORD: st = ops->event_record(fx->event, s); break;
    case RECAP__FAKE_FAULT_STREAM_CREATE: {
      recap_stream_t x;
      st = ops->stream_create(&x);
      if (st == RECAP_SUCCESS) ops->stream_destroy(x);
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_BEGIN:
      st = ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL);
      if (st == RECAP_SUCCESS) assert_true(recap__fake_capture_end(s));
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    case RECAP__FAKE_FAULT_CAPTURE_END: {
      assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
      recap__fake_stream_enqueue(s);
      recap_cuda_graph_t g = (recap_cuda_graph_t)&g;
      st = ops->stream_end_capture(s, &g);
      if (st == RECAP_SUCCESS)
        assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
      else
        assert_null(g);
      /* Failed or not, the capture is over. */
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    }
    case RECAP__FAKE_FAULT_INSTANTIATE: {
      recap_cuda_graph_exec_t x = (recap_cuda_graph_exec_t)&x;
      st = ops->graph_instantiate(&x, fx->graph);
      if (st == RECAP_SUCCESS)
        assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
      else
        assert_null(x);
      break;
    }
    case RECAP__FAKE_FAULT_LAUNCH: {
      uint64_t launches = recap__fake_now().graph_launches;
      st = ops->graph_launch(fx->exec, s);
      assert_int_equal(recap__fake_now().graph_launches, launches + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_KINDS: break;
  }
  return st;
}

static void fault_injection(void **state) {
  (void)state;
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) {
    recap__fake_fault_t kind = (recap__fake_fault_t)k;
    recap__fake_reset(NULL);
    fault_fixture_t fx;
    fixture_make(&fx);
    uint64_t base = recap__fake_now().calls[kind];
    recap_status_t expected =
        kind == RECAP__FAKE_FAULT_RAW_MALLOC ? RECAP_ERROR_OUT_OF_MEMORY : RECAP_ERROR_CUDA;

    /* Two calls before arming count, but do not shift the target. */
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    recap__fake_fail_nth(kind, 3);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    recap_clear_last_error();
    assert_int_equal(call_kind(kind, &fx), expected);
    assert_int_equal(recap_last_status(), expected);
    assert_last_error_has("fault injected");
    /* Once only. */
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(recap__fake_now().calls[kind], base + 7);

    /* 1 fails the very next call; 0 disarms. */
    recap__fake_fail_nth(kind, 1);
    assert_int_equal(call_kind(kind, &fx), expected);
    recap__fake_fail_nth(kind, 2);
    recap__fake_fail_nth(kind, 0);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(recap__fake_now().calls[kind], base + 10);

    /* Other kinds are unaffected by an armed fault. */
    recap__fake_fail_nth(kind, 1);
    for (int other = 0; other < RECAP__FAKE_FAULT_KINDS; other++)
      if (other != k) assert_int_equal(call_kind((recap__fake_fault_t)other, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), expected);

    assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
    assert_int_equal(recap__fake_now().live_graphs, 1);
    assert_int_equal(recap__fake_now().live_execs, 1);
    fixture_free(&fx);
    assert_int_equal(recap__fake_now().live_events, 0);
  }

  /* A failed raw_malloc leaves nothing behind and sets *ptr to NULL. */
  recap__fake_reset(NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RAW_MALLOC, 1);
  void *p = &p;
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  assert_last_error_has("cudaErrorMemoryAllocation");
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* Copies and memsets in a capture become nodes that report their sizes, as the CUDA seam reads
 * them from the memcpy and memset node parameters; kernels report none. */
static void copy_and_memset_nodes_report_their_bytes(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  void *a = NULL, *b = NULL;
  assert_int_equal(ops->raw_malloc(&a, 8192), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc(&b, 8192), RECAP_SUCCESS);

  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->memcpy_async(b, a, 4096, s), RECAP_SUCCESS); /* 0 */
  recap__fake_memset_async(s, b, 0, 1000);                           /* 1 */
  recap__fake_launch_kernel(s, "k");                                 /* 2 */
  recap__fake_memset_async(s, a, 7, 0);                              /* 3: an empty memset */
  recap_cuda_graph_t g = end_capture(s);

  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(g, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 4);
  assert_int_equal(info.nodes[0].type, RECAP_NODE_MEMCPY);
  assert_int_equal(info.nodes[0].bytes, 4096);
  assert_int_equal(info.nodes[1].type, RECAP_NODE_MEMSET);
  assert_int_equal(info.nodes[1].bytes, 1000);
  assert_int_equal(info.nodes[2].type, RECAP_NODE_KERNEL);
  assert_int_equal(info.nodes[2].bytes, 0);
  assert_int_equal(info.nodes[3].type, RECAP_NODE_MEMSET);
  assert_int_equal(info.nodes[3].bytes, 0);
  recap__graph_info_clear(&info);

  /* Nothing ran in the capture: the memset did not touch b. Eagerly it sets the bytes. */
  memset(b, 0x5a, 8192);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  recap__fake_memset_async(s, b, 0, 1000);
  assert_int_equal(((unsigned char *)b)[999], 0);
  assert_int_equal(((unsigned char *)b)[1000], 0x5a);
  assert_int_equal(ops->raw_free(a), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(b), RECAP_SUCCESS);
}

/* A device that recap's kernels have no image for: the random-number kernels fail before
 * anything is launched, with the message of the CUDA seam naming the compute capability. */
static void kernels_without_an_image_name_the_compute_capability(void **state) {
  (void)state;
  recap__fake_reset(&(recap__fake_config_t){.compute_capability = 75, .no_kernel_image = true});
  recap_stream_t s = recap__fake_stream_new();
  uint64_t *words = NULL;
  float *out = NULL;
  assert_int_equal(ops->raw_malloc((void **)&words, 2 * sizeof *words), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc((void **)&out, 16 * sizeof *out), RECAP_SUCCESS);
  words[0] = words[1] = 99;
  char want[512];
  snprintf(want, sizeof want,
           "recap's kernels were built for CUDA architectures %s; this GPU (device 0, fake "
           "device) has compute capability 7.5: rebuild recap with "
           "-DCMAKE_CUDA_ARCHITECTURES=75",
           recap__device_cuda_architectures());
  assert_non_null(strstr(recap__device_cuda_architectures(), "-real"));

  uint64_t writes = recap__fake_now().rng_state_writes, launches = recap__fake_now().rng_launches;
  recap_clear_last_error();
  assert_int_equal(ops->rng_write_state(s, words, 1, 2), RECAP_ERROR_NOT_SUPPORTED);
  assert_string_equal(recap_last_error(), want);
  assert_int_equal(words[0], 99);

  recap__rng_launch_t l = {.kind = RECAP__RNG_UNIFORM, .out = out, .n = 16, .stream = s};
  uint64_t increment = 0;
  recap__rng_shape(l.n, &l.grid, &increment);
  recap_clear_last_error();
  assert_int_equal(ops->rng_launch(&l), RECAP_ERROR_NOT_SUPPORTED);
  assert_string_equal(recap_last_error(), want);
  /* In a capture too: no node is added. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->rng_launch(&l), RECAP_ERROR_NOT_SUPPORTED);
  recap_cuda_graph_t g = end_capture(s);
  size_t count = 99;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 0);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().rng_state_writes, writes);
  assert_int_equal(recap__fake_now().rng_launches, launches);

  /* A device recap's kernels cover runs them. */
  recap__fake_reset(NULL);
  s = recap__fake_stream_new();
  assert_int_equal(ops->raw_malloc((void **)&words, 2 * sizeof *words), RECAP_SUCCESS);
  assert_int_equal(ops->rng_write_state(s, words, 1, 2), RECAP_SUCCESS);
  assert_int_equal(words[0], 1);
  assert_int_equal(words[1], 2);
  assert_int_equal(recap__fake_now().rng_state_writes, writes + 1);
}

/* ---- reset ------------------------------------------------------------------------------ */

static void reset_frees_everything(void **state) {
  (void)state;
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

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(memory_accounting),
    cmocka_unit_test(capacity_out_of_memory),
    cmocka_unit_test(many_blocks),
    cmocka_unit_test(devices),
    cmocka_unit_test(events_follow_streams),
    cmocka_unit_test(stream_create_destroy),
    cmocka_unit_test(capture_ids_and_statuses),
    cmocka_unit_test(events_refused_on_capturing_streams),
    cmocka_unit_test(malloc_during_capture),
    cmocka_unit_test(thread_local_capture),
    cmocka_unit_test(global_capture_in_other_thread),
    cmocka_unit_test(threads_stress),
    cmocka_unit_test(begin_capture_rules),
    cmocka_unit_test(capture_builds_graph),
    cmocka_unit_test(instantiate_and_launch),
    cmocka_unit_test(launch_into_capture),
    cmocka_unit_test(end_capture_errors),
    cmocka_unit_test(end_capture_from_other_thread),
    cmocka_unit_test(reset_frees_graphs),
    cmocka_unit_test(fault_injection),
    cmocka_unit_test(copy_and_memset_nodes_report_their_bytes),
    cmocka_unit_test(kernels_without_an_image_name_the_compute_capability),
    cmocka_unit_test(reset_frees_everything),
};

int main(int argc, char **argv) { return RECAP_TEST_RUN(argc, argv, tests); }
