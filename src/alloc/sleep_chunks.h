/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep_chunks.h — the physical chunks of a pool's VMM segments across a sleep and a wake
 * (sleep_chunks.c). Lock held, the pool's device current.
 */
#ifndef RECAP_ALLOC_SLEEP_CHUNKS_H
#define RECAP_ALLOC_SLEEP_CHUNKS_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/state.h"
#include "core/error.h"
#include "recap/core.h"

/* The unmaps of a sleep, each chunk unmapped marked held; on a failure rolled back (the pool
 * stays awake) or, when the roll-back fails too, carried forward (*forward: the pool sleeps). */
recap_status_t recap__sleep_unmap_all(recap__pool_t *pool, bool offloaded, const char *call,
                                      bool *forward);
/* Release the handles of seg's unmapped chunks; those whose release fails stay listed, counted
 * in *failed and *failed_bytes (*first: the first failure's error). */
void recap__sleep_release_handles(recap__segment_t *seg, int *failed, size_t *failed_bytes,
                                  recap__saved_error_t *first);
/* Note what seg has mapped, for the wake (before the first unmap); false without host memory. */
bool recap__sleep_runs_take(recap__segment_t *seg);
/* The chunks a wake maps for seg, and room for them in its chunk list. */
size_t recap__sleep_wake_chunk_count(const recap__segment_t *seg);
bool recap__sleep_reserve_chunks(recap__segment_t *seg, size_t needed);
/* Map a fresh chunk of size bytes at offset of seg and list it. */
recap_status_t recap__sleep_map_fresh(recap__segment_t *seg, size_t offset, size_t size);
/* Give back what a failed wake mapped; *left and *left_bytes count what could not be. */
void recap__sleep_wake_undo(recap__pool_t *pool, int *left, size_t *left_bytes);

#endif /* RECAP_ALLOC_SLEEP_CHUNKS_H */
