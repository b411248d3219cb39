/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_cond.c — tests of the CPU fake device's regions (tests/fake/fake_cond.c): pausing a
 * capture and resuming it into a graph, conditional handles and nodes of each kind, nesting,
 * what a launch runs, the condition kernels, rng_advance, inspection and reads of bodies,
 * executable updates, and the faults of each new operation.
 *
 * The region layer (src/graph/regions.c) is tested on top of this model; these tests pin the
 * model down through the fake's ops table, with nothing above the seam involved. The condition
 * kernels are in fake_cond_kernels.c, inspection, updates and faults in fake_cond_inspect.c, parts
 * of this program; fake_cond_util.h holds what they share.
 */
#include "fake_cond_util.h"

/* ---- each kind -------------------------------------------------------------------------- */

/* A graph: bump(before); WHILE(cond = initial by default) { bump(body); cond = *next }; bump(after). */
typedef struct while_graph {
  recap_stream_t s;
  recap_cuda_graph_t graph;
  recap_cuda_graph_exec_t exec;
  uint64_t handle;
  int before, body, after;
  unsigned next; /* what the body's kernel sets the condition to */
} while_graph_t;

static void while_graph_make(while_graph_t *w, unsigned initial, bool assign_default) {
  memset(w, 0, sizeof *w);
  w->s = recap__fake_stream_new();
  begin(w->s);
  launch_bump(w->s, &w->before);
  w->handle = make_handle(building(w->s), initial, assign_default);
  region_t r = region_open(w->s, RECAP__COND_WHILE, w->handle, 1);
  launch_bump(w->s, &w->body);
  launch_set_cond(w->s, w->handle, &w->next);
  region_close(w->s, &r, 0);
  launch_bump(w->s, &w->after);
  w->graph = end_capture(w->s);
  assert_ptr_equal(w->graph, r.parent);
  w->exec = instantiate(w->graph);
}

/* A body that never sets 0 runs into the iteration limit, which fails the launch. */
static void launch_into_the_limit(while_graph_t *w, unsigned limit) {
  w->next = 1;
  EXPECT_STATUS(ops->graph_launch(w->exec, w->s), RECAP_ERROR_CUDA);
  char message[64];
  snprintf(message, sizeof message, "iteration limit of %u", limit);
  EXPECT_MESSAGE(message);
}

/* The countdown kernel on a handle: handle = --*counter != 0. */
static void launch_countdown(recap_stream_t s, uint64_t handle, uint32_t *counter) {
  recap__cond_launch_t down = {.kind = RECAP__COND_COUNTDOWN,
                               .cond = {.handle = handle},
                               .stream = s,
                               .counter = counter};
  OK(ops->cond_launch(&down));
}

/* A WHILE runs its body while the condition is nonzero, checked before every iteration. */
RECAP_TEST(while_runs_until_the_condition_is_zero) {
  recap__fake_reset(NULL);
  while_graph_t w;
  while_graph_make(&w, 1, true);
  assert_int_equal(node_count(w.graph), 3 + 2);
  assert_int_equal(recap__fake_now().live_graphs, 1);

  /* The body sets 0: one iteration. */
  OK(ops->graph_launch(w.exec, w.s));
  assert_int_equal(w.before, 1);
  assert_int_equal(w.body, 1);
  assert_int_equal(w.after, 1);
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.cond_nodes_run, 1);
  assert_int_equal(c.body_launches, 1);
  assert_int_equal(c.graph_launches, 1);

  /* A body that never sets 0 runs into the limit, which fails the launch. */
  recap__fake_cond_iteration_limit(3);
  launch_into_the_limit(&w, 3);
  EXPECT_MESSAGE("WHILE");
  assert_int_equal(w.body, 1 + 3);
  assert_int_equal(w.after, 1); /* the launch stopped in the loop */
  assert_int_equal(recap__fake_now().graph_launches, 1);
  recap__fake_cond_iteration_limit(0);
  w.next = 0;
  OK(ops->graph_launch(w.exec, w.s));
  assert_int_equal(w.body, 5);
  assert_int_equal(w.after, 2);
  cleanup(w.exec, w.graph);
}

