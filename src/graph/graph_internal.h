/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph_internal.h — the recap graph object, shared by graph.c (lifetime, capture, replay),
 * capture.c (recap_graph_capture_begin), scope.c (the capture scope) and inspect.c
 * (introspection), and by the layers built on graphs.
 */
#ifndef RECAP_GRAPH_INTERNAL_H
#define RECAP_GRAPH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/alloc_internal.h"
#include "device/device.h"
#include "update/update_internal.h"
#include "recap/graph.h"
#include "recap/inspect.h"

typedef enum recap__graph_state {
  RECAP__GRAPH_FRESH = 0, /* nothing captured */
  RECAP__GRAPH_CAPTURING, /* between capture_begin and capture_end */
  RECAP__GRAPH_CAPTURED,  /* a template and/or an executable exist */
  RECAP__GRAPH_EAGER      /* a capture scope ran eagerly (graphs disabled) */
} recap__graph_state_t;

enum { RECAP__GRAPH_MAGIC = 0x72636170 /* "rcap" */ };

/* Layers built on graphs (random numbers, annotations, input-liveness checks) attach state
 * to a graph through hooks, so the graph layer does not depend on them: graph.c and inspect.c
 * call only the hooks attached to a graph, never the files that attach them. */
/* A range a rebind moves sites into (the `rebound` hook). */
typedef struct recap__rebound_range {
  const void *base;
  size_t size;
} recap__rebound_range_t;

typedef struct recap__graph_hooks {
  /* Before every launch of the executable, on the replay stream. A failure stops the replay;
   * the hook then undoes what it did itself. */
  recap_status_t (*before_replay)(void *ctx, recap_graph_t graph, recap_stream_t stream);
  /* The replay failed after this hook's before_replay succeeded (a later hook or the launch
   * failed): undo what before_replay did, so that a failed replay changes nothing. Must not
   * fail, nor record an error. Optional. */
  void (*replay_failed)(void *ctx, recap_graph_t graph);
  /* The replay launched (after this hook's before_replay succeeded). Must not fail, nor record
   * an error. Optional. */
  void (*replay_done)(void *ctx, recap_graph_t graph);
  /* When the capture ends: succeeded is false if it was invalidated or failed. */
  void (*capture_ended)(void *ctx, recap_graph_t graph, bool succeeded);
  /* The graph drops what it captured (reset, destroy, failed capture): free ctx. */
  void (*release)(void *ctx, recap_graph_t graph);
  /* The capture succeeded: the template, before it is instantiated (and dropped, without
   * KEEP). A failure fails capture_end, and the graph is fresh again. Optional. */
  recap_status_t (*captured)(void *ctx, recap_graph_t graph, recap_cuda_graph_t template_graph);
  /* recap_graph_inspect read the kept template into info: add what the layer knows of its
   * nodes (annotations: their labels). A failure fails the inspection. Optional. */
  recap_status_t (*inspect)(void *ctx, recap_graph_t graph, recap_graph_info_t *info);
  /* recap_graph_debug_dump wrote the template's DOT to path: add to the file (annotations:
   * their labels). A failure fails the dump. Optional. */
  recap_status_t (*dump)(void *ctx, recap_graph_t graph, const char *path);
  /* Something is about to instantiate from the template, or read it (recap_graph_instantiate,
   * a replay that instantiates, recap_graph_raw, recap_graph_inspect, debug_dump): write into
   * it what the layer changed in the executable only (rebinding: the patched addresses). A
   * failure fails that call. Optional. */
  recap_status_t (*sync_template)(void *ctx, recap_graph_t graph);
  /* A rebind (rebind.c) is about to move sites: sites[i] (count of them) is every site of the
   * graph (graph_reads' list and order) with the address it will hold if the rebind succeeds,
   * and to[j] (moves of them) the new ranges of the batch. The layer prepares what it must
   * change (input liveness: the blocks it watches) without making it visible; a failure (host
   * memory) refuses the rebind, nothing changed. Optional; if present, rebound_done is called
   * once after every rebound that succeeded. */
  recap_status_t (*rebound)(void *ctx, recap_graph_t graph, const recap__graph_read_t *sites,
                            size_t count, const recap__rebound_range_t *to, size_t moves);
  /* A recapture planned against the old executable's origin (capture_origin), but its
   * template was instantiated afresh (the driver refused the update): plan again against the
   * new template, which is the new executable's origin. A failure fails the recapture, which
   * leaves the graph as it was. Optional. */
  recap_status_t (*instantiated_afresh)(void *ctx, recap_graph_t graph,
                                        recap_cuda_graph_t template_graph);
  /* The rebind prepared by `rebound` was applied (applied true: make it visible) or not (drop
   * what rebound prepared). Must not fail. */
  void (*rebound_done)(void *ctx, recap_graph_t graph, bool applied);
  /* A region's body begins capturing (recap_region_begin, recap_region_next_branch), `depth`
   * regions deep (1: a body of the graph itself). A failure fails the region call. Optional. */
  recap_status_t (*body_begin)(void *ctx, recap_graph_t graph, unsigned depth);
  /* The body being captured on stream, `depth` deep, is about to end (recap_region_next_branch,
   * recap_region_end): enqueue on stream what the layer appends to every body (random numbers:
   * the advance of the Philox offset by what the body drew, so that each iteration draws fresh
   * numbers). A failure fails the region call. Optional. */
  recap_status_t (*body_end)(void *ctx, recap_graph_t graph, recap_stream_t stream, unsigned depth);
} recap__graph_hooks_t;

