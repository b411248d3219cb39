/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay_take.h — the allocation path of a route with allocation logs (replay_take.c).
 */
#ifndef RECAP_ALLOC_REPLAY_TAKE_H
#define RECAP_ALLOC_REPLAY_TAKE_H

#include "alloc/request.h"
#include "alloc/state.h"
#include "recap/core.h"

/* Place the request by the replay rule (replay.h) into *b, taken out of its free set, and note
 * it in the route's logs (lock held). */
RECAP__COLD recap_status_t recap__alloc_take_logged(recap__request_t *r, recap__block_t **b);

#endif /* RECAP_ALLOC_REPLAY_TAKE_H */
