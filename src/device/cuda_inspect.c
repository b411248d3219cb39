/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_inspect.c — what the CUDA seam tells about a graph: inspection (every node's type,
 * kernel name and launch shape, copy and memset sizes, and the edges, as recap_graph_info_t),
 * the node lists of a capture and of a graph, and every pointer-like value the graph's nodes
 * read or write (kernel argument words through the driver, the ends of copies and memsets) for
 * the input-liveness checks and, through the same walk, the patch plans of cuda_patch.c.
 */
#include "device/cuda_inspect.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "core/text.h"
#include "device/cuda_cond.h"
#include "device/cuda_error.h"
#include "device/driver.h"

/* Child graphs and region bodies nest; deeper than this is not a graph anyone captures (the
 * region layer allows RECAP_REGION_MAX_DEPTH regions, each of which may hold child graphs). */
enum { MAX_NEST_DEPTH = 64 };

static recap_status_t list_nodes(cudaGraph_t graph, recap__graph_node_t **nodes, size_t *count);

/* ---- node counts ---------------------------------------------------------------------------- */

static recap_status_t count_nodes(cudaGraph_t graph, int depth, size_t *count) {
  size_t n = 0;
  CUDA_TRY_F(cudaGraphGetNodes(graph, NULL, &n), "cudaGraphGetNodes(graph %p, NULL)",
             (void *)graph);
  *count += n;
  /* The common case, a graph without regions, costs one call. */
  if (n == 0 || depth >= MAX_NEST_DEPTH || !recap__cuda_cond_any_in(graph)) return RECAP_SUCCESS;
  recap__graph_node_t *nodes = NULL;
  RECAP__CHECK(list_nodes(graph, &nodes, &n));
  recap_status_t st = RECAP_SUCCESS;
  for (size_t i = 0; i < n && st == RECAP_SUCCESS; i++) {
    recap__cond_kind_t kind;
    unsigned branches = 0;
    recap_cuda_graph_t *bodies = NULL;
    if (!recap__cuda_cond_find(nodes[i], &kind, &branches, &bodies)) continue;
    for (unsigned b = 0; b < branches && st == RECAP_SUCCESS; b++)
      st = count_nodes(bodies[b], depth + 1, count);
    recap__host_free(bodies);
  }
  recap__host_free(nodes);
  return st;
}

recap_status_t recap__cuda_graph_node_count(recap_cuda_graph_t graph, size_t *count) {
  *count = 0;
  size_t n = 0;
  RECAP__CHECK(count_nodes(graph, 0, &n));
  *count = n;
  return RECAP_SUCCESS;
}

/* ---- graph inspection --------------------------------------------------------------------- */

static recap_node_type_t node_type_of(enum cudaGraphNodeType t) {
  switch (t) {
    case cudaGraphNodeTypeKernel: return RECAP_NODE_KERNEL;
    case cudaGraphNodeTypeMemcpy: return RECAP_NODE_MEMCPY;
    case cudaGraphNodeTypeMemset: return RECAP_NODE_MEMSET;
    case cudaGraphNodeTypeHost: return RECAP_NODE_HOST;
    case cudaGraphNodeTypeGraph: return RECAP_NODE_GRAPH;
    case cudaGraphNodeTypeEmpty: return RECAP_NODE_EMPTY;
    case cudaGraphNodeTypeWaitEvent: return RECAP_NODE_WAIT_EVENT;
    case cudaGraphNodeTypeEventRecord: return RECAP_NODE_EVENT_RECORD;
    case cudaGraphNodeTypeMemAlloc: return RECAP_NODE_MEM_ALLOC;
    case cudaGraphNodeTypeMemFree: return RECAP_NODE_MEM_FREE;
    case cudaGraphNodeTypeConditional: return RECAP_NODE_CONDITIONAL;
    default: return RECAP_NODE_OTHER; /* external semaphores, and kinds newer than recap */
  }
}

static size_t mul_sat(size_t a, size_t b) {
  if (a != 0 && b > SIZE_MAX / a) return SIZE_MAX;
  return a * b;
}

static recap_status_t host_oom(const char *what) {
  return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "graph inspection: out of host memory for %s",
                         what);
}

