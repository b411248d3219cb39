/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hooks.h — the one way the modules above the graph core attach to a graph: a table of
 * functions named for the graph's events (its capture ends, its template is read, its
 * executable is patched or replayed, a nested graph begins capturing, ...), attached with a
 * context during a capture and released with what the capture made, or attached for the
 * graph's whole life by a module whose state outlives captures (the update policy) (hooks.c).
 *
 * The graph core and the modules that cause an event (rebinding patches the executable, regions
 * capture nested graphs) raise it through the recap__graph_hooks_* functions below, never by
 * calling the module that attached; a module keeps its state in its context, found again with
 * recap__graph_hook_ctx. A graph with no hook handling replay events replays without walking
 * the hooks (`events`).
 */
#ifndef RECAP_GRAPH_HOOKS_H
#define RECAP_GRAPH_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "recap/graph.h"
#include "recap/inspect.h"

/* A range the executable's sites move into (the exec_patching event). */
typedef struct recap__patch_range {
  const void *base;
  size_t size;
} recap__patch_range_t;

/* What the captured event tells the modules: the new template, and for a recapture that will
 * update the executable in place, the graph whose nodes patch that executable (CUDA patches an
 * executable only through the nodes of the graph it was instantiated from). A module that
 * plans patches against `origin` and finds it cannot stand for the template (the device's patch
 * plan refuses it: another node count, or another node type at an index) plans against the
 * template itself and sets origin_unfit: a change of topology that the driver cannot update the
 * executable across, so the recapture asks the driver anyway (its refusal gives the counters
 * their reason) and the fresh instantiation that follows needs no planning again
 * (instantiated_afresh is not raised). */
typedef struct recap__captured {
  recap_cuda_graph_t template_graph;
  recap_cuda_graph_t origin; /* NULL: a first capture, or the template will be instantiated */
  bool origin_unfit;
  /* Set by a module that made nodes of the template device-updatable (graph parameters applied
   * on the GPU): CUDA never updates such an executable in place. */
  bool device_nodes;
} recap__captured_t;

