/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_inspect_tool.c — tools/recap-graph on real input: the JSON of a graph captured on the
 * CPU fake device (written by recap_graph_info_json), and hand-written files for what the fake
 * cannot make (mangled names, annotations, copies) and for broken input.
 *
 * The tool (tools/recap-graph, drawing with tools/view) is run as a separate process, as a user runs it; its path comes from the build
 * (RECAP_GRAPH_TOOL). Each test works in a temporary folder of its own.
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake/fake.h"
#include "harness.h"
#include "inspect_util.h"
#include "fork_join_util.h"
#include "recap.h"
#include "recap_view.h"
#include "regions_info.h"
#include "reset.h"

#ifndef RECAP_GRAPH_TOOL
#  error "RECAP_GRAPH_TOOL must name the recap-graph program (tests/CMakeLists.txt sets it)"
#endif

extern char **environ;

/* ------------------------------------------------------------------------------------------
 * Helpers: a scratch folder, files, and running the tool
 * ---------------------------------------------------------------------------------------- */

typedef struct scratch {
  char dir[64];
  char paths[16][128];
  int count;
} scratch_t;

static void scratch_open(scratch_t *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "/tmp/recap_inspect_tool_XXXXXX");
  assert_non_null(mkdtemp(s->dir));
}

/* A path in the scratch folder, removed by scratch_close. The same name gives the same path. */
static const char *scratch_path(scratch_t *s, const char *name) {
  char path[sizeof s->paths[0]];
  snprintf(path, sizeof path, "%s/%s", s->dir, name);
  for (int i = 0; i < s->count; i++)
    if (strcmp(s->paths[i], path) == 0) return s->paths[i];
  assert_true(s->count < 16);
  char *p = s->paths[s->count++];
  memcpy(p, path, sizeof path);
  return p;
}

static void scratch_close(scratch_t *s) {
  for (int i = 0; i < s->count; i++) unlink(s->paths[i]);
  rmdir(s->dir);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Occurrences of needle in text. */
static int count_of(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

#define ASSERT_CONTAINS(text, needle)                                                           \
  do {                                                                                          \
    if (!strstr((text), (needle)))                                                              \
      fail_msg("%s:%d: expected to find \"%s\" in:\n%s", __FILE__, __LINE__, (needle), (text)); \
  } while (0)

#define ASSERT_LACKS(text, needle)                                                            \
  do {                                                                                        \
    if (strstr((text), (needle)))                                                             \
      fail_msg("%s:%d: did not expect \"%s\" in:\n%s", __FILE__, __LINE__, (needle), (text)); \
  } while (0)

typedef struct run_result {
  int status; /* exit status, or -1 when the tool did not exit normally */
  char *out, *err;
} run_result_t;

static void run_result_free(run_result_t *r) {
  free(r->out);
  free(r->err);
}

/* Run recap-graph with up to five arguments (NULL ends the list); stdout and stderr go to
 * files in the scratch folder and come back in the result. */
static run_result_t run_tool5(scratch_t *s, const char *a1, const char *a2, const char *a3,
                              const char *a4, const char *a5) {
  const char *out_path = scratch_path(s, "tool.stdout");
  const char *err_path = scratch_path(s, "tool.stderr");
  posix_spawn_file_actions_t actions;
  assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char *argv[] = {
      (char *)RECAP_GRAPH_TOOL, (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, RECAP_GRAPH_TOOL, &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) fail_msg("cannot run %s: %s", RECAP_GRAPH_TOOL, strerror(rc));
  int wstatus = 0;
  assert_int_equal(waitpid(pid, &wstatus, 0), pid);
  run_result_t r = {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, recap_test_read_file(out_path),
                    recap_test_read_file(err_path)};
  return r;
}

static run_result_t run_tool(scratch_t *s, const char *a1, const char *a2, const char *a3) {
  return run_tool5(s, a1, a2, a3, NULL, NULL);
}

/* Run the tool on input and expect success; the output file's text is returned. */
static char *convert(scratch_t *s, const char *format, const char *input, const char *output) {
  run_result_t r = run_tool(s, format, input, output);
  if (r.status != 0)
    fail_msg("recap-graph %s %s %s exited with %d:\n%s", format, input, output, r.status, r.err);
  run_result_free(&r);
  return recap_test_read_file(output);
}

/* Run the tool on input that must be refused: exit status 1, a message naming the problem,
 * and no output file left behind. */
static void expect_refused(scratch_t *s, const char *json, const char *message) {
  const char *input = scratch_path(s, "bad.json");
  const char *output = scratch_path(s, "bad.out");
  write_file(input, json);
  static const char *const formats[] = {"dot", "html"};
  for (int f = 0; f < 2; f++) {
    run_result_t r = run_tool(s, formats[f], input, output);
    if (r.status != 1)
      fail_msg("recap-graph %s on %s: exit status %d, expected 1; stderr:\n%s", formats[f], json,
               r.status, r.err);
    ASSERT_CONTAINS(r.err, "recap-graph: ");
    ASSERT_CONTAINS(r.err, message);
    assert_false(file_exists(output));
    run_result_free(&r);
  }
}

/* ------------------------------------------------------------------------------------------
 * A graph captured on the fake, as JSON
 * ---------------------------------------------------------------------------------------- */

/* first -> second -> third on the capturing stream, side_kernel on a side stream joined after
 * second, and a child graph launched after third: 5 nodes, 4 edges. */
static void write_captured_graph(const char *path) {
  recap_test_reset(NULL);
  recap_stream_t s = recap__fake_stream_new(), side = recap__fake_stream_new();
  recap_graph_t child, g;
  OK(recap_graph_create(&child, RECAP_GRAPH_KEEP)); /* embedding copies the template */
  OK(recap_graph_capture_begin(child, NULL, s));
  recap__fake_launch_kernel(s, "child_kernel");
  OK(recap_graph_capture_end(child));

  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  launch_fork_join(s, side, "second");
  OK(recap_graph_replay(child, s));
  OK(recap_graph_capture_end(g));

  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, 5);
  assert_int_equal(info->edge_count, 4);
  char *json = info_json(info);
  write_file(path, json);
  recap_string_free(json);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));
  OK(recap_graph_destroy(child));
}

