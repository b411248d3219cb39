/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory.c — what one graph costs in device memory (recap/memory.h): its executables measured
 * at their instantiation, its share of its pool's totals, and recap_graph_memory.
 *
 * The figures are kept where they arise: the pool's bytes and the capture's peak by the
 * allocator (the peak is read at the capture's end, graph.c and update.c), the executable's
 * bytes at each instantiation (here, around cudaGraphInstantiate: CUDA has no query for what an
 * executable holds, so recap asks cudaMemGetInfo before and after it and keeps the drop;
 * docs/memory.md says what can skew it. The two calls cost about 8 us, more than a small graph's
 * whole capture, so only a capture under a budget, which counts executables, or the option
 * measure_exec_memory turns the measure on). recap_graph_memory gathers them for
 * the caller; the per-pool view is the allocator's recap_pool_memory (src/alloc/accounting.c),
 * whose totals of graphs recap__graph_account keeps in step with each graph.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "core/options.h"
#include "graph/graph_internal.h"
#include "recap/memory.h"

/* Free device memory now, or false when the device cannot say; a failure leaves the calling
 * thread's last error as it was, since the measure is best effort and the call it surrounds
 * has not failed. */
static bool free_bytes(size_t *out) {
  size_t total = 0;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (recap__device()->mem_get_info(out, &total) == RECAP_SUCCESS) return true;
  recap__error_restore(&saved);
  return false;
}

/* Whether owner's instantiations measure their executables: always under a budget, which counts
 * them, else as the option measure_exec_memory says; a bad environment, which every allocation
 * reports, counts as the default (off) here. */
static bool measuring(recap_graph_t owner) {
  if (owner->options.budget_bytes != 0) return true;
  /* The option as last read, with the options' version it was read at (version << 1 | on; 0:
   * none), so that an instantiation copies the registry only after the options changed. */
  static _Atomic uint64_t cached;
  uint64_t version = recap__options_version();
  uint64_t c = atomic_load_explicit(&cached, memory_order_relaxed);
  if (version != 0 && c >> 1 == version) return (c & 1) != 0;
  recap__options_t o;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (recap__options_get(&o) != RECAP_SUCCESS) {
    recap__error_restore(&saved);
    return false;
  }
  bool on = o.measure_exec_memory != 0;
  /* Kept only if nothing changed while the copy was taken. */
  if (version != 0 && recap__options_version() == version)
    atomic_store_explicit(&cached, version << 1 | (on ? 1u : 0u), memory_order_relaxed);
  return on;
}

recap_status_t recap__graph_instantiate_measured(recap_graph_t owner, recap_cuda_graph_exec_t *exec,
                                                 recap_cuda_graph_t graph, int64_t *bytes) {
  *bytes = 0;
  if (!measuring(owner)) {
    RECAP__CHECK(recap__device()->graph_instantiate(exec, graph));
    *bytes = RECAP__EXEC_NOT_MEASURED;
    return RECAP_SUCCESS;
  }
  size_t before = 0, after = 0;
  bool measured = free_bytes(&before);
  RECAP__CHECK(recap__device()->graph_instantiate(exec, graph));
  if (measured && free_bytes(&after) && after < before) *bytes = (int64_t)(before - after);
  return RECAP_SUCCESS;
}

void recap__graph_account(recap_graph_t g) {
  bool on = g->holds_pool;
  int64_t exec = 0, nodes = 0;
  if (on) {
    size_t own_nodes;
    int64_t own_bytes;
    (void)recap__graph_hooks_own_graphs(g, &own_nodes, &own_bytes);
    exec = (g->exec_bytes > 0 ? g->exec_bytes : 0) + own_bytes;
    nodes = (int64_t)(g->node_count + own_nodes);
  }
  bool same = on && g->accounted.on && g->accounted.device == g->device &&
              recap__pool_id_equal(g->accounted.pool, g->pool);
  if (g->accounted.on && !same) {
    recap__pool_account_graph(g->accounted.device, g->accounted.pool, -1, -g->accounted.exec_bytes,
                              -g->accounted.nodes);
    g->accounted.on = false;
  }
  if (!on) return;
  /* Nothing changed since the last count: the pool's totals already hold it. */
  if (same && exec == g->accounted.exec_bytes && nodes == g->accounted.nodes) return;
  recap__pool_account_graph(g->device, g->pool, same ? 0 : 1,
                            exec - (same ? g->accounted.exec_bytes : 0),
                            nodes - (same ? g->accounted.nodes : 0));
  g->accounted.on = true;
  g->accounted.device = g->device;
  g->accounted.pool = g->pool;
  g->accounted.exec_bytes = exec;
  g->accounted.nodes = nodes;
}

recap_status_t recap_graph_memory(recap_graph_t graph, recap_graph_memory_t *info) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_memory"));
  RECAP__ARG(info != NULL, "recap_graph_memory: info is NULL");
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(info, recap_graph_memory_t, budget_bytes,
                                        "recap_graph_memory", "info->size",
                                        "RECAP_GRAPH_MEMORY_INIT"));
  size_t size = info->size;
  RECAP__CHECK(recap__graph_not_recapturing(graph, "recap_graph_memory"));
  if (graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_memory: the graph holds no capture (%s); ask once "
                        "recap_graph_capture_end succeeded",
                        graph->state == RECAP__GRAPH_CAPTURING ? "its first capture is under way"
                        : graph->state == RECAP__GRAPH_EAGER
                            ? "its capture scope ran eagerly: graphs are disabled"
                            : "it is fresh");
  recap_graph_memory_t out;
  memset(&out, 0, sizeof out);
  out.size = size;
  RECAP__CHECK(recap_graph_node_count(graph, &out.nodes));
  out.pool = graph->pool;
  /* The graph holds a reference to its pool, so the pool exists. */
  if (!recap__pool_bytes(graph->device, graph->pool, &out.pool_reserved_bytes,
                         &out.pool_allocated_bytes))
    return recap__error(RECAP_ERROR_INTERNAL,
                        "recap_graph_memory: the graph's pool is gone while the graph holds it");
  out.capture_peak_bytes = graph->capture_peak;
  out.capture_reserved_bytes = graph->capture_grew;
  size_t own_nodes;
  int64_t own_bytes;
  (void)recap__graph_hooks_own_graphs(graph, &own_nodes, &own_bytes);
  out.exec_bytes =
      graph->exec_bytes == RECAP__EXEC_NOT_MEASURED ? -1 : graph->exec_bytes + own_bytes;
  out.budget_bytes = graph->options.budget_bytes;
  memcpy(info, &out, size);
  return RECAP_SUCCESS;
}
