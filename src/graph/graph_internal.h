/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph_internal.h — the recap graph object, shared by the graph core's files (graph.c:
 * lifetime, capture, replay; hooks.c: the modules' hooks; memory.c: what a graph costs) and by
 * the modules built on graphs.
 */
#ifndef RECAP_GRAPH_INTERNAL_H
#define RECAP_GRAPH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/alloc_internal.h"
#include "device/device.h"
#include "graph/hooks.h"
#include "recap/graph.h"
#include "recap/inspect.h"

typedef enum recap__graph_state {
  RECAP__GRAPH_FRESH = 0, /* nothing captured */
  RECAP__GRAPH_CAPTURING, /* between capture_begin and capture_end */
  RECAP__GRAPH_CAPTURED,  /* a template and/or an executable exist */
  RECAP__GRAPH_EAGER      /* a capture scope ran eagerly (graphs disabled) */
} recap__graph_state_t;

enum { RECAP__GRAPH_MAGIC = 0x72636170 /* "rcap" */ };

struct recap_graph {
  uint32_t magic; /* RECAP__GRAPH_MAGIC while alive: catches foreign and destroyed handles */
  unsigned flags;
  recap__graph_state_t state;
  int device;
  recap_stream_t capture_stream;
  uint64_t capture_id;
  recap_pool_id_t pool;
  bool holds_pool; /* a reference to `pool` is ours to release */
  bool pool_known; /* `pool` names the last capture's pool, held or not (until a reset) */
  recap_cuda_graph_t template_graph;
  recap_cuda_graph_exec_t exec;
  size_t node_count;
  /* A layer needs the template after instantiation (rebinding: the executable's node handles
   * are the template's), so capture_end keeps it even without KEEP; the public accessors of
   * the template still answer only for KEEP graphs. Set by the layer during the capture,
   * cleared by reset and by a failed capture. */
  bool keep_template;
  /* The graph the executable was instantiated from, once a recapture has updated the
   * executable in place from a later template (template_graph) while the graph keeps templates.
   * CUDA patches an executable only through the nodes of the graph it was instantiated from,
   * updated or not (measured: the updating template's nodes are refused with
   * cudaErrorInvalidValue), so rebinding needs this graph for as long as the executable lives.
   * NULL: the executable's origin is template_graph (or nothing needs it). */
  recap_cuda_graph_t exec_origin;
  /* The executable (or, before its instantiation, the template) holds device-updatable kernel
   * nodes (recap__captured_t): a recapture instantiates afresh instead of updating it. */
  bool exec_device_nodes;
  /* The modules attached to the capture the graph holds or is making (hooks.h). */
  recap__graph_hook_set_t hooks;
  /* The options of the last capture begun, its pool resolved: a recapture's defaults. */
  recap_capture_options_t options;
  /* What the capture the graph holds allocated through its pool's route, in order (a
   * recapture replays it), and what the capture under way allocates. */
  recap__alloc_log_t alloc_log, alloc_log_next;
  /* A recapture runs (recap_graph_recapture_begin to capture_end): what the capture it
   * replaces keeps until the new one succeeds waits with the update module (src/update/), and
   * the route of the recapture holds a second reference to the pool, given back at its end. */
  bool recapturing;
  /* recap_graph_eager_set: its capture scopes run their work eagerly and its replays are refused,
   * while what it holds (capture, executable, pool) stays for when the switch goes off. Kept
   * across resets, like the update policy. */
  bool eager;
  /* The modules attached for the graph's whole life (hooks.h: the update policy). */
  recap__graph_hook_set_t attached;
  /* Memory accounting (recap/memory.h). exec_bytes: what cudaMemGetInfo lost across the
   * instantiation of `exec` (0 without one); capture_peak: the pool's allocated high-water mark
   * during the held capture; capture_grew: the reserved bytes the pool gained during it.
   * `accounted`: what this graph adds to its pool's totals now
   * (recap__graph_account keeps it in step with the graph). */
  int64_t exec_bytes, capture_peak, capture_grew;
  struct {
    bool on;
    int device;
    recap_pool_id_t pool;
    int64_t exec_bytes, nodes;
  } accounted;
};

