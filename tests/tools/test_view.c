/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_view.c — the graph viewer library (tools/view): the demangler, the layered layout's
 * promises (no needless crossings, branches side by side, every edge downward, each annotation
 * scope one contiguous block that no other node enters), the DOT and HTML writers, and the model
 * filled from recap_graph_inspect on the CPU fake device.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fake/fake.h"
#include "reset.h"
#include "harness.h"
#include "inspect_util.h"
#include "fork_join_util.h"
#include "recap_view.h"
#include "regions_info.h"
#include "view_fixture.h"

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

/* A node of type kernel named name, in scope path (or none), waiting for the listed nodes
 * (-1 ends the list). */
static size_t add(recap_view_graph_t *g, const char *name, const char *scope, ...) {
  recap_view_node_t *n = recap_view_add_node(g, "kernel");
  assert_non_null(n);
  assert_int_equal(recap_view_set_string(&n->kernel_name, name), 0);
  assert_int_equal(recap_view_set_string(&n->annotation_path, scope), 0);
  size_t index = g->count - 1;
  va_list ap;
  va_start(ap, scope);
  for (int dep; (dep = va_arg(ap, int)) >= 0;)
    assert_int_equal(recap_view_add_dependency(g, index, (size_t)dep), 0);
  va_end(ap);
  return index;
}

static void finish_and_lay_out(recap_view_graph_t *g) {
  char err[256] = "";
  if (recap_view_finish(g, err, sizeof err) != 0) fail_msg("finish: %s", err);
  if (recap_view_layout(g, err, sizeof err) != 0) fail_msg("layout: %s", err);
  assert_true(g->laid_out);
}

static double centre_x(const recap_view_node_t *n) { return n->x + n->w / 2; }

/* Crossings between edges that join adjacent layers, counted from the drawn positions. */
static size_t drawn_crossings(const recap_view_graph_t *g) {
  size_t crossings = 0;
  for (size_t a = 0; a < g->edge_count; a++)
    for (size_t b = a + 1; b < g->edge_count; b++) {
      const recap_view_edge_t *e = &g->edges[a], *f = &g->edges[b];
      const recap_view_point_t *e0 = &e->points[0], *e1 = &e->points[e->point_count - 1];
      const recap_view_point_t *f0 = &f->points[0], *f1 = &f->points[f->point_count - 1];
      if (e->point_count != 2 || f->point_count != 2 || e0->y != f0->y || e1->y != f1->y) continue;
      if ((e0->x - f0->x) * (e1->x - f1->x) < 0) crossings++;
    }
  return crossings;
}

/* 1 when node n lies in the scope path (its own scope or one nested in it). */
static int in_scope(const recap_view_node_t *n, const char *path) {
  const char *scope = n->annotation_path ? n->annotation_path : n->annotation;
  size_t len = strlen(path);
  return scope && strncmp(scope, path, len) == 0 && (scope[len] == '\0' || scope[len] == '/');
}

/* 1 when node i lies in body `branch` of conditional node p, or in a body nested in it. */
static int in_body(const recap_view_graph_t *g, size_t i, size_t p, unsigned branch) {
  for (size_t k = i; g->nodes[k].parent != SIZE_MAX; k = g->nodes[k].parent)
    if (g->nodes[k].parent == p) return g->nodes[k].branch == branch;
  return 0;
}

/* 1 when cluster c or one of its ancestors is a body. */
static int under_a_body(const recap_view_graph_t *g, long c) {
  for (; c >= 0; c = g->clusters[c].parent)
    if (g->clusters[c].node != SIZE_MAX) return 1;
  return 0;
}

/* 1 when node i lies in cluster c: by the graph itself (the annotation path for a scope outside
 * any body, the parents for a body), and by the layout's own record (the cluster chain). */
static int in_cluster(const recap_view_graph_t *g, size_t i, size_t c) {
  int chained = 0;
  for (long k = g->nodes[i].cluster; k >= 0; k = g->clusters[k].parent) chained |= k == (long)c;
  const recap_view_cluster_t *cl = &g->clusters[c];
  if (cl->node != SIZE_MAX) assert_int_equal(chained, in_body(g, i, cl->node, cl->branch));
  if (!under_a_body(g, (long)c) && g->nodes[i].parent == SIZE_MAX)
    assert_int_equal(chained, in_scope(&g->nodes[i], cl->path));
  return chained;
}

/* Boxes of one layer never overlap; every edge goes down; every scope's rectangle holds its
 * nodes and no other node; within each layer a scope's nodes are contiguous. */
