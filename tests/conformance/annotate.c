/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * annotate.c — annotation scopes on both backends (backend.h), the analogues of PyTorch's
 * test_cuda_graph_annotations.py: a no-op outside a capture and when disabled, one scope,
 * disjoint scopes, only in-scope kernels, nested scopes where the inner label wins, an empty
 * scope; then the labels in the graph's JSON. Each capture is a script of kernels and scopes;
 * its kernels are told apart by a tag (CUDA gives no order of nodes), and a replay must compute
 * what the last kernel writes.
 */
#include <cjson/cJSON.h>

#include "backend.h"
#include "graph/graph_internal.h"
#include "inspect_util.h"

#define N ((size_t)1024)

/* A step of a capture: a kernel of that tag, a push of a label, or a pop; {0} ends a script. */
typedef struct step {
  char op; /* 'k', '(' or ')' */
  unsigned tag;
  const char *label;
} step_t;
#define KERNEL(tag) \
  { 'k', (tag), NULL }
#define PUSH(label) \
  { '(', 0, (label) }
#define POP \
  { ')', 0, NULL }

/* What the kernel of a tag carries: its label and path (NULL: none); {0} ends a list. */
typedef struct labelled {
  unsigned tag;
  const char *label, *path;
} labelled_t;

static void run_script(const step_t *steps, float *buffer, recap_stream_t s) {
  for (const step_t *st = steps; st->op; st++) {
    if (st->op == 'k') backend_tagged(buffer, N, st->tag, s);
    if (st->op == '(') OK(recap_annotate_push(st->label, s));
    if (st->op == ')') OK(recap_annotate_pop(s));
  }
}

static const recap_graph_node_t *node_with_tag(const recap_graph_info_t *info, unsigned tag) {
  for (size_t i = 0; i < info->node_count; i++)
    if (info->nodes[i].type == RECAP_NODE_KERNEL && backend_node_tag(&info->nodes[i]) == tag)
      return &info->nodes[i];
  fail_msg("no kernel node with tag %u among %zu nodes", tag, info->node_count);
  return NULL;
}

static void expect_label(const recap_graph_info_t *info, const labelled_t *want) {
  const recap_graph_node_t *n = node_with_tag(info, want->tag);
  assert_non_null(n->kernel_name);
  assert_non_null(strstr(n->kernel_name, BACKEND_FILL_KERNEL));
  if (!want->label) {
    if (n->annotation || n->annotation_path)
      fail_msg("kernel %u is labelled \"%s\", expected none", want->tag,
               n->annotation ? n->annotation : "(path only)");
    return;
  }
  if (!n->annotation || strcmp(n->annotation, want->label) != 0)
    fail_msg("kernel %u is labelled \"%s\", expected \"%s\"", want->tag,
             n->annotation ? n->annotation : "(none)", want->label);
  if (!n->annotation_path || strcmp(n->annotation_path, want->path) != 0)
    fail_msg("kernel %u has the path \"%s\", expected \"%s\"", want->tag,
             n->annotation_path ? n->annotation_path : "(none)", want->path);
}

/* The JSON of the graph's nodes (recap_graph_info_json) as the test reads it back. */
typedef void (*json_check_t)(const cJSON *nodes);

/* Capture the script into a kept graph on s (annotations as `enabled` says: 1 on, 0 off), check
 * each kernel's label, that the graph has `nodes` nodes and (when json is set) its JSON, replay,
 * and check that the buffer holds the tag of the last kernel. */
static void capture_and_check_json(int enabled, const step_t *steps, const labelled_t *want,
                                   size_t nodes, json_check_t json) {
  backend_begin();
  recap_annotations_enable(enabled);
  recap_stream_t s = backend_stream();
  float *buffer = backend_floats(N, s);
  recap_graph_t g = kept_graph();
  OK(recap_graph_capture_begin(g, NULL, s));
  run_script(steps, buffer, s);
  OK(recap_graph_capture_end(g));
  /* Disabled, no state was attached to the graph at all. */
  if (!enabled) assert_int_equal(g->hooks.count, 0);
  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, nodes);
  for (const labelled_t *w = want; w->tag; w++) expect_label(info, w);
  if (json) {
    char *text = NULL;
    OK(recap_graph_info_json(info, &text));
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    json(cJSON_GetObjectItemCaseSensitive(root, "nodes"));
    cJSON_Delete(root);
    recap_string_free(text);
  }
  recap_graph_info_free(info);
  unsigned last = 0;
  for (const step_t *st = steps; st->op; st++)
    if (st->op == 'k') last = st->tag;
  backend_fill(buffer, N, -1.0f, s);
  OK(recap_graph_replay(g, s));
  backend_expect_all(buffer, N, (float)last);
  backend_finish_graph(g, s, (void *[]){buffer}, 1);
  recap_annotations_enable(-1);
}

static void capture_and_check(int enabled, const step_t *steps, const labelled_t *want,
                              size_t nodes) {
  capture_and_check_json(enabled, steps, want, nodes, NULL);
}

/* Outside a capture push and pop succeed and record nothing; a pop with no push too, and the
 * legacy stream's. A graph captured afterwards carries no label from the eager scope. */
