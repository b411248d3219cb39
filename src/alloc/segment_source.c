/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment_source.c — pools whose classic segments come from elsewhere than the device's
 * raw_malloc (recap__segment_source_t): the NCCL layer makes a pool's segments NCCL memory
 * registered with a communicator. The allocator only asks the source it was given, so it does
 * not depend on the layer that installs it.
 *
 * Sources are few (one per pool the caller hands to NCCL) and kept for the process's life: a pool
 * id may capture again after its pool was deleted, and its segments must come from the same
 * place then.
 */
#include <inttypes.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "core/host.h"
#include "core/options.h"

typedef struct source_entry {
  recap_pool_id_t id;
  recap__segment_source_t source;
  struct source_entry *next;
} source_entry_t;

/* Guarded by the allocator's lock. */
static source_entry_t *sources;

const recap__segment_source_t *recap__segment_source_find(recap_pool_id_t id) {
  for (source_entry_t *e = sources; e; e = e->next)
    if (recap__pool_id_equal(e->id, id)) return &e->source;
  return NULL;
}

/* Whether pool id holds a segment on some device (lock held). */
static bool holds_segments(recap_pool_id_t id) {
  for (int dev = 0; dev < RECAP__MAX_DEVICES; dev++) {
    const recap__device_state_t *d = recap__alloc.devices[dev];
    for (const recap__pool_t *p = d ? d->private_pools : NULL; p; p = p->next)
      if (recap__pool_id_equal(p->id, id) && p->segment_count > 0) return true;
  }
  return false;
}

recap_status_t recap__pool_set_source(recap_pool_id_t id, const recap__segment_source_t *source,
                                      const char *function) {
  recap__options_t o;
  RECAP__CHECK(recap__options_get(&o));
  if (o.expandable_segments)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the expandable_segments option is on, and its segments are virtual "
                        "memory, which cannot come from NCCL; turn the option off first",
                        function);
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  source_entry_t *e = NULL;
  for (e = sources; e && !recap__pool_id_equal(e->id, id); e = e->next) {
  }
  if (holds_segments(id)) {
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "%s: pool {%" PRIu64 ",%" PRIu64
                     "} holds segments already; choose where its segments come from before its "
                     "first allocation (or after recap_empty_cache gave them all back)",
                     function, id.a, id.b);
  } else if (e) {
    e->source = *source;
  } else if ((e = recap__host_calloc(1, sizeof *e)) == NULL) {
    s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
  } else {
    e->id = id;
    e->source = *source;
    e->next = sources;
    sources = e;
  }
  recap__alloc_unlock();
  return s;
}