RECAP_TEST(dot_of_a_captured_graph) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "graph.json"), *dot = scratch_path(&s, "graph.dot");
  write_captured_graph(json);
  char *text = convert(&s, "dot", json, dot);
  ASSERT_CONTAINS(text, "digraph recap_graph {");
  /* One box per node, named by its kernel, coloured by type. */
  static const char *const names[] = {"first", "second", "third", "side_kernel"};
  for (int i = 0; i < 4; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "n%d [label=\"#%d kernel\\n%s", i, i, names[i]);
    ASSERT_CONTAINS(text, needle);
  }
  ASSERT_CONTAINS(text, "n4 [label=\"#4 graph\"");
  ASSERT_CONTAINS(text, "grid 1x1x1, block 1x1x1");
  ASSERT_CONTAINS(text, "fillcolor=");
  /* One edge per dependency, and no other. */
  ASSERT_CONTAINS(text, "n0 -> n1;");
  ASSERT_CONTAINS(text, "n1 -> n2;");
  ASSERT_CONTAINS(text, "n1 -> n3;");
  ASSERT_CONTAINS(text, "n2 -> n4;");
  assert_int_equal(count_of(text, " -> "), 4);
  /* No annotations on the fake: no clusters. */
  ASSERT_LACKS(text, "subgraph cluster_");
  assert_int_equal(text[strlen(text) - 2], '}');
  free(text);
  scratch_close(&s);
}

RECAP_TEST(html_of_a_captured_graph) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "graph.json"), *html = scratch_path(&s, "graph.html");
  write_captured_graph(json);
  char *text = convert(&s, "html", json, html);
  ASSERT_CONTAINS(text, "<!DOCTYPE html>");
  ASSERT_CONTAINS(text, "</html>");
  /* Self-contained: no resource from elsewhere. */
  ASSERT_LACKS(text, "http://");
  ASSERT_LACKS(text, "https://");
  ASSERT_LACKS(text, "<link");
  ASSERT_LACKS(text, " src=");
  ASSERT_LACKS(text, "@import");
  /* The style, the error hook, the drawing script and the data are inline. */
  ASSERT_CONTAINS(text, "<style>");
  ASSERT_CONTAINS(text, "window.onerror=");
  ASSERT_CONTAINS(text, "data-recap-rendered");
  ASSERT_CONTAINS(text, "<script id=\"graph-data\" type=\"application/json\">");
  /* The summary, the per-type counts, the drawing's place and its data. */
  ASSERT_CONTAINS(text, "<b>5</b> nodes, <b>4</b> edges, 4 layers, 0 annotation scopes");
  ASSERT_CONTAINS(text, "kernel</td><td class=\"num\">4</td>");
  ASSERT_CONTAINS(text, "graph</td><td class=\"num\">1</td>");
  ASSERT_CONTAINS(text, "<svg id=\"graph\"");
  assert_int_equal(count_of(text, "{\"i\":"), 5);
  assert_int_equal(count_of(text, "{\"from\":"), 4);
  ASSERT_CONTAINS(text, "{\"from\":0,\"to\":1,");
  ASSERT_CONTAINS(text, "{\"from\":1,\"to\":2,");
  ASSERT_CONTAINS(text, "{\"from\":1,\"to\":3,");
  ASSERT_CONTAINS(text, "{\"from\":2,\"to\":4,");
  ASSERT_CONTAINS(text, "\"type\":\"kernel\",\"name\":\"side_kernel\"");
  ASSERT_CONTAINS(text, "\"type\":\"graph\",\"name\":\"graph\"");
  /* Layers: first on top, second below it, third and side_kernel side by side in the third
   * layer, the child graph at the bottom. */
  ASSERT_CONTAINS(text, "\"name\":\"first\",\"detail\":\"grid 1x1x1 block 1x1x1\"");
  ASSERT_CONTAINS(text, "\"layer\":2,\"kernel\":\"third\"");
  ASSERT_CONTAINS(text, "\"layer\":2,\"kernel\":\"side_kernel\"");
  ASSERT_CONTAINS(text, "\"layer\":3,\"kernel\":null");
  free(text);
  scratch_close(&s);
}