typedef struct recap__graph_hooks {
  /* What the module is, in words, for messages ("random-number generators"). */
  const char *name;
  /* Why a graph whose capture the module attached to cannot be embedded in another capture (a
   * replay inside it, embed.c), as the end of "the graph holds ..."; NULL: no objection. A
   * module that acts on the host at each replay (before_replay, launch) objects anyway, unless
   * it handles embed_begin. */
  const char *embed_refusal;
  /* The graph is about to be embedded in outer's capture on stream (embed.c): make outer's
   * replays do what this module does at the graph's replays (random numbers: outer draws from
   * the generator too, and the work before the node shifts where the node's kernels draw),
   * enqueuing on stream what must precede the node. A failure refuses the embedding; the module
   * then undoes what it did itself. Optional; a module that handles it does not stop the graph
   * from being embedded. */
  recap_status_t (*embed_begin)(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                recap_stream_t stream);
  /* Whether embed_begin would refuse the embedding for a rule of the module's (random numbers:
   * a generator another capture under way uses), changing nothing: asked before anything of
   * the embedding happens, and by callers that stage work before they replay (graphed
   * callables). Optional. */
  recap_status_t (*embed_refused)(void *ctx, recap_graph_t graph, recap_graph_t outer);
  /* After embed_begin succeeded: the child node was added (added true: enqueue on stream what
   * must follow it, and keep the change) or not (undo what embed_begin did, on the capture as
   * well). A failure after the node was added fails the embedding with the node in the capture,
   * which must then be abandoned. Optional; required with embed_begin. */
  recap_status_t (*embed_end)(void *ctx, recap_graph_t graph, recap_graph_t outer,
                              recap_stream_t stream, bool added);
  /* Before every launch of the executable, on the replay stream. A failure stops the replay;
   * the hook then undoes what it did itself. */
  recap_status_t (*before_replay)(void *ctx, recap_graph_t graph, recap_stream_t stream);
  /* The replay's launch, when the executable alone is not the whole graph (regions on the host
   * path: a host loop's program runs first): run it on stream, launching the executable through
   * recap__graph_launch_exec. At most one attached hook supplies it; without one the replay
   * launches the executable itself. Optional. */
  recap_status_t (*launch)(void *ctx, recap_graph_t graph, recap_stream_t stream);
  /* The replay failed after this hook's before_replay succeeded (a later hook or the launch
   * failed): undo what before_replay did, so that a failed replay changes nothing. Must not
   * fail, nor record an error. Optional. */
  void (*replay_failed)(void *ctx, recap_graph_t graph);
  /* The replay launched (after this hook's before_replay succeeded). Must not fail, nor record
   * an error. Optional. */
  void (*replay_done)(void *ctx, recap_graph_t graph);
  /* When the capture ends: succeeded is false if it was invalidated or failed. */
  void (*capture_ended)(void *ctx, recap_graph_t graph, bool succeeded);
  /* Whether the module paused the capture's stream (regions between two graphs they capture
   * into): it captures nothing now, so ending it finds nothing to end. Optional. */
  bool (*capture_paused)(void *ctx, recap_graph_t graph);
  /* The capture under way failed or is being abandoned, before capture_ended: `ended` is what
   * ending its stream's capture handed back (NULL: nothing, or the end failed). Return the graph
   * the caller must destroy: `ended`, or the module's own when the capture ran in a graph of
   * the module's (regions: a nested graph belongs to its conditional node, inside the top-level
   * graph they resumed into, which is theirs until a capture_end succeeds). Optional. */
  recap_cuda_graph_t (*capture_abandoned)(void *ctx, recap_graph_t graph, recap_cuda_graph_t ended);
  /* Whether a replay runs graphs of the module's besides the executable (regions on the host
   * path: a host loop's program); then *nodes and *exec_bytes grow by those graphs' nodes and
   * the device bytes measured at their instantiation, which the graph's node count and memory
   * include, and the graph is no single CUDA graph to hand out or read. Optional. */
  bool (*own_graphs)(void *ctx, recap_graph_t graph, size_t *nodes, int64_t *exec_bytes);
  /* The graph drops what it captured (reset, destroy, failed capture): free ctx. */
  void (*release)(void *ctx, recap_graph_t graph);
  /* The capture succeeded: the template, before it is instantiated (and dropped, without
   * KEEP). A failure fails capture_end, and the graph is fresh again. Optional. */
  recap_status_t (*captured)(void *ctx, recap_graph_t graph, recap__captured_t *captured);
  /* recap_graph_inspect read the kept template into info: add what the module knows of its
   * nodes (annotations: their labels). A failure fails the inspection. Optional. */
  recap_status_t (*inspect)(void *ctx, recap_graph_t graph, recap_graph_info_t *info);
  /* recap_graph_debug_dump wrote the template's DOT to path: add to the file (annotations:
   * their labels). A failure fails the dump. Optional. */
  recap_status_t (*dump)(void *ctx, recap_graph_t graph, const char *path);
  /* Something is about to instantiate from the template, or read it (recap_graph_instantiate,
   * a replay that instantiates, recap_graph_raw, recap_graph_inspect, debug_dump): write into
   * it what the module changed in the executable only (rebinding: the patched addresses). A
   * failure fails that call. Optional. */
  recap_status_t (*template_read)(void *ctx, recap_graph_t graph);
  /* The executable's sites are about to be patched (recap_graph_rebind): sites[i] (count of
   * them) is every site of the graph (graph_reads' list and order) with the address it will
   * hold if the patch succeeds, and to[j] (moves of them) the new ranges of the batch. The
   * module prepares what it must change (input liveness: the blocks it watches) without making
   * it visible; a failure (host memory) refuses the patch, nothing changed. Optional; if
   * present, exec_patched is called once after every exec_patching that succeeded. */
  recap_status_t (*exec_patching)(void *ctx, recap_graph_t graph, const recap__graph_read_t *sites,
                                  size_t count, const recap__patch_range_t *to, size_t moves);
  /* The patch prepared by exec_patching was applied (applied true: make it visible) or not
   * (drop what exec_patching prepared). Must not fail. */
  void (*exec_patched)(void *ctx, recap_graph_t graph, bool applied);
  /* A recapture planned against the old executable's origin (recap__captured_t), but its
   * template was instantiated afresh (the driver refused the update): plan again against the
   * new template, which is the new executable's origin. A failure fails the recapture, which
   * leaves the graph as it was. Optional. */
  recap_status_t (*instantiated_afresh)(void *ctx, recap_graph_t graph,
                                        recap_cuda_graph_t template_graph);
  /* A nested graph (a conditional node's body: recap_region_begin, recap_region_next_branch)
   * begins capturing, `depth` levels deep (1: a body of the graph itself). A failure fails the
   * call that began it. Optional. */
  recap_status_t (*nested_capture_begin)(void *ctx, recap_graph_t graph, unsigned depth);
  /* The nested graph being captured on stream, `depth` deep, is about to end
   * (recap_region_next_branch, recap_region_end): enqueue on stream what the module appends to
   * every nested graph (random numbers: the advance of the Philox offset by what the body drew,
   * so that each iteration draws fresh numbers). A failure fails the call that ends it.
   * Optional. */
  recap_status_t (*nested_capture_end)(void *ctx, recap_graph_t graph, recap_stream_t stream,
                                       unsigned depth);
  /* The events below reach only the modules attached for the graph's life (recap__graph_attach),
   * whose release comes with recap_graph_destroy. */
  /* The graph dropped what it captured (recap_graph_reset, a capture abandoned): the update
   * policy's measurements, a pause under way and its counters end. Must not fail. */
  void (*graph_reset)(void *ctx, recap_graph_t graph);
  /* The recapture under way failed before its end and is abandoned: the module that holds the
   * capture it replaces (update) ends and throws away its CUDA capture and puts the old one
   * back. Must not fail; the last error stays the caller's. */
  void (*recapture_abandoned)(void *ctx, recap_graph_t graph);
  /* An executable was instantiated afresh from the template (capture_end,
   * recap_graph_instantiate, a replay of a KEEP graph). Must not fail. */
  void (*instantiated)(void *ctx, recap_graph_t graph);
  /* Launch the executable (recap__graph_launch_exec) in place of a plain launch: the update
   * policy's timed launches while it measures. At most one attached module supplies it. */
  recap_status_t (*launch_exec)(void *ctx, recap_graph_t graph, recap_stream_t stream);
} recap__graph_hooks_t;

