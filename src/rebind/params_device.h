/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * params_device.h — graph parameters applied on the GPU (params_device.c), for the capture's
 * beginning (src/capture/) and for params.c, which stages the values a set gives instead of
 * patching the executable.
 */
#ifndef RECAP_PARAMS_DEVICE_H
#define RECAP_PARAMS_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph_internal.h"
#include "recap/params.h"

typedef struct params_device params_device_t;

/* Before the capture begins (device memory cannot be allocated during it): the state of a
 * capture with options.params_on_device, which says (a warning, once per process) when the
 * driver lacks device-updatable kernel nodes; the capture then sets its parameters from the
 * host. */
recap_status_t recap__params_device_prepare(params_device_t **d);
/* A capture that did not begin: free what prepare made. NULL is a no-op. */
void recap__params_device_discard(params_device_t *d);
/* Once the capture began on stream: attach d to graph (which owns it from then on, even when
 * this fails) and capture the applier kernel as the capture's first work. The rebinding state
 * (recap__rebind_attach_patchable) must be attached first: its capture end finds the
 * parameters' sites, which this one's then makes device-updatable. */
recap_status_t recap__params_device_attach(recap_graph_t graph, params_device_t *d,
                                           recap_stream_t stream);

/* During the capture (params.c's recap_graph_param_device): param takes its value from the
 * `bytes` at device memory `value` at each replay, read at this point of stream's work by a
 * source applier captured now; with per_block, the nodes that take it get their grid from it.
 * NOT_SUPPORTED where the driver has no device-updatable kernel nodes. */
recap_status_t recap__params_device_source(recap_graph_t graph, recap_stream_t stream,
                                           recap_param_t param, const void *value, uint32_t bytes,
                                           uint32_t per_block, const char *fn);
/* Whether param of d's capture takes its value from device memory. d NULL: false. */
bool recap__params_device_sourced(const params_device_t *d, recap_param_t param);

/* Whether the values d's capture sets from the host are applied on the GPU (the graph's first
 * node applies them): a set then stages them. d NULL: false. */
bool recap__params_device_applies(const params_device_t *d);
/* The value of the capture's use'th parameter for the replays from the next one on. */
void recap__params_device_stage(params_device_t *d, size_t use, uint64_t bits);
/* The host set a node of the executable: upload it before the next launch. NULL: no-op. */
void recap__params_device_touched(params_device_t *d);

#endif /* RECAP_PARAMS_DEVICE_H */
