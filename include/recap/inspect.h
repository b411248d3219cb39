/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/inspect.h — what a captured graph contains: its nodes, their kinds and kernel names,
 * launch shapes, copy sizes and edges, as a plain struct and as JSON.
 *
 * The inspection reads the kept template, so the graph must be created with RECAP_GRAPH_KEEP.
 * tools/recap-graph turns the JSON into Graphviz DOT and into one self-contained HTML page.
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
  /* Regions (recap/region.h). A node inside a body: `parent` is the index of the conditional
   * node whose body holds it, and `branch` which body (0 for WHILE and IF, 1 for the ELSE of
   * IF_ELSE, n for case n of SWITCH); a node of the graph itself: parent SIZE_MAX, branch 0.
   * Its dependencies and dependents are nodes of the same body. */
  size_t parent;
  unsigned branch;
  /* Conditional nodes: the region's kind and its number of bodies (else 0 and 0). */
  recap_region_kind_t region_kind;
  unsigned branches;
} recap_graph_node_t;

/* Made by recap_graph_inspect, which sets `size` to the library's sizeof(recap_graph_info_t):
 * fields past it do not exist in the library that made it. */
typedef struct recap_graph_info {
  size_t size; /* set by recap */
  /* Every node, those inside the bodies of conditional nodes included: first the graph's own
   * nodes in the driver's order; then, for each conditional node in that order, each of its
   * bodies in branch order, laid out by the same rule (a body's own nodes, then the bodies of
   * its conditional nodes). */
  size_t node_count;
  recap_graph_node_t *nodes;
  size_t edge_count;       /* edges of the graph and of every body */
  int tools_ids_available; /* 1 when the driver gave tools ids (CUDA 13.1 and later) */
} recap_graph_info_t;

/* Read the kept template of graph (RECAP_GRAPH_KEEP, after capture_end), with the labels of
 * recap_annotate_push scopes. The result is allocated by recap; free it with
 * recap_graph_info_free. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_inspect(recap_graph_t graph,
                                                             recap_graph_info_t **info);
RECAP_API void recap_graph_info_free(recap_graph_info_t *info);

/* The info as JSON: {"nodes":[{"index":0,"type":"kernel","kernel_name":"...","grid":[x,y,z],
 * "block":[x,y,z],"shared_bytes":n,"bytes":n,"annotation":null,"annotation_path":null,
 * "tools_id":null,"dependencies":[...],"dependents":[...],"parent":null,"branch":0,
 * "region_kind":null,"branches":0}...],"edge_count":n,"tools_ids_available":false}. A node in
 * a body has "parent": the conditional node's index; a conditional node has "region_kind":
 * "while", "if", "if_else" or "switch". Free with recap_string_free. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_info_json(const recap_graph_info_t *info,
                                                               char **json);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_INSPECT_H */
