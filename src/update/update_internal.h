/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_internal.h — a graph's update policy, its counters and its replay-time measurements
 * (update_policy.c), which update.c attaches to the graph for its life (through the graph's
 * hooks: resets, instantiations, and the replays' launch while the policy measures) and uses
 * at recaptures.
 *
 * update_policy.c knows nothing of the graph object: it works on a recap__update_t alone.
 */
#ifndef RECAP_UPDATE_INTERNAL_H
#define RECAP_UPDATE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "recap/graph.h"
#include "recap/update.h"

/* Which kind of executable the graph holds, for the measurements: one freshly instantiated
 * (never updated since), or one updated at least once. */
typedef enum recap__exec_kind { RECAP__EXEC_FRESH = 0, RECAP__EXEC_UPDATED } recap__exec_kind_t;

/* A timed launch: its two events, and the kind of executable it launched (in flight while
 * `used`, until both events completed and were read). */
typedef struct recap__timed_launch {
  recap__event_t before, after;
  recap__exec_kind_t kind;
  bool used;
} recap__timed_launch_t;

typedef struct recap__update {
  recap_update_policy_t policy; /* size set; 0 fields: the defaults */
  recap_update_stats_t stats;   /* size set */
  /* Recaptures left that instantiate without trying an update, and why (POLICY_FAILURES or
   * POLICY_SLOWER). */
  unsigned pause_left;
  recap_update_reason_t pause_reason;
  /* Measurements (max_slowdown > 0). `active` is the one flag recap_graph_replay tests
   * (recap__update_measuring): true while the executable's replays are wanted for a
   * measurement or timed launches are in flight. Samples (milliseconds of one launch) collect
   * per kind of executable, over as many executables as it takes, until each kind has
   * `measure_replays`; then the medians are compared once (`compared`), until the next fresh
   * instantiation begins a new round. Replays of one graph may run in several threads at once:
   * `lock` guards everything here but `active`, which is written under it and read without. */
  pthread_mutex_t lock;
  atomic_bool active;
  bool compared;
  recap__exec_kind_t exec_kind;
  /* The executable was instantiated afresh or updated, and not launched outside a capture
   * through recap__update_launch since: its first launch would include its upload to the device,
   * so a timed one uploads it first. Launches that do not measure leave it set (a later timed
   * launch then uploads again an executable those launches uploaded). */
  bool needs_upload;
  float *samples[2]; /* [kind]: up to `wanted` each */
  unsigned sample_count[2];
  unsigned wanted;                 /* measure_replays (0: 8) when the arrays were made */
  recap__timed_launch_t *launches; /* 2 * wanted slots */
  /* Recaptures of this round that instantiated afresh only to take fresh samples
   * (POLICY_MEASURE): at most `wanted`. */
  unsigned measure_instantiations;
  /* The default policy's check (max_slowdown 0, auto_check_nodes >= 0), on executables of
   * more than auto_check_nodes nodes: exec_nodes is the executable's node count (0 when it may
   * not be checked). Samples of kind FRESH are the baseline, the first replays after the
   * instantiation; `checking` while samples of kind UPDATED are wanted, after auto_check_period
   * changes (`changes`, counted since the instantiation or the last check). `renew`: a check
   * found the executable slower, so the next change or recapture instantiates afresh. */
  size_t exec_nodes;
  uint64_t changes;
  bool checking;
  bool renew;
} recap__update_t;

/* A graph's update state at creation: the default policy, counters at zero (last_node
 * SIZE_MAX). */
void recap__update_init(recap__update_t *u);
/* Destroy the measurements' events and samples (graph destroy). */
void recap__update_free(recap__update_t *u);
/* The graph was reset: the measurements, a pause under way and the counters end; the policy
 * stays. */
void recap__update_forget(recap__update_t *u);

/* Set the policy (already copied and checked by the caller): a pause under way ends. */
void recap__update_set_policy(recap__update_t *u, const recap_update_policy_t *policy);

/* What a recapture whose capture succeeded should do with the graph's executable (has_exec:
 * one exists): RECAP_UPDATE_REASON_NONE to try an update, otherwise the reason to instantiate
 * afresh (NO_EXECUTABLE, POLICY_NEVER, the pause's reason, POLICY_MEASURE while the
 * measurement lacks fresh samples the updated ones have, or POLICY_SLOWER when the default
 * policy's check found the executable slower). Changes nothing. */
recap_update_reason_t recap__update_decide(recap__update_t *u, bool has_exec);

/* A recapture succeeded: `decided` is what recap__update_decide said, `outcome` what happened
 * (NONE: updated in place; a driver's reason: refused, then instantiated; decided's reason:
 * instantiated without trying), node the node the driver named (or SIZE_MAX), instantiated
 * whether an executable was made, nodes as for recap__update_fresh. reused / fresh: the
 * recapture's allocations that got their old address, and those that did not. Counts it, moves
 * the pause and the count of refusals, and starts the measurement the policy wants for the new
 * executable (or, under the default policy's check, counts the update as a change). */
void recap__update_record(recap__update_t *u, recap_update_reason_t decided,
                          recap_update_reason_t outcome, size_t node, bool instantiated,
                          size_t nodes, uint64_t reused, uint64_t fresh);

/* An executable of `nodes` nodes (0: not to be checked) was instantiated afresh (capture_end,
 * recap_graph_instantiate, a replay of a KEEP graph, a recapture, a renewal): with max_slowdown
 * set, or under the default policy's check, time its next replays. */
void recap__update_fresh(recap__update_t *u, size_t nodes);

/* Whether the default policy's check applies to the executable: its replays then go through
 * recap__update_launch, which times them only during a check. */
bool recap__update_checks(recap__update_t *u);

/* A check found the executable slower than after its instantiation: true once, and the caller
 * instantiates afresh (then counted by recap__update_count_renewal). */
bool recap__update_take_renewal(recap__update_t *u);
void recap__update_count_renewal(recap__update_t *u);

/* Whether replays take the measuring path (recap__update_launch). */
static inline bool recap__update_measuring(recap__update_t *u) {
  return atomic_load_explicit(&u->active, memory_order_relaxed);
}

/* *stats = the counters, read at once. */
void recap__update_stats_get(recap__update_t *u, recap_update_stats_t *stats);

/* A rebind (recap_graph_rebind) succeeded, patching `sites` sites: the stats count it. */
void recap__update_count_rebind(recap__update_t *u, uint64_t sites);

/* A patch of params.c succeeded: a parameter set (recap_param_set, recap_params_set) that set
 * `nodes` kernel nodes, an argument set or a shape set (nodes unused: one node each). */
typedef enum recap__patch_kind {
  RECAP__PATCH_PARAMS = 0,
  RECAP__PATCH_ARG,
  RECAP__PATCH_SHAPE
} recap__patch_kind_t;
void recap__update_count_patch(recap__update_t *u, recap__patch_kind_t kind, uint64_t nodes);

/* Launch exec on stream while recap__update_measuring(u): reads the times of earlier timed
 * launches the GPU finished, and times this launch when its kind still needs samples, never
 * waiting. The first launch of an executable since it was instantiated or updated, when timed,
 * uploads it (graph_upload) before the timing starts, so that the sample is a replay's time and
 * not the upload's. A timing or upload failure is logged and ends the round of measurements,
 * never the launch. */
recap_status_t recap__update_launch(recap__update_t *u, recap_cuda_graph_exec_t exec,
                                    recap_stream_t stream);

/* Read the times of the timed launches the GPU finished, and compare once both kinds have
 * their samples (a recapture calls this before it decides). */
void recap__update_poll(recap__update_t *u);

/* update.c: the update state attached to graph for its life (NULL before its first capture or
 * policy); its attachment on first need (capture.c, before a capture begins;
 * recap_graph_set_update_policy), RECAP_ERROR_OUT_OF_MEMORY without host memory, nothing
 * attached then; and a rebind or a patch of graph's counted (recap__update_count_rebind,
 * recap__update_count_patch). */
recap__update_t *recap__update_of(recap_graph_t graph);
recap_status_t recap__update_attach(recap_graph_t graph);
void recap__update_count_rebind_of(recap_graph_t graph, uint64_t sites);
void recap__update_count_patch_of(recap_graph_t graph, recap__patch_kind_t kind, uint64_t nodes);

/* Recaptures (update.c), for capture.c: set the held capture aside before its recapture
 * begins; put it back when the recapture's start failed (recap__graph_capture_start undid
 * itself); and end a recapture (recap_graph_capture_end). A recapture that began and fails
 * before its end is abandoned through the graph (recap__graph_abandon_capture). */
void recap__recapture_set_aside(recap_graph_t graph);
void recap__recapture_put_back(recap_graph_t graph);
recap_status_t recap__recapture_end(recap_graph_t graph);

#endif /* RECAP_UPDATE_INTERNAL_H */
