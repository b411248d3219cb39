/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_liveness.c — input-liveness checks on the CPU fake device, whose kernel nodes carry the
 * pointer arguments a test gives them (recap__fake_launch_kernel_args). PyTorch's scenarios
 * (test_cuda_graph_debug.py) that behave the same on CUDA are conformance scenarios, run on the
 * fake and on a device (tests/conformance/liveness.c); here are those the fake alone can set up:
 * a block's record merged away, inputs of streams outside the capture and of a joined side
 * stream, capture in one thread and replay in another. Then copies and memsets, interior
 * pointers, inputs freed during the capture, allocation sites, long reports, the option off, the
 * capture scope, and the allocator's batch lookups the checks are built on.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc/alloc_internal.h"
#include "debug_util.h"
#include "liveness_util.h"
#include "capture_util.h"

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

static int errors_logged;
static char last_log[2048];

static void record_log(recap_log_level_t level, const char *message, void *user_data) {
  (void)user_data;
  if (level == RECAP_LOG_LEVEL_ERROR) errors_logged++;
  snprintf(last_log, sizeof last_log, "%s", message);
}

static void fresh(void) {
  debug_fresh();
  recap_liveness_debug_enable(0);
  errors_logged = 0;
  last_log[0] = '\0';
  recap_log_set(record_log, NULL);
}

static void done(void) {
  recap_liveness_debug_enable(-1);
  debug_done();
}

/* fresh, and a new stream on the fresh fake. */
static recap_stream_t fresh_stream(void) {
  fresh();
  return recap__fake_stream_new();
}

static void *alloc(size_t size, recap_stream_t s) {
  void *p = NULL;
  OK(recap_malloc(&p, size, s));
  assert_non_null(p);
  return p;
}

static void kernel1(recap_stream_t s, const char *name, const void *a) {
  recap__fake_launch_kernel_args(s, name, &a, 1);
}

/* The replay fails with DEAD_INPUT and launches nothing. */
static void expect_dead(recap_graph_t g, recap_stream_t s) {
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  assert_int_equal(recap__fake_now().graph_launches, launches);
}

/* ------------------------------------------------------------------------------------------
 * PyTorch's scenarios
 * ---------------------------------------------------------------------------------------- */

/* A block's record may be merged away and its address handed out from another record: the
 * generation must still differ (it comes from one process-wide counter). */
RECAP_TEST(reallocation_through_another_block_record_is_caught) {
  recap_stream_t s = fresh_stream();
  char *front = alloc(512, s);
  char *x = alloc(512, s);
  assert_ptr_equal(x, front + 512);
  recap_graph_t g = checked_graph(s);
  kernel1(s, "read_x", x);
  OK(recap_graph_capture_end(g));
  /* x merges with the free rest of the segment, then front absorbs it: x's record is gone. */
  FREE_ALL(x, front);
  char *first = alloc(512, s), *second = alloc(512, s);
  assert_ptr_equal(first, front);
  assert_ptr_equal(second, x); /* a new record for the split at x's old address */
  expect_dead(g, s);
  EXPECT_MESSAGE("freed and handed out again");
  FREE_ALL(first, second);
  OK(recap_graph_destroy(g));
  done();
}

/* Work on a stream that does not take part in the capture is not in the graph: its pointers
 * are not inputs. */
RECAP_TEST(inputs_of_streams_outside_the_capture_are_not_tracked) {
  recap_stream_t s = fresh_stream(), other = recap__fake_stream_new();
  recap_capture_options_t relaxed = liveness_options();
  relaxed.mode = RECAP_CAPTURE_MODE_RELAXED;
  float *x = alloc(4096, s), *z = alloc(4096, other);
  recap_graph_t g = graph_capturing(s, &relaxed);
  kernel1(s, "captured", x);
  kernel1(other, "eager", z); /* runs now, outside the graph */
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 1);
  assert_ptr_equal(input_at(g, 0)->base, x);
  OK(recap_free(z));
  OK(recap_graph_replay(g, s));
  /* A side stream joined to the capture is part of it. */
  recap_graph_t joined;
  recap_stream_t side = recap__fake_stream_new();
  float *w = alloc(4096, side);
  OK(recap_graph_create(&joined, 0));
  begin_capture(joined, s);
  assert_true(recap__fake_capture_join(side, s));
  kernel1(side, "on_side", w);
  OK(recap_graph_capture_end(joined));
  assert_int_equal(input_count(joined), 1);
  assert_ptr_equal(input_at(joined, 0)->base, w);
  OK(recap_free(w));
  expect_dead(joined, s);
  DESTROY_GRAPHS(joined, g);
  OK(recap_free(x));
  done();
}

