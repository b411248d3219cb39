/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph.c — the recap graph: capture into a private pool, instantiate, replay, reset.
 *
 * The state machine is PyTorch's CUDAGraph: FRESH --capture_begin--> CAPTURING --capture_end-->
 * CAPTURED (--reset--> FRESH); recap_graph_state tells the public states apart, CAPTURED
 * splitting into a kept template and an executable. capture_begin routes the allocator to the graph's pool, opens a
 * CUDA capture and names it in the route once its id is known (the route comes first so that no
 * other thread records or queries an event on the stream once it captures); capture_end closes
 * both and, unless the template is kept, instantiates. Every failure leaves the graph in a state
 * the user can recover from with reset (or needs nothing at all): no route, pool reference or
 * registry entry outlives the capture that made it, and the last error stays the failure's own,
 * whatever the cleanup meets.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/args.h"
#include "core/assert.h"
#include "core/env.h"
#include "core/error.h"
#include "core/host.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"

/* ------------------------------------------------------------------------------------------
 * Kill switch
 * ---------------------------------------------------------------------------------------- */

void recap_graphs_enable(int enabled) {
  recap__env_set(RECAP__ENV_DISABLE_GRAPHS, enabled < 0 ? -1 : enabled == 0);
}

void recap__graphs_disabled_override(int disabled) {
  recap_graphs_enable(disabled < 0 ? -1 : !disabled);
}

int recap_graphs_enabled(void) { return !recap__env_int(RECAP__ENV_DISABLE_GRAPHS); }

int recap_graphs_disabled(void) { return !recap_graphs_enabled(); }

recap_status_t recap_graph_eager_set(recap_graph_t graph, int eager) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_eager_set"));
  RECAP__ARG(eager == 0 || eager == 1, "recap_graph_eager_set: eager is %d, not 0 or 1", eager);
  if (graph->state == RECAP__GRAPH_CAPTURING || graph->recapturing)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_eager_set: the graph is capturing; switch it between "
                        "captures (after recap_graph_capture_end)");
  graph->eager = eager;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_eager_get(recap_graph_t graph, int *eager) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_eager_get"));
  RECAP__ARG(eager != NULL, "recap_graph_eager_get: eager is NULL");
  *eager = graph->eager;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Lifetime
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap__graph_check(recap_graph_t graph, const char *function) {
  return RECAP__HANDLE_CHECK(graph, RECAP__GRAPH_MAGIC, function, "graph", "recap graph",
                             "recap_graph_create");
}