/* Bytes an array element takes, from its channel format. */
static recap_status_t array_element_bytes(cudaArray_t array, size_t *bytes) {
  struct cudaChannelFormatDesc desc;
  struct cudaExtent extent;
  unsigned int flags = 0;
  memset(&desc, 0, sizeof desc);
  CUDA_TRY_F(cudaArrayGetInfo(&desc, &extent, &flags, array), "cudaArrayGetInfo(array %p)",
             (void *)array);
  int bits = desc.x + desc.y + desc.z + desc.w;
  *bytes = bits > 0 ? (size_t)bits / 8 : 1;
  return RECAP_SUCCESS;
}

static recap_status_t inspect_node(cudaGraphNode_t node, recap_graph_node_t *out) {
  enum cudaGraphNodeType t;
  CUDA_TRY_F(cudaGraphNodeGetType(node, &t), "cudaGraphNodeGetType(node %p)", (void *)node);
  out->type = node_type_of(t);
  switch (t) {
    case cudaGraphNodeTypeKernel: {
      recap__kernel_node_info_t k;
      RECAP__CHECK(recap__driver_kernel_node_info(node, &k));
      for (int i = 0; i < 3; i++) {
        out->grid[i] = k.grid[i];
        out->block[i] = k.block[i];
      }
      out->shared_bytes = k.shared_bytes;
      if (k.name && !(out->kernel_name = recap__copy_string(k.name)))
        return host_oom("a kernel name");
      break;
    }
    case cudaGraphNodeTypeMemcpy: {
      struct cudaMemcpy3DParms p;
      memset(&p, 0, sizeof p);
      CUDA_TRY_F(cudaGraphMemcpyNodeGetParams(node, &p), "cudaGraphMemcpyNodeGetParams(node %p)",
                 (void *)node);
      /* The extent's width is in bytes for linear memory and in elements for a CUDA array. */
      size_t element = 1;
      if (p.srcArray)
        RECAP__CHECK(array_element_bytes(p.srcArray, &element));
      else if (p.dstArray)
        RECAP__CHECK(array_element_bytes(p.dstArray, &element));
      out->bytes =
          mul_sat(mul_sat(mul_sat(p.extent.width, element), p.extent.height), p.extent.depth);
      break;
    }
    case cudaGraphNodeTypeMemset: {
      struct cudaMemsetParams p;
      memset(&p, 0, sizeof p);
      CUDA_TRY_F(cudaGraphMemsetNodeGetParams(node, &p), "cudaGraphMemsetNodeGetParams(node %p)",
                 (void *)node);
      out->bytes = mul_sat(mul_sat(p.width, p.height), p.elementSize);
      break;
    }
    case cudaGraphNodeTypeMemAlloc: {
      struct cudaMemAllocNodeParams p;
      memset(&p, 0, sizeof p);
      CUDA_TRY_F(cudaGraphMemAllocNodeGetParams(node, &p),
                 "cudaGraphMemAllocNodeGetParams(node %p)", (void *)node);
      out->bytes = p.bytesize;
      break;
    }
    default: break;
  }
  return RECAP_SUCCESS;
}

/* A node handle and its index, sorted by handle to map edge ends to indices. */
typedef struct node_slot {
  uintptr_t handle;
  size_t index;
} node_slot_t;

static int compare_slots(const void *a, const void *b) {
  uintptr_t x = ((const node_slot_t *)a)->handle, y = ((const node_slot_t *)b)->handle;
  return (x > y) - (x < y);
}

