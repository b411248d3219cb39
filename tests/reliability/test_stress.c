/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stress.c — the deterministic multi-threaded stress test, on the CPU fake device: it checks
 * that allocation from many threads, and thread-local captures from two threads at once, work.
 *
 * Each thread draws its operations from a generator seeded by its index, so a run does the same
 * work whatever the interleaving, and the checks at the end hold for every interleaving: every
 * block handed out was distinct (each carries its owner's tag at both ends, checked before it is
 * freed), the allocator's checker passes, and once everything is freed and the cache emptied the
 * fake device holds no memory. CI runs it under ThreadSanitizer (the "tsan" preset), where any
 * data race is a failure.
 *
 * RECAP_STRESS_SCALE=n multiplies the iteration counts (default 1: a few seconds under TSan).
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "harness.h"
#include "fake_util.h"
#include "stress_util.h"
#include "recap.h"

/* ---- shared helpers ----------------------------------------------------------------------- */

static int scale(void) {
  const char *env = getenv("RECAP_STRESS_SCALE");
  int n = env ? atoi(env) : 1;
  return n > 0 ? n : 1;
}

#define T_OK(expr) THREAD_OK(expr, -1)

static _Atomic int warnings;

static void begin(void) {
  reset();
  recap__graphs_disabled_override(0);
  thread_failure_clear();
  atomic_store(&warnings, 0);
  recap_log_set(quiet_log, (void *)&warnings);
}