recap_status_t recap_graph_create(recap_graph_t *graph, unsigned flags) {
  RECAP__ARG(graph != NULL, "recap_graph_create: graph is NULL");
  *graph = NULL;
  RECAP__ARG((flags & ~(unsigned)RECAP_GRAPH_KEEP) == 0,
             "recap_graph_create: unknown flags 0x%x (only RECAP_GRAPH_KEEP is defined)", flags);
  recap_graph_t g = recap__host_calloc(1, sizeof *g);
  if (!g) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_create: out of host memory");
  g->magic = RECAP__GRAPH_MAGIC;
  g->flags = flags;
  g->options = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  *graph = g;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Templates and captures
 * ---------------------------------------------------------------------------------------- */

bool recap__graph_drops_template(recap_graph_t g) {
  return !(g->flags & RECAP_GRAPH_KEEP) && !g->keep_template;
}

/* Stop routing and forget the capture in the registry. */
void recap__graph_close_capture(recap_graph_t g) { recap__graph_close_capture_result(g, NULL); }

void recap__graph_close_capture_result(recap_graph_t g, recap__capture_result_t *result) {
  if (result) memset(result, 0, sizeof *result);
  recap__pool_route_end_result(g->device, g->pool, result);
  recap__registry_remove(g->capture_id);
  g->capture_stream = NULL;
  g->capture_id = 0;
}

/* ------------------------------------------------------------------------------------------
 * The pool and reset
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap__graph_budget_error(const recap__capture_result_t *result, bool recapture) {
  char first[512];
  recap__budget_format(first, sizeof first, &result->first);
  return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                      "recap_graph_capture_end: the capture's budget refused %" PRIu64
                      " allocation%s, so the %s; the first: recap_malloc: %s",
                      result->refusals, result->refusals == 1 ? "" : "s",
                      recapture ? "recapture was thrown away and the graph keeps the capture it "
                                  "held"
                                : "capture was thrown away and the graph is fresh again",
                      first);
}

/* Drop the graph's reference to its pool; the pool's totals lose the graph first. */
static void release_pool(recap_graph_t g) {
  bool held = g->holds_pool;
  g->holds_pool = false;
  recap__graph_account(g);
  if (held) recap__pool_release(g->device, g->pool);
}

/* Keep the first failure of a sequence of cleanup steps, with its message: later steps may
 * record errors of their own. */
static void keep_first_failure(recap_status_t s, recap_status_t *first,
                               recap__saved_error_t *saved) {
  if (s == RECAP_SUCCESS || *first != RECAP_SUCCESS) return;
  *first = s;
  recap__error_save(saved);
}

/* recap_graph_reset, and recap__graph_abandon when forget_pool is false. */
static recap_status_t reset_graph(recap_graph_t graph, bool forget_pool) {
  const recap__device_ops_t *dev = recap__device();
  recap_status_t result = RECAP_SUCCESS, s;
  recap__saved_error_t saved;
  if (graph->state == RECAP__GRAPH_CAPTURING) {
    /* Abandon the capture: end it and throw its template away. If CUDA refuses to end it here
     * (another thread's capture), the capture runs on: leave everything as it is. */
    recap_cuda_graph_t abandoned = NULL;
    recap__saved_error_t before;
    recap__error_save(&before);
    s = dev->stream_end_capture(graph->capture_stream, &abandoned);
    /* A module that paused the stream's capture (regions) leaves nothing to end: that
     * is no misuse. */
    if (s == RECAP_ERROR_INVALID_USAGE && !recap__graph_hooks_capture_paused(graph)) return s;
    if (s != RECAP_SUCCESS) {
      abandoned = NULL;
      recap__error_restore(&before);
    }
    /* Inside a region's body the capture hands back a body, which its conditional node owns:
     * the graph to destroy is the top-level one the region layer holds. */
    abandoned = recap__graph_hooks_capture_abandoned(graph, abandoned);
    if (abandoned) dev->graph_destroy(abandoned);
    recap__graph_close_capture(graph);
    recap__graph_hooks_capture_ended(graph, false);
  }
  recap__graph_hooks_release(graph);
  /* The modules attached for the graph's life forget the capture; a recapture under way gives
   * back what it set aside (update), and the second pool reference its route took goes. */
  recap__graph_hooks_graph_reset(graph);
  if (graph->recapturing) {
    recap__pool_release(graph->device, graph->pool);
    graph->recapturing = false;
  }
  recap__alloc_log_free(&graph->alloc_log);
  recap__alloc_log_free(&graph->alloc_log_next);
  if (graph->exec) keep_first_failure(dev->graph_exec_destroy(graph->exec), &result, &saved);
  if (graph->template_graph)
    keep_first_failure(dev->graph_destroy(graph->template_graph), &result, &saved);
  if (graph->exec_origin)
    keep_first_failure(dev->graph_destroy(graph->exec_origin), &result, &saved);
  graph->exec = NULL;
  graph->template_graph = NULL;
  graph->exec_origin = NULL;
  graph->exec_bytes = 0;
  graph->capture_peak = graph->capture_grew = 0;
  release_pool(graph);
  graph->state = RECAP__GRAPH_FRESH;
  graph->node_count = 0;
  graph->keep_template = false;
  if (forget_pool) {
    memset(&graph->pool, 0, sizeof graph->pool);
    graph->pool_known = false;
  }
  if (result != RECAP_SUCCESS) recap__error_restore(&saved);
  return result;
}

recap_status_t recap_graph_reset(recap_graph_t graph) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_reset"));
  return reset_graph(graph, true);
}

recap_status_t recap__graph_abandon(recap_graph_t graph) { return reset_graph(graph, false); }

