/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph.c — one capture on one thread, on the CPU fake device: the state machine and the
 * errors of every public graph function, pools and routing of captures, invalidated and
 * abandoned captures, and KEEP graphs, instantiation and replay.
 *
 * The capture scope, captures from several threads, inspection and injected faults are in
 * test_graph_scope.c. After every scenario the same invariants must hold: no capture left in
 * the registry, the allocator's checker passes, and the fake holds no graph or executable
 * nobody owns.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph_util.h"
#include "harness.h"
#include "inspect_util.h"
#include "capture_util.h"

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

/* Messages the log callback received. */
static char *read_text_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = calloc(1, 1 << 16);
  if (text) {
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    text[n] = '\0';
  }
  fclose(f);
  return text;
}

/* ------------------------------------------------------------------------------------------
 * Arguments and the state machine
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(create_checks_its_arguments) {
  reset();
  recap_graph_t g = (recap_graph_t)&g;
  EXPECT_STATUS(recap_graph_create(NULL, 0), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_create(&g, 0x2), RECAP_ERROR_INVALID_ARGUMENT);
  assert_null(g);
  EXPECT_MESSAGE("RECAP_GRAPH_KEEP");
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  assert_non_null(g);
  OK(recap_graph_destroy(g));
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_destroy(g));
  OK(recap_graph_destroy(NULL)); /* a no-op, as free(NULL) */
  expect_quiet();
}

