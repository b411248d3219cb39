/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stress_captures.c — frees across threads while other threads capture, on the CPU fake
 * device (docs/guarantees.md, "Threads": allocation, free and record_stream from many threads,
 * beside thread-local captures, are safe).
 *
 * Two capture threads each begin and end thread-local captures, round after round, into a pool
 * of their own that all their graphs share (each keeps its last graph captured and replays it,
 * as graphed callables do). Two free threads meanwhile allocate on their own streams, declare
 * with recap_record_stream that each block is used on a capture thread's stream, and hand the
 * block to the other free thread, which frees it: so frees that must record an event on a
 * stream that may be capturing, and allocations that look at such events, happen at every
 * moment of a capture's life, its first one included. No capture may break: every
 * capture_begin and capture_end succeeds, every replay too, and at the end the allocator's
 * checker passes and nothing is left. CI runs it under ThreadSanitizer too (the "tsan" preset).
 *
 * The capture threads meet at a quiet point every QUIET_EVERY rounds, where no capture is under
 * way and the allocator gives back the blocks freed during captures; the free threads wait for
 * the next quiet point while too many bytes are freed and not yet reusable. So what the test
 * holds is bounded by its rhythm, not by how fast the machine runs it or how its threads are
 * scheduled.
 *
 * It runs for a bounded time (RECAP_STRESS_SECONDS, default 1.5 s of capturing; a few
 * thousand captures in a release build, a few hundred under ThreadSanitizer), and for at least
 * MIN_ROUNDS rounds and one block handed across however slow the machine is.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake/fake.h"
#include "graph/registry.h"
#include "harness.h"
#include "fake_util.h"
#include "stress_util.h"
#include "recap.h"

/* Capture rounds end at quiet points (below), every QUIET_EVERY rounds, and a run has at least
 * MIN_ROUNDS of them whatever the machine's speed. */
enum {
  CAPTURE_THREADS = 2,
  FREE_THREADS = 2,
  MAX_ROUNDS = 100000,
  MIN_ROUNDS = 64,
  QUIET_EVERY = 8
};

/* The free threads wait while more than this many bytes are freed and not yet reusable (active
 * and not allocated, recap_memory_stats): see free_worker. An eighth of the vmm variant's 4 GiB
 * device. */
#define BACKLOG_BUDGET ((int64_t)512 << 20)

static double seconds(void) {
  const char *env = getenv("RECAP_STRESS_SECONDS");
  double s = env ? atof(env) : 1.5;
  return s > 0 ? s : 1.5;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define T_OK(expr) THREAD_OK(expr, round)

/* The streams the capture threads capture on, which the free threads record blocks on. */
static recap_stream_t capture_streams[CAPTURE_THREADS];
static _Atomic int capturing_threads; /* capture threads not finished yet */
static _Atomic int sending_threads;   /* free threads that may still hand blocks over */
static _Atomic uint64_t cross_total;  /* blocks handed to the other free thread so far */
static stress_barrier_t quiet;        /* the capture threads' quiet points */
static _Atomic bool stop_capturing;   /* decided at a quiet point, read by both */

/* ---- the capture threads -------------------------------------------------------------------- */

typedef struct capture_thread {
  int id;
  double until;
  int rounds; /* captures ended */
  int quiet_points;
} capture_thread_t;

/* Bytes freed and not yet reusable: active (allocated, or freed and waiting for events) and not
 * allocated. */
static int64_t backlog(void) {
  recap_memory_stats_t st = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(0, &st) != RECAP_SUCCESS) return 0;
  return st.active_bytes[RECAP_STAT_ALL].current - st.allocated_bytes[RECAP_STAT_ALL].current;
}

/* A quiet point: both capture threads stop between rounds, so that for a moment no capture is
 * under way. The allocator gives blocks freed with events on other streams back only then (it
 * may not query or record events while any capture is under way), so without quiet points the
 * free threads' blocks would come back only when the two threads' rounds happened to leave a
 * gap, and on a fast machine the 4 GiB device of the vmm variant filled first. Thread 0 makes
 * two allocations on its stream, which process the events (of two sizes, so that neither is the
 * block just freed, which the front cache would hand back without that processing), and decides
 * for both whether to stop: after `until`, MIN_ROUNDS and a block handed across. False when the
 * other thread failed. */
