/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_cond.c — tests of the CPU fake device's regions (tests/fake/fake_cond.c): pausing a
 * capture and resuming it into a graph, conditional handles and nodes of each kind, nesting,
 * what a launch runs, the condition kernels, rng_advance, inspection and reads of bodies,
 * executable updates, and the faults of each new operation.
 *
 * The region layer (src/regions/regions.c) is tested on top of this model; these tests pin the
 * model down through the fake's ops table, with nothing above the seam involved.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "core/host.h"
#include "device/cond_launch.h"
#include "fake/fake.h"
#include "fake_device_util.h"
#include "harness.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* *args[0] += 1 (an int). */
static void bump(void *const *args, size_t n) {
  assert_int_equal(n, 1);
  (*(int *)args[0])++;
}

/* A test kernel that sets a condition: args {flag-or-NULL, handle, value}; the value is
 * *(unsigned *)args[2] so that a test changes it between launches. */
static void set_cond(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  recap_cond_t c = {.handle = (uint64_t)(uintptr_t)args[1], .flag = args[0]};
  recap__fake_cond_set(c, *(const unsigned *)args[2]);
}

static void launch_bump(recap_stream_t s, int *counter) {
  const void *args[] = {counter};
  recap__fake_launch_kernel_fn(s, "bump", bump, args, 1);
}

static void launch_set_cond(recap_stream_t s, uint64_t handle, const unsigned *value) {
  const void *args[] = {NULL, (const void *)(uintptr_t)handle, value};
  recap__fake_launch_kernel_fn(s, "set_cond", set_cond, args, 3);
}

static void begin(recap_stream_t s) {
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
}

static uint64_t capture_id(recap_stream_t s) {
  uint64_t id = 0;
  assert_int_equal(capture_status(s, &id), RECAP__CAPTURE_ACTIVE);
  return id;
}

/* Pause the capture of s: the graph, and the one dependency (or NULL). */
static recap_cuda_graph_t pause_capture(recap_stream_t s, recap__graph_node_t *dep) {
  recap_cuda_graph_t g = NULL;
  recap__graph_node_t *deps = NULL;
  size_t count = 0;
  OK(ops->capture_pause(s, &g, &deps, &count));
  assert_non_null(g);
  assert_true(count <= 1);
  *dep = count ? deps[0] : NULL;
  recap__host_free(deps);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  return g;
}

static void resume(recap_stream_t s, recap_cuda_graph_t g, recap__graph_node_t dep) {
  OK(ops->capture_to_graph(s, g, dep ? &dep : NULL, dep ? 1 : 0, RECAP__CAPTURE_MODE_GLOBAL));
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
}

/* Open a region at this point of the capture on s (the device path as region.h describes it):
 * pause, add the conditional node after the stream's dependency, capture body 0. The handle
 * was made on `building` (the capture's graph) before; *node and bodies are the new node's. */
typedef struct region {
  recap_cuda_graph_t parent;
  recap__graph_node_t node;
  recap_cuda_graph_t bodies[4];
  unsigned branches;
} region_t;

static region_t region_open(recap_stream_t s, recap__cond_kind_t kind, uint64_t handle,
                            unsigned branches) {
  region_t r = {.branches = branches};
  recap__graph_node_t dep;
  r.parent = pause_capture(s, &dep);
  OK(ops->cond_node_add(r.parent, dep ? &dep : NULL, dep ? 1 : 0, kind, handle, branches, &r.node,
                        r.bodies));
  assert_non_null(r.node);
  for (unsigned b = 0; b < branches; b++) assert_non_null(r.bodies[b]);
  resume(s, r.bodies[0], NULL);
  return r;
}

/* Close branch b of r and go on with branch b + 1. */
static void region_next(recap_stream_t s, const region_t *r, unsigned b) {
  recap__graph_node_t dep;
  assert_ptr_equal(pause_capture(s, &dep), r->bodies[b]);
  resume(s, r->bodies[b + 1], NULL);
}

