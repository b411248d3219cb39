/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_scope.c — the graph layer around and beyond a single capture, on the CPU fake
 * device: the capture scope and the RECAP_DISABLE_GRAPHS kill switch, captures and their ends
 * from other threads, inspection and its JSON, and injected faults at every device call a graph
 * makes.
 *
 * One capture on one thread (the state machine, pools, invalidation, KEEP and replay) is in
 * test_graph.c. After every scenario the same invariants must hold: no capture left in the
 * registry, the allocator's checker passes, and the fake holds no graph or executable nobody
 * owns.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "graph_util.h"
#include "capture_util.h"
#include "harness.h"
#include "inspect_util.h"
#include "fork_join_util.h"
#include "regions_info.h"

/* ------------------------------------------------------------------------------------------
 * Capture scope and the kill switch
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(scope_uses_a_shared_side_stream) {
  reset();
  const recap__device_ops_t *dev = recap__device();
  recap_stream_t other = recap__fake_stream_new();

  /* Work in flight elsewhere, and a cached segment nobody uses. */
  recap__event_t done_marker;
  OK(dev->event_create(&done_marker));
  launch(other, 1);
  OK(dev->event_record(done_marker, other));
  bool done = true;
  OK(dev->event_query(done_marker, &done));
  assert_false(done);
  void *cached;
  OK(recap_malloc(&cached, 4 * KiB, other));
  OK(recap_free(cached));
  assert_true(recap__fake_now().bytes_in_use[0] > 0);

  recap_graph_t g, h;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&h, 0));
  recap_stream_t s1 = NULL, s2 = NULL;
  OK(recap_capture_scope_begin(g, NULL, &s1));
  assert_non_null(s1);
  assert_int_equal(capturing(s1), 1);
  /* The scope synchronised the device and gave the unused cache back. */
  OK(dev->event_query(done_marker, &done));
  assert_true(done);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  void *p;
  OK(recap_malloc(&p, 4 * KiB, s1));
  launch(s1, 2);
  OK(recap_capture_scope_end(g));
  assert_int_equal(capturing(s1), 0);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE); /* closed already */
  EXPECT_MESSAGE("no capture scope");
  size_t nodes;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 2);

  /* The next scope gets the same side stream. */
  OK(recap_capture_scope_begin(h, NULL, &s2));
  assert_ptr_equal(s1, s2);
  launch(s2, 1);
  OK(recap_capture_scope_end(h));
  /* A graph that holds a capture must be reset before another scope. */
  EXPECT_STATUS(recap_capture_scope_begin(g, NULL, &s2), RECAP_ERROR_INVALID_USAGE);

  OK(recap_graph_replay(g, s1));
  OK(recap_graph_replay(h, s1));
  OK(recap_free(p));
  OK(dev->event_destroy(done_marker));
  DESTROY_GRAPHS(g, h);
  expect_all_released();
}

RECAP_TEST(scope_captures_on_a_given_stream_and_pool) {
  reset();
  recap_stream_t mine = recap__fake_stream_new();
  recap_scope_options_t opts = RECAP_SCOPE_OPTIONS_INIT;
  opts.stream = mine;
  opts.capture.pool = recap_pool_handle();
  opts.capture.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_stream_t s = NULL;
  OK(recap_capture_scope_begin(g, &opts, &s));
  assert_ptr_equal(s, mine);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  assert_true(pool.a == opts.capture.pool.a && pool.b == opts.capture.pool.b);
  launch(s, 1);
  OK(recap_capture_scope_end(g));
  opts.size = 1;
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_capture_scope_begin(g, &opts, &s), RECAP_ERROR_INVALID_ARGUMENT);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(disabled_graphs_run_the_scope_eagerly) {
  reset();
  recap__graphs_disabled_override(1);
  assert_int_equal(!recap_graphs_enabled(), 1);
  recap_stream_t s;
  recap_graph_t g = graph_in_scope(&s);
  assert_non_null(s);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_EAGER);
  assert_int_equal(capturing(s), 0); /* nothing is captured */
  assert_int_equal(recap__registry_count(), 0);
  void *p;
  OK(recap_malloc(&p, 4 * KiB, s)); /* eager memory, from the default pool */
  assert_int_equal(pool_info(default_pool).allocated_bytes, 4 * KiB);
  launch(s, 1);
  OK(recap_capture_scope_end(g));
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_EAGER); /* nothing to replay: run it again */
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("disabled");
  recap_pool_id_t pool;
  EXPECT_STATUS(recap_graph_pool(g, &pool), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("ran eagerly");
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_STATUS(recap_capture_scope_begin(g, NULL, &s), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_EAGER); /* the refusals changed nothing */
  /* After a reset, and with graphs enabled again, the same graph captures. */
  OK(recap_graph_reset(g));
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  recap__graphs_disabled_override(0);
  assert_int_equal(!recap_graphs_enabled(), 0);
  OK(recap_capture_scope_begin(g, NULL, &s));
  assert_int_equal(capturing(s), 1);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  launch(s, 1);
  OK(recap_capture_scope_end(g));
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_replay(g, s));
  OK(recap_free(p));
  destroy_and_expect_quiet(g);
}

