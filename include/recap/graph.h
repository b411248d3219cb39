/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graph.h — capture GPU work once, replay it for a few microseconds of CPU time.
 *
 * A recap graph wraps a CUDA graph and its executable (PyTorch's torch.cuda.CUDAGraph):
 *
 *     recap_graph_t g;
 *     recap_graph_create(&g, 0);
 *     recap_graph_capture_begin(g, NULL, stream);   // stream must not be the legacy default
 *     enqueue_work(stream);                          // kernels, cuBLAS, copies, recap_malloc...
 *     recap_graph_capture_end(g);                    // instantiates
 *     for (;;) recap_graph_replay(g, stream);        // any stream
 *     recap_graph_destroy(g);
 *
 * Memory allocated with recap_malloc during the capture comes from the graph's private pool and
 * keeps its address for every replay. Several graphs may share a pool (opts.pool): replaying
 * them in the order they were captured is then correct; another order may let one graph
 * overwrite memory another still reads (the caller's duty, as in PyTorch).
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
  /* Keep the captured template after capture_end: instantiate is then the caller's (or the
   * first replay's), and recap_graph_raw / recap_graph_inspect / debug_dump can read it. */
  RECAP_GRAPH_KEEP = 1u << 0
};

/* CUDA's stream capture modes. GLOBAL forbids unsafe calls (cudaMalloc, synchronisation...) in
 * every thread while the capture runs; THREAD_LOCAL only in the capturing thread; RELAXED
 * forbids nothing. */
typedef enum recap_capture_mode {
  RECAP_CAPTURE_MODE_GLOBAL = 0,
  RECAP_CAPTURE_MODE_THREAD_LOCAL = 1,
  RECAP_CAPTURE_MODE_RELAXED = 2
} recap_capture_mode_t;

/* Options of a capture. Start from RECAP_CAPTURE_OPTIONS_INIT, then set fields; the struct
 * may grow at its end in later versions (the size field tells recap which version it is).
 *
 * Every recap options struct (recap_capture_options_t, recap_scope_options_t,
 * recap_graphed_options_t, and the callable description recap_callable_desc_t) follows one
 * rule: its `size` must lie between the size of the struct's first version (which ends at
 * `mode`; for recap_scope_options_t, at its embedded `capture`, whose own `size` follows the
 * rule too; for recap_callable_desc_t, at `output_requires_grad`) and the size of the library's
 * own version.
 * Fields past the caller's `size` take their defaults, so a program built against older headers
 * keeps working. A smaller or larger `size` is RECAP_ERROR_INVALID_ARGUMENT, with a message
 * naming the struct and its _INIT macro. Options NULL means the defaults. */
/* How a capture prepares its graph for recap_graph_rebind (recap/rebind.h): the `rebind` field
 * of recap_capture_options_t. */
typedef enum recap_rebind_mode {
  /* Default: nothing is prepared, and the template goes after instantiation (unless KEEP). */
  RECAP_REBIND_OFF = 0,
  /* Any buffer the graph uses can be rebound; the sites are found by scanning every node's
   * pointer-sized words (see recap/rebind.h for what such a scan may mistake). */
  RECAP_REBIND_AUTO = 1,
  /* Only buffers declared during the capture (recap_graph_declare_buffer) can be rebound. */
  RECAP_REBIND_DECLARED = 2
} recap_rebind_mode_t;

/* How a capture runs the regions of recap/region.h (loops and branches on the GPU): the
 * `regions` field of recap_capture_options_t. */
typedef enum recap_regions_mode {
  /* Default: as CUDA conditional nodes where the driver runs all four kinds (CUDA 12.8 or
   * later), else as a host loop. */
  RECAP_REGIONS_AUTO = 0,
  /* As conditional nodes; capture_begin is RECAP_ERROR_NOT_SUPPORTED where the driver has
   * none. */
  RECAP_REGIONS_DEVICE = 1,
  /* As a host loop: the work between and inside regions is captured into separate graphs,
   * and a replay reads each condition back to the host (recap/region.h). */
  RECAP_REGIONS_HOST = 2
} recap_regions_mode_t;

typedef struct recap_capture_options {
  size_t size;               /* sizeof(recap_capture_options_t), set by the INIT macro */
  recap_pool_id_t pool;      /* {0,0}: the graph makes a private pool of its own */
  recap_capture_mode_t mode; /* default GLOBAL */
  /* 1: at capture end, record the blocks of recap's allocator that the graph reads from outside
   * its pool (kernel arguments, copies, memsets), and fail every replay with
   * RECAP_ERROR_DEAD_INPUT once one of them was freed. Needs a driver for CUDA 12.4 or later
   * (capture_begin says RECAP_ERROR_NOT_SUPPORTED otherwise). See recap/liveness.h. */
  int check_input_liveness;
  /* Prepare the graph for recap_graph_rebind (recap/rebind.h): the graph then keeps its template
   * internally and, at capture end, the list of places (sites) where its nodes hold addresses.
   * Default RECAP_REBIND_OFF. */
  recap_rebind_mode_t rebind;
  /* How the capture's regions (recap/region.h) run. Default RECAP_REGIONS_AUTO. */
  recap_regions_mode_t regions;
  /* The most bytes the capture's pool may reserve (0, the default: no limit). A recap_malloc
   * routed to the pool during the capture that needs a new segment taking the pool's reserved
   * bytes (its segments, whoever's blocks they hold) past the budget fails with
   * RECAP_ERROR_OUT_OF_MEMORY before any device allocation, its message saying by how many bytes
   * and what the pool holds; free blocks of the pool are still reused. The capture goes on (the
   * caller decides what to do), and its end then fails with the same status and the first
   * refusal's message: the capture is thrown away as an invalidated one is (a recapture leaves
   * the graph with the capture it held). See recap/memory.h and docs/memory.md. */
  uint64_t budget_bytes;
} recap_capture_options_t;

#define RECAP_CAPTURE_OPTIONS_INIT                                                           \
  {                                                                                          \
    sizeof(recap_capture_options_t), {0, 0}, RECAP_CAPTURE_MODE_GLOBAL, 0, RECAP_REBIND_OFF, \
        RECAP_REGIONS_AUTO, 0                                                                \
  }

/* ------------------------------------------------------------------------------------------
 * Lifetime
 * ---------------------------------------------------------------------------------------- */

/* Create an empty graph. flags: 0 or RECAP_GRAPH_KEEP. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_create(recap_graph_t *graph, unsigned flags);
/* Destroy the graph: its executable and template, and its reference to its pool (the pool's
 * memory goes back on recap_empty_cache once no graph holds it and its blocks are freed).
 * NULL is a no-op. A graph whose capture is under way is first reset (the capture is ended and
 * thrown away). */
RECAP_API recap_status_t recap_graph_destroy(recap_graph_t graph);

/* ------------------------------------------------------------------------------------------
 * Capture
 * ---------------------------------------------------------------------------------------- */

/* Begin capturing the work enqueued on stream (and on streams joined to it by events).
 * options NULL means RECAP_CAPTURE_OPTIONS_INIT. Errors: the legacy default stream
 * (RECAP_ERROR_INVALID_USAGE: capture on a stream you created), a stream already capturing, a
 * graph already captured or capturing (reset it first, or capture it again in place with
 * recap_graph_recapture_begin, recap/update.h). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_capture_begin(
    recap_graph_t graph, const recap_capture_options_t *options, recap_stream_t stream);
/* End the graph's capture, on the stream it began on (the graph knows it); the end of a
 * recapture (recap_graph_recapture_begin) is described in recap/update.h. Unless the graph was
 * created with KEEP, this instantiates the executable (auto-free-on-launch, node priorities)
 * and drops the template. An empty capture warns through the log. A graph that is not
 * capturing is RECAP_ERROR_INVALID_USAGE. A capture in global or thread-local mode is ended by
 * the thread that began it: from another thread this is RECAP_ERROR_INVALID_USAGE naming
 * cudaErrorStreamCaptureWrongThread, and the capture goes on. A region still open
 * (recap/region.h) is RECAP_ERROR_INVALID_USAGE, and the capture goes on. If the capture was
 * invalidated by an illegal call inside it, returns RECAP_ERROR_CAPTURE_INVALIDATED naming the
 * CUDA error, whatever regions are open; the
 * graph is then fresh, with no pool reference left (recap_graph_pool still names the pool the
 * capture used), and the stream can capture again. A capture whose budget
 * (options->budget_bytes) refused an allocation ends the same way, with
 * RECAP_ERROR_OUT_OF_MEMORY and a message that counts the refusals and repeats the first. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_capture_end(recap_graph_t graph);

/* Instantiate (again) from the kept template: only for RECAP_GRAPH_KEEP graphs. The caller may
 * change the template through recap_graph_raw in between. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_instantiate(recap_graph_t graph);

/* Launch the captured work on stream (any stream, the legacy default one included). Does not
 * synchronise. A KEEP graph not yet instantiated is instantiated first. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_replay(recap_graph_t graph,
                                                            recap_stream_t stream);

/* Back to a fresh graph: destroys the executable and template, drops the pool reference,
 * abandons a capture under way. The graph can capture again afterwards. */
RECAP_API recap_status_t recap_graph_reset(recap_graph_t graph);

/* ------------------------------------------------------------------------------------------
 * Accessors
 * ---------------------------------------------------------------------------------------- */

/* Where a graph is in its life (recap_graph_state). */
typedef enum recap_graph_state {
  /* Nothing captured: after create, reset, or a capture that failed. */
  RECAP_GRAPH_STATE_FRESH = 0,
  /* Between capture_begin (or a capture scope's begin) and capture_end. */
  RECAP_GRAPH_STATE_CAPTURING = 1,
  /* A KEEP graph's template is kept and no executable exists yet: recap_graph_instantiate or
   * the first replay makes it. */
  RECAP_GRAPH_STATE_CAPTURED = 2,
  /* An executable exists (and, for a KEEP graph, the template too): replay launches it. */
  RECAP_GRAPH_STATE_INSTANTIATED = 3,
  /* Graphs are disabled (RECAP_DISABLE_GRAPHS=1) and a capture scope ran, or is running, its
   * work eagerly: nothing is captured and replay is RECAP_ERROR_INVALID_USAGE; reset the graph
   * before capturing into it again. */
  RECAP_GRAPH_STATE_EAGER = 4
} recap_graph_state_t;

/* *state = the graph's state (above). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_state(recap_graph_t graph,
                                                           recap_graph_state_t *state);
/* The pool of the graph's last capture; pass it to another capture to share memory. Answered
 * from capture_begin on, until the graph is reset: while capturing and once captured, the pool
 * the graph holds a reference to; after a capture that failed (the graph is fresh again), the
 * pool that capture used, which the graph no longer holds: it keeps the blocks the caller still
 * holds and the segments not yet given back, and nothing else of the graph unless another graph
 * or route shares it (recap_pool_memory audits it). RECAP_ERROR_INVALID_USAGE before the first
 * capture, after a reset, and for a capture scope run eagerly. */
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

/* *capturing = 1 if a capture is under way on stream (or invalidated, until it ends). Never
 * creates a CUDA context: with no context it reports 0. The legacy default stream (NULL) is the
 * one exception to a plain answer: while a blocking stream of the current device (one created
 * without cudaStreamNonBlocking) captures, CUDA refuses the question
 * (cudaErrorStreamCaptureImplicit), because any use of the legacy stream would join that
 * capture; this returns RECAP_ERROR_INVALID_USAGE naming that error, with *capturing 0, and the
 * capture goes on unharmed. Treat that status as "the legacy stream is not usable now". A
 * capture on a non-blocking stream leaves the question about NULL answerable: 0. */
RECAP_NODISCARD RECAP_API recap_status_t recap_stream_is_capturing(recap_stream_t stream,
                                                                   int *capturing);

/* The global kill switch of graphs. 1 to capture (the default), 0 to run capture scopes, graph
 * sets and graphed callables eagerly, -1 to follow RECAP_DISABLE_GRAPHS again (read once; 1
 * disables). Change it between captures. recap_graphs_enabled says which holds now. */
RECAP_API void recap_graphs_enable(int enabled);
RECAP_API int recap_graphs_enabled(void);
RECAP_DEPRECATED("use !recap_graphs_enabled()")
RECAP_API int recap_graphs_disabled(void);

/* ------------------------------------------------------------------------------------------
 * Capture scope (PyTorch's `with torch.cuda.graph(g):`)
 * ---------------------------------------------------------------------------------------- */

/* Options of a capture scope: the scope's own fields, then the options of its capture,
 * embedded. Start from RECAP_SCOPE_OPTIONS_INIT, then set fields (opts.stream,
 * opts.capture.mode...). Both `size` fields follow the options rule above, each for its own
 * struct: the embedded one is a recap_capture_options_t's, and the outer one's first version
 * ends at `capture`. The capture options come last so that they can grow at the end of both. */
typedef struct recap_scope_options {
  size_t size;                     /* sizeof(recap_scope_options_t), set by the INIT macro */
  recap_stream_t stream;           /* NULL: recap's shared side stream */
  recap_capture_options_t capture; /* pool, mode, input liveness, rebind:
                                      RECAP_CAPTURE_OPTIONS_INIT */
} recap_scope_options_t;

#define RECAP_SCOPE_OPTIONS_INIT \
  { sizeof(recap_scope_options_t), NULL, RECAP_CAPTURE_OPTIONS_INIT }

/* Synchronise the device, give unused cached memory back, and begin capturing on the given
 * stream or recap's shared side stream; *stream receives the stream to enqueue work on.
 * options NULL means defaults. With graphs disabled (RECAP_DISABLE_GRAPHS=1) nothing is
 * captured: the work enqueued on *stream runs eagerly, and replaying the graph later returns
 * RECAP_ERROR_INVALID_USAGE (check recap_graphs_enabled() and run the work again instead). */
RECAP_NODISCARD RECAP_API recap_status_t recap_capture_scope_begin(
    recap_graph_t graph, const recap_scope_options_t *options, recap_stream_t *stream);
/* End the scope's capture (recap_graph_capture_end), or the eager scope. */
RECAP_NODISCARD RECAP_API recap_status_t recap_capture_scope_end(recap_graph_t graph);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_GRAPH_H */