static void check_layout(const recap_view_graph_t *g) {
  for (size_t i = 0; i < g->count; i++) {
    const recap_view_node_t *a = &g->nodes[i];
    assert_true(a->x >= 0 && a->y >= 0 && a->x + a->w <= g->width && a->y + a->h <= g->height);
    for (size_t j = i + 1; j < g->count; j++) {
      const recap_view_node_t *b = &g->nodes[j];
      if (a->layer != b->layer) continue;
      assert_true(a->y == b->y);
      if (!(a->x + a->w <= b->x || b->x + b->w <= a->x))
        fail_msg("nodes %zu and %zu overlap in layer %zu", i, j, a->layer);
    }
  }
  for (size_t e = 0; e < g->edge_count; e++) {
    const recap_view_edge_t *edge = &g->edges[e];
    const recap_view_node_t *from = &g->nodes[edge->from], *to = &g->nodes[edge->to];
    assert_true(to->layer > from->layer);
    assert_true(to->y > from->y + from->h);
    assert_true(edge->point_count >= 2);
    assert_true(edge->points[0].y == from->y + from->h);
    assert_true(edge->points[edge->point_count - 1].y == to->y);
    for (size_t p = 1; p < edge->point_count; p++)
      assert_true(edge->points[p].y >= edge->points[p - 1].y);
  }
  for (size_t c = 0; c < g->cluster_count; c++) {
    const recap_view_cluster_t *cl = &g->clusters[c];
    size_t inside = 0;
    for (size_t i = 0; i < g->count; i++) {
      const recap_view_node_t *n = &g->nodes[i];
      int mine = in_cluster(g, i, c);
      int within = n->x >= cl->x && n->x + n->w <= cl->x + cl->w && n->y >= cl->y &&
                   n->y + n->h <= cl->y + cl->h;
      int touches = !(n->x + n->w <= cl->x || cl->x + cl->w <= n->x || n->y + n->h <= cl->y ||
                      cl->y + cl->h <= n->y);
      if (mine && !within) fail_msg("node %zu lies outside its scope %s", i, cl->path);
      if (!mine && touches) fail_msg("node %zu enters the scope %s", i, cl->path);
      inside += (size_t)mine;
    }
    assert_int_equal(inside, cl->node_count);
    /* Contiguous in each layer: no node of another scope between two of this one. */
    for (size_t i = 0; i < g->count; i++)
      for (size_t j = 0; j < g->count; j++) {
        const recap_view_node_t *a = &g->nodes[i], *b = &g->nodes[j];
        if (a->layer != b->layer || !in_cluster(g, i, c) || !in_cluster(g, j, c)) continue;
        for (size_t k = 0; k < g->count; k++) {
          const recap_view_node_t *m = &g->nodes[k];
          if (m->layer == a->layer && !in_cluster(g, k, c) && m->x > a->x && m->x < b->x)
            fail_msg("node %zu sits between nodes %zu and %zu of scope %s", k, i, j, cl->path);
        }
      }
  }
}

/* ------------------------------------------------------------------------------------------
 * Names
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(demangles_templates_and_library_kernels) {
  static const struct {
    const char *mangled, *readable, *box;
  } cases[] = {
      {"_Z6kernelIfEvPT_i", "void kernel<float>(float*, int)", "kernel<float>"},
      {"_Z6vecAddPKfS0_Pfi", "vecAdd(float const*, float const*, float*, int)", "vecAdd"},
      {"_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE",
       "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<float> >"
       "(cutlass::gemm::kernel::Gemm<float>::Params)",
       "Kernel<cutlass::gemm::kernel::Gem\xE2\x80\xA6"},
      {"_ZN3cub18DeviceReduceKernelIfLi256EEEvPKT_PS1_i",
       "void cub::DeviceReduceKernel<float, 256>(float const*, float*, int)",
       "DeviceReduceKernel<float, 256>"},
      {"_ZN12_GLOBAL__N_15scaleEPfi", "(anonymous namespace)::scale(float*, int)",
       "(anonymous namespace)::scale"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *name = recap_view_demangle(cases[i].mangled);
    assert_non_null(name);
    assert_string_equal(name, cases[i].readable);
    char *box = recap_view_short_name(name, 34);
    assert_non_null(box);
    assert_string_equal(box, cases[i].box);
    free(box);
    free(name);
  }
  /* C names and broken names are not demangled; the caller shows them as they are. */
  assert_null(recap_view_demangle("sm90_xmma_gemm_f32f32_kernel"));
  assert_null(recap_view_demangle("_Z"));
  assert_null(recap_view_demangle("_Z6kernelI"));
  assert_null(recap_view_demangle(NULL));
  /* A name too long for a box loses qualifiers first, then is cut. */
  char *box = recap_view_short_name("void a::b::c::kernel(int)", 10);
  assert_string_equal(box, "c::kernel");
  free(box);
  box = recap_view_short_name("sm90_xmma_gemm_f32f32_kernel", 10);
  assert_string_equal(box, "sm90_xmma\xE2\x80\xA6");
  free(box);

  /* finish() fills pretty_name: demangled, or the raw name when it is not a C++ name. */
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  add(&g, "_Z6kernelIfEvPT_i", NULL, -1);
  add(&g, "plain_c_kernel", NULL, 0, -1);
  finish_and_lay_out(&g);
  assert_string_equal(g.nodes[0].pretty_name, "void kernel<float>(float*, int)");
  assert_string_equal(g.nodes[1].pretty_name, "plain_c_kernel");
  recap_view_graph_free(&g);
}

/* ------------------------------------------------------------------------------------------
 * Layout
 * ---------------------------------------------------------------------------------------- */

/* Two chains listed so that the driver's order would cross them at every layer: a0 b0 on top,
 * then b1 (under b0) before a1 (under a0), and so on. Zero crossings are possible and found. */