/* ------------------------------------------------------------------------------------------
 * Threads
 * ---------------------------------------------------------------------------------------- */

typedef struct capture_thread {
  int id;
  pthread_barrier_t *barrier;
  /* Results, checked by the main thread (cmocka's assertions are not for other threads). */
  recap_status_t begin, alloc, end, inspect, replay;
  size_t node_count;
  int names_match;
  int other_saw_capture; /* the stream of this thread was capturing while both ran */
  recap_pool_id_t pool;
  char error[512];
} capture_thread_t;

static void note_error(capture_thread_t *t, recap_status_t s) {
  if (s != RECAP_SUCCESS && !t->error[0])
    snprintf(t->error, sizeof t->error, "%s: %s", recap_status_name(s), recap_last_error());
}

static void *capture_in_thread(void *arg) {
  capture_thread_t *t = arg;
  char name[32];
  snprintf(name, sizeof name, "thread%d_kernel", t->id);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = NULL;
  recap_status_t st = recap_graph_create(&g, RECAP_GRAPH_KEEP);
  note_error(t, st);
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  t->begin = recap_graph_capture_begin(g, &opts, s);
  note_error(t, t->begin);
  note_error(t, recap_graph_pool(g, &t->pool));
  pthread_barrier_wait(t->barrier); /* both captures are under way now */
  void *p = NULL;
  /* A new segment in each thread, while the other thread's capture runs. */
  t->alloc = recap_malloc(&p, 3 * MiB, s);
  note_error(t, t->alloc);
  for (int i = 0; i < 3 + t->id; i++) recap__fake_launch_kernel(s, name);
  int flag = 0;
  note_error(t, recap_stream_is_capturing(s, &flag));
  t->other_saw_capture = flag;
  pthread_barrier_wait(t->barrier);
  t->end = recap_graph_capture_end(g);
  note_error(t, t->end);
  recap_graph_info_t *info = NULL;
  t->inspect = recap_graph_inspect(g, &info);
  note_error(t, t->inspect);
  if (info) {
    t->node_count = info->node_count;
    t->names_match = 1;
    for (size_t i = 0; i < info->node_count; i++)
      if (!info->nodes[i].kernel_name || strcmp(info->nodes[i].kernel_name, name) != 0)
        t->names_match = 0;
    recap_graph_info_free(info);
  }
  t->replay = recap_graph_replay(g, s);
  note_error(t, t->replay);
  if (p) recap_free(p);
  recap_graph_destroy(g);
  return NULL;
}

RECAP_TEST(two_threads_capture_at_once) {
  reset();
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, 2);
  capture_thread_t t[2] = {{.id = 0, .barrier = &barrier}, {.id = 1, .barrier = &barrier}};
  pthread_t threads[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&threads[i], NULL, capture_in_thread, &t[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);
  for (int i = 0; i < 2; i++) {
    if (t[i].error[0]) fail_msg("thread %d: %s", i, t[i].error);
    assert_int_equal(t[i].other_saw_capture, 1);
    assert_int_equal(t[i].node_count, (size_t)(3 + i));
    assert_int_equal(t[i].names_match, 1);
  }
  assert_false(t[0].pool.a == t[1].pool.a && t[0].pool.b == t[1].pool.b);
  assert_int_equal(recap__fake_now().graph_launches, 2);
  expect_all_released();
}

