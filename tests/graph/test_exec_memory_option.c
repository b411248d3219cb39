/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_exec_memory_option.c — the option measure_exec_memory on the CPU fake device: off (the
 * default) no instantiation measures what its executable takes unless its capture has a budget;
 * a graph not measured reports its executable's bytes as -1 and its pool's totals count nothing
 * for it. On, every instantiation measures.
 */
#include "graph_util.h"

enum { PER_NODE = RECAP__FAKE_EXEC_BYTES_PER_NODE };

RECAP_TEST(not_measured_by_default_and_measured_when_on) {
  recap_stream_t s;
  recap_graph_t h = fresh_graph(&s, 0);
  uint64_t on = 1;
  OK(recap_option_get("measure_exec_memory", &on));
  assert_int_equal(on, 0);
  capture_kernels(h, s, 2);
  recap_graph_memory_t m = graph_memory(h);
  assert_int_equal(m.exec_bytes, -1);
  assert_int_equal(m.nodes, 2);
  recap_pool_memory_t p = pool_memory(m.pool);
  assert_int_equal(p.graphs, 1);
  assert_int_equal(p.exec_bytes, 0);
  assert_int_equal(p.nodes, 2);
  OK(recap_graph_replay(h, s));

  OK(recap_option_set("measure_exec_memory", "true"));
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  capture_kernels(g, s, 3);
  m = graph_memory(g);
  assert_int_equal(m.exec_bytes, 3 * PER_NODE);
  assert_int_equal(pool_memory(m.pool).exec_bytes, 3 * PER_NODE);

  /* Off again: the measured graph keeps its figure; a KEEP graph instantiated now is not
   * measured. */
  OK(recap_option_set_u64("measure_exec_memory", 0));
  assert_int_equal(graph_memory(g).exec_bytes, 3 * PER_NODE);
  recap_graph_t k;
  OK(recap_graph_create(&k, RECAP_GRAPH_KEEP));
  capture_kernels(k, s, 1);
  assert_int_equal(graph_memory(k).exec_bytes, 0); /* no executable yet */
  OK(recap_graph_instantiate(k));
  assert_int_equal(graph_memory(k).exec_bytes, -1);

  /* On again: the next instantiation measures. */
  OK(recap_option_set_u64("measure_exec_memory", 1));
  OK(recap_graph_instantiate(k));
  assert_int_equal(graph_memory(k).exec_bytes, PER_NODE);
  OK(recap_graph_destroy(g));
  OK(recap_graph_destroy(h));
  OK(recap_graph_destroy(k));
  expect_quiet();
}

/* A capture with a budget measures whatever the option says: the budget needs the figure. */
RECAP_TEST(a_capture_with_a_budget_measures) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.budget_bytes = 64 * MiB;
  OK(recap_graph_capture_begin(g, &o, s));
  launch(s, 4);
  OK(recap_graph_capture_end(g));
  recap_graph_memory_t m = graph_memory(g);
  assert_int_equal(m.exec_bytes, 4 * PER_NODE);
  assert_int_equal(m.budget_bytes, 64 * MiB);
  assert_int_equal(pool_memory(m.pool).exec_bytes, 4 * PER_NODE);
  destroy_and_expect_quiet(g);
}

/* A recapture that instantiates afresh measures as the option says at that moment. */
RECAP_TEST(a_recapture_measures_as_the_option_says) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  OK(recap_option_set_u64("measure_exec_memory", 0));
  capture_kernels(g, s, 2);
  assert_int_equal(graph_memory(g).exec_bytes, -1);
  OK(recap_option_set_u64("measure_exec_memory", 1));
  recap_update_policy_t policy = RECAP_UPDATE_POLICY_INIT;
  policy.never_update = 1;
  OK(recap_graph_update_policy_set(g, &policy));
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, 3);
  OK(recap_graph_capture_end(g));
  recap_graph_memory_t m = graph_memory(g);
  assert_int_equal(m.exec_bytes, 3 * PER_NODE);
  assert_int_equal(pool_memory(m.pool).exec_bytes, 3 * PER_NODE);
  destroy_and_expect_quiet(g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(not_measured_by_default_and_measured_when_on),
    cmocka_unit_test(a_capture_with_a_budget_measures),
    cmocka_unit_test(a_recapture_measures_as_the_option_says),
};
RECAP_TEST_MAIN(tests)
