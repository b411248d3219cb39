/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embed.c — a replay inside another capture: recap_graph_replay on a stream that captures into
 * a recap graph (the outer graph) adds the replayed graph's template to that capture as a child
 * graph node (the seam's capture_add_child), ordered after the stream's work so far, instead of
 * launching it.
 *
 * The outer graph's capture carries a record (attached through the hooks, released with what
 * the capture made) of the pools whose memory the embedded work uses: it holds a reference to
 * each, so that they outlive both graphs, and at every replay of the outer graph it refuses, as
 * recap_graph_replay does for a graph's own pool, while one of them sleeps. A graph that holds
 * such a record passes its pools on when it is embedded in turn, so the outermost graph holds
 * every pool at any depth.
 *
 * A module that acts on the host at each of the graph's replays and knows how to make the
 * outer graph's replays do the same (random numbers: the outer graph advances the generators'
 * offsets, and the node's kernels draw where the same work run eagerly would; input-liveness
 * checks: the outer graph checks the embedded graph's inputs; recorded collectives: the outer
 * record gains them, and the outer replays follow their communicators' policies) handles the
 * embed_begin and embed_end events around the node (hooks.h).
 *
 * What CUDA cannot hold in a child graph is refused with RECAP_ERROR_NOT_SUPPORTED, and a graph
 * whose other modules act on the host at each of its replays (graph parameters applied on the
 * GPU, when no device-updatable node made it NOT_SUPPORTED first), which a replay of
 * the outer graph would not do, with RECAP_ERROR_INVALID_USAGE; each message names the rule
 * (embed_check). The refusals come before anything changes, and a
 * failure of the seam leaves the capture and the references as they were.
 */
#include <stdatomic.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "core/host.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"

typedef struct embed_pool {
  int device;
  recap_pool_id_t pool;
} embed_pool_t;

/* What a capture embedded: the pools it holds a reference to, each once. */
typedef struct embed_record {
  embed_pool_t *pools;
  size_t count, capacity;
} embed_record_t;

static recap_status_t record_pools_awake(const embed_record_t *r) {
  if (RECAP__LIKELY(atomic_load_explicit(&recap__alloc_sleeping, memory_order_relaxed) == 0))
    return RECAP_SUCCESS;
  for (size_t i = 0; i < r->count; i++)
    RECAP__CHECK(recap__pool_replay_check(r->pools[i].device, r->pools[i].pool));
  return RECAP_SUCCESS;
}

/* The embedded work reads and writes its pools: while one sleeps the outer graph may not run. */
static recap_status_t record_before_replay(void *ctx, recap_graph_t graph, recap_stream_t stream) {
  (void)graph;
  (void)stream;
  return record_pools_awake(ctx);
}

static void record_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  embed_record_t *r = ctx;
  for (size_t i = 0; i < r->count; i++) recap__pool_release(r->pools[i].device, r->pools[i].pool);
  recap__host_free(r->pools);
  recap__host_free(r);
}

static const recap__graph_hooks_t embed_hooks = {
    .name = "embedded graphs",
    .before_replay = record_before_replay,
    .release = record_release,
};

static bool record_has(const embed_record_t *r, int device, recap_pool_id_t pool) {
  for (size_t i = 0; i < r->count; i++)
    if (r->pools[i].device == device && r->pools[i].pool.a == pool.a &&
        r->pools[i].pool.b == pool.b)
      return true;
  return false;
}

bool recap__graph_embeds_pool(recap_graph_t graph, recap_pool_id_t pool) {
  const embed_record_t *r = recap__graph_hook_ctx(graph, &embed_hooks);
  if (!r) return false;
  for (size_t i = 0; i < r->count; i++)
    if (recap__pool_id_equal(r->pools[i].pool, pool)) return true;
  return false;
}

/* The record of outer's capture, attached now if it has none. */
static recap_status_t record_of(recap_graph_t outer, embed_record_t **record) {
  *record = recap__graph_hook_ctx(outer, &embed_hooks);
  if (*record) return RECAP_SUCCESS;
  embed_record_t *r = recap__host_calloc(1, sizeof *r);
  if (!r)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "recap_graph_replay: out of host memory to "
                        "embed the graph into the capture");
  recap_status_t s = recap__graph_add_hook(outer, &embed_hooks, r);
  if (s != RECAP_SUCCESS) {
    recap__host_free(r);
    return s;
  }
  *record = r;
  return RECAP_SUCCESS;
}

/* Take a reference to each pool of `add` (count of them) that `into` does not hold yet and
 * append it: all or nothing. */
static recap_status_t record_take(embed_record_t *into, const embed_pool_t *add, size_t count) {
  if (into->capacity - into->count < count) {
    size_t capacity = into->count + count + 4;
    embed_pool_t *grown = recap__host_realloc(into->pools, capacity * sizeof *grown);
    if (!grown)
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                          "recap_graph_replay: out of host memory to "
                          "embed the graph into the capture");
    into->pools = grown;
    into->capacity = capacity;
  }
  size_t start = into->count;
  for (size_t i = 0; i < count; i++) {
    if (record_has(into, add[i].device, add[i].pool)) continue;
    recap_status_t s = recap__pool_retain(add[i].device, add[i].pool);
    if (s != RECAP_SUCCESS) {
      while (into->count > start) {
        into->count--;
        recap__pool_release(into->pools[into->count].device, into->pools[into->count].pool);
      }
      return s;
    }
    into->pools[into->count++] = add[i];
  }
  return RECAP_SUCCESS;
}

