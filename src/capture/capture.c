/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * capture.c — the entry points of a capture: recap_graph_capture_begin and
 * recap_graph_recapture_begin (the caller's options, then the graph core's capture, then the
 * modules that act from the capture's first moment: the regions' path, src/regions/; input
 * liveness, src/debug/liveness.c; rebinding, src/rebind/), and recap_graph_capture_end, which
 * ends a first capture in the core and a recapture in src/update/.
 *
 * Why a module above the features: here the capture options meet the modules they turn on
 * (the regions' path and the input-liveness probe are decided before the capture begins, the
 * modules attach their hooks as soon as it has begun, a recapture is update's). The graph core
 * (src/graph/) knows none of them, and they reach the graph only through its hooks; this file
 * composes them, calling down into each.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "core/args.h"
#include "core/error.h"
#include "capture/capture_internal.h"
#include "graph/graph_internal.h"
#include "debug/liveness_internal.h"
#include "rebind/params_device.h"
#include "rebind/rebind_internal.h"
#include "regions/region_internal.h"
#include "update/update_internal.h"

/* A capture on a blocking stream is invalidated by any work on the legacy default stream, from
 * any thread (a library that launches on stream 0): said once per process at capture_begin,
 * and again in the error of each capture that ends invalidated. A failed query says nothing and
 * leaves the last error as it was: the answer only words advice. */
static bool stream_is_blocking(recap_stream_t stream) {
  bool blocking = false;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (recap__device()->stream_blocking(stream, &blocking) != RECAP_SUCCESS) {
    recap__error_restore(&saved);
    return false;
  }
  return blocking;
}

static const char blocking_advice[] =
    "work on the legacy default stream (stream 0, from any thread: a library that launches on "
    "it too) invalidates a capture on a blocking stream; capture on a stream made with "
    "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)";

static void warn_if_blocking(recap_stream_t stream, const char *function) {
  static atomic_bool warned;
  if (atomic_load_explicit(&warned, memory_order_relaxed) || !stream_is_blocking(stream)) return;
  if (atomic_exchange(&warned, true)) return;
  RECAP__WARN("%s: stream %p is a blocking stream: %s (said once per process)", function,
              (void *)stream, blocking_advice);
}

/* Begin graph's capture with opts (copied and checked by the caller): graph.c's checks and
 * start, then the layers that act from the capture's first moment. A recapture sets the capture
 * it replaces aside first, and gets it back when the recapture cannot begin. */
static recap_status_t begin(recap_graph_t graph, recap_stream_t stream,
                            const recap_capture_options_t *opts, bool recapture) {
  const char *function = recapture ? "recap_graph_recapture_begin" : "recap_graph_capture_begin";
  RECAP__ARG(opts->rebind >= RECAP_REBIND_OFF && opts->rebind <= RECAP_REBIND_DECLARED,
             "%s: options->rebind %d is not one of RECAP_REBIND_OFF, RECAP_REBIND_AUTO, "
             "RECAP_REBIND_DECLARED",
             function, (int)opts->rebind);
  RECAP__CHECK(recap__graph_capture_check(graph, stream, opts, recapture));
  /* The regions' path: decided (and RECAP_REGIONS_DEVICE refused where the driver has no
   * conditional nodes) before anything starts. */
  bool regions_on_device = false;
  RECAP__CHECK(recap__regions_decide(opts, function, &regions_on_device));
  /* Refused before anything starts when the device cannot read what a graph reads. */
  if (opts->check_input_liveness) RECAP__CHECK(recap__liveness_probe());
  /* The update policy's state, attached for the graph's life at its first capture. */
  RECAP__CHECK(recap__update_attach(graph));
  warn_if_blocking(stream, function);
  /* Parameters applied on the GPU: the applier's device memory, made before the capture
   * forbids it. */
  params_device_t *device = NULL;
  if (opts->params_on_device) RECAP__CHECK(recap__params_device_prepare(&device));
  if (recapture) recap__recapture_set_aside(graph);
  recap_status_t s = recap__graph_capture_start(graph, stream, opts);
  if (s != RECAP_SUCCESS) {
    if (recapture) recap__recapture_put_back(graph);
    recap__params_device_discard(device);
    return s;
  }
  s = recap__regions_path_chosen(graph, regions_on_device);
  if (s == RECAP_SUCCESS && opts->check_input_liveness) s = recap__liveness_attach(graph);
  if (s == RECAP_SUCCESS && opts->rebind != RECAP_REBIND_OFF)
    s = recap__rebind_attach(graph, opts->rebind);
  if (s == RECAP_SUCCESS && (opts->patchable || device)) s = recap__rebind_attach_patchable(graph);
  /* After the rebinding state, whose capture end the applier's needs; owns device from here. */
  if (device) {
    if (s == RECAP_SUCCESS)
      s = recap__params_device_attach(graph, device, stream);
    else
      recap__params_device_discard(device);
  }
  if (s == RECAP_SUCCESS) return s;
  /* Out of host memory: abandon the capture, keeping the cause (and, for audits, the pool's
   * id, as any capture that failed once it began does); a recapture leaves the graph with the
   * capture it was to replace. */
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap__graph_abandon_capture(graph);
  return recap__error_restore(&saved);
}

/* A recapture's options: the caller's, whose pool must be {0,0} or the graph's, which it
 * always is. */
static recap_status_t recapture_pool(recap_graph_t graph, recap_capture_options_t *opts) {
  RECAP__ARG(recap_pool_is_default(opts->pool) || !graph->pool_known ||
                 recap__pool_id_equal(opts->pool, graph->pool),
             "recap_graph_recapture_begin: options->pool is not the graph's pool; a recapture "
             "uses the pool of the capture it replaces (leave options->pool {0,0})");
  opts->pool = graph->pool;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_capture_begin(recap_graph_t graph,
                                         const recap_capture_options_t *options,
                                         recap_stream_t stream) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_capture_begin"));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&opts, options, recap_capture_options_t, mode,
                                   "recap_graph_capture_begin", "RECAP_CAPTURE_OPTIONS_INIT"));
  /* options->recapture: a graph that holds a capture is recaptured with these options. */
  if (opts.recapture && graph->state == RECAP__GRAPH_CAPTURED) {
    RECAP__CHECK(recapture_pool(graph, &opts));
    return begin(graph, stream, &opts, true);
  }
  return begin(graph, stream, &opts, false);
}