/* After a reset, a WHILE whose body never sets 0 stops after the default limit. */
static void a_fresh_loop_stops_at_a_million(while_graph_t *w) {
  recap__fake_reset(NULL);
  while_graph_make(w, 1, true);
  launch_into_the_limit(w, 1000000);
  assert_int_equal(w->body, 1000000);
}

/* The default limit is 1000000 iterations. */
RECAP_TEST(the_default_iteration_limit_is_a_million) {
  while_graph_t w;
  a_fresh_loop_stops_at_a_million(&w);
  assert_int_equal(recap__fake_now().body_launches, 1000000);
  /* A reset restores the default after a test changed it. */
  recap__fake_cond_iteration_limit(2);
  a_fresh_loop_stops_at_a_million(&w);
  cleanup(w.exec, w.graph);
}

/* assign_default: the condition is the default at every launch; without it, the initial value
 * at the first launch, then whatever was set last. */
RECAP_TEST(defaults_and_kept_values) {
  recap__fake_reset(NULL);
  while_graph_t w;
  /* A condition of 0 on entry runs no iteration. */
  while_graph_make(&w, 0, true);
  OK(ops->graph_launch(w.exec, w.s));
  assert_int_equal(w.body, 0);
  assert_int_equal(w.after, 1);
  assert_int_equal(recap__fake_now().cond_nodes_run, 1);
  assert_int_equal(recap__fake_now().body_launches, 0);
  cleanup(w.exec, w.graph);

  /* Without assign_default, the body's last value (0) is what the next launch starts from. */
  while_graph_make(&w, 1, false);
  OK(ops->graph_launch(w.exec, w.s));
  assert_int_equal(w.body, 1);
  unsigned v = 9;
  assert_true(recap__fake_cond_value(w.exec, w.handle, &v));
  assert_int_equal(v, 0);
  OK(ops->graph_launch(w.exec, w.s));
  assert_int_equal(w.body, 1); /* no iteration: the value kept is 0 */
  assert_int_equal(w.after, 2);
  /* A second executable of the same graph has its own value, initial at its first launch. */
  recap_cuda_graph_exec_t other = instantiate(w.graph);
  OK(ops->graph_launch(other, w.s));
  assert_int_equal(w.body, 2);
  OK(ops->graph_exec_destroy(other));
  cleanup(w.exec, w.graph);

  /* With assign_default, every launch starts from the default again. */
  while_graph_make(&w, 1, true);
  OK(ops->graph_launch(w.exec, w.s));
  OK(ops->graph_launch(w.exec, w.s));
  assert_int_equal(w.body, 2);
  assert_false(recap__fake_cond_value(w.exec, 12345, &v));
  cleanup(w.exec, w.graph);
}

/* IF runs its body when the condition is nonzero; IF with two bodies runs the second
 * otherwise; SWITCH runs body n for n, none out of range. */
