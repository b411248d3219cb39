/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_graphs.c — tests of the graphs the CPU fake device builds from captures and
 * launches (tests/fake/fake_capture.c), the faults it injects (fake_fault.c), and what it tells
 * about the nodes of its graphs, random-number kernels included (fake_inspect.c, fake_rng.c).
 *
 * The layers above trust the fake's graphs to record, instantiate and launch the way CUDA's do;
 * these tests pin that down, calling the fake's ops table directly so that nothing above the
 * seam is involved. The fake's memory, streams, events and capture modes are tested in
 * test_fake_device.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/host.h"
#include "device/cond_launch.h"
#include "device/rng_launch.h"
#include "fake/fake.h"
#include "fake_device_util.h"
#include "harness.h"

/* ---- graphs ----------------------------------------------------------------------------- */

static recap_cuda_graph_t end_capture(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_SUCCESS);
  assert_non_null(g);
  return g;
}

static void assert_indices(const size_t *got, size_t count, const size_t *want, size_t want_count) {
  assert_int_equal(count, want_count);
  if (want_count == 0) assert_null(got);
  for (size_t i = 0; i < want_count; i++) assert_int_equal(got[i], want[i]);
}

/* Reads a whole small file into buf; returns its length. */
static size_t read_file(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose(f);
  return n;
}

static void begin_capture_rules(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t side = recap__fake_stream_new();

  /* The legacy stream is refused before the "device" is asked: no call is counted. */
  recap_clear_last_error();
  assert_int_equal(ops->stream_begin_capture(NULL, RECAP__CAPTURE_MODE_GLOBAL),
                   RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("legacy default stream");
  assert_last_error_has("cudaStreamNonBlocking");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_BEGIN], 0);

  assert_int_equal(ops->stream_begin_capture(s, (recap__capture_mode_t)9),
                   RECAP_ERROR_INVALID_ARGUMENT);
  recap_stream_t bogus = (recap_stream_t)&s;
  assert_int_equal(ops->stream_begin_capture(bogus, RECAP__CAPTURE_MODE_GLOBAL), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidResourceHandle");

  /* The ops and the test controls drive the same captures and ids. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  uint64_t id = 0;
  assert_int_equal(capture_status(s, &id), RECAP__CAPTURE_ACTIVE);
  assert_int_equal(id, 1);
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL),
                   RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("already capturing");
  assert_true(recap__fake_capture_join(side, s));
  assert_int_equal(ops->stream_begin_capture(side, RECAP__CAPTURE_MODE_RELAXED),
                   RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("joined");
  /* Refusals leave the capture intact. */
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
  assert_true(recap__fake_capture_end(s));
  assert_int_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 2);
  assert_true(recap__fake_capture_end(s));
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_BEGIN], 5);
}