/* Close r: the capture goes on in the parent after the conditional node. */
static void region_close(recap_stream_t s, const region_t *r, unsigned b) {
  recap__graph_node_t dep;
  assert_ptr_equal(pause_capture(s, &dep), r->bodies[b]);
  resume(s, r->parent, r->node);
}

/* The graph being captured on s (capture_nodes' graph). */
static recap_cuda_graph_t building(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  OK(ops->capture_nodes(s, &g, &nodes, &n));
  recap__host_free(nodes);
  return g;
}

static uint64_t make_handle(recap_cuda_graph_t g, unsigned initial, bool assign_default) {
  uint64_t h = 0;
  OK(ops->cond_handle_create(g, initial, assign_default, &h));
  assert_int_not_equal(h, 0);
  return h;
}

static recap_cuda_graph_t end_capture(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  OK(ops->stream_end_capture(s, &g));
  assert_non_null(g);
  return g;
}

static recap_cuda_graph_exec_t instantiate(recap_cuda_graph_t g) {
  recap_cuda_graph_exec_t x = NULL;
  OK(ops->graph_instantiate(&x, g));
  return x;
}

static size_t node_count(recap_cuda_graph_t g) {
  size_t n = 0;
  OK(ops->graph_node_count(g, &n));
  return n;
}