void recap__graph_abandon_capture(recap_graph_t graph) {
  if (graph->recapturing && recap__graph_hooks_recapture_abandoned(graph)) return;
  (void)recap__graph_abandon(graph);
}

recap_status_t recap_graph_destroy(recap_graph_t graph) {
  if (!graph) return RECAP_SUCCESS;
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_destroy"));
  recap_status_t s = recap_graph_reset(graph);
  if (graph->state == RECAP__GRAPH_CAPTURING) {
    /* The cause is in the thread's last error, which recap__error writes over: copy it first. */
    recap__saved_error_t cause;
    recap__error_save(&cause);
    return recap__error(RECAP_ERROR_BUSY,
                        "recap_graph_destroy: the graph's capture is under way and could not be "
                        "ended from this thread (%s); end it in the capturing thread first",
                        cause.message);
  }
  recap__graph_hooks_release_attached(graph);
  graph->magic = 0;
  recap__host_free(graph);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * Capture
 * ---------------------------------------------------------------------------------------- */

static const char *state_advice(recap__graph_state_t state) {
  switch (state) {
    case RECAP__GRAPH_CAPTURING: return "a capture is already under way on this graph";
    case RECAP__GRAPH_CAPTURED:
      return "this graph already holds a capture; call recap_graph_recapture_begin() (or set "
             "options->recapture) to capture it again in place, or recap_graph_reset() to start "
             "afresh";
    case RECAP__GRAPH_EAGER:
      return "this graph ran a capture scope eagerly (graphs disabled); reset it first";
    case RECAP__GRAPH_FRESH: break;
  }
  return "";
}

/* Why a graph in `state` cannot be recaptured. */
static const char *recapture_advice(recap__graph_state_t state) {
  switch (state) {
    case RECAP__GRAPH_CAPTURING: return "a capture is already under way on this graph";
    case RECAP__GRAPH_FRESH:
      return "the graph holds no capture to replace; capture it first with "
             "recap_graph_capture_begin";
    case RECAP__GRAPH_EAGER:
      return "this graph ran a capture scope eagerly (graphs disabled); reset it and capture it "
             "with recap_graph_capture_begin";
    case RECAP__GRAPH_CAPTURED: break;
  }
  return "";
}

recap_status_t recap__graph_capture_check(recap_graph_t graph, recap_stream_t stream,
                                          const recap_capture_options_t *opts, bool recapture) {
  const char *function = recapture ? "recap_graph_recapture_begin" : "recap_graph_capture_begin";
  RECAP__ARG(opts->mode >= RECAP_CAPTURE_MODE_GLOBAL && opts->mode <= RECAP_CAPTURE_MODE_RELAXED,
             "%s: capture mode %d is not one of GLOBAL, THREAD_LOCAL, RELAXED", function,
             (int)opts->mode);
  if (!recapture && graph->state != RECAP__GRAPH_FRESH)
    return recap__error(RECAP_ERROR_INVALID_USAGE, "%s: %s", function, state_advice(graph->state));
  if (recapture && graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE, "%s: %s", function,
                        recapture_advice(graph->state));
  if (stream == NULL)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: cannot capture on the legacy default stream; "
                        "capture on a stream you created (cudaStreamCreateWithFlags(&s, "
                        "cudaStreamNonBlocking)), or use recap_capture_scope_begin, which "
                        "provides one. Replaying on the default stream is fine",
                        function);
  return RECAP_SUCCESS;
}

/* Undo a capture_start that failed after reserving the route: end the capture if it began,
 * then stop routing (only once the stream no longer captures: ending the last route records
 * held-back events) and drop the pool reference. The cause of the failure stays the last
 * error. */
static recap_status_t abandon_start(recap_graph_t graph, recap_status_t status, bool begun,
                                    recap_stream_t stream, int device, recap_pool_id_t pool) {
  const recap__device_ops_t *dev = recap__device();
  /* A capture that failed once the stream captured: recap_graph_pool names its pool, for
   * audits, as after a failed end. */
  if (begun) {
    graph->pool = pool;
    graph->pool_known = true;
  }
  recap__saved_error_t cause;
  recap__error_save(&cause);
  recap_cuda_graph_t abandoned = NULL;
  if (begun && dev->stream_end_capture(stream, &abandoned) == RECAP_SUCCESS && abandoned)
    dev->graph_destroy(abandoned);
  recap__pool_route_end(device, pool);
  recap__pool_release(device, pool);
  recap__error_restore(&cause);
  return status;
}

