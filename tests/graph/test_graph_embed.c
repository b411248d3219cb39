/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_embed.c — a replay inside another capture, on the CPU fake device: the replayed
 * graph becomes a child graph node of the capturing graph, ordered like the stream's other
 * work, and the outer graph's replays compute what the same work run eagerly computes, bit for
 * bit; the outer graph holds the embedded graphs' pools (to any depth), refuses to replay while
 * one sleeps, and the embedded graph still replays alone. What cannot be embedded is refused
 * with the rule named, and a failure of the seam's call changes nothing.
 */
#include <stdint.h>

#include "graph_util.h"
#include "harness.h"

/* ------------------------------------------------------------------------------------------
 * Kernels that compute on one 64-bit word, and the work they stand for run eagerly
 * ---------------------------------------------------------------------------------------- */

/* x = x * a + b, its argument words being x, a and b. */
static void k_axb(void *const *args, size_t n) {
  (void)n;
  int64_t *x = args[0];
  *x = *x * (int64_t)(intptr_t)args[1] + (int64_t)(intptr_t)args[2];
}

/* Launch x = x * a + b on s. */
static void run(recap_stream_t s, int64_t a, int64_t b, int64_t *x) {
  const void *args[] = {x, (const void *)(intptr_t)a, (const void *)(intptr_t)b};
  recap__fake_launch_kernel_fn(s, "axb", k_axb, args, 3);
}

/* A graph with flags capturing x = 3x + 1 on s, its word allocated in its pool: *x. */
static recap_graph_t inner_graph(recap_stream_t s, unsigned flags, int64_t **x) {
  recap_graph_t g;
  OK(recap_graph_create(&g, flags));
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_malloc((void **)x, sizeof **x, s));
  run(s, 3, 1, *x);
  OK(recap_graph_capture_end(g));
  return g;
}

/* A graph capturing x += 10, a replay of inner, x *= 2 on s. */
static recap_graph_t outer_graph(recap_stream_t s, recap_graph_t inner, int64_t *x) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
  run(s, 1, 10, x);
  OK(recap_graph_replay(inner, s));
  run(s, 2, 0, x);
  OK(recap_graph_capture_end(g));
  return g;
}

/* What outer_graph's work does, eagerly. */
static int64_t eager_outer(int64_t x) { return ((x + 10) * 3 + 1) * 2; }

/* outer (outer_graph's) replayed on s from x = start gives what the work gives eagerly. */
static void expect_outer_eager(recap_graph_t outer, recap_stream_t s, int64_t *x, int64_t start) {
  *x = start;
  OK(recap_graph_replay(outer, s));
  assert_int_equal(*x, eager_outer(start));
}

/* The end of a test of inner embedded in outer: x freed, outer destroyed (giving back its
 * reference to inner's pool), inner destroyed. */
static void finish_embedded(recap_graph_t inner, recap_graph_t outer, int64_t *x) {
  recap_pool_id_t pool = pool_of(inner);
  int before = pool_references(pool);
  OK(recap_free(x));
  OK(recap_graph_destroy(outer));
  assert_int_equal(pool_references(pool), before - 1);
  destroy_and_expect_quiet(inner);
}

/* A KEEP inner graph (inner_graph on s) and an outer graph capturing on s2. */
typedef struct embed_case {
  recap_stream_t s, s2;
  int64_t *x;
  recap_graph_t inner, outer;
  recap_pool_id_t pool; /* inner's */
} embed_case_t;

static embed_case_t embed_case(void) {
  embed_case_t c;
  c.s = fresh_stream();
  c.s2 = recap__fake_stream_new();
  c.inner = inner_graph(c.s, RECAP_GRAPH_KEEP, &c.x);
  c.pool = pool_of(c.inner);
  OK(recap_graph_create(&c.outer, 0));
  OK(recap_graph_capture_begin(c.outer, NULL, c.s2));
  return c;
}

static size_t nodes_of(recap_graph_t g) {
  size_t n = 0;
  OK(recap_graph_node_count(g, &n));
  return n;
}