recap_status_t recap_graph_recapture_begin(recap_graph_t graph,
                                           const recap_capture_options_t *options,
                                           recap_stream_t stream) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_recapture_begin"));
  /* The last capture's options, or the caller's whole; the pool is always the graph's. */
  recap_capture_options_t opts = graph->options;
  if (options) {
    opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
    RECAP__CHECK(RECAP__OPTIONS_COPY(&opts, options, recap_capture_options_t, mode,
                                     "recap_graph_recapture_begin", "RECAP_CAPTURE_OPTIONS_INIT"));
  }
  RECAP__CHECK(recapture_pool(graph, &opts));
  return begin(graph, stream, &opts, true);
}

recap_status_t recap_graph_capture_end(recap_graph_t graph) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_capture_end"));
  if (graph->state != RECAP__GRAPH_CAPTURING)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_capture_end: no capture is under way on this graph "
                        "(call recap_graph_capture_begin first)");
  /* A region still open: the capture goes on, to be closed and ended again (unless it was
   * invalidated: then it ends here, reporting the invalidation). */
  RECAP__CHECK(recap__regions_check_end(graph));
  recap_stream_t stream = graph->capture_stream;
  recap_status_t s =
      graph->recapturing ? recap__recapture_end(graph) : recap__graph_capture_end(graph);
  if (s == RECAP_ERROR_CAPTURE_INVALIDATED && stream_is_blocking(stream)) {
    char cause[512];
    snprintf(cause, sizeof cause, "%s", recap_last_error());
    s = recap__error(s, "%s; the capture's stream %p is a blocking stream, and %s", cause,
                     (void *)stream, blocking_advice);
  }
  /* A capture scope's capture ended through this call closes the scope too: a later
   * recapture of the graph is not the scope's, and recap_capture_scope_end must not end it. */
  if (graph->state != RECAP__GRAPH_CAPTURING) recap__scope_capture_ended(graph);
  return s;
}