typedef struct recap__graph_hook_entry {
  const recap__graph_hooks_t *hooks;
  void *ctx;
} recap__graph_hook_entry_t;

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
  recap_stream_t scope_stream; /* set while a capture scope is open */
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
  /* While the captured hooks of a recapture run: the graph whose nodes patch the executable the
   * new template is about to update (the layers plan patches against it); NULL when the new
   * template will be instantiated afresh, or outside a recapture's end. */
  recap_cuda_graph_t capture_origin;
  /* Set by a layer's captured hook when capture_origin cannot stand for the new template (the
   * device's patch plan refuses it: another node count, or another node type at an index),
   * which is a change of topology that the driver cannot update the executable across: the
   * layer planned against the new template itself, the recapture asks the driver anyway (its
   * refusal gives the counters their reason, as for a graph without such layers), and the fresh
   * instantiation that follows needs no planning again (instantiated_afresh is not called). */
  bool capture_origin_unfit;
  uint64_t rebinds, sites_patched; /* recap_graph_rebind calls that succeeded, sites changed */
  recap__graph_hook_entry_t *hooks;
  size_t hook_count, hook_capacity;
  /* The options of the last capture begun, its pool resolved: a recapture's defaults. */
  recap_capture_options_t options;
  /* What the capture the graph holds allocated through its pool's route, in order (a
   * recapture replays it), and what the capture under way allocates. */
  recap__alloc_log_t alloc_log, alloc_log_next;
  /* While a recapture runs (recap_graph_recapture_begin to capture_end): what the capture it
   * replaces keeps until the new one succeeds. The route of the recapture holds a second
   * reference to the pool, given back at its end. */
  struct {
    bool active;
    recap__graph_hook_entry_t *hooks;
    size_t hook_count, hook_capacity;
    size_t node_count;
    recap_capture_options_t options;
    bool keep_template;
    bool regions_on_device;
  } old;
  recap__update_t update; /* the update policy, its counters and measurements */
  /* Regions (regions.c): the open regions of the capture under way, the conditions it
   * created, and, on the host-loop path, the captured program of graphs and loops that a
   * replay runs instead of `exec`. NULL when the graph's captures used no region. */
  struct recap__regions *regions;
  bool regions_on_device; /* the path chosen at capture_begin (recap_graph_regions_on_device) */
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

/* How many regions are open in the capture under way on graph (0: none, or no capture); the
 * random-number layer reads it when a generator first joins a capture inside a body. */
unsigned recap__graph_region_depth(recap_graph_t graph);

/* Attach hooks with ctx to a graph whose capture is under way. */
recap_status_t recap__graph_add_hook(recap_graph_t graph, const recap__graph_hooks_t *hooks,
                                     void *ctx);

/* The ctx attached with hooks, or NULL when none was. */
void *recap__graph_hook_ctx(recap_graph_t graph, const recap__graph_hooks_t *hooks);

/* Input liveness (liveness.c), for the capture entry point (capture.c), the one file above
 * both graph.c and liveness.c: the probe says beforehand whether the device can read what graphs
 * read; attach adds the checks' hooks to a graph whose capture just began. */
recap_status_t recap__liveness_probe(void);
recap_status_t recap__liveness_attach(recap_graph_t graph);

/* Rebinding (rebind.c), for capture.c: attach the rebind hooks with mode (AUTO or DECLARED) to
 * a graph whose capture just began. Attaching to a graph that has them already (a recapture)
 * sets the mode and forgets the declarations of the previous capture. */
recap_status_t recap__rebind_attach(recap_graph_t graph, recap_rebind_mode_t mode);