/* The outer capture on s2 goes on after a refusal: x += 10 then its end, one node. */
static void expect_capture_unharmed(recap_graph_t outer, recap_stream_t s2, int64_t *x) {
  run(s2, 1, 10, x);
  OK(recap_graph_capture_end(outer));
  assert_int_equal(nodes_of(outer), 1);
  *x = 1;
  OK(recap_graph_replay(outer, s2));
  assert_int_equal(*x, 11);
}

/* ------------------------------------------------------------------------------------------
 * Embedding
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(replay_in_a_capture_embeds_the_graph) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  *x = 5;
  uint64_t launches = recap__fake_now().graph_launches;
  recap_graph_t outer = outer_graph(s2, inner, x);
  /* Nothing ran: the replay became a node of the capture, between the two kernels. */
  assert_int_equal(recap__fake_now().graph_launches, launches);
  assert_int_equal(*x, 5);
  assert_int_equal(nodes_of(outer), 3);
  for (int64_t start = -3; start < 4; start++) expect_outer_eager(outer, s2, x, start);
  /* The embedded graph still replays alone. */
  *x = 2;
  OK(recap_graph_replay(inner, s));
  assert_int_equal(*x, 7);
  finish_embedded(inner, outer, x);
}

/* A capture that embeds the same graph twice runs it twice, in stream order. */
/* A graph created without RECAP_GRAPH_KEEP dropped its template, and CUDA launches no
 * executable into a capture: refused before anything is added. */
RECAP_TEST(a_graph_without_a_template_is_refused) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, 0, &x);
  recap_pool_id_t pool = pool_of(inner);
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  uint64_t launches = recap__fake_now().calls[RECAP__FAKE_FAULT_LAUNCH];
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("create it with RECAP_GRAPH_KEEP");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_LAUNCH], launches);
  assert_int_equal(pool_references(pool), 1);
  expect_capture_unharmed(outer, s2, x);
  OK(recap_free(x));
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

RECAP_TEST(embedding_twice_runs_twice_in_order) {
  embed_case_t c = embed_case();
  recap_stream_t s2 = c.s2;
  int64_t *x = c.x;
  recap_graph_t inner = c.inner, outer = c.outer;
  recap_pool_id_t pool = c.pool;
  OK(recap_graph_replay(inner, s2));
  run(s2, 1, -7, x);
  OK(recap_graph_replay(inner, s2));
  OK(recap_graph_capture_end(outer));
  /* One reference for the outer graph, however often it embeds the pool. */
  assert_int_equal(pool_references(pool), 2);
  *x = 4;
  OK(recap_graph_replay(outer, s2));
  assert_int_equal(*x, ((4 * 3 + 1) - 7) * 3 + 1);
  finish_embedded(inner, outer, x);
}

RECAP_TEST(the_outer_graph_holds_the_embedded_pool) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  recap_pool_id_t pool = pool_of(inner);
  assert_int_equal(pool_references(pool), 1);
  recap_graph_t outer = outer_graph(s2, inner, x);
  assert_int_equal(pool_references(pool), 2);
  assert_true(recap_pool_is_default(pool) == 0);
  /* The embedded graph goes; its pool, which the outer graph's work uses, stays. */
  OK(recap_graph_destroy(inner));
  assert_int_equal(pool_references(pool), 1);
  expect_outer_eager(outer, s2, x, 1);
  OK(recap_free(x));
  /* A reset of the outer graph gives the reference back. */
  OK(recap_graph_reset(outer));
  assert_int_equal(pool_references(pool), 0);
  destroy_and_expect_quiet(outer);
}

/* A recapture of the outer graph replaces its capture: the references of what the old capture
 * embedded go once the recapture succeeds, and stay while it runs. */
