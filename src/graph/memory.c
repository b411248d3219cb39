/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory.c — recap_graph_memory (recap/memory.h): what one graph costs in device memory.
 *
 * The figures are kept where they arise: the pool's bytes and the capture's peak by the
 * allocator (the peak is read at the capture's end, graph.c and update.c), the executable's
 * bytes at each instantiation (exec_memory.c). This file only gathers them for the caller; the
 * per-pool view is the allocator's recap_pool_memory (src/alloc/accounting.c).
 */
#include <stddef.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "graph/graph_internal.h"
#include "regions/region_internal.h"

recap_status_t recap_graph_memory(recap_graph_t graph, recap_graph_memory_t *info) {
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_memory"));
  RECAP__ARG(info != NULL, "recap_graph_memory: info is NULL");
  const size_t first = offsetof(recap_graph_memory_t, budget_bytes) + sizeof(uint64_t);
  size_t size = info->size;
  RECAP__ARG(size >= first && size <= sizeof *info,
             "recap_graph_memory: info->size is %zu, but a recap_graph_memory_t is %zu to %zu "
             "bytes (from its first version to this library's); start it from "
             "RECAP_GRAPH_MEMORY_INIT",
             size, first, sizeof *info);
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
  out.exec_bytes = graph->exec_bytes + recap__regions_program_exec_bytes(graph);
  out.budget_bytes = graph->options.budget_bytes;
  memcpy(info, &out, size);
  return RECAP_SUCCESS;
}