/* Whether graph may replay while pools sleep (recap/sleep.h): RECAP_SUCCESS, or
 * RECAP_ERROR_POOL_ASLEEP when its pool or its device's default pool sleeps, with the message
 * naming the pool. While no pool sleeps anywhere it costs one relaxed load. recap_graph_replay
 * asks it first; callers that write a graph's pool before replaying it (graphed callables'
 * static buffers) ask it before they write. */
recap_status_t recap__graph_pools_awake(recap_graph_t graph);

/* Call the sync_template hooks (see recap__graph_hooks_t): before reading or instantiating the
 * template. */
recap_status_t recap__graph_sync_template(recap_graph_t graph);

/* The two halves of recap_graph_capture_begin that graph.c owns, for capture.c: the checks of
 * the mode, the graph's state (fresh; for a recapture, holding a capture) and the stream, and
 * then beginning the capture (the CUDA capture, the allocator's route with its logs, the
 * registry entry). A recapture (graph->old.active) replays the held capture's allocation log
 * and takes a second pool reference, and its failure leaves graph->old as it was. */
recap_status_t recap__graph_capture_check(recap_graph_t graph, recap_stream_t stream,
                                          const recap_capture_options_t *opts, bool recapture);
recap_status_t recap__graph_capture_start(recap_graph_t graph, recap_stream_t stream,
                                          const recap_capture_options_t *opts);

/* The end of a capture, shared by a first capture's (graph.c) and a recapture's (update.c):
 * the template's node count, with a warning naming `what` ("capture", "recapture") when it is
 * empty; and the capture's allocation log kept as the one its recapture replays. */
size_t recap__graph_template_nodes(recap_cuda_graph_t template_graph, const char *what);
void recap__graph_keep_alloc_log(recap_graph_t graph);

/* recap_graph_capture_end of a first capture (capture.c sends recaptures to update.c). */
recap_status_t recap__graph_capture_end(recap_graph_t graph);

/* The pieces of a capture's end that a recapture's end (update.c) shares with graph.c: stop
 * routing and forget the capture in the registry; the layers' hooks (ended, captured,
 * released: the last frees the hooks array). */
void recap__graph_close_capture(recap_graph_t graph);
void recap__graph_hooks_capture_ended(recap_graph_t graph, bool succeeded);
recap_status_t recap__graph_hooks_captured(recap_graph_t graph, recap_cuda_graph_t template_graph);
void recap__graph_hooks_release(recap_graph_t graph);
/* The instantiated_afresh hooks (see recap__graph_hooks_t). */
recap_status_t recap__graph_hooks_instantiated_afresh(recap_graph_t graph,
                                                      recap_cuda_graph_t template_graph);
/* The same for the hooks a recapture set aside (graph->old). */
void recap__graph_hooks_release_old(recap_graph_t graph);

/* RECAP_ERROR_INVALID_USAGE naming function while graph is recaptured: what it captured (the
 * template, the executable, the layers' view of them) is set aside until the recapture ends. */
recap_status_t recap__graph_not_recapturing(recap_graph_t graph, const char *function);

/* Whether graph drops its template once it has an executable (not KEEP, not kept for
 * rebinding). */
bool recap__graph_drops_template(recap_graph_t graph);

/* Recaptures (update.c), for capture.c: set the held capture aside before its recapture
 * begins; put it back when the recapture's start failed (recap__graph_capture_start undid
 * itself); abandon a recapture that began (its CUDA capture is ended and thrown away, the old
 * capture is back; the last error stays the caller's); and end a recapture
 * (recap_graph_capture_end). */
void recap__recapture_set_aside(recap_graph_t graph);
void recap__recapture_put_back(recap_graph_t graph);
void recap__recapture_abandon(recap_graph_t graph);
recap_status_t recap__recapture_end(recap_graph_t graph);

/* Reset the graph (recap_graph_reset) but remember the pool of the capture it abandons, as a
 * failed capture does: for capture_begin's own failures once the capture began. */
recap_status_t recap__graph_abandon(recap_graph_t graph);

/* Instantiate graph into *exec, measuring the device memory the executable takes: *bytes is
 * the drop of cudaMemGetInfo's free bytes across the call (0 when free did not drop, or when
 * the device could not say; that failure is no failure of the call). memory.c, for every place
 * that instantiates: graph.c, update.c and region_state.c. */
recap_status_t recap__graph_instantiate_measured(recap_cuda_graph_exec_t *exec,
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

/* The side stream of the current device that capture scopes use when given none. */
recap_status_t recap__side_stream(recap_stream_t *stream);
/* Forget the side streams (tests, after the fake device was reset). */
void recap__side_streams_forget(void);

/* For tests: override RECAP_DISABLE_GRAPHS (-1 restores reading the environment). */
void recap__graphs_disabled_override(int disabled);

#endif /* RECAP_GRAPH_INTERNAL_H */