static int compare_indices(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

static bool index_of(const node_slot_t *slots, size_t n, cudaGraphNode_t node, size_t *index) {
  node_slot_t key = {(uintptr_t)node, 0};
  const node_slot_t *hit = bsearch(&key, slots, n, sizeof *slots, compare_slots);
  if (!hit) return false;
  *index = hit->index;
  return true;
}

/* The edges of graph, whose n nodes are info->nodes[base .. base + n): indices are global. */
static recap_status_t inspect_edges(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t n,
                                    size_t base, recap_graph_info_t *info) {
  recap_status_t st = RECAP_SUCCESS;
  node_slot_t *slots = NULL;
  cudaGraphNode_t *from = NULL, *to = NULL;
  cudaGraphEdgeData *data = NULL;
  size_t *from_index = NULL, *to_index = NULL;

  size_t edges = 0;
  CUDA_TRY_F(cudaGraphGetEdges(graph, NULL, NULL, NULL, &edges),
             "cudaGraphGetEdges(graph %p, NULL) to count the edges", (void *)graph);
  if (edges == 0) return RECAP_SUCCESS;

  slots = recap__host_malloc(n * sizeof *slots);
  from = recap__host_calloc(edges, sizeof *from);
  to = recap__host_calloc(edges, sizeof *to);
  /* Edge data too: without it CUDA refuses graphs whose edges carry ports
   * (cudaErrorLossyQuery). */
  data = recap__host_calloc(edges, sizeof *data);
  from_index = recap__host_malloc(edges * sizeof *from_index);
  to_index = recap__host_malloc(edges * sizeof *to_index);
  if (!slots || !from || !to || !data || !from_index || !to_index) {
    st = host_oom("the graph's edges");
    goto done;
  }
  for (size_t i = 0; i < n; i++) slots[i] = (node_slot_t){(uintptr_t)nodes[i], i};
  qsort(slots, n, sizeof *slots, compare_slots);

  cudaError_t err = cudaGraphGetEdges(graph, from, to, data, &edges);
  if (err != cudaSuccess) {
    st = recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaGraphGetEdges(graph %p, %zu edges)",
                          (void *)graph, edges);
    goto done;
  }
  for (size_t e = 0; e < edges; e++) {
    if (!index_of(slots, n, from[e], &from_index[e]) || !index_of(slots, n, to[e], &to_index[e])) {
      st = RECAP__ERROR_AT(RECAP_ERROR_INTERNAL,
                           "graph inspection: edge %zu of graph %p joins node %p to node %p, "
                           "not both among the %zu nodes cudaGraphGetNodes listed",
                           e, (void *)graph, (void *)from[e], (void *)to[e], n);
      goto done;
    }
    from_index[e] += base;
    to_index[e] += base;
    info->nodes[to_index[e]].dependency_count++;
    info->nodes[from_index[e]].dependent_count++;
  }
  for (size_t i = base; i < base + n; i++) {
    recap_graph_node_t *node = &info->nodes[i];
    if (node->dependency_count && !(node->dependencies = recap__host_malloc(
                                        node->dependency_count * sizeof *node->dependencies))) {
      st = host_oom("a node's dependencies");
      goto done;
    }
    if (node->dependent_count && !(node->dependents = recap__host_malloc(
                                       node->dependent_count * sizeof *node->dependents))) {
      st = host_oom("a node's dependents");
      goto done;
    }
    /* Counted again below while filling. */
    node->dependency_count = 0;
    node->dependent_count = 0;
  }
  for (size_t e = 0; e < edges; e++) {
    recap_graph_node_t *src = &info->nodes[from_index[e]], *dst = &info->nodes[to_index[e]];
    dst->dependencies[dst->dependency_count++] = from_index[e];
    src->dependents[src->dependent_count++] = to_index[e];
  }
  for (size_t i = base; i < base + n; i++) {
    recap_graph_node_t *node = &info->nodes[i];
    if (node->dependency_count > 1)
      qsort(node->dependencies, node->dependency_count, sizeof(size_t), compare_indices);
    if (node->dependent_count > 1)
      qsort(node->dependents, node->dependent_count, sizeof(size_t), compare_indices);
  }
  info->edge_count += edges;

done:
  recap__host_free(slots);
  recap__host_free(from);
  recap__host_free(to);
  recap__host_free(data);
  recap__host_free(from_index);
  recap__host_free(to_index);
  return st;
}

static recap_region_kind_t region_kind_of(recap__cond_kind_t kind, unsigned branches) {
  switch (kind) {
    case RECAP__COND_IF: return branches == 2 ? RECAP_REGION_IF_ELSE : RECAP_REGION_IF;
    case RECAP__COND_WHILE: return RECAP_REGION_WHILE;
    case RECAP__COND_SWITCH: return RECAP_REGION_SWITCH;
  }
  return RECAP_REGION_WHILE;
}

/* Fill info->nodes from *next on with graph's nodes (a body of the conditional node at index
 * parent, branch `branch`; parent SIZE_MAX: the graph's own) and edges, then the bodies of its
 * conditional nodes, by recap/inspect.h's layout rule. total: the room in info->nodes. */
