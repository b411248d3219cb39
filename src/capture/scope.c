/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scope.c — the capture scope (PyTorch's `with torch.cuda.graph(g):`) and the library-owned
 * side streams it captures on when given none.
 *
 * Beginning a scope synchronises the device and gives unused cached memory back first: the
 * capture then starts from a quiet device, and memory eager code freed just before is not
 * mistaken for the graph's.
 *
 * A graph switched to run eagerly (recap_graph_eager_set) opens scopes that only hand out their
 * stream: the work runs as it is issued, and the graph keeps what it holds.
 *
 * Whether a scope is open on a graph is a record attached to the graph for its life (hooks.h)
 * when its first scope opens: a reset closes it (the graph_reset event), and so does the end of
 * the scope's capture through recap_graph_capture_end (capture.c), so that a scope's end never
 * ends a later capture that is not the scope's.
 */
#include <pthread.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "capture/capture_internal.h"
#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "graph/graph_internal.h"

static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;
static recap_stream_t side_streams[RECAP__MAX_DEVICES];
static const recap__device_ops_t *side_owner; /* the seam the streams were made with */

void recap__side_streams_forget(void) {
  pthread_mutex_lock(&side_lock);
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) side_streams[i] = NULL;
  side_owner = NULL;
  pthread_mutex_unlock(&side_lock);
}

recap_status_t recap__side_stream(recap_stream_t *stream) {
  const recap__device_ops_t *dev = recap__device();
  int device;
  RECAP__CHECK(dev->get_device(&device));
  if (device < 0 || device >= RECAP__MAX_DEVICES)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED, "device %d is out of recap's range", device);
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&side_lock);
  if (side_owner != dev) {
    for (int i = 0; i < RECAP__MAX_DEVICES; i++) side_streams[i] = NULL;
    side_owner = dev;
  }
  if (!side_streams[device]) s = dev->stream_create(&side_streams[device]);
  *stream = side_streams[device];
  pthread_mutex_unlock(&side_lock);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * The scope's record
 * ---------------------------------------------------------------------------------------- */

typedef struct scope_record {
  bool open;
  bool eager; /* the open scope runs its work eagerly for the graph's switch (eager_set) */
} scope_record_t;

static void scope_graph_reset(void *ctx, recap_graph_t graph) {
  (void)graph;
  scope_record_t *r = ctx;
  r->open = false;
  r->eager = false;
}

static void scope_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  recap__host_free(ctx);
}

static const recap__graph_hooks_t scope_hooks = {.graph_reset = scope_graph_reset,
                                                 .release = scope_release};

/* graph's record, attached on first use. */
static recap_status_t scope_record(recap_graph_t graph, scope_record_t **record) {
  scope_record_t *r = recap__graph_attached_ctx(graph, &scope_hooks);
  if (!r) {
    r = recap__host_calloc(1, sizeof *r);
    if (!r)
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                          "recap_capture_scope_begin: out of host memory");
    recap_status_t s = recap__graph_attach(graph, &scope_hooks, r);
    if (s != RECAP_SUCCESS) {
      recap__host_free(r);
      return s;
    }
  }
  *record = r;
  return RECAP_SUCCESS;
}

void recap__scope_capture_ended(recap_graph_t graph) {
  scope_record_t *r = recap__graph_attached_ctx(graph, &scope_hooks);
  if (r) r->open = false;
}

/* ------------------------------------------------------------------------------------------
 * The scope
 * ---------------------------------------------------------------------------------------- */

/* The scope's stream (opts' or the library's side stream) and graph's record, which no open
 * scope may hold. */
static recap_status_t scope_stream_and_record(recap_graph_t graph,
                                              const recap_scope_options_t *opts,
                                              recap_stream_t *stream, scope_record_t **record) {
  *stream = opts->stream;
  if (!*stream) RECAP__CHECK(recap__side_stream(stream));
  RECAP__CHECK(scope_record(graph, record));
  if ((*record)->open)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_capture_scope_begin: a scope is open on this graph already; end "
                        "it first");
  return RECAP_SUCCESS;
}

/* A scope on a graph switched to run eagerly (recap_graph_eager_set): its stream, and nothing
 * captured, synchronised or emptied; the graph keeps its state and what it holds. */
