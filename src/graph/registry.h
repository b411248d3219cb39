/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * registry.h — which recap graph owns which CUDA capture.
 *
 * Work enqueued during a capture only knows its stream; the stream knows its capture id
 * (cudaStreamGetCaptureInfo, side streams joined by events included). The registry maps that
 * id to the graph being captured, so layers that act during a capture (random-number state,
 * annotations) can find the graph. Safe across threads: captures in several threads at once
 * each have their own entry.
 */
#ifndef RECAP_GRAPH_REGISTRY_H
#define RECAP_GRAPH_REGISTRY_H

#include <stdint.h>

#include "recap/graph.h"

recap_status_t recap__registry_add(uint64_t capture_id, recap_graph_t graph);
void recap__registry_remove(uint64_t capture_id);
/* The graph capturing under capture_id, or NULL. */
recap_graph_t recap__registry_find(uint64_t capture_id);
/* The graph whose capture stream belongs to (NULL when the stream is not capturing into a
 * recap graph). */
recap_status_t recap__registry_find_stream(recap_stream_t stream, recap_graph_t *graph);
/* Forget every entry (tests, after the fake device was reset). */
void recap__registry_clear(void);
/* Number of captures registered (tests check that none is left behind). */
int recap__registry_count(void);
/* The same without taking the lock: a hint, exact only when no capture begins or ends
 * concurrently. 0 lets code skip asking CUDA about a stream. */
int recap__registry_active(void);

#endif /* RECAP_GRAPH_REGISTRY_H */