typedef struct thread_job {
  recap_graph_t graph;
  recap_stream_t stream;
  const void *input;
  recap_status_t status;
  char message[1024];
} thread_job_t;

static void *capture_in_thread(void *arg) {
  thread_job_t *job = arg;
  recap_capture_options_t o = liveness_options();
  job->status = recap_graph_capture_begin(job->graph, &o, job->stream);
  if (job->status == RECAP_SUCCESS) {
    kernel1(job->stream, "threaded", job->input);
    job->status = recap_graph_capture_end(job->graph);
  }
  snprintf(job->message, sizeof job->message, "%s", recap_last_error());
  return NULL;
}

static void *replay_in_thread(void *arg) {
  thread_job_t *job = arg;
  job->status = recap_graph_replay(job->graph, job->stream);
  snprintf(job->message, sizeof job->message, "%s", recap_last_error());
  return NULL;
}

RECAP_TEST(capture_in_one_thread_replay_in_another) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(4096, s);
  thread_job_t job = {NULL, s, x, RECAP_SUCCESS, ""};
  OK(recap_graph_create(&job.graph, 0));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, capture_in_thread, &job), 0);
  pthread_join(t, NULL);
  if (job.status != RECAP_SUCCESS) fail_msg("capture thread: %s", job.message);
  assert_int_equal(input_count(job.graph), 1);
  OK(recap_graph_replay(job.graph, s)); /* here */
  assert_int_equal(pthread_create(&t, NULL, replay_in_thread, &job), 0);
  pthread_join(t, NULL);
  assert_int_equal(job.status, RECAP_SUCCESS);
  OK(recap_free(x));
  assert_int_equal(pthread_create(&t, NULL, replay_in_thread, &job), 0);
  pthread_join(t, NULL);
  assert_int_equal(job.status, RECAP_ERROR_DEAD_INPUT);
  assert_non_null(strstr(job.message, "kernel threaded"));
  OK(recap_graph_destroy(job.graph));
  done();
}

/* ------------------------------------------------------------------------------------------
 * What counts as an input
 * ---------------------------------------------------------------------------------------- */

/* Copies (both ends) and memsets (the destination) are read like kernel arguments; memory
 * recap did not allocate, and argument words that are no pointer, are ignored. */
RECAP_TEST(copies_memsets_and_foreign_pointers) {
  recap_stream_t s = fresh_stream();
  char *src = alloc(4096, s), *dst = alloc(4096, s), *zeroed = alloc(8192, s);
  static char host_buffer[64];
  recap_graph_t g = checked_graph(s);
  OK(recap__device()->memcpy_async(dst, src + 128, 256, s));
  recap__fake_memset_async(s, zeroed + 4096, 0, 64);
  const void *args[3] = {host_buffer, (const void *)(uintptr_t)42, (const void *)(uintptr_t)-1};
  recap__fake_launch_kernel_args(s, "scalars", args, 3);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 3);
  const recap_liveness_input_t *inputs;
  size_t n;
  OK(liveness_inputs_of(g, &inputs, &n));
  for (size_t i = 0; i < n; i++) {
    if (inputs[i].base == zeroed) {
      assert_string_equal(inputs[i].node_type, "memset");
      assert_int_equal(inputs[i].node, 1);
      assert_null(inputs[i].kernel_name);
    } else {
      assert_true(inputs[i].base == src || inputs[i].base == dst);
      assert_string_equal(inputs[i].node_type, "memcpy");
      assert_int_equal(inputs[i].node, 0);
    }
  }
  OK(recap_graph_replay(g, s));
  OK(recap_free(zeroed));
  expect_dead(g, s);
  EXPECT_MESSAGE("read by node 1 (memset): freed");
  OK(recap_free(src));
  expect_dead(g, s);
  EXPECT_MESSAGE("read by node 0 (memcpy): freed");
  OK(recap_graph_destroy(g));
  OK(recap_free(dst));
  done();
}

