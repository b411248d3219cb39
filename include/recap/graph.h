/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graph.h — capture GPU work once and replay it (PyTorch's torch.cuda.CUDAGraph):
 * memory recap_malloc hands out during the capture comes from the graph's private pool and keeps
 * its address for every replay. See docs/graphs.md.
 */
#ifndef RECAP_GRAPH_H
#define RECAP_GRAPH_H

#include "core.h"
#include "alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct recap_graph *recap_graph_t;

/* The same types as CUDA's cudaGraph_t / CUgraph and cudaGraphExec_t / CUgraphExec. */
typedef struct CUgraph_st *recap_cuda_graph_t;
typedef struct CUgraphExec_st *recap_cuda_graph_exec_t;

/* recap_graph_create flags. */
enum {
  /* Keep the captured template after capture_end (raw, inspect, debug_dump read it); the
   * caller's instantiate, or the first replay, instantiates it. */
  RECAP_GRAPH_KEEP = 1u << 0
};

/* CUDA's stream capture modes: unsafe calls (cudaMalloc, synchronisation...) are forbidden in
 * every thread (GLOBAL), in the capturing thread (THREAD_LOCAL), or nowhere (RELAXED). */
typedef enum recap_capture_mode {
  RECAP_CAPTURE_MODE_GLOBAL = 0,
  RECAP_CAPTURE_MODE_THREAD_LOCAL = 1,
  RECAP_CAPTURE_MODE_RELAXED = 2
} recap_capture_mode_t;

/* What a capture prepares for recap_graph_rebind (recap/rebind.h): nothing (OFF), every buffer
 * it uses (AUTO), or the buffers declared during the capture only (DECLARED). */
typedef enum recap_rebind_mode {
  RECAP_REBIND_OFF = 0,
  RECAP_REBIND_AUTO = 1,
  RECAP_REBIND_DECLARED = 2
} recap_rebind_mode_t;

/* How a capture runs its regions (recap/region.h): as conditional nodes where the driver has
 * them, else a host loop (AUTO); conditional nodes or NOT_SUPPORTED (DEVICE); host loop (HOST). */
typedef enum recap_regions_mode {
  RECAP_REGIONS_AUTO = 0,
  RECAP_REGIONS_DEVICE = 1,
  RECAP_REGIONS_HOST = 2
} recap_regions_mode_t;

/* Options of a capture (NULL: the defaults). Start from RECAP_CAPTURE_OPTIONS_INIT (docs/api.md,
 * "Versioned structs", as every options struct; the first version ends at `mode`). */
typedef struct recap_capture_options {
  size_t size;               /* sizeof(recap_capture_options_t), set by the INIT macro */
  recap_pool_id_t pool;      /* {0,0}: the graph makes a private pool of its own */
  recap_capture_mode_t mode; /* default GLOBAL */
  /* 1: record the blocks the graph reads from outside its pool and fail replays with
   * RECAP_ERROR_DEAD_INPUT once one was freed (recap/liveness.h; CUDA 12.4 drivers or later). */
  int check_input_liveness;
  /* Prepare the graph for recap_graph_rebind (recap/rebind.h). Default RECAP_REBIND_OFF. */
  recap_rebind_mode_t rebind;
  /* How the capture's regions (recap/region.h) run. Default RECAP_REGIONS_AUTO. */
  recap_regions_mode_t regions;
  /* The most bytes the capture's pool may reserve (0: no limit); past it recap_malloc, then the
   * capture's end, are RECAP_ERROR_OUT_OF_MEMORY (docs/memory.md). */
  uint64_t budget_bytes;
  /* 1: on a graph that holds a capture, capture_begin (and a capture scope) recaptures it, as
   * recap_graph_recapture_begin does with these options, instead of refusing: per-step code
   * captures the first time and recaptures afterwards with one call (docs/update.md). */
  int recapture;
  /* 1: keep what setting one kernel argument or a launch shape of the executable needs
   * (recap/params.h: recap_graph_kernel_arg_set, recap_graph_kernel_shape_set); implied by
   * rebind AUTO or DECLARED and by a parameter declared during the capture. */
  int patchable;
  /* 1: the graph applies its parameters itself (recap/params.h): its first node is recap's
   * applier kernel, which writes the values set since the last replay into the kernel nodes
   * that take them (device-updatable kernel nodes, CUDA 12.4), so a parameter set costs a
   * store into host memory whatever the number of its sites. Implies patchable. Such a graph
   * is never updated in place (a recapture instantiates afresh); where the driver lacks the
   * feature the capture warns once and its parameters are set from the host (docs/params.md). */
  int params_on_device;
} recap_capture_options_t;

#define RECAP_CAPTURE_OPTIONS_INIT                                                           \
  {                                                                                          \
    sizeof(recap_capture_options_t), {0, 0}, RECAP_CAPTURE_MODE_GLOBAL, 0, RECAP_REBIND_OFF, \
        RECAP_REGIONS_AUTO, 0, 0, 0, 0                                                       \
  }

/* ---- Lifetime -------------------------------------------------------------------------------- */

/* Create an empty graph. flags: 0 or RECAP_GRAPH_KEEP. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_create(recap_graph_t *graph, unsigned flags);
/* Reset the graph (a capture under way is thrown away), dropping its pool reference, and free
 * it. NULL is a no-op. */
RECAP_API recap_status_t recap_graph_destroy(recap_graph_t graph);

/* ---- Capture --------------------------------------------------------------------------------- */

/* Begin capturing the work enqueued on stream (and streams joined to it by events) into a fresh
 * graph. INVALID_USAGE: the legacy default stream, a stream already capturing, a graph not fresh
 * (reset it, or recapture it: recap/update.h). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_capture_begin(
    recap_graph_t graph, const recap_capture_options_t *options, recap_stream_t stream);
/* End the graph's capture; unless KEEP, instantiate and drop the template. INVALID_USAGE, the
 * capture going on: not capturing, a region open, another thread (global and thread-local
 * modes). CAPTURE_INVALIDATED, or OUT_OF_MEMORY over budget: the graph is fresh again. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_capture_end(recap_graph_t graph);

/* Instantiate (again) from the kept template: only for RECAP_GRAPH_KEEP graphs. The caller may
 * change the template through recap_graph_raw in between. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_instantiate(recap_graph_t graph);

/* Launch the captured work on stream (any stream, the legacy default one included). Does not
 * synchronise. A KEEP graph not yet instantiated is instantiated first.
 * On a stream capturing into another recap graph nothing launches: the graph's template is
 * embedded in that capture as a child graph node, after the stream's work so far, and the
 * capturing graph keeps a reference to this graph's pool; its replays then advance this graph's
 * random-number generators, check its inputs (check_input_liveness) and hold its recorded
 * collectives as this graph's replays do (docs/graphs.md, "Inside another capture"). Refused,
 * the capture unharmed: NOT_SUPPORTED for a graph without a template (not KEEP), conditional or
 * memory nodes, host-path regions and parameters applied on the GPU; INVALID_USAGE for the
 * graph's own capture, a generator another capture under way uses, and collectives inside a
 * region body. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_replay(recap_graph_t graph,
                                                            recap_stream_t stream);

/* Back to a fresh graph: destroys the executable and template, drops the pool reference,
 * abandons a capture under way. The graph can capture again afterwards. */
RECAP_API recap_status_t recap_graph_reset(recap_graph_t graph);

/* ---- Accessors ------------------------------------------------------------------------------- */

/* Where a graph is in its life (recap_graph_state). */
typedef enum recap_graph_state {
  RECAP_GRAPH_STATE_FRESH = 0,        /* nothing captured: created, reset, or a capture failed */
  RECAP_GRAPH_STATE_CAPTURING = 1,    /* between capture_begin and capture_end */
  RECAP_GRAPH_STATE_CAPTURED = 2,     /* a KEEP graph's template, no executable yet */
  RECAP_GRAPH_STATE_INSTANTIATED = 3, /* an executable exists: replay launches it */
  /* Graphs are disabled and a capture scope ran its work eagerly: replay is INVALID_USAGE;
   * reset the graph before capturing into it again. */
  RECAP_GRAPH_STATE_EAGER = 4
} recap_graph_state_t;

/* *state = the graph's state (above). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_state(recap_graph_t graph,
                                                           recap_graph_state_t *state);
/* The pool of the graph's last capture (a failed one's included), until a reset: pass it to
 * another capture to share memory. RECAP_ERROR_INVALID_USAGE before the first capture, after a
 * reset, and for a capture scope run eagerly. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_pool(recap_graph_t graph,
                                                          recap_pool_id_t *pool);
/* The captured template (KEEP graphs only, after capture_end). Owned by the graph. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_raw(recap_graph_t graph,
                                                         recap_cuda_graph_t *cuda_graph);
/* The executable, once instantiated. Owned by the graph. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_raw_exec(recap_graph_t graph, recap_cuda_graph_exec_t *cuda_graph_exec);
/* Number of nodes of the template or, without one, of the executable's source at capture. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_node_count(recap_graph_t graph, size_t *count);
/* Write the template (KEEP graphs) as Graphviz DOT through the driver's verbose dump. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_debug_dump(recap_graph_t graph,
                                                                const char *path);

/* *capturing = 1 if a capture is under way on stream (or invalidated, until it ends); never
 * creates a CUDA context. For the legacy stream (NULL) while a blocking stream captures this is
 * RECAP_ERROR_INVALID_USAGE, *capturing 0: that stream is not usable now (docs/graphs.md). */
RECAP_NODISCARD RECAP_API recap_status_t recap_stream_is_capturing(recap_stream_t stream,
                                                                   int *capturing);

/* The switch of graphs: 1 captures (the default), 0 runs capture scopes, graph sets and graphed
 * callables eagerly, -1 follows RECAP_DISABLE_GRAPHS again. Change it between captures. */
RECAP_API void recap_graphs_enable(int enabled);
RECAP_API int recap_graphs_enabled(void);
RECAP_DEPRECATED("use !recap_graphs_enabled()")
RECAP_API int recap_graphs_disabled(void);

/* The switch of one graph: 1 runs its capture scopes eagerly (nothing captured) and refuses its
 * replays, keeping what it holds; 0 (the default) captures and replays again. Not while it
 * captures (INVALID_USAGE); kept across resets; not for the graphs of graph sets or graphed
 * callables, which replay them (docs/graphs.md, "Running one graph eagerly"). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_eager_set(recap_graph_t graph, int eager);
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_eager_get(recap_graph_t graph, int *eager);

/* ---- Capture scope (PyTorch's `with torch.cuda.graph(g):`) ----------------------------------- */

/* Options of a capture scope. Start from RECAP_SCOPE_OPTIONS_INIT (the first version ends at
 * `capture`, itself versioned). */
typedef struct recap_scope_options {
  size_t size;                     /* sizeof(recap_scope_options_t), set by the INIT macro */
  recap_stream_t stream;           /* NULL: recap's shared side stream */
  recap_capture_options_t capture; /* pool, mode, input liveness, rebind:
                                      RECAP_CAPTURE_OPTIONS_INIT */
} recap_scope_options_t;

#define RECAP_SCOPE_OPTIONS_INIT \
  { sizeof(recap_scope_options_t), NULL, RECAP_CAPTURE_OPTIONS_INIT }

/* Synchronise the device, empty the cache and begin capturing; *stream gets the stream to
 * enqueue work on. With graphs disabled the work runs eagerly and a later replay is
 * RECAP_ERROR_INVALID_USAGE (run the work again instead). */
RECAP_NODISCARD RECAP_API recap_status_t recap_capture_scope_begin(
    recap_graph_t graph, const recap_scope_options_t *options, recap_stream_t *stream);
/* End the scope's capture (recap_graph_capture_end), or the eager scope. */
RECAP_NODISCARD RECAP_API recap_status_t recap_capture_scope_end(recap_graph_t graph);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_GRAPH_H */
