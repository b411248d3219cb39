/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_inspect.h — the CUDA seam's graph inspection and node reads (cuda_inspect.c), for the
 * seam's table in cuda.c. Each is the device.h member of the same name.
 */
#ifndef RECAP_CUDA_INSPECT_H
#define RECAP_CUDA_INSPECT_H

#include <stddef.h>

#include "device/device.h"

recap_status_t recap__cuda_graph_inspect(recap_cuda_graph_t graph, recap_graph_info_t *info);
recap_status_t recap__cuda_capture_nodes(recap_stream_t stream, recap_cuda_graph_t *graph,
                                         recap__graph_node_t **nodes, size_t *count);
recap_status_t recap__cuda_graph_nodes(recap_cuda_graph_t graph, recap__graph_node_t **nodes,
                                       size_t *count);
recap_status_t recap__cuda_graph_reads_check(void);
recap_status_t recap__cuda_graph_reads(recap_cuda_graph_t graph, recap__graph_read_t **reads,
                                       size_t *count);

#endif /* RECAP_CUDA_INSPECT_H */