/* A hand-written file with what the fake does not make: mangled names, copies, annotations
 * (with characters that need escaping), tools ids, and a node type the tool does not know. */
static const char sample_json[] =
    "{\"nodes\":["
    "{\"index\":0,\"type\":\"memset\",\"kernel_name\":null,\"bytes\":4096,"
    "\"annotation\":\"prepare <inputs> & \\\"zero\\\"\",\"tools_id\":17,\"dependencies\":[],"
    "\"dependents\":[1,2]},"
    "{\"index\":1,\"type\":\"kernel\",\"kernel_name\":\"_Z6vecAddPKfS0_Pfi\","
    "\"grid\":[128,1,1],\"block\":[256,1,1],\"shared_bytes\":2048,\"bytes\":0,"
    "\"annotation\":\"prepare <inputs> & \\\"zero\\\"\",\"tools_id\":18,\"dependencies\":[0],"
    "\"dependents\":[3]},"
    "{\"index\":2,\"type\":\"kernel\",\"kernel_name\":\"_ZN4blas4gemmEPKfS1_Pfiii\","
    "\"grid\":[8,8,1],\"block\":[16,16,1],\"shared_bytes\":0,\"bytes\":0,\"annotation\":null,"
    "\"tools_id\":19,\"dependencies\":[0],\"dependents\":[3]},"
    "{\"index\":3,\"type\":\"memcpy\",\"kernel_name\":null,\"bytes\":1048576,"
    "\"annotation\":\"output\",\"tools_id\":20,\"dependencies\":[1,2],\"dependents\":[4]},"
    "{\"index\":4,\"type\":\"mystery\",\"kernel_name\":null,\"bytes\":0,\"annotation\":null,"
    "\"tools_id\":null,\"dependencies\":[3],\"dependents\":[5]},"
    "{\"index\":5,\"type\":\"kernel\",\"kernel_name\":\"_Z6kernelIfEvPT_i\","
    "\"grid\":[1,1,1],\"block\":[32,1,1],\"shared_bytes\":0,\"bytes\":0,"
    "\"annotation\":\"inner\",\"annotation_path\":\"output/inner\",\"tools_id\":21,"
    "\"params\":[\"float* 0x7f0000001000\",\"int 7\"],\"graph_params\":[\"lr = 0.5\","
    "\"step = 12\"],\"set_alone\":\"argument 0 = 0x7f0000002000, shape\",\"dependencies\":[4],"
    "\"dependents\":[]}"
    "],\"edge_count\":6,\"tools_ids_available\":true}";

RECAP_TEST(names_annotations_and_copies_in_dot) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "sample.json"), *dot = scratch_path(&s, "sample.dot");
  write_file(json, sample_json);
  char *text = convert(&s, "dot", json, dot);
  /* Demangled by the C++ runtime, templates included; the raw name kept as the tooltip. */
  ASSERT_CONTAINS(text, "vecAdd(float const*, float const*, float*, int)");
  ASSERT_CONTAINS(text, "tooltip=\"_Z6vecAddPKfS0_Pfi\"");
  ASSERT_CONTAINS(text, "blas::gemm(float const*, float const*, float*, int, int, int)");
  ASSERT_CONTAINS(text, "n5 [label=\"#5 kernel\\nvoid kernel<float>(float*, int)");
  ASSERT_CONTAINS(text, "grid 128x1x1, block 256x1x1, smem 2.0 KiB");
  ASSERT_CONTAINS(text, "#3 memcpy\\n1.0 MiB");
  ASSERT_CONTAINS(text, "#0 memset\\n4.0 KiB");
  ASSERT_CONTAINS(text, "tools id 17");
  /* Graph parameters and what was set on the node alone, one line each, under the rest. */
  ASSERT_CONTAINS(text,
                  "[output/inner]\\ntools id 21\\nlr = 0.5\\nstep = 12\\nset alone: "
                  "argument 0 = 0x7f0000002000, shape\"");
  /* Annotation scopes become nested clusters, quotes escaped for DOT: "inner" sits inside
   * "output". */
  assert_int_equal(count_of(text, "subgraph cluster_"), 3);
  ASSERT_CONTAINS(text, "label=\"prepare <inputs> & \\\"zero\\\"\"");
  const char *output = strstr(text, "label=\"output\"");
  assert_non_null(output);
  const char *inner = strstr(output, "label=\"inner\"");
  assert_non_null(inner);
  assert_true(strstr(output, "n3 [label=") > inner); /* output's own node after the child */
  ASSERT_CONTAINS(text, "[output/inner]");
  /* An unknown node type is drawn all the same. */
  ASSERT_CONTAINS(text, "n4 [label=\"#4 mystery\"");
  assert_int_equal(count_of(text, " -> "), 6);
  ASSERT_CONTAINS(text, "n3 -> n4;");
  free(text);
  scratch_close(&s);
}