RECAP_TEST(a_recapture_of_the_outer_graph_gives_the_references_back) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  recap_pool_id_t pool = pool_of(inner);
  recap_graph_t outer = outer_graph(s2, inner, x);
  assert_int_equal(pool_references(pool), 2);
  OK(recap_graph_recapture_begin(outer, NULL, s2));
  run(s2, 2, 0, x);
  assert_int_equal(pool_references(pool), 2);
  OK(recap_graph_capture_end(outer));
  assert_int_equal(pool_references(pool), 1);
  *x = 5;
  OK(recap_graph_replay(outer, s2));
  assert_int_equal(*x, 10);
  OK(recap_free(x));
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

RECAP_TEST(nesting_three_deep) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new(), s3 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t g1 = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  recap_graph_t g2;
  OK(recap_graph_create(&g2, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g2, NULL, s2));
  run(s2, 1, 10, x);
  OK(recap_graph_replay(g1, s2));
  OK(recap_graph_capture_end(g2));
  recap_graph_t g3;
  OK(recap_graph_create(&g3, 0));
  OK(recap_graph_capture_begin(g3, NULL, s3));
  OK(recap_graph_replay(g2, s3));
  run(s3, 2, 0, x);
  OK(recap_graph_replay(g1, s3));
  OK(recap_graph_capture_end(g3));
  assert_int_equal(nodes_of(g3), 3);
  recap_pool_id_t p1 = pool_of(g1), p2 = pool_of(g2), p3 = pool_of(g3);
  /* g1's pool: g1, g2 and g3; g2's: g2 and g3. */
  assert_int_equal(pool_references(p1), 3);
  assert_int_equal(pool_references(p2), 2);
  assert_int_equal(pool_references(p3), 1);
  for (int64_t start = 0; start < 3; start++) {
    *x = start;
    OK(recap_graph_replay(g3, s3));
    assert_int_equal(*x, (((start + 10) * 3 + 1) * 2) * 3 + 1);
  }
  /* Each level still replays alone. */
  *x = 1;
  OK(recap_graph_replay(g2, s2));
  assert_int_equal(*x, 34);
  OK(recap_graph_replay(g1, s));
  assert_int_equal(*x, 103);
  OK(recap_graph_destroy(g1));
  OK(recap_graph_destroy(g2));
  assert_int_equal(pool_references(p1), 1);
  assert_int_equal(pool_references(p2), 1);
  *x = 0;
  OK(recap_graph_replay(g3, s3));
  assert_int_equal(*x, (((0 + 10) * 3 + 1) * 2) * 3 + 1);
  OK(recap_free(x));
  OK(recap_graph_destroy(g3));
  assert_int_equal(pool_references(p1), 0);
  assert_int_equal(pool_references(p2), 0);
  expect_quiet();
}

/* A side stream joined to the capture embeds into it, ordered after the side's work and before
 * the origin's work once joined back. */
RECAP_TEST(a_joined_side_stream_embeds) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new(), side = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  run(s2, 1, 10, x);
  assert_true(recap__fake_capture_join(side, s2));
  OK(recap_graph_replay(inner, side));
  assert_true(recap__fake_capture_join_back(side, s2));
  run(s2, 2, 0, x);
  OK(recap_graph_capture_end(outer));
  assert_int_equal(pool_references(pool_of(inner)), 2);
  expect_outer_eager(outer, s2, x, 4);
  finish_embedded(inner, outer, x);
}

/* A replay on a stream that does not capture launches, while another stream captures. */
RECAP_TEST(a_replay_beside_a_capture_launches) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  recap_graph_t other;
  OK(recap_graph_create(&other, 0));
  OK(recap_graph_capture_begin(other, NULL, s2));
  *x = 1;
  OK(recap_graph_replay(inner, s));
  assert_int_equal(*x, 4);
  run(s2, 2, 0, x);
  OK(recap_graph_capture_end(other));
  assert_int_equal(pool_references(pool_of(inner)), 1);
  OK(recap_free(x));
  OK(recap_graph_destroy(other));
  destroy_and_expect_quiet(inner);
}