static void capture_builds_graph(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t side = recap__fake_stream_new();

  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(s, "a"); /* 0 */
  recap__fake_launch_kernel(s, "b"); /* 1 <- 0 */
  assert_true(recap__fake_capture_join(side, s));
  recap__fake_launch_kernel(side, "c");      /* 2 <- 1: the origin's last node at the join */
  recap__fake_stream_enqueue(s);             /* 3 <- 1: "fake_kernel" */
  recap__fake_launch_kernel(side, NULL);     /* 4 <- 2 */
  recap__fake_launch_kernel(side, "q\"x\\"); /* 5 <- 4: a name DOT must escape */
  recap_cuda_graph_t g = end_capture(s);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 1);

  size_t count = 0;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 6);
  assert_int_equal(ops->graph_node_count(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(g, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 6);
  assert_int_equal(info.edge_count, 5);
  assert_false(info.tools_ids_available);
  const char *names[] = {"a", "b", "c", "fake_kernel", "fake_kernel", "q\"x\\"};
  for (size_t i = 0; i < 6; i++) {
    const recap_graph_node_t *n = &info.nodes[i];
    assert_int_equal(n->type, RECAP_NODE_KERNEL);
    assert_string_equal(n->kernel_name, names[i]);
    for (int d = 0; d < 3; d++) {
      assert_int_equal(n->grid[d], 1);
      assert_int_equal(n->block[d], 1);
    }
    assert_int_equal(n->shared_bytes, 0);
    assert_int_equal(n->bytes, 0);
    assert_null(n->annotation);
    assert_false(n->has_tools_id);
  }
  assert_indices(info.nodes[0].dependencies, info.nodes[0].dependency_count, NULL, 0);
  assert_indices(info.nodes[0].dependents, info.nodes[0].dependent_count, (size_t[]){1}, 1);
  assert_indices(info.nodes[1].dependencies, info.nodes[1].dependency_count, (size_t[]){0}, 1);
  assert_indices(info.nodes[1].dependents, info.nodes[1].dependent_count, (size_t[]){2, 3}, 2);
  assert_indices(info.nodes[2].dependencies, info.nodes[2].dependency_count, (size_t[]){1}, 1);
  assert_indices(info.nodes[2].dependents, info.nodes[2].dependent_count, (size_t[]){4}, 1);
  assert_indices(info.nodes[3].dependencies, info.nodes[3].dependency_count, (size_t[]){1}, 1);
  assert_indices(info.nodes[3].dependents, info.nodes[3].dependent_count, NULL, 0);
  assert_indices(info.nodes[4].dependencies, info.nodes[4].dependency_count, (size_t[]){2}, 1);
  assert_indices(info.nodes[4].dependents, info.nodes[4].dependent_count, (size_t[]){5}, 1);
  assert_indices(info.nodes[5].dependencies, info.nodes[5].dependency_count, (size_t[]){4}, 1);
  assert_indices(info.nodes[5].dependents, info.nodes[5].dependent_count, NULL, 0);
  recap__graph_info_clear(&info);
  assert_int_equal(info.node_count, 0);
  assert_null(info.nodes);
  assert_int_equal(info.edge_count, 0);
  recap__graph_info_clear(&info); /* twice is harmless */
  recap__graph_info_clear(NULL);
  assert_int_equal(ops->graph_inspect(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  /* DOT, and an unwritable path. */
  char path[64], dot[1024];
  snprintf(path, sizeof path, "/tmp/recap_fake_%ld.dot", (long)getpid());
  assert_int_equal(ops->graph_debug_dot(g, path), RECAP_SUCCESS);
  read_file(path, dot, sizeof dot);
  remove(path);
  assert_true(strncmp(dot, "digraph fake {", 14) == 0);
  assert_non_null(strstr(dot, "n0 [label=\"0: kernel a\"];"));
  assert_non_null(strstr(dot, "n5 [label=\"5: kernel q\\\"x\\\\\"];"));
  assert_non_null(strstr(dot, "n1 -> n2;"));
  assert_non_null(strstr(dot, "n1 -> n3;"));
  assert_non_null(strstr(dot, "n4 -> n5;"));
  assert_non_null(strstr(dot, "}\n"));
  recap_clear_last_error();
  assert_int_equal(ops->graph_debug_dot(g, "/nonexistent-recap-dir/g.dot"), RECAP_ERROR_IO);
  assert_last_error_has("/nonexistent-recap-dir/g.dot");
  assert_int_equal(ops->graph_debug_dot(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  /* A destroyed or foreign graph is an invalid value, found without touching it. */
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_inspect(g, &info), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_debug_dot(g, path), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_destroy(g), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidValue");
  assert_int_equal(ops->graph_destroy(NULL), RECAP_SUCCESS);
}

static void instantiate_and_launch(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t other = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_THREAD_LOCAL), RECAP_SUCCESS);
  for (int i = 0; i < 3; i++) recap__fake_stream_enqueue(s);
  recap_cuda_graph_t g = end_capture(s);

  recap_cuda_graph_exec_t x = NULL, y = NULL;
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  assert_non_null(x);
  assert_int_equal(ops->graph_instantiate(&y, g), RECAP_SUCCESS); /* as many as wanted */
  assert_int_equal(recap__fake_now().live_execs, 2);
  assert_int_equal(ops->graph_instantiate(NULL, g), RECAP_ERROR_INVALID_ARGUMENT);
  recap_cuda_graph_exec_t z = (recap_cuda_graph_exec_t)&z;
  assert_int_equal(ops->graph_instantiate(&z, (recap_cuda_graph_t)&z), RECAP_ERROR_CUDA);
  assert_null(z);

  /* A launch is work on its stream: an event recorded after it waits for it. */
  recap__event_t e;
  assert_int_equal(ops->event_create(&e), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, other), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(e, other), RECAP_SUCCESS);
  assert_false(query(e));
  recap__fake_stream_complete(other);
  assert_true(query(e));
  assert_int_equal(recap__fake_now().graph_launches, 1);

  /* The template may go before its executables, which live on (as in CUDA). */
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  for (int i = 0; i < 3; i++) assert_int_equal(ops->graph_launch(x, s), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(y, NULL), RECAP_SUCCESS); /* the legacy stream is fine */
  assert_int_equal(recap__fake_now().graph_launches, 5);
  assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
  assert_false(query(e));
  assert_int_equal(ops->stream_synchronize(s), RECAP_SUCCESS);
  assert_true(query(e));

  /* An empty capture makes an empty graph, whose launches do nothing. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED), RECAP_SUCCESS);
  recap_cuda_graph_t empty = end_capture(s);
  size_t count = 99;
  assert_int_equal(ops->graph_node_count(empty, &count), RECAP_SUCCESS);
  assert_int_equal(count, 0);
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(empty, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 0);
  assert_null(info.nodes);
  assert_int_equal(info.edge_count, 0);
  recap_cuda_graph_exec_t ex;
  assert_int_equal(ops->graph_instantiate(&ex, empty), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(ex, s), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(e, s), RECAP_SUCCESS);
  recap__fake_stream_complete(s);
  assert_true(query(e));
  assert_int_equal(recap__fake_now().graph_launches, 6);

  assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
  assert_int_equal(ops->graph_exec_destroy(y), RECAP_SUCCESS);
  assert_int_equal(ops->graph_exec_destroy(ex), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(empty), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_execs, 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(ops->graph_launch(x, s), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_exec_destroy(x), RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_exec_destroy(NULL), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().graph_launches, 6);
  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);
}

static void launch_into_capture(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t t = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(s, "inner");
  recap_cuda_graph_t inner = end_capture(s);
  recap_cuda_graph_exec_t x;
  assert_int_equal(ops->graph_instantiate(&x, inner), RECAP_SUCCESS);

  /* Launched on a capturing stream, a graph becomes a child-graph node and does not run. */
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, t), RECAP_SUCCESS);
  recap__fake_launch_kernel(t, "after");
  recap_cuda_graph_t outer = end_capture(t);
  assert_int_equal(recap__fake_now().graph_launches, 0);
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(outer, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 2);
  assert_int_equal(info.nodes[0].type, RECAP_NODE_GRAPH);
  assert_null(info.nodes[0].kernel_name);
  assert_int_equal(info.nodes[0].grid[0], 0);
  assert_int_equal(info.nodes[1].type, RECAP_NODE_KERNEL);
  assert_string_equal(info.nodes[1].kernel_name, "after");
  assert_indices(info.nodes[1].dependencies, info.nodes[1].dependency_count, (size_t[]){0}, 1);
  assert_int_equal(info.edge_count, 1);
  recap__graph_info_clear(&info);

  char path[64], dot[512];
  snprintf(path, sizeof path, "/tmp/recap_fake_outer_%ld.dot", (long)getpid());
  assert_int_equal(ops->graph_debug_dot(outer, path), RECAP_SUCCESS);
  read_file(path, dot, sizeof dot);
  remove(path);
  assert_non_null(strstr(dot, "n0 [label=\"0: graph\"];"));
  assert_non_null(strstr(dot, "n1 [label=\"1: kernel after\"];"));

  /* Into an invalidated capture, the launch fails as CUDA's does. */
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_capture_invalidate(t);
  recap_clear_last_error();
  assert_int_equal(ops->graph_launch(x, t), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureInvalidated");
  assert_false(recap__fake_capture_end(t));

  assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(inner), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(outer), RECAP_SUCCESS);
}

