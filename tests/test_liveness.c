/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_liveness.c — input-liveness checks on the CPU fake device, whose kernel nodes carry the
 * pointer arguments a test gives them (recap__fake_launch_kernel_args). The scenarios are the
 * analogues of PyTorch's test_cuda_graph_debug.py: nothing dead; one dead input; a dead
 * intermediate is fine; one of several inputs dead; dead weights read by several kernels; a
 * buffer that dies between two replays; freed and handed out again at the same address; an
 * output of an earlier graph in a shared pool; inputs of streams outside the capture; capture
 * in one thread and replay in another. Then copies and memsets, interior pointers, inputs freed
 * during the capture, allocation sites, long reports, the option off, the capture scope, and
 * the allocator's batch lookups the checks are built on.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc/alloc_internal.h"
#include "fake_util.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"

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
  reset();
  recap__side_streams_forget();
  recap__graphs_disabled_override(0);
  recap_liveness_debug_enable(0);
  errors_logged = 0;
  last_log[0] = '\0';
  recap_log_set(record_log, NULL);
}

static void done(void) {
  recap_log_set(NULL, NULL);
  recap_liveness_debug_enable(-1);
  assert_int_equal(recap__registry_count(), 0);
  check();
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
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

static void kernel2(recap_stream_t s, const char *name, const void *a, const void *b) {
  const void *args[2] = {a, b};
  recap__fake_launch_kernel_args(s, name, args, 2);
}

static recap_capture_options_t liveness_options(void) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.check_input_liveness = 1;
  return o;
}

static void begin(recap_graph_t g, recap_stream_t s) {
  recap_capture_options_t o = liveness_options();
  OK(recap_graph_capture_begin(g, s, &o));
}

static size_t input_count(recap_graph_t g) {
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 0;
  OK(recap_graph_liveness_inputs(g, &inputs, &n));
  return n;
}

static const recap_liveness_input_t *input_at(recap_graph_t g, size_t i) {
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 0;
  OK(recap_graph_liveness_inputs(g, &inputs, &n));
  if (i >= n) fail_msg("input %zu of %zu", i, n);
  return &inputs[i];
}

/* The replay fails with DEAD_INPUT and launches nothing. */
static void expect_dead(recap_graph_t g, recap_stream_t s) {
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  assert_int_equal(recap__fake_now().graph_launches, launches);
}

static void expect_mentions_pointer(const void *p) {
  char text[32];
  snprintf(text, sizeof text, "%p", p);
  EXPECT_MESSAGE(text);
}

static void expect_no_pointer(const void *p) {
  char text[40];
  snprintf(text, sizeof text, "%p (", p);
  if (strstr(recap_last_error(), text))
    fail_msg("the message names %p, which is alive: %s", p, recap_last_error());
}

/* ------------------------------------------------------------------------------------------
 * PyTorch's scenarios
 * ---------------------------------------------------------------------------------------- */

static void nothing_dead(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  float *y = alloc(4096, s); /* the graph's own output */
  kernel2(s, "scale", x, y);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 1);
  const recap_liveness_input_t *in = input_at(g, 0);
  assert_ptr_equal(in->base, x);
  assert_int_equal(in->size, 4096);
  assert_int_equal(in->node, 0);
  assert_int_equal(in->reader_count, 1);
  assert_string_equal(in->node_type, "kernel");
  assert_string_equal(in->kernel_name, "scale");
  assert_null(in->alloc_site);
  assert_int_equal(in->freed_before_capture_end, 0);
  uint64_t launches = recap__fake_now().graph_launches;
  for (int i = 0; i < 3; i++) OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, launches + 3);
  OK(recap_graph_check_inputs(g));
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  OK(recap_free(y));
  done();
}

static void one_dead_input(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  float *y = alloc(4096, s);
  kernel2(s, "add_one", x, y);
  OK(recap_graph_capture_end(g));
  OK(recap_free(x));
  expect_dead(g, s);
  EXPECT_MESSAGE("recap_graph_replay: 1 of the graph's 1 external input was freed");
  expect_mentions_pointer(x);
  EXPECT_MESSAGE("(4096 bytes) read by node 0 (kernel add_one): freed");
  EXPECT_MESSAGE("RECAP_LIVENESS_DEBUG=1");
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_DEAD_INPUT);
  /* Still dead at the next try; the graph object itself is fine. */
  expect_dead(g, s);
  OK(recap_graph_destroy(g));
  OK(recap_free(y));
  done();
}

/* An intermediate allocated and freed inside the capture lives in the graph's pool: not an
 * input, and its death is the graph's business. */
static void dead_intermediate_is_fine(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  float *tmp = alloc(4096, s);
  kernel2(s, "produce", x, tmp);
  float *out = alloc(4096, s);
  kernel2(s, "consume", tmp, out);
  OK(recap_free(tmp));
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 1);
  assert_ptr_equal(input_at(g, 0)->base, x);
  for (int i = 0; i < 2; i++) OK(recap_graph_replay(g, s));
  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(recap_free(x));
  done();
}