static bool quiet_point(capture_thread_t *t, recap_stream_t s, int round) {
  if (!barrier_wait(&quiet)) return false;
  if (t->id == 0) {
    for (int step = 0; step < 2; step++) {
      /* The first allocation records the events of the blocks freed during captures, on the
       * capture streams; those streams' work is finished (both threads are here, between
       * rounds), and the second allocation finds the events done and frees the blocks. */
      if (step == 1)
        for (int i = 0; i < CAPTURE_THREADS; i++) recap__fake_stream_complete(capture_streams[i]);
      void *p = NULL;
      recap_status_t st = recap_malloc(&p, (size_t)(1 + step) * KiB, s);
      if (st == RECAP_SUCCESS) st = recap_free(p);
      if (st != RECAP_SUCCESS) {
        thread_fail("capture thread 0: an allocation at a quiet point returned %s: %s (round %d)",
                    recap_status_name(st), recap_last_error(), round);
        return false;
      }
    }
    bool done = now() >= t->until && round + 1 >= MIN_ROUNDS && atomic_load(&cross_total) > 0;
    atomic_store(&stop_capturing, done || round + 1 >= MAX_ROUNDS || thread_failed());
  }
  t->quiet_points++;
  return barrier_wait(&quiet);
}

static void *capture_worker(void *arg) {
  capture_thread_t *t = arg;
  recap_stream_t s = capture_streams[t->id];
  recap_pool_id_t pool = recap_pool_handle();
  recap_graph_t kept = NULL, g = NULL;
  bool finished = false;
  int round = 0;
  for (;; round++) {
    T_OK(recap_graph_create(&g, 0));
    recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
    o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
    o.pool = pool;
    T_OK(recap_graph_capture_begin(g, &o, s));
    void *a = NULL, *b = NULL;
    T_OK(recap_malloc(&a, 64 * KiB, s));
    recap__fake_launch_kernel(s, "stress_capture");
    T_OK(recap_malloc(&b, (size_t)(1 + round % 3) * MiB, s));
    T_OK(recap_free(a));
    recap__fake_launch_kernel(s, "stress_capture2");
    T_OK(recap_free(b));
    T_OK(recap_graph_capture_end(g));
    t->rounds++;
    /* The graphs of one pool replay in the order they were captured: the older one first. */
    if (kept) T_OK(recap_graph_replay(kept, s));
    T_OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    if (kept) T_OK(recap_graph_destroy(kept));
    kept = g;
    g = NULL;
    if (round % QUIET_EVERY == QUIET_EVERY - 1) {
      if (!quiet_point(t, s, round)) goto out;
      if (atomic_load(&stop_capturing)) break;
    }
  }
  finished = true;
out:
  /* A failed thread breaks the quiet points' barrier, so that the other one does not wait for
   * it forever. */
  if (!finished) barrier_break(&quiet);
  recap_graph_destroy(g);
  recap_graph_destroy(kept);
  recap_status_t s_release = recap_pool_release(pool);
  /* The pool handle's graphs held every reference; the handle itself holds none. */
  if (s_release != RECAP_ERROR_INVALID_USAGE)
    thread_fail("capture thread %d: releasing a pool nobody holds returned %s", t->id,
                recap_status_name(s_release));
  recap__fake_stream_complete(s);
  atomic_fetch_sub(&capturing_threads, 1);
  return NULL;
}

/* ---- the free threads ----------------------------------------------------------------------- */

/* Blocks handed from one free thread to the other, which frees them. */
typedef struct mailbox {
  pthread_mutex_t lock;
  void *items[256];
  int count;
} mailbox_t;

typedef struct free_thread {
  int id;
  mailbox_t *inbox, *outbox;
  uint64_t allocations, stream_uses, cross_frees, waits;
  int64_t backlog_peak; /* the most bytes seen freed and not yet reusable */
} free_thread_t;

static int drain(mailbox_t *box, int round) {
  pthread_mutex_lock(&box->lock);
  int n = box->count;
  for (int i = 0; i < box->count; i++) {
    recap_status_t s = recap_free(box->items[i]);
    if (s != RECAP_SUCCESS)
      thread_fail("free thread: recap_free of a neighbour's block returned %s: %s (round %d)",
                  recap_status_name(s), recap_last_error(), round);
  }
  box->count = 0;
  pthread_mutex_unlock(&box->lock);
  return n;
}