static recap_status_t eager_scope(recap_graph_t graph, const recap_scope_options_t *opts,
                                  recap_stream_t *stream) {
  if (graph->state == RECAP__GRAPH_CAPTURING || graph->recapturing)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_capture_scope_begin: the graph is capturing; end that capture "
                        "first");
  recap_stream_t s;
  scope_record_t *record;
  RECAP__CHECK(scope_stream_and_record(graph, opts, &s, &record));
  record->open = true;
  record->eager = true;
  *stream = s;
  return RECAP_SUCCESS;
}

recap_status_t recap_capture_scope_begin(recap_graph_t graph, const recap_scope_options_t *options,
                                         recap_stream_t *stream) {
  RECAP__CHECK(recap__graph_check(graph, "recap_capture_scope_begin"));
  RECAP__ARG(stream != NULL, "recap_capture_scope_begin: stream is NULL");
  *stream = NULL;
  recap_scope_options_t opts = RECAP_SCOPE_OPTIONS_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&opts, options, recap_scope_options_t, capture,
                                   "recap_capture_scope_begin", "RECAP_SCOPE_OPTIONS_INIT"));
  /* The embedded capture options follow the same rule by their own size: those of a caller
   * built against an older recap_capture_options_t stop short, and the rest take defaults. */
  recap_capture_options_t copts = RECAP_CAPTURE_OPTIONS_INIT;
  RECAP__CHECK(RECAP__EMBEDDED_OPTIONS_COPY(&copts, &opts.capture, recap_capture_options_t, mode,
                                            "recap_capture_scope_begin", "capture",
                                            "RECAP_CAPTURE_OPTIONS_INIT"));
  /* A graph switched to run eagerly keeps what it holds: the scope touches nothing of it. */
  if (graph->eager) return eager_scope(graph, &opts, stream);
  /* With capture.recapture, a graph holding a capture is recaptured (graphs enabled). */
  bool recapture = copts.recapture && graph->state == RECAP__GRAPH_CAPTURED;
  if (graph->state != RECAP__GRAPH_FRESH && !recapture)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_capture_scope_begin: the graph is not fresh; call "
                        "recap_graph_reset() first, or set options->capture.recapture to "
                        "recapture what it holds");
  if (recapture && !recap_graphs_enabled())
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_capture_scope_begin: graphs are disabled, and the graph holds a "
                        "capture that an eager scope would drop; replay it, or reset it first");
  recap_stream_t s;
  scope_record_t *record;
  RECAP__CHECK(scope_stream_and_record(graph, &opts, &s, &record));
  if (!recap_graphs_enabled()) {
    /* An eager scope is the graph's last "capture": it has no pool, so none is named. */
    graph->state = RECAP__GRAPH_EAGER;
    graph->pool_known = false;
    memset(&graph->pool, 0, sizeof graph->pool);
    record->open = true;
    *stream = s;
    return RECAP_SUCCESS;
  }
  RECAP__CHECK(recap__device()->device_synchronize());
  /* Another thread may be capturing: then the cache stays, which is only less tidy. */
  if (recap_empty_cache() != RECAP_SUCCESS)
    RECAP__DEBUG("capture scope: the cache was not emptied (%s)", recap_last_error());
  RECAP__CHECK(recap_graph_capture_begin(graph, &copts, s));
  record->open = true;
  *stream = s;
  return RECAP_SUCCESS;
}

recap_status_t recap_capture_scope_end(recap_graph_t graph) {
  RECAP__CHECK(recap__graph_check(graph, "recap_capture_scope_end"));
  scope_record_t *record = recap__graph_attached_ctx(graph, &scope_hooks);
  if (!record || !record->open)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_capture_scope_end: no capture scope is open on this graph");
  if (graph->state == RECAP__GRAPH_EAGER || record->eager) {
    record->open = false;
    record->eager = false;
    return RECAP_SUCCESS;
  }
  /* The end closes the scope (recap__scope_capture_ended), unless it is refused (e.g. from
   * another thread): then the capture, and so the scope, stays open. */
  return recap_graph_capture_end(graph);
}
