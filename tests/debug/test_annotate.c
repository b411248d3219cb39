/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_annotate.c — annotations on the CPU fake device: a side stream joined to the capture, the
 * errors of push and pop, scopes left open, the DOT dump, the switch and its environment
 * variable, and captures in two threads at once. PyTorch's single-stream scenarios
 * (test_cuda_graph_annotations.py) and the labels in the JSON are conformance scenarios, run on
 * the fake and on a device (tests/conformance/annotate.c).
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "debug_util.h"
#include "inspect_util.h"
#include "capture_util.h"

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

static recap_test_log_t logged;

static void fresh(void) {
  debug_fresh();
  recap_annotations_enable(1);
  recap_test_log_capture(&logged);
  recap_log_level_set(RECAP_LOG_LEVEL_WARN);
}

static void done(void) {
  recap_annotations_enable(-1);
  debug_done();
}

/* fresh, and a new stream on the fresh fake. */
static recap_stream_t fresh_stream(void) {
  fresh();
  return recap__fake_stream_new();
}

static void kernel(recap_stream_t s, const char *name) { recap__fake_launch_kernel(s, name); }

/* Node i of info is the kernel `name` with the label (NULL: none) and path. */
static void expect_node(const recap_graph_info_t *info, size_t i, const char *name,
                        const char *label, const char *path) {
  if (i >= info->node_count) fail_msg("no node %zu (the graph has %zu)", i, info->node_count);
  const recap_graph_node_t *n = &info->nodes[i];
  if (name && (!n->kernel_name || strcmp(n->kernel_name, name) != 0))
    fail_msg("node %zu is \"%s\", expected kernel \"%s\"", i,
             n->kernel_name ? n->kernel_name : "(none)", name);
  if (!label) {
    if (n->annotation || n->annotation_path)
      fail_msg("node %zu (%s) is labelled \"%s\" (path \"%s\"), expected no label", i,
               n->kernel_name, n->annotation ? n->annotation : "(null)",
               n->annotation_path ? n->annotation_path : "(null)");
    return;
  }
  if (!n->annotation || strcmp(n->annotation, label) != 0)
    fail_msg("node %zu (%s) is labelled \"%s\", expected \"%s\"", i, n->kernel_name,
             n->annotation ? n->annotation : "(none)", label);
  if (!n->annotation_path || strcmp(n->annotation_path, path) != 0)
    fail_msg("node %zu (%s) has the path \"%s\", expected \"%s\"", i, n->kernel_name,
             n->annotation_path ? n->annotation_path : "(none)", path);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot read %s", path);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return text;
}

/* ------------------------------------------------------------------------------------------
 * PyTorch's scenarios
 * ---------------------------------------------------------------------------------------- */

/* A side stream joined to the capture: its nodes get the labels of the capture's scopes. */
RECAP_TEST(two_stream_capture) {
  recap_stream_t s = fresh_stream(), side = recap__fake_stream_new();
  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  kernel(s, "main0");
  OK(recap_annotate_push("fork", s));
  assert_true(recap__fake_capture_join(side, s));
  kernel(side, "side0");
  kernel(s, "main1");
  OK(recap_annotate_push("side only", side));
  kernel(side, "side1");
  OK(recap_annotate_pop(side));
  OK(recap_annotate_pop(s));
  kernel(side, "side2");
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = inspect(g);
  expect_node(info, 0, "main0", NULL, NULL);
  expect_node(info, 1, "side0", "fork", "fork");
  expect_node(info, 2, "main1", "fork", "fork");
  expect_node(info, 3, "side1", "side only", "fork/side only");
  expect_node(info, 4, "side2", NULL, NULL);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));
  done();
}