RECAP_TEST(names_annotations_and_copies_in_html) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "sample.json"), *html = scratch_path(&s, "sample.html");
  write_file(json, sample_json);
  char *text = convert(&s, "html", json, html);
  /* Text from the file is escaped: as JSON that cannot close its <script> element. */
  ASSERT_CONTAINS(text, "\"scope\":\"prepare \\u003cinputs\\u003e \\u0026 \\\"zero\\\"\"");
  ASSERT_LACKS(text, "<inputs>");
  ASSERT_CONTAINS(text,
                  "\"kernel\":\"_Z6vecAddPKfS0_Pfi\","
                  "\"pretty\":\"vecAdd(float const*, float const*, float*, int)\"");
  ASSERT_CONTAINS(text, "\"name\":\"vecAdd\",\"detail\":\"grid 128x1x1 block 256x1x1\"");
  ASSERT_CONTAINS(text, "\"name\":\"blas::gemm\"");
  ASSERT_CONTAINS(text, "\"name\":\"kernel\\u003cfloat\\u003e\"");
  ASSERT_CONTAINS(text, "\"pretty\":\"void kernel\\u003cfloat\\u003e(float*, int)\"");
  ASSERT_CONTAINS(text, "\"params\":[\"float* 0x7f0000001000\",\"int 7\"]");
  ASSERT_CONTAINS(text,
                  "\"graph_params\":[\"lr = 0.5\",\"step = 12\"],"
                  "\"set_alone\":\"argument 0 = 0x7f0000002000, shape\"");
  ASSERT_CONTAINS(text, "\"name\":\"memcpy\",\"detail\":\"1.0 MiB\"");
  ASSERT_CONTAINS(text, "\"bytes\":1048576");
  ASSERT_CONTAINS(text, "\"tools_id\":\"17\"");
  ASSERT_CONTAINS(text, "tools ids available");
  ASSERT_CONTAINS(text, "3 annotation scopes");
  ASSERT_CONTAINS(text, "{\"path\":\"output/inner\",\"label\":\"inner\",\"depth\":2,");
  ASSERT_CONTAINS(text, "mystery</td><td class=\"num\">1</td>");
  ASSERT_CONTAINS(text, "<tr data-type=\"memcpy\">");
  assert_int_equal(count_of(text, "{\"from\":"), 6);
  assert_int_equal(count_of(text, "{\"i\":"), 6);
  /* The title is the input's path unless --title gives one. */
  ASSERT_CONTAINS(text, "sample.json</span></h1>");
  free(text);
  run_result_t r = run_tool5(&s, "--title", "step <1>", "html", json, html);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  text = recap_test_read_file(html);
  ASSERT_CONTAINS(text, "<title>recap graph: step &lt;1&gt;</title>");
  free(text);
  scratch_close(&s);
}

/* ------------------------------------------------------------------------------------------
 * Regions: conditional nodes and their bodies (regions_info.h)
 * ---------------------------------------------------------------------------------------- */

static void write_regions_json(const char *path) {
  recap_graph_info_t info = regions_info();
  char *json;
  OK(recap_graph_info_json(&info, &json));
  write_file(path, json);
  recap_string_free(json);
}

