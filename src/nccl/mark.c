/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mark.c — the replay mark of a graph that recorded collectives: an event that the graph's own
 * executable records at the end of every launch (an event-record node after the template's
 * sinks, added by collectives.c when the capture ends), shared by the graph's record and by
 * every communicator whose latest replay was one of the graph's (policy.c).
 *
 * A communicator may still point at a graph's mark after the graph is gone, so the mark counts
 * its holders and destroys its event with the last. The graph's executable never outlives its
 * record's reference: graph.c destroys the executable before it releases its hooks.
 */
#include <stdatomic.h>

#include "core/error.h"
#include "core/host.h"
#include "device/device.h"
#include "nccl/nccl_internal.h"

struct recap__nccl_mark {
  recap__event_t event;
  atomic_uint refs;
};

recap_status_t recap__nccl_mark_create(recap__nccl_mark_t **mark) {
  *mark = NULL;
  recap__nccl_mark_t *m = recap__host_calloc(1, sizeof *m);
  if (!m)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "recap_graph_capture_end: out of host memory for the replay mark of a "
                        "graph that recorded collectives");
  recap_status_t s = recap__device()->event_create(&m->event);
  if (s != RECAP_SUCCESS) {
    recap__host_free(m);
    return s;
  }
  atomic_init(&m->refs, 1);
  *mark = m;
  return RECAP_SUCCESS;
}

recap__event_t recap__nccl_mark_event(const recap__nccl_mark_t *mark) { return mark->event; }

void recap__nccl_mark_ref(recap__nccl_mark_t *mark) {
  atomic_fetch_add_explicit(&mark->refs, 1, memory_order_relaxed);
}

void recap__nccl_mark_unref(recap__nccl_mark_t *mark) {
  if (!mark || atomic_fetch_sub_explicit(&mark->refs, 1, memory_order_acq_rel) != 1) return;
  /* CUDA releases an event whose record is pending once the record completes; a failure here
   * leaves nothing to do and is no caller's failure. */
  recap__saved_error_t saved;
  recap__error_save(&saved);
  (void)recap__device()->event_destroy(mark->event);
  recap__error_restore(&saved);
  recap__host_free(mark);
}