static recap_status_t inspect_fill(cudaGraph_t graph, size_t parent, unsigned branch, int depth,
                                   size_t total, size_t *next, recap_graph_info_t *info) {
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  RECAP__CHECK(list_nodes(graph, &nodes, &n));
  recap_status_t st = RECAP_SUCCESS;
  size_t base = *next;
  if (n > total - base) {
    recap__host_free(nodes);
    return RECAP__ERROR_AT(RECAP_ERROR_INTERNAL,
                           "graph inspection: graph %p gained nodes while it was inspected",
                           (void *)graph);
  }
  *next += n;
  for (size_t i = 0; i < n && st == RECAP_SUCCESS; i++) {
    recap_graph_node_t *out = &info->nodes[base + i];
    out->parent = parent;
    out->branch = branch;
    st = inspect_node((cudaGraphNode_t)nodes[i], out);
  }
  if (st == RECAP_SUCCESS) st = inspect_edges(graph, (cudaGraphNode_t *)nodes, n, base, info);
  for (size_t i = 0; i < n && st == RECAP_SUCCESS; i++) {
    recap__cond_kind_t kind;
    unsigned branches = 0;
    recap_cuda_graph_t *bodies = NULL;
    if (info->nodes[base + i].type != RECAP_NODE_CONDITIONAL ||
        !recap__cuda_cond_find(nodes[i], &kind, &branches, &bodies))
      continue; /* a conditional node recap did not make shows no bodies */
    info->nodes[base + i].region_kind = region_kind_of(kind, branches);
    info->nodes[base + i].branches = branches;
    for (unsigned b = 0; b < branches && st == RECAP_SUCCESS && depth < MAX_NEST_DEPTH; b++)
      st = inspect_fill(bodies[b], base + i, b, depth + 1, total, next, info);
    recap__host_free(bodies);
  }
  recap__host_free(nodes);
  return st;
}

recap_status_t recap__cuda_graph_inspect(recap_cuda_graph_t graph, recap_graph_info_t *info) {
  RECAP__ARG(info != NULL, "graph inspection: info is NULL");
  RECAP__ARG(graph != NULL, "graph inspection: graph is NULL");
  recap_status_t st = RECAP_SUCCESS;
  size_t total = 0;
  RECAP__CHECK(count_nodes(graph, 0, &total));
  if (total > 0) {
    info->nodes = recap__host_calloc(total, sizeof *info->nodes);
    if (!info->nodes) return host_oom("the graph's nodes");
    info->node_count = total;
    size_t next = 0;
    RECAP__CHECK_GOTO(inspect_fill(graph, SIZE_MAX, 0, 0, total, &next, info), st, fail);
    /* CUDA lists fewer nodes if the graph shrank in between. */
    info->node_count = next;
  }
  /* CUDA 13.0 offers no tools ids for graph nodes: tools_id, has_tools_id and
   * tools_ids_available stay 0. */
  return RECAP_SUCCESS;

fail:
  recap__graph_info_clear(info);
  return st;
}

/* ---- debug aids: node lists and what nodes read ------------------------------------------- */

/* The nodes of graph into a malloc'ed array (NULL for an empty graph). */
static recap_status_t list_nodes(cudaGraph_t graph, recap__graph_node_t **nodes, size_t *count) {
  *nodes = NULL;
  *count = 0;
  size_t n = 0;
  CUDA_TRY_F(cudaGraphGetNodes(graph, NULL, &n), "cudaGraphGetNodes(graph %p, NULL)",
             (void *)graph);
  if (n == 0) return RECAP_SUCCESS;
  cudaGraphNode_t *list = recap__host_calloc(n, sizeof *list);
  if (!list) return host_oom("a graph's node list");
  cudaError_t err = cudaGraphGetNodes(graph, list, &n);
  if (err != cudaSuccess) {
    recap__host_free(list);
    return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaGraphGetNodes(graph %p, %zu nodes)",
                            (void *)graph, n);
  }
  *nodes = (recap__graph_node_t *)list;
  *count = n;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_capture_nodes(recap_stream_t stream, recap_cuda_graph_t *graph,
                                         recap__graph_node_t **nodes, size_t *count) {
  RECAP__ARG(graph && nodes && count, "capture node list: an out-parameter is NULL");
  *graph = NULL;
  *nodes = NULL;
  *count = 0;
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cudaGraph_t g = NULL;
  CUDA_TRY_F(cudaStreamGetCaptureInfo(stream, &st, NULL, &g, NULL, NULL, NULL),
             "cudaStreamGetCaptureInfo(stream %p, graph_out)", (void *)stream);
  if (st != cudaStreamCaptureStatusActive || !g)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamGetCaptureInfo(stream %p): the stream takes part in no "
                           "active capture (%s)",
                           (void *)stream,
                           st == cudaStreamCaptureStatusInvalidated ? "its capture was invalidated"
                                                                    : "not capturing");
  RECAP__CHECK(list_nodes(g, nodes, count));
  *graph = g;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_graph_nodes(recap_cuda_graph_t graph, recap__graph_node_t **nodes,
                                       size_t *count) {
  RECAP__ARG(nodes && count, "graph node list: an out-parameter is NULL");
  *nodes = NULL;
  *count = 0;
  RECAP__ARG(graph != NULL, "graph node list: graph is NULL");
  return list_nodes(graph, nodes, count);
}