RECAP_TEST(regions_in_dot) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "regions.json"), *dot = scratch_path(&s, "regions.dot");
  write_regions_json(json);
  char *text = convert(&s, "dot", json, dot);
  /* The counts include the bodies. */
  ASSERT_CONTAINS(text, "\n// 12 nodes (8 of them in the bodies of 3 conditional nodes), 6 edges.");
  ASSERT_CONTAINS(text, "  compound=true;\n");
  /* Clusters: the two annotation scopes and one per body (the empty case 1 included). */
  assert_int_equal(count_of(text, "subgraph cluster_"), 8);
  assert_int_equal(count_of(text, "style=\"dashed,rounded,filled\";"), 6);
  /* The WHILE body inside "step" (where its node is), "solve" inside the body, and the if and
   * else of node 5 inside "solve" (where node 5 is). */
  const char *step = strstr(text, "  subgraph cluster_0 {\n    label=\"step\";\n");
  const char *body = strstr(text,
                            "    subgraph cluster_1 {\n"
                            "      label=\"while body\";\n"
                            "      style=\"dashed,rounded,filled\";\n"
                            "      fillcolor=\"#f4f1fa\";\n"
                            "      color=\"#6a51a3\";\n"
                            "      fontname=\"Helvetica\";\n"
                            "      subgraph cluster_5 {\n"
                            "        label=\"solve\";\n");
  const char *then = strstr(text, "        subgraph cluster_6 {\n          label=\"if\";\n");
  const char *otherwise = strstr(text, "        subgraph cluster_7 {\n          label=\"else\";\n");
  assert_non_null(step);
  assert_non_null(body);
  assert_non_null(then);
  assert_non_null(otherwise);
  assert_true(step < body && body < then && then < otherwise);
  ASSERT_CONTAINS(text,
                  "          n7 [label=\"#7 kernel\\nthen_kernel\\ngrid 1x1x1, block 1x1x1\", "
                  "fillcolor=\"#9ecae1\", tooltip=\"then_kernel\"];\n        }\n");
  ASSERT_CONTAINS(text,
                  "          n8 [label=\"#8 memcpy\\n4.0 KiB\", fillcolor=\"#fdae6b\"];\n"
                  "        }\n");
  ASSERT_CONTAINS(text, "      n6 [label=\"#6 kernel\\ncondition\\n");
  /* The SWITCH's cases, in order; the empty one holds a mark to point at. */
  ASSERT_CONTAINS(text, "    subgraph cluster_2 {\n      label=\"case 0\";\n");
  ASSERT_CONTAINS(
      text,
      "    subgraph cluster_3 {\n"
      "      label=\"case 1\";\n"
      "      style=\"dashed,rounded,filled\";\n"
      "      fillcolor=\"#f4f1fa\";\n"
      "      color=\"#6a51a3\";\n"
      "      fontname=\"Helvetica\";\n"
      "      empty_3 [label=\"empty\", shape=plain, style=\"\", fontcolor=\"#6a51a3\"];\n"
      "    }\n"
      "    subgraph cluster_4 {\n"
      "      label=\"case 2\";\n");
  /* Conditional nodes stand out, with their kind and branches. */
  ASSERT_CONTAINS(text,
                  "    n1 [label=\"#1 conditional\\nwhile, 1 branch\\n[step]\", "
                  "fillcolor=\"#dadaeb\", shape=hexagon, style=\"filled,bold\", "
                  "color=\"#6a51a3\"];\n");
  ASSERT_CONTAINS(text, "    n2 [label=\"#2 conditional\\nswitch, 3 branches\\n[step]\"");
  ASSERT_CONTAINS(text,
                  "        n5 [label=\"#5 conditional\\nif_else, 2 branches\\n[step/solve]\"");
  ASSERT_CONTAINS(text, "  n3 [label=\"#3 kernel\\nepilogue\\n"); /* outside every cluster */
  /* The dependencies, and a dashed edge from each conditional node to each of its bodies. */
  assert_int_equal(count_of(text, " -> "), 12);
  ASSERT_CONTAINS(text,
                  "  n0 -> n1;\n  n1 -> n2;\n  n2 -> n3;\n  n4 -> n5;\n  n5 -> n6;\n  n9 -> n10;\n"
                  "  n1 -> n4 [style=dashed, color=\"#6a51a3\", lhead=cluster_1];\n"
                  "  n2 -> n9 [style=dashed, color=\"#6a51a3\", lhead=cluster_2];\n"
                  "  n2 -> empty_3 [style=dashed, color=\"#6a51a3\", lhead=cluster_3];\n"
                  "  n2 -> n11 [style=dashed, color=\"#6a51a3\", lhead=cluster_4];\n"
                  "  n5 -> n7 [style=dashed, color=\"#6a51a3\", lhead=cluster_6];\n"
                  "  n5 -> n8 [style=dashed, color=\"#6a51a3\", lhead=cluster_7];\n");
  /* The legend counts the bodies' nodes too. */
  ASSERT_CONTAINS(text, "<td bgcolor=\"#9ecae1\">kernel</td><td>7</td>");
  ASSERT_CONTAINS(text, "<td bgcolor=\"#dadaeb\">conditional</td><td>3</td>");
  free(text);
  scratch_close(&s);
}

