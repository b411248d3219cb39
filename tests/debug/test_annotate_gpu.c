/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_annotate_gpu.c — annotations on a real device: two streams joined by events, the labels
 * in the driver's DOT dump, and replays that compute what eager runs compute. PyTorch's
 * single-stream scenarios (test_cuda_graph_annotations.py) and the labels in the JSON are
 * conformance scenarios, run on the fake and here on the device (tests/conformance/annotate.c).
 *
 * cudaGraphGetNodes does not promise any order, so the tests tell kernels apart by their launch
 * shape: each kernel of a test is recap_test_fill_shaped with a grid of its own, and nodes are
 * found by grid.x. The labels reaching recap_graph_inspect at all checks the premise of the
 * implementation: the nodes of the graph being captured (cudaStreamGetCaptureInfo's graph_out)
 * are the template's nodes.
 */
#define _POSIX_C_SOURCE 200809L

#include <unistd.h>

#include <cjson/cJSON.h>

#include "gpu_util.h"
#include "inspect_util.h"

#define N ((size_t)1024)

static float *buffer;

static void begin(void) {
  gpu_begin();
  recap_annotations_enable(1);
}

static void finish(void) { recap_annotations_enable(-1); }

/* A kernel told apart by its grid: fill buffer with `grid` as the value. */
static void tagged(cudaStream_t s, unsigned grid) {
  CUDA_OK(recap_test_fill_shaped(buffer, N, (float)grid, grid, 32, s));
}

/* The kernel node launched with grid.x == grid. */
static const recap_graph_node_t *node_with_grid(const recap_graph_info_t *info, unsigned grid) {
  for (size_t i = 0; i < info->node_count; i++)
    if (info->nodes[i].type == RECAP_NODE_KERNEL && info->nodes[i].grid[0] == grid)
      return &info->nodes[i];
  fail_msg("no kernel node with grid %u among %zu nodes", grid, info->node_count);
  return NULL;
}

static void expect_label(const recap_graph_info_t *info, unsigned grid, const char *label,
                         const char *path) {
  const recap_graph_node_t *n = node_with_grid(info, grid);
  assert_non_null(n->kernel_name);
  assert_non_null(strstr(n->kernel_name, RECAP_TEST_FILL_KERNEL_NAME));
  if (!label) {
    if (n->annotation) fail_msg("kernel %u is labelled \"%s\", expected none", grid, n->annotation);
    assert_null(n->annotation_path);
    return;
  }
  if (!n->annotation || strcmp(n->annotation, label) != 0)
    fail_msg("kernel %u is labelled \"%s\", expected \"%s\"", grid,
             n->annotation ? n->annotation : "(none)", label);
  if (!n->annotation_path || strcmp(n->annotation_path, path) != 0)
    fail_msg("kernel %u has the path \"%s\", expected \"%s\"", grid,
             n->annotation_path ? n->annotation_path : "(none)", path);
}

/* Replay once and check that the last kernel (the one with grid `last`) wrote the buffer. */
static void replay_and_check(recap_graph_t g, cudaStream_t s, unsigned last) {
  gpu_set(buffer, N, -1.0f, s);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(buffer, N, (float)last);
}

static void setup_buffer(cudaStream_t s) { buffer = gpu_floats(N, s); }

static void teardown(recap_graph_t g, cudaStream_t s) {
  OK(recap_graph_destroy(g));
  OK(recap_free(buffer));
  gpu_finish_stream(s, NULL, 0);
  finish();
}

/* ------------------------------------------------------------------------------------------
 * PyTorch's scenarios
 * ---------------------------------------------------------------------------------------- */

/* A side stream forked from and joined back to the capture by events. */
RECAP_TEST(two_stream_capture) {
  begin();
  cudaStream_t s = gpu_stream(), side = gpu_stream();
  cudaEvent_t fork = gpu_event(), join = gpu_event();
  setup_buffer(s);
  float *other = gpu_floats(N, s);
  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_annotate_push("both", s));
  gpu_join(side, s, fork);
  tagged(s, 1);
  CUDA_OK(recap_test_fill_shaped(other, N, 7.0f, 7, 32, side));
  OK(recap_annotate_push("side", side));
  CUDA_OK(recap_test_fill_shaped(other, N, 8.0f, 8, 32, side));
  OK(recap_annotate_pop(side));
  gpu_join(s, side, join);
  OK(recap_annotate_pop(s));
  tagged(s, 2);
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = inspect(g);
  expect_label(info, 1, "both", "both");
  const recap_graph_node_t *n7 = node_with_grid(info, 7), *n8 = node_with_grid(info, 8);
  assert_string_equal(n7->annotation, "both");
  assert_string_equal(n8->annotation, "side");
  assert_string_equal(n8->annotation_path, "both/side");
  expect_label(info, 2, NULL, NULL);
  recap_graph_info_free(info);
  replay_and_check(g, s, 2);
  gpu_expect_all(other, N, 8.0f);
  OK(recap_free(other));
  GPU_DESTROY_EVENTS(fork, join);
  CUDA_OK(cudaStreamDestroy(side));
  teardown(g, s);
}

/* ------------------------------------------------------------------------------------------
 * Where labels show
 * ---------------------------------------------------------------------------------------- */

/* The driver's verbose dump shows each node's handle; the labelled node's statement gets the
 * label as attributes, and a comment block lists it. */
RECAP_TEST(labels_in_the_driver_dot_dump) {
  begin();
  cudaStream_t s = gpu_stream();
  setup_buffer(s);
  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  tagged(s, 1);
  OK(recap_annotate_push("dumped", s));
  tagged(s, 2);
  OK(recap_annotate_pop(s));
  OK(recap_graph_capture_end(g));
  char path[64];
  snprintf(path, sizeof path, "/tmp/recap_annotate_gpu_%ld.dot", (long)getpid());
  OK(recap_graph_debug_dump(g, path));
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  remove(path);
  EXPECT_CONTAINS(text, "digraph", "// recap annotation: node ");
  if (!strstr(text, "recap_annotation=\"dumped\""))
    fail_msg(
        "no node statement of the driver's dump was annotated (its format may show no "
        "node handles); the dump:\n%.4000s",
        text);
  /* One node is labelled, so exactly one statement is. */
  const char *first = strstr(text, "recap_annotation=");
  assert_null(strstr(first + 1, "recap_annotation="));
  teardown(g, s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(two_stream_capture),
    cmocka_unit_test(labels_in_the_driver_dot_dump),
};
RECAP_TEST_MAIN(tests)
