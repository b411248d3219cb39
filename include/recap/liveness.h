/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/liveness.h — input-liveness checks ("which buffer did I free that the graph still
 * reads?").
 *
 *     recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
 *     o.check_input_liveness = 1;
 *     recap_graph_capture_begin(g, &o, s);
 *     kernel<<<..., s>>>(weights, x, y);            // weights, x: recap_malloc'ed before
 *     recap_graph_capture_end(g);                   // records weights' and x's blocks
 *     recap_free(weights);
 *     recap_graph_replay(g, s);                     // RECAP_ERROR_DEAD_INPUT, naming weights
 *
 * At capture end recap reads what every node of the graph reads: each kernel's arguments (the
 * argument layout comes from the driver), and the source and destination of each copy and
 * memset, child graphs included. The values that lie in blocks of recap's allocator outside
 * the graph's own pool are the graph's external inputs; recap keeps each block's start, size
 * and generation (a number that changes whenever the block is handed out again). Before every
 * replay it checks that each block is still allocated, with the same generation; if not, the
 * replay fails with RECAP_ERROR_DEAD_INPUT before anything is launched, and recap_last_error()
 * lists every dead input: its address and size, the node that reads it and, for kernels, the
 * kernel's name. Blocks of the graph's pool are never recorded: its own intermediates, and
 * outputs of earlier graphs that share the pool, whose lifetime the pool's order of replays
 * governs. Memory recap did not allocate (cudaMalloc, host memory) is not tracked.
 *
 * With RECAP_LIVENESS_DEBUG=1 (or recap_liveness_debug_enable(1)) recap also records where
 * each block was allocated and freed — the return address of the recap_malloc and recap_free
 * calls, printed as an address (and as symbol+offset where the dynamic linker can name it) —
 * and the message says it. See docs/debug.md for the costs and the limits.
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
