/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sites.h — allocation sites for the liveness messages (sites.c; the ring of frees is kept by
 * allocator.c).
 */
#ifndef RECAP_ALLOC_SITES_H
#define RECAP_ALLOC_SITES_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/state.h"
#include "core/env.h"

/* Allocation sites (RECAP_LIVENESS_DEBUG=1, or recap__alloc_sites_enable(1)): recap_malloc
 * records the return address of its caller in the block, and recap_free keeps the latest frees
 * (RECAP__FREE_HISTORY of them) with both sites. enable(-1) goes back to the environment. */
enum { RECAP__FREE_HISTORY = 4096 };
void recap__alloc_sites_enable(int enabled);
/* Inline: recap_malloc and recap_free read it on every call. */
static inline bool recap__alloc_sites_enabled(void) {
  return recap__env_int(RECAP__ENV_LIVENESS_DEBUG) > 0;
}
/* The latest free of the block that started at base with that generation, if still kept. */
bool recap__alloc_free_record(const void *base, uint64_t generation, recap__free_record_t *out);

#endif /* RECAP_ALLOC_SITES_H */