RECAP_TEST(regions_in_html) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "regions.json"), *html = scratch_path(&s, "regions.html");
  write_regions_json(json);
  char *text = convert(&s, "html", json, html);
  ASSERT_CONTAINS(text,
                  "<b>12</b> nodes, <b>6</b> edges, 10 layers, 2 annotation scopes, <b>3</b> "
                  "regions holding 8 nodes; tools ids not available");
  ASSERT_CONTAINS(text, "kernel</td><td class=\"num\">7</td>");
  ASSERT_CONTAINS(text, "conditional</td><td class=\"num\">3</td>");
  /* The regions table: each conditional node, its bodies, the nodes they hold (nested ones
   * included) and where it lies itself. */
  ASSERT_CONTAINS(text, "<h2>Regions</h2>\n<table id=\"regions\">\n");
  ASSERT_CONTAINS(text,
                  "<tr data-node=\"1\"><td>#1</td><td>while</td><td class=\"num\">1</td>"
                  "<td class=\"num\">5</td><td>graph</td></tr>\n"
                  "<tr data-node=\"2\"><td>#2</td><td>switch</td><td class=\"num\">3</td>"
                  "<td class=\"num\">3</td><td>graph</td></tr>\n"
                  "<tr data-node=\"5\"><td>#5</td><td>if_else</td><td class=\"num\">2</td>"
                  "<td class=\"num\">2</td><td><a href=\"#node-1\" data-node=\"1\">while body of "
                  "#1</a></td></tr>\n</table>\n");
  /* The frames, nested, with their labels and the node whose body each is. */
  assert_int_equal(count_of(text, "{\"path\":"), 8);
  ASSERT_CONTAINS(text,
                  "{\"path\":\"step/while body\",\"label\":\"while body\",\"depth\":2,"
                  "\"nodes\":5,\"parent\":0,\"node\":1,\"branch\":0,");
  ASSERT_CONTAINS(text,
                  "{\"path\":\"step/while body/solve\",\"label\":\"solve\",\"depth\":3,"
                  "\"nodes\":4,\"parent\":1,\"node\":null,");
  ASSERT_CONTAINS(text,
                  "{\"path\":\"step/while body/solve/else\",\"label\":\"else\",\"depth\":4,"
                  "\"nodes\":1,\"parent\":5,\"node\":5,\"branch\":1,");
  ASSERT_CONTAINS(text,
                  "{\"path\":\"step/case 1\",\"label\":\"case 1\",\"depth\":2,\"nodes\":0,"
                  "\"parent\":0,\"node\":2,\"branch\":1,");
  /* Every node is drawn, with where it sits; the script draws frames and links from these. */
  assert_int_equal(count_of(text, "{\"i\":"), 12);
  ASSERT_CONTAINS(text,
                  "{\"i\":1,\"type\":\"conditional\",\"name\":\"while\",\"detail\":\"1 branch\"");
  ASSERT_CONTAINS(text, "\"parent\":null,\"branch\":0,\"region\":\"while\",\"branches\":1,");
  ASSERT_CONTAINS(text, "\"parent\":5,\"branch\":1,\"region\":null,\"branches\":0,\"cluster\":7,");
  ASSERT_CONTAINS(text, "\"parent\":2,\"branch\":2,\"region\":null,\"branches\":0,\"cluster\":4,");
  ASSERT_CONTAINS(text, "'region-link'");
  ASSERT_CONTAINS(text, "'cluster body'");
  /* Still one self-contained page. */
  ASSERT_LACKS(text, "http://");
  ASSERT_LACKS(text, "https://");
  ASSERT_LACKS(text, " src=");
  free(text);
  scratch_close(&s);
}

/* The JSON carries everything: the tool's page from the file is the page a program writes
 * straight from the info (recap_view_from_info), byte for byte. */
RECAP_TEST(regions_json_round_trip) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "regions.json");
  const char *from_file = scratch_path(&s, "file.html"), *direct = scratch_path(&s, "direct.html");
  const char *dot_file = scratch_path(&s, "file.dot"), *dot_direct = scratch_path(&s, "direct.dot");
  write_regions_json(json);
  run_result_t r = run_tool5(&s, "--title", "regions", "html", json, from_file);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  r = run_tool5(&s, "--title", "regions", "dot", json, dot_file);
  assert_int_equal(r.status, 0);
  run_result_free(&r);

  recap_graph_info_t info = regions_info();
  recap_view_graph_t view;
  char err[256] = "";
  if (recap_view_from_info(&view, &info, err, sizeof err) != 0) fail_msg("%s", err);
  assert_int_equal(view.count, 12);
  assert_int_equal(view.nodes[8].parent, 5);
  assert_int_equal(view.nodes[8].branch, 1);
  assert_string_equal(view.nodes[2].region_kind, "switch");
  assert_int_equal(view.nodes[2].branches, 3);
  assert_null(view.nodes[3].region_kind);
  assert_int_equal(view.nodes[3].parent, SIZE_MAX);
  assert_int_equal(recap_view_save_html(&view, direct, "regions", err, sizeof err), 0);
  assert_int_equal(recap_view_save_dot(&view, dot_direct, "regions", err, sizeof err), 0);
  recap_view_graph_free(&view);

  char *a = recap_test_read_file(from_file), *b = recap_test_read_file(direct);
  assert_string_equal(a, b);
  free(a);
  free(b);
  a = recap_test_read_file(dot_file);
  b = recap_test_read_file(dot_direct);
  assert_string_equal(a, b);
  free(a);
  free(b);
  scratch_close(&s);
}