static void cleanup(recap_cuda_graph_exec_t x, recap_cuda_graph_t g) {
  OK(ops->graph_exec_destroy(x));
  OK(ops->graph_destroy(g));
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

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

/* A WHILE runs its body while the condition is nonzero, checked before every iteration. */
static void while_runs_until_the_condition_is_zero(void **state) {
  (void)state;
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
  w.next = 1;
  recap__fake_cond_iteration_limit(3);
  EXPECT_STATUS(ops->graph_launch(w.exec, w.s), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("iteration limit of 3");
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

/* The default limit is 1000000 iterations. */
static void the_default_iteration_limit_is_a_million(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  while_graph_t w;
  while_graph_make(&w, 1, true);
  w.next = 1;
  EXPECT_STATUS(ops->graph_launch(w.exec, w.s), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("iteration limit of 1000000");
  assert_int_equal(w.body, 1000000);
  assert_int_equal(recap__fake_now().body_launches, 1000000);
  /* A reset restores the default after a test changed it. */
  recap__fake_cond_iteration_limit(2);
  recap__fake_reset(NULL);
  while_graph_make(&w, 1, true);
  w.next = 1;
  EXPECT_STATUS(ops->graph_launch(w.exec, w.s), RECAP_ERROR_CUDA);
  assert_int_equal(w.body, 1000000);
  cleanup(w.exec, w.graph);
}

/* assign_default: the condition is the default at every launch; without it, the initial value
 * at the first launch, then whatever was set last. */
static void defaults_and_kept_values(void **state) {
  (void)state;
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
static void if_if_else_and_switch(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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

  value = 0;
  OK(ops->graph_launch(x, s));
  assert_int_equal(if_body, 0);
  assert_int_equal(then_body, 0);
  assert_int_equal(else_body, 1);
  assert_int_equal(cases[0], 1);
  value = 1;
  OK(ops->graph_launch(x, s));
  assert_int_equal(if_body, 1);
  assert_int_equal(then_body, 1);
  assert_int_equal(else_body, 1);
  assert_int_equal(cases[1], 1);
  value = 2;
  OK(ops->graph_launch(x, s));
  assert_int_equal(if_body, 2);
  assert_int_equal(then_body, 2);
  assert_int_equal(cases[2], 1);
  value = 3; /* out of the SWITCH's range: no case */
  OK(ops->graph_launch(x, s));
  assert_int_equal(cases[0] + cases[1] + cases[2], 3);
  assert_int_equal(if_body, 3);
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.cond_nodes_run, 3 * 4);
  assert_int_equal(c.body_launches, 3 + 4 + 3); /* IF: 3 nonzero values; IF/ELSE: always one */
  cleanup(x, g);
}

/* Regions nest: a WHILE inside an IF inside a WHILE, with counters run by countdown kernels. */
static void regions_nest(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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
      recap__cond_launch_t down = {.kind = RECAP__COND_COUNTDOWN,
                                   .cond = {.handle = inner},
                                   .stream = s,
                                   .counter = &inner_counter};
      OK(ops->cond_launch(&down));
      region_close(s, &rw, 0);
    }
    launch_bump(s, &if_body);
    region_close(s, &ri, 0);
    recap__cond_launch_t down = {.kind = RECAP__COND_COUNTDOWN,
                                 .cond = {.handle = outer},
                                 .stream = s,
                                 .counter = &outer_counter};
    OK(ops->cond_launch(&down));
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
static void pause_and_resume_give_new_capture_ids(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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
static void a_pause_with_an_unjoined_side_stream_is_refused(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new(), side = recap__fake_stream_new();
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
static void capture_to_graph_checks_its_arguments(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new(), t = recap__fake_stream_new();
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
static void handles_and_nodes_are_checked(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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
static void support_can_be_switched_off(void **state) {
  (void)state;
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

/* ---- condition kernels ------------------------------------------------------------------ */

static void cond_launch_ok(recap__cond_launch_t l) { OK(ops->cond_launch(&l)); }

/* Eagerly each kernel runs at once, on a flag or on a handle's eager value. */
static void condition_kernels_run_eagerly(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  uint32_t flag = 7, from = 5, counter = 2, iterations = 0;
  recap_cond_t cf = {.flag = &flag};
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE, .cond = cf, .stream = s, .value = 3});
  assert_int_equal(flag, 3);
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_FROM, .cond = cf, .stream = s, .from = &from});
  assert_int_equal(flag, 5);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = cf, .stream = s, .counter = &counter});
  assert_int_equal(counter, 1);
  assert_int_equal(flag, 1);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = cf, .stream = s, .counter = &counter});
  assert_int_equal(counter, 0);
  assert_int_equal(flag, 0);
  assert_int_equal(recap__fake_now().cond_kernels_run, 4);

  /* COMPARE over every dtype and op. */
  float f32 = 1.5f;
  double f64 = -2.25;
  int32_t i32 = -3;
  uint32_t u32 = 4000000000u;
  int64_t i64 = -5000000000ll;
  struct {
    recap_cond_dtype_t dtype;
    const void *operand;
    recap__cond_launch_t l; /* threshold set below */
  } cases[] = {{RECAP_COND_F32, &f32, {.threshold.f32 = 1.5f}},
               {RECAP_COND_F64, &f64, {.threshold.f64 = -2.25}},
               {RECAP_COND_I32, &i32, {.threshold.i32 = -3}},
               {RECAP_COND_U32, &u32, {.threshold.u32 = 4000000000u}},
               {RECAP_COND_I64, &i64, {.threshold.i64 = -5000000000ll}}};
  /* Each operand equals its threshold: GT, LT, NE false; GE, LE, EQ true. */
  const bool equal_holds[] = {false, true, false, true, true, false};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int op = RECAP_COND_GT; op <= RECAP_COND_NE; op++) {
      recap__cond_launch_t l = cases[c].l;
      l.kind = RECAP__COND_COMPARE;
      l.cond = cf;
      l.stream = s;
      l.operand = cases[c].operand;
      l.dtype = cases[c].dtype;
      l.op = (recap_cond_op_t)op;
      flag = 9;
      cond_launch_ok(l);
      if (flag != (uint32_t)equal_holds[op])
        fail_msg("dtype %d op %d: flag %u", (int)cases[c].dtype, op, flag);
    }
  /* Above and below the threshold. */
  recap__cond_launch_t l = {.kind = RECAP__COND_COMPARE,
                            .cond = cf,
                            .stream = s,
                            .operand = &f64,
                            .dtype = RECAP_COND_F64,
                            .op = RECAP_COND_GT,
                            .threshold.f64 = -3.0};
  cond_launch_ok(l);
  assert_int_equal(flag, 1);
  l.op = RECAP_COND_LT;
  cond_launch_ok(l);
  assert_int_equal(flag, 0);
  l = (recap__cond_launch_t){.kind = RECAP__COND_COMPARE,
                             .cond = cf,
                             .stream = s,
                             .operand = &i64,
                             .dtype = RECAP_COND_I64,
                             .op = RECAP_COND_LT,
                             .threshold.i64 = -4999999999ll};
  cond_launch_ok(l);
  assert_int_equal(flag, 1);

  /* With an iteration counter: counts while the comparison holds, false at max. */
  l = (recap__cond_launch_t){.kind = RECAP__COND_COMPARE,
                             .cond = cf,
                             .stream = s,
                             .operand = &i32,
                             .dtype = RECAP_COND_I32,
                             .op = RECAP_COND_EQ,
                             .threshold.i32 = -3,
                             .counter = &iterations,
                             .max = 2};
  cond_launch_ok(l);
  assert_int_equal(iterations, 1);
  assert_int_equal(flag, 1);
  cond_launch_ok(l);
  assert_int_equal(iterations, 2);
  assert_int_equal(flag, 0);
  /* The comparison false: the counter is left alone (&& short-circuits). */
  l.threshold.i32 = 0;
  cond_launch_ok(l);
  assert_int_equal(iterations, 2);
  assert_int_equal(flag, 0);

  /* On a handle, eagerly: its eager value. */
  begin(s);
  uint64_t h = make_handle(building(s), 4, true);
  assert_true(recap__fake_cond_value(NULL, h, &flag));
  assert_int_equal(flag, 4);
  assert_true(recap__fake_capture_end(s));
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_SET_VALUE, .cond = {.handle = h}, .stream = s, .value = 6});
  assert_true(recap__fake_cond_value(NULL, h, &flag));
  assert_int_equal(flag, 6);
  recap__fake_cond_set((recap_cond_t){.handle = h}, 8);
  assert_true(recap__fake_cond_value(NULL, h, &flag));
  assert_int_equal(flag, 8);
  uint32_t word = 0;
  recap__fake_cond_set((recap_cond_t){.flag = &word}, 11);
  assert_int_equal(word, 11);
}