recap_status_t recap__graph_capture_start(recap_graph_t graph, recap_stream_t stream,
                                          const recap_capture_options_t *opts) {
  const recap__device_ops_t *dev = recap__device();
  int device;
  RECAP__CHECK(dev->get_device(&device));
  recap_pool_id_t pool =
      recap_pool_is_default(opts->pool) ? recap__pool_id_for_graph() : opts->pool;

  /* The allocator learns of the capture before it begins: from the moment the stream captures,
   * no thread's free, allocation or route end may record or query an event on it, and a route
   * that exists (if pending) holds that work back. A pool another capture uses is refused here,
   * before anything began. */
  /* The route records what this capture allocates; a recapture replays what the capture it
   * replaces allocated, so that the same sequence gets the same addresses. The capture's
   * budget, if any, holds from its first allocation. */
  recap__alloc_log_free(&graph->alloc_log_next);
  RECAP__CHECK(recap__pool_route_reserve_logged(device, pool, &graph->alloc_log_next,
                                                graph->recapturing ? &graph->alloc_log : NULL));
  /* A new route has no budget: only a budget to set takes the lock again. */
  if (opts->budget_bytes != 0) {
    recap_status_t s = recap__pool_route_set_budget(device, pool, opts->budget_bytes);
    if (s != RECAP_SUCCESS) return abandon_start(graph, s, false, stream, device, pool);
  }
  recap_status_t s = dev->stream_begin_capture(stream, (recap__capture_mode_t)opts->mode);
  if (s != RECAP_SUCCESS) return abandon_start(graph, s, false, stream, device, pool);
  recap__capture_status_t status;
  uint64_t id = 0;
  /* The capture just began, so a context exists: the cheap query will do. */
  s = dev->stream_capture_id(stream, &status, &id);
  if (s == RECAP_SUCCESS && status == RECAP__CAPTURE_INVALIDATED)
    s = recap__error(RECAP_ERROR_CAPTURE_INVALIDATED,
                     "recap_graph_capture_begin: the capture was invalidated as soon as it began "
                     "(another thread made a call that its mode forbids, such as cudaMalloc "
                     "during a global-mode capture); nothing was captured and the graph is "
                     "still fresh");
  else if (s == RECAP_SUCCESS && status != RECAP__CAPTURE_ACTIVE)
    s = recap__error(RECAP_ERROR_INTERNAL, "recap_graph_capture_begin: the capture did not start");
  if (s == RECAP_SUCCESS) s = recap__pool_route_set_capture(device, pool, id, stream);
  if (s == RECAP_SUCCESS) s = recap__registry_add(id, graph);
  if (s != RECAP_SUCCESS) return abandon_start(graph, s, true, stream, device, pool);
  graph->device = device;
  graph->pool = pool;
  graph->holds_pool = true;
  graph->pool_known = true;
  graph->capture_stream = stream;
  graph->capture_id = id;
  graph->options = *opts;
  graph->options.pool = pool;
  graph->state = RECAP__GRAPH_CAPTURING;
  /* A first capture: the pool counts the graph from now on. A recapture's graph counts
   * already, with the capture it holds. */
  if (!graph->recapturing) recap__graph_account(graph);
  return RECAP_SUCCESS;
}

