/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update.c — recapturing a graph in place (recap/update.h): the held capture is set aside while
 * the new one runs, and the new template then updates the executable (cudaGraphExecUpdate) or
 * replaces it with a fresh instantiation, per the graph's policy (update_policy.c). The policy's
 * state and what a recapture sets aside are this module's, attached to the graph for its life
 * through the graph's hooks (hooks.h: graph_reset, recapture_abandoned, instantiated, and the
 * executable's launch while the policy measures).
 *
 * The rule that shapes this file: a recapture that fails leaves the graph exactly as it was. So
 * nothing of the old capture is touched until the new one has fully succeeded: the old hooks
 * (random numbers, input liveness, annotations, rebinding) wait in the module's `old` while the
 * new capture attaches its own; the old executable stays in graph->exec while the new template is
 * applied to it (an update that the driver refuses leaves it unchanged) or a new executable is
 * instantiated beside it; the old allocation log stays while the new one records. Only then,
 * with nothing left that can fail, does the old go: hooks released, template destroyed, the
 * old executable destroyed if a new one replaced it, and the route's second pool reference
 * given back.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "graph/graph_internal.h"
#include "update/update_internal.h"

/* ------------------------------------------------------------------------------------------
 * The update state, attached to the graph for its life
 * ---------------------------------------------------------------------------------------- */

/* The module attached to a graph: its policy state, and while a recapture runs, what the
 * capture it replaces keeps until the new one succeeds. */
typedef struct update_module {
  recap__update_t policy; /* first: recap__update_of hands out its address */
  struct {
    bool active;
    recap__graph_hook_set_t hooks;
    size_t node_count;
    recap_capture_options_t options;
    bool keep_template;
  } old;
} update_module_t;

/* The graph dropped what it captured: a recapture under way gives back what it set aside (its
 * second pool reference is graph.c's), and the policy forgets the measurements. */
static void hook_graph_reset(void *ctx, recap_graph_t graph) {
  update_module_t *m = ctx;
  if (m->old.active) {
    recap__graph_hook_set_release(graph, &m->old.hooks);
    m->old.active = false;
  }
  recap__update_forget(&m->policy);
}

/* The executable's node count for the default policy's check: 0 (never checked) for one that
 * holds device-updatable nodes, which is neither updated nor instantiated afresh by the check. */
static size_t checked_nodes(recap_graph_t graph) {
  return graph->exec_device_nodes ? 0 : graph->node_count;
}

static void choose_hooks(recap_graph_t graph, update_module_t *m);

static void hook_instantiated(void *ctx, recap_graph_t graph) {
  update_module_t *m = ctx;
  recap__update_fresh(&m->policy, checked_nodes(graph));
  choose_hooks(graph, m);
}

/* While the policy measures, its launches time the replays; otherwise a plain one. */
static recap_status_t hook_launch_exec(void *ctx, recap_graph_t graph, recap_stream_t stream) {
  recap__update_t *u = &((update_module_t *)ctx)->policy;
  if (recap__update_measuring(u)) return recap__update_launch(u, graph->exec, stream);
  return recap__device()->graph_launch(graph->exec, stream);
}

static void hook_release(void *ctx, recap_graph_t graph) {
  update_module_t *m = ctx;
  if (m->old.active) recap__graph_hook_set_release(graph, &m->old.hooks);
  recap__update_free(&m->policy);
  recap__host_free(m);
}

/* The recapture under way failed before its end: its CUDA capture is ended and thrown away,
 * the old capture is back (the last error stays the caller's). */
static void hook_recapture_abandoned(void *ctx, recap_graph_t g);

/* A policy that measures (max_slowdown > 0) launches the replays; any other leaves them plain,
 * so that they pay nothing for the update policy. */
static const recap__graph_hooks_t plain_hooks = {.graph_reset = hook_graph_reset,
                                                 .recapture_abandoned = hook_recapture_abandoned,
                                                 .instantiated = hook_instantiated,
                                                 .release = hook_release};
static const recap__graph_hooks_t measuring_hooks = {.graph_reset = hook_graph_reset,
                                                     .recapture_abandoned =
                                                         hook_recapture_abandoned,
                                                     .instantiated = hook_instantiated,
                                                     .launch_exec = hook_launch_exec,
                                                     .release = hook_release};