RECAP_TEST(if_if_else_and_switch) {
  recap_stream_t s = fresh_stream();
  static unsigned value; /* what the kernel before the regions sets each condition to */
  int if_body = 0, then_body = 0, else_body = 0, cases[3] = {0, 0, 0};

  begin(s);
  uint64_t h_if = make_handle(building(s), 0, true);
  uint64_t h_else = make_handle(building(s), 0, true);
  uint64_t h_switch = make_handle(building(s), 0, true);
  launch_set_cond(s, h_if, &value);
  launch_set_cond(s, h_else, &value);
  launch_set_cond(s, h_switch, &value);
  region_t r = region_open(s, RECAP__COND_IF, h_if, 1);
  launch_bump(s, &if_body);
  region_close(s, &r, 0);
  r = region_open(s, RECAP__COND_IF, h_else, 2);
  launch_bump(s, &then_body);
  region_next(s, &r, 0);
  launch_bump(s, &else_body);
  region_close(s, &r, 1);
  r = region_open(s, RECAP__COND_SWITCH, h_switch, 3);
  for (unsigned b = 0; b < 3; b++) {
    launch_bump(s, &cases[b]);
    if (b < 2)
      region_next(s, &r, b);
    else
      region_close(s, &r, b);
  }
  recap_cuda_graph_t g = end_capture(s);
  assert_int_equal(node_count(g), 6 + 1 + 2 + 3);
  recap_cuda_graph_exec_t x = instantiate(g);

  /* Launched with 0, 1, 2, 3 in turn: the running counts after each launch. 3 is out of the
   * SWITCH's range: no case. */
  static const struct {
    int if_body, then_body, else_body, cases[3];
  } after[] = {{0, 0, 1, {1, 0, 0}},
               {1, 1, 1, {1, 1, 0}},
               {2, 2, 1, {1, 1, 1}},
               {3, 3, 1, {1, 1, 1}}};
  for (value = 0; value < 4; value++) {
    OK(ops->graph_launch(x, s));
    assert_int_equal(if_body, after[value].if_body);
    assert_int_equal(then_body, after[value].then_body);
    assert_int_equal(else_body, after[value].else_body);
    for (int b = 0; b < 3; b++) assert_int_equal(cases[b], after[value].cases[b]);
  }
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.cond_nodes_run, 3 * 4);
  assert_int_equal(c.body_launches, 3 + 4 + 3); /* IF: 3 nonzero values; IF/ELSE: always one */
  cleanup(x, g);
}

/* Regions nest: a WHILE inside an IF inside a WHILE, with counters run by countdown kernels. */
RECAP_TEST(regions_nest) {
  recap_stream_t s = fresh_stream();
  uint32_t outer_counter = 0, inner_counter = 0, inner_start = 2;
  int inner_body = 0, if_body = 0;
  unsigned one = 1;

  begin(s);
  uint64_t outer = make_handle(building(s), 1, true);
  region_t ro = region_open(s, RECAP__COND_WHILE, outer, 1);
  {
    /* Each outer iteration starts the inner loop's counter again. */
    OK(ops->memcpy_async(&inner_counter, &inner_start, sizeof inner_counter, s));
    uint64_t in_if = make_handle(ro.bodies[0], 0, false);
    launch_set_cond(s, in_if, &one);
    region_t ri = region_open(s, RECAP__COND_IF, in_if, 1);
    assert_ptr_equal(ri.parent, ro.bodies[0]);
    {
      uint64_t inner = make_handle(ri.bodies[0], 1, false);
      /* Inside a body, a condition is set where the body reaches it. */
      recap__cond_launch_t set = {.kind = RECAP__COND_SET_VALUE,
                                  .cond = {.handle = inner},
                                  .stream = s,
                                  .value = 1};
      OK(ops->cond_launch(&set));
      region_t rw = region_open(s, RECAP__COND_WHILE, inner, 1);
      launch_bump(s, &inner_body);
      launch_countdown(s, inner, &inner_counter);
      region_close(s, &rw, 0);
    }
    launch_bump(s, &if_body);
    region_close(s, &ri, 0);
    launch_countdown(s, outer, &outer_counter);
  }
  region_close(s, &ro, 0);
  recap_cuda_graph_t g = end_capture(s);
  /* outer WHILE; its body: copy, set, IF, countdown; the IF's body: set, WHILE, bump; the
   * inner WHILE's body: bump, countdown. */
  assert_int_equal(node_count(g), 1 + 4 + 3 + 2);
  recap_cuda_graph_exec_t x = instantiate(g);

  outer_counter = 3;
  OK(ops->graph_launch(x, s));
  assert_int_equal(if_body, 3);
  assert_int_equal(outer_counter, 0);
  assert_int_equal(inner_body, 3 * 2);
  recap__fake_counters_t c = recap__fake_now();
  /* Conditional nodes reached: the outer once, the IF 3 times, the inner WHILE 3 times. */
  assert_int_equal(c.cond_nodes_run, 1 + 3 + 3);
  /* Bodies: 3 outer iterations, 3 IF bodies, 6 inner iterations. */
  assert_int_equal(c.body_launches, 3 + 3 + 6);
  /* Condition kernels: per outer iteration 1 set + 1 countdown + 2 inner countdowns. */
  assert_int_equal(c.cond_kernels_run, 3 * 4);

  /* The IF's condition has no default: it keeps the last value set (1), and the inner one too
   * (0, after its countdown). */
  unsigned v = 7;
  outer_counter = 1;
  OK(ops->graph_launch(x, s));
  assert_int_equal(if_body, 4);
  assert_int_equal(inner_body, 8);
  assert_true(recap__fake_cond_value(x, outer, &v));
  assert_int_equal(v, 0);
  cleanup(x, g);
}