static recap_status_t instantiate_exec(recap_graph_t g) {
  const recap__device_ops_t *dev = recap__device();
  /* The executable must start from what the layers changed in the previous one (rebinds). */
  RECAP__CHECK(recap__graph_hooks_template_read(g));
  if (g->exec) {
    RECAP__CHECK(dev->graph_exec_destroy(g->exec));
    g->exec = NULL;
    g->exec_bytes = 0;
  }
  RECAP__CHECK(recap__graph_instantiate_measured(g, &g->exec, g->template_graph, &g->exec_bytes));
  if (g->exec_origin) {
    /* The new executable's origin is the template: the layers that planned patches against
     * the old one's plan again, and the old origin can go once they did. Should they fail, the
     * new executable goes too, as after a failed instantiation: the graph keeps its template and
     * no executable, and the next instantiation (or replay, or rebind) plans again. */
    recap_status_t s = recap__graph_hooks_instantiated_afresh(g, g->template_graph);
    if (s != RECAP_SUCCESS) {
      recap__saved_error_t cause;
      recap__error_save(&cause);
      dev->graph_exec_destroy(g->exec);
      g->exec = NULL;
      g->exec_bytes = 0;
      return recap__error_restore(&cause);
    }
    dev->graph_destroy(g->exec_origin);
    g->exec_origin = NULL;
  }
  recap__graph_hooks_instantiated(g);
  return RECAP_SUCCESS;
}

/* Instantiate from the template (the old executable goes first), and bring the pool's totals in
 * step with the executable the graph holds afterwards, whether or not it succeeded. */
static recap_status_t instantiate(recap_graph_t g) {
  recap_status_t s = instantiate_exec(g);
  recap__graph_account(g);
  return s;
}

/* A capture that came to nothing, with status as the reason: the template (if any), the
 * layers' state, the pool reference and the counts go, and the graph is fresh again, as after a
 * reset, except that it still names the pool (for audits); a capture scope it belonged to is
 * closed. status and its message stay the last error, whatever the cleanup records. */
static recap_status_t drop_capture(recap_graph_t graph, recap_status_t status) {
  recap__saved_error_t cause;
  recap__error_save(&cause);
  /* The layers first: their state may refer to the template (a patch plan's node handles). */
  recap__graph_hooks_release(graph);
  if (graph->template_graph) recap__device()->graph_destroy(graph->template_graph);
  graph->template_graph = NULL;
  recap__alloc_log_free(&graph->alloc_log_next);
  graph->exec_bytes = 0;
  graph->capture_peak = graph->capture_grew = 0;
  release_pool(graph);
  graph->state = RECAP__GRAPH_FRESH;
  graph->node_count = 0;
  graph->keep_template = false;
  recap__error_restore(&cause);
  return status;
}

size_t recap__graph_template_nodes(recap_cuda_graph_t template_graph, const char *what) {
  size_t nodes = 0;
  if (recap__device()->graph_node_count(template_graph, &nodes) != RECAP_SUCCESS) nodes = 0;
  if (nodes == 0)
    RECAP__WARN(
        "the %s recorded no work: the graph is empty (did the work go to another stream than "
        "the capturing one?)",
        what);
  return nodes;
}

size_t recap__graph_capture_nodes(recap_graph_t graph, recap_cuda_graph_t template_graph,
                                  const char *what) {
  /* On the host path the template is only the work after the last region, which may well be
   * none: no warning then. */
  size_t own_nodes;
  int64_t own_bytes;
  if (!recap__graph_hooks_own_graphs(graph, &own_nodes, &own_bytes))
    return recap__graph_template_nodes(template_graph, what);
  size_t nodes = 0;
  if (recap__device()->graph_node_count(template_graph, &nodes) != RECAP_SUCCESS) nodes = 0;
  return nodes;
}

void recap__graph_keep_alloc_log(recap_graph_t graph) {
  recap__alloc_log_free(&graph->alloc_log);
  graph->alloc_log = graph->alloc_log_next;
  memset(&graph->alloc_log_next, 0, sizeof graph->alloc_log_next);
}