static void end_capture_errors(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t side = recap__fake_stream_new();
  recap_cuda_graph_t g = (recap_cuda_graph_t)&g;

  /* Not capturing, or no place for the graph. */
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_ERROR_INVALID_USAGE);
  assert_null(g);
  assert_last_error_has("not capturing");
  assert_int_equal(ops->stream_end_capture(NULL, &g), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(ops->stream_end_capture((recap_stream_t)&g, &g), RECAP_ERROR_CUDA);
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->stream_end_capture(s, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);

  /* An illegal call invalidates the capture: ending it fails and names the cause, the stream
   * stops capturing, no graph is left, and the stream can capture again. */
  recap__fake_stream_enqueue(s);
  void *p = &p;
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_ERROR_CAPTURE_INVALIDATED);
  recap__fake_stream_enqueue(s); /* ignored: the capture records nothing more */
  g = (recap_cuda_graph_t)&g;
  recap_clear_last_error();
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(recap_last_status(), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaErrorStreamCaptureInvalidated");
  assert_last_error_has("illegal call");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_stream_enqueue(s);
  g = end_capture(s);
  size_t count = 0;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 1); /* nothing of the invalidated capture is carried over */
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);

  /* Ending from a joined stream is unmatched: refused, and the capture is invalidated. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_true(recap__fake_capture_join(side, s));
  recap_clear_last_error();
  assert_int_equal(ops->stream_end_capture(side, &g), RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("cudaErrorStreamCaptureUnmatched");
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_INVALIDATED);
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

/* With strict joins, a capture that a side stream still takes part in cannot end, as on CUDA:
 * the capture is thrown away; joined back, it ends. Off by default and after a reset. */
static void strict_joins_refuse_an_unjoined_side_stream(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t side = recap__fake_stream_new();
  recap_cuda_graph_t g = (recap_cuda_graph_t)&g;
  recap__fake_strict_joins(true);
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_true(recap__fake_capture_join(side, s));
  recap__fake_stream_enqueue(side);
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_last_error_has("cudaErrorStreamCaptureUnjoined");
  assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(capture_status(side, NULL), RECAP__CAPTURE_NONE);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  /* Joined back, the capture ends with the side stream's node. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_true(recap__fake_capture_join(side, s));
  recap__fake_stream_enqueue(side);
  assert_true(recap__fake_capture_join_back(side, s));
  g = end_capture(s);
  size_t count = 0;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  /* A reset turns the rule off. */
  recap__fake_reset(NULL);
  s = recap__fake_stream_new();
  side = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_true(recap__fake_capture_join(side, s));
  g = end_capture(s);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
}

typedef struct end_thread {
  recap_stream_t stream;
  recap_status_t status;
  recap_cuda_graph_t graph;
} end_thread_t;

static void *end_thread_main(void *arg) {
  end_thread_t *t = arg;
  t->status = recap__fake_ops.stream_end_capture(t->stream, &t->graph);
  return NULL;
}

static recap_status_t end_in_other_thread(recap_stream_t s, recap_cuda_graph_t *g) {
  end_thread_t t = {.stream = s};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, end_thread_main, &t), 0);
  pthread_join(thread, NULL);
  *g = t.graph;
  return t.status;
}

static void end_capture_from_other_thread(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_cuda_graph_t g = NULL;

  /* Global and thread-local captures must end in the thread that began them... */
  for (int m = RECAP__CAPTURE_MODE_GLOBAL; m <= RECAP__CAPTURE_MODE_THREAD_LOCAL; m++) {
    assert_int_equal(ops->stream_begin_capture(s, (recap__capture_mode_t)m), RECAP_SUCCESS);
    recap__fake_stream_enqueue(s);
    assert_int_equal(end_in_other_thread(s, &g), RECAP_ERROR_INVALID_USAGE);
    assert_null(g);
    /* ...and the attempt leaves the capture intact. */
    assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
    g = end_capture(s);
    assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  }
  /* A relaxed one may end anywhere. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED), RECAP_SUCCESS);
  recap__fake_stream_enqueue(s);
  assert_int_equal(end_in_other_thread(s, &g), RECAP_SUCCESS);
  size_t count = 0;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
}

/* Graphs, executables and captures under way all go with a reset (the leak check confirms). */
static void reset_frees_graphs(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_stream_t t = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(s, "kept");
  recap_cuda_graph_t g = end_capture(s);
  recap_cuda_graph_exec_t x;
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, s), RECAP_SUCCESS);
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(t, "pending");
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 1);

  recap__fake_reset(NULL);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
  assert_int_equal(recap__fake_now().graph_launches, 0);
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) assert_int_equal(recap__fake_now().calls[k], 0);
  /* The armed fault went too. */
  recap_stream_t u = recap__fake_stream_new();
  assert_int_equal(ops->stream_begin_capture(u, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  g = end_capture(u);
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, u), RECAP_SUCCESS);
  recap__fake_reset(NULL);
}