/* A file whose regions do not nest is refused, naming the node and the field. */
RECAP_TEST(bad_regions_are_refused) {
  scratch_t s;
  scratch_open(&s);
#define COND(i, deps, kind, branches)                                                            \
  "{\"index\":" #i ",\"type\":\"conditional\",\"dependencies\":" deps ",\"region_kind\":\"" kind \
  "\",\"branches\":" #branches ",\"parent\":null,\"branch\":0}"
#define KERNEL_IN(i, deps, parent, branch)                                              \
  "{\"index\":" #i ",\"type\":\"kernel\",\"dependencies\":" deps ",\"parent\":" #parent \
  ",\"branch\":" #branch ",\"region_kind\":null,\"branches\":0}"
  /* A good file, to show the pieces are right. */
  const char *good = scratch_path(&s, "good.json"), *out = scratch_path(&s, "good.dot");
  write_file(good, "{\"nodes\":[" COND(0, "[]", "if_else", 2) "," KERNEL_IN(1, "[]", 0, 1) "]}");
  char *text = convert(&s, "dot", good, out);
  ASSERT_CONTAINS(text, "label=\"else\"");
  free(text);

  expect_refused(&s, "{\"nodes\":[" KERNEL_IN(0, "[]", 1, 0) "," COND(1, "[]", "while", 1) "]}",
                 "node 0: \"parent\" is 1, but a body's nodes follow their conditional node (the "
                 "parent's index must be smaller)");
  expect_refused(&s, "{\"nodes\":[" KERNEL_IN(0, "[]", null, 0) "," KERNEL_IN(1, "[]", 0, 0) "]}",
                 "node 1: \"parent\" is node 0, a kernel node; only a conditional node has bodies");
  expect_refused(&s, "{\"nodes\":[" COND(0, "[]", "while", 1) "," KERNEL_IN(1, "[]", 0, 1) "]}",
                 "node 1: \"branch\" is 1, but its parent, node 0, has 1 branch");
  expect_refused(&s, "{\"nodes\":[" COND(0, "[]", "switch", 3) "," KERNEL_IN(1, "[]", 0, 3) "]}",
                 "node 1: \"branch\" is 3, but its parent, node 0, has 3 branches");
  expect_refused(&s, "{\"nodes\":[" KERNEL_IN(0, "[]", null, 2) "]}",
                 "node 0: \"branch\" is 2 but the node is in no body (its \"parent\" is null)");
  expect_refused(&s, "{\"nodes\":[" KERNEL_IN(0, "[]", 5, 0) "]}",
                 "node 0: \"parent\" is 5, but a body's nodes follow their conditional node");
  /* A dependency across bodies, and one out of a body. */
  expect_refused(&s,
                 "{\"nodes\":[" COND(0, "[]", "if_else",
                                     2) "," KERNEL_IN(1, "[]", 0, 0) "," KERNEL_IN(2, "[1]", 0,
                                                                                   1) "]}",
                 "node 2 (in body 1 of node 0) waits for node 1 (in body 0 of node 0); a "
                 "dependency joins nodes of the same body");
  expect_refused(&s,
                 "{\"nodes\":[" COND(0, "[]", "while",
                                     1) "," KERNEL_IN(1, "[]", 0, 0) "," KERNEL_IN(2, "[1]", null,
                                                                                   0) "]}",
                 "node 2 (in the graph itself) waits for node 1 (in body 0 of node 0)");
  /* Fields of the wrong type. */
  expect_refused(
      &s, "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"dependencies\":[],\"parent\":\"x\"}]}",
      "node 0: \"parent\" must be null or the index of the conditional node whose body "
      "holds it");
  expect_refused(
      &s, "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"dependencies\":[],\"branch\":-1}]}",
      "node 0: \"branch\" must be a non-negative integer");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"conditional\",\"dependencies\":[],"
                 "\"branches\":4294967296}]}",
                 "node 0: \"branches\" must be an integer from 0 to 4294967295");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"conditional\",\"dependencies\":[],"
                 "\"region_kind\":7}]}",
                 "node 0: \"region_kind\" must be null or a region's kind");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"dependencies\":[],"
                 "\"region_kind\":\"while\",\"branches\":1}]}",
                 "node 0: a kernel node with a \"region_kind\" or \"branches\"; only conditional "
                 "nodes have them");
#undef COND
#undef KERNEL_IN
  scratch_close(&s);
}

RECAP_TEST(standard_input_and_output) {
  scratch_t s;
  scratch_open(&s);
  const char *json = scratch_path(&s, "sample.json");
  write_file(json, sample_json);
  run_result_t r = run_tool(&s, "dot", json, "-");
  assert_int_equal(r.status, 0);
  ASSERT_CONTAINS(r.out, "digraph recap_graph {");
  assert_int_equal(count_of(r.out, " -> "), 6);
  run_result_free(&r);
  scratch_close(&s);
}

