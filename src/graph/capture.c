/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * capture.c — recap_graph_capture_begin: the caller's options, then the graph's capture
 * (graph.c), then the layers that act from the capture's first moment (input liveness,
 * liveness.c; rebinding, rebind.c).
 *
 * Why a file of its own: the input-liveness option must refuse a capture before it begins and
 * attach its hooks as soon as it has begun, so the entry point calls both graph.c and
 * liveness.c. Here, above both, it keeps every call pointing down the layers: graph.c knows no
 * debug aid, and liveness.c reaches graphs only through graph.c's hooks.
 */
#include "core/args.h"
#include "core/error.h"
#include "graph/graph_internal.h"

recap_status_t recap_graph_capture_begin(recap_graph_t graph, recap_stream_t stream,
                                         const recap_capture_options_t *options) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_capture_begin"));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&opts, options, recap_capture_options_t, mode,
                                   "recap_graph_capture_begin", "RECAP_CAPTURE_OPTIONS_INIT"));
  RECAP__ARG(opts.rebind >= RECAP_REBIND_OFF && opts.rebind <= RECAP_REBIND_DECLARED,
             "recap_graph_capture_begin: options->rebind %d is not one of RECAP_REBIND_OFF, "
             "RECAP_REBIND_AUTO, RECAP_REBIND_DECLARED",
             (int)opts.rebind);
  RECAP__CHECK(recap__graph_capture_check(graph, stream, &opts));
  /* Refused before anything starts when the device cannot read what a graph reads. */
  if (opts.check_input_liveness) RECAP__CHECK(recap__liveness_probe());
  RECAP__CHECK(recap__graph_capture_start(graph, stream, &opts));
  recap_status_t s = RECAP_SUCCESS;
  if (opts.check_input_liveness) s = recap__liveness_attach(graph);
  if (s == RECAP_SUCCESS && opts.rebind != RECAP_REBIND_OFF)
    s = recap__rebind_attach(graph, opts.rebind);
  if (s != RECAP_SUCCESS) {
    /* Out of host memory: abandon the capture, keeping the cause (and, for audits, the pool's
     * id, as any capture that failed once it began does). */
    recap__saved_error_t saved;
    recap__error_save(&saved);
    recap__graph_abandon(graph);
    return recap__error_restore(&saved);
  }
  return RECAP_SUCCESS;
}