typedef struct foreign_end {
  recap_graph_t graph;
  recap_stream_t stream;
  recap_status_t status;
} foreign_end_t;

/* call run on a thread of its own with {g, s} and joined: the status it gave (`unset` if it gave
 * none). */
static recap_status_t in_another_thread(void *(*call)(void *), recap_graph_t g, recap_stream_t s,
                                        recap_status_t unset) {
  foreign_end_t f = {g, s, unset};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, call, &f), 0);
  pthread_join(thread, NULL);
  return f.status;
}

static void *end_from_another_thread(void *arg) {
  foreign_end_t *f = arg;
  f->status = recap_graph_capture_end(f->graph);
  return NULL;
}

/* CUDA refuses to end a global or thread-local capture from another thread than the one that
 * began it (cudaErrorStreamCaptureWrongThread); the capture is then still under way, so the
 * graph must still be capturing too, and the right thread must be able to end it. */
RECAP_TEST(end_from_another_thread_keeps_the_capture) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, 0);
  launch(s, 1);
  EXPECT_STATUS(in_another_thread(end_from_another_thread, g, s, RECAP_SUCCESS),
                RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(capturing(s), 1);            /* CUDA's capture goes on... */
  assert_int_equal(recap__registry_count(), 1); /* ...and so must recap's bookkeeping */
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(capturing(s), 0);
  size_t nodes;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 2); /* the work before and after the refusal */
  destroy_and_expect_quiet(g);
}

/* A relaxed capture forbids nothing, its end from another thread included: that thread ends the
 * graph's capture on the stream it began on, which the graph knows. */
RECAP_TEST(relaxed_capture_ends_from_another_thread) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.mode = RECAP_CAPTURE_MODE_RELAXED;
  OK(recap_graph_capture_begin(g, &opts, s));
  launch(s, 3);
  OK(in_another_thread(end_from_another_thread, g, s, RECAP_ERROR_INTERNAL));
  assert_int_equal(capturing(s), 0);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  size_t nodes;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 3);
  OK(recap_graph_replay(g, s));
  destroy_and_expect_quiet(g);
}

static void *reset_from_another_thread(void *arg) {
  foreign_end_t *f = arg;
  f->status = recap_graph_reset(f->graph);
  return NULL;
}

/* The same for a reset from another thread: CUDA will not end the capture there, so either the
 * reset refuses and the capture goes on under the graph, or it ends the capture. Either way the
 * stream and the graph must agree afterwards. */
RECAP_TEST(reset_from_another_thread_keeps_stream_and_graph_in_step) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, 0);
  launch(s, 1);
  if (in_another_thread(reset_from_another_thread, g, s, RECAP_SUCCESS) == RECAP_SUCCESS) {
    /* The reset claims the capture is abandoned: the stream must be free again. */
    if (capturing(s)) {
      /* Clean up first, so that the tests run after this one in the same process start from
       * a quiet fake. */
      recap__fake_capture_end(s);
      OK(recap_graph_destroy(g));
      fail_msg(
          "recap_graph_reset from another thread returned success, but the stream is "
          "still capturing and no recap graph owns the capture any more");
    }
  } else {
    /* Refused: the capture is still the graph's, and its thread ends it. */
    assert_int_equal(capturing(s), 1);
    OK(recap_graph_capture_end(g));
  }
  OK(recap_graph_destroy(g));
  assert_int_equal(capturing(s), 0);
  expect_quiet();
}

static void *scope_end_from_another_thread(void *arg) {
  foreign_end_t *f = arg;
  f->status = recap_capture_scope_end(f->graph);
  return NULL;
}

/* A scope end refused by CUDA (wrong thread) must leave the scope open, so that the thread
 * that opened it can still close it. */
