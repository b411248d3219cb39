/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap_view.h — the graph viewer: an in-memory model of a captured graph, a layered layout of
 * it, and writers for Graphviz DOT and a self-contained HTML page.
 *
 *     recap_graph_info_t *info;                    // recap_graph_inspect (RECAP_GRAPH_KEEP)
 *     recap_view_graph_t view;
 *     if (recap_view_from_info(&view, info, err, sizeof err) == 0 &&
 *         recap_view_save_html(&view, "graph.html", "my step", err, sizeof err) == 0) ...
 *     recap_view_graph_free(&view);
 *
 * The library needs nothing beyond the C library and the C++ runtime (for __cxa_demangle): no
 * JSON parser and no Graphviz. A program fills the model from recap_graph_inspect with
 * recap_view_from_info; tools/recap-graph fills it from recap's inspection JSON. Every function
 * that can fail returns 0 on success and -1 on failure, with a message in err (when err is not
 * NULL) that names the problem.
 */
#ifndef RECAP_VIEW_H
#define RECAP_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "recap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A block of recap's allocator that a node reads, as the input-liveness checks recorded it. */
typedef struct recap_view_alloc {
  uint64_t base;       /* the block's start address */
  uint64_t size;       /* its usable size in bytes */
  uint64_t generation; /* its hand-out at capture */
  size_t reader_count; /* how many nodes of the graph read it */
  uint64_t alloc_site; /* return address of its recap_malloc call, or 0 when unknown */
  int freed;           /* 1: it was freed before the capture ended */
} recap_view_alloc_t;

typedef struct recap_view_node {
  /* What the graph says. Strings are owned by the model (malloc'ed); NULL when absent. */
  char *type;        /* "kernel", "memcpy", ... as given (an unknown type is kept) */
  char *kernel_name; /* the name as the driver gave it (mangled) */
  char *pretty_name; /* demangled, or a copy of kernel_name; set by recap_view_finish */
  int has_launch;    /* grid, block and shared_bytes are known */
  unsigned grid[3], block[3];
  uint64_t shared_bytes;
  uint64_t bytes;        /* memcpy and memset: bytes moved or set; mem_alloc: bytes */
  char *annotation;      /* the innermost annotation label */
  char *annotation_path; /* every enclosing label, outermost first, joined by '/' */
  int has_tools_id;
  uint64_t tools_id;
  size_t *deps; /* indices of the nodes this one waits for */
  size_t dep_count;
  size_t *succ; /* the reverse of deps; built by recap_view_finish */
  size_t succ_count;
  char **params; /* kernel parameters as text, where known */
  size_t param_count;
  /* Graph parameters the kernel takes, "name = value" each, and what recap_graph_kernel_arg_set
   * and _shape_set set on this node alone (recap/params.h); NULL when none. */
  char **graph_params;
  size_t graph_param_count;
  char *set_alone;
  recap_view_alloc_t *allocs; /* allocator blocks this node reads, where recorded */
  size_t alloc_count;
  /* Regions (recap/region.h). A node inside a body of a conditional node: `parent` is that
   * node's index (always smaller than this one's) and `branch` the body (0 for WHILE and IF, 1
   * for an ELSE, n for case n); a node of the graph itself: parent SIZE_MAX, branch 0.
   * Dependencies join nodes of the same body only. */
  size_t parent;
  unsigned branch;
  char *region_kind; /* conditional nodes: "while", "if", "if_else", "switch", as given */
  unsigned branches; /* conditional nodes: how many bodies */

  /* Layout, filled by recap_view_layout: the layer (0 at the top), the position in it, and the
   * box's top-left corner and size in drawing units. */
  size_t layer, order;
  double x, y, w, h;
  long cluster; /* the innermost cluster holding the node, or -1 */
} recap_view_node_t;

/* A point of an edge's route. */
typedef struct recap_view_point {
  double x, y;
} recap_view_point_t;

/* An edge as drawn: from the bottom of one box to the top of another, through the points where
 * it crosses the layers in between. */
typedef struct recap_view_edge {
  size_t from, to;
  recap_view_point_t *points;
  size_t point_count;
} recap_view_edge_t;

/* A labelled rectangle around nodes: an annotation scope, or a body of a conditional node.
 * Clusters nest: an annotation scope opened inside a body lies inside the body's cluster, and a
 * body inside the cluster that holds its conditional node. */
typedef struct recap_view_cluster {
  char *path;        /* the labels from the outermost cluster in, joined by '/':
                        "step/forward", "step/while body/if" */
  const char *label; /* its own label, the end of path: "forward"; for a body "while body",
                        "if", "else" or "case 2" (recap_view_body_label) */
  size_t depth;      /* 1 for an outermost cluster */
  size_t node_count; /* nodes inside it, nested clusters included */
  long parent;       /* the enclosing cluster, or -1 */
  size_t node;       /* a body: the conditional node; an annotation scope: SIZE_MAX */
  unsigned branch;   /* a body: which one */
  double x, y, w, h;
} recap_view_cluster_t;

