/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rng_embed.c — graphs that draw random numbers embedded in another capture (a replay
 * inside it, docs/graphs.md "Inside another capture"), on the CPU fake: the outer graph's
 * replays draw at the offsets the same work run eagerly draws, replay after replay, with the
 * outer capture drawing from the same generator before and after the node, eager draws in
 * between, the same graph embedded twice and embedding nested; the embedded graph alone and
 * later eager draws go on from the right offset; a refused or failed embedding leaves the
 * capture and the generator as they were.
 *
 * The "kernels" are the recording fake kernel functions of rng_records.h: each records the seed
 * and offset it sees when it runs. The same work run eagerly on a second generator with the
 * same seed gives the expected records.
 */
#include <string.h>

#include "fake/fake.h"
#include "graph_util.h"
#include "harness.h"
#include "recap.h"
#include "rng_records.h"

/* An eager draw of `increment` from gen, recorded as a kernel would see it. */
static void eager(recap_generator_t gen, uint64_t increment, records_t *r) {
  recap_philox_state_t st;
  OK(recap_generator_philox_state(gen, increment, NULL, &st));
  assert_int_equal(st.captured, 0);
  assert_true(r->count < MAX_RECORDS);
  r->seed[r->count] = st.seed;
  r->offset[r->count] = st.offset;
  r->count++;
}

static void expect_same_records(const records_t *got, const records_t *want) {
  assert_int_equal(got->count, want->count);
  for (size_t i = 0; i < want->count; i++) {
    assert_int_equal(got->seed[i], want->seed[i]);
    assert_int_equal(got->offset[i], want->offset[i]);
  }
}

static recap_generator_t fresh_generator(recap_stream_t *s, recap_stream_t *s2, uint64_t seed) {
  *s = fresh_stream();
  *s2 = recap__fake_stream_new();
  state_count = 0;
  (void)set_counter_fn; /* rng_records.h's, for the region tests */
  recap_generator_t gen = NULL;
  OK(recap_generator_create(&gen, seed));
  return gen;
}

/* Two generators of one seed on a fresh fake: the one the graphs use, and the reference that
 * runs the same work eagerly. */
typedef struct pair {
  recap_stream_t s, s2;
  recap_generator_t gen, ref;
} pair_t;

static pair_t pair_begin(uint64_t seed) {
  pair_t p;
  p.gen = fresh_generator(&p.s, &p.s2, seed);
  OK(recap_generator_create(&p.ref, seed));
  return p;
}

static void destroy_all(recap_graph_t *graphs, size_t n, recap_generator_t *gens, size_t m) {
  for (size_t i = 0; i < n; i++) OK(recap_graph_destroy(graphs[i]));
  for (size_t i = 0; i < m; i++) OK(recap_generator_destroy(gens[i]));
  expect_quiet();
}

/* The end of a test of a pair: the graphs drew what the reference drew eagerly, and the two
 * generators stand at the same offset; everything destroyed. */
static void pair_end(pair_t *p, const records_t *got, const records_t *want, recap_graph_t *graphs,
                     size_t n) {
  expect_same_records(got, want);
  assert_int_equal(offset_of(p->gen), offset_of(p->ref));
  recap_generator_t gens[] = {p->gen, p->ref};
  destroy_all(graphs, n, gens, 2);
}

static recap_graph_t begin(recap_stream_t s, unsigned flags) {
  recap_graph_t g;
  OK(recap_graph_create(&g, flags));
  OK(recap_graph_capture_begin(g, NULL, s));
  return g;
}

/* The inner graph (KEEP): draws 8, then 4 (12 per replay). */
static recap_graph_t inner_graph(recap_generator_t gen, recap_stream_t s, records_t *r) {
  recap_graph_t g = begin(s, RECAP_GRAPH_KEEP);
  draw(gen, s, 8, r);
  draw(gen, s, 4, r);
  OK(recap_graph_capture_end(g));
  return g;
}

static void eager_inner(recap_generator_t gen, records_t *r) {
  eager(gen, 8, r);
  eager(gen, 4, r);
}

/* The outer graph (flags) on s2: draws 4, embeds inner, draws 8. */
static recap_graph_t outer_graph(recap_generator_t gen, recap_graph_t inner, recap_stream_t s2,
                                 unsigned flags, records_t *r) {
  recap_graph_t g = begin(s2, flags);
  draw(gen, s2, 4, r);
  OK(recap_graph_replay(inner, s2));
  draw(gen, s2, 8, r);
  OK(recap_graph_capture_end(g));
  return g;
}

static void eager_outer(recap_generator_t gen, records_t *r) {
  eager(gen, 4, r);
  eager_inner(gen, r);
  eager(gen, 8, r);
}