/* Whether graph may replay while pools sleep (recap/sleep.h): RECAP_SUCCESS, or
 * RECAP_ERROR_POOL_ASLEEP when its pool or its device's default pool sleeps, with the message
 * naming the pool. While no pool sleeps anywhere it costs one relaxed load. recap_graph_replay
 * asks it first; callers that write a graph's pool before replaying it (graphed callables'
 * static buffers) ask it before they write. */
recap_status_t recap__graph_pools_awake(recap_graph_t graph);

/* recap_graph_replay of graph on stream, which captures into outer's capture (embed.c): graph's
 * template goes into that capture as a child graph node after the stream's work so far, and
 * outer's capture keeps references to the pools the embedded work uses. Refused (nothing
 * changed) for a graph that cannot be embedded, with the rule in the message. */
recap_status_t recap__graph_embed(recap_graph_t graph, recap_graph_t outer, recap_stream_t stream);
/* Whether graph's capture embedded work that uses pool (the pool of a graph it embedded, at any
 * depth): that pool's blocks are the embedded graphs' own, not inputs of graph (input
 * liveness). */
bool recap__graph_embeds_pool(recap_graph_t graph, recap_pool_id_t pool);
/* The refusal recap_graph_replay(graph, stream) would give because stream captures into another
 * recap graph and graph cannot be embedded there (or a pool sleeps); RECAP_SUCCESS otherwise,
 * capturing or not. For callers that enqueue work of their own before the replay (graphed
 * callables stage their inputs), so that a refusal leaves the capture unharmed. */
recap_status_t recap__graph_embed_check(recap_graph_t graph, recap_stream_t stream);
/* *outer: the recap graph whose capture stream takes part in (NULL: none), asked with the
 * seam's cheap stream_capture_id, for callers that hold a captured graph (so a context
 * exists). */
recap_status_t recap__graph_capturing_into(recap_stream_t stream, recap_graph_t *outer);

/* The two halves of recap_graph_capture_begin that the core owns, for src/capture/: the checks of
 * the mode, the graph's state (fresh; for a recapture, holding a capture) and the stream, and
 * then beginning the capture (the CUDA capture, the allocator's route with its logs, the
 * registry entry). A recapture (graph->recapturing) replays the held capture's allocation
 * log and takes a second pool reference, and its failure leaves what was set aside as it was. */
recap_status_t recap__graph_capture_check(recap_graph_t graph, recap_stream_t stream,
                                          const recap_capture_options_t *opts, bool recapture);
recap_status_t recap__graph_capture_start(recap_graph_t graph, recap_stream_t stream,
                                          const recap_capture_options_t *opts);

/* The end of a capture, shared by a first capture's (graph.c) and a recapture's (update.c):
 * the template's node count, with a warning naming `what` ("capture", "recapture") when it is
 * empty; and the capture's allocation log kept as the one its recapture replays. */
size_t recap__graph_template_nodes(recap_cuda_graph_t template_graph, const char *what);
void recap__graph_keep_alloc_log(recap_graph_t graph);

/* recap_graph_capture_end of a first capture (src/capture/ sends recaptures to update.c). */
recap_status_t recap__graph_capture_end(recap_graph_t graph);

/* A piece of a capture's end that a recapture's end (update.c) shares with graph.c: stop
 * routing and forget the capture in the registry. */
void recap__graph_close_capture(recap_graph_t graph);
/* The same, with *result what the capture's route did, read as it ends (zeros if the route was
 * gone: it is the graph's while it captures, so that does not happen). */
void recap__graph_close_capture_result(recap_graph_t graph, recap__capture_result_t *result);

