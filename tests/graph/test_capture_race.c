/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_capture_race.c — what other threads may do while recap_graph_capture_begin runs, on the
 * CPU fake device.
 *
 * Beginning a capture has two steps: the CUDA capture on the stream, and the allocator's route
 * for it. Between them, another thread's legal calls can touch the capturing stream: a free of a
 * block used on it (recap_record_stream) records an event there, an allocation queries the
 * events recorded there, and the end of another capture's route records the events it held
 * back. Any of these invalidates the new capture. recap routes first, so that the allocator
 * holds event work back from the moment the capture may exist.
 *
 * The first tests put each call exactly into that window: the fake runs a hook right after the
 * capture begins on the stream (recap__fake_after_capture_begin), and the hook makes the call
 * from another thread. The last test lets two threads race through thousands of captures.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "graph_util.h"
#include "capture_util.h"
#include "harness.h"

/* What the hook does in the window, and what came of it. */
typedef struct window {
  void *block;           /* the block to free */
  recap_stream_t stream; /* where to allocate */
  recap_graph_t other;   /* the other capture to end */
  recap_stream_t other_stream;
  void *allocated; /* what the allocation returned */
  recap_status_t status;
  int ran;
} window_t;

static void run_in_other_thread(void *(*fn)(void *), window_t *w) {
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, fn, w), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  w->ran++;
}

static void *free_block(void *arg) {
  window_t *w = arg;
  w->status = recap_free(w->block);
  return NULL;
}

static void *allocate(void *arg) {
  window_t *w = arg;
  w->status = recap_malloc(&w->allocated, 4 * KiB, w->stream);
  return NULL;
}

static void *end_other_capture(void *arg) {
  window_t *w = arg;
  w->status = recap_graph_capture_end(w->other);
  return NULL;
}

static void free_in_window(void *ctx, recap_stream_t stream) {
  (void)stream;
  run_in_other_thread(free_block, ctx);
}

static void allocate_in_window(void *ctx, recap_stream_t stream) {
  (void)stream;
  run_in_other_thread(allocate, ctx);
}

static void end_other_capture_in_window(void *ctx, recap_stream_t stream) {
  (void)stream;
  run_in_other_thread(end_other_capture, ctx);
}

static recap_capture_options_t thread_local_mode(void) {
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  return opts;
}

/* p's block is held until the work on s is done, and handed out again after. */
static void expect_held_until_done(void *p, recap_stream_t alloc_stream, recap_stream_t s) {
  void *q = NULL, *r = NULL;
  OK(recap_malloc(&q, 4 * KiB, alloc_stream));
  assert_ptr_not_equal(q, p);
  recap__fake_stream_complete(s);
  OK(recap_malloc(&r, 4 * KiB, alloc_stream));
  assert_ptr_equal(r, p);
  FREE_ALL(q, r);
}

/* Capture two kernels on s into g; the capture began already. */
static void finish_capture(recap_graph_t g, recap_stream_t s) {
  assert_int_equal(capturing(s), 1);
  launch(s, 2);
  OK(recap_graph_capture_end(g));
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 2);
  OK(recap_graph_replay(g, s));
}

/* ------------------------------------------------------------------------------------------
 * One call in the window
 * ---------------------------------------------------------------------------------------- */

/* A thread-local capture of a new graph begins on s, with `hook` run in the window between the
 * device's capture begin and recap's; the hook must have run once and succeeded. */
static recap_graph_t begin_with_hook(recap_stream_t s, recap__fake_capture_hook_t hook,
                                     window_t *w) {
  recap__fake_after_capture_begin(hook, w);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t opts = thread_local_mode();
  OK(recap_graph_capture_begin(g, &opts, s));
  assert_int_equal(w->ran, 1);
  OK(w->status);
  return g;
}

/* A block used on the stream that is about to capture is freed in the window: its event waits
 * until the capture ends instead of being recorded on the capturing stream. */