recap_status_t recap__graph_capture_end(recap_graph_t graph) {
  const recap__device_ops_t *dev = recap__device();
  recap_cuda_graph_t template_graph = NULL;
  recap_status_t s = dev->stream_end_capture(graph->capture_stream, &template_graph);
  /* Misuse (e.g. ending from another thread) leaves the capture running: let the caller end it
   * properly. Every other outcome ends the capture. */
  if (s == RECAP_ERROR_INVALID_USAGE) return s;
  if (s != RECAP_SUCCESS) {
    /* Invalidated or failed: nothing of the capture survives, the graph is fresh again. The
     * seam's message names the CUDA error; it stays while the bookkeeping is undone (the end of
     * the route records the events held back during the capture, which may fail). */
    recap__saved_error_t cause;
    recap__error_save(&cause);
    /* A capture that regions resumed into its own graph leaves that graph behind. */
    recap_cuda_graph_t lost = recap__graph_hooks_capture_abandoned(graph, NULL);
    if (lost) dev->graph_destroy(lost);
    recap__graph_close_capture(graph);
    recap__graph_hooks_capture_ended(graph, false);
    recap__error_restore(&cause);
    return drop_capture(graph, s);
  }
  /* What the capture's allocations did (peak, budget refusals), read as its route ends. */
  recap__capture_result_t result;
  recap__graph_close_capture_result(graph, &result);
  recap__graph_hooks_capture_ended(graph, true);
  graph->template_graph = template_graph;
  /* A budget that refused an allocation fails the end, so that the refusal cannot go unseen
   * even if the caller's code went on after it; the capture is thrown away. */
  if (result.refusals) return drop_capture(graph, recap__graph_budget_error(&result, false));
  graph->node_count = recap__graph_capture_nodes(graph, template_graph, "capture");
  graph->capture_peak = result.peak;
  graph->capture_grew = result.grew;
  graph->state = RECAP__GRAPH_CAPTURED;
  /* A layer that cannot take in what was captured (input liveness: the pointer scan failed)
   * throws the capture away, as a failed instantiation does. */
  recap__captured_t captured = {.template_graph = graph->template_graph};
  if ((s = recap__graph_hooks_captured(graph, &captured)) != RECAP_SUCCESS)
    return drop_capture(graph, s);
  graph->exec_device_nodes = captured.device_nodes;
  if (!(graph->flags & RECAP_GRAPH_KEEP)) {
    if ((s = instantiate(graph)) != RECAP_SUCCESS) return drop_capture(graph, s);
    if (recap__graph_drops_template(graph)) {
      dev->graph_destroy(graph->template_graph);
      graph->template_graph = NULL;
    }
  }
  recap__graph_keep_alloc_log(graph);
  recap__graph_account(graph); /* the nodes of a KEEP graph not instantiated yet */
  return RECAP_SUCCESS;
}

void recap__graph_capture_result(recap_graph_t graph, recap__capture_result_t *result) {
  memset(result, 0, sizeof *result);
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (recap__pool_capture_result(graph->device, graph->pool, result) != RECAP_SUCCESS) {
    /* The route is the graph's while it captures: this does not happen. */
    memset(result, 0, sizeof *result);
    recap__error_restore(&saved);
  }
}

recap_status_t recap_graph_instantiate(recap_graph_t graph) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_instantiate"));
  if (!(graph->flags & RECAP_GRAPH_KEEP))
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_instantiate: the graph was created without "
                        "RECAP_GRAPH_KEEP, so capture_end instantiated it already and dropped "
                        "the template");
  if (graph->state != RECAP__GRAPH_CAPTURED || !graph->template_graph)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_instantiate: nothing was captured yet (capture_begin and "
                        "capture_end must succeed first)");
  return instantiate(graph);
}

recap_status_t recap__graph_instantiate(recap_graph_t graph) { return instantiate(graph); }

recap_status_t recap__graph_pools_awake(recap_graph_t graph) {
  /* A graph reads and writes its pool, and may read the default pool's blocks: while one
   * sleeps nothing may run. The allocator is asked only once something sleeps. */
  if (RECAP__LIKELY(atomic_load_explicit(&recap__alloc_sleeping, memory_order_relaxed) == 0))
    return RECAP_SUCCESS;
  return recap__pool_replay_check(graph->device, graph->pool);
}

