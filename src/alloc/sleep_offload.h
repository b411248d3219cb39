/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep_offload.h — the pinned copy of an asleep pool's blocks in use (sleep_offload.c).
 * Lock held, the pool's device current.
 */
#ifndef RECAP_ALLOC_SLEEP_OFFLOAD_H
#define RECAP_ALLOC_SLEEP_OFFLOAD_H

#include "alloc/sleep.h"
#include "alloc/state.h"
#include "recap/core.h"

/* Copy pool's blocks in use to a pinned buffer (a kept one, or new): *out, or an error naming
 * call with nothing held. */
recap_status_t recap__sleep_offload_take(const recap__pool_t *pool, const char *call,
                                         recap__offload_t **out);
/* Copy back the blocks of pool still in use from off, and wait for the copies. */
recap_status_t recap__sleep_copy_back(const recap__pool_t *pool, const recap__offload_t *off);
/* Free off and hand its pinned buffer back, on a path that already failed (NULL: nothing). */
void recap__sleep_offload_drop(recap__offload_t *off);

#endif /* RECAP_ALLOC_SLEEP_OFFLOAD_H */