RECAP_TEST(untangles_crossed_chains) {
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  size_t a0 = add(&g, "a0", NULL, -1), b0 = add(&g, "b0", NULL, -1);
  size_t b1 = add(&g, "b1", NULL, (int)b0, -1), a1 = add(&g, "a1", NULL, (int)a0, -1);
  size_t a2 = add(&g, "a2", NULL, (int)a1, -1), b2 = add(&g, "b2", NULL, (int)b1, -1);
  size_t join = add(&g, "join", NULL, (int)a2, (int)b2, -1);
  size_t c1 = add(&g, "c1", NULL, (int)a0, (int)b0, -1); /* a node under both roots */
  (void)join;
  finish_and_lay_out(&g);
  assert_int_equal(g.layer_count, 4);
  assert_int_equal(g.crossings, 0);
  assert_int_equal(drawn_crossings(&g), 0);
  /* The two chains each keep a side. */
  int a_left = centre_x(&g.nodes[a0]) < centre_x(&g.nodes[b0]);
  assert_int_equal(centre_x(&g.nodes[a1]) < centre_x(&g.nodes[b1]), a_left);
  assert_int_equal(centre_x(&g.nodes[a2]) < centre_x(&g.nodes[b2]), a_left);
  /* c1 waits for both roots: it sits between the chains. */
  double lo = centre_x(&g.nodes[a1]), hi = centre_x(&g.nodes[b1]);
  if (lo > hi) {
    double t = lo;
    lo = hi;
    hi = t;
  }
  assert_true(centre_x(&g.nodes[c1]) > lo && centre_x(&g.nodes[c1]) < hi);
  check_layout(&g);
  recap_view_graph_free(&g);
}

RECAP_TEST(diamond_branches_side_by_side) {
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  size_t top = add(&g, "top", NULL, -1);
  size_t left = add(&g, "left", NULL, (int)top, -1), right = add(&g, "right", NULL, (int)top, -1);
  size_t bottom = add(&g, "bottom", NULL, (int)left, (int)right, -1);
  finish_and_lay_out(&g);
  assert_int_equal(g.nodes[top].layer, 0);
  assert_int_equal(g.nodes[left].layer, 1);
  assert_int_equal(g.nodes[right].layer, 1);
  assert_int_equal(g.nodes[bottom].layer, 2);
  assert_true(g.nodes[left].y == g.nodes[right].y);
  assert_true(g.nodes[left].x + g.nodes[left].w < g.nodes[right].x ||
              g.nodes[right].x + g.nodes[right].w < g.nodes[left].x);
  /* The top and the bottom are centred over the two branches. */
  double middle = (centre_x(&g.nodes[left]) + centre_x(&g.nodes[right])) / 2;
  assert_true(centre_x(&g.nodes[top]) > middle - 1 && centre_x(&g.nodes[top]) < middle + 1);
  assert_true(centre_x(&g.nodes[bottom]) > middle - 1 && centre_x(&g.nodes[bottom]) < middle + 1);
  assert_int_equal(g.crossings, 0);
  check_layout(&g);
  recap_view_graph_free(&g);
}

/* A long edge is routed through the layers it crosses, and a source sits just above its
 * first dependent rather than at the top. */
RECAP_TEST(long_edges_and_late_sources) {
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  size_t s0 = add(&g, "s0", NULL, -1);
  size_t s1 = add(&g, "s1", NULL, (int)s0, -1), s2 = add(&g, "s2", NULL, (int)s1, -1);
  size_t s3 = add(&g, "s3", NULL, (int)s2, (int)s0, -1); /* s0 -> s3 spans three layers */
  size_t input = add(&g, "input", NULL, -1);
  size_t use = add(&g, "use", NULL, (int)s2, (int)input, -1);
  finish_and_lay_out(&g);
  assert_int_equal(g.nodes[s3].layer, 3);
  assert_int_equal(g.nodes[input].layer, g.nodes[use].layer - 1);
  for (size_t e = 0; e < g.edge_count; e++)
    if (g.edges[e].from == s0 && g.edges[e].to == s3)
      assert_int_equal(g.edges[e].point_count, 2 + 2 * 2);
  check_layout(&g);
  recap_view_graph_free(&g);
}

