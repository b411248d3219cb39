/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * events.h — the events a freed block waits for and the blocks freed during captures
 * (events.c). Every function is called with the allocator's lock held.
 */
#ifndef RECAP_ALLOC_EVENTS_H
#define RECAP_ALLOC_EVENTS_H

#include <stdbool.h>

#include "alloc/state.h"

/* Whether a capture is routed on any device (*device, when not NULL, names one). */
bool recap__alloc_capture_under_way(int *device);
/* Record an event on every stream that used b (recap_record_stream), or wait for a stream when
 * no event can be had. */
void recap__alloc_insert_events(recap__device_state_t *d, recap__block_t *b);
/* Free the blocks whose events completed, after giving the blocks freed during captures their
 * events; with wait, wait for every event first (during captures: only for those outside them). */
void recap__alloc_process_events(recap__device_state_t *d, bool wait);
/* Collect what waits for events on device d without waiting (a route has just ended): when no
 * capture is under way on any device, the blocks freed during captures get their events and the
 * blocks whose events completed are free again; otherwise nothing. */
void recap__alloc_collect_events(recap__device_state_t *d);

#endif /* RECAP_ALLOC_EVENTS_H */