RECAP_TEST(outer_replays_draw_what_eager_draws) {
  pair_t p = pair_begin(11);
  recap_stream_t s = p.s, s2 = p.s2;
  recap_generator_t gen = p.gen, ref = p.ref;
  records_t got = {0}, want = {0};
  /* An eager draw before anything is captured. */
  eager(gen, 4, &got);
  eager(ref, 4, &want);
  recap_graph_t inner = inner_graph(gen, s, &got);
  recap_graph_t outer = outer_graph(gen, inner, s2, 0, &got);
  assert_int_equal(got.count, 1); /* capturing drew nothing */
  for (int i = 0; i < 6; i++) {
    OK(recap_graph_replay(outer, s2));
    eager_outer(ref, &want);
    /* Eager draws in between. */
    eager(gen, 4, &got);
    eager(ref, 4, &want);
  }
  /* The embedded graph alone, and the outer graph again, go on from there. */
  OK(recap_graph_replay(inner, s));
  eager_inner(ref, &want);
  OK(recap_graph_replay(outer, s2));
  eager_outer(ref, &want);
  recap_graph_t graphs[] = {outer, inner};
  pair_end(&p, &got, &want, graphs, 2);
}

/* The outer capture draws nothing itself: the node's kernels read the base unshifted. */
RECAP_TEST(an_outer_graph_that_only_embeds_draws_what_eager_draws) {
  pair_t p = pair_begin(3);
  recap_stream_t s = p.s, s2 = p.s2;
  recap_generator_t gen = p.gen, ref = p.ref;
  records_t got = {0}, want = {0};
  recap_graph_t inner = inner_graph(gen, s, &got);
  uint64_t advances = recap__fake_now().calls[RECAP__FAKE_FAULT_RNG_ADVANCE];
  recap_graph_t outer = begin(s2, 0);
  OK(recap_graph_replay(inner, s2));
  /* Nothing to shift: no advance was enqueued. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_RNG_ADVANCE], advances);
  OK(recap_graph_capture_end(outer));
  for (int i = 0; i < 4; i++) {
    OK(recap_graph_replay(outer, s2));
    eager_inner(ref, &want);
  }
  recap_graph_t graphs[] = {outer, inner};
  pair_end(&p, &got, &want, graphs, 2);
}

RECAP_TEST(embedding_twice_draws_twice_in_order) {
  pair_t p = pair_begin(5);
  recap_stream_t s = p.s, s2 = p.s2;
  recap_generator_t gen = p.gen, ref = p.ref;
  records_t got = {0}, want = {0};
  recap_graph_t inner = inner_graph(gen, s, &got);
  recap_graph_t outer = begin(s2, 0);
  OK(recap_graph_replay(inner, s2));
  draw(gen, s2, 4, &got);
  OK(recap_graph_replay(inner, s2));
  OK(recap_graph_capture_end(outer));
  for (int i = 0; i < 4; i++) {
    OK(recap_graph_replay(outer, s2));
    eager_inner(ref, &want);
    eager(ref, 4, &want);
    eager_inner(ref, &want);
    eager(gen, 8, &got);
    eager(ref, 8, &want);
  }
  recap_graph_t graphs[] = {outer, inner};
  pair_end(&p, &got, &want, graphs, 2);
}

/* inner in outer (KEEP) in outermost, each level drawing around its node. */
RECAP_TEST(nesting_draws_what_eager_draws) {
  pair_t p = pair_begin(9);
  recap_stream_t s = p.s, s2 = p.s2;
  recap_generator_t gen = p.gen, ref = p.ref;
  recap_stream_t s3 = recap__fake_stream_new();
  records_t got = {0}, want = {0};
  recap_graph_t inner = inner_graph(gen, s, &got);
  recap_graph_t outer = outer_graph(gen, inner, s2, RECAP_GRAPH_KEEP, &got);
  recap_graph_t outermost = begin(s3, 0);
  draw(gen, s3, 12, &got);
  OK(recap_graph_replay(outer, s3));
  draw(gen, s3, 4, &got);
  OK(recap_graph_replay(inner, s3));
  OK(recap_graph_capture_end(outermost));
  for (int i = 0; i < 4; i++) {
    OK(recap_graph_replay(outermost, s3));
    eager(ref, 12, &want);
    eager_outer(ref, &want);
    eager(ref, 4, &want);
    eager_inner(ref, &want);
    eager(gen, 4, &got);
    eager(ref, 4, &want);
  }
  OK(recap_graph_replay(outer, s2));
  eager_outer(ref, &want);
  recap_graph_t graphs[] = {outermost, outer, inner};
  pair_end(&p, &got, &want, graphs, 3);
}

/* Two generators in the embedded graph, one of them also drawn by the outer capture. */
RECAP_TEST(two_generators_embed) {
  recap_stream_t s, s2;
  recap_generator_t a = fresh_generator(&s, &s2, 1), b = NULL, ra = NULL, rb = NULL;
  OK(recap_generator_create(&b, 2));
  OK(recap_generator_create(&ra, 1));
  OK(recap_generator_create(&rb, 2));
  records_t got = {0}, want = {0};
  recap_graph_t inner = begin(s, RECAP_GRAPH_KEEP);
  draw(a, s, 4, &got);
  draw(b, s, 8, &got);
  OK(recap_graph_capture_end(inner));
  recap_graph_t outer = begin(s2, 0);
  draw(b, s2, 16, &got);
  OK(recap_graph_replay(inner, s2));
  draw(a, s2, 4, &got);
  OK(recap_graph_capture_end(outer));
  for (int i = 0; i < 3; i++) {
    OK(recap_graph_replay(outer, s2));
    eager(rb, 16, &want);
    eager(ra, 4, &want);
    eager(rb, 8, &want);
    eager(ra, 4, &want);
  }
  expect_same_records(&got, &want);
  assert_int_equal(offset_of(a), offset_of(ra));
  assert_int_equal(offset_of(b), offset_of(rb));
  recap_graph_t graphs[] = {outer, inner};
  recap_generator_t gens[] = {a, b, ra, rb};
  destroy_all(graphs, 2, gens, 4);
}

/* A failed child node, or a failed shift, changes nothing: the generator is not attached to the
 * outer capture by the failed embedding, and the capture goes on drawing where it stood. */
RECAP_TEST(a_failed_embedding_leaves_the_generator_as_it_was) {
  pair_t p = pair_begin(4);
  recap_stream_t s = p.s, s2 = p.s2;
  recap_generator_t gen = p.gen, ref = p.ref;
  records_t got = {0}, want = {0};
  recap_graph_t inner = inner_graph(gen, s, &got);
  /* The outer capture has not drawn: the embedding attached the generator, and undoes it. */
  recap_graph_t outer = begin(s2, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_CHILD, 1);
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("fault injected");
  /* Not attached: the offset may be read during the outer capture. */
  assert_int_equal(offset_of(gen), 0);
  /* It has drawn: the shift fails, nothing is enqueued. */
  draw(gen, s2, 4, &got);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RNG_ADVANCE, 1);
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_CUDA);
  /* The child node fails after the shift: the shift is taken back. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_CHILD, 1);
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_CUDA);
  draw(gen, s2, 8, &got);
  OK(recap_graph_capture_end(outer));
  for (int i = 0; i < 3; i++) {
    OK(recap_graph_replay(outer, s2));
    eager(ref, 4, &want);
    eager(ref, 8, &want);
  }
  recap_graph_t graphs[] = {outer, inner};
  pair_end(&p, &got, &want, graphs, 2);
}

/* The generator belongs to another capture under way: refused, both captures go on. */
RECAP_TEST(a_generator_of_another_capture_is_refused) {
  recap_stream_t s, s2;
  recap_generator_t gen = fresh_generator(&s, &s2, 6);
  recap_stream_t s3 = recap__fake_stream_new();
  records_t got = {0};
  recap_graph_t inner = inner_graph(gen, s, &got);
  recap_graph_t other = begin(s3, 0);
  draw(gen, s3, 4, &got);
  recap_graph_t outer = begin(s2, 0);
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("another capture under way uses");
  OK(recap_graph_capture_end(outer));
  OK(recap_graph_capture_end(other));
  size_t n = 99;
  OK(recap_graph_node_count(outer, &n));
  assert_int_equal(n, 0);
  recap_graph_t graphs[] = {outer, other, inner};
  recap_generator_t gens[] = {gen};
  destroy_all(graphs, 3, gens, 1);
}