/* RECAP_ERROR_INVALID_USAGE naming function when graph is no single CUDA graph (a module runs
 * graphs of its own in its replays: regions on the host path), so it has no single template or
 * executable to hand out or read. */
recap_status_t recap__graph_not_host_loop(recap_graph_t graph, const char *function);

/* recap__graph_template_nodes, without its warning about an empty template when a module runs
 * graphs of its own in graph's replays (the template then holds only what follows the last
 * region), for graph.c and update.c. */
size_t recap__graph_capture_nodes(recap_graph_t graph, recap_cuda_graph_t template_graph,
                                  const char *what);

/* Launch graph's executable on stream: the replay's own launch, or the one a hook's launch
 * calls after what it runs first. While the update policy measures, the launch is timed. */
recap_status_t recap__graph_launch_exec(recap_graph_t graph, recap_stream_t stream);
/* Instantiate afresh from the template, which the layers sync first; the old executable goes
 * first (recap_graph_instantiate's work, for a graph of any flags that holds a template). A
 * failure leaves the template and no executable, instantiated again at the next replay. */
recap_status_t recap__graph_instantiate(recap_graph_t graph);

/* RECAP_ERROR_INVALID_USAGE naming function while graph is recaptured: what it captured (the
 * template, the executable, the layers' view of them) is set aside until the recapture ends. */
recap_status_t recap__graph_not_recapturing(recap_graph_t graph, const char *function);

/* Whether graph drops its template once it has an executable (not KEEP, not kept for
 * rebinding). */
bool recap__graph_drops_template(recap_graph_t graph);

/* Reset the graph (recap_graph_reset) but remember the pool of the capture it abandons, as a
 * failed capture does: for capture_begin's own failures once the capture began. */
recap_status_t recap__graph_abandon(recap_graph_t graph);

/* Abandon the capture under way after a failure (the caller keeps its message): a first
 * capture's graph is fresh again (recap__graph_abandon); a recapture's holds the capture it
 * replaced again (the recapture_abandoned event of the module that keeps it). */
void recap__graph_abandon_capture(recap_graph_t graph);

/* Instantiate graph (of owner's capture) into *exec, measuring the device memory the executable
 * takes where owner's capture has a budget or the option measure_exec_memory is on: *bytes is
 * the drop of cudaMemGetInfo's free bytes across the call (0 when free did not drop, or when
 * the device could not say; that failure is no failure of the call), else
 * RECAP__EXEC_NOT_MEASURED. memory.c, for every place that instantiates: graph.c, update.c and
 * the regions' host loop (region_state.c). */
enum { RECAP__EXEC_NOT_MEASURED = -1 };
recap_status_t recap__graph_instantiate_measured(recap_graph_t owner, recap_cuda_graph_exec_t *exec,
                                                 recap_cuda_graph_t graph, int64_t *bytes);

/* Bring the totals of graph's pool (recap__pool_account_graph) in step with what the graph
 * holds now: one graph, its executables' bytes and its nodes while it holds the pool, nothing
 * once it does not. Idempotent; graph.c calls it wherever that changes, update.c at a
 * recapture's commit. */
void recap__graph_account(recap_graph_t graph);

/* What the capture routed to graph's pool did (recap__pool_capture_result; zeros if the route
 * is gone), read before the capture's route ends; the last error stays as it was. */
void recap__graph_capture_result(recap_graph_t graph, recap__capture_result_t *result);
/* RECAP_ERROR_OUT_OF_MEMORY from recap_graph_capture_end for a capture whose budget refused
 * allocations: how many, what became of the (re)capture, and the first refusal's text. */
recap_status_t recap__graph_budget_error(const recap__capture_result_t *result, bool recapture);

/* Argument check shared by every entry point: a live graph handle. */
recap_status_t recap__graph_check(recap_graph_t graph, const char *function);

/* For tests: recap_graphs_enable in the variable's sense (1: disabled; -1: the environment). */
void recap__graphs_disabled_override(int disabled);

#endif /* RECAP_GRAPH_INTERNAL_H */
