/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * allocator.h — what allocator.c, the file of recap_malloc and recap_free, gives the rest of the
 * allocator: the state of a device, the current device, the front cache's switch, and the
 * refusal of a pool that sleeps.
 */
#ifndef RECAP_ALLOC_ALLOCATOR_H
#define RECAP_ALLOC_ALLOCATOR_H

#include <stdbool.h>

#include "alloc/state.h"
#include "recap/core.h"

/* The state of device, made on first use; NULL without host memory. Call with the lock held. */
recap__device_state_t *recap__alloc_device_state(int device);
/* The current device, or NOT_SUPPORTED when recap cannot handle its number. */
recap_status_t recap__alloc_current_device(int *device);

/* A mark of the calling thread, distinct from every other live thread's: what a route keeps
 * to know the thread that made its stream capture (recap__route_t). */
const void *recap__alloc_thread_mark(void);

/* The internal switch of the front cache (tests): false sends every free down the slow path. */
void recap__alloc_front_cache_enable(bool on);

/* The refusal of an allocation or a route to an asleep pool (lock held): POOL_ASLEEP with a
 * message naming the call and the pool. Here, with the requests it refuses, so that neither
 * allocator.c nor pool.c calls into sleep.c. */
recap_status_t recap__pool_asleep_error(const char *call, const recap__pool_t *pool);

#endif /* RECAP_ALLOC_ALLOCATOR_H */