RECAP_TEST(scope_end_from_another_thread_keeps_the_scope) {
  reset();
  recap_stream_t s;
  recap_graph_t g = graph_in_scope(&s);
  launch(s, 1);
  EXPECT_STATUS(in_another_thread(scope_end_from_another_thread, g, s, RECAP_SUCCESS),
                RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(capturing(s), 1);
  recap_status_t status = recap_capture_scope_end(g);
  if (status != RECAP_SUCCESS) {
    char message[512];
    snprintf(message, sizeof message, "%s", recap_last_error());
    /* Clean up first (see above): the capture is still the graph's. */
    OK(recap_graph_capture_end(g));
    OK(recap_graph_destroy(g));
    fail_msg("recap_capture_scope_end after a refused end from another thread: %s: %s",
             recap_status_name(status), message);
  }
  assert_int_equal(capturing(s), 0);
  OK(recap_graph_replay(g, s));
  destroy_and_expect_quiet(g);
}

/* ------------------------------------------------------------------------------------------
 * Inspection
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(inspect_reports_nodes_and_edges) {
  recap_stream_t s = fresh_stream(), side = recap__fake_stream_new();
  recap_graph_t plain, g;
  OK(recap_graph_create(&plain, 0));
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  recap_graph_info_t *info = (recap_graph_info_t *)&info;
  EXPECT_STATUS(recap_graph_inspect(g, &info), RECAP_ERROR_INVALID_USAGE); /* nothing yet */
  assert_null(info);
  capture_kernels(plain, s, 1);
  EXPECT_STATUS(recap_graph_inspect(plain, &info), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("RECAP_GRAPH_KEEP");

  /* first -> second -> third on s; side joins after second: second -> side_kernel. */
  OK(recap_graph_capture_begin(g, NULL, s));
  launch_fork_join(s, side, "second");
  OK(recap_graph_capture_end(g));

  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->node_count, 4);
  assert_int_equal(info->edge_count, 3);
  static const char *const names[] = {"first", "second", "third", "side_kernel"};
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(info->nodes[i].type, RECAP_NODE_KERNEL);
    assert_string_equal(info->nodes[i].kernel_name, names[i]);
    assert_int_equal(info->nodes[i].grid[0], 1);
    assert_int_equal(info->nodes[i].block[0], 1);
  }
  assert_int_equal(info->nodes[0].dependency_count, 0);
  assert_int_equal(info->nodes[1].dependency_count, 1);
  assert_int_equal(info->nodes[1].dependencies[0], 0);
  assert_int_equal(info->nodes[2].dependencies[0], 1);
  assert_int_equal(info->nodes[3].dependencies[0], 1);
  assert_int_equal(info->nodes[1].dependent_count, 2);
  assert_int_equal(info->nodes[3].dependent_count, 0);

  /* The JSON says the same, and cJSON reads it. */
  char *json = info_json(info);
  cJSON *root = cJSON_Parse(json);
  assert_non_null(root);
  cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  assert_true(cJSON_IsArray(nodes));
  assert_int_equal(cJSON_GetArraySize(nodes), 4);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(root, "edge_count")->valuedouble, 3);
  assert_true(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(root, "tools_ids_available")));
  for (int i = 0; i < 4; i++) {
    cJSON *n = cJSON_GetArrayItem(nodes, i);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(n, "index")->valuedouble, i);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(n, "type")->valuestring, "kernel");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(n, "kernel_name")->valuestring, names[i]);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(n, "grid")), 3);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(n, "annotation")));
    cJSON *deps = cJSON_GetObjectItemCaseSensitive(n, "dependencies");
    cJSON *dependents = cJSON_GetObjectItemCaseSensitive(n, "dependents");
    assert_int_equal((size_t)cJSON_GetArraySize(deps), info->nodes[i].dependency_count);
    assert_int_equal((size_t)cJSON_GetArraySize(dependents), info->nodes[i].dependent_count);
    for (size_t k = 0; k < info->nodes[i].dependency_count; k++)
      assert_int_equal(cJSON_GetArrayItem(deps, (int)k)->valuedouble,
                       info->nodes[i].dependencies[k]);
    /* Nodes of the graph itself: in no body, and no region of their own. */
    assert_int_equal(info->nodes[i].parent, SIZE_MAX);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(n, "parent")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(n, "branch")->valuedouble, 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(n, "region_kind")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(n, "branches")->valuedouble, 0);
  }
  cJSON_Delete(root);
  recap_string_free(json);
  recap_graph_info_free(info);

  DESTROY_GRAPHS(plain, g);
  expect_quiet();
}

/* The JSON of a graph with regions (regions_info.h): where each node sits, and what each
 * conditional node does. */
