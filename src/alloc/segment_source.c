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
#include "alloc/segment_source.h"
#include "alloc/state.h"
#include "core/error.h"
#include "core/host.h"

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

recap_status_t recap__segment_source_put(recap_pool_id_t id, const recap__segment_source_t *source,
                                         const char *function) {
  for (source_entry_t *e = sources; e; e = e->next)
    if (recap__pool_id_equal(e->id, id)) {
      e->source = *source;
      return RECAP_SUCCESS;
    }
  source_entry_t *e = recap__host_calloc(1, sizeof *e);
  if (!e) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", function);
  e->id = id;
  e->source = *source;
  e->next = sources;
  sources = e;
  return RECAP_SUCCESS;
}