/* Captured, each kernel is a node named after it that runs at every launch. */
static void condition_kernels_are_nodes_that_run_at_launches(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  uint32_t flag = 0, from = 2, counter = 10;
  float residual = 0.5f;
  recap_cond_t cf = {.flag = &flag};
  begin(s);
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE, .cond = cf, .stream = s, .value = 3});
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_FROM, .cond = cf, .stream = s, .from = &from});
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = cf, .stream = s, .counter = &counter});
  cond_launch_ok((recap__cond_launch_t){.kind = RECAP__COND_COMPARE,
                                        .cond = cf,
                                        .stream = s,
                                        .operand = &residual,
                                        .dtype = RECAP_COND_F32,
                                        .op = RECAP_COND_GT,
                                        .threshold.f32 = 0.25f});
  assert_int_equal(flag, 0); /* nothing ran */
  assert_int_equal(counter, 10);
  recap_cuda_graph_t g = end_capture(s);
  recap_graph_info_t info = {0};
  OK(ops->graph_inspect(g, &info));
  assert_int_equal(info.node_count, 4);
  const char *names[] = {"recap_cond_set_value", "recap_cond_set_from", "recap_cond_countdown",
                         "recap_cond_compare"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(info.nodes[i].type, RECAP_NODE_KERNEL);
    assert_string_equal(info.nodes[i].kernel_name, names[i]);
  }
  recap__graph_info_clear(&info);
  /* What they read is reported, for the input-liveness checks. */
  recap__graph_read_t *reads = NULL;
  size_t n = 0;
  OK(ops->graph_reads(g, &reads, &n));
  bool saw_from = false, saw_counter = false, saw_residual = false;
  for (size_t i = 0; i < n; i++) {
    saw_from |= reads[i].node == 1 && reads[i].ptr == &from;
    saw_counter |= reads[i].node == 2 && reads[i].ptr == &counter;
    saw_residual |= reads[i].node == 3 && reads[i].ptr == &residual;
  }
  recap__host_free(reads);
  assert_true(saw_from && saw_counter && saw_residual);
  recap_cuda_graph_exec_t x = instantiate(g);
  OK(ops->graph_launch(x, s));
  assert_int_equal(counter, 9);
  assert_int_equal(flag, 1);
  residual = 0.125f;
  OK(ops->graph_launch(x, s));
  assert_int_equal(counter, 8);
  assert_int_equal(flag, 0);
  assert_int_equal(recap__fake_now().cond_kernels_run, 8);
  cleanup(x, g);
}