static void one_of_several_inputs_dead(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *a = alloc(1024, s), *b = alloc(2048, s), *c = alloc(3072, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  float *out = alloc(1024, s);
  const void *args[4] = {a, b, c, out};
  recap__fake_launch_kernel_args(s, "combine", args, 4);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 3);
  /* Sorted by address. */
  for (size_t i = 1; i < 3; i++)
    assert_true((uintptr_t)input_at(g, i - 1)->base < (uintptr_t)input_at(g, i)->base);
  OK(recap_free(b));
  expect_dead(g, s);
  EXPECT_MESSAGE("1 of the graph's 3 external inputs was freed");
  expect_mentions_pointer(b);
  EXPECT_MESSAGE("(2048 bytes)");
  expect_no_pointer(a);
  expect_no_pointer(c);
  OK(recap_free(a));
  expect_dead(g, s);
  EXPECT_MESSAGE("2 of the graph's 3 external inputs were freed");
  OK(recap_graph_destroy(g));
  OK(recap_free(c));
  OK(recap_free(out));
  done();
}

/* Weights read by every layer: one input, read by several nodes. */
static void dead_model_weights(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *weights = alloc(64 * KiB, s), *x = alloc(4 * KiB, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  float *h = alloc(4 * KiB, s);
  kernel2(s, "layer0", weights, x);
  /* A pointer into the middle of the weights (layer 1's slice). */
  kernel2(s, "layer1", (char *)weights + 16 * KiB, h);
  kernel2(s, "layer2", (char *)weights + 32 * KiB, h);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 2);
  const recap_liveness_input_t *w =
      input_at(g, 0)->base == weights ? input_at(g, 0) : input_at(g, 1);
  assert_ptr_equal(w->base, weights);
  assert_int_equal(w->size, 64 * KiB);
  assert_int_equal(w->node, 0);
  assert_int_equal(w->reader_count, 3);
  OK(recap_graph_replay(g, s));
  OK(recap_free(weights));
  expect_dead(g, s);
  EXPECT_MESSAGE("read by node 0 (kernel layer0) and others: freed");
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  OK(recap_free(h));
  done();
}

static void buffer_dies_between_replays(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s), *y = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  kernel2(s, "copy", x, y);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s));
  OK(recap_free(y)); /* an output written by the graph dies too */
  expect_dead(g, s);
  expect_mentions_pointer(y);
  expect_no_pointer(x);
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  done();
}

/* The classic use after free: the block is freed and handed out again, at the same address,
 * to someone else. The address is alive, but it is not the graph's buffer any more. */
static void freed_and_reallocated_at_the_same_address(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  float *y = alloc(4096, s);
  kernel2(s, "read_x", x, y);
  OK(recap_graph_capture_end(g));
  OK(recap_free(x));
  float *again = alloc(4096, s);
  assert_ptr_equal(again, x); /* the cache hands the same block out again */
  expect_dead(g, s);
  expect_mentions_pointer(x);
  EXPECT_MESSAGE("freed and handed out again");
  OK(recap_free(again));
  OK(recap_graph_destroy(g));
  OK(recap_free(y));
  done();
}

/* A block's record may be merged away and its address handed out from another record: the
 * generation must still differ (it comes from one process-wide counter). */
static void reallocation_through_another_block_record_is_caught(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  char *front = alloc(512, s);
  char *x = alloc(512, s);
  assert_ptr_equal(x, front + 512);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  kernel1(s, "read_x", x);
  OK(recap_graph_capture_end(g));
  /* x merges with the free rest of the segment, then front absorbs it: x's record is gone. */
  OK(recap_free(x));
  OK(recap_free(front));
  char *first = alloc(512, s), *second = alloc(512, s);
  assert_ptr_equal(first, front);
  assert_ptr_equal(second, x); /* a new record for the split at x's old address */
  expect_dead(g, s);
  EXPECT_MESSAGE("freed and handed out again");
  OK(recap_free(first));
  OK(recap_free(second));
  OK(recap_graph_destroy(g));
  done();
}

/* Graphs that share a pool: the second reads an output of the first; that block is the pool's
 * business (replay order), never flagged, even when the user frees it. */
static void output_of_earlier_graph_in_shared_pool_not_flagged(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_pool_id_t pool = recap_pool_handle();
  recap_capture_options_t o = liveness_options();
  o.pool = pool;
  recap_graph_t first, second;
  OK(recap_graph_create(&first, 0));
  OK(recap_graph_create(&second, 0));
  OK(recap_graph_capture_begin(first, s, &o));
  float *mid = alloc(4096, s);
  kernel2(s, "stage1", x, mid);
  OK(recap_graph_capture_end(first));
  OK(recap_graph_capture_begin(second, s, &o));
  float *out = alloc(4096, s);
  kernel2(s, "stage2", mid, out);
  OK(recap_graph_capture_end(second));
  assert_int_equal(input_count(first), 1);
  assert_int_equal(input_count(second), 0);
  OK(recap_graph_replay(first, s));
  OK(recap_graph_replay(second, s));
  OK(recap_free(mid));
  OK(recap_graph_replay(second, s));
  /* The first graph's input is still checked. */
  OK(recap_free(x));
  expect_dead(first, s);
  OK(recap_graph_destroy(first));
  OK(recap_graph_destroy(second));
  OK(recap_free(out));
  done();
}

