/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/inspect.h — what a captured graph contains (nodes, kernel names, launch shapes, copy
 * sizes, edges), as a struct and as JSON, read from a RECAP_GRAPH_KEEP graph's template. See
 * docs/graphs.md, "Introspection".
 */
#ifndef RECAP_INSPECT_H
#define RECAP_INSPECT_H

#include "core.h"
#include "graph.h"
#include "region.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RECAP_NODE_TYPE_MAP(X)    \
  X(KERNEL, "kernel")             \
  X(MEMCPY, "memcpy")             \
  X(MEMSET, "memset")             \
  X(HOST, "host")                 \
  X(GRAPH, "graph")               \
  X(EMPTY, "empty")               \
  X(WAIT_EVENT, "wait_event")     \
  X(EVENT_RECORD, "event_record") \
  X(MEM_ALLOC, "mem_alloc")       \
  X(MEM_FREE, "mem_free")         \
  X(CONDITIONAL, "conditional")   \
  X(OTHER, "other")

typedef enum recap_node_type {
#define RECAP_X_NODE(name, text) RECAP_NODE_##name,
  RECAP_NODE_TYPE_MAP(RECAP_X_NODE)
#undef RECAP_X_NODE
      RECAP_NODE_TYPE_COUNT
} recap_node_type_t;

/* "kernel" for RECAP_NODE_KERNEL, and so on; "unknown" out of range. */
RECAP_API const char *recap_node_type_name(recap_node_type_t type);

typedef struct recap_graph_node {
  recap_node_type_t type;
  const char *kernel_name;    /* kernels: the (mangled) name from the driver, else NULL */
  unsigned grid[3], block[3]; /* kernels */
  unsigned shared_bytes;      /* kernels: dynamic shared memory */
  size_t bytes;               /* memcpy and memset: bytes moved or set; mem_alloc: bytes */
  const char *annotation;     /* label of the innermost annotation scope, or NULL */
  uint64_t tools_id;          /* the driver's node id for profilers, when has_tools_id */
  int has_tools_id;
  size_t *dependencies; /* indices of the nodes this one waits for */
  size_t dependency_count;
  size_t *dependents; /* indices of the nodes that wait for this one */
  size_t dependent_count;
  const char *annotation_path; /* every enclosing label, outermost first, joined by '/'
                                  ("step/forward/attention"), or NULL; see recap/annotate.h */
  /* A node in a region's body: its conditional node's index and which body (else SIZE_MAX, 0);
   * its dependencies are nodes of the same body (docs/debug.md, "Regions in the inspection"). */
  size_t parent;
  unsigned branch;
  /* Conditional nodes: the region's kind and its number of bodies (else 0 and 0). */
  recap_region_kind_t region_kind;
  unsigned branches;
  /* Kernel nodes of a graph that can be patched (recap/params.h, docs/params.md): the graph
   * parameters the node takes, one "name = value" each ("lr = 0.5"), in the order the capture
   * declared them (else NULL and 0); and what was set on this node alone, joined by ", ":
   * "argument 2 = 0x7f00a0000000" for each recap_graph_kernel_arg_set, "shape" after
   * recap_graph_kernel_shape_set (else NULL). */
  const char **graph_params;
  size_t graph_param_count;
  const char *set_alone;
} recap_graph_node_t;

/* Made by recap_graph_inspect, which sets `size` to the library's sizeof(recap_graph_info_t):
 * fields past it do not exist in the library that made it. */
typedef struct recap_graph_info {
  size_t size; /* set by recap */
  /* Every node, those in conditional nodes' bodies included: the graph's own first, then each
   * body in order (docs/debug.md, "Regions in the inspection"). */
  size_t node_count;
  recap_graph_node_t *nodes;
  size_t edge_count;       /* edges of the graph and of every body */
  int tools_ids_available; /* 1 when the driver gave tools ids (CUDA 13.1 and later) */
} recap_graph_info_t;

/* Read graph's kept template (RECAP_GRAPH_KEEP, after capture_end), with annotation labels.
 * Free the result with recap_graph_info_free. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_inspect(recap_graph_t graph,
                                                             recap_graph_info_t **info);
RECAP_API void recap_graph_info_free(recap_graph_info_t *info);

/* The info as JSON, one object per node with the fields above (docs/graphs.md,
 * "Introspection"). Free with recap_string_free. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_info_json(const recap_graph_info_t *info,
                                                               char **json);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_INSPECT_H */
