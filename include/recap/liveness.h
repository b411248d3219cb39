/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/liveness.h — input-liveness checks: a graph captured with check_input_liveness
 * watches the blocks outside its pool that its nodes read; a replay after one was freed launches
 * nothing and is RECAP_ERROR_DEAD_INPUT, naming it. See docs/debug.md.
 */
#ifndef RECAP_LIVENESS_H
#define RECAP_LIVENESS_H

#include "core.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One external input of a graph, as recorded at capture end. Start each element from
 * RECAP_LIVENESS_INPUT_INIT (docs/api.md, "Versioned structs"; the first version ends at
 * freed_before_capture_end). */
typedef struct recap_liveness_input {
  size_t size;             /* sizeof(recap_liveness_input_t), set by RECAP_LIVENESS_INPUT_INIT */
  void *base;              /* the block's start */
  size_t bytes;            /* the block's usable size */
  uint64_t generation;     /* the block's hand-out it was captured with */
  size_t node;             /* index (recap_graph_inspect's order) of the first node that
                                reads it; a child graph's reads count as its node's */
  size_t reader_count;     /* how many nodes read it */
  const char *node_type;   /* that node's type: "kernel", "memcpy", ... (recap_node_type_name) */
  const char *kernel_name; /* that node's kernel, when the driver named it; else NULL */
  void *alloc_site;        /* where it was allocated (RECAP_LIVENESS_DEBUG=1), else NULL */
  int freed_before_capture_end; /* 1: it was already freed when the capture ended */
} recap_liveness_input_t;

#define RECAP_LIVENESS_INPUT_INIT \
  { sizeof(recap_liveness_input_t), NULL, 0, 0, 0, 0, NULL, NULL, NULL, 0 }

/* The inputs the graph's capture recorded, sorted by address: *count gets how many there are,
 * and the first min(capacity, *count) are written to inputs, each element's size set first
 * (RECAP_LIVENESS_INPUT_INIT; inputs NULL with capacity 0 only counts). node_type and
 * kernel_name belong to the graph, valid until it is reset or destroyed.
 * RECAP_ERROR_INVALID_USAGE when the graph was not captured with check_input_liveness. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_liveness_inputs(recap_graph_t graph,
                                                                     recap_liveness_input_t *inputs,
                                                                     size_t capacity,
                                                                     size_t *count);

/* The check every replay makes, without launching: RECAP_SUCCESS when every input is alive,
 * RECAP_ERROR_DEAD_INPUT with the list of dead ones otherwise. RECAP_ERROR_INVALID_USAGE when
 * the graph was not captured with check_input_liveness. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_check_inputs(recap_graph_t graph);

/* 1: record where blocks are allocated and freed from now on, for the messages; 0: do not; -1:
 * follow RECAP_LIVENESS_DEBUG again. Costs a little on every recap_malloc/recap_free while on
 * (a return address stored, the latest 4096 frees kept). Blocks allocated while it was off
 * have no site to show. */
RECAP_API void recap_liveness_debug_enable(int enabled);
RECAP_API int recap_liveness_debug_enabled(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_LIVENESS_H */