recap_status_t recap__cuda_graph_reads_check(void) { return recap__driver_kernel_words_check(); }

typedef struct read_list {
  recap__graph_read_t *v;
  size_t count, cap;
} read_list_t;

static bool read_push(read_list_t *list, recap__graph_read_t read) {
  if (!read.ptr) return true;
  if (list->count == list->cap) {
    size_t cap = list->cap ? list->cap * 2 : 64;
    recap__graph_read_t *grown = recap__host_realloc(list->v, cap * sizeof *grown);
    if (!grown) return false;
    list->v = grown;
    list->cap = cap;
  }
  list->v[list->count++] = read;
  return true;
}

/* One walk over a graph's reads, shared by graph_reads and the patch plans (cuda_patch.c). */
typedef struct walk {
  read_list_t out;
  recap__kernel_word_t *words; /* scratch for one kernel's words */
  size_t word_cap;
  const char *purpose; /* what the reads are for, in the warning about an unreadable kernel */
  recap__cuda_read_visitor_t visitor; /* NULL: graph_reads */
  void *ctx;
} walk_t;

/* The reads of every node of graph, each counted as node `owner` when owner is not SIZE_MAX
 * (the node of the parent graph that holds this one; its reads are nested), else as its own
 * index. The visitor sees each top-level node after its reads were appended. */