recap_status_t recap_graph_replay(recap_graph_t graph, recap_stream_t stream) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_replay"));
  if (RECAP__UNLIKELY(graph->eager))
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_replay: the graph is switched to run eagerly "
                        "(recap_graph_eager_set), so its capture scopes run their work and there "
                        "is nothing to replay; switch it back to replay what it holds");
  /* On a stream that captures into a recap graph the replay embeds the graph (embed.c). While
   * no recap capture is under way anywhere this costs one relaxed load. */
  if (RECAP__UNLIKELY(recap__registry_active() != 0)) {
    recap_graph_t outer;
    RECAP__CHECK(recap__graph_capturing_into(stream, &outer));
    if (outer) return recap__graph_embed(graph, outer, stream);
  }
  if (graph->state != RECAP__GRAPH_CAPTURED) {
    if (graph->recapturing)
      return recap__error(RECAP_ERROR_INVALID_USAGE,
                          "recap_graph_replay: the graph is being recaptured; its executable can "
                          "be replayed again once recap_graph_capture_end ended the recapture");
    if (graph->state == RECAP__GRAPH_EAGER)
      return recap__error(RECAP_ERROR_INVALID_USAGE,
                          "recap_graph_replay: graphs are disabled (RECAP_DISABLE_GRAPHS=1), so "
                          "the capture scope ran its work eagerly and there is nothing to "
                          "replay; run the work again instead (see recap_graphs_enabled())");
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_replay: nothing was captured yet (capture_begin and "
                        "capture_end must succeed first)");
  }
  RECAP__CHECK(recap__graph_pools_awake(graph));
  if (!graph->exec) RECAP__CHECK(instantiate(graph));
  /* Checked, the executable made: the modules attached to the graph's capture take part in the
   * replay (hooks.c); a graph with none that handle replays launches its executable alone. */
  if (RECAP__LIKELY(!(graph->hooks.events & RECAP__GRAPH_EVENTS_REPLAY)))
    return recap__graph_launch_exec(graph, stream);
  return recap__graph_hooks_replay(graph, stream);
}

recap_status_t recap__graph_launch_exec(recap_graph_t graph, recap_stream_t stream) {
  /* A module attached for the graph's life may launch it in its place (the update policy,
   * whose launches time the replays while it measures); otherwise a plain one. */
  if (RECAP__LIKELY(!graph->attached.exec_launcher))
    return recap__device()->graph_launch(graph->exec, stream);
  const recap__graph_hook_entry_t *l = &graph->attached.entries[graph->attached.exec_launcher - 1];
  return l->hooks->launch_exec(l->ctx, graph, stream);
}

/* ------------------------------------------------------------------------------------------
 * Accessors
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_graph_state(recap_graph_t graph, recap_graph_state_t *state) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_state"));
  RECAP__ARG(state != NULL, "recap_graph_state: state is NULL");
  switch (graph->state) {
    case RECAP__GRAPH_FRESH: *state = RECAP_GRAPH_STATE_FRESH; break;
    case RECAP__GRAPH_CAPTURING: *state = RECAP_GRAPH_STATE_CAPTURING; break;
    case RECAP__GRAPH_CAPTURED:
      /* A KEEP graph holds its template until it is instantiated; a failed re-instantiation
       * leaves the template and no executable. */
      *state = graph->exec ? RECAP_GRAPH_STATE_INSTANTIATED : RECAP_GRAPH_STATE_CAPTURED;
      break;
    case RECAP__GRAPH_EAGER: *state = RECAP_GRAPH_STATE_EAGER; break;
  }
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_pool(recap_graph_t graph, recap_pool_id_t *pool) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_pool"));
  RECAP__ARG(pool != NULL, "recap_graph_pool: pool is NULL");
  if (!graph->pool_known)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_pool: the graph has no pool: it has not begun a capture "
                        "since it was created or reset%s",
                        graph->state == RECAP__GRAPH_EAGER
                            ? " (its capture scope ran eagerly: graphs are disabled)"
                            : "");
  *pool = graph->pool;
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_not_host_loop(recap_graph_t graph, const char *function) {
  size_t nodes;
  int64_t bytes;
  if (!recap__graph_hooks_own_graphs(graph, &nodes, &bytes)) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "%s: the graph runs as a host loop (its regions took the host path: "
                      "options->regions RECAP_REGIONS_HOST, or a driver without conditional "
                      "nodes), so it is no single CUDA graph; capture with "
                      "RECAP_REGIONS_DEVICE or AUTO on a driver with conditional nodes",
                      function);
}