/* Everything freed and destroyed: nothing may be left once the cache is emptied. */
static void expect_nothing_left(void) {
  recap_log_set(NULL, NULL);
  OK(recap_empty_cache());
  check();
  assert_int_equal(recap__registry_count(), 0);
  recap_memory_stats_t s = stats();
  assert_int_equal(s.allocation[RECAP_STAT_ALL].current, 0);
  assert_int_equal(s.reserved_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

/* A block's tag: its owner and serial number, written at both ends of the block. */
static void tag(void *p, size_t size, uint64_t tag_value) {
  memcpy(p, &tag_value, sizeof tag_value);
  memcpy((char *)p + size - sizeof tag_value, &tag_value, sizeof tag_value);
}

static bool tag_holds(const void *p, size_t size, uint64_t tag_value) {
  uint64_t a, b;
  memcpy(&a, p, sizeof a);
  memcpy(&b, (const char *)p + size - sizeof b, sizeof b);
  return a == tag_value && b == tag_value;
}

/* ---- many threads allocate, free, and hand blocks to each other ---------------------------- */

/* MAILBOX: the blocks a thread may have handed to its neighbour and not had freed yet. */
enum { ALLOC_THREADS = 8, SLOTS = 24, MAILBOX = 16 };

typedef struct slot {
  void *p;
  size_t size;
  uint64_t tag;
} slot_t;

/* Blocks handed to a neighbour, who checks and frees them (frees from another thread). It holds
 * MAILBOX blocks: a thread whose neighbour lags waits for room (send), so that a send never
 * fails and each thread's sequence of operations is the same in every run, whatever the
 * interleaving, while what the mailboxes hold stays bounded however the threads are scheduled
 * (unbounded, a neighbour not yet scheduled on a loaded machine let them hold gigabytes and
 * the 4 GiB device of the vmm variant ran out). */
typedef struct mailbox {
  pthread_mutex_t lock;
  slot_t items[MAILBOX];
  size_t count;
} mailbox_t;

typedef struct alloc_thread {
  int id;
  int iterations;
  recap_stream_t own, shared;
  mailbox_t *inbox, *outbox;
  _Atomic int *running;
  uint64_t allocations, cross_frees, stream_uses;
} alloc_thread_t;

static size_t pick_size(uint64_t *rng) {
  uint64_t r = next_random(rng) % 100;
  if (r < 70) return 16 + next_random(rng) % (64 * KiB);     /* small pool */
  if (r < 95) return 1 * MiB + next_random(rng) % (8 * MiB); /* large segments */
  return 10 * MiB + next_random(rng) % (14 * MiB);           /* own segments */
}

static bool check_and_free(const slot_t *s, const char *who) {
  if (!tag_holds(s->p, s->size, s->tag)) {
    thread_fail(
        "%s: the tag of block %p (%zu bytes) was overwritten: two callers got "
        "overlapping blocks",
        who, s->p, s->size);
    return false;
  }
  recap_status_t st = recap_free(s->p);
  if (st != RECAP_SUCCESS) {
    thread_fail("%s: recap_free returned %s: %s", who, recap_status_name(st), recap_last_error());
    return false;
  }
  return true;
}

static void drain(mailbox_t *box, const char *who) {
  pthread_mutex_lock(&box->lock);
  for (size_t i = 0; i < box->count; i++) check_and_free(&box->items[i], who);
  box->count = 0;
  pthread_mutex_unlock(&box->lock);
}

/* Hand s to the neighbour. While its mailbox is full, free what this thread was handed
 * meanwhile (the thread behind may be waiting for that room in turn, so a ring of full mailboxes
 * always drains) and let the neighbour run. */
static void send(alloc_thread_t *t, const slot_t *s) {
  mailbox_t *box = t->outbox;
  for (;;) {
    pthread_mutex_lock(&box->lock);
    bool room = box->count < MAILBOX;
    if (room) box->items[box->count++] = *s;
    pthread_mutex_unlock(&box->lock);
    if (room) return;
    drain(t->inbox, "alloc_worker (neighbour's block, waiting to send)");
    sched_yield();
  }
}

static void *alloc_worker(void *arg) {
  alloc_thread_t *t = arg;
  uint64_t rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(t->id + 1);
  slot_t slots[SLOTS];
  memset(slots, 0, sizeof slots);
  uint64_t serial = 0;
  for (int it = 0; it < t->iterations; it++) {
    slot_t *s = &slots[next_random(&rng) % SLOTS];
    uint64_t op = next_random(&rng) % 100;
    if (!s->p) {
      s->size = pick_size(&rng);
      recap_stream_t stream = op < 80 ? t->own : t->shared;
      T_OK(recap_malloc(&s->p, s->size, stream));
      s->tag = ((uint64_t)t->id << 48) | ++serial;
      tag(s->p, s->size, s->tag);
      t->allocations++;
    } else if (op < 10) {
      /* Another stream uses it: its reuse must wait for that stream's work. */
      T_OK(recap_record_stream(s->p, t->shared));
      t->stream_uses++;
    } else if (op < 25) {
      /* Hand it to the neighbour, who frees it. */
      send(t, s);
      memset(s, 0, sizeof *s);
      t->cross_frees++;
    } else {
      if (!check_and_free(s, "alloc_worker")) goto out;
      memset(s, 0, sizeof *s);
    }
    if (it % 64 == 63) {
      drain(t->inbox, "alloc_worker (neighbour's block)");
      recap__fake_stream_complete(t->own);
      recap__fake_launch_kernel(t->own, "stress_kernel");
    }
    if (it % 512 == 511) recap__fake_stream_complete(t->shared);
    if (it % 1024 == 1023 && t->id == 0) {
      /* The checker walks everything under the allocator's lock while the others allocate. */
      T_OK(recap_memory_check());
      recap_memory_stats_t st = RECAP_MEMORY_STATS_INIT;
      T_OK(recap_memory_stats(-1, &st));
    }
    if (it % 2048 == 2047 && t->id == 1) T_OK(recap_empty_cache());
  }
out:
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p) check_and_free(&slots[i], "alloc_worker (at the end)");
  atomic_fetch_sub(t->running, 1);
  /* Keep emptying the inbox until every thread stopped sending. */
  while (atomic_load(t->running) > 0) {
    drain(t->inbox, "alloc_worker (draining)");
    sched_yield();
  }
  drain(t->inbox, "alloc_worker (draining)");
  return NULL;
}

RECAP_TEST(many_threads_allocate_and_free) {
  begin();
  recap_stream_t shared = recap__fake_stream_new();
  mailbox_t boxes[ALLOC_THREADS];
  alloc_thread_t t[ALLOC_THREADS];
  pthread_t threads[ALLOC_THREADS];
  _Atomic int running = ALLOC_THREADS;
  for (int i = 0; i < ALLOC_THREADS; i++) {
    memset(&boxes[i], 0, sizeof boxes[i]);
    pthread_mutex_init(&boxes[i].lock, NULL);
  }
  for (int i = 0; i < ALLOC_THREADS; i++) {
    t[i] = (alloc_thread_t){.id = i,
                            .iterations = 4000 * scale(),
                            .own = recap__fake_stream_new(),
                            .shared = shared,
                            .inbox = &boxes[i],
                            .outbox = &boxes[(i + 1) % ALLOC_THREADS],
                            .running = &running};
  }
  for (int i = 0; i < ALLOC_THREADS; i++)
    assert_int_equal(pthread_create(&threads[i], NULL, alloc_worker, &t[i]), 0);
  for (int i = 0; i < ALLOC_THREADS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < ALLOC_THREADS; i++) {
    pthread_mutex_destroy(&boxes[i].lock);
  }
  expect_no_thread_failure();
  uint64_t allocations = 0, cross = 0, uses = 0;
  for (int i = 0; i < ALLOC_THREADS; i++) {
    allocations += t[i].allocations;
    cross += t[i].cross_frees;
    uses += t[i].stream_uses;
    recap__fake_stream_complete(t[i].own);
  }
  recap__fake_stream_complete(shared);
  print_message("%d threads: %llu allocations, %llu freed by another thread, %llu record_stream\n",
                ALLOC_THREADS, (unsigned long long)allocations, (unsigned long long)cross,
                (unsigned long long)uses);
  assert_true(cross > 0 && uses > 0);
  expect_nothing_left();
}

/* ---- two thread-local captures at once, each into its own pool, repeated ------------------- */

typedef struct capture_thread {
  int id;
  int rounds;
  stress_barrier_t *barrier;
  recap_pool_id_t pools[2]; /* the pool of the first round and of the last */
  uint64_t replays;
  _Atomic int *rounds_begun;           /* counted by thread 0, for the eager thread's pace */
  _Atomic uint64_t *eager_allocations; /* the eager thread's so far, for thread 0's pace */
} capture_thread_t;

/* Eager allocations per capture round, and how many rounds the captures may run ahead of the
 * eager thread: each side keeps pace with the other. The eager thread does not spin as fast as
 * it can (which, under valgrind's one-thread-at-a-time scheduling, starves the capturing
 * threads), and the captures do not finish before it ran (on a loaded machine its thread may
 * not be scheduled at all during a whole run of captures). */
enum { EAGER_PER_ROUND = 40, EAGER_LAG = 4 };

static void *capture_worker(void *arg) {
  capture_thread_t *t = arg;
  recap_stream_t s = recap__fake_stream_new();
  recap_generator_t gen = NULL;
  recap_graph_t g = NULL;
  void *weights = NULL;
  bool finished = false;
  T_OK(recap_generator_create(&gen, (uint64_t)t->id + 1));
  T_OK(recap_malloc(&weights, 256 * KiB, s));
  for (int round = 0; round < t->rounds; round++) {
    T_OK(recap_graph_create(&g, 0));
    if (t->id == 0) {
      while ((uint64_t)round > EAGER_LAG &&
             atomic_load(t->eager_allocations) < (uint64_t)(round - EAGER_LAG) * EAGER_PER_ROUND &&
             !thread_failed())
        sched_yield();
      atomic_fetch_add(t->rounds_begun, 1);
    }
    recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
    o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
    /* Both threads begin, allocate and end their captures at the same time. */
    if (!barrier_wait(t->barrier)) goto out;
    T_OK(recap_graph_capture_begin(g, &o, s));
    if (!barrier_wait(t->barrier)) goto out;
    void *a = NULL, *b = NULL, *c = NULL;
    T_OK(recap_malloc(&a, 64 * KiB, s));
    T_OK(recap_malloc(&b, 3 * MiB, s)); /* a new segment of the graph's pool */
    recap__fake_launch_kernel(s, "stress_capture");
    recap_philox_state_t ph;
    T_OK(recap_generator_philox_state(gen, 4, s, &ph));
    T_OK(recap_free(a));
    T_OK(recap_malloc(&c, 32 * KiB, s)); /* may reuse a's memory, inside the same capture */
    recap__fake_launch_kernel(s, "stress_capture2");
    T_OK(recap_free(b));
    T_OK(recap_free(c));
    if (!barrier_wait(t->barrier)) goto out;
    T_OK(recap_graph_capture_end(g));
    recap_pool_id_t pool;
    T_OK(recap_graph_pool(g, &pool));
    if (round == 0) t->pools[0] = pool;
    t->pools[1] = pool;
    for (int r = 0; r < 3; r++) {
      T_OK(recap_graph_replay(g, s));
      t->replays++;
    }
    recap__fake_stream_complete(s);
    T_OK(recap_graph_destroy(g));
    g = NULL;
  }
  finished = true;
out:
  /* A failed thread breaks the barrier, so that the other one does not wait for it forever. */
  if (!finished) barrier_break(t->barrier);
  recap_graph_destroy(g);
  recap_free(weights);
  recap_generator_destroy(gen);
  return NULL;
}

/* A third thread allocates eagerly, in the default capture mode, while the two capture: thread-
 * local captures must not forbid it, and its blocks must come from the default pool. */
typedef struct eager_thread {
  _Atomic int *stop;
  _Atomic int *rounds; /* capture rounds begun so far (thread 0's) */
  _Atomic uint64_t allocations;
  uint64_t refused_empty_cache;
} eager_thread_t;

static void *eager_worker(void *arg) {
  eager_thread_t *t = arg;
  recap_stream_t s = recap__fake_stream_new();
  uint64_t rng = 77;
  while (!atomic_load(t->stop)) {
    if (atomic_load(&t->allocations) >= (uint64_t)(atomic_load(t->rounds) + 1) * EAGER_PER_ROUND) {
      sched_yield();
      continue;
    }
    void *p = NULL;
    size_t size = pick_size(&rng);
    T_OK(recap_malloc(&p, size, s));
    tag(p, size, 0xEEEE);
    if (!tag_holds(p, size, 0xEEEE)) thread_fail("the eager thread's block %p was overwritten", p);
    T_OK(recap_free(p));
    if ((atomic_fetch_add(&t->allocations, 1) + 1) % 256 == 0) {
      /* Refused while a capture is under way; the cache must survive either way. */
      recap_status_t st = recap_empty_cache();
      if (st == RECAP_ERROR_INVALID_USAGE)
        t->refused_empty_cache++;
      else
        T_OK(st);
      recap__fake_stream_complete(s);
    }
  }
out:
  return NULL;
}

RECAP_TEST(two_thread_local_captures_at_once) {
  begin();
  stress_barrier_t barrier;
  barrier_init(&barrier, 2);
  capture_thread_t t[2];
  pthread_t threads[3];
  _Atomic int stop = 0, rounds_begun = 0;
  eager_thread_t eager = {.stop = &stop, .rounds = &rounds_begun};
  for (int i = 0; i < 2; i++)
    t[i] = (capture_thread_t){.id = i,
                              .rounds = 150 * scale(),
                              .barrier = &barrier,
                              .rounds_begun = &rounds_begun,
                              .eager_allocations = &eager.allocations};
  assert_int_equal(pthread_create(&threads[2], NULL, eager_worker, &eager), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&threads[i], NULL, capture_worker, &t[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(threads[2], NULL);
  barrier_destroy(&barrier);
  expect_no_thread_failure();
  for (int i = 0; i < 2; i++) assert_int_equal(t[i].replays, (uint64_t)3 * t[i].rounds);
  /* Every capture had a pool of its own: none shared between the threads. */
  for (int k = 0; k < 2; k++)
    for (int l = 0; l < 2; l++)
      assert_false(t[0].pools[k].a == t[1].pools[l].a && t[0].pools[k].b == t[1].pools[l].b);
  print_message(
      "2 threads x %d thread-local captures, %llu eager allocations beside them "
      "(%llu empty_cache calls refused during a capture)\n",
      t[0].rounds, (unsigned long long)atomic_load(&eager.allocations),
      (unsigned long long)eager.refused_empty_cache);
  assert_true(atomic_load(&eager.allocations) >=
              (uint64_t)(t[0].rounds - 1 - EAGER_LAG) * EAGER_PER_ROUND);
  expect_nothing_left();
}

/* ---- one generator, many threads: every draw gets a range of its own ---------------------- */

enum { RNG_THREADS = 8 };

typedef struct draw {
  uint64_t offset, length;
} draw_t;

typedef struct rng_thread {
  int id;
  int draws;
  recap_generator_t gen;
  draw_t *out;
} rng_thread_t;

static void *rng_worker(void *arg) {
  rng_thread_t *t = arg;
  recap_stream_t s = recap__fake_stream_new();
  uint64_t rng = 1234 + (uint64_t)t->id;
  for (int i = 0; i < t->draws; i++) {
    uint64_t increment = 1 + next_random(&rng) % 16;
    recap_philox_state_t ph;
    T_OK(recap_generator_philox_state(t->gen, increment, s, &ph));
    if (ph.captured) {
      thread_fail("draw %d of thread %d: an eager draw got a captured state", i, t->id);
      goto out;
    }
    t->out[i] = (draw_t){ph.offset, (increment + 3) & ~(uint64_t)3};
  }
out:
  return NULL;
}

static int by_offset(const void *x, const void *y) {
  const draw_t *a = x, *b = y;
  return a->offset < b->offset ? -1 : a->offset > b->offset;
}

RECAP_TEST(one_generator_many_threads) {
  begin();
  recap_generator_t gen;
  OK(recap_generator_create(&gen, 99));
  int per_thread = 5000 * scale();
  draw_t *draws = calloc((size_t)RNG_THREADS * per_thread, sizeof *draws);
  assert_non_null(draws);
  rng_thread_t t[RNG_THREADS];
  pthread_t threads[RNG_THREADS];
  for (int i = 0; i < RNG_THREADS; i++) {
    t[i] = (rng_thread_t){.id = i,
                          .draws = per_thread,
                          .gen = gen,
                          .out = draws + (size_t)i * per_thread};
    assert_int_equal(pthread_create(&threads[i], NULL, rng_worker, &t[i]), 0);
  }
  for (int i = 0; i < RNG_THREADS; i++) pthread_join(threads[i], NULL);
  expect_no_thread_failure();
  /* The ranges tile [0, final offset) exactly: no two draws share a number, none is lost. */
  size_t n = (size_t)RNG_THREADS * per_thread;
  qsort(draws, n, sizeof *draws, by_offset);
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (draws[i].offset != at)
      fail_msg("draw %zu starts at offset %llu, expected %llu", i,
               (unsigned long long)draws[i].offset, (unsigned long long)at);
    at += draws[i].length;
  }
  uint64_t final_offset;
  OK(recap_generator_offset_get(gen, &final_offset));
  assert_int_equal(final_offset, at);
  free(draws);
  OK(recap_generator_destroy(gen));
  expect_nothing_left();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(many_threads_allocate_and_free),
    cmocka_unit_test(two_thread_local_captures_at_once),
    cmocka_unit_test(one_generator_many_threads),
};
RECAP_TEST_MAIN(tests)