RECAP_TEST(json_of_regions) {
  recap_graph_info_t info = regions_info();
  char *json = NULL;
  OK(recap_graph_info_json(&info, &json));
  /* The exact text of a conditional node inside a body, and of a node in its else branch. */
  assert_non_null(strstr(json,
                         "{\"index\":5,\"type\":\"conditional\",\"kernel_name\":null,\"bytes\":0,"
                         "\"annotation\":\"solve\",\"annotation_path\":\"step/solve\","
                         "\"tools_id\":null,\"dependencies\":[4],\"dependents\":[6],\"parent\":1,"
                         "\"branch\":0,\"region_kind\":\"if_else\",\"branches\":2}"));
  assert_non_null(strstr(json,
                         "\"dependents\":[],\"parent\":5,\"branch\":1,"
                         "\"region_kind\":null,\"branches\":0}"));
  cJSON *root = cJSON_Parse(json);
  assert_non_null(root);
  cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  assert_int_equal(cJSON_GetArraySize(nodes), REGIONS_INFO_NODES);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(root, "edge_count")->valuedouble,
                   REGIONS_INFO_EDGES);
  static const struct {
    long parent; /* -1: null */
    unsigned branch;
    const char *kind; /* NULL: null */
    unsigned branches;
  } want[REGIONS_INFO_NODES] = {
      {-1, 0, NULL, 0}, {-1, 0, "while", 1},  {-1, 0, "switch", 3}, {-1, 0, NULL, 0},
      {1, 0, NULL, 0},  {1, 0, "if_else", 2}, {1, 0, NULL, 0},      {5, 0, NULL, 0},
      {5, 1, NULL, 0},  {2, 0, NULL, 0},      {2, 0, NULL, 0},      {2, 2, NULL, 0},
  };
  for (int i = 0; i < REGIONS_INFO_NODES; i++) {
    cJSON *n = cJSON_GetArrayItem(nodes, i);
    cJSON *parent = cJSON_GetObjectItemCaseSensitive(n, "parent");
    cJSON *kind = cJSON_GetObjectItemCaseSensitive(n, "region_kind");
    if (want[i].parent < 0)
      assert_true(cJSON_IsNull(parent));
    else
      assert_int_equal(parent->valuedouble, want[i].parent);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(n, "branch")->valuedouble, want[i].branch);
    if (want[i].kind)
      assert_string_equal(kind->valuestring, want[i].kind);
    else
      assert_true(cJSON_IsNull(kind));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(n, "branches")->valuedouble,
                     want[i].branches);
  }
  cJSON_Delete(root);
  recap_string_free(json);
}

RECAP_TEST(region_kind_names) {
  assert_string_equal(recap_region_kind_name(RECAP_REGION_WHILE), "while");
  assert_string_equal(recap_region_kind_name(RECAP_REGION_IF), "if");
  assert_string_equal(recap_region_kind_name(RECAP_REGION_IF_ELSE), "if_else");
  assert_string_equal(recap_region_kind_name(RECAP_REGION_SWITCH), "switch");
  assert_string_equal(recap_region_kind_name((recap_region_kind_t)4), "unknown");
  assert_string_equal(recap_region_kind_name((recap_region_kind_t)-1), "unknown");
}

/* Every node type has its own name, and a value out of range is "unknown", never NULL. */
RECAP_TEST(node_type_names) {
  assert_string_equal(recap_node_type_name(RECAP_NODE_KERNEL), "kernel");
  assert_string_equal(recap_node_type_name(RECAP_NODE_OTHER), "other");
  for (int i = 0; i < RECAP_NODE_TYPE_COUNT; i++)
    for (int j = 0; j < i; j++)
      assert_string_not_equal(recap_node_type_name((recap_node_type_t)i),
                              recap_node_type_name((recap_node_type_t)j));
  assert_string_equal(recap_node_type_name(RECAP_NODE_TYPE_COUNT), "unknown");
  assert_string_equal(recap_node_type_name((recap_node_type_t)-1), "unknown");
  assert_string_equal(recap_node_type_name((recap_node_type_t)1000), "unknown");
}

