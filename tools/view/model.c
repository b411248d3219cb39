/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * model.c — the viewer's model of a graph: building it (node by node, or from
 * recap_graph_inspect's result), checking it, and the small helpers the writers share.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "view_internal.h"

/* ==========================================================================================
 * Strings and messages
 * ======================================================================================== */

void recap__view_putn(recap__view_buf_t *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) {
      b->failed = true;
      return;
    }
    b->data = data;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void recap__view_puts(recap__view_buf_t *b, const char *s) { recap__view_putn(b, s, strlen(s)); }

void recap__view_printf(recap__view_buf_t *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    recap__view_putn(b, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->failed = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  recap__view_putn(b, big, (size_t)n);
  free(big);
}

int recap__view_fail(char *err, size_t err_size, const char *fmt, ...) {
  if (err && err_size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
  }
  return -1;
}

void recap__view_format_bytes(char *out, size_t size, uint64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(out, size, "%" PRIu64 " B", bytes);
  else
    snprintf(out, size, "%.1f %s", v, units[u]);
}

/* ==========================================================================================
 * Presentation shared by the writers
 * ======================================================================================== */

/* The library's node types, in its order (recap/inspect.h). */
static const char *const known_types[] = {
#define X_TYPE_NAME(name, text) text,
    RECAP_NODE_TYPE_MAP(X_TYPE_NAME)
#undef X_TYPE_NAME
};
#define KNOWN_TYPE_COUNT (sizeof known_types / sizeof known_types[0])

/* Fill colour per type: kernels blue, copies and sets orange, events red, memory green. A type
 * added to the library later is drawn grey until it gets one. */
static const char *const type_fill[RECAP_NODE_TYPE_COUNT] = {
    [RECAP_NODE_KERNEL] = "#9ecae1",      [RECAP_NODE_MEMCPY] = "#fdae6b",
    [RECAP_NODE_MEMSET] = "#fdd0a2",      [RECAP_NODE_HOST] = "#a1d99b",
    [RECAP_NODE_GRAPH] = "#bcbddc",       [RECAP_NODE_EMPTY] = "#f0f0f0",
    [RECAP_NODE_WAIT_EVENT] = "#fcbba1",  [RECAP_NODE_EVENT_RECORD] = "#fc9272",
    [RECAP_NODE_MEM_ALLOC] = "#c7e9c0",   [RECAP_NODE_MEM_FREE] = "#e5f5e0",
    [RECAP_NODE_CONDITIONAL] = "#dadaeb", [RECAP_NODE_OTHER] = "#d9d9d9",
};

const char *recap__view_fill_of(const char *type) {
  for (size_t t = 0; t < KNOWN_TYPE_COUNT; t++)
    if (strcmp(type, known_types[t]) == 0 && type_fill[t]) return type_fill[t];
  return "#d9d9d9";
}

void recap__view_count_regions(const recap_view_graph_t *g, size_t *conditional,
                               size_t *in_bodies) {
  *conditional = *in_bodies = 0;
  for (size_t i = 0; i < g->count; i++) {
    *conditional += strcmp(g->nodes[i].type, "conditional") == 0;
    *in_bodies += g->nodes[i].parent != SIZE_MAX;
  }
}

size_t recap__view_count_types(const recap_view_graph_t *g, recap__view_type_count_t **types) {
  recap__view_type_count_t *counts = calloc(KNOWN_TYPE_COUNT + g->count, sizeof *counts);
  if (!counts) return (size_t)-1;
  size_t n = 0;
  for (size_t t = 0; t < KNOWN_TYPE_COUNT; t++) counts[n++].type = known_types[t];
  for (size_t i = 0; i < g->count; i++) {
    size_t t = 0;
    while (t < n && strcmp(counts[t].type, g->nodes[i].type) != 0) t++;
    if (t == n) counts[n++].type = g->nodes[i].type;
    counts[t].count++;
  }
  size_t kept = 0; /* only the types present */
  for (size_t t = 0; t < n; t++)
    if (counts[t].count) counts[kept++] = counts[t];
  *types = counts;
  return kept;
}

void recap__view_describe_shape(const recap_view_node_t *n, bool compact, recap__view_buf_t *out) {
  char size[32];
  if (n->has_launch) {
    recap__view_printf(out, "grid %ux%ux%u%s block %ux%ux%u", n->grid[0], n->grid[1], n->grid[2],
                       compact ? "" : ",", n->block[0], n->block[1], n->block[2]);
    if (n->shared_bytes > 0 && !compact) {
      recap__view_format_bytes(size, sizeof size, n->shared_bytes);
      recap__view_printf(out, ", smem %s", size);
    }
  } else if (n->region_kind) {
    if (!compact) recap__view_printf(out, "%s, ", n->region_kind);
    recap__view_printf(out, "%u branch%s", n->branches, n->branches == 1 ? "" : "es");
  } else if (n->bytes > 0) {
    recap__view_format_bytes(size, sizeof size, n->bytes);
    recap__view_puts(out, size);
  }
}

const char *recap__view_scope_of(const recap_view_node_t *n) {
  return n->annotation_path ? n->annotation_path : n->annotation;
}

/* ==========================================================================================
 * Building the model
 * ======================================================================================== */

void recap_view_graph_init(recap_view_graph_t *g) { memset(g, 0, sizeof *g); }

void recap_view_graph_free(recap_view_graph_t *g) {
  if (!g) return;
  for (size_t i = 0; i < g->count; i++) {
    recap_view_node_t *n = &g->nodes[i];
    free(n->type);
    free(n->kernel_name);
    free(n->pretty_name);
    free(n->annotation);
    free(n->annotation_path);
    free(n->region_kind);
    free(n->deps);
    free(n->succ);
    for (size_t k = 0; k < n->param_count; k++) free(n->params[k]);
    free(n->params);
    for (size_t k = 0; k < n->graph_param_count; k++) free(n->graph_params[k]);
    free(n->graph_params);
    free(n->set_alone);
    free(n->allocs);
  }
  free(g->nodes);
  if (g->edges)
    for (size_t e = 0; e < g->edge_count; e++) free(g->edges[e].points);
  free(g->edges);
  for (size_t c = 0; c < g->cluster_count; c++) free(g->clusters[c].path);
  free(g->clusters);
  free(g->pool);
  memset(g, 0, sizeof *g);
}

int recap_view_set_string(char **field, const char *s) {
  char *copy = NULL;
  if (s) {
    size_t n = strlen(s) + 1;
    copy = malloc(n);
    if (!copy) return -1;
    memcpy(copy, s, n);
  }
  free(*field);
  *field = copy;
  return 0;
}

recap_view_node_t *recap_view_add_node(recap_view_graph_t *g, const char *type) {
  if (g->count == g->capacity) {
    size_t cap = g->capacity ? 2 * g->capacity : 16;
    recap_view_node_t *nodes = realloc(g->nodes, cap * sizeof *nodes);
    if (!nodes) return NULL;
    g->nodes = nodes;
    g->capacity = cap;
  }
  recap_view_node_t *n = &g->nodes[g->count];
  memset(n, 0, sizeof *n);
  n->parent = SIZE_MAX;
  n->cluster = -1;
  if (recap_view_set_string(&n->type, type ? type : "other") != 0) return NULL;
  g->count++;
  return n;
}

int recap_view_add_dependency(recap_view_graph_t *g, size_t to, size_t from) {
  if (to >= g->count) return -1;
  recap_view_node_t *n = &g->nodes[to];
  size_t *deps = realloc(n->deps, (n->dep_count + 1) * sizeof *deps);
  if (!deps) return -1;
  deps[n->dep_count++] = from;
  n->deps = deps;
  return 0;
}

static bool is_conditional(const recap_view_node_t *n) {
  return strcmp(n->type, "conditional") == 0;
}

/* Where node i sits, for messages: "the graph itself" or "body 1 of node 4". */
static void place_of(const recap_view_node_t *n, char *out, size_t size) {
  if (n->parent == SIZE_MAX)
    snprintf(out, size, "the graph itself");
  else
    snprintf(out, size, "body %u of node %zu", n->branch, n->parent);
}

/* Regions nest the way recap_graph_inspect lays them out: a body's nodes follow its
 * conditional node, name one of its branches, and wait only for nodes of the same body. */
static int check_regions(const recap_view_graph_t *g, size_t i, char *err, size_t err_size) {
  const recap_view_node_t *n = &g->nodes[i];
  if (!is_conditional(n) && (n->region_kind || n->branches))
    return recap__view_fail(err, err_size,
                            "node %zu: a %s node with a \"region_kind\" or \"branches\"; only "
                            "conditional nodes have them",
                            i, n->type);
  if (n->parent == SIZE_MAX) {
    if (n->branch)
      return recap__view_fail(err, err_size,
                              "node %zu: \"branch\" is %u but the node is in no body (its "
                              "\"parent\" is null)",
                              i, n->branch);
  } else {
    if (n->parent >= i)
      return recap__view_fail(err, err_size,
                              "node %zu: \"parent\" is %zu, but a body's nodes follow their "
                              "conditional node (the parent's index must be smaller)",
                              i, n->parent);
    const recap_view_node_t *p = &g->nodes[n->parent];
    if (!is_conditional(p))
      return recap__view_fail(err, err_size,
                              "node %zu: \"parent\" is node %zu, a %s node; only a conditional "
                              "node has bodies",
                              i, n->parent, p->type);
    if (n->branch >= p->branches)
      return recap__view_fail(err, err_size,
                              "node %zu: \"branch\" is %u, but its parent, node %zu, has %u "
                              "branch%s",
                              i, n->branch, n->parent, p->branches, p->branches == 1 ? "" : "es");
  }
  for (size_t k = 0; k < n->dep_count; k++) {
    const recap_view_node_t *d = &g->nodes[n->deps[k]];
    if (d->parent != n->parent || d->branch != n->branch) {
      char mine[64], theirs[64];
      place_of(n, mine, sizeof mine);
      place_of(d, theirs, sizeof theirs);
      return recap__view_fail(err, err_size,
                              "node %zu (in %s) waits for node %zu (in %s); a dependency joins "
                              "nodes of the same body",
                              i, mine, n->deps[k], theirs);
    }
  }
  return 0;
}

int recap_view_finish(recap_view_graph_t *g, char *err, size_t err_size) {
  g->edge_count = 0;
  for (size_t i = 0; i < g->count; i++) {
    recap_view_node_t *n = &g->nodes[i];
    free(n->succ);
    n->succ = NULL;
    n->succ_count = 0;
    for (size_t k = 0; k < n->dep_count; k++) {
      if (n->deps[k] >= g->count)
        return recap__view_fail(err, err_size,
                                "node %zu waits for node %zu, but the graph has "
                                "%zu node%s",
                                i, n->deps[k], g->count, g->count == 1 ? "" : "s");
      if (n->deps[k] == i) return recap__view_fail(err, err_size, "node %zu waits for itself", i);
    }
    if (check_regions(g, i, err, err_size) != 0) return -1;
    g->edge_count += n->dep_count;
  }
  for (size_t i = 0; i < g->count; i++)
    for (size_t k = 0; k < g->nodes[i].dep_count; k++) g->nodes[g->nodes[i].deps[k]].succ_count++;
  for (size_t i = 0; i < g->count; i++) {
    recap_view_node_t *n = &g->nodes[i];
    n->succ = calloc(n->succ_count ? n->succ_count : 1, sizeof *n->succ);
    if (!n->succ) return recap__view_fail(err, err_size, "out of memory");
    n->succ_count = 0;
  }
  for (size_t i = 0; i < g->count; i++)
    for (size_t k = 0; k < g->nodes[i].dep_count; k++) {
      recap_view_node_t *d = &g->nodes[g->nodes[i].deps[k]];
      d->succ[d->succ_count++] = i;
    }

  /* No cycle: Kahn's order must reach every node. */
  size_t *pending = calloc(g->count + 1, sizeof *pending);
  size_t *queue = calloc(g->count + 1, sizeof *queue);
  if (!pending || !queue) {
    free(pending);
    free(queue);
    return recap__view_fail(err, err_size, "out of memory");
  }
  size_t head = 0, tail = 0;
  for (size_t i = 0; i < g->count; i++) {
    pending[i] = g->nodes[i].dep_count;
    if (pending[i] == 0) queue[tail++] = i;
  }
  while (head < tail) {
    const recap_view_node_t *n = &g->nodes[queue[head++]];
    for (size_t k = 0; k < n->succ_count; k++)
      if (--pending[n->succ[k]] == 0) queue[tail++] = n->succ[k];
  }
  size_t stuck = 0;
  while (tail < g->count && pending[stuck] == 0) stuck++;
  free(pending);
  free(queue);
  if (tail < g->count)
    return recap__view_fail(err, err_size,
                            "the dependencies form a cycle (through node %zu); a CUDA graph has "
                            "none",
                            stuck);

  for (size_t i = 0; i < g->count; i++) {
    recap_view_node_t *n = &g->nodes[i];
    if (!n->kernel_name || n->pretty_name) continue;
    n->pretty_name = recap_view_demangle(n->kernel_name);
    if (!n->pretty_name && recap_view_set_string(&n->pretty_name, n->kernel_name) != 0)
      return recap__view_fail(err, err_size, "out of memory");
  }
  return 0;
}

int recap_view_from_info(recap_view_graph_t *g, const recap_graph_info_t *info, char *err,
                         size_t err_size) {
  recap_view_graph_init(g);
  if (!info) return recap__view_fail(err, err_size, "no graph info");
  g->tools_ids_available = info->tools_ids_available;
  for (size_t i = 0; i < info->node_count; i++) {
    const recap_graph_node_t *in = &info->nodes[i];
    recap_view_node_t *n = recap_view_add_node(g, recap_node_type_name(in->type));
    if (!n || recap_view_set_string(&n->kernel_name, in->kernel_name) != 0 ||
        recap_view_set_string(&n->annotation, in->annotation) != 0 ||
        recap_view_set_string(&n->annotation_path, in->annotation_path) != 0 ||
        recap_view_set_string(&n->set_alone, in->set_alone) != 0)
      goto out_of_memory;
    if (in->graph_param_count) {
      if (!(n->graph_params = calloc(in->graph_param_count, sizeof *n->graph_params)))
        goto out_of_memory;
      for (size_t k = 0; k < in->graph_param_count; k++)
        if (recap_view_set_string(&n->graph_params[n->graph_param_count++], in->graph_params[k]) !=
            0)
          goto out_of_memory;
    }
    if (in->type == RECAP_NODE_KERNEL) {
      n->has_launch = 1;
      memcpy(n->grid, in->grid, sizeof n->grid);
      memcpy(n->block, in->block, sizeof n->block);
      n->shared_bytes = in->shared_bytes;
    }
    n->bytes = in->bytes;
    n->parent = in->parent;
    n->branch = in->branch;
    if (in->type == RECAP_NODE_CONDITIONAL) {
      if (recap_view_set_string(&n->region_kind, recap_region_kind_name(in->region_kind)) != 0)
        goto out_of_memory;
      n->branches = in->branches;
    }
    n->has_tools_id = in->has_tools_id;
    n->tools_id = in->tools_id;
    for (size_t k = 0; k < in->dependency_count; k++)
      if (recap_view_add_dependency(g, i, in->dependencies[k]) != 0) goto out_of_memory;
  }
  if (recap_view_finish(g, err, err_size) != 0) {
    recap_view_graph_free(g);
    return -1;
  }
  return 0;
out_of_memory:
  recap_view_graph_free(g);
  return recap__view_fail(err, err_size, "out of memory");
}

int recap_view_add_liveness(recap_view_graph_t *g, const recap_liveness_input_t *inputs,
                            size_t count, char *err, size_t err_size) {
  for (size_t i = 0; i < count; i++) {
    const recap_liveness_input_t *in = &inputs[i];
    if (in->node >= g->count)
      return recap__view_fail(err, err_size,
                              "liveness input %zu names node %zu, but the graph "
                              "has %zu nodes",
                              i, in->node, g->count);
    recap_view_node_t *n = &g->nodes[in->node];
    recap_view_alloc_t *allocs = realloc(n->allocs, (n->alloc_count + 1) * sizeof *allocs);
    if (!allocs) return recap__view_fail(err, err_size, "out of memory");
    n->allocs = allocs;
    allocs[n->alloc_count++] = (recap_view_alloc_t){
        .base = (uint64_t)(uintptr_t)in->base,
        .size = in->bytes,
        .generation = in->generation,
        .reader_count = in->reader_count,
        .alloc_site = (uint64_t)(uintptr_t)in->alloc_site,
        .freed = in->freed_before_capture_end,
    };
  }
  return 0;
}

void recap_view_body_label(const recap_view_node_t *conditional, unsigned branch, char *out,
                           size_t size) {
  const char *kind = conditional->region_kind ? conditional->region_kind : "";
  if (strcmp(kind, "while") == 0 && branch == 0)
    snprintf(out, size, "while body");
  else if ((strcmp(kind, "if") == 0 || strcmp(kind, "if_else") == 0) && branch == 0)
    snprintf(out, size, "if");
  else if (strcmp(kind, "if_else") == 0 && branch == 1)
    snprintf(out, size, "else");
  else if (strcmp(kind, "switch") == 0)
    snprintf(out, size, "case %u", branch);
  else
    snprintf(out, size, "branch %u", branch);
}

char *recap__view_box_name(const recap_view_node_t *n) {
  /* A conditional node is named by what it does: "while", "switch". */
  const char *name = n->pretty_name ? n->pretty_name : n->region_kind ? n->region_kind : n->type;
  return recap_view_short_name(name, RECAP__VIEW_NAME_CHARS);
}

void recap__view_box_detail(const recap_view_node_t *n, recap__view_buf_t *out) {
  recap__view_describe_shape(n, true, out);
}