static recap_status_t collect_reads(cudaGraph_t graph, size_t owner, int depth, walk_t *w) {
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  RECAP__CHECK(list_nodes(graph, &nodes, &n));
  recap_status_t st = RECAP_SUCCESS;
  bool nested = owner != SIZE_MAX;
  for (size_t i = 0; i < n && st == RECAP_SUCCESS; i++) {
    cudaGraphNode_t node = (cudaGraphNode_t)nodes[i];
    size_t index = nested ? owner : i;
    size_t first = w->out.count;
    recap__kernel_args_t *kernel = NULL;
    enum cudaGraphNodeType t;
    cudaError_t err = cudaGraphNodeGetType(node, &t);
    if (err != cudaSuccess) {
      st = recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaGraphNodeGetType(node %p)",
                            (void *)node);
      break;
    }
    bool ok = true;
    switch (t) {
      case cudaGraphNodeTypeKernel: {
        size_t word_count = 0;
        /* Only a plan of the top-level nodes needs a copy of the arguments to patch. */
        bool copy = w->visitor && !nested;
        recap_status_t ks = recap__driver_kernel_node_args(node, copy ? &kernel : NULL, &w->words,
                                                           &word_count, &w->word_cap);
        if (ks == RECAP_ERROR_OUT_OF_MEMORY) {
          st = ks;
          break;
        }
        if (ks != RECAP_SUCCESS) {
          /* One kernel the driver cannot describe (a kind of launch recap does not know)
           * should not cost the whole walk: its arguments are left out, and the log says so. */
          RECAP__WARN("%s: the arguments of kernel node %zu cannot be read, so %s: %s", w->purpose,
                      index, w->visitor ? "they cannot be rebound" : "its inputs are not checked",
                      recap_last_error());
          break;
        }
        for (size_t k = 0; ok && k < word_count; k++)
          ok = read_push(&w->out,
                         (recap__graph_read_t){.node = index,
                                               .ptr = (const void *)(uintptr_t)w->words[k].value,
                                               .kind = RECAP__READ_KERNEL_ARG,
                                               .offset = w->words[k].offset,
                                               .param = w->words[k].param,
                                               .nested = nested});
        break;
      }
      case cudaGraphNodeTypeMemcpy: {
        struct cudaMemcpy3DParms p;
        memset(&p, 0, sizeof p);
        err = cudaGraphMemcpyNodeGetParams(node, &p);
        if (err != cudaSuccess) {
          st = recap__cuda_fail((int)err, __FILE__, __LINE__,
                                "cudaGraphMemcpyNodeGetParams(node %p)", (void *)node);
          break;
        }
        ok = read_push(&w->out, (recap__graph_read_t){.node = index,
                                                      .ptr = p.srcPtr.ptr,
                                                      .kind = RECAP__READ_COPY_SRC,
                                                      .nested = nested}) &&
             read_push(&w->out, (recap__graph_read_t){.node = index,
                                                      .ptr = p.dstPtr.ptr,
                                                      .kind = RECAP__READ_COPY_DST,
                                                      .nested = nested});
        break;
      }
      case cudaGraphNodeTypeMemset: {
        struct cudaMemsetParams p;
        memset(&p, 0, sizeof p);
        err = cudaGraphMemsetNodeGetParams(node, &p);
        if (err != cudaSuccess) {
          st = recap__cuda_fail((int)err, __FILE__, __LINE__,
                                "cudaGraphMemsetNodeGetParams(node %p)", (void *)node);
          break;
        }
        ok = read_push(&w->out, (recap__graph_read_t){.node = index,
                                                      .ptr = p.dst,
                                                      .kind = RECAP__READ_MEMSET_DST,
                                                      .nested = nested});
        break;
      }
      case cudaGraphNodeTypeConditional: {
        /* What a region's bodies read is nested in its conditional node, as a child graph's. */
        recap__cond_kind_t kind;
        unsigned branches = 0;
        recap_cuda_graph_t *bodies = NULL;
        if (depth >= MAX_NEST_DEPTH || !recap__cuda_cond_find(nodes[i], &kind, &branches, &bodies))
          break;
        for (unsigned b = 0; b < branches && st == RECAP_SUCCESS; b++)
          st = collect_reads(bodies[b], index, depth + 1, w);
        recap__host_free(bodies);
        break;
      }
      case cudaGraphNodeTypeGraph: {
        if (depth >= MAX_NEST_DEPTH) break;
        cudaGraph_t child = NULL;
        err = cudaGraphChildGraphNodeGetGraph(node, &child);
        if (err != cudaSuccess) {
          st = recap__cuda_fail((int)err, __FILE__, __LINE__,
                                "cudaGraphChildGraphNodeGetGraph(node %p)", (void *)node);
          break;
        }
        st = collect_reads(child, index, depth + 1, w);
        break;
      }
      default:
        break; /* host nodes, events, memory nodes...: nothing recap's allocator handed out */
    }
    if (!ok) st = host_oom("the pointers a graph reads");
    if (st == RECAP_SUCCESS && w->visitor && !nested) {
      recap__cuda_read_visit_t visit = {.index = i,
                                        .node = nodes[i],
                                        .type = (int)t,
                                        .first = first,
                                        .count = w->out.count - first,
                                        .kernel = kernel};
      kernel = NULL; /* the visitor's now, whatever it returns */
      st = w->visitor(w->ctx, &visit, w->out.v);
    }
    recap__kernel_args_free(kernel);
  }
  recap__host_free(nodes);
  return st;
}

recap_status_t recap__cuda_walk_reads(recap_cuda_graph_t graph, const char *purpose,
                                      recap__cuda_read_visitor_t visitor, void *ctx,
                                      recap__graph_read_t **reads, size_t *count) {
  *reads = NULL;
  *count = 0;
  walk_t w = {.purpose = purpose, .visitor = visitor, .ctx = ctx};
  recap_status_t st = collect_reads(graph, SIZE_MAX, 0, &w);
  recap__host_free(w.words);
  if (st != RECAP_SUCCESS) {
    recap__host_free(w.out.v);
    return st;
  }
  *reads = w.out.v;
  *count = w.out.count;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_graph_reads(recap_cuda_graph_t graph, recap__graph_read_t **reads,
                                       size_t *count) {
  RECAP__ARG(reads && count, "graph reads: an out-parameter is NULL");
  *reads = NULL;
  *count = 0;
  RECAP__ARG(graph != NULL, "graph reads: graph is NULL");
  return recap__cuda_walk_reads(graph, "input liveness", NULL, NULL, reads, count);
}
