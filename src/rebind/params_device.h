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

/* The value of the capture's use'th parameter for the replays from the next one on. */
void recap__params_device_stage(params_device_t *d, size_t use, uint64_t bits);
/* The host set a node of the executable: upload it before the next launch. NULL: no-op. */
void recap__params_device_touched(params_device_t *d);
/* Whether graph holds a capture whose parameters are applied on the GPU. */
bool recap__params_device_on(recap_graph_t graph);

#endif /* RECAP_PARAMS_DEVICE_H */