/* ---- fault injection -------------------------------------------------------------------- */

/* What the calls of every kind need, made before any fault is armed. */
typedef struct fault_fixture {
  recap_stream_t stream;
  recap__event_t event;
  recap_cuda_graph_t graph; /* two kernel nodes, one argument each */
  recap_cuda_graph_exec_t exec;
  recap__patch_plan_t plan; /* of graph */
  const recap__graph_read_t *sites;
  size_t site_count;
  int words[4];                  /* what the arguments point at */
  bool flip;                     /* which word the next patch points site 0 at */
  recap_cuda_graph_t cond_graph; /* an empty graph the conditional nodes are added to */
  uint32_t flag;                 /* what the condition kernels set */
  uint64_t rng[3];               /* a generator's state words */
  uint64_t handles[16];          /* made for cond_graph, so that a node's add needs no other call */
  size_t handles_used;
  /* Virtual memory: a range of 32 granules; granules 0-15 mapped (each unmap takes the next),
   * 16 mapped (set_access's), 17-31 free (each map takes the next), all to map_chunk; 16
   * chunks not mapped (each release takes the next); 16 pinned allocations (each free takes
   * the next); 16 ranges of one granule. */
  size_t granularity;
  char *range;
  recap__vmm_handle_t map_chunk, chunks[16];
  void *pinned[16];
  void *ranges[16]; /* one granule each, nothing mapped (each release_range takes the next) */
  size_t unmaps, maps, releases, frees, range_releases;
} fault_fixture_t;

