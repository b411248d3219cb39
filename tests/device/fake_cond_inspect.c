/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_cond_inspect.c — the fake's regions as the layers above read them (a part of
 * test_fake_cond): inspection and reads of bodies, executable updates of graphs with conditional
 * nodes, and the faults of each new operation.
 */

#include "fake_cond_util.h"

/* ---- inspection and reads --------------------------------------------------------------- */

/* graph_inspect lists the graph's nodes, then each conditional node's bodies in branch order,
 * each laid out by the same rule (a body's own nodes, then its nested bodies, before the next
 * branch); graph_nodes lists the graph's own nodes only. */
RECAP_TEST(inspection_flattens_bodies) {
  recap_stream_t s = fresh_stream();
  int k = 0;
  begin(s);
  launch_bump(s, &k); /* 0 */
  uint64_t h_if = make_handle(building(s), 1, true);
  region_t r_if = region_open(s, RECAP__COND_IF, h_if, 2); /* 1 */
  launch_bump(s, &k);                                      /* then: 4 */
  uint64_t h_w = make_handle(r_if.bodies[0], 1, false);
  region_t r_w = region_open(s, RECAP__COND_WHILE, h_w, 1); /* then: 5 */
  recap__fake_launch_kernel(s, "deep");                     /* while: 7 */
  region_close(s, &r_w, 0);
  launch_bump(s, &k); /* then: 6 */
  region_next(s, &r_if, 0);
  recap__fake_launch_kernel(s, "else"); /* else: 8 */
  region_close(s, &r_if, 1);
  uint64_t h_sw = make_handle(building(s), 0, true);
  region_t r_sw = region_open(s, RECAP__COND_SWITCH, h_sw, 2); /* 2 */
  region_next(s, &r_sw, 0);                                    /* case 0: empty */
  recap__fake_launch_kernel(s, "case1");                       /* case 1: 9 */
  region_close(s, &r_sw, 1);
  launch_bump(s, &k); /* 3 */
  recap_cuda_graph_t g = end_capture(s);

  assert_int_equal(node_count(g), 10);
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  OK(ops->graph_nodes(g, &nodes, &n));
  assert_int_equal(n, 4);
  assert_ptr_equal(nodes[1], r_if.node);
  assert_ptr_equal(nodes[2], r_sw.node);
  recap__host_free(nodes);
  assert_int_equal(node_count(r_if.bodies[0]), 4);

  recap_graph_info_t info = {0};
  OK(ops->graph_inspect(g, &info));
  assert_int_equal(info.node_count, 10);
  const struct {
    recap_node_type_t type;
    size_t parent;
    unsigned branch;
    recap_region_kind_t kind;
    unsigned branches;
    size_t dep; /* SIZE_MAX: none */
    const char *name;
  } want[] = {
      {RECAP_NODE_KERNEL, SIZE_MAX, 0, 0, 0, SIZE_MAX, "bump"},
      {RECAP_NODE_CONDITIONAL, SIZE_MAX, 0, RECAP_REGION_IF_ELSE, 2, 0, NULL},
      {RECAP_NODE_CONDITIONAL, SIZE_MAX, 0, RECAP_REGION_SWITCH, 2, 1, NULL},
      {RECAP_NODE_KERNEL, SIZE_MAX, 0, 0, 0, 2, "bump"},
      {RECAP_NODE_KERNEL, 1, 0, 0, 0, SIZE_MAX, "bump"},
      {RECAP_NODE_CONDITIONAL, 1, 0, RECAP_REGION_WHILE, 1, 4, NULL},
      {RECAP_NODE_KERNEL, 1, 0, 0, 0, 5, "bump"},
      {RECAP_NODE_KERNEL, 5, 0, 0, 0, SIZE_MAX, "deep"},
      {RECAP_NODE_KERNEL, 1, 1, 0, 0, SIZE_MAX, "else"},
      {RECAP_NODE_KERNEL, 2, 1, 0, 0, SIZE_MAX, "case1"},
  };
  size_t edges = 0;
  for (size_t i = 0; i < 10; i++) {
    const recap_graph_node_t *got = &info.nodes[i];
    assert_int_equal(got->type, want[i].type);
    assert_int_equal(got->parent, want[i].parent);
    assert_int_equal(got->branch, want[i].branch);
    assert_int_equal(got->region_kind, want[i].kind);
    assert_int_equal(got->branches, want[i].branches);
    if (want[i].dep == SIZE_MAX) {
      assert_int_equal(got->dependency_count, 0);
    } else {
      assert_int_equal(got->dependency_count, 1);
      assert_int_equal(got->dependencies[0], want[i].dep);
      edges++;
    }
    if (want[i].name)
      assert_string_equal(got->kernel_name, want[i].name);
    else
      assert_null(got->kernel_name);
  }
  assert_int_equal(info.edge_count, edges);
  /* Dependents mirror dependencies, within each body. */
  assert_int_equal(info.nodes[4].dependent_count, 1);
  assert_int_equal(info.nodes[4].dependents[0], 5);
  assert_int_equal(info.nodes[1].dependent_count, 1);
  assert_int_equal(info.nodes[1].dependents[0], 2);
  assert_int_equal(info.nodes[7].dependent_count, 0);
  recap__graph_info_clear(&info);

  /* A body is inspected on its own too (the region layer scans a finished body). */
  OK(ops->graph_inspect(r_if.bodies[0], &info));
  assert_int_equal(info.node_count, 4);
  assert_int_equal(info.nodes[3].parent, 1);
  assert_string_equal(info.nodes[3].kernel_name, "deep");
  recap__graph_info_clear(&info);

  /* Launch: IF true (then: bump, WHILE with condition 1 kept... the kernel "deep" never sets
   * it, so the limit stops it). */
  recap__fake_cond_iteration_limit(5);
  /* The SWITCH's case 0 is empty: CUDA refuses to instantiate that; an empty node fills it. */
  recap_cuda_graph_exec_t x = NULL;
  EXPECT_STATUS(ops->graph_instantiate(&x, g), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("a body with no node");
  OK(ops->graph_add_empty(r_sw.bodies[0]));
  assert_int_equal(node_count(g), 11);
  x = instantiate(g);
  EXPECT_STATUS(ops->graph_launch(x, s), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("in top-level node 1");
  cleanup(x, g);
}

/* What bodies read counts as nested reads of their top-level conditional node; patch plans
 * refuse to patch them. */
RECAP_TEST(reads_in_bodies_are_nested) {
  recap_stream_t s = fresh_stream();
  int a = 0, b = 0, c = 0, d = 0;
  begin(s);
  launch_bump(s, &a);
  uint64_t h = make_handle(building(s), 0, true);
  region_t r = region_open(s, RECAP__COND_IF, h, 1);
  launch_bump(s, &b);
  uint64_t h2 = make_handle(r.bodies[0], 0, true);
  region_t r2 = region_open(s, RECAP__COND_IF, h2, 1);
  OK(ops->memcpy_async(&d, &c, sizeof c, s));
  region_close(s, &r2, 0);
  region_close(s, &r, 0);
  launch_bump(s, &c);
  recap_cuda_graph_t g = end_capture(s);
  recap__graph_read_t *reads = NULL;
  size_t n = 0;
  OK(ops->graph_reads(g, &reads, &n));
  /* a's bump; in the IF's body b's bump and the copy's source and destination; c's bump. */
  const struct {
    size_t node;
    const void *ptr;
    bool nested;
    recap__read_kind_t kind;
  } want[] = {{0, &a, false, RECAP__READ_KERNEL_ARG},
              {1, &b, true, RECAP__READ_KERNEL_ARG},
              {1, &c, true, RECAP__READ_COPY_SRC},
              {1, &d, true, RECAP__READ_COPY_DST},
              {2, &c, false, RECAP__READ_KERNEL_ARG}};
  assert_int_equal(n, 5);
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(reads[i].node, want[i].node);
    assert_ptr_equal(reads[i].ptr, want[i].ptr);
    assert_int_equal(reads[i].nested, want[i].nested);
    assert_int_equal(reads[i].kind, want[i].kind);
  }
  recap__host_free(reads);

  recap__patch_plan_t plan = NULL;
  const recap__graph_read_t *sites = NULL;
  size_t count = 0;
  OK(ops->patch_plan_create(g, NULL, &plan, &sites, &count));
  assert_int_equal(count, 5);
  recap_cuda_graph_exec_t x = instantiate(g);
  recap__patch_t p = {.site = 1, .value = &d};
  EXPECT_STATUS(ops->patch_plan_apply(plan, x, &p, 1), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("conditional body of node 1");
  p = (recap__patch_t){.site = 4, .value = &d};
  OK(ops->patch_plan_apply(plan, x, &p, 1));
  ops->patch_plan_destroy(plan);
  cleanup(x, g);
}

/* ---- updates ---------------------------------------------------------------------------- */

/* Capture bump; REGION(kind, branches) { bump x body_kernels }; into a graph. */
static recap_cuda_graph_t capture_region(recap_stream_t s, recap__cond_kind_t kind,
                                         unsigned branches, int body_kernels, int *k,
                                         uint64_t *handle) {
  begin(s);
  launch_bump(s, k);
  *handle = make_handle(building(s), 1, true);
  region_t r = region_open(s, kind, *handle, branches);
  for (int i = 0; i < body_kernels; i++) launch_bump(s, k);
  region_close(s, &r, 0);
  return end_capture(s);
}

/* An executable with conditional nodes takes a graph of the same structure, bodies included,
 * and refuses any other. */
RECAP_TEST(updates_need_the_same_structure) {
  recap_stream_t s = fresh_stream();
  int k = 0;
  uint64_t h0, h1;
  recap_cuda_graph_t g0 = capture_region(s, RECAP__COND_IF, 1, 2, &k, &h0);
  recap_cuda_graph_exec_t x = instantiate(g0);
  recap_update_reason_t why;
  size_t node;
  struct {
    recap__cond_kind_t kind;
    unsigned branches;
    int kernels;
    recap_update_reason_t want;
  } cases[] = {
      {RECAP__COND_IF, 1, 3, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED},
      {RECAP__COND_IF, 2, 2, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED},
      {RECAP__COND_WHILE, 1, 2, RECAP_UPDATE_REASON_PARAMETERS_CHANGED},
      {RECAP__COND_IF, 1, 2, RECAP_UPDATE_REASON_NONE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    recap_cuda_graph_t g1 =
        capture_region(s, cases[i].kind, cases[i].branches, cases[i].kernels, &k, &h1);
    uint64_t refusals = recap__fake_now().update_refusals;
    OK(ops->graph_exec_update(x, g1, &why, &node));
    assert_int_equal(why, cases[i].want);
    if (why != RECAP_UPDATE_REASON_NONE) {
      assert_int_equal(node, 1);
      assert_int_equal(recap__fake_now().update_refusals, refusals + 1);
    } else {
      assert_int_equal(node, SIZE_MAX);
    }
    OK(ops->graph_destroy(g1));
  }
  /* Updated: the executable runs the new graph's nodes, with the new handle. */
  k = 0;
  OK(ops->graph_launch(x, s));
  assert_int_equal(k, 3);
  unsigned v = 0;
  assert_true(recap__fake_cond_value(x, h1, &v));
  assert_false(recap__fake_cond_value(x, h0, &v));
  OK(ops->graph_exec_destroy(x));
  OK(ops->graph_destroy(g0));
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

/* ---- faults ----------------------------------------------------------------------------- */

/* Each new kind of fault fails its call with RECAP_ERROR_CUDA and leaves things as they were,
 * so that the same call then succeeds. */
RECAP_TEST(each_fault_leaves_things_consistent) {
  recap_stream_t s = fresh_stream();
  uint64_t words[3] = {0, 0, 0};
  uint32_t flag = 0;

  recap__fake_fail_nth(RECAP__FAKE_FAULT_COND_SUPPORTED, 1);
  bool supported = false;
  EXPECT_STATUS(ops->cond_supported(&supported), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("fault injected");
  OK(ops->cond_supported(&supported));
  assert_true(supported);

  begin(s);
  recap__fake_stream_enqueue(s);
  uint64_t id = capture_id(s);
  recap_cuda_graph_t g = NULL;
  recap__graph_node_t *deps = NULL;
  size_t count = 0;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_PAUSE, 1);
  EXPECT_STATUS(ops->capture_pause(s, &g, &deps, &count), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaStreamGetCaptureInfo");
  assert_null(g);
  assert_int_equal(capture_id(s), id); /* the capture goes on */
  recap_cuda_graph_t built = building(s);
  uint64_t h = 0;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_COND_HANDLE, 1);
  EXPECT_STATUS(ops->cond_handle_create(built, 1, true, &h), RECAP_ERROR_CUDA);
  assert_int_equal(h, 0);
  h = make_handle(built, 1, true);
  recap__graph_node_t dep;
  g = pause_capture(s, &dep);
  assert_int_equal(recap__fake_now().live_graphs, 1);

  recap__graph_node_t node = NULL;
  recap_cuda_graph_t body = NULL;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_COND_NODE, 1);
  EXPECT_STATUS(ops->cond_node_add(g, &dep, 1, RECAP__COND_WHILE, h, 1, &node, &body),
                RECAP_ERROR_CUDA);
  assert_null(node);
  assert_int_equal(node_count(g), 1);
  OK(ops->cond_node_add(g, &dep, 1, RECAP__COND_WHILE, h, 1, &node, &body));

  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH, 1);
  EXPECT_STATUS(ops->capture_to_graph(s, body, NULL, 0, RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_CUDA);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  resume(s, body, NULL);

  recap__cond_launch_t l = {.kind = RECAP__COND_SET_VALUE,
                            .cond = {.handle = h},
                            .stream = s,
                            .value = 0};
  recap__fake_fail_nth(RECAP__FAKE_FAULT_COND_LAUNCH, 1);
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RNG_ADVANCE, 1);
  EXPECT_STATUS(ops->rng_advance(s, words, 2), RECAP_ERROR_CUDA);
  assert_int_equal(node_count(body), 0); /* neither made a node */
  OK(ops->rng_advance(s, words, 2));
  OK(ops->cond_launch(&l));
  assert_ptr_equal(pause_capture(s, &dep), body);
  resume(s, g, node);
  recap_cuda_graph_t done = end_capture(s);
  assert_ptr_equal(done, g);
  recap_cuda_graph_exec_t x = instantiate(g);
  OK(ops->graph_launch(x, s));
  assert_int_equal(words[2], 2);
  assert_int_equal(recap__fake_now().body_launches, 1);

  /* Eager ones too. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_COND_LAUNCH, 1);
  l = (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE,
                             .cond = {.flag = &flag},
                             .stream = s,
                             .value = 5};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_CUDA);
  assert_int_equal(flag, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RNG_ADVANCE, 1);
  EXPECT_STATUS(ops->rng_advance(s, words, 2), RECAP_ERROR_CUDA);
  assert_int_equal(words[2], 2);
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_COND_SUPPORTED], 2);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_CAPTURE_PAUSE], 3);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH], 3);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_COND_HANDLE], 2);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_COND_NODE], 2);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_COND_LAUNCH], 3);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_RNG_ADVANCE], 3);
  cleanup(x, g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(inspection_flattens_bodies),
    cmocka_unit_test(reads_in_bodies_are_nested),
    cmocka_unit_test(updates_need_the_same_structure),
    cmocka_unit_test(each_fault_leaves_things_consistent),
};
const recap_test_part_t fake_cond_inspect_tests = RECAP_TEST_PART(tests);
