/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_inspect.c — what the CPU fake device tells about its graphs: Graphviz DOT (its own
 * simple form, or the shape of the driver's verbose dump), inspection (nodes with their kernel
 * names and sizes, and the per-stream chains as edges), the node lists of captures and graphs,
 * and what their nodes read (for the input-liveness checks).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host.h"
#include "core/text.h"
#include "fake/fake_state.h"

/* ---- DOT -------------------------------------------------------------------------------- */

static const char *node_type_text(recap_node_type_t type) {
  static const char *const names[] = {
#define RECAP_X_NODE_NAME(name, text) text,
      RECAP_NODE_TYPE_MAP(RECAP_X_NODE_NAME)
#undef RECAP_X_NODE_NAME
  };
  return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

/* A kernel name inside a quoted DOT string. */
static void dot_quoted(FILE *out, const char *text) {
  for (; *text; text++) {
    if (*text == '"' || *text == '\\') fputc('\\', out);
    fputc(*text, out);
  }
}

/* The fake's own DOT: one simple statement per node, the handles in statements of their own
 * (as the driver's verbose dump shows them, "node handle | 0x..."), then the edges. */
static void write_simple_dot(FILE *out, const fake_graph_t *g) {
  fprintf(out, "digraph fake {\n");
  for (size_t i = 0; i < g->nodes.count; i++) {
    const fake_node_t *n = &g->nodes.v[i];
    fprintf(out, "  n%zu [label=\"%zu: %s", i, i, node_type_text(n->type));
    if (n->name) {
      fputc(' ', out);
      dot_quoted(out, n->name);
    }
    fprintf(out, "\"];\n");
  }
  for (size_t i = 0; i < g->nodes.count; i++)
    fprintf(out, "  n%zu [comment=\"node handle | 0x%016llX\"];\n", i,
            (unsigned long long)g->nodes.v[i].handle);
  for (size_t i = 0; i < g->nodes.count; i++) {
    if (g->nodes.v[i].dep) fprintf(out, "  n%zu -> n%zu;\n", g->nodes.v[i].dep - 1, i);
    if (g->nodes.v[i].after) fprintf(out, "  n%zu -> n%zu;\n", g->nodes.v[i].after - 1, i);
  }
  fprintf(out, "}\n");
}

/* The shape of cudaGraphDebugDotPrint's verbose output (CUDA 12 and 13): a cluster per graph,
 * quoted node ids, record labels spanning several lines with escaped angle brackets, and each
 * node's handle in a "node handle" field. */
static void write_driver_style_dot(FILE *out, const fake_graph_t *g) {
  fputs("digraph dot {\nsubgraph cluster_1 {\nlabel=\"graph_1\" graph[style=\"dashed\"];\n", out);
  for (size_t i = 0; i < g->nodes.count; i++) {
    const fake_node_t *n = &g->nodes.v[i];
    fprintf(out, "\"graph_1_node_%zu\"[style=\"bold\" shape=\"record\" label=\"{%s\n", i,
            n->type == RECAP_NODE_KERNEL ? "KERNEL" : "MEMCPY");
    fprintf(out, "| {ID | %zu (topoId: %zu) | ", i, g->nodes.count - i);
    if (n->name) dot_quoted(out, n->name);
    fputs("\\<\\<\\<1,1,0\\>\\>\\>}\n", out);
    fprintf(out, "| {{node handle | func handle} | {0x%016llX | 0x%016llX}}\n",
            (unsigned long long)n->handle, (unsigned long long)n->handle + 8);
    fputs(
        "| {accessPolicyWindow | {base_ptr | num_bytes | hitRatio | hitProp | missProp} | "
        "{0x0000000000000000 | 0 | 0.000000 | N | N}}\n}\"];\n",
        out);
  }
  for (size_t i = 0; i < g->nodes.count; i++) {
    if (g->nodes.v[i].dep)
      fprintf(out, "\"graph_1_node_%zu\" -> \"graph_1_node_%zu\" [headlabel=0];\n",
              g->nodes.v[i].dep - 1, i);
    if (g->nodes.v[i].after)
      fprintf(out, "\"graph_1_node_%zu\" -> \"graph_1_node_%zu\" [headlabel=0];\n",
              g->nodes.v[i].after - 1, i);
  }
  fputs("}\n}\n", out);
}

void recap__fake_dot_driver_style(bool on) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.dot_driver_style = on;
  pthread_mutex_unlock(&recap__fake.lock);
}