/* ------------------------------------------------------------------------------------------
 * Refusals and failures: each leaves the capture and the references as they were
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(a_graph_is_not_replayed_into_its_own_capture) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, RECAP_GRAPH_KEEP);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("cannot be replayed into its own capture");
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(nodes_of(g), 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(fresh_and_recapturing_graphs_are_refused) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  recap_graph_t fresh;
  OK(recap_graph_create(&fresh, RECAP_GRAPH_KEEP));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  EXPECT_STATUS(recap_graph_replay(fresh, s2), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("nothing was captured yet, so there is nothing to embed");
  OK(recap_graph_recapture_begin(inner, NULL, s));
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("being recaptured");
  run(s, 3, 1, x);
  OK(recap_graph_capture_end(inner));
  expect_capture_unharmed(outer, s2, x);
  OK(recap_free(x));
  OK(recap_graph_destroy(outer));
  OK(recap_graph_destroy(fresh));
  destroy_and_expect_quiet(inner);
}

RECAP_TEST(conditional_nodes_are_refused) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t word = 0;
  recap_graph_t inner;
  OK(recap_graph_create(&inner, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(inner, NULL, s));
  recap_cond_t c;
  OK(recap_cond_create(&c, 1, s));
  OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
  run(s, 1, 10, &word);
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(inner));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE(
      "the graph holds conditional nodes (regions on the device), which CUDA does not "
      "allow inside a child graph node");
  assert_int_equal(pool_references(pool_of(inner)), 1);
  expect_capture_unharmed(outer, s2, &word);
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

/* Regions on the host path run as a host loop of several graphs, which no node can hold. */
RECAP_TEST(host_path_regions_are_refused) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t word = 0;
  recap_graph_t inner;
  OK(recap_graph_create(&inner, RECAP_GRAPH_KEEP));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = RECAP_REGIONS_HOST;
  OK(recap_graph_capture_begin(inner, &o, s));
  recap_cond_t c;
  OK(recap_cond_create(&c, 1, s));
  OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
  run(s, 1, 10, &word);
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(inner));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("its regions run on the host path");
  expect_capture_unharmed(outer, s2, &word);
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

/* The outer graph advances the embedded graph's generator at each of its replays
 * (tests/rng/test_rng_embed.c checks the offsets each kernel reads). */
RECAP_TEST(random_numbers_embed) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  recap_generator_t gen;
  OK(recap_generator_create(&gen, 7));
  float *out;
  OK(recap_malloc((void **)&out, 16 * sizeof *out, s));
  recap_graph_t inner;
  OK(recap_graph_create(&inner, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(inner, NULL, s));
  OK(recap_rng_uniform(gen, out, 16, s));
  OK(recap_graph_capture_end(inner));
  OK(recap_graph_replay(inner, s));
  uint64_t step = 0;
  OK(recap_generator_offset_get(gen, &step));
  assert_true(step > 0);
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  OK(recap_graph_replay(inner, s2));
  OK(recap_graph_capture_end(outer));
  assert_int_equal(nodes_of(outer), 1);
  for (int i = 0; i < 3; i++) OK(recap_graph_replay(outer, s2));
  uint64_t offset = 0;
  OK(recap_generator_offset_get(gen, &offset));
  assert_int_equal(offset, 4 * step);
  OK(recap_graph_destroy(outer));
  OK(recap_graph_destroy(inner));
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  expect_quiet();
}

RECAP_TEST(a_failed_child_node_changes_nothing) {
  embed_case_t c = embed_case();
  recap_stream_t s2 = c.s2;
  int64_t *x = c.x;
  recap_graph_t inner = c.inner, outer = c.outer;
  recap_pool_id_t pool = c.pool;
  run(s2, 1, 10, x);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_CHILD, 1);
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("fault injected");
  assert_int_equal(pool_references(pool), 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_CHILD], 1);
  /* The capture goes on; the same replay again succeeds. */
  OK(recap_graph_replay(inner, s2));
  run(s2, 2, 0, x);
  OK(recap_graph_capture_end(outer));
  assert_int_equal(pool_references(pool), 2);
  assert_int_equal(nodes_of(outer), 3);
  expect_outer_eager(outer, s2, x, 3);
  finish_embedded(inner, outer, x);
}

