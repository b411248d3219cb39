/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_cond_util.h — what the parts of test_fake_cond share: kernels that count and set
 * conditions, a capture paused and resumed through the fake's ops, regions opened and closed by
 * hand, and the graphs' ends. Every helper is static inline, so a part that uses only some of them
 * builds without warnings.
 */
#ifndef RECAP_TEST_FAKE_COND_UTIL_H
#define RECAP_TEST_FAKE_COND_UTIL_H

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
static inline void bump(void *const *args, size_t n) {
  assert_int_equal(n, 1);
  (*(int *)args[0])++;
}

/* A test kernel that sets a condition: args {flag-or-NULL, handle, value}; the value is
 * *(unsigned *)args[2] so that a test changes it between launches. */
static inline void set_cond(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  recap_cond_t c = {.handle = (uint64_t)(uintptr_t)args[1], .flag = args[0]};
  recap__fake_cond_set(c, *(const unsigned *)args[2]);
}

static inline void launch_bump(recap_stream_t s, int *counter) {
  const void *args[] = {counter};
  recap__fake_launch_kernel_fn(s, "bump", bump, args, 1);
}

static inline void launch_set_cond(recap_stream_t s, uint64_t handle, const unsigned *value) {
  const void *args[] = {NULL, (const void *)(uintptr_t)handle, value};
  recap__fake_launch_kernel_fn(s, "set_cond", set_cond, args, 3);
}

static inline void begin(recap_stream_t s) {
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
}

static inline uint64_t capture_id(recap_stream_t s) {
  uint64_t id = 0;
  assert_int_equal(capture_status(s, &id), RECAP__CAPTURE_ACTIVE);
  return id;
}

/* Pause the capture of s: the graph, and the one dependency (or NULL). */
static inline recap_cuda_graph_t pause_capture(recap_stream_t s, recap__graph_node_t *dep) {
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

static inline void resume(recap_stream_t s, recap_cuda_graph_t g, recap__graph_node_t dep) {
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

static inline region_t region_open(recap_stream_t s, recap__cond_kind_t kind, uint64_t handle,
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
static inline void region_next(recap_stream_t s, const region_t *r, unsigned b) {
  recap__graph_node_t dep;
  assert_ptr_equal(pause_capture(s, &dep), r->bodies[b]);
  resume(s, r->bodies[b + 1], NULL);
}

/* Close r: the capture goes on in the parent after the conditional node. */
static inline void region_close(recap_stream_t s, const region_t *r, unsigned b) {
  recap__graph_node_t dep;
  assert_ptr_equal(pause_capture(s, &dep), r->bodies[b]);
  resume(s, r->parent, r->node);
}

/* The graph being captured on s (capture_nodes' graph). */
static inline recap_cuda_graph_t building(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  OK(ops->capture_nodes(s, &g, &nodes, &n));
  recap__host_free(nodes);
  return g;
}

static inline uint64_t make_handle(recap_cuda_graph_t g, unsigned initial, bool assign_default) {
  uint64_t h = 0;
  OK(ops->cond_handle_create(g, initial, assign_default, &h));
  assert_int_not_equal(h, 0);
  return h;
}

static inline recap_cuda_graph_t end_capture(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  OK(ops->stream_end_capture(s, &g));
  assert_non_null(g);
  return g;
}

static inline recap_cuda_graph_exec_t instantiate(recap_cuda_graph_t g) {
  recap_cuda_graph_exec_t x = NULL;
  OK(ops->graph_instantiate(&x, g));
  return x;
}

static inline size_t node_count(recap_cuda_graph_t g) {
  size_t n = 0;
  OK(ops->graph_node_count(g, &n));
  return n;
}

static inline void cleanup(recap_cuda_graph_exec_t x, recap_cuda_graph_t g) {
  OK(ops->graph_exec_destroy(x));
  OK(ops->graph_destroy(g));
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

#endif /* RECAP_TEST_FAKE_COND_UTIL_H */