recap_status_t recap__fake_op_graph_debug_dot(recap_cuda_graph_t graph, const char *path) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(graph);
  if (!path || !path[0]) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaGraphDebugDotPrint: path is NULL or empty");
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphDebugDotPrint", (const void *)graph, "graph");
  } else {
    FILE *out = fopen(path, "w");
    if (!out) {
      recap__fake_note(&f, RECAP_ERROR_IO, "cudaGraphDebugDotPrint: cannot write \"%s\": %s", path,
                       strerror(errno));
    } else {
      if (recap__fake.dot_driver_style)
        write_driver_style_dot(out, g);
      else
        write_simple_dot(out, g);
      if (ferror(out) | (fclose(out) != 0))
        recap__fake_note(&f, RECAP_ERROR_IO, "cudaGraphDebugDotPrint: writing \"%s\" failed", path);
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- inspection ------------------------------------------------------------------------- */

static recap_region_kind_t region_kind_of(const fake_node_t *n) {
  switch (n->cond_kind) {
    case RECAP__COND_IF: return n->branches == 2 ? RECAP_REGION_IF_ELSE : RECAP_REGION_IF;
    case RECAP__COND_WHILE: return RECAP_REGION_WHILE;
    case RECAP__COND_SWITCH: return RECAP_REGION_SWITCH;
  }
  return RECAP_REGION_WHILE;
}

/* Fill info->nodes from *next on with nodes (those of a body of the conditional node at index
 * parent, branch `branch`; parent SIZE_MAX: the graph's own), then the bodies of their
 * conditional nodes, by recap/inspect.h's layout rule. False when out of host memory. */
static bool inspect_fill(recap_graph_info_t *info, const fake_nodes_t *nodes, size_t parent,
                         unsigned branch, size_t *next) {
  size_t base = *next, n = nodes->count;
  *next += n;
  /* Each node waits for at most two others of its list (dep, after): count the dependents
   * first. */
  for (size_t i = 0; i < n; i++) {
    if (nodes->v[i].dep) info->nodes[base + nodes->v[i].dep - 1].dependent_count++;
    if (nodes->v[i].after) info->nodes[base + nodes->v[i].after - 1].dependent_count++;
  }
  for (size_t i = 0; i < n; i++) {
    const fake_node_t *src = &nodes->v[i];
    recap_graph_node_t *dst = &info->nodes[base + i];
    dst->type = src->type;
    dst->parent = parent;
    dst->branch = branch;
    if (src->type == RECAP_NODE_KERNEL) {
      for (int d = 0; d < 3; d++) {
        dst->grid[d] = src->grid[0] ? src->grid[d] : 1;
        dst->block[d] = src->block[0] ? src->block[d] : 1;
      }
      if (src->name && !(dst->kernel_name = recap__copy_string(src->name))) return false;
    }
    if (src->type == RECAP_NODE_MEMCPY || src->type == RECAP_NODE_MEMSET) dst->bytes = src->bytes;
    if (src->type == RECAP_NODE_CONDITIONAL) {
      dst->region_kind = region_kind_of(src);
      dst->branches = src->branches;
    }
    size_t waits = (src->dep != 0) + (src->after != 0);
    if (waits) {
      if (!(dst->dependencies = recap__host_malloc(waits * sizeof *dst->dependencies)))
        return false;
      if (src->dep) dst->dependencies[dst->dependency_count++] = base + src->dep - 1;
      if (src->after) dst->dependencies[dst->dependency_count++] = base + src->after - 1;
      info->edge_count += waits;
    }
    if (dst->dependent_count) {
      if (!(dst->dependents = recap__host_malloc(dst->dependent_count * sizeof *dst->dependents)))
        return false;
      dst->dependent_count = 0; /* counted again as they are filled in below */
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (nodes->v[i].dep) {
      recap_graph_node_t *waited = &info->nodes[base + nodes->v[i].dep - 1];
      waited->dependents[waited->dependent_count++] = base + i;
    }
    if (nodes->v[i].after) {
      recap_graph_node_t *waited = &info->nodes[base + nodes->v[i].after - 1];
      waited->dependents[waited->dependent_count++] = base + i;
    }
  }
  for (size_t i = 0; i < n; i++)
    for (unsigned b = 0; b < nodes->v[i].branches; b++)
      if (!inspect_fill(info, &nodes->v[i].bodies[b]->nodes, base + i, b, next)) return false;
  return true;
}

recap_status_t recap__fake_op_graph_inspect(recap_cuda_graph_t graph, recap_graph_info_t *info) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(graph);
  size_t n = g ? recap__fake_nodes_count_deep(&g->nodes) : 0;
  if (!info) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "graph inspection: info is NULL");
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphGetNodes", (const void *)graph, "graph");
  } else if (n > 0) {
    size_t next = 0;
    bool ok = (info->nodes = recap__host_calloc(n, sizeof *info->nodes)) != NULL;
    if (ok) {
      info->node_count = n;
      ok = inspect_fill(info, &g->nodes, SIZE_MAX, 0, &next);
    }
    if (!ok) {
      recap__graph_info_clear(info);
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY, "graph inspection: out of host memory");
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- debug aids: node lists and what nodes read ----------------------------------------- */

static recap__graph_node_t node_handle(const fake_node_t *n) {
  return (recap__graph_node_t)(uintptr_t)n->handle;
}

/* The handles of nodes into a malloc'ed array; false when out of host memory. */
static bool handles_of(const fake_nodes_t *nodes, recap__graph_node_t **out, size_t *count) {
  *out = NULL;
  *count = 0;
  if (nodes->count == 0) return true;
  recap__graph_node_t *list = recap__host_malloc(nodes->count * sizeof *list);
  if (!list) return false;
  for (size_t i = 0; i < nodes->count; i++) list[i] = node_handle(&nodes->v[i]);
  *out = list;
  *count = nodes->count;
  return true;
}

/* The capture's graph: the one stream_end_capture (or capture_pause) will hand out, or the
 * graph given to capture_to_graph; the nodes are all of that graph's so far. */
recap_status_t recap__fake_op_capture_nodes(recap_stream_t stream, recap_cuda_graph_t *graph,
                                            recap__graph_node_t **nodes, size_t *count) {
  RECAP__ARG(graph && nodes && count, "capture node list: an out-parameter is NULL");
  *graph = NULL;
  *nodes = NULL;
  *count = 0;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamGetCaptureInfo", stream);
  } else if (!s->capture || s->capture->invalidated) {
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_USAGE,
        "cudaStreamGetCaptureInfo(stream %p): the stream takes part in no active capture (%s)",
        (void *)stream, s->capture ? "its capture was invalidated" : "not capturing");
  } else if (!handles_of(&s->capture->graph->nodes, nodes, count)) {
    recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                     "capture node list: out of host memory in the fake");
  } else {
    *graph = (recap_cuda_graph_t)s->capture->graph;
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_graph_nodes(recap_cuda_graph_t graph, recap__graph_node_t **nodes,
                                          size_t *count) {
  RECAP__ARG(nodes && count, "graph node list: an out-parameter is NULL");
  *nodes = NULL;
  *count = 0;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(graph);
  if (!g)
    recap__fake_note_bad_graph(&f, "cudaGraphGetNodes", (const void *)graph, "graph");
  else if (!handles_of(&g->nodes, nodes, count))
    recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                     "graph node list: out of host memory in the fake");
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_graph_reads_check(void) { return RECAP_SUCCESS; }

static bool reads_push(recap__graph_read_t **v, size_t *count, size_t *cap,
                       recap__graph_read_t read) {
  if (!read.ptr) return true;
  if (*count == *cap) {
    size_t grown_cap = *cap ? *cap * 2 : 16;
    recap__graph_read_t *grown = recap__host_realloc(*v, grown_cap * sizeof *grown);
    if (!grown) return false;
    *v = grown;
    *cap = grown_cap;
  }
  (*v)[(*count)++] = read;
  return true;
}

/* Push the reads of nodes: as node `top` with nested set when top is not SIZE_MAX (they lie in
 * a body or the child graph of that top-level node), else each as its own node. */
static bool nodes_reads_push(const fake_nodes_t *nodes, size_t top, recap__graph_read_t **v,
                             size_t *n, size_t *cap) {
  bool ok = true, nested = top != SIZE_MAX;
  for (size_t i = 0; ok && i < nodes->count; i++) {
    const fake_node_t *node = &nodes->v[i];
    size_t at = nested ? top : i;
    for (size_t k = 0; ok && k < node->arg_count; k++)
      ok = recap__fake_param_size(node->narrow, k) != 8 ||
           reads_push(v, n, cap,
                      (recap__graph_read_t){.node = at,
                                            .ptr = node->args[k],
                                            .kind = RECAP__READ_KERNEL_ARG,
                                            .offset = 8 * k,
                                            .param = (uint32_t)k,
                                            .nested = nested});
    if (node->type == RECAP_NODE_MEMCPY)
      ok = ok &&
           reads_push(v, n, cap,
                      (recap__graph_read_t){.node = at,
                                            .ptr = node->src,
                                            .kind = RECAP__READ_COPY_SRC,
                                            .nested = nested}) &&
           reads_push(v, n, cap,
                      (recap__graph_read_t){.node = at,
                                            .ptr = node->dst,
                                            .kind = RECAP__READ_COPY_DST,
                                            .nested = nested});
    else if (node->type == RECAP_NODE_MEMSET)
      ok = ok && reads_push(v, n, cap,
                            (recap__graph_read_t){.node = at,
                                                  .ptr = node->dst,
                                                  .kind = RECAP__READ_MEMSET_DST,
                                                  .nested = nested});
    for (unsigned b = 0; ok && b < node->branches; b++)
      ok = nodes_reads_push(&node->bodies[b]->nodes, at, v, n, cap);
    if (ok && node->child) ok = nodes_reads_push(&node->child->nodes, at, v, n, cap);
  }
  return ok;
}

/* Each argument of a fake kernel is one 8-byte parameter: word k is parameter k, at byte 8k.
 * What the bodies of a conditional node and the copy a child graph node runs read is nested in
 * that node. */
bool recap__fake_nodes_reads(const fake_nodes_t *nodes, recap__graph_read_t **reads,
                             size_t *count) {
  recap__graph_read_t *v = NULL;
  size_t n = 0, cap = 0;
  bool ok = nodes_reads_push(nodes, SIZE_MAX, &v, &n, &cap);
  if (!ok) {
    recap__host_free(v);
    v = NULL;
    n = 0;
  }
  *reads = v;
  *count = n;
  return ok;
}

recap_status_t recap__fake_op_graph_reads(recap_cuda_graph_t graph, recap__graph_read_t **reads,
                                          size_t *count) {
  RECAP__ARG(reads && count, "graph reads: an out-parameter is NULL");
  *reads = NULL;
  *count = 0;
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(graph);
  if (!g)
    recap__fake_note_bad_graph(&f, "graph reads", (const void *)graph, "graph");
  else if (!recap__fake_nodes_reads(&g->nodes, reads, count))
    recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY, "graph reads: out of host memory in the fake");
  return recap__fake_unlock_and_report(&f);
}