/* A condition kernel's refusals, and a handle set in a launch that holds no node of it. */
static void condition_kernels_check_their_operands(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  uint32_t flag = 0;
  recap_cond_t cf = {.flag = &flag};
  EXPECT_STATUS(ops->cond_launch(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap__cond_launch_t l = {.kind = RECAP__COND_SET_FROM, .cond = cf, .stream = s};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_cond_set_from: from is NULL");
  l.kind = RECAP__COND_COUNTDOWN;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("counter is NULL");
  l.kind = RECAP__COND_COMPARE;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("operand is NULL");
  l.operand = &flag;
  l.dtype = (recap_cond_dtype_t)17;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  l.dtype = RECAP_COND_U32;
  l.op = (recap_cond_op_t)17;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  l = (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE, .stream = s};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("neither a flag nor a handle");
  l = (recap__cond_launch_t){.kind = (recap__cond_op_kind_t)9, .cond = cf, .stream = s};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INTERNAL);
  l = (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE,
                             .cond = cf,
                             .stream = (recap_stream_t)&l};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_CUDA);
  assert_int_equal(recap__fake_now().cond_kernels_run, 0);
  /* On an invalidated capture. */
  begin(s);
  recap__fake_capture_invalidate(s);
  l.stream = s;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(s));

  /* A graph holding a handle that no conditional node holds is refused at instantiation, as
   * CUDA refuses it (cudaErrorInvalidValue). */
  begin(s);
  uint64_t h = make_handle(building(s), 0, true);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_SET_VALUE, .cond = {.handle = h}, .stream = s, .value = 1});
  recap_cuda_graph_t g = end_capture(s);
  recap_cuda_graph_exec_t x = NULL;
  EXPECT_STATUS(ops->graph_instantiate(&x, g), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaErrorInvalidValue");
  EXPECT_MESSAGE("no conditional node there holds it");
  assert_null(x);
  OK(ops->graph_destroy(g));

  /* A launch whose kernel sets a handle of another graph (held there) fails. */
  begin(s);
  uint64_t foreign = make_handle(building(s), 0, true);
  recap__graph_node_t node;
  recap_cuda_graph_t body;
  recap_cuda_graph_t other = end_capture(s);
  OK(ops->cond_node_add(other, NULL, 0, RECAP__COND_IF, foreign, 1, &node, &body));
  begin(s);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_SET_VALUE, .cond = {.handle = foreign}, .stream = s, .value = 1});
  g = end_capture(s);
  x = instantiate(g);
  EXPECT_STATUS(ops->graph_launch(x, s), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("which no conditional node of this executable holds");
  EXPECT_MESSAGE("recap_cond_set_value");
  assert_int_equal(recap__fake_now().graph_launches, 0);
  OK(ops->graph_destroy(other));
  cleanup(x, g);
}

/* With no kernel image for the device, condition kernels and rng_advance fail as the CUDA
 * seam's kernels do. */
static void no_kernel_image_refuses_the_kernels(void **state) {
  (void)state;
  recap__fake_reset(&(recap__fake_config_t){.compute_capability = 61, .no_kernel_image = true});
  recap_stream_t s = recap__fake_stream_new();
  uint32_t flag = 0;
  uint64_t words[3] = {0, 0, 0};
  recap__cond_launch_t l = {.kind = RECAP__COND_SET_VALUE,
                            .cond = {.flag = &flag},
                            .stream = s,
                            .value = 1};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("6.1");
  assert_int_equal(flag, 0);
  EXPECT_STATUS(ops->rng_advance(s, words, 1), RECAP_ERROR_NOT_SUPPORTED);
  assert_int_equal(words[1], 0);
  recap__fake_reset(NULL);
}

