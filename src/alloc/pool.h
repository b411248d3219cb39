/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.h — pool ids, the routing of captures to private pools, references and segment sources
 * (pool.c): what the capture registry and the graph layer call.
 */
#ifndef RECAP_ALLOC_POOL_H
#define RECAP_ALLOC_POOL_H

#include <stdint.h>

#include "alloc/segment_source.h"
#include "recap/alloc.h"
#include "recap/core.h"

/* A fresh private pool id {n, 0} for a graph that was given no pool. */
recap_pool_id_t recap__pool_id_for_graph(void);

/* Routing by capture id (the public recap_pool_route_begin finds the id from a stream). */
recap_status_t recap__pool_route_begin(int device, recap_pool_id_t pool, uint64_t capture_id);
/* The two halves of recap__pool_route_begin for a capture recap begins itself, as PyTorch's
 * CUDAGraph does: reserve the route before the capture begins on its stream, so that no free,
 * allocation or other route's end of another thread records or queries an event on that stream
 * once it captures, and name the capture once its id is known. A pending route takes a
 * reference to the pool and is ended (recap__pool_route_end) like any other. */
recap_status_t recap__pool_route_reserve(int device, recap_pool_id_t pool);
/* stream: the stream that now captures under capture_id, begun by the calling thread; the
 * allocations it makes on that stream are routed without asking the device (recap__route_t). */
recap_status_t recap__pool_route_set_capture(int device, recap_pool_id_t pool, uint64_t capture_id,
                                             recap_stream_t stream);
/* The capture of pool's route (not pending) goes on under a new capture id: a region paused
 * and resumed it (recap/region.h), and CUDA may give the resumed capture a new id. stream, as
 * for recap__pool_route_set_capture: the stream that captures under capture_id again, from the
 * calling thread. Errors: INVALID_USAGE when pool is not routed on device, or another route has
 * capture_id. */
recap_status_t recap__pool_route_move(int device, recap_pool_id_t pool, uint64_t capture_id,
                                      recap_stream_t stream);
/* The stream of pool's route may stop capturing (a region is about to pause it): until
 * recap__pool_route_move names it again, allocations on it ask the device which capture it is
 * in. A pool not routed on device is left as it is. */
void recap__pool_route_forget_stream(int device, recap_pool_id_t pool);
/* Ends the route of pool. Events held back during captures are recorded once the last route
 * ends; when one cannot be, the allocator waits for its stream instead, and the calling thread's
 * last error stays what it was. */
recap_status_t recap__pool_route_end(int device, recap_pool_id_t pool);
recap_status_t recap__pool_release(int device, recap_pool_id_t pool);
/* One more reference to pool, which someone holds already (a graph embedding another keeps the
 * embedded graph's pool): RECAP_ERROR_INVALID_USAGE when nobody references it on device.
 * recap__pool_release gives it back. */
recap_status_t recap__pool_retain(int device, recap_pool_id_t pool);

/* Take the segments of pool `id` (on every device) from *source from now on (copied; kept for
 * the rest of the process). RECAP_ERROR_INVALID_USAGE naming function when the pool holds
 * segments already, or when expandable_segments is on (its segments are virtual memory). */
recap_status_t recap__pool_set_source(recap_pool_id_t id, const recap__segment_source_t *source,
                                      const char *function);

#endif /* RECAP_ALLOC_POOL_H */