RECAP_TEST(free_while_capture_begins) {
  reset();
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_stream_t s = recap__fake_stream_new(), a = recap__fake_stream_new();
  void *p = block_used_on(a, s);
  launch(s, 1);
  window_t w = {.block = p};
  recap_graph_t g = begin_with_hook(s, free_in_window, &w);
  finish_capture(g, s);
  assert_int_equal(log.warnings, 0);
  recap_test_log_stop();
  expect_held_until_done(p, a, s);
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* An allocation in the window finds an event pending on the stream about to capture: it must
 * not query it (querying work of a capturing stream invalidates the capture). */
RECAP_TEST(malloc_while_capture_begins) {
  reset();
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_stream_t s = recap__fake_stream_new(), a = recap__fake_stream_new();
  void *p = block_used_on(a, s);
  launch(s, 1);
  OK(recap_free(p)); /* an event on s, pending until s's work is done */
  window_t w = {.stream = a};
  recap_graph_t g = begin_with_hook(s, allocate_in_window, &w);
  /* The allocation could not know the event was done, so it did not take p's block. */
  assert_non_null(w.allocated);
  assert_ptr_not_equal(w.allocated, p);
  finish_capture(g, s);
  assert_int_equal(log.warnings, 0);
  recap_test_log_stop();
  OK(recap_free(w.allocated));
  recap__fake_stream_complete(s);
  expect_block_free_again(p, a);
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* Another capture ends its route in the window, with a block freed during it that the stream
 * about to capture used: the block's event waits for this capture's end too. */
RECAP_TEST(route_end_while_capture_begins) {
  reset();
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_stream_t s = recap__fake_stream_new(), a = recap__fake_stream_new();
  recap_stream_t t = recap__fake_stream_new();
  void *p = block_used_on(a, s);
  launch(s, 1);
  /* The other capture is relaxed, so that the hook's thread may end it. */
  recap_graph_t other;
  OK(recap_graph_create(&other, 0));
  recap_capture_options_t relaxed = RECAP_CAPTURE_OPTIONS_INIT;
  relaxed.mode = RECAP_CAPTURE_MODE_RELAXED;
  OK(recap_graph_capture_begin(other, &relaxed, t));
  launch(t, 1);
  OK(recap_free(p)); /* during a capture: its event is held back until no route is left */
  window_t w = {.other = other, .other_stream = t};
  recap_graph_t g = begin_with_hook(s, end_other_capture_in_window, &w);
  assert_int_equal(capturing(t), 0);
  finish_capture(g, s);
  OK(recap_graph_replay(other, t));
  assert_int_equal(log.warnings, 0);
  recap_test_log_stop();
  expect_held_until_done(p, a, s);
  DESTROY_GRAPHS(g, other);
  expect_all_released();
}

/* ------------------------------------------------------------------------------------------
 * Two threads racing
 * ---------------------------------------------------------------------------------------- */

/* At least this many captures in the capturing thread and this many rounds of frees in the
 * other, however the two threads are scheduled. */
enum { RACE_CAPTURES = 20000, RACE_ROUNDS = 20000 };

typedef struct race {
  recap_stream_t s; /* the capturing thread's stream, used by the other thread's blocks */
  pthread_barrier_t start;
  _Atomic int done;       /* the capturing thread finished */
  _Atomic int rounds;     /* made by the other thread so far */
  _Atomic int other_done; /* the other thread stopped (it stops early on a failure) */
  int captures;           /* made by the capturing thread */
  int broken;             /* of those, begun or ended with a failure */
  int other_captures;     /* made by the other thread */
  int other_broken;
  char first[512]; /* the first failure's message (each thread writes its own half) */
  char other_first[512];
} race_t;

static void note(char *first, size_t size, const char *call, recap_status_t s) {
  if (!first[0])
    snprintf(first, size, "%s: %s: %s", call, recap_status_name(s), recap_last_error());
}

/* RACE_CAPTURES captures at least, and on until the other thread made its rounds or stopped. */
static bool keep_capturing(race_t *r, int made) {
  if (made < RACE_CAPTURES) return true;
  return atomic_load(&r->rounds) < RACE_ROUNDS && !atomic_load(&r->other_done);
}

/* Captures back to back on one stream, in thread-local mode. */
static void *capturing_thread(void *arg) {
  race_t *r = arg;
  recap_graph_t g = NULL;
  recap_status_t st = recap_graph_create(&g, 0);
  recap_capture_options_t opts = thread_local_mode();
  pthread_barrier_wait(&r->start);
  for (int i = 0; st == RECAP_SUCCESS && keep_capturing(r, i); i++) {
    r->captures++;
    st = recap_graph_capture_begin(g, &opts, r->s);
    if (st != RECAP_SUCCESS) {
      note(r->first, sizeof r->first, "capture_begin", st);
      r->broken++;
      st = RECAP_SUCCESS;
      continue;
    }
    recap__fake_launch_kernel(r->s, "race_kernel");
    st = recap_graph_capture_end(g);
    if (st != RECAP_SUCCESS) {
      note(r->first, sizeof r->first, "capture_end", st);
      r->broken++;
    }
    st = recap_graph_reset(g);
    if (i % 32 == 0) recap__fake_stream_complete(r->s);
  }
  if (st != RECAP_SUCCESS) note(r->first, sizeof r->first, "create or reset", st);
  if (recap_graph_destroy(g) != RECAP_SUCCESS) r->broken++;
  atomic_store(&r->done, 1);
  return NULL;
}

/* Meanwhile: frees of blocks used on the capturing stream, allocations that find their events
 * pending, and captures of its own whose ends release events held back during them. */
static void *churning_thread(void *arg) {
  race_t *r = arg;
  recap_stream_t x = recap__fake_stream_new(), t = recap__fake_stream_new();
  recap_graph_t g = NULL;
  recap_status_t st = recap_graph_create(&g, 0);
  recap_capture_options_t opts = thread_local_mode();
  pthread_barrier_wait(&r->start);
  for (int i = 0; st == RECAP_SUCCESS && !atomic_load(&r->done); i++) {
    void *p = NULL, *q = NULL;
    if ((st = recap_malloc(&p, 4 * KiB, x)) != RECAP_SUCCESS ||
        (st = recap_record_stream(p, r->s)) != RECAP_SUCCESS ||
        (st = recap_free(p)) != RECAP_SUCCESS ||
        (st = recap_malloc(&q, 4 * KiB, x)) != RECAP_SUCCESS ||
        (st = recap_free(q)) != RECAP_SUCCESS)
      break;
    if (i % 8 == 0) {
      r->other_captures++;
      if ((st = recap_malloc(&p, 4 * KiB, x)) != RECAP_SUCCESS ||
          (st = recap_record_stream(p, r->s)) != RECAP_SUCCESS)
        break;
      recap_status_t c = recap_graph_capture_begin(g, &opts, t);
      if ((st = recap_free(p)) != RECAP_SUCCESS) break;
      if (c == RECAP_SUCCESS) {
        recap__fake_launch_kernel(t, "churn_kernel");
        c = recap_graph_capture_end(g);
      }
      if (c != RECAP_SUCCESS) {
        note(r->other_first, sizeof r->other_first, "the other thread's capture", c);
        r->other_broken++;
      }
      if ((st = recap_graph_reset(g)) != RECAP_SUCCESS) break;
    }
    if (i % 16 == 0) recap__fake_stream_complete(x);
    atomic_fetch_add(&r->rounds, 1);
  }
  if (st != RECAP_SUCCESS) {
    note(r->other_first, sizeof r->other_first, "the other thread's allocations", st);
    r->other_broken++;
  }
  if (recap_graph_destroy(g) != RECAP_SUCCESS) r->other_broken++;
  atomic_store(&r->other_done, 1);
  return NULL;
}

/* The race itself: two plain threads, one capturing, one freeing blocks used on the
 * capturing stream; no capture may break. */
RECAP_TEST(two_threads_break_no_capture) {
  reset();
  recap_test_log_t log;
  recap_test_log_capture(&log);
  race_t r = {.s = recap__fake_stream_new()};
  pthread_barrier_init(&r.start, NULL, 2);
  pthread_t threads[2];
  assert_int_equal(pthread_create(&threads[0], NULL, capturing_thread, &r), 0);
  assert_int_equal(pthread_create(&threads[1], NULL, churning_thread, &r), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
  pthread_barrier_destroy(&r.start);
  recap_test_log_stop();
  if (r.broken || r.other_broken)
    fail_msg("%d of %d captures broke (the first: %s); in the other thread %d of %d (%s)", r.broken,
             r.captures, r.first, r.other_broken, r.other_captures, r.other_first);
  assert_true(r.captures >= RACE_CAPTURES);
  assert_true(atomic_load(&r.rounds) >= RACE_ROUNDS);
  assert_int_equal(log.warnings, 0);
  print_message("%d captures beside %d captures and their frees in another thread\n", r.captures,
                r.other_captures);
  recap__fake_stream_complete(r.s);
  expect_all_released();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(free_while_capture_begins),
    cmocka_unit_test(malloc_while_capture_begins),
    cmocka_unit_test(route_end_while_capture_begins),
    cmocka_unit_test(two_threads_break_no_capture),
};
RECAP_TEST_MAIN(tests)