/* Give back the references the last `taken` entries of r hold, and drop them. */
static void record_untake(embed_record_t *r, size_t taken) {
  while (taken--) {
    r->count--;
    recap__pool_release(r->pools[r->count].device, r->pools[r->count].pool);
  }
}

/* Why graph cannot be embedded (RECAP_ERROR_INVALID_USAGE or NOT_SUPPORTED), or success. */
static recap_status_t embed_check(recap_graph_t graph, recap_graph_t outer) {
  if (outer == graph)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_replay: the stream is capturing into this very graph; a "
                        "graph cannot be replayed into its own capture");
  if (graph->recapturing)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_replay: the graph is being recaptured, so it has nothing to "
                        "embed into the capture on this stream until recap_graph_capture_end "
                        "ends the recapture");
  if (graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_replay: nothing was captured yet, so there is nothing to "
                        "embed into the capture on this stream");
  size_t own_nodes;
  int64_t own_bytes;
  if (recap__graph_hooks_own_graphs(graph, &own_nodes, &own_bytes))
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "recap_graph_replay: cannot embed the graph into the capture on this "
                        "stream: its regions run on the host path (a host loop launches several "
                        "graphs), which no child graph node can hold");
  if (graph->exec_device_nodes)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "recap_graph_replay: cannot embed the graph into the capture on this "
                        "stream: it holds device-updatable kernel nodes (graph parameters "
                        "applied on the GPU), and CUDA does not copy such a graph into a child "
                        "graph node");
  const recap__graph_hooks_t *module = recap__graph_hooks_unembeddable(graph, &embed_hooks);
  if (module && module->embed_refusal)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "recap_graph_replay: cannot embed the graph into the capture on this "
                        "stream: the graph holds %s",
                        module->embed_refusal);
  if (module)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_replay: cannot embed the graph into the capture on this "
                        "stream: its %s act on the host at each of its replays, which a replay "
                        "of the capturing graph would not do; replay it outside the capture",
                        module->name ? module->name : "modules");
  /* The modules' own rules (a generator shared with another capture, ...). */
  RECAP__CHECK(recap__graph_hooks_embed_refused(graph, outer));
  if (!graph->template_graph)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "recap_graph_replay: cannot embed the graph into the capture on this "
                        "stream: the child graph node is a copy of the graph's template, which a "
                        "graph created without RECAP_GRAPH_KEEP drops once instantiated (CUDA "
                        "launches no executable into a capture); create it with "
                        "RECAP_GRAPH_KEEP");
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_embed(recap_graph_t graph, recap_graph_t outer, recap_stream_t stream) {
  RECAP__CHECK(embed_check(graph, outer));
  /* The graph's own pool, and the pools of the graphs embedded in it, must be awake: the child
   * node is what a replay would run. */
  RECAP__CHECK(recap__graph_pools_awake(graph));
  embed_record_t *inner = recap__graph_hook_ctx(graph, &embed_hooks);
  if (inner) RECAP__CHECK(record_pools_awake(inner));
  /* The template must hold what the layers changed in the executable only (rebinds). */
  RECAP__CHECK(recap__graph_hooks_template_read(graph));
  embed_record_t *record;
  RECAP__CHECK(record_of(outer, &record));
  size_t before = record->count;
  embed_pool_t own = {graph->device, graph->pool};
  recap_status_t s = graph->holds_pool ? record_take(record, &own, 1) : RECAP_SUCCESS;
  if (s == RECAP_SUCCESS && inner) s = record_take(record, inner->pools, inner->count);
  /* The modules that act at the graph's replays make the outer graph's replays act so too
   * (random numbers), around the node. */
  size_t prepared = 0;
  if (s == RECAP_SUCCESS) s = recap__graph_hooks_embed_begin(graph, outer, stream, &prepared);
  if (s == RECAP_SUCCESS) s = recap__device()->capture_add_child(stream, graph->template_graph);
  if (s == RECAP_SUCCESS) return recap__graph_hooks_embed_end(graph, outer, stream, prepared, true);
  recap__saved_error_t cause;
  recap__error_save(&cause);
  (void)recap__graph_hooks_embed_end(graph, outer, stream, prepared, false);
  record_untake(record, record->count - before);
  recap__error_restore(&cause);
  return s;
}

recap_status_t recap__graph_capturing_into(recap_stream_t stream, recap_graph_t *outer) {
  *outer = NULL;
  recap__capture_status_t status;
  uint64_t id = 0;
  /* The cheap query: a graph being replayed was captured, so a context exists. */
  RECAP__CHECK(recap__device()->stream_capture_id(stream, &status, &id));
  if (status == RECAP__CAPTURE_ACTIVE) *outer = recap__registry_find(id);
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_embed_check(recap_graph_t graph, recap_stream_t stream) {
  if (RECAP__LIKELY(recap__registry_active() == 0)) return RECAP_SUCCESS;
  recap_graph_t outer;
  RECAP__CHECK(recap__graph_capturing_into(stream, &outer));
  if (!outer) return RECAP_SUCCESS;
  RECAP__CHECK(embed_check(graph, outer));
  RECAP__CHECK(recap__graph_pools_awake(graph));
  embed_record_t *inner = recap__graph_hook_ctx(graph, &embed_hooks);
  return inner ? record_pools_awake(inner) : RECAP_SUCCESS;
}