/* Replays go through the policy's launch while it may time them: max_slowdown set, or the
 * default policy's check on an executable large enough. Others launch plainly. */
static void choose_hooks(recap_graph_t graph, update_module_t *m) {
  bool measures = m->policy.policy.max_slowdown > 0 || recap__update_checks(&m->policy);
  recap__graph_reattach(graph, m, measures ? &measuring_hooks : &plain_hooks);
}

static update_module_t *module_of(recap_graph_t graph) {
  update_module_t *m = recap__graph_attached_ctx(graph, &plain_hooks);
  return m ? m : recap__graph_attached_ctx(graph, &measuring_hooks);
}

recap__update_t *recap__update_of(recap_graph_t graph) {
  update_module_t *m = module_of(graph);
  return m ? &m->policy : NULL;
}

recap_status_t recap__update_attach(recap_graph_t graph) {
  if (module_of(graph)) return RECAP_SUCCESS;
  update_module_t *m = recap__host_calloc(1, sizeof *m);
  if (!m) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "update policy: out of host memory");
  recap__update_init(&m->policy);
  recap_status_t s = recap__graph_attach(graph, &plain_hooks, m);
  if (s != RECAP_SUCCESS) {
    recap__update_free(&m->policy);
    recap__host_free(m);
  }
  return s;
}

/* A check of the default policy found the executable slower after its changes: instantiate it
 * afresh from its template, which the layers keep in step with the executable (rebinds and
 * parameter sets; recap__graph_instantiate syncs it first). At a change, not at a replay: the
 * caller changing the executable has the graph to itself, while replays may run in several
 * threads. Without a template the next recapture does it. A failure is logged, never the
 * caller's: the graph then holds its template and no executable, and its next replay
 * instantiates, as for a KEEP graph. */
static void renew_if_slower(recap_graph_t graph, recap__update_t *u) {
  if (!graph->template_graph || !graph->exec || graph->recapturing || graph->exec_device_nodes ||
      !recap__update_take_renewal(u))
    return;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (recap__graph_instantiate(graph) == RECAP_SUCCESS)
    recap__update_count_renewal(u);
  else
    RECAP__WARN("update policy: instantiating the slower executable afresh failed: %s",
                recap_last_error());
  recap__error_restore(&saved);
}

void recap__update_count_rebind_of(recap_graph_t graph, uint64_t sites) {
  recap__update_t *u = recap__update_of(graph);
  if (!u) return;
  recap__update_count_rebind(u, sites);
  renew_if_slower(graph, u);
}

void recap__update_count_patch_of(recap_graph_t graph, recap__patch_kind_t kind, uint64_t nodes) {
  recap__update_t *u = recap__update_of(graph);
  if (!u) return;
  recap__update_count_patch(u, kind, nodes);
  renew_if_slower(graph, u);
}

/* ------------------------------------------------------------------------------------------
 * Set aside, put back
 * ---------------------------------------------------------------------------------------- */

void recap__recapture_set_aside(recap_graph_t g) {
  /* The capture's beginning attached the module (capture.c). */
  update_module_t *m = module_of(g);
  g->recapturing = true;
  m->old.active = true;
  m->old.hooks = g->hooks;
  m->old.node_count = g->node_count;
  m->old.options = g->options;
  m->old.keep_template = g->keep_template;
  g->hooks = (recap__graph_hook_set_t){0};
  g->keep_template = false; /* the recapture's modules say again whether they need it */
}

void recap__recapture_put_back(recap_graph_t g) {
  update_module_t *m = module_of(g);
  recap__graph_hooks_release(g); /* what the recapture attached */
  g->hooks = m->old.hooks;
  g->node_count = m->old.node_count;
  g->options = m->old.options;
  g->keep_template = m->old.keep_template;
  m->old.hooks = (recap__graph_hook_set_t){0};
  m->old.active = false;
  g->recapturing = false;
  recap__alloc_log_free(&g->alloc_log_next);
  g->state = RECAP__GRAPH_CAPTURED;
}

/* A recapture whose capture ended (or was abandoned) failed with status: its template (if
 * any) goes, the old capture comes back, and the route's second pool reference is given back.
 * status and its message stay the last error. */