/* ------------------------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(push_and_pop_errors) {
  recap_stream_t s = fresh_stream(), other = recap__fake_stream_new();
  char long_label[RECAP_ANNOTATION_MAX_LENGTH + 2];
  memset(long_label, 'x', sizeof long_label);
  long_label[RECAP_ANNOTATION_MAX_LENGTH + 1] = '\0';

  /* Arguments are checked with and without a capture. */
  EXPECT_STATUS(recap_annotate_push(NULL, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("label is NULL");
  EXPECT_STATUS(recap_annotate_push("", s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("empty");
  EXPECT_STATUS(recap_annotate_push(long_label, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_ANNOTATION_MAX_LENGTH");

  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  /* A pop before any push. */
  EXPECT_STATUS(recap_annotate_pop(s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("no annotation scope is open");
  EXPECT_STATUS(recap_annotate_push(long_label, s), RECAP_ERROR_INVALID_ARGUMENT);
  /* The longest label allowed works. */
  long_label[RECAP_ANNOTATION_MAX_LENGTH] = '\0';
  OK(recap_annotate_push(long_label, s));
  kernel(s, "long");
  OK(recap_annotate_pop(s));
  /* Every push popped: one more pop is refused. */
  EXPECT_STATUS(recap_annotate_pop(s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("every push was popped");

  /* A pop on another stream of the capture than the push's is refused and pops nothing. */
  assert_true(recap__fake_capture_join(other, s));
  OK(recap_annotate_push("outer", s));
  kernel(s, "in outer");
  EXPECT_STATUS(recap_annotate_pop(other), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("was pushed on stream");
  EXPECT_MESSAGE("\"outer\"");
  kernel(other, "still in outer");
  OK(recap_annotate_pop(s));

  /* Nesting stops at RECAP_ANNOTATION_MAX_DEPTH. */
  for (int i = 0; i < RECAP_ANNOTATION_MAX_DEPTH; i++) {
    char label[16];
    snprintf(label, sizeof label, "d%d", i);
    OK(recap_annotate_push(label, s));
  }
  EXPECT_STATUS(recap_annotate_push("one too many", s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("RECAP_ANNOTATION_MAX_DEPTH");
  kernel(s, "deep");
  for (int i = 0; i < RECAP_ANNOTATION_MAX_DEPTH; i++) OK(recap_annotate_pop(s));
  OK(recap_graph_capture_end(g));

  recap_graph_info_t *info = inspect(g);
  expect_node(info, 0, "long", long_label, long_label);
  expect_node(info, 1, "in outer", "outer", "outer");
  expect_node(info, 2, "still in outer", "outer", "outer");
  assert_string_equal(info->nodes[3].annotation, "d63");
  EXPECT_CONTAINS(info->nodes[3].annotation_path, "d0/d1/d2/", "/d62/d63");
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));
  assert_int_equal(logged.warnings, 0);
  done();
}

/* Scopes left open are closed at capture end with a warning; the nodes captured after the
 * last push get their labels. */
RECAP_TEST(scopes_left_open_close_at_capture_end) {
  recap_stream_t s = fresh_stream();
  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_annotate_push("outer", s));
  kernel(s, "a");
  OK(recap_annotate_push("inner", s));
  kernel(s, "b");
  OK(recap_graph_capture_end(g));
  assert_int_equal(logged.warnings, 1);
  EXPECT_CONTAINS(logged.last_warning, "2 scopes were still open", "outer/inner");
  recap_graph_info_t *info = inspect(g);
  expect_node(info, 0, "a", "outer", "outer");
  expect_node(info, 1, "b", "inner", "outer/inner");
  recap_graph_info_free(info);
  /* After the capture a pop is outside any capture: a no-op. */
  OK(recap_annotate_pop(s));
  OK(recap_graph_destroy(g));
  done();
}

/* A capture that is invalidated, reset or destroyed mid-way leaves nothing behind (the
 * sanitizer build checks the memory), and the graph captures again without old labels. */
RECAP_TEST(state_is_released_with_the_capture) {
  recap_stream_t s = fresh_stream();
  recap_graph_t g = kept_graph();

  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_annotate_push("doomed", s));
  kernel(s, "a");
  recap__fake_capture_invalidate(s);
  OK(recap_annotate_pop(s)); /* the capture is invalidated: nothing to do */
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(g->hooks.count, 0);

  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_annotate_push("abandoned", s));
  kernel(s, "b");
  OK(recap_graph_reset(g));

  OK(recap_graph_capture_begin(g, NULL, s));
  kernel(s, "c");
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, 1);
  expect_node(info, 0, "c", NULL, NULL);
  recap_graph_info_free(info);

  /* A graph without KEEP has nothing to inspect, but annotating it is fine. */
  recap_graph_t plain = graph_capturing(s, NULL);
  OK(recap_annotate_push("plain", s));
  kernel(s, "d");
  OK(recap_annotate_pop(s));
  OK(recap_graph_capture_end(plain));
  OK(recap_graph_replay(plain, s));

  /* Destroyed in the middle of a capture, with a scope open. */
  recap_graph_t mid = kept_graph();
  OK(recap_graph_capture_begin(mid, NULL, s));
  OK(recap_annotate_push("mid", s));
  kernel(s, "e");
  OK(recap_graph_destroy(mid));

  DESTROY_GRAPHS(plain, g);
  done();
}

/* ------------------------------------------------------------------------------------------
 * Where labels show: JSON, DOT, the switch
 * ---------------------------------------------------------------------------------------- */

/* The DOT dump: the node statements that show a labelled node's handle get attributes, and a
 * comment block lists every label; an unlabelled graph's dump is left as the driver wrote it. */
RECAP_TEST(labels_in_the_dot_dump) {
  recap_stream_t s = fresh_stream();
  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  kernel(s, "plain");
  OK(recap_annotate_push("out\"er", s));
  OK(recap_annotate_push("in\\ner", s));
  kernel(s, "labelled");
  OK(recap_annotate_pop(s));
  OK(recap_annotate_pop(s));
  OK(recap_graph_capture_end(g));
  char path[64];
  snprintf(path, sizeof path, "/tmp/recap_annotate_%ld.dot", (long)getpid());
  OK(recap_graph_debug_dump(g, path));
  const char *dot = read_text(path);
  assert_true(strncmp(dot, "digraph fake {", 14) == 0);
  /* The driver's text is kept... */
  EXPECT_CONTAINS(dot, "n0 [label=\"0: kernel plain\"];", "n1 [label=\"1: kernel labelled\"];",
                  "n0 -> n1;");
  /* ...node 1's handle statement gets the label, escaped; node 0's gets nothing. */
  assert_non_null(strstr(dot,
                         "n1 [recap_annotation=\"out\\\"er/in\\\\ner\" tooltip=\"out\\\"er/"
                         "in\\\\ner\" xlabel=\"in\\\\ner\" comment=\"node handle | 0x"));
  assert_null(strstr(dot, "n0 [recap_annotation"));
  EXPECT_CONTAINS(dot, "// recap annotation: node 1, handle 0x", ": out\"er/in\\ner\n}");
  /* The file still ends with the graph's closing brace. */
  size_t len = strlen(dot);
  assert_true(len >= 2 && strcmp(dot + len - 2, "}\n") == 0);
  remove(path);

  /* Without labels the dump is the driver's, byte for byte. */
  recap_graph_t bare = kept_graph();
  OK(recap_graph_capture_begin(bare, NULL, s));
  kernel(s, "x");
  OK(recap_graph_capture_end(bare));
  OK(recap_graph_debug_dump(bare, path));
  dot = read_text(path);
  assert_null(strstr(dot, "recap"));
  remove(path);
  DESTROY_GRAPHS(bare, g);
  done();
}

/* The driver's own format: quoted ids, record labels over several lines with escaped angle
 * brackets and braces, the handle among other hexadecimal numbers, a cluster per graph. */
RECAP_TEST(labels_in_a_driver_style_dot_dump) {
  fresh();
  recap__fake_dot_driver_style(true);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  kernel(s, "_Z5firstPf");
  OK(recap_annotate_push("layer", s));
  kernel(s, "_Z6secondPf");
  kernel(s, "_Z5thirdPf");
  OK(recap_annotate_pop(s));
  OK(recap_graph_capture_end(g));
  char path[64];
  snprintf(path, sizeof path, "/tmp/recap_annotate_drv_%ld.dot", (long)getpid());
  OK(recap_graph_debug_dump(g, path));
  const char *dot = read_text(path);
  remove(path);
  assert_non_null(strstr(dot, "\"graph_1_node_0\"[style=\"bold\""));
  assert_non_null(strstr(dot,
                         "\"graph_1_node_1\"[recap_annotation=\"layer\" tooltip=\"layer\" "
                         "xlabel=\"layer\" style=\"bold\" shape=\"record\" label=\"{KERNEL\n"
                         "| {ID | 1 (topoId: 2) | _Z6secondPf\\<\\<\\<1,1,0\\>\\>\\>}"));
  assert_non_null(strstr(dot, "\"graph_1_node_2\"[recap_annotation=\"layer\""));
  /* Two statements annotated, the comment block inside the outer graph, edges untouched. */
  const char *first = strstr(dot, "recap_annotation=");
  const char *second = strstr(first + 1, "recap_annotation=");
  assert_non_null(second);
  assert_null(strstr(second + 1, "recap_annotation="));
  EXPECT_CONTAINS(dot, "\"graph_1_node_0\" -> \"graph_1_node_1\" [headlabel=0];",
                  "}\n// recap annotations", "// recap annotation: node 2, handle 0x");
  size_t len = strlen(dot);
  assert_true(len >= 3 && strcmp(dot + len - 3, "\n}\n") == 0);
  OK(recap_graph_destroy(g));
  done();
}

/* Code overrides RECAP_ANNOTATIONS; -1 follows it again. */
RECAP_TEST(switch_and_environment) {
  fresh();
  recap_annotations_enable(-1);
  setenv("RECAP_ANNOTATIONS", "1", 1);
  recap_annotations_enable(-1); /* read again */
  assert_int_equal(recap_annotations_enabled(), 1);
  recap_annotations_enable(0);
  assert_int_equal(recap_annotations_enabled(), 0);
  setenv("RECAP_ANNOTATIONS", "0", 1);
  recap_annotations_enable(-1);
  assert_int_equal(recap_annotations_enabled(), 0);
  recap_annotations_enable(1);
  assert_int_equal(recap_annotations_enabled(), 1);
  setenv("RECAP_ANNOTATIONS", "yes please", 1);
  recap_annotations_enable(-1);
  assert_int_equal(recap_annotations_enabled(), 0);
  assert_int_equal(logged.warnings, 1);
  assert_non_null(strstr(logged.last_warning, "RECAP_ANNOTATIONS"));
  unsetenv("RECAP_ANNOTATIONS");
  recap_annotations_enable(-1);
  assert_int_equal(recap_annotations_enabled(), 0); /* off by default */
  done();
}

/* ------------------------------------------------------------------------------------------
 * Two captures at once, in two threads
 * ---------------------------------------------------------------------------------------- */

typedef struct worker {
  const char *label;
  recap_graph_t graph;
  recap_stream_t stream;
  pthread_barrier_t *barrier;
  recap_status_t status;
} worker_t;

static void *annotate_in_thread(void *arg) {
  worker_t *w = arg;
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  w->status = recap_graph_capture_begin(w->graph, &o, w->stream);
  pthread_barrier_wait(w->barrier); /* both captures are under way */
  for (int i = 0; i < 50 && w->status == RECAP_SUCCESS; i++) {
    w->status = recap_annotate_push(w->label, w->stream);
    kernel(w->stream, w->label);
    if (w->status == RECAP_SUCCESS) w->status = recap_annotate_pop(w->stream);
  }
  pthread_barrier_wait(w->barrier);
  recap_status_t end = recap_graph_capture_end(w->graph);
  if (w->status == RECAP_SUCCESS) w->status = end;
  return NULL;
}

RECAP_TEST(two_threads_capture_at_once) {
  fresh();
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, 2);
  worker_t w[2] = {{"left", NULL, NULL, &barrier, RECAP_SUCCESS},
                   {"right", NULL, NULL, &barrier, RECAP_SUCCESS}};
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) {
    w[i].graph = kept_graph();
    w[i].stream = recap__fake_stream_new();
    assert_int_equal(pthread_create(&threads[i], NULL, annotate_in_thread, &w[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);
  for (int i = 0; i < 2; i++) {
    if (w[i].status != RECAP_SUCCESS) fail_msg("thread %d: %s", i, recap_status_name(w[i].status));
    recap_graph_info_t *info = inspect(w[i].graph);
    assert_int_equal(info->node_count, 50);
    for (size_t k = 0; k < info->node_count; k++)
      expect_node(info, k, w[i].label, w[i].label, w[i].label);
    recap_graph_info_free(info);
    OK(recap_graph_destroy(w[i].graph));
  }
  done();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(two_stream_capture),
    cmocka_unit_test(push_and_pop_errors),
    cmocka_unit_test(scopes_left_open_close_at_capture_end),
    cmocka_unit_test(state_is_released_with_the_capture),
    cmocka_unit_test(labels_in_the_dot_dump),
    cmocka_unit_test(labels_in_a_driver_style_dot_dump),
    cmocka_unit_test(switch_and_environment),
    cmocka_unit_test(two_threads_capture_at_once),
};
RECAP_TEST_MAIN(tests)