typedef struct recap__graph_hook_entry {
  const recap__graph_hooks_t *hooks;
  void *ctx;
} recap__graph_hook_entry_t;

/* The events some attached hook handles, so that the hot paths skip the walk when none does. */
enum {
  RECAP__GRAPH_EVENTS_REPLAY = 1u << 0,       /* before_replay, launch, replay_failed, _done */
  RECAP__GRAPH_EVENTS_EXEC_PATCHING = 1u << 1 /* exec_patching */
};

/* The hooks attached to one capture of a graph, in the order they attached. */
typedef struct recap__graph_hook_set {
  recap__graph_hook_entry_t *entries;
  size_t count, capacity;
  unsigned events;      /* RECAP__GRAPH_EVENTS_* of the attached hooks */
  size_t launcher;      /* 1 + the index of the hook that supplies the launch; 0: none */
  size_t exec_launcher; /* the same for launch_exec */
} recap__graph_hook_set_t;

/* Attach hooks with ctx to a graph whose capture is under way. */
recap_status_t recap__graph_add_hook(recap_graph_t graph, const recap__graph_hooks_t *hooks,
                                     void *ctx);

/* Detach the hooks attached with ctx to graph's capture (a module undoing its attachment when
 * the call that attached fails); the caller frees ctx. Nothing when none was. */
void recap__graph_remove_hook(recap_graph_t graph, const recap__graph_hooks_t *hooks, void *ctx);

/* The ctx attached with hooks, or NULL when none was. */
void *recap__graph_hook_ctx(recap_graph_t graph, const recap__graph_hooks_t *hooks);

/* Attach hooks with ctx to graph for its whole life, in any state (graph->attached): they stay
 * through resets and recaptures, and are released by recap_graph_destroy. The ctx attached so
 * with hooks, or NULL. Replace the table ctx was attached with (its events change: the update
 * policy supplies launch_exec only while its policy may measure). Like every other use of a
 * graph, these are not made while another thread replays it. */
recap_status_t recap__graph_attach(recap_graph_t graph, const recap__graph_hooks_t *hooks,
                                   void *ctx);
void *recap__graph_attached_ctx(recap_graph_t graph, const recap__graph_hooks_t *hooks);
void recap__graph_reattach(recap_graph_t graph, void *ctx, const recap__graph_hooks_t *hooks);

/* Raise an event: call the hooks that handle it, in the order they attached. The ones that can
 * fail stop at the first failure and return it. */