typedef struct recap_view_graph {
  recap_view_node_t *nodes;
  size_t count, capacity;
  size_t edge_count; /* sum of the dependency counts; set by recap_view_finish */
  int tools_ids_available;
  char *pool; /* the graph's pool as text ("{1, 2}"), or NULL */

  /* Layout, filled by recap_view_layout. */
  size_t layer_count;
  recap_view_edge_t *edges; /* edge_count of them */
  recap_view_cluster_t *clusters;
  size_t cluster_count;
  double width, height; /* the drawing's size */
  size_t crossings;     /* edge crossings left between adjacent layers */
  int laid_out;
} recap_view_graph_t;

/* ---- building the model ------------------------------------------------------------------- */

/* An empty model; free with recap_view_graph_free. */
void recap_view_graph_init(recap_view_graph_t *g);
void recap_view_graph_free(recap_view_graph_t *g);

/* Append a node of the given type (copied); NULL when out of memory. Its index is count - 1. */
recap_view_node_t *recap_view_add_node(recap_view_graph_t *g, const char *type);

/* A copy of s in the model's ownership (NULL for NULL); -1 when out of memory. */
int recap_view_set_string(char **field, const char *s);

/* Node `to` waits for node `from`. Both must be nodes of the same body (or of the graph). */
int recap_view_add_dependency(recap_view_graph_t *g, size_t to, size_t from);

/* Once every node and dependency is in: checks indices, that the graph has no cycle and that
 * regions nest (a node's parent is a conditional node listed before it, its branch one of the
 * parent's, its dependencies in its own body), builds the reverse edges and demangles kernel
 * names. */
int recap_view_finish(recap_view_graph_t *g, char *err, size_t err_size);

/* Fill g (initialised here) from recap_graph_inspect's result, finished. */
int recap_view_from_info(recap_view_graph_t *g, const recap_graph_info_t *info, char *err,
                         size_t err_size);

/* Attach what the input-liveness checks recorded (recap_graph_liveness_inputs) to the nodes
 * that read each block. */
int recap_view_add_liveness(recap_view_graph_t *g, const recap_liveness_input_t *inputs,
                            size_t count, char *err, size_t err_size);

/* ---- names -------------------------------------------------------------------------------- */

/* "void kernel<float>(float*, int)" for "_Z6kernelIfEvPT_i", through the C++ runtime's
 * __cxa_demangle; NULL (not an error) for a name that is not a mangled C++ name. The result is
 * malloc'ed. */
char *recap_view_demangle(const char *mangled);

/* The name drawn in a box: a demangled name without its parameter list and return type, its
 * leading qualifiers dropped while it is longer than max characters, then cut with an
 * ellipsis. malloc'ed; NULL when out of memory. */
char *recap_view_short_name(const char *name, size_t max);

/* The label of body `branch` of a conditional node: "while body", "if", "else", "case 2";
 * "branch 2" for a kind the library does not list. Written into out (at most size bytes). */
void recap_view_body_label(const recap_view_node_t *conditional, unsigned branch, char *out,
                           size_t size);

/* ---- layout ------------------------------------------------------------------------------- */

/* A layered (Sugiyama) layout: layers by longest path, crossings reduced by barycenter sweeps,
 * nodes of one cluster (annotation scope or body) kept side by side so that each is one
 * rectangle, and coordinates for nodes, edge routes and cluster rectangles. A conditional
 * node's bodies lie in the layers below it, and the nodes that wait for it below them. Called
 * by the writers when needed. */
int recap_view_layout(recap_view_graph_t *g, char *err, size_t err_size);

/* ---- writers ------------------------------------------------------------------------------ */

/* Graphviz DOT: one box per node, an edge per dependency, annotation scopes and bodies of
 * conditional nodes as nested clusters (a dashed edge from each conditional node to each of its
 * bodies), a legend of node types. source names the graph in a comment. */
int recap_view_write_dot(FILE *out, const recap_view_graph_t *g, const char *source);

/* The self-contained HTML page (style and script inline, nothing fetched). Lays g out first
 * when it is not laid out yet. title names the graph on the page. */
int recap_view_write_html(FILE *out, recap_view_graph_t *g, const char *title, char *err,
                          size_t err_size);

/* The writers into a file ("-": standard output); a failed write removes the partial file. */
int recap_view_save_dot(const recap_view_graph_t *g, const char *path, const char *source,
                        char *err, size_t err_size);
int recap_view_save_html(recap_view_graph_t *g, const char *path, const char *title, char *err,
                         size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_VIEW_H */