/* ---- random numbers --------------------------------------------------------------------- */

/* rng_advance adds the step to state[1] and state[2], at once or as a node run by launches;
 * rng_write_state writes state[1] = offset + state[2]. */
static void rng_advance_and_write_state(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  uint64_t words[3] = {0, 0, 0};
  OK(ops->rng_advance(s, words, 4));
  assert_int_equal(words[1], 4);
  assert_int_equal(words[2], 4);
  OK(ops->rng_write_state(s, words, 11, 100));
  assert_int_equal(words[0], 11);
  assert_int_equal(words[1], 104);
  assert_int_equal(words[2], 4);

  /* Captured in a WHILE body of three iterations. */
  uint32_t counter = 3;
  begin(s);
  uint64_t h = make_handle(building(s), 1, true);
  region_t r = region_open(s, RECAP__COND_WHILE, h, 1);
  OK(ops->rng_advance(s, words, 8));
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = {.handle = h}, .stream = s, .counter = &counter});
  region_close(s, &r, 0);
  recap_cuda_graph_t g = end_capture(s);
  assert_int_equal(words[2], 4); /* nothing ran at the capture */
  recap_graph_info_t info = {0};
  OK(ops->graph_inspect(g, &info));
  assert_string_equal(info.nodes[1].kernel_name, "recap_rng_advance");
  recap__graph_info_clear(&info);
  recap_cuda_graph_exec_t x = instantiate(g);
  OK(ops->graph_launch(x, s));
  assert_int_equal(words[1], 104 + 24);
  assert_int_equal(words[2], 4 + 24);
  OK(ops->rng_write_state(s, words, 11, 200));
  assert_int_equal(words[1], 200 + 28);

  EXPECT_STATUS(ops->rng_advance(s, NULL, 1), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(ops->rng_advance((recap_stream_t)&words, words, 1), RECAP_ERROR_CUDA);
  cleanup(x, g);
}

/* ---- inspection and reads --------------------------------------------------------------- */

/* graph_inspect lists the graph's nodes, then each conditional node's bodies in branch order,
 * each laid out by the same rule (a body's own nodes, then its nested bodies, before the next
 * branch); graph_nodes lists the graph's own nodes only. */
static void inspection_flattens_bodies(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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
static void reads_in_bodies_are_nested(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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
  assert_int_equal(n, 5);
  assert_int_equal(reads[0].node, 0);
  assert_ptr_equal(reads[0].ptr, &a);
  assert_false(reads[0].nested);
  assert_int_equal(reads[1].node, 1);
  assert_ptr_equal(reads[1].ptr, &b);
  assert_true(reads[1].nested);
  assert_int_equal(reads[1].kind, RECAP__READ_KERNEL_ARG);
  assert_int_equal(reads[2].node, 1);
  assert_ptr_equal(reads[2].ptr, &c);
  assert_int_equal(reads[2].kind, RECAP__READ_COPY_SRC);
  assert_true(reads[2].nested);
  assert_int_equal(reads[3].node, 1);
  assert_ptr_equal(reads[3].ptr, &d);
  assert_true(reads[3].nested);
  assert_int_equal(reads[4].node, 2);
  assert_ptr_equal(reads[4].ptr, &c);
  assert_false(reads[4].nested);
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
static void updates_need_the_same_structure(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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
static void each_fault_leaves_things_consistent(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
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
    cmocka_unit_test(condition_kernels_run_eagerly),
    cmocka_unit_test(condition_kernels_are_nodes_that_run_at_launches),
    cmocka_unit_test(condition_kernels_check_their_operands),
    cmocka_unit_test(no_kernel_image_refuses_the_kernels),
    cmocka_unit_test(rng_advance_and_write_state),
    cmocka_unit_test(inspection_flattens_bodies),
    cmocka_unit_test(reads_in_bodies_are_nested),
    cmocka_unit_test(updates_need_the_same_structure),
    cmocka_unit_test(each_fault_leaves_things_consistent),
};

int main(int argc, char **argv) { return RECAP_TEST_RUN(argc, argv, tests); }