/* An input freed before the capture even ended is reported at the first replay. */
RECAP_TEST(input_freed_during_the_capture) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(4096, s);
  recap_graph_t g = checked_graph(s);
  kernel1(s, "reads_x", x);
  OK(recap_free(x)); /* a default-pool block, freed while the capture runs */
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 1);
  assert_int_equal(input_at(g, 0)->freed_before_capture_end, 1);
  expect_dead(g, s);
  EXPECT_MESSAGE("freed before the capture ended");
  OK(recap_graph_destroy(g));
  done();
}

/* RECAP_LIVENESS_DEBUG: where the dead block was allocated and freed. */
RECAP_TEST(allocation_and_free_sites) {
  fresh();
  recap_liveness_debug_enable(1);
  assert_int_equal(recap_liveness_debug_enabled(), 1);
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g = checked_graph(s);
  kernel1(s, "reads_x", x);
  OK(recap_graph_capture_end(g));
  assert_non_null(input_at(g, 0)->alloc_site);
  OK(recap_free(x));
  expect_dead(g, s);
  EXPECT_MESSAGE("allocated at 0x");
  EXPECT_MESSAGE("; freed at 0x");
  if (strstr(recap_last_error(), "RECAP_LIVENESS_DEBUG=1"))
    fail_msg("the hint to turn sites on shows while they are on: %s", recap_last_error());
  /* Reallocated: the free site of the captured generation is still found. */
  float *again = alloc(4096, s);
  assert_ptr_equal(again, x);
  expect_dead(g, s);
  EXPECT_MESSAGE("; freed at 0x");
  OK(recap_free(again));
  OK(recap_graph_destroy(g));

  /* The environment variable, and code overriding it. */
  setenv("RECAP_LIVENESS_DEBUG", "1", 1);
  recap_liveness_debug_enable(-1);
  assert_int_equal(recap_liveness_debug_enabled(), 1);
  recap_liveness_debug_enable(0);
  assert_int_equal(recap_liveness_debug_enabled(), 0);
  unsetenv("RECAP_LIVENESS_DEBUG");
  recap_liveness_debug_enable(-1);
  assert_int_equal(recap_liveness_debug_enabled(), 0);
  done();
}

/* More dead inputs than a message holds: it says how many more, and the log has them all. */
RECAP_TEST(long_reports_go_to_the_log) {
  fresh();
  enum { INPUTS = 300 };
  recap_stream_t s = recap__fake_stream_new();
  void *bufs[INPUTS];
  for (int i = 0; i < INPUTS; i++) bufs[i] = alloc(512, s);
  recap_graph_t g = checked_graph(s);
  for (int i = 0; i < INPUTS; i++) kernel1(s, "reader_kernel_with_a_long_name", bufs[i]);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), INPUTS);
  for (int i = 0; i < INPUTS; i++) OK(recap_free(bufs[i]));
  expect_dead(g, s);
  EXPECT_MESSAGE("300 of the graph's 300 external inputs were freed");
  EXPECT_MESSAGE("more (the whole list went to the log");
  assert_int_equal(errors_logged, 1 + INPUTS);
  assert_true(strlen(recap_last_error()) < 4096);
  OK(recap_graph_destroy(g));
  done();
}

/* ------------------------------------------------------------------------------------------
 * The option off, misuse, and the capture scope
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(option_off_attaches_nothing) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_begin(g, NULL, s));
  kernel1(s, "reads_x", x);
  OK(recap_graph_capture_end(g));
  assert_int_equal(g->hooks.count, 0); /* replays pay nothing */
  recap_liveness_input_t one = RECAP_LIVENESS_INPUT_INIT;
  size_t n = 1;
  EXPECT_STATUS(recap_graph_liveness_inputs(g, &one, 1, &n), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("check_input_liveness");
  assert_int_equal(n, 0);
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_free(x));
  OK(recap_graph_replay(g, s)); /* unchecked: the caller's risk */
  EXPECT_STATUS(recap_graph_liveness_inputs(g, NULL, 1, &n), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_liveness_inputs(NULL, &one, 1, &n), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_check_inputs(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graph_destroy(g));
  done();
}

/* Mid-capture the inputs are not known yet; after a reset the checks are gone, and a new
 * capture without the option has none. KEEP graphs check too, and instantiate on first replay. */
