/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sites.c — allocation sites, for the input-liveness checks' messages (RECAP_LIVENESS_DEBUG):
 * the switch, and the lookup of a block's latest free in the ring of recent frees.
 *
 * recap_malloc and recap_free (allocator.c) record the sites while the switch is on; the read
 * of the switch is inline in sites.h, so the hot path makes no call for it.
 */
#include "alloc/alloc_lock.h"
#include "alloc/sites.h"
#include "core/env.h"

/* RECAP_LIVENESS_DEBUG, which code overrides (core/env.h). */
void recap__alloc_sites_enable(int enabled) {
  recap__env_set(RECAP__ENV_LIVENESS_DEBUG, enabled < 0 ? -1 : enabled != 0);
}

/* The ring holds the latest RECAP__FREE_HISTORY frees; search it from the newest back. */
bool recap__alloc_free_record(const void *base, uint64_t generation, recap__free_record_t *out) {
  bool found = false;
  recap__alloc_lock();
  if (recap__alloc.freed) {
    size_t kept = recap__alloc.freed_next < RECAP__FREE_HISTORY ? recap__alloc.freed_next
                                                                : RECAP__FREE_HISTORY;
    for (size_t k = 1; k <= kept && !found; k++) {
      const recap__free_record_t *r =
          &recap__alloc.freed[(recap__alloc.freed_next - k) % RECAP__FREE_HISTORY];
      if (r->base == base && r->generation == generation) {
        *out = *r;
        found = true;
      }
    }
  }
  recap__alloc_unlock();
  return found;
}
