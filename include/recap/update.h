/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/update.h — capture a step again into the same graph, and update the graph's executable
 * in place from the new capture (cudaGraphExecUpdate) instead of instantiating it afresh:
 *
 *     recap_graph_capture_begin(g, NULL, stream);   // the first capture, as usual
 *     step(stream, 0);
 *     recap_graph_capture_end(g);                   // instantiates
 *     for (int t = 1;; t++) {
 *       recap_graph_recapture_begin(g, NULL, stream); // same pool, same options
 *       step(stream, t);                              // the same recap_malloc sequence gets
 *       recap_graph_capture_end(g);                   //   the same addresses; update or not
 *       recap_graph_replay(g, stream);
 *     }
 *
 * Whether each recapture updated the executable or instantiated a new one, and why, is in the
 * graph's counters (recap_graph_update_stats); a policy (recap_graph_update_policy_set) says
 * when recap should stop trying updates. See docs/update.md.
 */
#ifndef RECAP_UPDATE_H
#define RECAP_UPDATE_H

#include "core.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a recapture's new template was not applied to the executable in place (NONE: it was).
 * The first reasons after NONE are the driver's (cudaGraphExecUpdateResult), then recap's. */
typedef enum recap_update_reason {
  RECAP_UPDATE_REASON_NONE = 0, /* updated in place */
  RECAP_UPDATE_REASON_TOPOLOGY_CHANGED,
  RECAP_UPDATE_REASON_NODE_TYPE_CHANGED,
  RECAP_UPDATE_REASON_FUNCTION_CHANGED,
  RECAP_UPDATE_REASON_PARAMETERS_CHANGED,
  RECAP_UPDATE_REASON_NOT_SUPPORTED,
  RECAP_UPDATE_REASON_UNSUPPORTED_FUNCTION_CHANGE,
  RECAP_UPDATE_REASON_ATTRIBUTES_CHANGED,
  RECAP_UPDATE_REASON_REFUSED_OTHER,   /* the driver refused for another reason */
  RECAP_UPDATE_REASON_NO_EXECUTABLE,   /* there was no executable to update */
  RECAP_UPDATE_REASON_POLICY_NEVER,    /* policy: always instantiate */
  RECAP_UPDATE_REASON_POLICY_FAILURES, /* policy: K consecutive refusals */
  RECAP_UPDATE_REASON_POLICY_SLOWER,   /* policy: updated replays measured slower */
  /* The recapture turned rebinding on, and the capture it replaces had not kept the graph the
   * executable was instantiated from, through whose nodes alone CUDA patches the executable:
   * instantiated afresh so that it can be rebound. */
  RECAP_UPDATE_REASON_NO_ORIGIN,
  /* policy: updated replays have their samples and fresh ones do not (a loop that replays each
   * executable fewer than measure_replays times): instantiated afresh to time its replays. */
  RECAP_UPDATE_REASON_POLICY_MEASURE,
  RECAP_UPDATE_REASON_COUNT
} recap_update_reason_t;

/* "none", "topology_changed", ... (the enumerator's name after RECAP_UPDATE_REASON_, in lower
 * case); "unknown" out of range. The string is static. */
RECAP_API const char *recap_update_reason_name(recap_update_reason_t reason);

/* ------------------------------------------------------------------------------------------
 * Recapture
 * ---------------------------------------------------------------------------------------- */

/* Begin capturing the step again into graph, which holds a capture (state CAPTURED or
 * INSTANTIATED). The recapture uses the graph's pool (the graph keeps its reference across)
 * and the options of the graph's last capture, unless options say otherwise (options NULL: the
 * last capture's; a pool in options must be {0,0} or the graph's own, otherwise
 * RECAP_ERROR_INVALID_ARGUMENT). Allocations made with recap_malloc during the recapture get
 * the addresses the previous capture's allocations got, in the same order and with the same
 * sizes, where those addresses are free in the pool (free the previous capture's outputs first,
 * or allocate them outside the capture). The old executable stays, but replaying it during the
 * recapture is RECAP_ERROR_INVALID_USAGE, as are the accessors of what the graph captured
 * (recap_graph_raw, raw_exec, node_count, inspect, debug_dump), as during any capture. recap_graph_capture_end then applies the new
 * template to the executable (cudaGraphExecUpdate) or instantiates it afresh, per the graph's
 * policy, and counts which happened and why. A recapture that fails (invalidated; an update
 * that fails other than by the driver's refusal, which is not worked around; the instantiation
 * after a refusal) leaves the graph as it was: old executable, old template and the layers'
 * state of the old capture (random numbers, input liveness, annotations, rebinding sites),
 * replayable, and the counters unchanged. Errors:
 * RECAP_ERROR_INVALID_USAGE for a graph that holds no capture (fresh, capturing, eager), and
 * those of recap_graph_capture_begin. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_recapture_begin(
    recap_graph_t graph, const recap_capture_options_t *options, recap_stream_t stream);

/* ------------------------------------------------------------------------------------------
 * Policy
 * ---------------------------------------------------------------------------------------- */

