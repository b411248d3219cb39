/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec_memory.c — the device memory an executable takes, measured around its instantiation.
 *
 * CUDA has no query for what an executable holds, so recap asks cudaMemGetInfo before and after
 * cudaGraphInstantiate and keeps the drop (recap/memory.h says what can skew it). The file calls
 * only the device seam, so that every place that instantiates (graph.c, update.c, and
 * region_state.c, which graph.c itself calls) can use it without a circle between them.
 */
#include "core/error.h"
#include "graph/graph_internal.h"

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

recap_status_t recap__graph_instantiate_measured(recap_cuda_graph_exec_t *exec,
                                                 recap_cuda_graph_t graph, int64_t *bytes) {
  *bytes = 0;
  size_t before = 0, after = 0;
  bool measured = free_bytes(&before);
  RECAP__CHECK(recap__device()->graph_instantiate(exec, graph));
  if (measured && free_bytes(&after) && after < before) *bytes = (int64_t)(before - after);
  return RECAP_SUCCESS;
}
