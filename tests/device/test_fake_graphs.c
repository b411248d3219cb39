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
 *
 * The fault injection is in fake_graph_faults.c, a part of this program; fake_graphs_util.h holds
 * what they share.
 */
#include "fake_graphs_util.h"

/* ---- graphs ----------------------------------------------------------------------------- */

RECAP_TEST(begin_capture_rules) {
  recap_stream_t s = fresh_stream();
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

RECAP_TEST(capture_builds_graph) {
  recap_stream_t s = fresh_stream();
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
  EXPECT_CONTAINS(dot, "n0 [label=\"0: kernel a\"];", "n5 [label=\"5: kernel q\\\"x\\\\\"];",
                  "n1 -> n2;", "n1 -> n3;", "n4 -> n5;", "}\n");
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

RECAP_TEST(instantiate_and_launch) {
  recap_stream_t s = fresh_stream();
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

RECAP_TEST(launch_into_capture) {
  recap_stream_t s = fresh_stream();
  recap_stream_t t = recap__fake_stream_new();
  recap_cuda_graph_t inner = one_kernel_graph(s, "inner");
  recap_cuda_graph_exec_t x = instantiate(inner);

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
  EXPECT_CONTAINS(dot, "n0 [label=\"0: graph\"];", "n1 [label=\"1: kernel after\"];");

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

static void add_one(void *const *args, size_t n) {
  (void)n;
  ++*(int *)args[0];
}

/* capture_add_child: a node holding a copy of the graph, after the stream's work, that runs the
 * copy where it stands (the graph may go meanwhile); what its copy reads is the node's, nested;
 * what CUDA forbids in a child graph, and a stream not capturing, are refused with nothing
 * added. */
RECAP_TEST(add_child_runs_a_copy_and_refuses_what_cuda_forbids) {
  recap_stream_t s = fresh_stream();
  recap_stream_t t = recap__fake_stream_new();
  int word = 0;
  const void *args[] = {&word};
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel_fn(s, "inc", add_one, args, 1);
  recap__fake_launch_kernel_fn(s, "inc", add_one, args, 1);
  recap_cuda_graph_t inner = end_capture(s);

  recap_clear_last_error();
  assert_int_equal(ops->capture_add_child(t, inner), RECAP_ERROR_INVALID_USAGE);
  assert_last_error_has("no active capture");
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(t, "before");
  assert_int_equal(ops->capture_add_child(t, inner), RECAP_SUCCESS);
  recap__fake_launch_kernel(t, "after");
  recap_cuda_graph_t outer = end_capture(t);
  assert_int_equal(ops->graph_destroy(inner), RECAP_SUCCESS); /* the node holds a copy */
  size_t count = 0;
  assert_int_equal(ops->graph_node_count(outer, &count), RECAP_SUCCESS);
  assert_int_equal(count, 3); /* a child graph node counts as one */
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  assert_int_equal(ops->graph_inspect(outer, &info), RECAP_SUCCESS);
  assert_int_equal(info.nodes[1].type, RECAP_NODE_GRAPH);
  assert_indices(info.nodes[1].dependencies, info.nodes[1].dependency_count, (size_t[]){0}, 1);
  assert_indices(info.nodes[2].dependencies, info.nodes[2].dependency_count, (size_t[]){1}, 1);
  recap__graph_info_clear(&info);
  recap__graph_read_t *reads = NULL;
  assert_int_equal(ops->graph_reads(outer, &reads, &count), RECAP_SUCCESS);
  assert_int_equal(count, 2);
  assert_int_equal(reads[0].node, 1);
  assert_true(reads[0].nested);
  assert_ptr_equal(reads[0].ptr, &word);
  recap__host_free(reads);
  recap_cuda_graph_exec_t x = instantiate(outer);
  assert_int_equal(ops->graph_launch(x, t), RECAP_SUCCESS);
  assert_int_equal(ops->graph_launch(x, t), RECAP_SUCCESS);
  assert_int_equal(word, 4);
  assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);

  /* A graph holding a conditional node is refused, the capture unchanged. */
  recap_cuda_graph_t cond = one_kernel_graph(s, "k");
  uint64_t h = 0;
  recap__graph_node_t node = NULL;
  recap_cuda_graph_t body = NULL;
  assert_int_equal(ops->cond_handle_create(cond, 1, true, &h), RECAP_SUCCESS);
  assert_int_equal(ops->cond_node_add(cond, NULL, 0, RECAP__COND_IF, h, 1, &node, &body),
                   RECAP_SUCCESS);
  assert_int_equal(ops->stream_begin_capture(t, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap_clear_last_error();
  assert_int_equal(ops->capture_add_child(t, cond), RECAP_ERROR_NOT_SUPPORTED);
  assert_last_error_has("the graph holds a conditional node, which CUDA does not allow");
  recap__fake_launch_kernel(t, "alone");
  recap_cuda_graph_t lone = end_capture(t);
  assert_int_equal(ops->graph_node_count(lone, &count), RECAP_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(ops->graph_destroy(lone), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(cond), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(outer), RECAP_SUCCESS);
}

RECAP_TEST(end_capture_errors) {
  recap_stream_t s = fresh_stream();
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
RECAP_TEST(strict_joins_refuse_an_unjoined_side_stream) {
  recap_stream_t s = fresh_stream();
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
  s = fresh_stream();
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

RECAP_TEST(end_capture_from_other_thread) {
  recap_stream_t s = fresh_stream();
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
RECAP_TEST(reset_frees_graphs) {
  recap_stream_t s = fresh_stream();
  recap_stream_t t = recap__fake_stream_new();
  /* A graph and its executable, launched; a capture under way; an armed fault. */
  recap_cuda_graph_exec_t x = instantiate(one_kernel_graph(s, "kept"));
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
  x = instantiate(end_capture(u));
  assert_int_equal(ops->graph_launch(x, u), RECAP_SUCCESS);
  recap__fake_reset(NULL);
}

/* Copies and memsets in a capture become nodes that report their sizes, as the CUDA seam reads
 * them from the memcpy and memset node parameters; kernels report none. */
RECAP_TEST(copy_and_memset_nodes_report_their_bytes) {
  recap_stream_t s = fresh_stream();
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
RECAP_TEST(kernels_without_an_image_name_the_compute_capability) {
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
    cmocka_unit_test(add_child_runs_a_copy_and_refuses_what_cuda_forbids),
    cmocka_unit_test(end_capture_errors),
    cmocka_unit_test(strict_joins_refuse_an_unjoined_side_stream),
    cmocka_unit_test(end_capture_from_other_thread),
    cmocka_unit_test(reset_frees_graphs),
    cmocka_unit_test(copy_and_memset_nodes_report_their_bytes),
    cmocka_unit_test(kernels_without_an_image_name_the_compute_capability),
};

extern const recap_test_part_t fake_graph_fault_tests;

int main(int argc, char **argv) {
  const recap_test_part_t parts[] = {RECAP_TEST_PART(tests), fake_graph_fault_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