void recap__graph_hooks_capture_ended(recap_graph_t graph, bool succeeded);
bool recap__graph_hooks_capture_paused(recap_graph_t graph);
recap_cuda_graph_t recap__graph_hooks_capture_abandoned(recap_graph_t graph,
                                                        recap_cuda_graph_t ended);
/* own_graphs: whether any hook runs graphs of its own; *nodes and *exec_bytes (set to 0 first)
 * add up theirs. */
bool recap__graph_hooks_own_graphs(recap_graph_t graph, size_t *nodes, int64_t *exec_bytes);
recap_status_t recap__graph_hooks_captured(recap_graph_t graph, recap__captured_t *captured);
recap_status_t recap__graph_hooks_template_read(recap_graph_t graph);
recap_status_t recap__graph_hooks_instantiated_afresh(recap_graph_t graph,
                                                      recap_cuda_graph_t template_graph);
recap_status_t recap__graph_hooks_inspect(recap_graph_t graph, recap_graph_info_t *info);
recap_status_t recap__graph_hooks_dump(recap_graph_t graph, const char *path);
recap_status_t recap__graph_hooks_nested_capture_begin(recap_graph_t graph, unsigned depth);
recap_status_t recap__graph_hooks_nested_capture_end(recap_graph_t graph, recap_stream_t stream,
                                                     unsigned depth);
/* The first hook attached to graph's capture, other than `except`, that stops the graph from
 * being embedded in another capture (embed.c): one with an embed_refusal, or one that acts on
 * the host at each replay (before_replay, launch) and has no embed_begin to make the capturing
 * graph's replays do it. NULL when there is none. */
const recap__graph_hooks_t *recap__graph_hooks_unembeddable(recap_graph_t graph,
                                                            const recap__graph_hooks_t *except);
/* embed_refused, through graph's hooks in order until one refuses. */
recap_status_t recap__graph_hooks_embed_refused(recap_graph_t graph, recap_graph_t outer);
/* embed_begin, through graph's hooks in order until one fails; *prepared: how many were walked
 * (pass it to recap__graph_hooks_embed_end, which tells those that prepared whether the node
 * was added, and returns the first failure of those that were told it was). */
recap_status_t recap__graph_hooks_embed_begin(recap_graph_t graph, recap_graph_t outer,
                                              recap_stream_t stream, size_t *prepared);
recap_status_t recap__graph_hooks_embed_end(recap_graph_t graph, recap_graph_t outer,
                                            recap_stream_t stream, size_t prepared, bool added);
/* exec_patching, through the hooks in order until one fails; *prepared: how many were walked
 * (pass it to recap__graph_hooks_exec_patched, which tells those that prepared). */
recap_status_t recap__graph_hooks_exec_patching(recap_graph_t graph,
                                                const recap__graph_read_t *sites, size_t count,
                                                const recap__patch_range_t *to, size_t moves,
                                                size_t *prepared);
void recap__graph_hooks_exec_patched(recap_graph_t graph, size_t prepared, bool applied);

/* The replay (recap_graph_replay), when the graph's hooks handle replay events: before_replay
 * in order, the launch (the launcher hook's, or the executable's), then replay_done; a failure
 * tells the hooks that prepared (replay_failed, newest first) and is returned. */
recap_status_t recap__graph_hooks_replay(recap_graph_t graph, recap_stream_t stream);

/* The release event (each hook frees its ctx), then the set itself, empty afterwards: of the
 * capture the graph holds or is making, or of a set kept aside (the capture a recapture
 * replaces, which update keeps until the recapture ends). */
void recap__graph_hooks_release(recap_graph_t graph);
void recap__graph_hook_set_release(recap_graph_t graph, recap__graph_hook_set_t *set);

/* The events of the modules attached for the graph's life: graph_reset, recapture_abandoned,
 * instantiated, and their release (recap_graph_destroy). */
void recap__graph_hooks_graph_reset(recap_graph_t graph);
/* recapture_abandoned, to the one module that handles it; false when none does. */
bool recap__graph_hooks_recapture_abandoned(recap_graph_t graph);
void recap__graph_hooks_instantiated(recap_graph_t graph);
void recap__graph_hooks_release_attached(recap_graph_t graph);

#endif /* RECAP_GRAPH_HOOKS_H */