/* When a recapture tries to update the executable. Start from RECAP_UPDATE_POLICY_INIT (always
 * try an update), then set fields; `size` follows the options rule of recap/graph.h (the first
 * version ends at measure_replays). */
typedef struct recap_update_policy {
  size_t size;      /* sizeof(recap_update_policy_t), set by the INIT macro */
  int never_update; /* 1: always instantiate afresh (reason POLICY_NEVER) */
  /* >0: after this many refusals in a row, stop trying updates for `retry_after` recaptures,
   * which instantiate afresh (reason POLICY_FAILURES). */
  unsigned max_failures;
  unsigned retry_after; /* recaptures without trying (0: 16) */
  /* >0 (0.05 = 5%): after a fresh instantiation, time `measure_replays` replays; after an
   * update, as many; when the updated executable's median is slower than the fresh one's by
   * more than this fraction, the next `retry_after` recaptures instantiate afresh (reason
   * POLICY_SLOWER). When the updated replays have their samples and the fresh ones do not,
   * the next recaptures (at most measure_replays a round) instantiate afresh to take them
   * (reason POLICY_MEASURE). Replays record timing events only while a measurement runs, and
   * never synchronise: the times are read at a later replay or recapture, once the GPU
   * finished. */
  double max_slowdown;
  unsigned measure_replays; /* 0: 8 */
} recap_update_policy_t;

#define RECAP_UPDATE_POLICY_INIT \
  { sizeof(recap_update_policy_t), 0, 0, 0, 0.0, 0 }

/* Set graph's policy (policy NULL: RECAP_UPDATE_POLICY_INIT), at any time; the next
 * recapture's end follows it. A pause under way (after max_failures or a slower measurement)
 * ends; the counters stay. Measurements start at the next fresh instantiation (set the policy
 * before the first capture to measure its executable). max_slowdown negative or not a number:
 * RECAP_ERROR_INVALID_ARGUMENT. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_update_policy_set(recap_graph_t graph, const recap_update_policy_t *policy);
RECAP_DEPRECATED("use recap_graph_update_policy_set")
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_set_update_policy(recap_graph_t graph, const recap_update_policy_t *policy);

/* ------------------------------------------------------------------------------------------
 * Counters
 * ---------------------------------------------------------------------------------------- */

/* The graph's counters since it was created or last reset (recap_graph_reset zeroes them; the
 * policy stays). Set `size` (the INIT macro does): recap fills the fields that fit in it,
 * following the options rule of recap/graph.h (the first version ends at fresh_replay_ms). */
typedef struct recap_update_stats {
  size_t size;             /* sizeof(recap_update_stats_t), set by RECAP_UPDATE_STATS_INIT */
  uint64_t recaptures;     /* recaptures that succeeded (recapture_begin, then capture_end) */
  uint64_t updates;        /* executables updated in place (cudaGraphExecUpdate) */
  uint64_t instantiations; /* fresh instantiations at a recapture */
  /* Why each of those instantiations happened (by_reason[NONE] stays 0; their sum is
   * `instantiations`). */
  uint64_t by_reason[RECAP_UPDATE_REASON_COUNT];
  /* Of the last recapture: NONE after an update; a driver's reason when it refused, then the
   * node it named (recap_graph_inspect order) or SIZE_MAX; recap's reason when no update was
   * tried (NO_EXECUTABLE: a KEEP graph never instantiated keeps the new template and
   * instantiates nothing). last_node is SIZE_MAX unless the driver named a node. */
  recap_update_reason_t last_reason;
  size_t last_node;
  /* Updates refused in a row since the last one applied (recaptures that did not try leave it
   * as it is). Reaching max_failures (and each refusal past it) begins a pause. */
  uint64_t consecutive_failures;
  uint64_t rebinds, sites_patched; /* recap_graph_rebind calls that succeeded, sites changed */
  /* Allocations of recaptures that got the address the previous capture's allocation got, and
   * those that did not (the pool grew, or reused another free block). */
  uint64_t pool_reused, pool_new;
  /* The policy's last measurements: median milliseconds of a replay after an update and after
   * a fresh instantiation (0: not measured). */
  double updated_replay_ms, fresh_replay_ms;
} recap_update_stats_t;

#define RECAP_UPDATE_STATS_INIT                                                                  \
  {                                                                                              \
    sizeof(recap_update_stats_t), 0, 0, 0, {0}, RECAP_UPDATE_REASON_NONE, 0, 0, 0, 0, 0, 0, 0.0, \
        0.0                                                                                      \
  }

/* *stats = graph's counters (stats->size set by the caller). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_update_stats(recap_graph_t graph,
                                                                  recap_update_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_UPDATE_H */