RECAP_TEST(null_arguments_are_refused) {
  recap_stream_t s = fresh_stream();
  recap_pool_id_t pool;
  recap_cuda_graph_t raw;
  recap_cuda_graph_exec_t exec;
  size_t count;
  recap_graph_info_t *info;
  recap_stream_t scope_stream;

  EXPECT_STATUS(recap_graph_capture_begin(NULL, NULL, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("graph is NULL");
  EXPECT_STATUS(recap_graph_capture_end(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_instantiate(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_replay(NULL, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_reset(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_pool(NULL, &pool), RECAP_ERROR_INVALID_ARGUMENT);
  recap_graph_state_t graph_state = RECAP_GRAPH_STATE_EAGER;
  EXPECT_STATUS(recap_graph_state(NULL, &graph_state), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_state: graph is NULL");
  assert_int_equal(graph_state, RECAP_GRAPH_STATE_EAGER); /* untouched */
  EXPECT_STATUS(recap_graph_raw(NULL, &raw), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_raw_exec(NULL, &exec), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_node_count(NULL, &count), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_debug_dump(NULL, "x.dot"), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_inspect(NULL, &info), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_capture_scope_begin(NULL, NULL, &scope_stream), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_capture_scope_end(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_stream_is_capturing(s, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  EXPECT_STATUS(recap_graph_pool(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_state(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_state: state is NULL");
  EXPECT_STATUS(recap_graph_raw(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_raw_exec(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_node_count(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_debug_dump(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_inspect(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_capture_scope_begin(g, NULL, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_info_json(NULL, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap_graph_info_free(NULL); /* a no-op */
  destroy_and_expect_quiet(g);
}

RECAP_TEST(capture_on_the_default_stream_is_refused) {
  reset();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("default stream");
  assert_int_equal(capturing(NULL), 0);
  assert_int_equal(recap__registry_count(), 0);
  /* Nothing happened to the graph: it captures on a stream of its own afterwards, and replay
   * on the legacy default stream is fine. */
  recap_stream_t s = recap__fake_stream_new();
  capture_kernels(g, s, 2);
  OK(recap_graph_replay(g, NULL));
  assert_int_equal(recap__fake_now().graph_launches, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(capture_options_are_checked) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.size = 3;
  EXPECT_STATUS(recap_graph_capture_begin(g, &opts, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_CAPTURE_OPTIONS_INIT");
  opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  opts.mode = (recap_capture_mode_t)7;
  EXPECT_STATUS(recap_graph_capture_begin(g, &opts, s), RECAP_ERROR_INVALID_ARGUMENT);
  opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  /* Input-liveness checks are supported (test_liveness.c tests them). */
  opts.check_input_liveness = 1;
  OK(recap_graph_capture_begin(g, &opts, s));
  assert_int_equal(capturing(s), 1);
  OK(recap_graph_reset(g));
  assert_int_equal(capturing(s), 0);
  /* Each mode captures. */
  for (int mode = RECAP_CAPTURE_MODE_GLOBAL; mode <= RECAP_CAPTURE_MODE_RELAXED; mode++) {
    opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
    opts.mode = (recap_capture_mode_t)mode;
    OK(recap_graph_capture_begin(g, &opts, s));
    assert_int_equal(capturing(s), 1);
    launch(s, 1);
    OK(recap_graph_capture_end(g));
    OK(recap_graph_reset(g));
  }
  destroy_and_expect_quiet(g);
}

RECAP_TEST(begin_twice_is_refused) {
  recap_stream_t s = fresh_stream(), other = recap__fake_stream_new();
  recap_graph_t g, h;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&h, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("already under way");
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, other), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(capturing(other), 0);
  /* Another graph on the stream that is capturing: the device refuses, nothing is left. */
  EXPECT_STATUS(recap_graph_capture_begin(h, NULL, s), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(recap__registry_count(), 1);
  recap_pool_id_t pool;
  EXPECT_STATUS(recap_graph_pool(h, &pool), RECAP_ERROR_INVALID_USAGE);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  /* A captured graph must be reset before it captures again. */
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_reset");
  OK(recap_graph_reset(g));
  capture_kernels(g, s, 1);
  /* h was never hurt by its refusal. */
  capture_kernels(h, other, 1);
  DESTROY_GRAPHS(g, h);
  expect_quiet();
}

/* capture_end takes no stream: each graph ends its own capture, on the stream it began on,
 * whichever graph ends first, and with it the side streams that joined it. */
RECAP_TEST(end_ends_the_graphs_own_capture) {
  reset();
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new(),
                 side = recap__fake_stream_new();
  recap_graph_t g1, g2;
  OK(recap_graph_create(&g1, RECAP_GRAPH_KEEP));
  OK(recap_graph_create(&g2, RECAP_GRAPH_KEEP));
  recap_capture_options_t relaxed = RECAP_CAPTURE_OPTIONS_INIT;
  relaxed.mode = RECAP_CAPTURE_MODE_RELAXED;
  OK(recap_graph_capture_begin(g1, &relaxed, s1));
  OK(recap_graph_capture_begin(g2, &relaxed, s2));
  launch(s1, 1);
  assert_true(recap__fake_capture_join(side, s1));
  launch(side, 2);
  launch(s2, 4);
  OK(recap_graph_capture_end(g1));
  assert_int_equal(capturing(s1), 0);
  assert_int_equal(capturing(side), 0);
  assert_int_equal(capturing(s2), 1); /* the other graph's capture goes on */
  assert_int_equal(state_of(g2), RECAP_GRAPH_STATE_CAPTURING);
  assert_int_equal(recap__registry_count(), 1);
  launch(s2, 1);
  OK(recap_graph_capture_end(g2));
  assert_int_equal(capturing(s2), 0);
  size_t nodes;
  OK(recap_graph_node_count(g1, &nodes));
  assert_int_equal(nodes, 3);
  OK(recap_graph_node_count(g2, &nodes));
  assert_int_equal(nodes, 5);
  DESTROY_GRAPHS(g1, g2);
  expect_quiet();
}

RECAP_TEST(end_without_begin_is_refused) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_capture_end: no capture is under way on this graph");
  EXPECT_MESSAGE("recap_graph_capture_begin");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  capture_kernels(g, s, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE); /* ended already */
  EXPECT_MESSAGE("no capture is under way");
  /* The refusal changed nothing. */
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
  /* A failed end ends the capture too: there is nothing left to end. */
  OK(recap_graph_capture_begin(g, NULL, s));
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("no capture is under way");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(replay_and_instantiate_need_a_capture) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, RECAP_GRAPH_KEEP);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("nothing was captured");
  EXPECT_STATUS(recap_graph_instantiate(g), RECAP_ERROR_INVALID_USAGE);
  size_t nodes;
  EXPECT_STATUS(recap_graph_node_count(g, &nodes), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_begin(g, NULL, s));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_STATUS(recap_graph_instantiate(g), RECAP_ERROR_INVALID_USAGE);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(instantiate_needs_keep) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  capture_kernels(g, s, 2);
  EXPECT_STATUS(recap_graph_instantiate(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("RECAP_GRAPH_KEEP");
  /* capture_end instantiated and dropped the template. */
  assert_int_equal(recap__fake_now().live_execs, 1);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  size_t nodes;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 2);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(raw_and_raw_exec_follow_the_template_and_the_executable) {
  recap_stream_t s = fresh_stream();
  recap_cuda_graph_t raw = (recap_cuda_graph_t)&raw;
  recap_cuda_graph_exec_t exec = (recap_cuda_graph_exec_t)&exec;

  /* Without KEEP: no template ever, the executable after capture_end. */
  recap_graph_t plain;
  OK(recap_graph_create(&plain, 0));
  EXPECT_STATUS(recap_graph_raw_exec(plain, &exec), RECAP_ERROR_INVALID_USAGE);
  assert_null(exec);
  capture_kernels(plain, s, 1);
  EXPECT_STATUS(recap_graph_raw(plain, &raw), RECAP_ERROR_INVALID_USAGE);
  assert_null(raw);
  EXPECT_MESSAGE("RECAP_GRAPH_KEEP");
  OK(recap_graph_raw_exec(plain, &exec));
  assert_non_null(exec);

  /* With KEEP: the template after capture_end, the executable once instantiated. */
  recap_graph_t kept;
  OK(recap_graph_create(&kept, RECAP_GRAPH_KEEP));
  EXPECT_STATUS(recap_graph_raw(kept, &raw), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_begin(kept, NULL, s));
  EXPECT_STATUS(recap_graph_raw(kept, &raw), RECAP_ERROR_INVALID_USAGE);
  launch(s, 3);
  OK(recap_graph_capture_end(kept));
  OK(recap_graph_raw(kept, &raw));
  assert_non_null(raw);
  size_t nodes;
  OK(recap__device()->graph_node_count(raw, &nodes));
  assert_int_equal(nodes, 3);
  EXPECT_STATUS(recap_graph_raw_exec(kept, &exec), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_instantiate(kept));
  OK(recap_graph_raw_exec(kept, &exec));
  assert_non_null(exec);
  /* After a reset both are gone. */
  OK(recap_graph_reset(kept));
  EXPECT_STATUS(recap_graph_raw(kept, &raw), RECAP_ERROR_INVALID_USAGE);
  EXPECT_STATUS(recap_graph_raw_exec(kept, &exec), RECAP_ERROR_INVALID_USAGE);

  DESTROY_GRAPHS(plain, kept);
  expect_quiet();
}

RECAP_TEST(pool_exists_from_capture_begin) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_pool_id_t pool = {7, 7}, during, after;
  EXPECT_STATUS(recap_graph_pool(g, &pool), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE(
      "recap_graph_pool: the graph has no pool: it has not begun a capture since it "
      "was created or reset");
  assert_true(pool.a == 7 && pool.b == 7); /* untouched */
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_graph_pool(g, &during));
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_pool(g, &after));
  assert_true(during.a == after.a && during.b == after.b);
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_pool(g, &pool), RECAP_ERROR_INVALID_USAGE);
  /* A capture refused before the stream captured (the legacy stream) names no pool either. */
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_STATUS(recap_graph_pool(g, &pool), RECAP_ERROR_INVALID_USAGE);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(debug_dump_needs_the_kept_template) {
  recap_stream_t s = fresh_stream();
  char path[] = "/tmp/recap_test_graph_dump_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);

  recap_graph_t plain, kept;
  OK(recap_graph_create(&plain, 0));
  OK(recap_graph_create(&kept, RECAP_GRAPH_KEEP));
  EXPECT_STATUS(recap_graph_debug_dump(kept, path), RECAP_ERROR_INVALID_USAGE); /* nothing yet */
  capture_kernels(plain, s, 1);
  EXPECT_STATUS(recap_graph_debug_dump(plain, path), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("RECAP_GRAPH_KEEP");
  OK(recap_graph_capture_begin(kept, NULL, s));
  EXPECT_STATUS(recap_graph_debug_dump(kept, path), RECAP_ERROR_INVALID_USAGE); /* mid-capture */
  recap__fake_launch_kernel(s, "dumped_kernel");
  launch(s, 1);
  OK(recap_graph_capture_end(kept));
  OK(recap_graph_debug_dump(kept, path));
  char *text = read_text_file(path);
  assert_non_null(text);
  EXPECT_CONTAINS(text, "digraph", "dumped_kernel");
  free(text);
  unlink(path);
  EXPECT_STATUS(recap_graph_debug_dump(kept, "/nonexistent-dir/recap/graph.dot"), RECAP_ERROR_IO);
  DESTROY_GRAPHS(plain, kept);
  expect_quiet();
}

RECAP_TEST(destroy_during_capture_ends_it) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, 0);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *p;
  OK(recap_malloc(&p, 4 * KiB, s));
  launch(s, 2);
  OK(recap_graph_destroy(g));
  assert_int_equal(capturing(s), 0);
  assert_int_equal(pool_references(pool), 0);
  /* The block the user still holds stays valid; after it is freed the pool's memory goes. */
  OK(recap_free(p));
  expect_all_released();
  /* The stream captures again. */
  OK(recap_graph_create(&g, 0));
  capture_kernels(g, s, 1);
  destroy_and_expect_quiet(g);
}

/* ------------------------------------------------------------------------------------------
 * Pools and routing
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(capture_makes_its_own_pool) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, 0);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  assert_true(pool.a > 0); /* a graph's own pool is {n,0} */
  assert_int_equal(pool.b, 0);
  recap_pool_memory_t info = pool_info(pool);
  assert_int_equal(info.references, 1);
  assert_int_equal(info.routed, 1);
  OK(recap_graph_capture_end(g));
  info = pool_info(pool);
  assert_int_equal(info.references, 1);
  assert_int_equal(info.routed, 0);
  /* Two graphs given no pool get different ones. */
  recap_graph_t h = graph_capturing(s, NULL);
  recap_pool_id_t other;
  OK(recap_graph_pool(h, &other));
  assert_false(other.a == pool.a && other.b == pool.b);
  OK(recap_graph_capture_end(h));
  OK(recap_graph_destroy(g));
  assert_int_equal(pool_references(pool), 0);
  OK(recap_graph_destroy(h));
  assert_int_equal(pool_references(other), 0);
  expect_quiet();
}

RECAP_TEST(captures_share_a_given_pool) {
  recap_stream_t s = fresh_stream();
  recap_pool_id_t shared = recap_pool_handle();
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = shared;
  recap_graph_t g1, g2;
  OK(recap_graph_create(&g1, 0));
  OK(recap_graph_create(&g2, 0));
  void *a, *b;
  OK(recap_graph_capture_begin(g1, &opts, s));
  OK(recap_malloc(&a, 64 * KiB, s));
  launch(s, 1);
  OK(recap_graph_capture_end(g1));
  OK(recap_graph_capture_begin(g2, &opts, s));
  OK(recap_malloc(&b, 64 * KiB, s));
  launch(s, 1);
  OK(recap_graph_capture_end(g2));
  recap_pool_id_t p1, p2;
  OK(recap_graph_pool(g1, &p1));
  OK(recap_graph_pool(g2, &p2));
  assert_true(p1.a == shared.a && p1.b == shared.b);
  assert_true(p2.a == shared.a && p2.b == shared.b);
  recap_pool_memory_t info = pool_info(shared);
  assert_int_equal(info.references, 2);
  assert_int_equal(info.allocated_bytes, 128 * KiB);
  assert_int_equal(info.segments, 1); /* both captures' blocks in one small segment */
  OK(recap_graph_destroy(g1));
  assert_int_equal(pool_references(shared), 1);
  OK(recap_graph_destroy(g2));
  assert_int_equal(pool_references(shared), 0);
  FREE_ALL(a, b);
  expect_all_released();
}

RECAP_TEST(a_pool_serves_one_capture_at_a_time) {
  reset();
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  recap_pool_id_t shared = recap_pool_handle();
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = shared;
  recap_graph_t g1, g2;
  OK(recap_graph_create(&g1, 0));
  OK(recap_graph_create(&g2, 0));
  OK(recap_graph_capture_begin(g1, &opts, s1));
  EXPECT_STATUS(recap_graph_capture_begin(g2, &opts, s2), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("already routed");
  /* The refused capture was ended and left nothing behind. */
  assert_int_equal(capturing(s2), 0);
  assert_int_equal(recap__registry_count(), 1);
  assert_int_equal(pool_references(shared), 1);
  launch(s1, 1);
  OK(recap_graph_capture_end(g1));
  OK(recap_graph_capture_begin(g2, &opts, s2)); /* now it may */
  launch(s2, 1);
  OK(recap_graph_capture_end(g2));
  assert_int_equal(pool_references(shared), 2);
  DESTROY_GRAPHS(g1, g2);
  expect_quiet();
}

RECAP_TEST(allocations_in_a_capture_come_from_the_graph_pool) {
  reset();
  recap_stream_t s = recap__fake_stream_new(), side = recap__fake_stream_new(),
                 other = recap__fake_stream_new();
  recap_graph_t g = graph_capturing(s, NULL);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *tmp, *out, *joined, *eager;
  OK(recap_malloc(&tmp, 256 * KiB, s));
  OK(recap_malloc(&out, 4 * KiB, s));
  assert_true(recap__fake_capture_join(side, s));
  OK(recap_malloc(&joined, 4 * KiB, side));
  OK(recap_malloc(&eager, 4 * KiB, other)); /* not in the capture */
  assert_int_equal(pool_info(pool).allocated_bytes, 264 * KiB);
  assert_int_equal(pool_info(default_pool).allocated_bytes, 4 * KiB);
  /* A block freed during the capture is reused by the same capture. */
  OK(recap_free(tmp));
  void *again;
  OK(recap_malloc(&again, 256 * KiB, s));
  assert_ptr_equal(again, tmp);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  /* Routing stopped with the capture. */
  void *later;
  OK(recap_malloc(&later, 4 * KiB, s));
  assert_int_equal(pool_info(default_pool).allocated_bytes, 8 * KiB);
  FREE_ALL(later, eager, joined, again, out);
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* An allocation of another thread on the capture's stream (allocate_on_stream). */
typedef struct {
  recap_stream_t stream;
  void *ptr;
  recap_status_t status;
} thread_alloc_t;

static void *allocate_on_stream(void *arg) {
  thread_alloc_t *a = arg;
  a->status = recap_malloc(&a->ptr, 4 * KiB, a->stream);
  return NULL;
}

static uint64_t capture_queries(void) { return recap__fake_now().capture_queries; }

/* The allocator knows the stream recap made capture, from the thread that did, without asking
 * the device which capture it is in; every other stream, thread or moment asks (or needs no
 * answer: no capture is routed). The knowledge ends with the capture, however it ends, and a
 * later capture on the same stream is known afresh. */
RECAP_TEST(the_capturing_stream_is_routed_without_asking_the_device) {
  reset();
  recap_stream_t s = recap__fake_stream_new(), side = recap__fake_stream_new();
  recap_graph_t g = graph_capturing(s, NULL);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  uint64_t asked = capture_queries();
  void *a, *b;
  OK(recap_malloc(&a, 4 * KiB, s));
  OK(recap_free(a));
  OK(recap_malloc(&a, 4 * KiB, s)); /* the front cache's block, still the pool's */
  OK(recap_malloc(&b, 64 * KiB, s));
  assert_int_equal(pool_info(pool).allocated_bytes, 68 * KiB);
  assert_int_equal(capture_queries(), asked);
  /* A side stream joined to the capture: the device says which capture it is in. */
  assert_true(recap__fake_capture_join(side, s));
  void *joined;
  OK(recap_malloc(&joined, 4 * KiB, side));
  assert_int_equal(pool_info(pool).allocated_bytes, 72 * KiB);
  assert_int_equal(capture_queries(), asked + 1);
  /* Another thread on the same stream handle (which could name another stream there, as
   * cudaStreamPerThread does): asked too, and routed by the answer. */
  thread_alloc_t other = {.stream = s};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, allocate_on_stream, &other), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  OK(other.status);
  assert_int_equal(pool_info(pool).allocated_bytes, 76 * KiB);
  assert_int_equal(capture_queries(), asked + 2);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  /* Ended: the stream's allocations go to the default pool, with nothing to ask. */
  void *after;
  OK(recap_malloc(&after, 4 * KiB, s));
  assert_int_equal(pool_info(default_pool).allocated_bytes, 4 * KiB);
  assert_int_equal(pool_info(pool).allocated_bytes, 76 * KiB);
  assert_int_equal(capture_queries(), asked + 2);
  /* The same stream captured by another graph: its pool, known without asking. */
  recap_graph_t g2 = graph_capturing(s, NULL);
  recap_pool_id_t pool2;
  OK(recap_graph_pool(g2, &pool2));
  asked = capture_queries();
  void *second;
  OK(recap_malloc(&second, 4 * KiB, s));
  assert_int_equal(pool_info(pool2).allocated_bytes, 4 * KiB);
  assert_int_equal(pool_info(pool).allocated_bytes, 76 * KiB);
  assert_int_equal(capture_queries(), asked);
  /* Invalidated, the capture still holds the stream until it ends (the device says the same:
   * the invalidated capture keeps its id); its failed end ends the routing too. */
  recap__fake_capture_invalidate(s);
  void *invalidated;
  OK(recap_malloc(&invalidated, 4 * KiB, s));
  assert_int_equal(pool_info(pool2).allocated_bytes, 8 * KiB);
  EXPECT_STATUS(recap_graph_capture_end(g2), RECAP_ERROR_CAPTURE_INVALIDATED);
  void *last;
  OK(recap_malloc(&last, 4 * KiB, s));
  assert_int_equal(pool_info(default_pool).allocated_bytes, 8 * KiB);
  assert_int_equal(pool_info(pool2).allocated_bytes, 8 * KiB);
  FREE_ALL(last, invalidated, second, after, other.ptr, joined, b, a);
  DESTROY_GRAPHS(g, g2);
  expect_all_released();
}

/* ------------------------------------------------------------------------------------------
 * Invalidated, reset and abandoned captures
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(invalidated_capture_leaves_nothing_behind) {
  recap_stream_t s;
  recap_pool_id_t pool;
  void *p;
  recap_graph_t g = capture_with_a_block(&s, &pool, &p);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("cudaErrorStreamCaptureInvalidated");
  /* No pool reference, route or registry entry is left, and the stream is free. */
  assert_int_equal(capturing(s), 0);
  assert_int_equal(recap__registry_count(), 0);
  assert_int_equal(pool_references(pool), 0);
  /* The graph still names the pool of the capture that failed, for audits. */
  recap_pool_id_t failed;
  OK(recap_graph_pool(g, &failed));
  assert_true(failed.a == pool.a && failed.b == pool.b);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  recap_cuda_graph_t raw;
  EXPECT_STATUS(recap_graph_raw(g, &raw), RECAP_ERROR_INVALID_USAGE);
  OK(recap_memory_check());
  /* The stream allocates from the default pool again. */
  void *eager;
  OK(recap_malloc(&eager, 4 * KiB, s));
  assert_int_equal(pool_info(default_pool).allocated_bytes, 4 * KiB);
  OK(recap_free(eager));
  /* The block allocated in the failed capture stays the user's to free. */
  OK(recap_free(p));
  /* Graph and stream capture again. */
  capture_kernels(g, s, 3);
  size_t nodes;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 3);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_destroy(g));
  expect_all_released();
}

RECAP_TEST(illegal_call_in_a_capture_invalidates_it) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, 0);
  /* Synchronising a capturing stream is illegal; CUDA invalidates the capture. */
  EXPECT_STATUS(recap__device()->stream_synchronize(s), RECAP_ERROR_CAPTURE_INVALIDATED);
  launch(s, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(recap__registry_count(), 0);
  assert_int_equal(capturing(s), 0);
  capture_kernels(g, s, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(reset_mid_capture_abandons_it) {
  recap_stream_t s;
  recap_pool_id_t pool;
  void *p;
  recap_graph_t g = capture_with_a_block(&s, &pool, &p);
  OK(recap_graph_reset(g));
  assert_int_equal(capturing(s), 0);
  assert_int_equal(pool_references(pool), 0);
  expect_quiet(); /* the abandoned template is destroyed too */
  OK(recap_free(p));
  expect_no_device_memory();
  /* Capture again, reset the captured graph, capture once more. */
  capture_kernels(g, s, 2);
  OK(recap_graph_instantiate(g));
  OK(recap_graph_reset(g));
  expect_quiet();
  OK(recap_graph_reset(g)); /* resetting a fresh graph is fine */
  capture_kernels(g, s, 4);
  size_t nodes;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 4);
  destroy_and_expect_quiet(g);
}

/* recap_graph_state through every transition of a plain and a KEEP graph. */
RECAP_TEST(state_follows_every_transition) {
  recap_stream_t s = fresh_stream();
  recap_graph_t plain, kept;
  OK(recap_graph_create(&plain, 0));
  OK(recap_graph_create(&kept, RECAP_GRAPH_KEEP));
  assert_int_equal(state_of(plain), RECAP_GRAPH_STATE_FRESH);
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_FRESH);

  /* Without KEEP, capture_end instantiates. */
  OK(recap_graph_capture_begin(plain, NULL, s));
  assert_int_equal(state_of(plain), RECAP_GRAPH_STATE_CAPTURING);
  launch(s, 1);
  OK(recap_graph_capture_end(plain));
  assert_int_equal(state_of(plain), RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_replay(plain, s));
  assert_int_equal(state_of(plain), RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_reset(plain));
  assert_int_equal(state_of(plain), RECAP_GRAPH_STATE_FRESH);

  /* With KEEP, the template waits for instantiate (or the first replay). */
  capture_kernels(kept, s, 2);
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_CAPTURED);
  assert_int_equal(recap__fake_now().live_execs, 0);
  OK(recap_graph_instantiate(kept));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_reset(kept));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_FRESH);
  capture_kernels(kept, s, 2);
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_CAPTURED);
  OK(recap_graph_replay(kept, s));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_reset(kept));

  /* A reset abandons a capture under way. */
  OK(recap_graph_capture_begin(kept, NULL, s));
  OK(recap_graph_reset(kept));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_FRESH);

  /* A capture that fails leaves the graph fresh, as does a refused begin. */
  OK(recap_graph_capture_begin(kept, NULL, s));
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(kept), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_FRESH);
  EXPECT_STATUS(recap_graph_capture_begin(kept, NULL, NULL), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_FRESH);
  /* A refused begin on a graph that is not fresh leaves its state too. */
  capture_kernels(plain, s, 1);
  EXPECT_STATUS(recap_graph_capture_begin(plain, NULL, s), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(state_of(plain), RECAP_GRAPH_STATE_INSTANTIATED);

  /* The capture scope goes through the same states. */
  recap_stream_t scope_stream = NULL;
  OK(recap_capture_scope_begin(kept, NULL, &scope_stream));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_CAPTURING);
  launch(scope_stream, 1);
  OK(recap_capture_scope_end(kept));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_CAPTURED);

  /* With graphs disabled, a scope runs eagerly, from its begin to its end and after. */
  OK(recap_graph_reset(kept));
  recap__graphs_disabled_override(1);
  OK(recap_capture_scope_begin(kept, NULL, &scope_stream));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_EAGER);
  OK(recap_capture_scope_end(kept));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_EAGER);
  OK(recap_graph_reset(kept));
  assert_int_equal(state_of(kept), RECAP_GRAPH_STATE_FRESH);
  recap__graphs_disabled_override(0);

  DESTROY_GRAPHS(plain, kept);
  expect_quiet();
}

/* After a capture that failed, recap_graph_pool still names the pool it used, so that its
 * cleanup can be audited: no reference, no route, only the memory the caller still holds, and
 * once that is freed and the cache emptied, no pool at all. The id stays until a reset or the
 * next capture. */
RECAP_TEST(pool_of_a_failed_capture_audits_its_cleanup) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, 0);
  void *kept_block, *scratch;
  OK(recap_malloc(&kept_block, 4 * KiB, s));
  OK(recap_malloc(&scratch, 64 * KiB, s));
  OK(recap_free(scratch)); /* waits for the capture's end before reuse */
  launch(s, 2);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);

  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  assert_false(recap_pool_is_default(pool));
  recap_pool_memory_t info = pool_info(pool);
  assert_int_equal(info.references, 0);
  assert_int_equal(info.routed, 0);
  assert_int_equal(info.allocated_bytes, 4 * KiB); /* the caller's block, nothing else */
  assert_int_equal(info.waiting_bytes, 0);         /* the capture ended: the scratch is free */
  assert_int_equal(info.segments, 1);
  OK(recap_free(kept_block));
  info = pool_info(pool);
  assert_int_equal(info.allocated_bytes, 0);
  OK(recap_empty_cache());
  recap_pool_memory_t gone = RECAP_POOL_MEMORY_INIT;
  EXPECT_STATUS(recap_pool_memory(pool, &gone), RECAP_ERROR_NOT_FOUND);
  expect_no_device_memory();

  /* The id stays while the graph is fresh; a new capture replaces it, a reset forgets it. */
  recap_pool_id_t again;
  OK(recap_graph_pool(g, &again));
  assert_true(again.a == pool.a && again.b == pool.b);
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_graph_pool(g, &again));
  assert_false(again.a == pool.a && again.b == pool.b);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_pool(g, &again), RECAP_ERROR_INVALID_USAGE);

  /* A shared pool lives on after the failure, with what the other graph holds. */
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = recap_pool_handle();
  recap_graph_t other;
  OK(recap_graph_create(&other, 0));
  void *out;
  OK(recap_graph_capture_begin(other, &opts, s));
  OK(recap_malloc(&out, 4 * KiB, s));
  launch(s, 1);
  OK(recap_graph_capture_end(other));
  OK(recap_graph_capture_begin(g, &opts, s));
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  OK(recap_graph_pool(g, &pool));
  assert_true(pool.a == opts.pool.a && pool.b == opts.pool.b);
  info = pool_info(pool);
  assert_int_equal(info.references, 1); /* the other graph's */
  assert_int_equal(info.allocated_bytes, 4 * KiB);
  OK(recap_graph_destroy(other));
  OK(recap_free(out));
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* ------------------------------------------------------------------------------------------
 * KEEP, instantiate and replay
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(keep_instantiates_on_demand) {
  recap_stream_t s = fresh_stream(), other = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  capture_kernels(g, s, 3);
  assert_int_equal(recap__fake_now().live_graphs, 1); /* the template stays */
  assert_int_equal(recap__fake_now().live_execs, 0);  /* nothing instantiated yet */
  /* The first replay instantiates. */
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().live_execs, 1);
  assert_int_equal(recap__fake_now().graph_launches, 1);
  recap_cuda_graph_exec_t first;
  OK(recap_graph_raw_exec(g, &first));
  /* instantiate again replaces the executable; twice in a row is fine. */
  OK(recap_graph_instantiate(g));
  OK(recap_graph_instantiate(g));
  assert_int_equal(recap__fake_now().live_execs, 1);
  /* Replay on any stream, the legacy default one included. */
  OK(recap_graph_replay(g, other));
  OK(recap_graph_replay(g, NULL));
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, 4);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(replay_launches_without_a_template) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  capture_kernels(g, s, 5);
  assert_int_equal(recap__fake_now().live_graphs, 0); /* dropped after instantiation */
  assert_int_equal(recap__fake_now().live_execs, 1);
  for (int i = 0; i < 10; i++) OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, 10);
  size_t nodes;
  OK(recap_graph_node_count(g, &nodes)); /* remembered from capture_end */
  assert_int_equal(nodes, 5);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(empty_capture_warns) {
  reset();
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = graph_capturing(s, NULL);
  OK(recap_graph_capture_end(g));
  assert_int_equal(log.count, 1);
  assert_int_equal(log.level, RECAP_LOG_LEVEL_WARN);
  assert_non_null(strstr(log.last, "empty"));
  /* An empty graph still replays (as CUDA allows). */
  OK(recap_graph_replay(g, s));
  /* A capture with work does not warn. */
  OK(recap_graph_reset(g));
  capture_kernels(g, s, 1);
  assert_int_equal(log.count, 1);
  recap_test_log_stop();
  destroy_and_expect_quiet(g);
}

RECAP_TEST(graph_launched_inside_a_capture_becomes_a_child_node) {
  recap_stream_t s = fresh_stream();
  recap_graph_t inner, outer;
  OK(recap_graph_create(&inner, RECAP_GRAPH_KEEP)); /* embedding copies the template */
  OK(recap_graph_create(&outer, RECAP_GRAPH_KEEP));
  capture_kernels(inner, s, 2);
  OK(recap_graph_capture_begin(outer, NULL, s));
  launch(s, 1);
  OK(recap_graph_replay(inner, s));
  OK(recap_graph_capture_end(outer));
  assert_int_equal(recap__fake_now().graph_launches, 0); /* captured, not run */
  recap_graph_info_t *info = inspect(outer);
  assert_int_equal(info->node_count, 2);
  assert_int_equal(info->nodes[0].type, RECAP_NODE_KERNEL);
  assert_int_equal(info->nodes[1].type, RECAP_NODE_GRAPH);
  assert_null(info->nodes[1].kernel_name);
  recap_graph_info_free(info);
  DESTROY_GRAPHS(inner, outer);
  expect_quiet();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(create_checks_its_arguments),
    cmocka_unit_test(null_arguments_are_refused),
    cmocka_unit_test(capture_on_the_default_stream_is_refused),
    cmocka_unit_test(capture_options_are_checked),
    cmocka_unit_test(begin_twice_is_refused),
    cmocka_unit_test(end_ends_the_graphs_own_capture),
    cmocka_unit_test(end_without_begin_is_refused),
    cmocka_unit_test(replay_and_instantiate_need_a_capture),
    cmocka_unit_test(instantiate_needs_keep),
    cmocka_unit_test(raw_and_raw_exec_follow_the_template_and_the_executable),
    cmocka_unit_test(pool_exists_from_capture_begin),
    cmocka_unit_test(debug_dump_needs_the_kept_template),
    cmocka_unit_test(destroy_during_capture_ends_it),
    cmocka_unit_test(capture_makes_its_own_pool),
    cmocka_unit_test(captures_share_a_given_pool),
    cmocka_unit_test(a_pool_serves_one_capture_at_a_time),
    cmocka_unit_test(allocations_in_a_capture_come_from_the_graph_pool),
    cmocka_unit_test(the_capturing_stream_is_routed_without_asking_the_device),
    cmocka_unit_test(invalidated_capture_leaves_nothing_behind),
    cmocka_unit_test(illegal_call_in_a_capture_invalidates_it),
    cmocka_unit_test(reset_mid_capture_abandons_it),
    cmocka_unit_test(state_follows_every_transition),
    cmocka_unit_test(pool_of_a_failed_capture_audits_its_cleanup),
    cmocka_unit_test(keep_instantiates_on_demand),
    cmocka_unit_test(replay_launches_without_a_template),
    cmocka_unit_test(empty_capture_warns),
    cmocka_unit_test(graph_launched_inside_a_capture_becomes_a_child_node),
};
RECAP_TEST_MAIN(tests)