/* ---- pausing and resuming ---------------------------------------------------------------- */

/* Each capture_to_graph is a capture of its own, with a new id; capture_nodes names the graph
 * captured into; the final end hands out the graph the pause handed out. */
RECAP_TEST(pause_and_resume_give_new_capture_ids) {
  recap_stream_t s = fresh_stream();
  int k = 0;
  begin(s);
  uint64_t first = capture_id(s);
  launch_bump(s, &k);
  recap_cuda_graph_t built = building(s);
  uint64_t h = make_handle(built, 1, true);
  region_t r = region_open(s, RECAP__COND_IF, h, 1);
  assert_ptr_equal(r.parent, built); /* the graph being built is the one the pause hands out */
  uint64_t in_body = capture_id(s);
  assert_int_not_equal(in_body, first);
  assert_ptr_equal(building(s), r.bodies[0]);
  launch_bump(s, &k);
  launch_bump(s, &k);
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  recap_cuda_graph_t g = NULL;
  OK(ops->capture_nodes(s, &g, &nodes, &n));
  assert_int_equal(n, 2); /* the body's nodes */
  recap__host_free(nodes);
  region_close(s, &r, 0);
  uint64_t after = capture_id(s);
  assert_int_not_equal(after, in_body);
  assert_int_not_equal(after, first);
  OK(ops->capture_nodes(s, &g, &nodes, &n));
  assert_ptr_equal(g, built);
  assert_int_equal(n, 2); /* bump and the conditional node */
  recap__host_free(nodes);
  launch_bump(s, &k);
  /* The pause listed the graph: one live graph (bodies do not count). */
  assert_int_equal(recap__fake_now().live_graphs, 1);
  recap_cuda_graph_t done = end_capture(s);
  assert_ptr_equal(done, built);
  assert_int_equal(recap__fake_now().live_graphs, 1);

  /* The node after the region waits for the conditional node; the body's first waits for
   * nothing; the conditional node waits for the first bump. */
  recap_graph_info_t info = {0};
  OK(ops->graph_inspect(done, &info));
  assert_int_equal(info.node_count, 5);
  assert_int_equal(info.nodes[1].type, RECAP_NODE_CONDITIONAL);
  assert_int_equal(info.nodes[1].dependency_count, 1);
  assert_int_equal(info.nodes[1].dependencies[0], 0);
  assert_int_equal(info.nodes[2].dependency_count, 1);
  assert_int_equal(info.nodes[2].dependencies[0], 1);
  assert_int_equal(info.nodes[3].dependency_count, 0);
  assert_int_equal(info.nodes[4].dependencies[0], 3);
  recap__graph_info_clear(&info);

  /* Bodies belong to their node: graph_destroy refuses them. */
  EXPECT_STATUS(ops->graph_destroy(r.bodies[0]), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("body of a conditional node");
  recap_cuda_graph_exec_t x = instantiate(done);
  OK(ops->graph_launch(x, s));
  assert_int_equal(k, 4);
  cleanup(x, done);
  /* Destroying the graph freed its bodies: their handles are no graphs any more. */
  EXPECT_STATUS(ops->graph_node_count(r.bodies[0], &n), RECAP_ERROR_CUDA);
}

/* A side stream forked and not joined back: the pause ends the capture and refuses. */
RECAP_TEST(a_pause_with_an_unjoined_side_stream_is_refused) {
  recap_stream_t s = fresh_stream(), side = recap__fake_stream_new();
  begin(s);
  recap__fake_stream_enqueue(s);
  assert_true(recap__fake_capture_join(side, s));
  recap__fake_stream_enqueue(side);
  recap_cuda_graph_t g = (recap_cuda_graph_t)&g;
  recap__graph_node_t *deps = (recap__graph_node_t *)&deps;
  size_t count = 9;
  EXPECT_STATUS(ops->capture_pause(s, &g, &deps, &count), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("cudaErrorStreamCaptureUnjoined");
  EXPECT_MESSAGE("join every side stream back");
  assert_null(g);
  assert_null(deps);
  assert_int_equal(count, 0);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 0);

  /* Joined back, the pause works, and the dependency is the side's last node. */
  begin(s);
  recap__fake_stream_enqueue(s);
  assert_true(recap__fake_capture_join(side, s));
  recap__fake_stream_enqueue(side);
  assert_false(recap__fake_capture_join_back(s, s));
  assert_true(recap__fake_capture_join_back(side, s));
  assert_false(recap__fake_capture_join_back(side, s));
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_NONE);
  recap__graph_node_t dep;
  g = pause_capture(s, &dep);
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  OK(ops->graph_nodes(g, &nodes, &n));
  assert_int_equal(n, 2);
  assert_ptr_equal(dep, nodes[1]);
  recap__host_free(nodes);
  OK(ops->graph_destroy(g));

  /* An invalidated capture: refused, gone. */
  begin(s);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(ops->capture_pause(s, &g, &deps, &count), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("cudaErrorStreamCaptureInvalidated");
  assert_null(g);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);

  /* Not capturing: refused, nothing changed. A joined stream: refused, capture invalidated. */
  EXPECT_STATUS(ops->capture_pause(s, &g, &deps, &count), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("not capturing");
  begin(s);
  assert_true(recap__fake_capture_join(side, s));
  EXPECT_STATUS(ops->capture_pause(side, &g, &deps, &count), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("cudaErrorStreamCaptureUnmatched");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(s));
  EXPECT_STATUS(ops->capture_pause(s, NULL, &deps, &count), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

/* capture_to_graph's refusals. */
RECAP_TEST(capture_to_graph_checks_its_arguments) {
  recap_stream_t s = fresh_stream(), t = recap__fake_stream_new();
  begin(s);
  recap__fake_stream_enqueue(s);
  recap__graph_node_t dep;
  recap_cuda_graph_t g = pause_capture(s, &dep);
  assert_non_null(dep);
  EXPECT_STATUS(ops->capture_to_graph(NULL, g, NULL, 0, RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_STATUS(ops->capture_to_graph(s, g, NULL, 0, (recap__capture_mode_t)7),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(ops->capture_to_graph(s, (recap_cuda_graph_t)&dep, NULL, 0,
                                      RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("not a live fake graph");
  EXPECT_STATUS(ops->capture_to_graph(s, g, NULL, 1, RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_INVALID_ARGUMENT);
  recap__graph_node_t two[2] = {dep, dep};
  EXPECT_STATUS(ops->capture_to_graph(s, g, two, 2, RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("one dependency per node");
  recap__graph_node_t stranger = (recap__graph_node_t)(uintptr_t)0x1230;
  EXPECT_STATUS(ops->capture_to_graph(s, g, &stranger, 1, RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("is not a node of graph");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  resume(s, g, dep);
  EXPECT_STATUS(ops->capture_to_graph(s, g, NULL, 0, RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("already capturing");
  EXPECT_STATUS(ops->capture_to_graph(t, g, NULL, 0, RECAP__CAPTURE_MODE_GLOBAL),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("already being captured into");
  EXPECT_STATUS(ops->graph_destroy(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("being captured into");
  /* An invalidated capture into a graph ends; the graph stays, with what it had. */
  recap__fake_stream_enqueue(s);
  recap__fake_capture_invalidate(s);
  recap_cuda_graph_t out = (recap_cuda_graph_t)&out;
  EXPECT_STATUS(ops->stream_end_capture(s, &out), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_null(out);
  assert_int_equal(node_count(g), 2);
  OK(ops->graph_destroy(g));
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

/* cond_handle_create and cond_node_add refuse what CUDA refuses. */
RECAP_TEST(handles_and_nodes_are_checked) {
  recap_stream_t s = fresh_stream();
  begin(s);
  recap_cuda_graph_t built = building(s);
  uint64_t h = make_handle(built, 0, true);
  recap__graph_node_t dep;
  recap_cuda_graph_t g = pause_capture(s, &dep);
  begin(s);
  recap_cuda_graph_t other = end_capture(s);
  uint64_t foreign = make_handle(other, 0, true);
  recap__graph_node_t node = NULL;
  recap_cuda_graph_t bodies[3];
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_WHILE, h, 2, &node, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("a WHILE node has 1 body");
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, h, 3, &node, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_SWITCH, h, 0, &node, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, (recap__cond_kind_t)9, h, 1, &node, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, 42, 1, &node, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("is not a conditional handle");
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, foreign, 1, &node, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("created for another graph");
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, h, 1, NULL, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(node_count(g), 0);
  OK(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, h, 2, &node, bodies));
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, h, 1, &node, bodies),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("a handle serves one node");
  assert_int_equal(node_count(g), 1);
  EXPECT_STATUS(ops->cond_handle_create(g, 0, true, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  uint64_t none = 5;
  EXPECT_STATUS(ops->cond_handle_create((recap_cuda_graph_t)&none, 0, true, &none),
                RECAP_ERROR_CUDA);
  assert_int_equal(none, 0);
  /* A graph being captured into takes no node. */
  resume(s, g, node);
  uint64_t h2 = make_handle(g, 0, true);
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, h2, 1, &node, bodies),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("pause that capture");
  assert_true(recap__fake_capture_end(s));
  OK(ops->graph_destroy(g));
  OK(ops->graph_destroy(other));
}

/* Without conditional nodes (recap__fake_cond_supported(false)), the driver says so and makes
 * none; a reset restores them. */
RECAP_TEST(support_can_be_switched_off) {
  recap__fake_reset(NULL);
  bool supported = false;
  OK(ops->cond_supported(&supported));
  assert_true(supported);
  recap__fake_cond_supported(false);
  OK(ops->cond_supported(&supported));
  assert_false(supported);
  EXPECT_STATUS(ops->cond_supported(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap_stream_t s = recap__fake_stream_new();
  begin(s);
  recap_cuda_graph_t g = end_capture(s);
  uint64_t h = 0;
  EXPECT_STATUS(ops->cond_handle_create(g, 0, true, &h), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("no conditional nodes");
  recap__graph_node_t node;
  recap_cuda_graph_t body;
  EXPECT_STATUS(ops->cond_node_add(g, NULL, 0, RECAP__COND_IF, h, 1, &node, &body),
                RECAP_ERROR_NOT_SUPPORTED);
  OK(ops->graph_destroy(g));
  recap__fake_reset(NULL);
  OK(ops->cond_supported(&supported));
  assert_true(supported);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(while_runs_until_the_condition_is_zero),
    cmocka_unit_test(the_default_iteration_limit_is_a_million),
    cmocka_unit_test(defaults_and_kept_values),
    cmocka_unit_test(if_if_else_and_switch),
    cmocka_unit_test(regions_nest),
    cmocka_unit_test(pause_and_resume_give_new_capture_ids),
    cmocka_unit_test(a_pause_with_an_unjoined_side_stream_is_refused),
    cmocka_unit_test(capture_to_graph_checks_its_arguments),
    cmocka_unit_test(handles_and_nodes_are_checked),
    cmocka_unit_test(support_can_be_switched_off),
};

extern const recap_test_part_t fake_cond_kernel_tests;
extern const recap_test_part_t fake_cond_inspect_tests;

int main(int argc, char **argv) {
  const recap_test_part_t parts[] = {RECAP_TEST_PART(tests), fake_cond_kernel_tests,
                                     fake_cond_inspect_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