static void fixture_make(fault_fixture_t *fx) {
  fx->stream = recap__fake_stream_new();
  assert_int_equal(ops->event_create(&fx->event), RECAP_SUCCESS);
  /* Begun through the test control, so that only the end counts as a call. */
  assert_int_not_equal(recap__fake_capture_begin(fx->stream, RECAP__CAPTURE_MODE_GLOBAL), 0);
  const void *first[] = {&fx->words[0]}, *second[] = {&fx->words[1]};
  recap__fake_launch_kernel_args(fx->stream, NULL, first, 1);
  recap__fake_launch_kernel_args(fx->stream, NULL, second, 1);
  assert_int_equal(ops->stream_end_capture(fx->stream, &fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->graph_instantiate(&fx->exec, fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->patch_plan_create(fx->graph, NULL, &fx->plan, &fx->sites, &fx->site_count),
                   RECAP_SUCCESS);
  assert_int_equal(fx->site_count, 2);
  fx->flip = false;
  assert_int_not_equal(recap__fake_capture_begin(fx->stream, RECAP__CAPTURE_MODE_GLOBAL), 0);
  assert_int_equal(ops->stream_end_capture(fx->stream, &fx->cond_graph), RECAP_SUCCESS);
  fx->flag = 0;
  memset(fx->rng, 0, sizeof fx->rng);
  for (size_t i = 0; i < sizeof fx->handles / sizeof fx->handles[0]; i++)
    assert_int_equal(ops->cond_handle_create(fx->cond_graph, 1, true, &fx->handles[i]),
                     RECAP_SUCCESS);
  fx->handles_used = 0;
  assert_int_equal(ops->vmm_granularity(&fx->granularity, NULL), RECAP_SUCCESS);
  size_t g = fx->granularity;
  void *range = NULL;
  assert_int_equal(ops->vmm_reserve(&range, 32 * g), RECAP_SUCCESS);
  fx->range = range;
  assert_int_equal(ops->vmm_create(&fx->map_chunk, g), RECAP_SUCCESS);
  for (int i = 0; i <= 16; i++)
    assert_int_equal(ops->vmm_map(fx->range + (size_t)i * g, g, fx->map_chunk), RECAP_SUCCESS);
  for (int i = 0; i < 16; i++) {
    assert_int_equal(ops->vmm_create(&fx->chunks[i], g), RECAP_SUCCESS);
    assert_int_equal(ops->host_alloc_pinned(&fx->pinned[i], 64), RECAP_SUCCESS);
    assert_int_equal(ops->vmm_reserve(&fx->ranges[i], g), RECAP_SUCCESS);
  }
  fx->unmaps = fx->maps = fx->releases = fx->frees = fx->range_releases = 0;
}

/* A patch of site 0 to a word it does not point at now. */
static recap__patch_t fixture_patch(fault_fixture_t *fx) {
  fx->flip = !fx->flip;
  return (recap__patch_t){.site = 0, .value = &fx->words[fx->flip ? 2 : 0]};
}

static void fixture_free(fault_fixture_t *fx) {
  ops->patch_plan_destroy(fx->plan);
  assert_int_equal(ops->graph_exec_destroy(fx->exec), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(fx->cond_graph), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(fx->event), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

/* One call of kind, cleaning up after itself on success. Calls of other kinds it needs go
 * through the test controls, which are not counted and never fail. */
static recap_status_t call_kind(recap__fake_fault_t kind, fault_fixture_t *fx) {
  recap_stream_t s = fx->stream;
  recap_status_t st = RECAP_SUCCESS;
  switch (kind) {
    case RECAP__FAKE_FAULT_RAW_MALLOC: {
      void *p;
      st = ops->raw_malloc(&p, 1024);
      if (st == RECAP_SUCCESS) ops->raw_free(p);
      break;
    }
    case RECAP__FAKE_FAULT_EVENT_CREATE: {
      recap__event_t x;
      st = ops->event_create(&x);
      if (st == RECAP_SUCCESS) ops->event_destroy(x);
      break;
    }
    case RECAP__FAKE_FAULT_EVENT_RECORD: st = ops->event_record(fx->event, s); break;
    case RECAP__FAKE_FAULT_STREAM_CREATE: {
      recap_stream_t x;
      st = ops->stream_create(&x);
      if (st == RECAP_SUCCESS) ops->stream_destroy(x);
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_BEGIN:
      st = ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL);
      if (st == RECAP_SUCCESS) assert_true(recap__fake_capture_end(s));
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    case RECAP__FAKE_FAULT_CAPTURE_END: {
      assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
      recap__fake_stream_enqueue(s);
      recap_cuda_graph_t g = (recap_cuda_graph_t)&g;
      st = ops->stream_end_capture(s, &g);
      if (st == RECAP_SUCCESS)
        assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
      else
        assert_null(g);
      /* Failed or not, the capture is over. */
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    }
    case RECAP__FAKE_FAULT_INSTANTIATE: {
      recap_cuda_graph_exec_t x = (recap_cuda_graph_exec_t)&x;
      st = ops->graph_instantiate(&x, fx->graph);
      if (st == RECAP_SUCCESS)
        assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
      else
        assert_null(x);
      break;
    }
    case RECAP__FAKE_FAULT_LAUNCH: {
      uint64_t launches = recap__fake_now().graph_launches;
      st = ops->graph_launch(fx->exec, s);
      assert_int_equal(recap__fake_now().graph_launches, launches + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_PATCH_PLAN: {
      recap__patch_plan_t plan = (recap__patch_plan_t)&plan;
      const recap__graph_read_t *sites = fx->sites;
      size_t count = 9;
      st = ops->patch_plan_create(fx->graph, NULL, &plan, &sites, &count);
      if (st == RECAP_SUCCESS) {
        assert_int_equal(count, 2);
        ops->patch_plan_destroy(plan);
      } else {
        assert_null(plan);
        assert_null(sites);
        assert_int_equal(count, 0);
      }
      break;
    }
    case RECAP__FAKE_FAULT_PATCH: {
      const void *before, *after;
      assert_true(recap__fake_exec_arg(fx->exec, 0, 0, &before));
      recap__patch_t p = fixture_patch(fx);
      st = ops->patch_plan_apply(fx->plan, fx->exec, &p, 1);
      assert_true(recap__fake_exec_arg(fx->exec, 0, 0, &after));
      if (st == RECAP_SUCCESS) {
        assert_ptr_equal(after, p.value);
      } else {
        fixture_patch(fx); /* the plan did not change: flip back */
        assert_ptr_equal(after, before);
      }
      break;
    }
    case RECAP__FAKE_FAULT_PATCH_SYNC: {
      /* The plan alone (no executable, so no counted set), then one node to write. */
      recap__patch_t p = fixture_patch(fx);
      assert_int_equal(ops->patch_plan_apply(fx->plan, NULL, &p, 1), RECAP_SUCCESS);
      assert_ptr_equal(fx->sites[0].ptr, p.value);
      const void *before, *after;
      assert_true(recap__fake_graph_arg(fx->graph, 0, 0, &before));
      st = ops->patch_plan_sync(fx->plan);
      assert_true(recap__fake_graph_arg(fx->graph, 0, 0, &after));
      /* A failed sync leaves the template as it was, the node to the next sync. */
      assert_ptr_equal(after, st == RECAP_SUCCESS ? p.value : before);
      break;
    }
    case RECAP__FAKE_FAULT_EXEC_UPDATE: {
      recap_update_reason_t why = RECAP_UPDATE_REASON_COUNT;
      size_t node = 0;
      uint64_t updates = recap__fake_now().exec_updates;
      st = ops->graph_exec_update(fx->exec, fx->graph, &why, &node);
      assert_int_equal(why, RECAP_UPDATE_REASON_NONE);
      assert_int_equal(node, SIZE_MAX);
      assert_int_equal(recap__fake_now().exec_updates, updates + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_TIMING: {
      recap__event_t x = (recap__event_t)&x;
      st = ops->timing_event_create(&x);
      if (st == RECAP_SUCCESS)
        assert_int_equal(ops->event_destroy(x), RECAP_SUCCESS);
      else
        assert_null(x);
      break;
    }
    case RECAP__FAKE_FAULT_UPLOAD: {
      uint64_t uploads = recap__fake_now().graph_uploads;
      st = ops->graph_upload(fx->exec, s);
      assert_int_equal(recap__fake_now().graph_uploads, uploads + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_COND_SUPPORTED: {
      bool supported = false;
      st = ops->cond_supported(&supported);
      assert_true(supported == (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_PAUSE: {
      assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
      recap__fake_stream_enqueue(s);
      recap_cuda_graph_t g = NULL;
      recap__graph_node_t *deps = NULL;
      size_t count = 9;
      st = ops->capture_pause(s, &g, &deps, &count);
      if (st == RECAP_SUCCESS) {
        assert_int_equal(count, 1);
        recap__host_free(deps);
        assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
      } else {
        /* A failed pause leaves the capture under way. */
        assert_null(g);
        assert_int_equal(count, 0);
        assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
        assert_true(recap__fake_capture_end(s));
      }
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH:
      st = ops->capture_to_graph(s, fx->cond_graph, NULL, 0, RECAP__CAPTURE_MODE_GLOBAL);
      assert_int_equal(capture_status(s, NULL),
                       st == RECAP_SUCCESS ? RECAP__CAPTURE_ACTIVE : RECAP__CAPTURE_NONE);
      if (st == RECAP_SUCCESS) assert_true(recap__fake_capture_end(s));
      break;
    case RECAP__FAKE_FAULT_COND_HANDLE: {
      uint64_t h = 7;
      st = ops->cond_handle_create(fx->cond_graph, 1, true, &h);
      assert_true((h != 0) == (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_COND_NODE: {
      assert_true(fx->handles_used < sizeof fx->handles / sizeof fx->handles[0]);
      uint64_t h = fx->handles[fx->handles_used];
      size_t before = 0, after = 0;
      assert_int_equal(ops->graph_node_count(fx->cond_graph, &before), RECAP_SUCCESS);
      recap__graph_node_t node = NULL;
      recap_cuda_graph_t body = NULL;
      st = ops->cond_node_add(fx->cond_graph, NULL, 0, RECAP__COND_WHILE, h, 1, &node, &body);
      assert_int_equal(ops->graph_node_count(fx->cond_graph, &after), RECAP_SUCCESS);
      assert_int_equal(after, before + (st == RECAP_SUCCESS));
      assert_true((node != NULL) == (st == RECAP_SUCCESS));
      fx->handles_used += st == RECAP_SUCCESS;
      break;
    }
    case RECAP__FAKE_FAULT_COND_LAUNCH: {
      recap__cond_launch_t l = {.kind = RECAP__COND_SET_VALUE,
                                .cond = {.flag = &fx->flag},
                                .stream = s,
                                .value = fx->flag + 1};
      uint32_t before = fx->flag;
      st = ops->cond_launch(&l);
      assert_int_equal(fx->flag, before + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_RNG_ADVANCE: {
      uint64_t before = fx->rng[2];
      st = ops->rng_advance(s, fx->rng, 3);
      assert_int_equal(fx->rng[2], before + (st == RECAP_SUCCESS ? 3 : 0));
      break;
    }
    case RECAP__FAKE_FAULT_VMM_GRANULARITY: {
      size_t minimum = 0, recommended = 0;
      st = ops->vmm_granularity(&minimum, &recommended);
      assert_int_equal(minimum, st == RECAP_SUCCESS ? fx->granularity : 0);
      assert_int_equal(recommended, st == RECAP_SUCCESS ? fx->granularity : 0);
      break;
    }
    case RECAP__FAKE_FAULT_VMM_RESERVE: {
      int64_t before = recap__fake_now().vmm_ranges_live;
      void *p = &p;
      st = ops->vmm_reserve(&p, fx->granularity);
      assert_int_equal(recap__fake_now().vmm_ranges_live, before + (st == RECAP_SUCCESS));
      if (st != RECAP_SUCCESS) assert_null(p);
      break;
    }
    case RECAP__FAKE_FAULT_VMM_RELEASE_RANGE: {
      assert_true(fx->range_releases < 16);
      int64_t live = recap__fake_now().vmm_ranges_live;
      st = ops->vmm_release_range(fx->ranges[fx->range_releases], fx->granularity);
      assert_int_equal(recap__fake_now().vmm_ranges_live, live - (st == RECAP_SUCCESS));
      if (st == RECAP_SUCCESS) fx->range_releases++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_CREATE: {
      size_t used = recap__fake_now().bytes_in_use[0];
      recap__vmm_handle_t h = 99;
      st = ops->vmm_create(&h, fx->granularity);
      assert_int_equal(recap__fake_now().bytes_in_use[0],
                       used + (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st != RECAP_SUCCESS) assert_int_equal(h, 0);
      break;
    }
    case RECAP__FAKE_FAULT_VMM_RELEASE: {
      assert_true(fx->releases < 16);
      size_t used = recap__fake_now().bytes_in_use[0];
      st = ops->vmm_release(fx->chunks[fx->releases]);
      assert_int_equal(recap__fake_now().bytes_in_use[0],
                       used - (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st == RECAP_SUCCESS) fx->releases++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_MAP: {
      assert_true(fx->maps < 15);
      size_t mapped = recap__fake_now().vmm_bytes_mapped;
      st = ops->vmm_map(fx->range + (17 + fx->maps) * fx->granularity, fx->granularity,
                        fx->map_chunk);
      assert_int_equal(recap__fake_now().vmm_bytes_mapped,
                       mapped + (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st == RECAP_SUCCESS) fx->maps++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_UNMAP: {
      assert_true(fx->unmaps < 16);
      size_t mapped = recap__fake_now().vmm_bytes_mapped;
      st = ops->vmm_unmap(fx->range + fx->unmaps * fx->granularity, fx->granularity);
      assert_int_equal(recap__fake_now().vmm_bytes_mapped,
                       mapped - (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st == RECAP_SUCCESS) fx->unmaps++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_SET_ACCESS: {
      char *p = fx->range + 16 * fx->granularity;
      st = ops->vmm_set_access(p, fx->granularity);
      if (st == RECAP_SUCCESS) p[0]++; /* writable now */
      break;
    }
    case RECAP__FAKE_FAULT_HOST_ALLOC_PINNED: {
      int64_t live = recap__fake_now().pinned_live;
      void *p = &p;
      st = ops->host_alloc_pinned(&p, 100);
      assert_int_equal(recap__fake_now().pinned_live, live + (st == RECAP_SUCCESS));
      if (st != RECAP_SUCCESS) assert_null(p);
      break;
    }
    case RECAP__FAKE_FAULT_HOST_FREE_PINNED: {
      assert_true(fx->frees < 16);
      int64_t live = recap__fake_now().pinned_live;
      st = ops->host_free_pinned(fx->pinned[fx->frees]);
      assert_int_equal(recap__fake_now().pinned_live, live - (st == RECAP_SUCCESS));
      if (st == RECAP_SUCCESS) fx->frees++;
      break;
    }
    case RECAP__FAKE_FAULT_NCCL_LOAD: {
      int version = 0;
      st = recap__fake_nccl_ops.load(&version);
      break;
    }
    case RECAP__FAKE_FAULT_NCCL_COLLECTIVE:
    case RECAP__FAKE_FAULT_NCCL_REGISTER: {
      /* A clique of one rank (the reset frees it). */
      recap__nccl_comm_t comm;
      assert_int_equal(recap__fake_nccl_comms(1, &comm), RECAP_SUCCESS);
      float x = 1.0f;
      if (kind == RECAP__FAKE_FAULT_NCCL_COLLECTIVE) {
        recap__coll_t c = {RECAP__COLL_ALL_REDUCE, &x, &x, 1, 7 /* ncclFloat32 */, 0, -1, -1, comm};
        st = recap__fake_nccl_ops.collective(&c, s);
      } else {
        void *handle = NULL;
        st = recap__fake_nccl_ops.comm_register(comm, &x, sizeof x, &handle);
        if (st == RECAP_SUCCESS)
          assert_int_equal(recap__fake_nccl_ops.comm_deregister(comm, handle), RECAP_SUCCESS);
      }
      break;
    }
    case RECAP__FAKE_FAULT_NCCL_MEM_ALLOC: {
      void *p = NULL;
      st = recap__fake_nccl_ops.mem_alloc(&p, 64);
      if (st == RECAP_SUCCESS) assert_int_equal(recap__fake_nccl_ops.mem_free(p), RECAP_SUCCESS);
      break;
    }
    case RECAP__FAKE_FAULT_STREAM_WAIT_EVENT: st = ops->stream_wait_event(s, fx->event); break;
    case RECAP__FAKE_FAULT_KINDS: break;
  }
  return st;
}

static void fault_injection(void **state) {
  (void)state;
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) {
    recap__fake_fault_t kind = (recap__fake_fault_t)k;
    recap__fake_reset(NULL);
    fault_fixture_t fx;
    fixture_make(&fx);
    uint64_t base = recap__fake_now().calls[kind];
    recap_status_t expected = kind == RECAP__FAKE_FAULT_RAW_MALLOC ||
                                      kind == RECAP__FAKE_FAULT_VMM_CREATE ||
                                      kind == RECAP__FAKE_FAULT_HOST_ALLOC_PINNED ||
                                      kind == RECAP__FAKE_FAULT_NCCL_MEM_ALLOC
                                  ? RECAP_ERROR_OUT_OF_MEMORY
                                  : RECAP_ERROR_CUDA;
    /* The fake NCCL's faults read as NCCL's failures (fake.h). */
    if (kind == RECAP__FAKE_FAULT_NCCL_LOAD) expected = RECAP_ERROR_NOT_FOUND;
    if (kind == RECAP__FAKE_FAULT_NCCL_COLLECTIVE || kind == RECAP__FAKE_FAULT_NCCL_REGISTER)
      expected = RECAP_ERROR_INTERNAL;

    /* Two calls before arming count, but do not shift the target. */
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    recap__fake_fail_nth(kind, 3);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    recap_clear_last_error();
    assert_int_equal(call_kind(kind, &fx), expected);
    assert_int_equal(recap_last_status(), expected);
    assert_last_error_has("fault injected");
    /* Once only. */
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(recap__fake_now().calls[kind], base + 7);

    /* 1 fails the very next call; 0 disarms. */
    recap__fake_fail_nth(kind, 1);
    assert_int_equal(call_kind(kind, &fx), expected);
    recap__fake_fail_nth(kind, 2);
    recap__fake_fail_nth(kind, 0);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(recap__fake_now().calls[kind], base + 10);

    /* Other kinds are unaffected by an armed fault. */
    recap__fake_fail_nth(kind, 1);
    for (int other = 0; other < RECAP__FAKE_FAULT_KINDS; other++)
      if (other != k) assert_int_equal(call_kind((recap__fake_fault_t)other, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), expected);

    /* Only the fixture's chunks hold device memory (one granule each). */
    assert_int_equal(recap__fake_now().bytes_in_use[0],
                     (size_t)recap__fake_now().vmm_chunks_live * fx.granularity);
    assert_int_equal(recap__fake_now().live_graphs, 2);
    assert_int_equal(recap__fake_now().live_execs, 1);
    fixture_free(&fx);
    assert_int_equal(recap__fake_now().live_events, 0);
  }

  /* A failed raw_malloc leaves nothing behind and sets *ptr to NULL. */
  recap__fake_reset(NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RAW_MALLOC, 1);
  void *p = &p;
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  assert_last_error_has("cudaErrorMemoryAllocation");
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* Copies and memsets in a capture become nodes that report their sizes, as the CUDA seam reads
 * them from the memcpy and memset node parameters; kernels report none. */
static void copy_and_memset_nodes_report_their_bytes(void **state) {
  (void)state;
  recap__fake_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  void *a = NULL, *b = NULL;
  assert_int_equal(ops->raw_malloc(&a, 8192), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc(&b, 8192), RECAP_SUCCESS);

  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->memcpy_async(b, a, 4096, s), RECAP_SUCCESS); /* 0 */
  recap__fake_memset_async(s, b, 0, 1000);                           /* 1 */
  recap__fake_launch_kernel(s, "k");                                 /* 2 */
  recap__fake_memset_async(s, a, 7, 0);                              /* 3: an empty memset */
  recap_cuda_graph_t g = end_capture(s);

  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(g, &info), RECAP_SUCCESS);
  assert_int_equal(info.node_count, 4);
  assert_int_equal(info.nodes[0].type, RECAP_NODE_MEMCPY);
  assert_int_equal(info.nodes[0].bytes, 4096);
  assert_int_equal(info.nodes[1].type, RECAP_NODE_MEMSET);
  assert_int_equal(info.nodes[1].bytes, 1000);
  assert_int_equal(info.nodes[2].type, RECAP_NODE_KERNEL);
  assert_int_equal(info.nodes[2].bytes, 0);
  assert_int_equal(info.nodes[3].type, RECAP_NODE_MEMSET);
  assert_int_equal(info.nodes[3].bytes, 0);
  recap__graph_info_clear(&info);

  /* Nothing ran in the capture: the memset did not touch b. Eagerly it sets the bytes. */
  memset(b, 0x5a, 8192);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  recap__fake_memset_async(s, b, 0, 1000);
  assert_int_equal(((unsigned char *)b)[999], 0);
  assert_int_equal(((unsigned char *)b)[1000], 0x5a);
  assert_int_equal(ops->raw_free(a), RECAP_SUCCESS);
  assert_int_equal(ops->raw_free(b), RECAP_SUCCESS);
}

/* A device that recap's kernels have no image for: the random-number kernels fail before
 * anything is launched, with the message of the CUDA seam naming the compute capability. */
static void kernels_without_an_image_name_the_compute_capability(void **state) {
  (void)state;
  recap__fake_reset(&(recap__fake_config_t){.compute_capability = 75, .no_kernel_image = true});
  recap_stream_t s = recap__fake_stream_new();
  uint64_t *words = NULL;
  float *out = NULL;
  assert_int_equal(ops->raw_malloc((void **)&words, 3 * sizeof *words), RECAP_SUCCESS);
  assert_int_equal(ops->raw_malloc((void **)&out, 16 * sizeof *out), RECAP_SUCCESS);
  words[0] = words[1] = 99;
  char want[512];
  snprintf(want, sizeof want,
           "recap's kernels were built for CUDA architectures %s; this GPU (device 0, fake "
           "device) has compute capability 7.5: rebuild recap with "
           "-DCMAKE_CUDA_ARCHITECTURES=75",
           recap__device_cuda_architectures());
  assert_non_null(strstr(recap__device_cuda_architectures(), "-real"));

  uint64_t writes = recap__fake_now().rng_state_writes, launches = recap__fake_now().rng_launches;
  recap_clear_last_error();
  assert_int_equal(ops->rng_write_state(s, words, 1, 2), RECAP_ERROR_NOT_SUPPORTED);
  assert_string_equal(recap_last_error(), want);
  assert_int_equal(words[0], 99);

  recap__rng_launch_t l = {.kind = RECAP__RNG_UNIFORM, .out = out, .n = 16, .stream = s};
  uint64_t increment = 0;
  recap__rng_shape(l.n, &l.grid, &increment);
  recap_clear_last_error();
  assert_int_equal(ops->rng_launch(&l), RECAP_ERROR_NOT_SUPPORTED);
  assert_string_equal(recap_last_error(), want);
  /* In a capture too: no node is added. */
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  assert_int_equal(ops->rng_launch(&l), RECAP_ERROR_NOT_SUPPORTED);
  recap_cuda_graph_t g = end_capture(s);
  size_t count = 99;
  assert_int_equal(ops->graph_node_count(g, &count), RECAP_SUCCESS);
  assert_int_equal(count, 0);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().rng_state_writes, writes);
  assert_int_equal(recap__fake_now().rng_launches, launches);

  /* A device recap's kernels cover runs them. */
  recap__fake_reset(NULL);
  s = recap__fake_stream_new();
  /* Three words: {seed, base offset, offset drawn on the device}; the write adds the third. */
  assert_int_equal(ops->raw_malloc((void **)&words, 3 * sizeof *words), RECAP_SUCCESS);
  words[2] = 5;
  assert_int_equal(ops->rng_write_state(s, words, 1, 2), RECAP_SUCCESS);
  assert_int_equal(words[0], 1);
  assert_int_equal(words[1], 2 + 5);
  assert_int_equal(recap__fake_now().rng_state_writes, writes + 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(begin_capture_rules),
    cmocka_unit_test(capture_builds_graph),
    cmocka_unit_test(instantiate_and_launch),
    cmocka_unit_test(launch_into_capture),
    cmocka_unit_test(end_capture_errors),
    cmocka_unit_test(strict_joins_refuse_an_unjoined_side_stream),
    cmocka_unit_test(end_capture_from_other_thread),
    cmocka_unit_test(reset_frees_graphs),
    cmocka_unit_test(fault_injection),
    cmocka_unit_test(copy_and_memset_nodes_report_their_bytes),
    cmocka_unit_test(kernels_without_an_image_name_the_compute_capability),
};

int main(int argc, char **argv) { return RECAP_TEST_RUN(argc, argv, tests); }