/* ------------------------------------------------------------------------------------------
 * Refusals
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(broken_input_is_refused) {
  scratch_t s;
  scratch_open(&s);
  expect_refused(&s, "{\"nodes\":[{\"index\":0,\n\"type\":}]}",
                 "not valid JSON (parse error at line 2");
  expect_refused(&s, "", "not valid JSON");
  expect_refused(&s, "[]", "the top level must be an object");
  expect_refused(&s, "{\"edge_count\":0}", "the field \"nodes\" is missing");
  expect_refused(&s, "{\"nodes\":{}}", "\"nodes\" must be an array");
  expect_refused(&s, "{\"nodes\":[{\"type\":\"kernel\",\"dependencies\":[]}]}",
                 "node 0: the field \"index\" is missing");
  expect_refused(&s, "{\"nodes\":[{\"index\":0,\"dependencies\":[]}]}",
                 "node 0: the field \"type\" is missing");
  expect_refused(&s, "{\"nodes\":[{\"index\":0,\"type\":\"kernel\"}]}",
                 "node 0: the field \"dependencies\" is missing");
  expect_refused(&s, "{\"nodes\":[{\"index\":1,\"type\":\"kernel\",\"dependencies\":[]}]}",
                 "\"index\" must be 0");
  expect_refused(&s, "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"dependencies\":[4]}]}",
                 "\"dependencies\"[0] is 4, but the graph has 1 node");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"grid\":[1,2],\"block\":[1,1,1],"
                 "\"dependencies\":[]}]}",
                 "\"grid\" must be an array of three integers");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"bytes\":-3,"
                 "\"dependencies\":[]}]}",
                 "\"bytes\" must be a non-negative integer");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"kernel_name\":5,"
                 "\"dependencies\":[]}]}",
                 "\"kernel_name\" must be a string or null");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"graph_params\":[\"lr = 1\",2],"
                 "\"dependencies\":[]}]}",
                 "node 0: \"graph_params\"[1] must be a string");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"set_alone\":[],"
                 "\"dependencies\":[]}]}",
                 "node 0: \"set_alone\" must be a string or null");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"dependencies\":[1]},"
                 "{\"index\":1,\"type\":\"kernel\",\"dependencies\":[0]}]}",
                 "cycle");
  expect_refused(&s,
                 "{\"nodes\":[{\"index\":0,\"type\":\"kernel\",\"dependencies\":[],"
                 "\"dependents\":[1]},{\"index\":1,\"type\":\"kernel\",\"dependencies\":[]}]}",
                 "node 0 lists node 1 among its \"dependents\"");
  scratch_close(&s);
}

RECAP_TEST(unreadable_and_unwritable_files_are_refused) {
  scratch_t s;
  scratch_open(&s);
  const char *missing = scratch_path(&s, "missing.json");
  run_result_t r = run_tool(&s, "dot", missing, scratch_path(&s, "out.dot"));
  assert_int_equal(r.status, 1);
  ASSERT_CONTAINS(r.err, "missing.json: cannot open");
  run_result_free(&r);

  r = run_tool(&s, "html", s.dir, scratch_path(&s, "out.html")); /* a folder */
  assert_int_equal(r.status, 1);
  ASSERT_CONTAINS(r.err, "cannot read");
  run_result_free(&r);

  const char *json = scratch_path(&s, "sample.json");
  write_file(json, sample_json);
  r = run_tool(&s, "dot", json, "/nonexistent-dir/recap/graph.dot");
  assert_int_equal(r.status, 1);
  ASSERT_CONTAINS(r.err, "cannot open for writing");
  run_result_free(&r);
  struct stat st; /* a device that refuses writes, left in place */
  if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
    r = run_tool(&s, "html", json, "/dev/full");
    assert_int_equal(r.status, 1);
    ASSERT_CONTAINS(r.err, "cannot write");
    run_result_free(&r);
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
  }
  scratch_close(&s);
}

RECAP_TEST(command_line) {
  scratch_t s;
  scratch_open(&s);
  run_result_t r = run_tool(&s, "--help", NULL, NULL);
  assert_int_equal(r.status, 0);
  ASSERT_CONTAINS(r.out, "usage: recap-graph [--title TEXT] dot  INPUT.json OUTPUT.dot");
  ASSERT_CONTAINS(r.out, "-t, --title TEXT");
  run_result_free(&r);

  r = run_tool(&s, "--bogus", "dot", "in.json");
  assert_int_equal(r.status, 2);
  ASSERT_CONTAINS(r.err, "unrecognized option '--bogus'");
  ASSERT_CONTAINS(r.err, "usage:");
  run_result_free(&r);

  r = run_tool(&s, NULL, NULL, NULL);
  assert_int_equal(r.status, 2);
  ASSERT_CONTAINS(r.err, "usage:");
  run_result_free(&r);

  r = run_tool(&s, "svg", "in.json", "out.svg");
  assert_int_equal(r.status, 2);
  ASSERT_CONTAINS(r.err, "unknown format 'svg'");
  run_result_free(&r);

  r = run_tool(&s, "dot", "in.json", NULL);
  assert_int_equal(r.status, 2);
  run_result_free(&r);
  scratch_close(&s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(dot_of_a_captured_graph),
    cmocka_unit_test(html_of_a_captured_graph),
    cmocka_unit_test(names_annotations_and_copies_in_dot),
    cmocka_unit_test(names_annotations_and_copies_in_html),
    cmocka_unit_test(regions_in_dot),
    cmocka_unit_test(regions_in_html),
    cmocka_unit_test(regions_json_round_trip),
    cmocka_unit_test(bad_regions_are_refused),
    cmocka_unit_test(standard_input_and_output),
    cmocka_unit_test(broken_input_is_refused),
    cmocka_unit_test(unreadable_and_unwritable_files_are_refused),
    cmocka_unit_test(command_line),
};
RECAP_TEST_MAIN(tests)
