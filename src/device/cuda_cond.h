/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_cond.h — what the CUDA seam remembers of the conditional nodes it adds (cuda_cond.c).
 *
 * CUDA 13.0 offers no call that reads a conditional node's type or body graphs back
 * (cudaGraphNodeGetParams came later), so cond_node_add records each node it adds, with its
 * kind and bodies, until the graph holding it is destroyed (cuda_graph_destroy calls
 * recap__cuda_cond_forget). Inspection, node counts and the reads walk (cuda_inspect.c) look
 * nodes up here; a conditional node made outside recap is not known and shows no bodies.
 */
#ifndef RECAP_CUDA_COND_H
#define RECAP_CUDA_COND_H

#include <stdbool.h>

#include "device/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The recorded kind and bodies of the conditional node `node`: *bodies is a copy (recap's host
 * allocator; the caller frees it with recap__host_free) of its *branches body graphs. False
 * when the node is not one cond_node_add made, or when out of host memory for the copy (then
 * *bodies is NULL and *branches 0, as for an unknown node). */
bool recap__cuda_cond_find(recap__graph_node_t node, recap__cond_kind_t *kind, unsigned *branches,
                           recap_cuda_graph_t **bodies);
/* Whether graph holds a conditional node that cond_node_add recorded (its bodies' nodes are
 * counted apart only then). */
bool recap__cuda_cond_any_in(recap_cuda_graph_t graph);
/* Forget the conditional nodes of graph and, recursively, of their bodies: graph is about to
 * be destroyed. */
void recap__cuda_cond_forget(recap_cuda_graph_t graph);

/* The seam's members of the same names (cuda_cond.c; cond_launch in cond_kernels.cu). */
recap_status_t recap__cuda_cond_supported(bool *supported);
recap_status_t recap__cuda_capture_pause(recap_stream_t stream, recap_cuda_graph_t *graph,
                                         recap__graph_node_t **deps, size_t *count);
recap_status_t recap__cuda_capture_to_graph(recap_stream_t stream, recap_cuda_graph_t graph,
                                            const recap__graph_node_t *deps, size_t count,
                                            recap__capture_mode_t mode);
recap_status_t recap__cuda_cond_handle_create(recap_cuda_graph_t graph, unsigned initial,
                                              bool assign_default, uint64_t *handle);
recap_status_t recap__cuda_graph_add_empty(recap_cuda_graph_t graph);
recap_status_t recap__cuda_cond_node_add(recap_cuda_graph_t graph, const recap__graph_node_t *deps,
                                         size_t count, recap__cond_kind_t kind, uint64_t handle,
                                         unsigned branches, recap__graph_node_t *node,
                                         recap_cuda_graph_t *bodies);
recap_status_t recap__cuda_cond_launch(const struct recap__cond_launch *launch);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_CUDA_COND_H */