recap_status_t recap__graph_not_recapturing(recap_graph_t graph, const char *function) {
  if (!graph->recapturing) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "%s: the graph is being recaptured; ask again once recap_graph_capture_end "
                      "ended the recapture",
                      function);
}

recap_status_t recap_graph_raw(recap_graph_t graph, recap_cuda_graph_t *cuda_graph) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_raw"));
  RECAP__ARG(cuda_graph != NULL, "recap_graph_raw: cuda_graph is NULL");
  *cuda_graph = NULL;
  RECAP__CHECK(recap__graph_not_recapturing(graph, "recap_graph_raw"));
  RECAP__CHECK(recap__graph_not_host_loop(graph, "recap_graph_raw"));
  if (!(graph->flags & RECAP_GRAPH_KEEP))
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_raw: the template is kept only for graphs created with "
                        "RECAP_GRAPH_KEEP");
  if (!graph->template_graph)
    return recap__error(RECAP_ERROR_INVALID_USAGE, "recap_graph_raw: nothing was captured yet");
  RECAP__CHECK(recap__graph_hooks_template_read(graph));
  *cuda_graph = graph->template_graph;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_raw_exec(recap_graph_t graph, recap_cuda_graph_exec_t *cuda_graph_exec) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_raw_exec"));
  RECAP__ARG(cuda_graph_exec != NULL, "recap_graph_raw_exec: cuda_graph_exec is NULL");
  *cuda_graph_exec = NULL;
  RECAP__CHECK(recap__graph_not_recapturing(graph, "recap_graph_raw_exec"));
  RECAP__CHECK(recap__graph_not_host_loop(graph, "recap_graph_raw_exec"));
  if (!graph->exec)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_raw_exec: the graph is not instantiated yet (capture_end "
                        "does it, or recap_graph_instantiate for RECAP_GRAPH_KEEP graphs)");
  *cuda_graph_exec = graph->exec;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_node_count(recap_graph_t graph, size_t *count) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_node_count"));
  RECAP__ARG(count != NULL, "recap_graph_node_count: count is NULL");
  RECAP__CHECK(recap__graph_not_recapturing(graph, "recap_graph_node_count"));
  if (graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE, "recap_graph_node_count: nothing captured yet");
  if (graph->template_graph)
    RECAP__CHECK(recap__device()->graph_node_count(graph->template_graph, &graph->node_count));
  /* A host loop's graphs count too (graph->node_count is its last one's). */
  size_t own_nodes;
  int64_t own_bytes;
  (void)recap__graph_hooks_own_graphs(graph, &own_nodes, &own_bytes);
  *count = graph->node_count + own_nodes;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_debug_dump(recap_graph_t graph, const char *path) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_debug_dump"));
  RECAP__ARG(path != NULL, "recap_graph_debug_dump: path is NULL");
  RECAP__CHECK(recap__graph_not_recapturing(graph, "recap_graph_debug_dump"));
  RECAP__CHECK(recap__graph_not_host_loop(graph, "recap_graph_debug_dump"));
  if (!(graph->flags & RECAP_GRAPH_KEEP) || !graph->template_graph)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_debug_dump: needs the kept template: create the graph with "
                        "RECAP_GRAPH_KEEP and dump it after capture_end");
  RECAP__CHECK(recap__graph_hooks_template_read(graph));
  RECAP__CHECK(recap__device()->graph_debug_dot(graph->template_graph, path));
  return recap__graph_hooks_dump(graph, path);
}

recap_status_t recap_stream_is_capturing(recap_stream_t stream, int *capturing) {
  RECAP__ARG(capturing != NULL, "recap_stream_is_capturing: capturing is NULL");
  *capturing = 0;
  recap__capture_status_t status;
  uint64_t id;
  RECAP__CHECK(recap__device()->stream_capture_info(stream, &status, &id));
  *capturing = status != RECAP__CAPTURE_NONE;
  return RECAP_SUCCESS;
}
