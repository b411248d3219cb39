/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_pools.c — graph-private pools and capture routing on the CPU fake device: which pool an
 * allocation comes from during a capture, reuse inside a capture, sharing a pool between
 * captures, when pool memory goes back, blocks used by other streams, and the capture rules
 * the allocator must respect (relaxed mode for new segments, no events on capturing streams).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "harness.h"
#include "fake_util.h"
#include "recap.h"

/* Begin a capture on s and route it to pool, as a graph's capture_begin does. */
static void capture_begin(recap_stream_t s, recap_pool_id_t pool, recap__capture_mode_t mode) {
  assert_int_not_equal(recap__fake_capture_begin(s, mode), 0);
  OK(recap_pool_route_begin(pool, s));
}

/* A fresh allocator, and a global capture begun on a new stream *s and routed to a new pool. */
static recap_pool_id_t fresh_capture(recap_stream_t *s) {
  reset();
  *s = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  capture_begin(*s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  return pool;
}

static void capture_end(recap_stream_t s, recap_pool_id_t pool) {
  assert_true(recap__fake_capture_end(s));
  OK(recap_pool_route_end(pool));
}

/* The pool's last reference dropped, and the cache emptied gives every byte back. */
static void release_and_expect_empty(recap_pool_id_t pool) {
  OK(recap_pool_release(pool));
  expect_cache_empties();
}

RECAP_TEST(pool_handles_are_fresh) {
  recap_pool_id_t a = recap_pool_handle(), b = recap_pool_handle();
  assert_int_equal(a.a, 0);
  assert_int_equal(b.a, 0);
  assert_true(b.b > a.b);
  recap_pool_id_t g = recap__pool_id_for_graph();
  assert_true(g.a > 0);
  assert_int_equal(g.b, 0);
  assert_false(recap_pool_is_default(a));
  assert_true(recap_pool_is_default((recap_pool_id_t){0, 0}));
}

RECAP_TEST(routing_follows_the_capture) {
  recap_stream_t s = stream_after_reset(), side = recap__fake_stream_new(),
                 other = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  assert_true(recap__fake_capture_join(side, s));
  void *in_capture, *on_side, *outside;
  OK(recap_malloc(&in_capture, 4096, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 4096);
  OK(recap_malloc(&on_side, 4096, side)); /* joined: the capture's pool */
  assert_int_equal(pool_info(pool).allocated_bytes, 8192);
  OK(recap_malloc(&outside, 4096, other)); /* not in the capture: the default pool */
  assert_int_equal(pool_info(pool).allocated_bytes, 8192);
  assert_int_equal(pool_info((recap_pool_id_t){0, 0}).allocated_bytes, 4096);
  /* Two streams in the pool (s and side): two small segments in the pool, one outside. */
  assert_int_equal(pool_info(pool).segments, 2);
  assert_int_equal(stats().segment[0].current, 3);
  check();
  capture_end(s, pool);
  /* After the capture the same stream allocates from the default pool again. */
  void *after;
  OK(recap_malloc(&after, 4096, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 8192);
  FREE_ALL(after, outside, on_side, in_capture);
  OK(recap_pool_release(pool));
  check();
}

/* A region pauses a capture and resumes it under a new capture id (recap/region.h): the route
 * moves to the new id, and allocations on the stream follow. */
RECAP_TEST(routing_moves_with_the_capture) {
  recap_stream_t s = stream_after_reset(), t = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle(), other = recap_pool_handle();
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  capture_begin(t, other, RECAP__CAPTURE_MODE_GLOBAL);
  /* The capture on s ends and another begins on it: the route still names the first. */
  assert_true(recap__fake_capture_end(s));
  uint64_t resumed = recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL);
  assert_int_not_equal(resumed, 0);
  void *before, *after;
  OK(recap_malloc(&before, 4096, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 0);
  OK(recap__pool_route_move(0, pool, resumed, NULL));
  OK(recap__pool_route_move(0, pool, resumed, NULL)); /* to the id it has: nothing changes */
  OK(recap_malloc(&after, 4096, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 4096);
  /* The id of another route's capture, and a pool routed nowhere: refused, nothing moved. */
  recap__capture_status_t status;
  uint64_t t_id = 0;
  OK(recap__device()->stream_capture_id(t, &status, &t_id));
  EXPECT_STATUS(recap__pool_route_move(0, pool, t_id, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("already routes its allocations");
  EXPECT_STATUS(recap__pool_route_move(0, recap_pool_handle(), resumed, NULL),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("is not routed");
  void *again;
  OK(recap_malloc(&again, 4096, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 8192);
  FREE_ALL(again, after, before);
  capture_end(s, pool);
  capture_end(t, other);
  OK(recap_pool_release(pool));
  OK(recap_pool_release(other));
  check();
}

/* A route names the stream recap made capture (recap__pool_route_set_capture), and its
 * allocations are routed without asking the device. While a region pauses that capture the
 * stream may capture nothing, so the route forgets it and the device is asked again, until the
 * resumed capture names it once more. */
RECAP_TEST(a_paused_capture_stream_is_asked_again) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  OK(recap__pool_route_reserve(0, pool));
  uint64_t id = recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap__pool_route_set_capture(0, pool, id, s));
  uint64_t asked = recap__fake_now().capture_queries;
  void *a, *b, *c;
  OK(recap_malloc(&a, 4096, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 4096);
  assert_int_equal(recap__fake_now().capture_queries, asked);
  recap__pool_route_forget_stream(0, pool);
  assert_true(recap__fake_capture_end(s)); /* the pause */
  OK(recap_malloc(&b, 4096, s));           /* not capturing: the default pool */
  assert_int_equal(pool_info(pool).allocated_bytes, 4096);
  assert_int_equal(pool_info((recap_pool_id_t){0, 0}).allocated_bytes, 4096);
  assert_int_equal(recap__fake_now().capture_queries, asked + 1);
  uint64_t resumed = recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap__pool_route_move(0, pool, resumed, s));
  OK(recap_malloc(&c, 4096, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 8192);
  assert_int_equal(recap__fake_now().capture_queries, asked + 1);
  /* Forgetting the stream of a pool routed nowhere changes nothing. */
  recap__pool_route_forget_stream(0, recap_pool_handle());
  capture_end(s, pool);
  FREE_ALL(c, b, a);
  release_and_expect_empty(pool);
}

/* A capture ended behind recap's back (cudaStreamEndCapture on the stream of a graph's capture)
 * leaves its route naming the stream; a new capture on that stream, named in its own route,
 * takes the stream over, and the old route asks the device again. */
RECAP_TEST(a_new_capture_on_a_stream_takes_it_from_a_stale_route) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t stale = recap_pool_handle(), fresh = recap_pool_handle();
  OK(recap__pool_route_reserve(0, stale));
  OK(recap__pool_route_set_capture(0, stale,
                                   recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), s));
  assert_true(recap__fake_capture_end(s)); /* not through recap */
  OK(recap__pool_route_reserve(0, fresh));
  OK(recap__pool_route_set_capture(0, fresh,
                                   recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), s));
  check();
  void *p;
  OK(recap_malloc(&p, 4096, s));
  assert_int_equal(pool_info(fresh).allocated_bytes, 4096);
  assert_int_equal(pool_info(stale).allocated_bytes, 0);
  capture_end(s, fresh);
  OK(recap_pool_route_end(stale));
  OK(recap_free(p));
  OK(recap_pool_release(stale));
  release_and_expect_empty(fresh);
}

RECAP_TEST(capture_frees_are_reused_within_the_capture) {
  recap_stream_t s;
  recap_pool_id_t pool = fresh_capture(&s);
  void *a, *b, *c;
  OK(recap_malloc(&a, 256 * KiB, s));
  OK(recap_malloc(&b, 256 * KiB, s));
  OK(recap_free(a)); /* an intermediate, dead before the capture ends */
  OK(recap_malloc(&c, 256 * KiB, s));
  assert_ptr_equal(a, c);
  assert_int_equal(pool_info(pool).segments, 1);
  capture_end(s, pool);
  /* A block freed into the pool is not handed to eager code on the default pool. */
  OK(recap_free(b));
  void *eager;
  OK(recap_malloc(&eager, 256 * KiB, s));
  assert_ptr_not_equal(eager, b);
  assert_int_equal(pool_info((recap_pool_id_t){0, 0}).segments, 1);
  FREE_ALL(eager, c);
  OK(recap_pool_release(pool));
  check();
}

/* Two captures in a row, with eager default-pool work in between; the first one's intermediate
 * is freed before its capture ends. Returns the private segments the two captures used. */
static int64_t two_captures(bool share, void **out1, void **out2) {
  recap_stream_t s = recap__fake_stream_new();
  recap_pool_id_t p1 = recap_pool_handle();
  recap_pool_id_t p2 = share ? p1 : recap_pool_handle();
  void *tmp, *eager;

  capture_begin(s, p1, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap_malloc(&tmp, 700 * KiB, s));
  OK(recap_malloc(out1, 512, s));
  OK(recap_free(tmp));
  capture_end(s, p1);

  OK(recap_malloc(&eager, 700 * KiB, s)); /* default pool traffic in between */
  OK(recap_free(eager));

  capture_begin(s, p2, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap_malloc(&tmp, 700 * KiB, s));
  OK(recap_malloc(out2, 512, s));
  OK(recap_free(tmp));
  capture_end(s, p2);

  int64_t segments = pool_info(p1).segments + (share ? 0 : pool_info(p2).segments);
  check();
  FREE_ALL(*out1, *out2);
  OK(recap_pool_release(p1));
  OK(recap_pool_release(p2));
  OK(recap_empty_cache());
  return segments;
}

RECAP_TEST(sharing_a_pool_saves_a_segment) {
  void *a1, *a2, *b1, *b2;
  reset();
  int64_t separate = two_captures(false, &a1, &a2);
  reset();
  int64_t shared = two_captures(true, &b1, &b2);
  assert_int_equal(separate, 2);
  assert_int_equal(shared, 1);
  assert_int_equal(separate - shared, 1);
}

RECAP_TEST(pool_memory_returns_after_last_reference_and_block) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  void *out1, *out2;
  /* Two graphs share the pool: each capture takes a reference. */
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap_malloc(&out1, 1000, s));
  capture_end(s, pool);
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  OK(recap_malloc(&out2, 3 * MiB, s));
  capture_end(s, pool);
  assert_int_equal(pool_info(pool).references, 2);
  assert_int_equal(pool_info(pool).segments, 2);
  /* A small segment of 2 MiB; a large one of 20 MiB, or a VMM segment mapping 3 MiB rounded up
   * to the granularity. */
  assert_int_equal(pool_info(pool).reserved_bytes, vmm_segments_on() ? 6 * MiB : 22 * MiB);

  OK(recap_free(out2)); /* its segment is free but the pool is referenced */
  OK(recap_empty_cache());
  assert_int_equal(pool_info(pool).segments, 2);

  OK(recap_pool_release(pool));
  OK(recap_empty_cache());
  assert_int_equal(pool_info(pool).segments, 2); /* one reference left */

  OK(recap_pool_release(pool));
  OK(recap_empty_cache());
  /* No reference: the free segment went back, the one holding out1 stays. */
  assert_int_equal(pool_info(pool).references, 0);
  assert_int_equal(pool_info(pool).segments, 1);
  assert_int_equal(stats().reserved_bytes[0].current, 2 * MiB);
  check();

  /* out1 is still valid; freed, it returns to the pool, not to the default pool... */
  memset(out1, 0x5a, 1000);
  OK(recap_free(out1));
  assert_int_equal(pool_info((recap_pool_id_t){0, 0}).segments, 0);
  void *eager;
  OK(recap_malloc(&eager, 1000, s));
  assert_ptr_not_equal(eager, out1);
  OK(recap_free(eager));
  /* ...and goes back to the driver with the pool on the next empty_cache. */
  OK(recap_empty_cache());
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  assert_int_equal(recap_pool_memory(pool, &info), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(stats().reserved_bytes[0].current, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

RECAP_TEST(releasing_an_empty_pool_deletes_it) {
  recap_stream_t s;
  recap_pool_id_t pool = fresh_capture(&s);
  capture_end(s, pool);
  OK(recap_pool_release(pool));
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  assert_int_equal(recap_pool_memory(pool, &info), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(recap_pool_release(pool), RECAP_ERROR_INVALID_USAGE);
}

RECAP_TEST(other_stream_blocks_held_until_capture_ends) {
  recap_stream_t s = stream_after_reset(), reader = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  assert_true(recap__fake_capture_join(reader, s));
  void *a, *b;
  OK(recap_malloc(&a, 8192, s));
  OK(recap_record_stream(a, reader));
  int64_t events = recap__fake_now().live_events;
  OK(recap_free(a)); /* no event may be recorded now: the block waits */
  assert_int_equal(recap__fake_now().live_events, events);
  assert_int_equal(stats().active[0].current, 1);
  OK(recap_malloc(&b, 8192, s));
  assert_ptr_not_equal(a, b); /* held back: not reused inside the capture */
  check();
  capture_end(s, pool);
  /* Now it got its event on the reader stream; once that stream finished, it is free. */
  recap__fake_stream_complete(reader);
  void *c;
  OK(recap_free(b));
  OK(recap_malloc(&c, 8192, recap__fake_stream_new())); /* processes events */
  assert_int_equal(stats().active[0].current, 1);
  OK(recap_free(c));
  release_and_expect_empty(pool);
}

RECAP_TEST(new_segment_in_global_capture_keeps_it_valid) {
  recap_stream_t s;
  recap_pool_id_t pool = fresh_capture(&s);
  void *a, *b;
  OK(recap_malloc(&a, 5 * MiB, s)); /* a new segment: allocated in relaxed mode */
  OK(recap_malloc(&b, 100, s));
  recap__capture_status_t status;
  uint64_t id;
  OK(recap__device()->stream_capture_info(s, &status, &id));
  assert_int_equal(status, RECAP__CAPTURE_ACTIVE);
  capture_end(s, pool);
  FREE_ALL(a, b);
  OK(recap_pool_release(pool));
  check();
}

RECAP_TEST(out_of_memory_inside_a_capture) {
  recap_stream_t s = stream_after_reset();
  recap_pool_id_t pool = recap_pool_handle();
  void *cached;
  OK(recap_malloc(&cached, 3 * MiB, s));
  OK(recap_free(cached));
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  void *p;
  assert_int_equal(recap_malloc(&p, (size_t)1 << 40, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(recap_last_error(), "out of memory"));
  /* The retry freed the default pool's cached classic segment in relaxed mode: capture still
   * valid. A VMM segment's tail stays mapped: trimming it needs a device synchronisation, which
   * would invalidate the capture (docs/allocator.md). */
  recap__capture_status_t status;
  uint64_t id;
  OK(recap__device()->stream_capture_info(s, &status, &id));
  assert_int_equal(status, RECAP__CAPTURE_ACTIVE);
  assert_int_equal(stats().segment[0].current, vmm_segments_on() ? 1 : 0);
  OK(recap_malloc(&p, 1000, s));
  capture_end(s, pool);
  OK(recap_free(p));
  release_and_expect_empty(pool);
}

/* Found by the fuzzer: the last reference of a pool dropped while a capture still routes to it,
 * then an out-of-memory retry (which frees unreferenced pools) must leave the routed pool be. */
RECAP_TEST(released_pool_survives_an_oom_retry_while_routed) {
  recap_stream_t s;
  recap_pool_id_t pool = fresh_capture(&s);
  OK(recap_pool_release(pool)); /* no reference left and no memory yet, but still routed */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RAW_MALLOC, 1);
  void *b;
  OK(recap_malloc(&b, 3 * MiB, s)); /* its segment fails once: the retry releases caches */
  check();
  assert_int_equal(pool_info(pool).routed, 1);
  assert_int_equal(pool_info(pool).segments, 1);
  capture_end(s, pool);
  OK(recap_free(b));
  OK(recap_empty_cache());
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  assert_int_equal(recap_pool_memory(pool, &info), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

RECAP_TEST(routing_misuse_is_refused) {
  recap_stream_t s = stream_after_reset(), t = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  assert_int_equal(recap_pool_route_begin(pool, s), RECAP_ERROR_INVALID_USAGE);
  assert_non_null(strstr(recap_last_error(), "not capturing"));
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  assert_int_equal(recap_pool_route_begin((recap_pool_id_t){0, 0}, s),
                   RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_pool_route_begin(pool, s));
  /* The same capture cannot route twice, nor can one pool serve two captures at once. */
  assert_int_equal(recap_pool_route_begin(recap_pool_handle(), s), RECAP_ERROR_INVALID_USAGE);
  assert_int_not_equal(recap__fake_capture_begin(t, RECAP__CAPTURE_MODE_GLOBAL), 0);
  assert_int_equal(recap_pool_route_begin(pool, t), RECAP_ERROR_INVALID_USAGE);
  assert_non_null(strstr(recap_last_error(), "already routed"));
  assert_true(recap__fake_capture_end(t));
  /* Emptying the cache during a capture is refused. */
  assert_int_equal(recap_empty_cache(), RECAP_ERROR_INVALID_USAGE);
  assert_non_null(strstr(recap_last_error(), "capture is under way"));
  capture_end(s, pool);
  assert_int_equal(recap_pool_route_end(pool), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(recap_pool_release(recap_pool_handle()), RECAP_ERROR_INVALID_USAGE);
  OK(recap_pool_release(pool));
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  assert_int_equal(recap_pool_memory(pool, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_pool_memory(pool, &info), RECAP_ERROR_NOT_FOUND);
  check();
}

/* Two threads capture at once in thread-local mode, each into its own pool, allocating new
 * segments and reusing blocks; both captures stay valid and keep to their pools. */
typedef struct capture_job {
  recap_stream_t stream;
  recap_pool_id_t pool;
  pthread_barrier_t *barrier;
  void *kept;
  int failures;
} capture_job_t;

static void *capture_thread(void *arg) {
  capture_job_t *job = arg;
  if (recap__fake_capture_begin(job->stream, RECAP__CAPTURE_MODE_THREAD_LOCAL) == 0)
    job->failures++;
  if (recap_pool_route_begin(job->pool, job->stream) != RECAP_SUCCESS) job->failures++;
  pthread_barrier_wait(job->barrier); /* both captures are under way from here */
  for (int i = 0; i < 200; i++) {
    void *p;
    size_t size = (size_t)(i % 7 + 1) * 300 * KiB;
    if (recap_malloc(&p, size, job->stream) != RECAP_SUCCESS) job->failures++;
    if (i == 100)
      job->kept = p;
    else if (recap_free(p) != RECAP_SUCCESS)
      job->failures++;
  }
  pthread_barrier_wait(job->barrier);
  recap__capture_status_t status;
  uint64_t id;
  if (recap__device()->stream_capture_info(job->stream, &status, &id) != RECAP_SUCCESS ||
      status != RECAP__CAPTURE_ACTIVE)
    job->failures++;
  if (!recap__fake_capture_end(job->stream)) job->failures++;
  if (recap_pool_route_end(job->pool) != RECAP_SUCCESS) job->failures++;
  return NULL;
}

RECAP_TEST(two_thread_local_captures_at_once) {
  reset();
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, 2);
  capture_job_t jobs[2];
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) {
    jobs[i] = (capture_job_t){recap__fake_stream_new(), recap_pool_handle(), &barrier, NULL, 0};
    assert_int_equal(pthread_create(&threads[i], NULL, capture_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(jobs[i].failures, 0);
    recap_pool_memory_t info = pool_info(jobs[i].pool);
    recap_block_info_t block = RECAP_BLOCK_INFO_INIT;
    OK(recap_block_info(jobs[i].kept, &block));
    assert_true(recap__pool_id_equal(block.pool, jobs[i].pool)); /* from the thread's pool */
    assert_ptr_equal(block.stream, jobs[i].stream);
    assert_int_equal(info.allocated_bytes, (int64_t)block.bytes); /* only the kept block */
  }
  assert_int_equal(pool_info((recap_pool_id_t){0, 0}).allocated_bytes, 0);
  check();
  for (int i = 0; i < 2; i++) {
    OK(recap_free(jobs[i].kept));
    OK(recap_pool_release(jobs[i].pool));
  }
  expect_cache_empties();
}

/* recap_block_info reports where a block came from: start, sizes, pool, stream and device. */
RECAP_TEST(block_info_reports_pool_and_stream) {
  recap_stream_t s = stream_after_reset(), other = recap__fake_stream_new();
  void *eager;
  OK(recap_malloc(&eager, 1000, other));
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  OK(recap_block_info(eager, &info));
  assert_ptr_equal(info.base, eager);
  assert_int_equal(info.bytes, 1024); /* rounded to 512 */
  assert_int_equal(info.requested, 1000);
  assert_true(recap_pool_is_default(info.pool));
  assert_ptr_equal(info.stream, other);
  assert_int_equal(info.device, 0);

  recap_pool_id_t pool = recap_pool_handle();
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  void *captured;
  OK(recap_malloc(&captured, 3 * MiB, s));
  OK(recap_block_info(captured, &info));
  assert_ptr_equal(info.base, captured);
  /* A VMM segment maps 4 MiB (the granularity's multiple), and the 1 MiB rest is no more than
   * small_size: the block is the whole chunk. */
  assert_int_equal(info.bytes, vmm_segments_on() ? 4 * MiB : 3 * MiB);
  assert_int_equal(info.requested, 3 * MiB);
  assert_true(recap__pool_id_equal(info.pool, pool));
  assert_ptr_equal(info.stream, s);
  capture_end(s, pool);

  /* Only the start of a live block is known; *info is left as it was otherwise. */
  memset(&info, 0x5a, sizeof info);
  info.size = sizeof info;
  recap_block_info_t untouched = info;
  EXPECT_STATUS(recap_block_info((char *)eager + 512, &info), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("not an allocated pointer of recap");
  assert_memory_equal(&info, &untouched, sizeof info);
  EXPECT_STATUS(recap_block_info(eager, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_block_info: info is NULL");
  OK(recap_free(eager));
  EXPECT_STATUS(recap_block_info(eager, &info), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_free(captured));
  OK(recap_pool_release(pool));
  OK(recap_empty_cache());
  check();
}

/* What a default pool's information must say: no references, never routed, and the segments
 * and bytes given. */
static void expect_default_pool(const recap_pool_memory_t *info, int64_t segments,
                                int64_t reserved_bytes, int64_t allocated_bytes) {
  assert_int_equal(info->references, 0);
  assert_int_equal(info->routed, 0);
  assert_int_equal(info->segments, segments);
  assert_int_equal(info->reserved_bytes, reserved_bytes);
  assert_int_equal(info->allocated_bytes, allocated_bytes);
}

/* The default pool is answered like a private one (no references, never routed), zeros on a
 * device recap has not used; a private pool never used is not found. */
RECAP_TEST(pool_info_answers_the_default_pool) {
  reset();
  const recap_pool_id_t default_pool = {0, 0};
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  memset(&info, 0x5a, sizeof info);
  info.size = sizeof info;
  OK(recap_pool_memory(default_pool, &info));
  expect_default_pool(&info, 0, 0, 0);
  assert_int_equal(info.waiting_bytes, 0);
  recap_stream_t s = recap__fake_stream_new();
  void *a;
  OK(recap_malloc(&a, 4096, s));
  info = pool_info(default_pool);
  expect_default_pool(&info, 1, 2 * MiB, 4096);
  EXPECT_STATUS(recap_pool_memory(recap_pool_handle(), &info), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("never used");
  OK(recap_free(a));
  OK(recap_empty_cache());
  check();
}

/* A freed block that waits on a record_stream event leaves allocated_bytes at once and counts
 * in waiting_bytes until it is reusable; reserved_bytes holds it all along. The same for one
 * freed during a capture, held back until the capture ends. */
RECAP_TEST(pool_info_counts_blocks_waiting_on_events) {
  reset();
  const recap_pool_id_t default_pool = {0, 0};
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 8192, s1));
  OK(recap_malloc(&b, 4096, s1));
  recap__fake_stream_enqueue(s2); /* s2 has work that reads a */
  OK(recap_record_stream(a, s2));
  OK(recap_free(a));
  recap_pool_memory_t info = pool_info(default_pool);
  assert_int_equal(info.allocated_bytes, 4096);
  assert_int_equal(info.waiting_bytes, 8192);
  assert_int_equal(info.reserved_bytes, 2 * MiB);
  recap__fake_stream_complete(s2);
  void *c;
  OK(recap_malloc(&c, 512, s1)); /* processes the completed event */
  info = pool_info(default_pool);
  assert_int_equal(info.waiting_bytes, 0);
  assert_int_equal(info.allocated_bytes, 4096 + 512);
  OK(recap_free(c));

  /* Freed during a capture with another stream's use: held until the capture ends. */
  recap_stream_t s = recap__fake_stream_new(), reader = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  capture_begin(s, pool, RECAP__CAPTURE_MODE_GLOBAL);
  assert_true(recap__fake_capture_join(reader, s));
  void *d;
  OK(recap_malloc(&d, 8192, s));
  OK(recap_record_stream(d, reader));
  OK(recap_free(d));
  info = pool_info(pool);
  assert_int_equal(info.allocated_bytes, 0);
  assert_int_equal(info.waiting_bytes, 8192);
  capture_end(s, pool);
  recap__fake_stream_complete(reader);
  OK(recap_malloc(&c, 512, recap__fake_stream_new())); /* processes events */
  assert_int_equal(pool_info(pool).waiting_bytes, 0);
  FREE_ALL(c, b);
  release_and_expect_empty(pool);
}

RECAP_TEST(snapshot_names_private_pools) {
  recap_stream_t s;
  recap_pool_id_t pool = fresh_capture(&s);
  void *p;
  OK(recap_malloc(&p, 1000, s));
  char *json;
  OK(recap_memory_snapshot_json(-1, &json));
  char expected[64];
  snprintf(expected, sizeof expected, "\"id\":[0,%llu],\"references\":1,\"routed\":true",
           (unsigned long long)pool.b);
  assert_non_null(strstr(json, expected));
  recap_string_free(json);
  capture_end(s, pool);
  OK(recap_free(p));
  OK(recap_pool_release(pool));
}

/* With captures back to back, no recap_malloc runs outside one: a block freed during the first,
 * used by another stream, gets its event when that capture's route ends and comes back when a
 * later route ends, once the stream passed it. */
RECAP_TEST(blocks_freed_during_back_to_back_captures_come_back) {
  reset();
  const recap_pool_id_t default_pool = {0, 0};
  recap_stream_t s1 = recap__fake_stream_new(), reader = recap__fake_stream_new();
  recap_stream_t cs = recap__fake_stream_new();
  void *a;
  OK(recap_malloc(&a, 8192, s1));
  recap__fake_stream_enqueue(reader); /* the reader's work on a, queued */
  OK(recap_record_stream(a, reader));
  recap_pool_id_t pool = recap_pool_handle();
  capture_begin(cs, pool, RECAP__CAPTURE_MODE_GLOBAL);
  int64_t events = recap__fake_now().live_events;
  OK(recap_free(a)); /* during a capture: the event waits for the route's end */
  assert_int_equal(recap__fake_now().live_events, events);
  capture_end(cs, pool);
  OK(recap_pool_release(pool));                                /* every route took a reference */
  assert_int_equal(recap__fake_now().live_events, events + 1); /* recorded on the reader */
  assert_int_equal(pool_info(default_pool).waiting_bytes, 8192);
  for (int i = 0; i < 2; i++) {
    capture_begin(cs, pool, RECAP__CAPTURE_MODE_GLOBAL);
    void *p;
    OK(recap_malloc(&p, 1024, cs)); /* routed: collects nothing */
    assert_int_equal(pool_info(default_pool).waiting_bytes, 8192);
    if (i == 1) recap__fake_stream_complete(reader);
    OK(recap_free(p));
    capture_end(cs, pool);
    if (i == 0) OK(recap_pool_release(pool));
  }
  /* The second route's end found the event complete: the block is free, no malloc between. */
  assert_int_equal(pool_info(default_pool).waiting_bytes, 0);
  assert_int_equal(stats().active[0].current, 0);
  release_and_expect_empty(pool);
}

/* While one capture goes on (another thread's, say), the out-of-memory retry waits for the
 * events of streams outside it, and the long capture stays valid; blocks freed during it get
 * their events only once no capture is under way (a stream may join a capture at any time). */
RECAP_TEST(blocks_come_back_while_another_capture_goes_on) {
  reset();
  const recap_pool_id_t default_pool = {0, 0};
  recap_stream_t s1 = recap__fake_stream_new(), reader = recap__fake_stream_new();
  recap_stream_t long_s = recap__fake_stream_new(), cs = recap__fake_stream_new();
  recap_pool_id_t long_pool = recap_pool_handle(), pool = recap_pool_handle();
  void *a, *b, *huge;
  OK(recap_malloc(&a, 8192, s1));
  OK(recap_malloc(&b, 16384, s1));
  recap__fake_stream_enqueue(reader);
  OK(recap_record_stream(a, reader));
  OK(recap_record_stream(b, reader));
  OK(recap_free(a)); /* its event is recorded on the reader, not complete */
  capture_begin(long_s, long_pool, RECAP__CAPTURE_MODE_GLOBAL);
  assert_int_equal(pool_info(default_pool).waiting_bytes, 8192);
  int64_t retries = stats().num_alloc_retries;
  assert_int_equal(recap_malloc(&huge, (size_t)1 << 40, s1), RECAP_ERROR_OUT_OF_MEMORY);
  assert_int_equal(stats().num_alloc_retries, retries + 1);
  assert_int_equal(pool_info(default_pool).waiting_bytes, 0); /* the retry waited for it */
  OK(recap_free(b));                                          /* during the capture: no event yet */
  capture_begin(cs, pool, RECAP__CAPTURE_MODE_GLOBAL);
  capture_end(cs, pool); /* the long capture goes on: nothing recorded */
  OK(recap_pool_release(pool));
  assert_int_equal(recap_malloc(&huge, (size_t)1 << 40, s1), RECAP_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(recap_last_error(), "16.00 KiB freed during captures"));
  assert_int_equal(pool_info(default_pool).waiting_bytes, 16384);
  recap__capture_status_t status;
  uint64_t id;
  OK(recap__device()->stream_capture_info(long_s, &status, &id));
  assert_int_equal(status, RECAP__CAPTURE_ACTIVE);
  assert_int_equal(recap__alloc.devices[0]->deferred_count, 1);
  capture_end(long_s, long_pool); /* the last route: b gets its event on the reader */
  assert_int_equal(recap__alloc.devices[0]->deferred_count, 0);
  assert_int_equal(recap__alloc.devices[0]->pending_count, 1);
  recap__fake_stream_complete(reader);
  void *p;
  OK(recap_malloc(&p, 512, s1)); /* outside captures: collects the completed event */
  assert_int_equal(pool_info(default_pool).waiting_bytes, 0);
  OK(recap_free(p));
  OK(recap_pool_release(long_pool));
  expect_cache_empties();
}

/* The out-of-memory message splits what is reserved but not allocated: free blocks, blocks
 * waiting for other streams' events, blocks freed during a capture waiting for it. */
RECAP_TEST(out_of_memory_message_tells_waiting_bytes_apart) {
  recap_stream_t s1 = stream_after_reset(), reader = recap__fake_stream_new();
  recap_stream_t cs = recap__fake_stream_new();
  void *a;
  OK(recap_malloc(&a, 16384, s1));
  recap__fake_stream_enqueue(reader);
  OK(recap_record_stream(a, reader));
  OK(recap_free(a)); /* waits for its event on the reader */
  recap_pool_id_t pool = recap_pool_handle();
  capture_begin(cs, pool, RECAP__CAPTURE_MODE_GLOBAL);
  /* The reader joins the capture: its event cannot be waited for now. */
  assert_true(recap__fake_capture_join(reader, cs));
  void *d;
  OK(recap_malloc(&d, 8192, cs));
  OK(recap_record_stream(d, reader));
  OK(recap_free(d)); /* freed during the capture, used by a capturing stream */
  void *huge;
  assert_int_equal(recap_malloc(&huge, (size_t)1 << 40, s1), RECAP_ERROR_OUT_OF_MEMORY);
  recap_memory_stats_t st = stats();
  char cached[32], expected[256];
  uint64_t unallocated = (uint64_t)(st.reserved_bytes[0].current - st.allocated_bytes[0].current);
  snprintf(cached, sizeof cached, "%.2f MiB", (double)(unallocated - 16384 - 8192) / (1 << 20));
  snprintf(expected, sizeof expected,
           "of which %s cached in free blocks, 16.00 KiB freed and waiting for other streams' "
           "events and 8.00 KiB freed during captures and waiting for them to end",
           cached);
  assert_non_null(strstr(recap_last_error(), expected));
  recap__capture_status_t status;
  uint64_t id;
  OK(recap__device()->stream_capture_info(cs, &status, &id));
  assert_int_equal(status, RECAP__CAPTURE_ACTIVE); /* the retry asked no capturing stream */
  assert_true(recap__fake_capture_join_back(reader, cs));
  capture_end(cs, pool);
  recap__fake_stream_complete(reader);
  release_and_expect_empty(pool);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(pool_handles_are_fresh),
    cmocka_unit_test(routing_follows_the_capture),
    cmocka_unit_test(routing_moves_with_the_capture),
    cmocka_unit_test(a_paused_capture_stream_is_asked_again),
    cmocka_unit_test(a_new_capture_on_a_stream_takes_it_from_a_stale_route),
    cmocka_unit_test(capture_frees_are_reused_within_the_capture),
    cmocka_unit_test(sharing_a_pool_saves_a_segment),
    cmocka_unit_test(pool_memory_returns_after_last_reference_and_block),
    cmocka_unit_test(releasing_an_empty_pool_deletes_it),
    cmocka_unit_test(other_stream_blocks_held_until_capture_ends),
    cmocka_unit_test(new_segment_in_global_capture_keeps_it_valid),
    cmocka_unit_test(out_of_memory_inside_a_capture),
    cmocka_unit_test(released_pool_survives_an_oom_retry_while_routed),
    cmocka_unit_test(routing_misuse_is_refused),
    cmocka_unit_test(two_thread_local_captures_at_once),
    cmocka_unit_test(block_info_reports_pool_and_stream),
    cmocka_unit_test(pool_info_answers_the_default_pool),
    cmocka_unit_test(pool_info_counts_blocks_waiting_on_events),
    cmocka_unit_test(snapshot_names_private_pools),
    cmocka_unit_test(blocks_freed_during_back_to_back_captures_come_back),
    cmocka_unit_test(blocks_come_back_while_another_capture_goes_on),
    cmocka_unit_test(out_of_memory_message_tells_waiting_bytes_apart),
};

RECAP_TEST_MAIN(tests)