RECAP_TEST(lifetime_of_the_checks) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  begin_capture(g, s);
  kernel1(s, "reads_x", x);
  const recap_liveness_input_t *inputs;
  size_t n;
  EXPECT_STATUS(liveness_inputs_of(g, &inputs, &n), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 1);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_begin(g, NULL, s));
  kernel1(s, "reads_x", x);
  OK(recap_graph_capture_end(g));
  OK(recap_free(x));
  OK(recap_graph_replay(g, s));
  /* An invalidated capture with the option leaves nothing behind. */
  OK(recap_graph_reset(g));
  begin_capture(g, s);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(g->hooks.count, 0);
  OK(recap_graph_destroy(g));
  done();
}

RECAP_TEST(capture_scope_option) {
  fresh();
  float *x = alloc(4096, NULL);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_scope_options_t o = RECAP_SCOPE_OPTIONS_INIT;
  o.capture.check_input_liveness = 1;
  recap_stream_t s = NULL;
  OK(recap_capture_scope_begin(g, &o, &s));
  kernel1(s, "in_scope", x);
  OK(recap_capture_scope_end(g));
  assert_int_equal(input_count(g), 1);
  OK(recap_free(x));
  expect_dead(g, s);
  /* Embedded capture options of an older layout (no check_input_liveness field) still work,
   * without checks, even when the memory past their size says otherwise. */
  OK(recap_graph_reset(g));
  recap_scope_options_t old = RECAP_SCOPE_OPTIONS_INIT;
  old.capture.check_input_liveness = 1;
  old.capture.size = offsetof(recap_capture_options_t, check_input_liveness);
  OK(recap_capture_scope_begin(g, &old, &s));
  OK(recap_capture_scope_end(g));
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));
  done();
}

/* ------------------------------------------------------------------------------------------
 * The allocator's lookups underneath
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(batch_lookups) {
  recap_stream_t s = fresh_stream();
  char *a = alloc(1000, s), *b = alloc(3 * MiB, s), *c = alloc(512, s);
  int on_stack = 0;
  const void *ptrs[7] = {a, a + 999, b + MiB, c, &on_stack, NULL, a + 1024};
  recap__block_ref_t refs[7];
  bool found[7];
  recap__alloc_find_many(ptrs, 7, refs, found);
  assert_true(found[0] && refs[0].base == a && refs[0].size == 1024 && refs[0].allocated);
  assert_true(found[1] && refs[1].base == a);
  assert_true(found[2] && refs[2].base == b && refs[2].size == 3 * MiB);
  assert_true(found[3] && refs[3].base == c);
  assert_false(found[4]);
  assert_false(found[5]);
  /* a + 1024 is c's start when c follows a in the same small segment, else a free block's. */
  assert_true(found[6]);
  recap__block_ref_t one;
  assert_true(recap__alloc_find(a + 10, &one));
  assert_ptr_equal(one.base, a);
  assert_int_equal(one.generation, refs[0].generation);
  /* Generations are unique across blocks. */
  assert_true(refs[0].generation != refs[2].generation && refs[2].generation != refs[3].generation);

  recap__block_watch_t watch[3] = {{a, refs[0].generation},
                                   {b, refs[2].generation},
                                   {c, refs[3].generation}};
  bool dead[3];
  assert_int_equal(recap__alloc_count_dead(watch, 3, NULL), 0);
  OK(recap_free(b));
  assert_int_equal(recap__alloc_count_dead(watch, 3, dead), 1);
  assert_false(dead[0]);
  assert_true(dead[1]);
  assert_false(dead[2]);
  watch[0].generation++;
  assert_int_equal(recap__alloc_count_dead(watch, 3, dead), 2);
  assert_true(dead[0]);
  assert_int_equal(recap__alloc_count_dead(watch, 0, NULL), 0);
  FREE_ALL(a, c);
  done();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(reallocation_through_another_block_record_is_caught),
    cmocka_unit_test(inputs_of_streams_outside_the_capture_are_not_tracked),
    cmocka_unit_test(capture_in_one_thread_replay_in_another),
    cmocka_unit_test(copies_memsets_and_foreign_pointers),
    cmocka_unit_test(input_freed_during_the_capture),
    cmocka_unit_test(allocation_and_free_sites),
    cmocka_unit_test(long_reports_go_to_the_log),
    cmocka_unit_test(option_off_attaches_nothing),
    cmocka_unit_test(lifetime_of_the_checks),
    cmocka_unit_test(capture_scope_option),
    cmocka_unit_test(batch_lookups),
};
RECAP_TEST_MAIN(tests)