/* A pseudo-random DAG of 80 nodes in nested scopes: the layout's promises hold. */
RECAP_TEST(scopes_stay_together) {
  static const char *const scopes[] = {NULL, "fwd", "fwd/l0", "fwd/l1", "bwd", "bwd/l1", "opt"};
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  unsigned seed = 12345;
  for (int i = 0; i < 80; i++) {
    recap_view_node_t *n = recap_view_add_node(&g, i % 9 == 0 ? "memset" : "kernel");
    assert_non_null(n);
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    assert_int_equal(recap_view_set_string(&n->kernel_name, name), 0);
    /* Scopes follow the node order in runs, as captures make them. */
    assert_int_equal(recap_view_set_string(&n->annotation_path, scopes[(i / 7) % 7]), 0);
    for (int k = 0; k < 2 && i > 0; k++) {
      seed = seed * 1103515245u + 12345u;
      int dep = i - 1 - (int)((seed >> 16) % (unsigned)(i < 6 ? i : 6));
      int seen = 0;
      for (size_t d = 0; d < n->dep_count; d++) seen |= n->deps[d] == (size_t)dep;
      if (!seen) assert_int_equal(recap_view_add_dependency(&g, (size_t)i, (size_t)dep), 0);
    }
  }
  finish_and_lay_out(&g);
  assert_int_equal(g.cluster_count, 6);
  assert_int_equal(drawn_crossings(&g) <= g.crossings, 1);
  check_layout(&g);
  /* Nested scopes lie inside their parents. */
  for (size_t c = 0; c < g.cluster_count; c++) {
    const recap_view_cluster_t *child = &g.clusters[c];
    if (child->depth != 2) continue;
    for (size_t p = 0; p < g.cluster_count; p++) {
      const recap_view_cluster_t *parent = &g.clusters[p];
      if (parent->depth != 1 || strncmp(child->path, parent->path, strlen(parent->path)) != 0)
        continue;
      assert_true(child->x > parent->x && child->x + child->w < parent->x + parent->w);
      assert_true(child->y > parent->y && child->y + child->h < parent->y + parent->h);
    }
  }
  recap_view_graph_free(&g);
}

RECAP_TEST(refuses_cycles_and_bad_indices) {
  char err[256];
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  add(&g, "a", NULL, 1, -1);
  add(&g, "b", NULL, 0, -1);
  assert_int_equal(recap_view_finish(&g, err, sizeof err), -1);
  assert_string_equal(err, "the dependencies form a cycle (through node 0); a CUDA graph has none");
  recap_view_graph_free(&g);

  recap_view_graph_init(&g);
  add(&g, "a", NULL, 3, -1);
  assert_int_equal(recap_view_finish(&g, err, sizeof err), -1);
  assert_string_equal(err, "node 0 waits for node 3, but the graph has 1 node");
  recap_view_graph_free(&g);

  /* An empty graph is fine and draws as an empty page. */
  recap_view_graph_init(&g);
  finish_and_lay_out(&g);
  assert_int_equal(g.layer_count, 0);
  recap_view_graph_free(&g);
}

/* ------------------------------------------------------------------------------------------
 * Writers
 * ---------------------------------------------------------------------------------------- */

static char *written(int (*write)(FILE *, recap_view_graph_t *), recap_view_graph_t *g) {
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  assert_non_null(f);
  assert_int_equal(write(f, g), 0);
  assert_int_equal(fclose(f), 0);
  return text;
}

static int html_of(FILE *f, recap_view_graph_t *g) {
  char err[256] = "";
  int rc = recap_view_write_html(f, g, "step </title><b>", err, sizeof err);
  if (rc != 0) fail_msg("%s", err);
  return rc;
}

static int dot_of(FILE *f, recap_view_graph_t *g) { return recap_view_write_dot(f, g, "test"); }