static recap_status_t give_back(recap_graph_t g, recap_status_t status,
                                recap_cuda_graph_t new_template) {
  recap__saved_error_t cause;
  recap__error_save(&cause);
  /* The recapture's layers go before its template: their state may refer to it. */
  recap__recapture_put_back(g);
  if (new_template) recap__device()->graph_destroy(new_template);
  recap__pool_release(g->device, g->pool);
  recap__error_restore(&cause);
  return status;
}

static void hook_recapture_abandoned(void *ctx, recap_graph_t g) {
  (void)ctx;
  recap__saved_error_t cause;
  recap__error_save(&cause);
  recap_cuda_graph_t abandoned = NULL;
  if (recap__device()->stream_end_capture(g->capture_stream, &abandoned) != RECAP_SUCCESS)
    abandoned = NULL;
  /* Inside a region's body: the graph to destroy is the top-level one (capture_abandoned). */
  abandoned = recap__graph_hooks_capture_abandoned(g, abandoned);
  recap__graph_close_capture(g);
  recap__graph_hooks_capture_ended(g, false);
  recap__error_restore(&cause);
  give_back(g, recap_last_status(), abandoned);
}

/* ------------------------------------------------------------------------------------------
 * The end of a recapture
 * ---------------------------------------------------------------------------------------- */

/* Update the executable in place with template_graph, or instantiate it afresh into *exec,
 * as `decided` says and the driver allows (*outcome: why not in place, *node: the node the
 * driver named). Nothing of the old capture changes; a failure leaves no new executable. */
static recap_status_t apply_template(recap_graph_t g, recap_cuda_graph_t template_graph,
                                     recap_update_reason_t decided, bool planned_on_template,
                                     bool device_nodes, recap_update_reason_t *outcome,
                                     size_t *node, recap_cuda_graph_exec_t *exec,
                                     int64_t *exec_bytes) {
  const recap__device_ops_t *dev = recap__device();
  *outcome = decided;
  *node = SIZE_MAX;
  *exec = NULL;
  *exec_bytes = 0;
  if (decided == RECAP_UPDATE_REASON_NONE && device_nodes) {
    /* A layer made nodes of the new template device-updatable (a parameter the GPU decides,
     * declared by this recapture): CUDA updates nothing into such a graph, so it is refused
     * here, and instantiated afresh as after a refusal of the driver's. */
    *outcome = RECAP_UPDATE_REASON_NOT_SUPPORTED;
  } else if (decided == RECAP_UPDATE_REASON_NONE) {
    /* Refused: the executable is unchanged and outcome says why. Any other failure fails the
     * recapture, the old executable unchanged and replayable. */
    RECAP__CHECK(dev->graph_exec_update(g->exec, template_graph, outcome, node));
    if (*outcome != RECAP_UPDATE_REASON_NONE)
      RECAP__DEBUG(
          "recapture: the driver refused to update the executable (%s, node %zu); "
          "instantiating afresh",
          recap_update_reason_name(*outcome), *node);
  }
  /* A KEEP graph that was never instantiated keeps the new template, as capture_end does. */
  if (*outcome == RECAP_UPDATE_REASON_NONE || !g->exec) return RECAP_SUCCESS;
  RECAP__CHECK(recap__graph_instantiate_measured(g, exec, template_graph, exec_bytes));
  /* The layers planned against the old executable's origin, but the new template is the new
   * executable's: they plan again (unless the origin did not fit the template and they planned
   * against the template already). */
  recap_status_t s = RECAP_SUCCESS;
  if (decided == RECAP_UPDATE_REASON_NONE && g->keep_template && !planned_on_template &&
      (s = recap__graph_hooks_instantiated_afresh(g, template_graph)) != RECAP_SUCCESS) {
    recap__saved_error_t why;
    recap__error_save(&why);
    dev->graph_exec_destroy(*exec);
    *exec = NULL;
    *exec_bytes = 0;
    recap__error_restore(&why);
  }
  return s;
}

/* The recapture succeeded: the old capture goes, the new one stays (exec: a new executable,
 * which took exec_bytes of the device; result: what the recapture's allocations did, its peak
 * and the pool's growth). Nothing here can fail. */