static void *free_worker(void *arg) {
  free_thread_t *t = arg;
  recap_stream_t own = recap__fake_stream_new();
  uint64_t rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(t->id + 1);
  int round = 0;
  for (; atomic_load(&capturing_threads) > 0 && !thread_failed(); round++) {
    /* The rhythm: blocks freed during captures come back at the capture threads' quiet points
     * only, so a free thread that runs far ahead of the captures (a capture thread descheduled
     * in the middle of a capture on a loaded machine) waits for the next quiet point instead of
     * filling the device. */
    if (round % 16 == 0) {
      int64_t b = backlog();
      if (b > t->backlog_peak) t->backlog_peak = b;
      while (b > BACKLOG_BUDGET && atomic_load(&capturing_threads) > 0 && !thread_failed()) {
        t->waits++;
        nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
        b = backlog();
      }
    }
    void *p = NULL;
    size_t size = 512 + next_random(&rng) % (256 * KiB);
    T_OK(recap_malloc(&p, size, own));
    t->allocations++;
    /* Used on a capture thread's stream, which may be capturing at this very moment: the
     * free must not record an event on it then (it defers the event instead). */
    T_OK(recap_record_stream(p, capture_streams[next_random(&rng) % CAPTURE_THREADS]));
    t->stream_uses++;
    if (next_random(&rng) % 2) {
      T_OK(recap_free(p));
    } else {
      pthread_mutex_lock(&t->outbox->lock);
      bool full = t->outbox->count == (int)(sizeof t->outbox->items / sizeof t->outbox->items[0]);
      if (!full) t->outbox->items[t->outbox->count++] = p;
      pthread_mutex_unlock(&t->outbox->lock);
      if (full) {
        T_OK(recap_free(p));
      } else {
        t->cross_frees++;
        atomic_fetch_add(&cross_total, 1);
      }
    }
    drain(t->inbox, round);
    if (round % 16 == 15) recap__fake_stream_complete(own);
  }
out:
  while (atomic_load(&capturing_threads) > 0) sched_yield();
  /* The neighbour may hand over one more block until it stops: keep draining until then. */
  atomic_fetch_sub(&sending_threads, 1);
  while (atomic_load(&sending_threads) > 0) {
    drain(t->inbox, round);
    sched_yield();
  }
  drain(t->inbox, round);
  recap__fake_stream_complete(own);
  return NULL;
}

RECAP_TEST(frees_across_threads_during_captures) {
  reset();
  thread_failure_clear();
  recap_log_set(quiet_log, NULL);
  for (int i = 0; i < CAPTURE_THREADS; i++) capture_streams[i] = recap__fake_stream_new();
  atomic_store(&capturing_threads, CAPTURE_THREADS);
  atomic_store(&sending_threads, FREE_THREADS);
  atomic_store(&cross_total, 0);
  atomic_store(&stop_capturing, false);
  barrier_init(&quiet, CAPTURE_THREADS);
  mailbox_t boxes[FREE_THREADS];
  free_thread_t f[FREE_THREADS];
  capture_thread_t c[CAPTURE_THREADS];
  pthread_t threads[CAPTURE_THREADS + FREE_THREADS];
  for (int i = 0; i < FREE_THREADS; i++) {
    memset(&boxes[i], 0, sizeof boxes[i]);
    pthread_mutex_init(&boxes[i].lock, NULL);
  }
  for (int i = 0; i < FREE_THREADS; i++) {
    f[i] = (free_thread_t){.id = i, .inbox = &boxes[i], .outbox = &boxes[(i + 1) % FREE_THREADS]};
    assert_int_equal(pthread_create(&threads[CAPTURE_THREADS + i], NULL, free_worker, &f[i]), 0);
  }
  double until = now() + seconds();
  for (int i = 0; i < CAPTURE_THREADS; i++) {
    c[i] = (capture_thread_t){.id = i, .until = until};
    assert_int_equal(pthread_create(&threads[i], NULL, capture_worker, &c[i]), 0);
  }
  for (int i = 0; i < CAPTURE_THREADS + FREE_THREADS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < FREE_THREADS; i++) pthread_mutex_destroy(&boxes[i].lock);
  barrier_destroy(&quiet);
  recap_log_set(NULL, NULL);

  uint64_t allocations = 0, uses = 0, cross = 0, waits = 0;
  int64_t peak = 0;
  for (int i = 0; i < FREE_THREADS; i++) {
    allocations += f[i].allocations;
    uses += f[i].stream_uses;
    cross += f[i].cross_frees;
    waits += f[i].waits;
    if (f[i].backlog_peak > peak) peak = f[i].backlog_peak;
  }
  print_message(
      "%d threads x %d + %d thread-local captures into a shared pool each, %d quiet points; %d "
      "threads: %llu allocations, %llu record_stream on a capture thread's stream, %llu freed by "
      "the other thread; at most %lld MiB freed and not yet reusable, %llu waits for a quiet "
      "point\n",
      CAPTURE_THREADS, c[0].rounds, c[1].rounds, c[0].quiet_points, FREE_THREADS,
      (unsigned long long)allocations, (unsigned long long)uses, (unsigned long long)cross,
      (long long)(peak >> 20), (unsigned long long)waits);
  expect_no_thread_failure();
  assert_true(c[0].rounds >= MIN_ROUNDS && c[1].rounds == c[0].rounds && cross > 0);

  /* Everything was freed and destroyed: the statistics agree and nothing is left. */
  check();
  recap_memory_stats_t st = stats();
  assert_int_equal(st.allocation[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.allocated_bytes[RECAP_STAT_ALL].current, 0);
  for (int i = 0; i < CAPTURE_THREADS; i++) recap__fake_stream_complete(capture_streams[i]);
  OK(recap_empty_cache());
  check();
  st = stats();
  assert_int_equal(st.active_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(recap__registry_count(), 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(frees_across_threads_during_captures),
};
RECAP_TEST_MAIN(tests)
