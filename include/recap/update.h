/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/update.h — capture a step again into the same graph and update its executable in
 * place (cudaGraphExecUpdate) instead of instantiating it afresh; counters say what each
 * recapture did, a policy when to stop trying updates. See docs/update.md.
 */
#ifndef RECAP_UPDATE_H
#define RECAP_UPDATE_H

#include "core.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a recapture's template was not applied in place (NONE: it was): the driver's reasons
 * (cudaGraphExecUpdateResult), then recap's. docs/update.md has the table. */
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
  RECAP_UPDATE_REASON_NO_ORIGIN,       /* rebinding turned on: instantiated afresh to rebind */
  RECAP_UPDATE_REASON_POLICY_MEASURE,  /* policy: instantiated afresh to time fresh replays */
  RECAP_UPDATE_REASON_COUNT
} recap_update_reason_t;

/* "none", "topology_changed", ... (the enumerator's name after RECAP_UPDATE_REASON_, in lower
 * case); "unknown" out of range. The string is static. */
RECAP_API const char *recap_update_reason_name(recap_update_reason_t reason);

/* ---- Recapture ------------------------------------------------------------------------------- */

/* Capture the step again into graph (CAPTURED or INSTANTIATED), in its pool, with its last
 * options (NULL) or options whose pool is {0,0} or its own; no replay until capture_end, which
 * updates or instantiates per the policy. A failed recapture leaves the graph as it was.
 * INVALID_USAGE: no capture held; else capture_begin's errors. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_recapture_begin(
    recap_graph_t graph, const recap_capture_options_t *options, recap_stream_t stream);

/* ---- Policy ---------------------------------------------------------------------------------- */

/* When a recapture tries an update. Start from RECAP_UPDATE_POLICY_INIT (always try, and check
 * large executables for a slowdown; docs/api.md, "Versioned structs"; the first version ends at
 * measure_replays). */
typedef struct recap_update_policy {
  size_t size;      /* sizeof(recap_update_policy_t), set by the INIT macro */
  int never_update; /* 1: always instantiate afresh (reason POLICY_NEVER) */
  /* >0: after this many refusals in a row, `retry_after` recaptures instantiate afresh. */
  unsigned max_failures;
  unsigned retry_after; /* recaptures without trying (0: 16) */
  /* >0 (0.05 = 5%): when updated replays measure slower than fresh ones by more than this, the
   * next `retry_after` recaptures instantiate afresh (docs/update.md, "The policy"). */
  double max_slowdown;
  unsigned measure_replays; /* 0: 8 */
  /* The check of the default policy (max_slowdown 0; the second version ends at
   * auto_check_slowdown): an executable of more than `auto_check_nodes` nodes (0: 128;
   * negative: no check) has its first replays after its instantiation timed, and a few more
   * after every `auto_check_period` changes (0: 64; updates in place, rebinds, parameter sets).
   * Slower than after its instantiation by more than `auto_check_slowdown` (0: 0.05), it is
   * instantiated afresh at its next change, or recapture (reason POLICY_SLOWER). Outside a
   * check its replays pay a call and a branch; graphs of up to 128 nodes pay nothing. */
  int auto_check_nodes;
  unsigned auto_check_period;
  double auto_check_slowdown;
} recap_update_policy_t;

#define RECAP_UPDATE_POLICY_INIT \
  { sizeof(recap_update_policy_t), 0, 0, 0, 0.0, 0, 0, 0, 0.0 }

/* Set graph's policy (NULL: RECAP_UPDATE_POLICY_INIT) at any time, for the next recaptures; a
 * pause under way ends, the counters stay. max_slowdown or auto_check_slowdown negative or NaN:
 * INVALID_ARGUMENT. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_update_policy_set(recap_graph_t graph, const recap_update_policy_t *policy);
RECAP_DEPRECATED("use recap_graph_update_policy_set")
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_set_update_policy(recap_graph_t graph, const recap_update_policy_t *policy);

/* ---- Counters -------------------------------------------------------------------------------- */

/* The graph's counters since create or reset. Start from RECAP_UPDATE_STATS_INIT (the first
 * version ends at fresh_replay_ms). */
typedef struct recap_update_stats {
  size_t size;             /* sizeof(recap_update_stats_t), set by RECAP_UPDATE_STATS_INIT */
  uint64_t recaptures;     /* recaptures that succeeded (recapture_begin, then capture_end) */
  uint64_t updates;        /* executables updated in place (cudaGraphExecUpdate) */
  uint64_t instantiations; /* fresh instantiations at a recapture */
  /* Why each of those instantiations happened (they sum to `instantiations`). */
  uint64_t by_reason[RECAP_UPDATE_REASON_COUNT];
  /* Of the last recapture: NONE after an update, else why not; last_node is the node the
   * driver named (recap_graph_inspect order), or SIZE_MAX. */
  recap_update_reason_t last_reason;
  size_t last_node;
  /* Updates refused in a row since the last one applied. */
  uint64_t consecutive_failures;
  uint64_t rebinds, sites_patched; /* recap_graph_rebind calls that succeeded, sites changed */
  /* Allocations of recaptures that got their previous address, and those that did not. */
  uint64_t pool_reused, pool_new;
  /* The policy's last medians, in ms, after an update and fresh (0: not measured). */
  double updated_replay_ms, fresh_replay_ms;
  /* Patches outside recaptures and rebinds (recap/params.h), successes only; the second
   * version ends at shape_sets. recap_param_set and recap_params_set calls, and the kernel
   * nodes they set in all (a batch sets each node once, whatever the number of its
   * parameters); recap_graph_kernel_arg_set and recap_graph_kernel_shape_set calls. */
  uint64_t param_sets, param_node_sets;
  uint64_t arg_sets, shape_sets;
  /* The third version ends here: checks of the default policy that compared an executable's
   * replays after its changes with those after its instantiation (auto_check_*). */
  uint64_t auto_checks;
} recap_update_stats_t;

#define RECAP_UPDATE_STATS_INIT                                                                  \
  {                                                                                              \
    sizeof(recap_update_stats_t), 0, 0, 0, {0}, RECAP_UPDATE_REASON_NONE, 0, 0, 0, 0, 0, 0, 0.0, \
        0.0, 0, 0, 0, 0, 0                                                                       \
  }

/* *stats = graph's counters (stats->size set by the caller). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_update_stats(recap_graph_t graph,
                                                                  recap_update_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_UPDATE_H */