static void commit_recapture(recap_graph_t g, recap_cuda_graph_t template_graph,
                             recap_cuda_graph_exec_t exec, int64_t exec_bytes,
                             bool updated_in_place, size_t nodes,
                             const recap__capture_result_t *result) {
  const recap__device_ops_t *dev = recap__device();
  if (exec) {
    if (dev->graph_exec_destroy(g->exec) != RECAP_SUCCESS)
      RECAP__WARN("recapture: the replaced executable could not be destroyed: %s",
                  recap_last_error());
    g->exec = exec;
    g->exec_bytes = exec_bytes;
  }
  update_module_t *m = module_of(g);
  /* Before the old template, which they may refer to. */
  recap__graph_hook_set_release(g, &m->old.hooks);
  m->old.active = false;
  /* Whenever the graph keeps templates (KEEP, or a layer that needs them), an executable
   * updated in place keeps its origin: a later recapture or rebind may need it even if this
   * capture does not. A graph that drops its templates drops the origin too, and a later
   * recapture that needs one instantiates afresh (RECAP_UPDATE_REASON_NO_ORIGIN). */
  bool keeps_origin = updated_in_place && !recap__graph_drops_template(g);
  if (keeps_origin && !g->exec_origin) {
    g->exec_origin = g->template_graph;
  } else {
    if (g->template_graph) dev->graph_destroy(g->template_graph);
    if (g->exec_origin && !keeps_origin) {
      dev->graph_destroy(g->exec_origin);
      g->exec_origin = NULL;
    }
  }
  g->template_graph = template_graph;
  if (g->exec && recap__graph_drops_template(g)) {
    dev->graph_destroy(template_graph);
    g->template_graph = NULL;
  }
  g->node_count = nodes;
  g->capture_peak = result->peak;
  g->capture_grew = result->grew;
  recap__graph_keep_alloc_log(g);
  recap__pool_release(g->device, g->pool);
  g->recapturing = false;
  g->state = RECAP__GRAPH_CAPTURED;
  recap__graph_account(g);
}