/* Work on a stream that does not take part in the capture is not in the graph: its pointers
 * are not inputs. */
static void inputs_of_streams_outside_the_capture_are_not_tracked(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new(), other = recap__fake_stream_new();
  recap_capture_options_t relaxed = liveness_options();
  relaxed.mode = RECAP_CAPTURE_MODE_RELAXED;
  float *x = alloc(4096, s), *z = alloc(4096, other);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, s, &relaxed));
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
  begin(joined, s);
  assert_true(recap__fake_capture_join(side, s));
  kernel1(side, "on_side", w);
  OK(recap_graph_capture_end(joined));
  assert_int_equal(input_count(joined), 1);
  assert_ptr_equal(input_at(joined, 0)->base, w);
  OK(recap_free(w));
  expect_dead(joined, s);
  OK(recap_graph_destroy(joined));
  OK(recap_graph_destroy(g));
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
  job->status = recap_graph_capture_begin(job->graph, job->stream, &o);
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

static void capture_in_one_thread_replay_in_another(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
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
static void copies_memsets_and_foreign_pointers(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  char *src = alloc(4096, s), *dst = alloc(4096, s), *zeroed = alloc(8192, s);
  static char host_buffer[64];
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
  OK(recap__device()->memcpy_async(dst, src + 128, 256, s));
  recap__fake_memset_async(s, zeroed + 4096, 0, 64);
  const void *args[3] = {host_buffer, (const void *)(uintptr_t)42, (const void *)(uintptr_t)-1};
  recap__fake_launch_kernel_args(s, "scalars", args, 3);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 3);
  const recap_liveness_input_t *inputs;
  size_t n;
  OK(recap_graph_liveness_inputs(g, &inputs, &n));
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
static void input_freed_during_the_capture(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
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
static void allocation_and_free_sites(void **state) {
  (void)state;
  fresh();
  recap_liveness_debug_enable(1);
  assert_int_equal(recap_liveness_debug_enabled(), 1);
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
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
static void long_reports_go_to_the_log(void **state) {
  (void)state;
  fresh();
  enum { INPUTS = 300 };
  recap_stream_t s = recap__fake_stream_new();
  void *bufs[INPUTS];
  for (int i = 0; i < INPUTS; i++) bufs[i] = alloc(512, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s);
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

static void option_off_attaches_nothing(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_begin(g, s, NULL));
  kernel1(s, "reads_x", x);
  OK(recap_graph_capture_end(g));
  assert_int_equal(g->hooks.count, 0); /* replays pay nothing */
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 1;
  EXPECT_STATUS(recap_graph_liveness_inputs(g, &inputs, &n), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("check_input_liveness");
  assert_null(inputs);
  assert_int_equal(n, 0);
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_free(x));
  OK(recap_graph_replay(g, s)); /* unchecked: the caller's risk */
  EXPECT_STATUS(recap_graph_liveness_inputs(g, NULL, &n), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_liveness_inputs(NULL, &inputs, &n), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_check_inputs(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graph_destroy(g));
  done();
}

/* Mid-capture the inputs are not known yet; after a reset the checks are gone, and a new
 * capture without the option has none. KEEP graphs check too, and instantiate on first replay. */
static void lifetime_of_the_checks(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  float *x = alloc(4096, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  begin(g, s);
  kernel1(s, "reads_x", x);
  const recap_liveness_input_t *inputs;
  size_t n;
  EXPECT_STATUS(recap_graph_liveness_inputs(g, &inputs, &n), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 1);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_begin(g, s, NULL));
  kernel1(s, "reads_x", x);
  OK(recap_graph_capture_end(g));
  OK(recap_free(x));
  OK(recap_graph_replay(g, s));
  /* An invalidated capture with the option leaves nothing behind. */
  OK(recap_graph_reset(g));
  begin(g, s);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(g->hooks.count, 0);
  OK(recap_graph_destroy(g));
  done();
}

static void capture_scope_option(void **state) {
  (void)state;
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

static void batch_lookups(void **state) {
  (void)state;
  fresh();
  recap_stream_t s = recap__fake_stream_new();
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
  OK(recap_free(a));
  OK(recap_free(c));
  done();
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nothing_dead),
      cmocka_unit_test(one_dead_input),
      cmocka_unit_test(dead_intermediate_is_fine),
      cmocka_unit_test(one_of_several_inputs_dead),
      cmocka_unit_test(dead_model_weights),
      cmocka_unit_test(buffer_dies_between_replays),
      cmocka_unit_test(freed_and_reallocated_at_the_same_address),
      cmocka_unit_test(reallocation_through_another_block_record_is_caught),
      cmocka_unit_test(output_of_earlier_graph_in_shared_pool_not_flagged),
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
  return RECAP_TEST_RUN(argc, argv, tests);
}