RECAP_TEST(inspect_of_an_empty_graph) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, RECAP_GRAPH_KEEP);
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, 0);
  assert_int_equal(info->edge_count, 0);
  char *json = info_json(info);
  cJSON *root = cJSON_Parse(json);
  assert_non_null(root);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "nodes")), 0);
  cJSON_Delete(root);
  recap_string_free(json);
  recap_graph_info_free(info);
  destroy_and_expect_quiet(g);
}

/* ------------------------------------------------------------------------------------------
 * Injected faults
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(failed_capture_begin_leaves_nothing) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_BEGIN, 1);
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, s), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaStreamBeginCapture");
  assert_int_equal(capturing(s), 0);
  recap_pool_id_t pool;
  EXPECT_STATUS(recap_graph_pool(g, &pool), RECAP_ERROR_INVALID_USAGE);
  expect_quiet();
  capture_kernels(g, s, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(failed_capture_end_leaves_nothing) {
  recap_stream_t s;
  recap_pool_id_t pool;
  void *p;
  recap_graph_t g = capture_with_a_block(&s, &pool, &p);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_END, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaStreamEndCapture");
  assert_int_equal(capturing(s), 0);
  assert_int_equal(pool_references(pool), 0);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  expect_quiet();
  OK(recap_free(p));
  expect_no_device_memory();
  capture_kernels(g, s, 2);
  OK(recap_graph_replay(g, s));
  destroy_and_expect_quiet(g);
}

RECAP_TEST(failed_instantiate_in_capture_end) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, 0);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  launch(s, 2);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaGraphInstantiate");
  /* Without KEEP there is no template to instantiate from again: the graph is fresh. */
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  assert_int_equal(capturing(s), 0);
  assert_int_equal(pool_references(pool), 0);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  expect_quiet();
  capture_kernels(g, s, 2);
  OK(recap_graph_replay(g, s));
  destroy_and_expect_quiet(g);
}

RECAP_TEST(failed_instantiate_of_a_kept_graph_can_be_retried) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, RECAP_GRAPH_KEEP);
  capture_kernels(g, s, 2);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_CUDA); /* the lazy instantiation failed */
  assert_int_equal(recap__fake_now().live_execs, 0);
  assert_int_equal(recap__fake_now().graph_launches, 0);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURED); /* the template stays */
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, 1);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
  EXPECT_STATUS(recap_graph_instantiate(g), RECAP_ERROR_CUDA);
  /* The old executable went before the new one failed: back to the template alone. */
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURED);
  OK(recap_graph_replay(g, s)); /* instantiates again */
  assert_int_equal(recap__fake_now().live_execs, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(failed_launch_can_be_retried) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  capture_kernels(g, s, 2);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 2);
  OK(recap_graph_replay(g, s));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaGraphLaunch");
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, 2);
  destroy_and_expect_quiet(g);
}

/* A small workload through the capture scope: an input from the default pool, an intermediate
 * and an output from the graph's pool, replays. Any step may fail; whatever fails is cleaned up
 * the way a careful user would (free what was allocated, destroy the graph). Returns the first
 * failure, or success. */
static bool step(recap_status_t s, recap_status_t *first) {
  if (s != RECAP_SUCCESS && *first == RECAP_SUCCESS) *first = s;
  return s == RECAP_SUCCESS;
}

static recap_status_t scope_workload(void) {
  recap_status_t first = RECAP_SUCCESS;
  recap_stream_t user = recap__fake_stream_new();
  recap_graph_t g = NULL;
  void *input = NULL, *tmp = NULL, *output = NULL;
  if (step(recap_graph_create(&g, RECAP_GRAPH_KEEP), &first) &&
      step(recap_malloc(&input, 8 * KiB, user), &first)) {
    recap_stream_t cs = NULL;
    if (step(recap_capture_scope_begin(g, NULL, &cs), &first)) {
      if (step(recap_malloc(&tmp, 3 * MiB, cs), &first)) recap__fake_launch_kernel(cs, "produce");
      if (step(recap_malloc(&output, 8 * KiB, cs), &first))
        recap__fake_launch_kernel(cs, "consume");
      if (tmp) step(recap_free(tmp), &first);
      if (step(recap_capture_scope_end(g), &first)) {
        for (int i = 0; i < 3; i++) step(recap_graph_replay(g, user), &first);
        step(recap_graph_instantiate(g), &first);
        step(recap_graph_replay(g, NULL), &first);
      }
    }
  }
  if (output) step(recap_free(output), &first);
  if (input) step(recap_free(input), &first);
  step(recap_graph_destroy(g), &first);
  step(recap_empty_cache(), &first);
  return first;
}