/* An outer capture that fails gives back the references its embeds took. */
RECAP_TEST(an_abandoned_outer_capture_gives_the_references_back) {
  embed_case_t c = embed_case();
  recap_stream_t s2 = c.s2;
  int64_t *x = c.x;
  recap_graph_t inner = c.inner, outer = c.outer;
  recap_pool_id_t pool = c.pool;
  OK(recap_graph_replay(inner, s2));
  assert_int_equal(pool_references(pool), 2);
  recap__fake_capture_invalidate(s2);
  EXPECT_STATUS(recap_graph_capture_end(outer), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(pool_references(pool), 1);
  OK(recap_free(x));
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

RECAP_TEST(a_sleeping_embedded_pool_stops_the_outer_replay) {
  reset_expandable((size_t)1 << 30);
  recap_stream_t s = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  int64_t *x;
  recap_graph_t inner = inner_graph(s, RECAP_GRAPH_KEEP, &x);
  recap_pool_id_t pool = pool_of(inner);
  recap_graph_t outer = outer_graph(s2, inner, x);
  OK(recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD));
  EXPECT_STATUS(recap_graph_replay(outer, s2), RECAP_ERROR_POOL_ASLEEP);
  /* Nor is a graph whose pool sleeps embedded. */
  recap_graph_t other;
  OK(recap_graph_create(&other, 0));
  OK(recap_graph_capture_begin(other, NULL, s2));
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_POOL_ASLEEP);
  launch(s2, 1);
  OK(recap_graph_capture_end(other));
  OK(recap_pool_wake(pool));
  expect_outer_eager(outer, s2, x, 2);
  OK(recap_free(x));
  OK(recap_graph_destroy(other));
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

/* ------------------------------------------------------------------------------------------
 * Graphed callables and graph sets call replay: their runs inside a capture embed too
 * ---------------------------------------------------------------------------------------- */

static void k_affine(void *const *args, size_t n) {
  (void)n;
  const int64_t *in = args[0];
  int64_t *out = args[1];
  *out = *in * 3 + 1;
}

static recap_status_t affine_forward(void *ctx, recap_stream_t stream, int training,
                                     const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)ctx;
  (void)training;
  outputs[0].bytes = sizeof(int64_t);
  RECAP__CHECK(recap_malloc(&outputs[0].data, outputs[0].bytes, stream));
  const void *args[] = {inputs[0].data, outputs[0].data};
  recap__fake_launch_kernel_fn(stream, "affine", k_affine, args, 2);
  return RECAP_SUCCESS;
}

/* A graphed callable over one word whose forward is `forward`, captured (with input-liveness
 * checks when liveness is set); *sample is its static input. */
static recap_graphed_t callable_of(recap_stream_t s, int64_t **sample, int liveness,
                                   recap_status_t (*forward)(void *, recap_stream_t, int,
                                                             const recap_buffer_t *,
                                                             recap_buffer_t *)) {
  OK(recap_malloc((void **)sample, sizeof **sample, s));
  **sample = 0;
  recap_buffer_t in = {*sample, sizeof **sample};
  recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
  d.forward = forward;
  d.input_count = 1;
  d.sample_inputs = &in;
  d.output_count = 1;
  recap_graphed_options_t o = RECAP_GRAPHED_OPTIONS_INIT;
  o.training = 0;
  o.check_input_liveness = liveness;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &d, 1, &o));
  return h;
}

/* The callable out = 3 in + 1 (affine_forward). */
static recap_graphed_t affine_callable(recap_stream_t s, int64_t **sample, int liveness) {
  return callable_of(s, sample, liveness, affine_forward);
}

/* A callable (affine_callable) over a word of its own (`given`), and an outer graph capturing
 * on s2. */
typedef struct graphed_case {
  recap_stream_t s2;
  int64_t *sample, *given;
  recap_graphed_t h;
  recap_graph_t outer;
} graphed_case_t;