/* An abandoned outer capture lets go of the generator it attached for an embedding. */
RECAP_TEST(an_abandoned_outer_capture_lets_go_of_the_generator) {
  recap_stream_t s, s2;
  recap_generator_t gen = fresh_generator(&s, &s2, 8);
  records_t got = {0};
  recap_graph_t inner = inner_graph(gen, s, &got);
  recap_graph_t outer = begin(s2, 0);
  OK(recap_graph_replay(inner, s2));
  EXPECT_STATUS(recap_generator_offset_get(gen, &(uint64_t){0}), RECAP_ERROR_INVALID_USAGE);
  recap__fake_capture_invalidate(s2);
  EXPECT_STATUS(recap_graph_capture_end(outer), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(offset_of(gen), 0);
  OK(recap_graph_replay(inner, s));
  assert_int_equal(offset_of(gen), 12);
  recap_graph_t graphs[] = {outer, inner};
  recap_generator_t gens[] = {gen};
  destroy_all(graphs, 2, gens, 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(outer_replays_draw_what_eager_draws),
    cmocka_unit_test(an_outer_graph_that_only_embeds_draws_what_eager_draws),
    cmocka_unit_test(embedding_twice_draws_twice_in_order),
    cmocka_unit_test(nesting_draws_what_eager_draws),
    cmocka_unit_test(two_generators_embed),
    cmocka_unit_test(a_failed_embedding_leaves_the_generator_as_it_was),
    cmocka_unit_test(a_generator_of_another_capture_is_refused),
    cmocka_unit_test(an_abandoned_outer_capture_lets_go_of_the_generator),
};
RECAP_TEST_MAIN(tests)