RECAP_TEST(faults_at_every_step_leave_everything_consistent) {
  static const recap__fake_fault_t kinds[] = {
      RECAP__FAKE_FAULT_RAW_MALLOC,    RECAP__FAKE_FAULT_EVENT_CREATE,
      RECAP__FAKE_FAULT_EVENT_RECORD,  RECAP__FAKE_FAULT_STREAM_CREATE,
      RECAP__FAKE_FAULT_CAPTURE_BEGIN, RECAP__FAKE_FAULT_CAPTURE_END,
      RECAP__FAKE_FAULT_INSTANTIATE,   RECAP__FAKE_FAULT_LAUNCH};
  /* The workload passes without faults. */
  reset();
  OK(scope_workload());
  expect_quiet();
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);

  int injected = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    for (uint64_t nth = 1;; nth++) {
      reset();
      recap__fake_fail_nth(kinds[k], nth);
      recap_status_t s = scope_workload();
      bool reached = recap__fake_now().calls[kinds[k]] >= nth;
      /* A failed raw allocation may be absorbed by the allocator's retry; a failed graph
       * call must reach the caller. */
      bool graph_call = kinds[k] >= RECAP__FAKE_FAULT_CAPTURE_BEGIN;
      if (reached) {
        injected++;
        if (graph_call && s == RECAP_SUCCESS)
          fail_msg("fault kind %d, call %llu: the workload reported success", (int)kinds[k],
                   (unsigned long long)nth);
      }
      recap__fake_fail_nth(kinds[k], 0);
      /* Whatever failed, nothing is left behind... */
      assert_int_equal(recap__registry_count(), 0);
      if (recap_memory_check() != RECAP_SUCCESS)
        fail_msg("fault kind %d, call %llu: checker: %s", (int)kinds[k], (unsigned long long)nth,
                 recap_last_error());
      assert_int_equal(recap__fake_now().live_graphs, 0);
      assert_int_equal(recap__fake_now().live_execs, 0);
      OK(recap_empty_cache());
      if (recap__fake_now().bytes_in_use[0] != 0)
        fail_msg("fault kind %d, call %llu: %zu bytes of device memory left", (int)kinds[k],
                 (unsigned long long)nth, recap__fake_now().bytes_in_use[0]);
      /* ...and the same workload then runs cleanly in the same process. */
      if (scope_workload() != RECAP_SUCCESS)
        fail_msg("fault kind %d, call %llu: the workload failed afterwards: %s", (int)kinds[k],
                 (unsigned long long)nth, recap_last_error());
      expect_quiet();
      if (!reached) break;
    }
  }
  assert_true(injected >= 6); /* each graph fault kind was reached at least once */
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(scope_uses_a_shared_side_stream),
    cmocka_unit_test(scope_captures_on_a_given_stream_and_pool),
    cmocka_unit_test(disabled_graphs_run_the_scope_eagerly),
    cmocka_unit_test(two_threads_capture_at_once),
    cmocka_unit_test(end_from_another_thread_keeps_the_capture),
    cmocka_unit_test(relaxed_capture_ends_from_another_thread),
    cmocka_unit_test(reset_from_another_thread_keeps_stream_and_graph_in_step),
    cmocka_unit_test(scope_end_from_another_thread_keeps_the_scope),
    cmocka_unit_test(inspect_reports_nodes_and_edges),
    cmocka_unit_test(inspect_of_an_empty_graph),
    cmocka_unit_test(node_type_names),
    cmocka_unit_test(json_of_regions),
    cmocka_unit_test(region_kind_names),
    cmocka_unit_test(failed_capture_begin_leaves_nothing),
    cmocka_unit_test(failed_capture_end_leaves_nothing),
    cmocka_unit_test(failed_instantiate_in_capture_end),
    cmocka_unit_test(failed_instantiate_of_a_kept_graph_can_be_retried),
    cmocka_unit_test(failed_launch_can_be_retried),
    cmocka_unit_test(faults_at_every_step_leave_everything_consistent),
};
RECAP_TEST_MAIN(tests)