static graphed_case_t graphed_case(int liveness) {
  graphed_case_t c;
  recap_stream_t s = fresh_stream();
  c.s2 = recap__fake_stream_new();
  c.h = affine_callable(s, &c.sample, liveness);
  OK(recap_malloc((void **)&c.given, sizeof *c.given, s));
  OK(recap_graph_create(&c.outer, 0));
  OK(recap_graph_capture_begin(c.outer, NULL, c.s2));
  return c;
}

static void graphed_case_finish(graphed_case_t *c) {
  OK(recap_graph_destroy(c->outer));
  OK(recap_free(c->given));
  OK(recap_graphed_destroy(c->h));
  OK(recap_free(c->sample));
  expect_quiet();
}

RECAP_TEST(a_graphed_forward_in_a_capture_embeds) {
  graphed_case_t c = graphed_case(0);
  recap_buffer_t in = {c.given, sizeof *c.given};
  const recap_buffer_t *out = NULL;
  /* The input is staged into the capture (a copy node), then the forward graph embedded. */
  OK(recap_graphed_forward(c.h, 0, &in, c.s2, &out));
  run(c.s2, 1, 10, out[0].data);
  OK(recap_graph_capture_end(c.outer));
  assert_int_equal(nodes_of(c.outer), 3);
  for (int64_t v = -2; v < 3; v++) {
    *c.given = v;
    OK(recap_graph_replay(c.outer, c.s2));
    assert_int_equal(*(int64_t *)out[0].data, v * 3 + 1 + 10);
  }
  graphed_case_finish(&c);
}

/* A callable whose graphs check their inputs at each replay embeds: the outer graph checks them
 * at its replays (input_liveness_checks_embed). */
RECAP_TEST(a_graphed_forward_with_liveness_checks_embeds) {
  graphed_case_t c = graphed_case(1);
  recap_buffer_t in = {c.given, sizeof *c.given};
  const recap_buffer_t *out = NULL;
  OK(recap_graphed_forward(c.h, 0, &in, c.s2, &out));
  OK(recap_graph_capture_end(c.outer));
  for (int64_t v = -2; v < 3; v++) {
    *c.given = v;
    OK(recap_graph_replay(c.outer, c.s2));
    assert_int_equal(*(int64_t *)out[0].data, v * 3 + 1);
  }
  graphed_case_finish(&c);
}

/* A graph (KEEP) capturing x = 3x + 1 on s with input-liveness checks; x is a block outside its
 * pool, so its replays check it. */
static recap_graph_t checked_graph(recap_stream_t s, int64_t *x) {
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.check_input_liveness = 1;
  OK(recap_graph_capture_begin(g, &o, s));
  run(s, 3, 1, x);
  OK(recap_graph_capture_end(g));
  size_t inputs = 0;
  OK(recap_graph_liveness_inputs(g, NULL, 0, &inputs));
  assert_int_equal(inputs, 1);
  return g;
}

/* The outer graph checks the embedded graph's inputs at each of its replays, and so does a graph
 * that embeds the outer one in turn. */