recap_status_t recap__recapture_end(recap_graph_t g) {
  const recap__device_ops_t *dev = recap__device();
  recap_cuda_graph_t template_graph = NULL;
  recap_status_t s = dev->stream_end_capture(g->capture_stream, &template_graph);
  /* Misuse (ending from another thread) leaves the capture running, as for a first capture. */
  if (s == RECAP_ERROR_INVALID_USAGE) return s;
  /* The allocator's counts of the replayed addresses, read before the route ends. */
  uint64_t reused = 0, fresh = 0;
  recap__capture_result_t result = {0};
  recap__saved_error_t cause;
  recap__error_save(&cause);
  if (s == RECAP_SUCCESS &&
      recap__pool_route_replay_stats(g->device, g->pool, &reused, &fresh) != RECAP_SUCCESS)
    reused = fresh = 0;
  recap__graph_close_capture_result(g, s == RECAP_SUCCESS ? &result : NULL);
  recap__graph_hooks_capture_ended(g, s == RECAP_SUCCESS);
  recap__error_restore(&cause);
  /* A capture that regions resumed into its own graph leaves that graph behind. */
  if (s != RECAP_SUCCESS) return give_back(g, s, recap__graph_hooks_capture_abandoned(g, NULL));
  /* A budget that refused an allocation fails the recapture: the graph keeps what it held. */
  if (result.refusals)
    return give_back(g, recap__graph_budget_error(&result, true), template_graph);

  size_t nodes = recap__graph_capture_nodes(g, template_graph, "recapture");
  /* Update, or instantiate afresh: decided before anything changes, recorded once all
   * succeeded. An executable updated in place is patched through the nodes of the graph it was
   * instantiated from (its origin): the layers that patch (rebinding) plan against it, so it
   * must still exist when they need it. */
  /* The capture's beginning attached the update state (capture.c). */
  recap__update_t *u = recap__update_of(g);
  recap__update_poll(u);
  recap_update_reason_t decided = recap__update_decide(u, g->exec != NULL);
  recap_cuda_graph_t origin = g->exec_origin ? g->exec_origin : g->template_graph;
  if (decided == RECAP_UPDATE_REASON_NONE && g->keep_template && !origin)
    decided = RECAP_UPDATE_REASON_NO_ORIGIN;
  /* CUDA updates no executable that holds device-updatable kernel nodes, nor into one
   * (parameters applied on the GPU): the driver's terms, so the policy is not asked. */
  if (decided == RECAP_UPDATE_REASON_NONE && (g->exec_device_nodes || g->options.params_on_device))
    decided = RECAP_UPDATE_REASON_NOT_SUPPORTED;
  recap__captured_t captured = {.template_graph = template_graph,
                                .origin = decided == RECAP_UPDATE_REASON_NONE && g->keep_template
                                              ? origin
                                              : NULL};
  s = recap__graph_hooks_captured(g, &captured);
  /* A layer found that the new template's nodes do not pair with the origin's: a topology
   * change, which the driver refuses below, and then the template is instantiated afresh. */
  bool planned_on_template = captured.origin_unfit;
  if (s != RECAP_SUCCESS) return give_back(g, s, template_graph);

  recap_update_reason_t outcome;
  size_t node;
  recap_cuda_graph_exec_t exec;
  int64_t exec_bytes;
  s = apply_template(g, template_graph, decided, planned_on_template, captured.device_nodes,
                     &outcome, &node, &exec, &exec_bytes);
  if (s != RECAP_SUCCESS) return give_back(g, s, template_graph);
  bool updated_in_place = g->exec && !exec && outcome == RECAP_UPDATE_REASON_NONE;
  commit_recapture(g, template_graph, exec, exec_bytes, updated_in_place, nodes, &result);
  g->exec_device_nodes = captured.device_nodes;
  /* A refusal recap made itself (device-updatable nodes) is no refusal of the driver's. */
  if (decided == RECAP_UPDATE_REASON_NONE && captured.device_nodes) decided = outcome;
  recap__update_record(u, decided, outcome, node, exec != NULL, checked_nodes(g), reused, fresh);
  choose_hooks(g, module_of(g));
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Policy and counters
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_graph_update_policy_set(recap_graph_t graph,
                                             const recap_update_policy_t *policy) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_update_policy_set"));
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&p, policy, recap_update_policy_t, measure_replays,
                                   "recap_graph_update_policy_set", "RECAP_UPDATE_POLICY_INIT"));
  RECAP__ARG(p.max_slowdown >= 0 && !isnan(p.max_slowdown),
             "recap_graph_update_policy_set: policy->max_slowdown is %g; give a fraction >= 0 "
             "(0.05 for 5%%), or 0 to measure nothing",
             p.max_slowdown);
  RECAP__ARG(p.auto_check_slowdown >= 0 && !isnan(p.auto_check_slowdown),
             "recap_graph_update_policy_set: policy->auto_check_slowdown is %g; give a fraction "
             ">= 0 (0.05 for 5%%), or 0 for the default",
             p.auto_check_slowdown);
  RECAP__CHECK(recap__update_attach(graph));
  recap__update_t *u = recap__update_of(graph);
  recap__update_set_policy(u, &p);
  choose_hooks(graph, module_of(graph));
  return RECAP_SUCCESS;
}

/* The name of 0.1, deprecated (recap/update.h). */
recap_status_t recap_graph_set_update_policy(recap_graph_t graph,
                                             const recap_update_policy_t *policy) {
  return recap_graph_update_policy_set(graph, policy);
}

recap_status_t recap_graph_update_stats(recap_graph_t graph, recap_update_stats_t *stats) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_update_stats"));
  RECAP__ARG(stats != NULL, "recap_graph_update_stats: stats is NULL");
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(stats, recap_update_stats_t, fresh_replay_ms,
                                        "recap_graph_update_stats", "stats->size",
                                        "RECAP_UPDATE_STATS_INIT"));
  size_t size = stats->size;
  /* A graph that never began a capture nor had a policy set has no update state: no counts. */
  recap_update_stats_t out = RECAP_UPDATE_STATS_INIT;
  out.last_node = SIZE_MAX;
  recap__update_t *u = recap__update_of(graph);
  if (u) recap__update_stats_get(u, &out);
  out.size = size;
  memcpy(stats, &out, size);
  return RECAP_SUCCESS;
}
