/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_inspect.h — the CUDA seam's graph inspection and node reads (cuda_inspect.c), and its
 * patch plans and executable updates (cuda_patch.c), for the seam's table in cuda.c. Each
 * recap__cuda_<name> is the device.h member <name>.
 */
#ifndef RECAP_CUDA_INSPECT_H
#define RECAP_CUDA_INSPECT_H

#include <stddef.h>

#include "device/device.h"

recap_status_t recap__cuda_graph_inspect(recap_cuda_graph_t graph, recap_graph_info_t *info);
/* Every node of graph, those in the bodies of the conditional nodes cond_node_add made
 * included (cuda_cond.h). */
recap_status_t recap__cuda_graph_node_count(recap_cuda_graph_t graph, size_t *count);
recap_status_t recap__cuda_capture_nodes(recap_stream_t stream, recap_cuda_graph_t *graph,
                                         recap__graph_node_t **nodes, size_t *count);
recap_status_t recap__cuda_graph_nodes(recap_cuda_graph_t graph, recap__graph_node_t **nodes,
                                       size_t *count);
recap_status_t recap__cuda_graph_reads_check(void);
recap_status_t recap__cuda_graph_reads(recap_cuda_graph_t graph, recap__graph_read_t **reads,
                                       size_t *count);

/* The walk behind graph_reads, shared with the patch plans (cuda_patch.c). For each top-level
 * node of graph, after its reads were appended to the list (reads[first .. first + count)),
 * visitor(ctx, visit, reads) runs; a failure it returns ends the walk. A kernel node's visit
 * carries a private copy of its parameters (driver.h), which the visitor owns from then on;
 * NULL when the driver could not describe the kernel (its reads are then left out, with a
 * warning in the log that names purpose). Reads inside child graphs count as their node's and
 * are marked nested. *reads is malloc'ed through recap's host seam, as graph_reads'. */
typedef struct recap__cuda_read_visit {
  size_t index;             /* the node's index in graph_nodes' order */
  recap__graph_node_t node; /* cudaGraphNode_t */
  int type;                 /* enum cudaGraphNodeType */
  size_t first, count;      /* its reads */
  struct recap__kernel_args *kernel;
} recap__cuda_read_visit_t;
typedef recap_status_t (*recap__cuda_read_visitor_t)(void *ctx, recap__cuda_read_visit_t *visit,
                                                     const recap__graph_read_t *reads);
recap_status_t recap__cuda_walk_reads(recap_cuda_graph_t graph, const char *purpose,
                                      recap__cuda_read_visitor_t visitor, void *ctx,
                                      recap__graph_read_t **reads, size_t *count);

/* cuda_patch.c: the device.h members of the same names. */
recap_status_t recap__cuda_patch_plan_create(recap_cuda_graph_t graph, recap_cuda_graph_t origin,
                                             recap__patch_plan_t *plan,
                                             const recap__graph_read_t **sites, size_t *count);
recap_status_t recap__cuda_patch_plan_apply(recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
                                            const recap__patch_t *patches, size_t count);
recap_status_t recap__cuda_patch_plan_sync(recap__patch_plan_t plan);
void recap__cuda_patch_plan_destroy(recap__patch_plan_t plan);
recap_status_t recap__cuda_patch_plan_find(recap__patch_plan_t plan,
                                           const recap__arg_pattern_t *patterns, size_t count,
                                           recap__arg_site_t **found, size_t *found_count);
recap_status_t recap__cuda_patch_plan_arg(recap__patch_plan_t plan, size_t node, uint32_t param,
                                          recap__arg_site_t *site);
recap_status_t recap__cuda_patch_plan_write(recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
                                            const recap__arg_write_t *writes, size_t count);
recap_status_t recap__cuda_patch_plan_shape(recap__patch_plan_t plan, size_t node,
                                            recap__kernel_shape_t *shape, int *max_threads);
recap_status_t recap__cuda_patch_plan_set_shape(recap__patch_plan_t plan,
                                                recap_cuda_graph_exec_t exec, size_t node,
                                                const recap__kernel_shape_t *shape);
recap_status_t recap__cuda_patch_plan_precede_only(recap__patch_plan_t plan, size_t node,
                                                   const size_t *targets, size_t count);
recap_status_t recap__cuda_patch_plan_device_node(recap__patch_plan_t plan, size_t node,
                                                  uint64_t *handle);
recap_status_t recap__cuda_graph_exec_update(recap_cuda_graph_exec_t exec, recap_cuda_graph_t graph,
                                             recap_update_reason_t *refused, size_t *node);

#endif /* RECAP_CUDA_INSPECT_H */