RECAP_TEST(input_liveness_checks_embed) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new(), s3 = recap__fake_stream_new();
  int64_t *x;
  OK(recap_malloc((void **)&x, sizeof *x, s));
  recap_graph_t inner = checked_graph(s, x);
  recap_graph_t outer;
  OK(recap_graph_create(&outer, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  run(s2, 1, 10, x);
  OK(recap_graph_replay(inner, s2));
  OK(recap_graph_capture_end(outer));
  recap_graph_t outermost;
  OK(recap_graph_create(&outermost, 0));
  OK(recap_graph_capture_begin(outermost, NULL, s3));
  OK(recap_graph_replay(outer, s3));
  OK(recap_graph_capture_end(outermost));
  *x = 1;
  OK(recap_graph_replay(outer, s2));
  assert_int_equal(*x, 34);
  OK(recap_graph_replay(outermost, s3));
  assert_int_equal(*x, 133);
  /* The input dies: every graph that runs the embedded work refuses, launching nothing. */
  OK(recap_free(x));
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(outer, s2), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("a graph embedded in this one");
  EXPECT_STATUS(recap_graph_replay(outermost, s3), RECAP_ERROR_DEAD_INPUT);
  EXPECT_STATUS(recap_graph_replay(inner, s), RECAP_ERROR_DEAD_INPUT);
  assert_int_equal(recap__fake_now().graph_launches, launches);
  OK(recap_graph_destroy(outermost));
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

/* An outer graph captured with input-liveness checks does not take the embedded graph's
 * intermediates (blocks of the embedded graph's pool, freed inside its capture) for inputs of
 * its own. */
RECAP_TEST(a_checked_outer_graph_ignores_the_embedded_pool) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x, *tmp;
  OK(recap_malloc((void **)&x, sizeof *x, s));
  recap_graph_t inner;
  OK(recap_graph_create(&inner, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(inner, NULL, s));
  OK(recap_malloc((void **)&tmp, sizeof *tmp, s));
  run(s, 0, 5, tmp);
  OK(recap_free(tmp));
  run(s, 3, 1, x);
  OK(recap_graph_capture_end(inner));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.check_input_liveness = 1;
  OK(recap_graph_capture_begin(outer, &o, s2));
  OK(recap_graph_replay(inner, s2));
  OK(recap_graph_capture_end(outer));
  size_t inputs = 0;
  OK(recap_graph_liveness_inputs(outer, NULL, 0, &inputs));
  assert_int_equal(inputs, 1); /* x alone */
  *x = 1;
  OK(recap_graph_replay(outer, s2));
  assert_int_equal(*x, 4);
  OK(recap_free(x));
  EXPECT_STATUS(recap_graph_replay(outer, s2), RECAP_ERROR_DEAD_INPUT);
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

/* A failed embedding leaves the outer capture without the embedded graph's checks. */
RECAP_TEST(a_failed_embedding_takes_the_liveness_checks_back) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  int64_t *x, word = 0;
  OK(recap_malloc((void **)&x, sizeof *x, s));
  recap_graph_t inner = checked_graph(s, x);
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_CHILD, 1);
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_CUDA);
  OK(recap_free(x));
  expect_capture_unharmed(outer, s2, &word);
  OK(recap_graph_destroy(outer));
  destroy_and_expect_quiet(inner);
}

static recap_generator_t forward_generator;

/* A forward that draws 4 uniform numbers from forward_generator into its output. */
static recap_status_t drawing_forward(void *ctx, recap_stream_t stream, int training,
                                      const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)ctx;
  (void)training;
  (void)inputs;
  outputs[0].bytes = 4 * sizeof(float);
  RECAP__CHECK(recap_malloc(&outputs[0].data, outputs[0].bytes, stream));
  return recap_rng_uniform(forward_generator, outputs[0].data, 4, stream);
}

/* A callable whose graph draws from a generator that another capture under way uses is refused
 * before its input is staged: the capture holds nothing of it. */
RECAP_TEST(a_graphed_forward_sharing_a_generator_is_refused_unharmed) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new(), s3 = recap__fake_stream_new();
  OK(recap_generator_create(&forward_generator, 3));
  int64_t *sample, *given, word = 0;
  recap_graphed_t h = callable_of(s, &sample, 0, drawing_forward);
  OK(recap_malloc((void **)&given, sizeof *given, s));
  float *drawn;
  OK(recap_malloc((void **)&drawn, 4 * sizeof *drawn, s));
  recap_graph_t other;
  OK(recap_graph_create(&other, 0));
  OK(recap_graph_capture_begin(other, NULL, s3));
  OK(recap_rng_uniform(forward_generator, drawn, 4, s3));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  recap_buffer_t in = {given, sizeof *given};
  const recap_buffer_t *out = NULL;
  EXPECT_STATUS(recap_graphed_forward(h, 0, &in, s2, &out), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("another capture under way uses");
  expect_capture_unharmed(outer, s2, &word);
  OK(recap_graph_capture_end(other));
  OK(recap_graph_destroy(other));
  OK(recap_graph_destroy(outer));
  OK(recap_free(drawn));
  OK(recap_free(given));
  OK(recap_graphed_destroy(h));
  OK(recap_free(sample));
  OK(recap_generator_destroy(forward_generator));
  expect_quiet();
}