static int count_of(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

RECAP_TEST(writes_a_self_contained_page) {
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  size_t a = add(&g, "_Z6kernelIfEvPT_i", "step/forward", -1);
  add(&g, "evil</script><script>alert(1)</script>", "step", (int)a, -1);
  recap_view_node_t *copy = recap_view_add_node(&g, "memcpy");
  copy->bytes = 3 << 20;
  assert_int_equal(recap_view_add_dependency(&g, 2, 1), 0);
  char *params[] = {NULL};
  (void)params;
  g.nodes[0].params = calloc(1, sizeof *g.nodes[0].params);
  assert_int_equal(recap_view_set_string(&g.nodes[0].params[0], "float* 0x1000"), 0);
  g.nodes[0].param_count = 1;
  g.nodes[0].has_launch = 1;
  g.nodes[0].grid[0] = 40, g.nodes[0].grid[1] = g.nodes[0].grid[2] = 1;
  g.nodes[0].block[0] = 256, g.nodes[0].block[1] = g.nodes[0].block[2] = 1;
  recap_liveness_input_t input = {.size = sizeof(recap_liveness_input_t),
                                  .base = (void *)0x7f0000001000,
                                  .bytes = 4096,
                                  .generation = 3,
                                  .node = 0,
                                  .reader_count = 2,
                                  .node_type = "kernel"};
  char err[128];
  assert_int_equal(recap_view_finish(&g, err, sizeof err), 0);
  assert_int_equal(recap_view_add_liveness(&g, &input, 1, err, sizeof err), 0);
  input.node = 9;
  assert_int_equal(recap_view_add_liveness(&g, &input, 1, err, sizeof err), -1);
  assert_string_equal(err, "liveness input 0 names node 9, but the graph has 3 nodes");

  char *text = written(html_of, &g);
  /* The title is escaped; the names in the data cannot end their <script>. */
  assert_non_null(strstr(text, "<title>recap graph: step &lt;/title&gt;&lt;b&gt;</title>"));
  assert_int_equal(count_of(text, "</script>"), 3); /* the error hook, the data, the drawing */
  assert_non_null(strstr(text, "evil\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"));
  /* The first script records errors; the drawing reports what it drew. */
  assert_true(strstr(text, "window.onerror") < strstr(text, "<style>"));
  assert_non_null(strstr(text, "setAttribute('data-recap-rendered'"));
  /* Nothing from the network. */
  assert_null(strstr(text, "http://"));
  assert_null(strstr(text, "https://"));
  assert_null(strstr(text, " src="));
  /* What a click shows comes with the data: the demangled name, the launch, the parameters,
   * the allocation liveness recorded; and the memcpy's size in its box. */
  EXPECT_CONTAINS(text, "\"pretty\":\"void kernel\\u003cfloat\\u003e(float*, int)\"",
                  "\"grid\":[40,1,1],\"block\":[256,1,1],\"smem\":0",
                  "\"params\":[\"float* 0x1000\"]");
  assert_non_null(strstr(text,
                         "\"allocs\":[{\"base\":\"0x7f0000001000\",\"size\":4096,"
                         "\"generation\":3,\"readers\":2,\"site\":null,\"freed\":false}]"));
  EXPECT_CONTAINS(text, "\"name\":\"memcpy\",\"detail\":\"3.0 MiB\"",
                  "{\"path\":\"step\",\"label\":\"step\",\"depth\":1,\"nodes\":2,",
                  "{\"path\":\"step/forward\",\"label\":\"forward\",\"depth\":2,");
  /* The legend: each type present, with its count. */
  assert_non_null(strstr(text,
                         "<tr data-type=\"kernel\"><td><span class=\"swatch\" "
                         "style=\"background:#9ecae1\"></span>kernel</td>"
                         "<td class=\"num\">2</td></tr>"));
  assert_non_null(strstr(text, "<b>3</b> nodes, <b>2</b> edges, 3 layers, 2 annotation scopes"));
  free(text);

  text = written(dot_of, &g);
  EXPECT_CONTAINS(text, "subgraph cluster_0 {\n    label=\"step\";",
                  "    subgraph cluster_1 {\n      label=\"forward\";");
  assert_non_null(strstr(text,
                         "n0 [label=\"#0 kernel\\nvoid kernel<float>(float*, int)\\n"
                         "grid 40x1x1, block 256x1x1\\n[step/forward]\""));
  assert_non_null(strstr(text, "  n2 [label=\"#2 memcpy\\n3.0 MiB\""));
  assert_int_equal(count_of(text, " -> "), 2);
  free(text);
  recap_view_graph_free(&g);
}

RECAP_TEST(save_reports_unwritable_paths) {
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  add(&g, "k", NULL, -1);
  char err[256];
  assert_int_equal(recap_view_finish(&g, err, sizeof err), 0);
  assert_int_equal(recap_view_save_html(&g, "/nonexistent-dir/x.html", "t", err, sizeof err), -1);
  assert_non_null(strstr(err, "cannot open for writing: No such file or directory"));
  assert_int_equal(recap_view_save_dot(&g, "/tmp", "t", err, sizeof err), -1);
  assert_non_null(strstr(err, "cannot open for writing: Is a directory"));
  /* A device that refuses writes: the error is reported and the device left alone. */
  struct stat st;
  if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
    assert_int_equal(recap_view_save_dot(&g, "/dev/full", "t", err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot write: No space left on device"));
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
  }
  recap_view_graph_free(&g);
}

/* ------------------------------------------------------------------------------------------
 * From recap_graph_inspect, on the fake
 * ---------------------------------------------------------------------------------------- */

/* first -> second -> third on one stream and side_kernel on a side stream joined after second:
 * the branches sit side by side in one layer. */
RECAP_TEST(model_from_a_captured_graph) {
  recap_test_reset(NULL);
  recap_stream_t s = recap__fake_stream_new(), side = recap__fake_stream_new();
  recap_graph_t graph;
  OK(recap_graph_create(&graph, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(graph, NULL, s));
  launch_fork_join(s, side, "_Z6kernelIfEvPT_i");
  OK(recap_graph_capture_end(graph));
  recap_graph_info_t *info = inspect(graph);
  recap_view_graph_t g;
  char err[256];
  assert_int_equal(recap_view_from_info(&g, info, err, sizeof err), 0);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(graph));

  assert_int_equal(g.count, 4);
  assert_int_equal(g.edge_count, 3);
  assert_string_equal(g.nodes[1].type, "kernel");
  assert_string_equal(g.nodes[1].pretty_name, "void kernel<float>(float*, int)");
  assert_true(g.nodes[0].has_launch);
  assert_int_equal(g.nodes[0].grid[0], 1);
  assert_int_equal(g.nodes[1].succ_count, 2);
  assert_int_equal(recap_view_layout(&g, err, sizeof err), 0);
  assert_int_equal(g.nodes[2].layer, 2);
  assert_int_equal(g.nodes[3].layer, 2);
  assert_true(g.nodes[2].y == g.nodes[3].y);
  check_layout(&g);
  recap_view_graph_free(&g);
}

/* The fixture the browser test draws: scopes, side streams, liveness inputs. */
RECAP_TEST(model_of_the_fixture) {
  recap_graph_t graph;
  OK(view_fixture_capture(&graph));
  recap_view_graph_t g;
  char err[256] = "";
  if (view_fixture_model(graph, 0, &g, err, sizeof err) != 0) fail_msg("%s", err);
  OK(view_fixture_release(graph));
  assert_true(g.count >= 20);
  size_t allocs = 0, memsets = 0;
  for (size_t i = 0; i < g.count; i++) {
    allocs += g.nodes[i].alloc_count;
    memsets += strcmp(g.nodes[i].type, "memset") == 0;
  }
  assert_int_equal(memsets, 2);
  assert_true(allocs >= 3); /* each layer's weights, read first by its forward GEMM */
  assert_non_null(g.pool);
  assert_int_equal(recap_view_layout(&g, err, sizeof err), 0);
  check_layout(&g);
  /* Scopes: step, data, forward, layer0..2 twice, loss, metrics, backward, wgrad+adam x3. */
  size_t found = 0;
  for (size_t c = 0; c < g.cluster_count; c++)
    found += strcmp(g.clusters[c].path, "step/backward/layer1/wgrad+adam") == 0 ||
             strcmp(g.clusters[c].path, "step/forward/layer2") == 0;
  assert_int_equal(found, 2);
  recap_view_graph_free(&g);
}

/* ------------------------------------------------------------------------------------------
 * Regions: the bodies of conditional nodes (regions_info.h)
 * ---------------------------------------------------------------------------------------- */

static const recap_view_cluster_t *body_cluster(const recap_view_graph_t *g, size_t node,
                                                unsigned branch) {
  for (size_t c = 0; c < g->cluster_count; c++)
    if (g->clusters[c].node == node && g->clusters[c].branch == branch) return &g->clusters[c];
  fail_msg("no cluster for body %u of node %zu", branch, node);
  return NULL;
}

static int rect_inside(const recap_view_cluster_t *in, const recap_view_cluster_t *out) {
  return in->x > out->x && in->x + in->w < out->x + out->w && in->y > out->y &&
         in->y + in->h < out->y + out->h;
}

/* A WHILE whose body holds an IF_ELSE, and a SWITCH of three (one empty): each body is a frame
 * below its node, nested in the frame of the body that holds the node, and what waits for a
 * conditional node comes below all its bodies. */
RECAP_TEST(bodies_nest_below_their_node) {
  recap_graph_info_t info = regions_info();
  recap_view_graph_t g;
  char err[256] = "";
  if (recap_view_from_info(&g, &info, err, sizeof err) != 0) fail_msg("%s", err);
  assert_int_equal(recap_view_layout(&g, err, sizeof err), 0);
  check_layout(&g);
  /* Layers: prologue, WHILE, its body (step, IF_ELSE, then/else side by side, condition), the
   * SWITCH, its cases (case0_a and the memset side by side, case0_b), the epilogue. */
  static const size_t layers[REGIONS_INFO_NODES] = {0, 1, 6, 9, 2, 3, 5, 4, 4, 7, 8, 7};
  for (size_t i = 0; i < REGIONS_INFO_NODES; i++)
    if (g.nodes[i].layer != layers[i])
      fail_msg("node %zu is in layer %zu, expected %zu", i, g.nodes[i].layer, layers[i]);
  assert_int_equal(g.layer_count, 10);
  /* Two annotation scopes and six bodies. */
  assert_int_equal(g.cluster_count, 8);
  static const struct {
    size_t node;
    unsigned branch;
    const char *label, *path;
    size_t nodes;
  } bodies[] = {
      {1, 0, "while body", "step/while body", 5},  {2, 0, "case 0", "step/case 0", 2},
      {2, 1, "case 1", "step/case 1", 0},          {2, 2, "case 2", "step/case 2", 1},
      {5, 0, "if", "step/while body/solve/if", 1}, {5, 1, "else", "step/while body/solve/else", 1},
  };
  for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
    const recap_view_cluster_t *c = body_cluster(&g, bodies[b].node, bodies[b].branch);
    assert_string_equal(c->label, bodies[b].label);
    assert_string_equal(c->path, bodies[b].path);
    assert_int_equal(c->node_count, bodies[b].nodes);
    /* Below its conditional node, and above what waits for it. */
    const recap_view_node_t *p = &g.nodes[bodies[b].node];
    assert_true(c->y > p->y + p->h);
    for (size_t k = 0; k < p->succ_count; k++) assert_true(g.nodes[p->succ[k]].y > c->y + c->h);
  }
  /* Nesting: the IF_ELSE's bodies inside "solve", inside the WHILE body, inside "step". */
  const recap_view_cluster_t *step = NULL, *solve = NULL;
  for (size_t c = 0; c < g.cluster_count; c++) {
    if (strcmp(g.clusters[c].path, "step") == 0) step = &g.clusters[c];
    if (strcmp(g.clusters[c].path, "step/while body/solve") == 0) solve = &g.clusters[c];
  }
  assert_non_null(step);
  assert_non_null(solve);
  assert_int_equal(solve->node, SIZE_MAX);
  assert_int_equal(solve->node_count, 4);
  assert_int_equal(step->node_count, 11); /* all but the epilogue */
  const recap_view_cluster_t *loop = body_cluster(&g, 1, 0);
  assert_true(rect_inside(body_cluster(&g, 5, 0), solve));
  assert_true(rect_inside(body_cluster(&g, 5, 1), solve));
  assert_true(rect_inside(solve, loop));
  assert_true(rect_inside(loop, step));
  assert_true(rect_inside(body_cluster(&g, 2, 1), step));
  assert_true(g.nodes[3].x + g.nodes[3].w <= step->x || g.nodes[3].y >= step->y + step->h);
  /* Branches left to right in their order: if before else, case 0 before 1 before 2. */
  assert_true(body_cluster(&g, 5, 0)->x < body_cluster(&g, 5, 1)->x);
  assert_true(body_cluster(&g, 2, 0)->x < body_cluster(&g, 2, 1)->x);
  assert_true(body_cluster(&g, 2, 1)->x < body_cluster(&g, 2, 2)->x);
  /* The body's nodes are recorded in their innermost cluster. */
  assert_true(&g.clusters[g.nodes[8].cluster] == body_cluster(&g, 5, 1));
  assert_true(&g.clusters[g.nodes[6].cluster] == loop);
  assert_int_equal(g.nodes[3].cluster, -1);
  recap_view_graph_free(&g);
}

/* The same shapes captured on the fake through recap/region.h, in an annotation scope:
 * inspection lists the bodies' nodes after the graph's own (the annotation layer labelling only
 * the nodes it knows), and the viewer frames them inside the scope. */
RECAP_TEST(regions_captured_on_the_fake) {
  recap_test_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t graph;
  OK(recap_graph_create(&graph, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(graph, NULL, s));
  recap_annotations_enable(1);
  OK(recap_annotate_push("step", s));
  recap__fake_launch_kernel(s, "prologue");
  recap_cond_t loop, choice, cases;
  OK(recap_cond_create(&loop, 1, s));
  OK(recap_region_begin(RECAP_REGION_WHILE, loop, 1, s));
  recap__fake_launch_kernel(s, "step");
  OK(recap_cond_create(&choice, 0, s));
  OK(recap_region_begin(RECAP_REGION_IF_ELSE, choice, 2, s));
  recap__fake_launch_kernel(s, "then_kernel");
  OK(recap_region_next_branch(s));
  recap__fake_launch_kernel(s, "else_kernel");
  OK(recap_region_end(s));
  OK(recap_cond_set_value(loop, 0, s));
  OK(recap_region_end(s));
  OK(recap_cond_create(&cases, 2, s));
  OK(recap_region_begin(RECAP_REGION_SWITCH, cases, 3, s));
  recap__fake_launch_kernel(s, "case0");
  OK(recap_region_next_branch(s));
  OK(recap_region_next_branch(s));
  recap__fake_launch_kernel(s, "case2");
  OK(recap_region_end(s));
  OK(recap_annotate_pop(s));
  recap__fake_launch_kernel(s, "epilogue");
  OK(recap_graph_capture_end(graph));
  recap_annotations_enable(-1);
  /* The annotation layer labels what it knows (the graph's own nodes come first), no more. */
  recap_graph_info_t *info = inspect(graph);
  for (size_t i = 0; i < 3; i++) assert_string_equal(info->nodes[i].annotation_path, "step");
  assert_null(info->nodes[3].annotation_path);
  recap_view_graph_t g;
  char err[256] = "";
  int rc = recap_view_from_info(&g, info, err, sizeof err);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(graph));
  if (rc != 0) fail_msg("%s", err);
  /* The graph's own nodes, then the WHILE body (its condition's SET_VALUE kernel included, and
   * the kernel that sets the loop's condition), the IF_ELSE's two, the SWITCH's cases (case 1,
   * never captured, holds the empty node recap puts into an empty body). */
  static const struct {
    const char *name; /* NULL: a conditional node of kind; "": an empty node */
    const char *kind;
    size_t parent;
    unsigned branch;
  } want[] = {
      {"prologue", NULL, SIZE_MAX, 0},
      {NULL, "while", SIZE_MAX, 0},
      {NULL, "switch", SIZE_MAX, 0},
      {"epilogue", NULL, SIZE_MAX, 0},
      {"step", NULL, 1, 0},
      {"recap_cond_set_value", NULL, 1, 0},
      {NULL, "if_else", 1, 0},
      {"recap_cond_set_value", NULL, 1, 0},
      {"then_kernel", NULL, 6, 0},
      {"else_kernel", NULL, 6, 1},
      {"case0", NULL, 2, 0},
      {"", NULL, 2, 1},
      {"case2", NULL, 2, 2},
  };
  assert_int_equal(g.count, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < g.count; i++) {
    const recap_view_node_t *n = &g.nodes[i];
    if (want[i].name && !*want[i].name) {
      assert_string_equal(n->type, "empty");
      assert_null(n->region_kind);
    } else if (want[i].name) {
      assert_string_equal(n->kernel_name, want[i].name);
      assert_null(n->region_kind);
    } else {
      assert_string_equal(n->type, "conditional");
      assert_string_equal(n->region_kind, want[i].kind);
    }
    assert_int_equal(n->parent, want[i].parent);
    assert_int_equal(n->branch, want[i].branch);
  }
  assert_int_equal(g.nodes[2].branches, 3);
  assert_int_equal(g.nodes[6].branches, 2);
  assert_int_equal(recap_view_layout(&g, err, sizeof err), 0);
  check_layout(&g);
  /* "step" and six bodies; a body's nodes need no label of their own to sit inside the scope
   * that holds their conditional node. */
  assert_int_equal(g.cluster_count, 7);
  assert_string_equal(body_cluster(&g, 1, 0)->path, "step/while body");
  assert_string_equal(body_cluster(&g, 6, 1)->path, "step/while body/else");
  assert_string_equal(body_cluster(&g, 2, 2)->path, "step/case 2");
  assert_int_equal(body_cluster(&g, 2, 1)->node_count, 1); /* case 1: its empty node */
  assert_int_equal(body_cluster(&g, 1, 0)->node_count, 6);
  /* The epilogue below the SWITCH's cases, which lie below the WHILE's body. */
  assert_int_equal(g.nodes[2].layer, 7);
  assert_int_equal(g.nodes[3].layer, 9);
  assert_int_equal(recap_view_layout(&g, err, sizeof err), 0);
  check_layout(&g);
  recap_view_graph_free(&g);
}

static size_t add_conditional(recap_view_graph_t *g, const char *kind, unsigned branches) {
  recap_view_node_t *n = recap_view_add_node(g, "conditional");
  assert_non_null(n);
  assert_int_equal(recap_view_set_string(&n->region_kind, kind), 0);
  n->branches = branches;
  return g->count - 1;
}

RECAP_TEST(refuses_regions_that_do_not_nest) {
  char err[256];
  recap_view_graph_t g;
  /* A body node before its conditional node. */
  recap_view_graph_init(&g);
  add(&g, "a", NULL, -1);
  add_conditional(&g, "while", 1);
  g.nodes[0].parent = 1;
  assert_int_equal(recap_view_finish(&g, err, sizeof err), -1);
  assert_string_equal(err,
                      "node 0: \"parent\" is 1, but a body's nodes follow their conditional node "
                      "(the parent's index must be smaller)");
  recap_view_graph_free(&g);
  /* A parent that is no conditional node; a branch it does not have. */
  recap_view_graph_init(&g);
  add(&g, "a", NULL, -1);
  add(&g, "b", NULL, -1);
  g.nodes[1].parent = 0;
  assert_int_equal(recap_view_finish(&g, err, sizeof err), -1);
  assert_string_equal(
      err, "node 1: \"parent\" is node 0, a kernel node; only a conditional node has bodies");
  recap_view_graph_free(&g);
  recap_view_graph_init(&g);
  add_conditional(&g, "if_else", 2);
  add(&g, "a", NULL, -1);
  g.nodes[1].parent = 0;
  g.nodes[1].branch = 2;
  assert_int_equal(recap_view_finish(&g, err, sizeof err), -1);
  assert_string_equal(err, "node 1: \"branch\" is 2, but its parent, node 0, has 2 branches");
  /* Then a branch it has, but a dependency on the conditional node from its own body. */
  g.nodes[1].branch = 1;
  assert_int_equal(recap_view_finish(&g, err, sizeof err), 0);
  assert_int_equal(recap_view_add_dependency(&g, 1, 0), 0);
  assert_int_equal(recap_view_finish(&g, err, sizeof err), -1);
  assert_string_equal(err,
                      "node 1 (in body 1 of node 0) waits for node 0 (in the graph itself); a "
                      "dependency joins nodes of the same body");
  recap_view_graph_free(&g);
}

RECAP_TEST(body_labels) {
  recap_view_graph_t g;
  recap_view_graph_init(&g);
  static const struct {
    const char *kind;
    unsigned branch;
    const char *label;
  } cases[] = {{"while", 0, "while body"}, {"if", 0, "if"},         {"if_else", 0, "if"},
               {"if_else", 1, "else"},     {"switch", 0, "case 0"}, {"switch", 1023, "case 1023"},
               {"loop", 2, "branch 2"},    {NULL, 0, "branch 0"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    recap_view_node_t *n = recap_view_add_node(&g, "conditional");
    assert_non_null(n);
    assert_int_equal(recap_view_set_string(&n->region_kind, cases[i].kind), 0);
    char label[32];
    recap_view_body_label(n, cases[i].branch, label, sizeof label);
    assert_string_equal(label, cases[i].label);
  }
  recap_view_graph_free(&g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(demangles_templates_and_library_kernels),
    cmocka_unit_test(untangles_crossed_chains),
    cmocka_unit_test(diamond_branches_side_by_side),
    cmocka_unit_test(long_edges_and_late_sources),
    cmocka_unit_test(scopes_stay_together),
    cmocka_unit_test(refuses_cycles_and_bad_indices),
    cmocka_unit_test(writes_a_self_contained_page),
    cmocka_unit_test(save_reports_unwritable_paths),
    cmocka_unit_test(model_from_a_captured_graph),
    cmocka_unit_test(model_of_the_fixture),
    cmocka_unit_test(bodies_nest_below_their_node),
    cmocka_unit_test(regions_captured_on_the_fake),
    cmocka_unit_test(refuses_regions_that_do_not_nest),
    cmocka_unit_test(body_labels),
};
RECAP_TEST_MAIN(tests)