RECAP_TEST(noop_outside_capture) {
  backend_begin();
  recap_annotations_enable(1);
  recap_stream_t s = backend_stream();
  float *buffer = backend_floats(N, s);
  static const step_t eager[] = {PUSH("eager"), KERNEL(3), POP, POP, {0}};
  run_script(eager, buffer, s);
  OK(recap_annotate_push("legacy stream", NULL));
  OK(recap_annotate_pop(NULL));
  backend_expect_all(buffer, N, 3.0f);
  OK(recap_free(buffer));
  backend_stream_destroy(s);
  backend_finish(NULL, 0);
  static const step_t steps[] = {KERNEL(5), {0}};
  static const labelled_t want[] = {{5, NULL, NULL}, {0}};
  capture_and_check(1, steps, want, 1);
}

/* Disabled, scopes inside a capture record nothing, and unbalanced pops are not errors; the
 * argument checks still run, so a bad label shows without a capture. */
RECAP_TEST(noop_when_disabled) {
  static const step_t steps[] = {PUSH("off"), KERNEL(2), POP, POP, {0}};
  static const labelled_t want[] = {{2, NULL, NULL}, {0}};
  capture_and_check(0, steps, want, 1);
  recap_annotations_enable(0);
  assert_int_equal(recap_annotations_enabled(), 0);
  EXPECT_STATUS(recap_annotate_push(NULL, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap_annotations_enable(-1);
}

RECAP_TEST(one_scope_labels_all_its_kernels) {
  static const step_t steps[] = {PUSH("forward"), KERNEL(1), KERNEL(2), KERNEL(3), POP, {0}};
  static const labelled_t want[] = {{1, "forward", "forward"},
                                    {2, "forward", "forward"},
                                    {3, "forward", "forward"},
                                    {0}};
  capture_and_check(1, steps, want, 3);
}

RECAP_TEST(disjoint_scopes) {
  static const step_t steps[] = {PUSH("first"),  KERNEL(1), KERNEL(2), POP,
                                 PUSH("second"), KERNEL(3), POP,       {0}};
  static const labelled_t want[] = {{1, "first", "first"},
                                    {2, "first", "first"},
                                    {3, "second", "second"},
                                    {0}};
  capture_and_check(1, steps, want, 3);
}

RECAP_TEST(only_in_scope_kernels_are_labelled) {
  static const step_t steps[] = {KERNEL(1), PUSH("inside"), KERNEL(2), POP, KERNEL(3), {0}};
  static const labelled_t want[] = {{1, NULL, NULL}, {2, "inside", "inside"}, {3, NULL, NULL}, {0}};
  capture_and_check(1, steps, want, 3);
}

RECAP_TEST(nested_scopes_inner_wins) {
  static const step_t steps[] = {PUSH("outer"), KERNEL(1), PUSH("inner"), KERNEL(2),
                                 POP,           KERNEL(3), POP,           {0}};
  static const labelled_t want[] = {{1, "outer", "outer"},
                                    {2, "inner", "outer/inner"},
                                    {3, "outer", "outer"},
                                    {0}};
  capture_and_check(1, steps, want, 3);
}

RECAP_TEST(empty_scope_labels_nothing) {
  static const step_t steps[] = {KERNEL(1), PUSH("empty"), POP, KERNEL(2), {0}};
  static const labelled_t want[] = {{1, NULL, NULL}, {2, NULL, NULL}, {0}};
  capture_and_check(1, steps, want, 2);
}

/* The labelled node carries its label and path (quotes escaped), the other null for both, and
 * neither a tools id made up (CUDA 13.0 gives none). */
static void expect_json_labels(const cJSON *nodes) {
  assert_int_equal(cJSON_GetArraySize(nodes), 2);
  int labelled = 0;
  for (int i = 0; i < 2; i++) {
    const cJSON *node = cJSON_GetArrayItem(nodes, i);
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(node, "annotation");
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(node, "annotation_path");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(node, "tools_id")));
    if (cJSON_IsNull(label)) {
      assert_true(cJSON_IsNull(path));
      continue;
    }
    labelled++;
    assert_string_equal(label->valuestring, "inner");
    assert_string_equal(path->valuestring, "outer \"quoted\"/inner");
  }
  assert_int_equal(labelled, 1);
}

RECAP_TEST(labels_in_json) {
  static const step_t steps[] = {
      PUSH("outer \"quoted\""), PUSH("inner"), KERNEL(4), POP, POP, KERNEL(5), {0}};
  static const labelled_t want[] = {{4, "inner", "outer \"quoted\"/inner"}, {5, NULL, NULL}, {0}};
  capture_and_check_json(1, steps, want, 2, expect_json_labels);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(noop_outside_capture),
    cmocka_unit_test(noop_when_disabled),
    cmocka_unit_test(one_scope_labels_all_its_kernels),
    cmocka_unit_test(disjoint_scopes),
    cmocka_unit_test(only_in_scope_kernels_are_labelled),
    cmocka_unit_test(nested_scopes_inner_wins),
    cmocka_unit_test(empty_scope_labels_nothing),
    cmocka_unit_test(labels_in_json),
};
const recap_test_part_t conformance_annotate_tests = RECAP_TEST_PART(tests);