static int64_t set_word;

/* The step of a graph set: set_word = set_word * 3 + size. */
static void k_step(void *const *args, size_t n) {
  (void)n;
  int64_t *x = args[0];
  *x = *x * 3 + (int64_t)(uintptr_t)args[1];
}

static recap_status_t set_step(size_t size, recap_stream_t stream, void *user_data) {
  (void)user_data;
  const void *args[] = {&set_word, (const void *)(uintptr_t)size};
  recap__fake_launch_kernel_fn(stream, "step", k_step, args, 2);
  return RECAP_SUCCESS;
}

RECAP_TEST(a_graph_set_run_in_a_capture_embeds) {
  recap_stream_t s = fresh_stream();
  static const size_t sizes[] = {4, 8};
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = sizes;
  o.size_count = 2;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, set_step, NULL, &o));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s));
  size_t padded = 0;
  int graphed = 0;
  OK(recap_graph_set_run(set, 3, s, &padded, &graphed));
  assert_int_equal(padded, 4);
  assert_int_equal(graphed, 1);
  OK(recap_graph_set_run(set, 7, s, &padded, &graphed));
  assert_int_equal(padded, 8);
  OK(recap_graph_capture_end(outer));
  assert_int_equal(nodes_of(outer), 2);
  for (int64_t v = 0; v < 3; v++) {
    set_word = v;
    OK(recap_graph_replay(outer, s));
    assert_int_equal(set_word, (v * 3 + 4) * 3 + 8);
  }
  /* The set's pool outlives the set while the outer graph holds it. */
  OK(recap_graph_set_destroy(set));
  set_word = 1;
  OK(recap_graph_replay(outer, s));
  assert_int_equal(set_word, (1 * 3 + 4) * 3 + 8);
  destroy_and_expect_quiet(outer);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(replay_in_a_capture_embeds_the_graph),
    cmocka_unit_test(a_graph_without_a_template_is_refused),
    cmocka_unit_test(embedding_twice_runs_twice_in_order),
    cmocka_unit_test(the_outer_graph_holds_the_embedded_pool),
    cmocka_unit_test(a_recapture_of_the_outer_graph_gives_the_references_back),
    cmocka_unit_test(nesting_three_deep),
    cmocka_unit_test(a_joined_side_stream_embeds),
    cmocka_unit_test(a_replay_beside_a_capture_launches),
    cmocka_unit_test(a_graph_is_not_replayed_into_its_own_capture),
    cmocka_unit_test(fresh_and_recapturing_graphs_are_refused),
    cmocka_unit_test(conditional_nodes_are_refused),
    cmocka_unit_test(host_path_regions_are_refused),
    cmocka_unit_test(random_numbers_embed),
    cmocka_unit_test(a_failed_child_node_changes_nothing),
    cmocka_unit_test(an_abandoned_outer_capture_gives_the_references_back),
    cmocka_unit_test(a_sleeping_embedded_pool_stops_the_outer_replay),
    cmocka_unit_test(a_graphed_forward_in_a_capture_embeds),
    cmocka_unit_test(a_graphed_forward_with_liveness_checks_embeds),
    cmocka_unit_test(a_graphed_forward_sharing_a_generator_is_refused_unharmed),
    cmocka_unit_test(input_liveness_checks_embed),
    cmocka_unit_test(a_failed_embedding_takes_the_liveness_checks_back),
    cmocka_unit_test(a_checked_outer_graph_ignores_the_embedded_pool),
    cmocka_unit_test(a_graph_set_run_in_a_capture_embeds),
};
RECAP_TEST_MAIN(tests)
