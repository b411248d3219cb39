/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sweep_util.h — what the fault sweeps (test_stress_faults, test_host_faults) share: the record
 * of a workload run's first failure, the STEP that records every step of the workload and runs
 * the allocator's checker after it, the workload's graphed-callable part and the end of its
 * cleanup, and the check that nothing is left after it.
 *
 * Include after fake_util.h. Every helper is static inline.
 */
#ifndef RECAP_TEST_SWEEP_UTIL_H
#define RECAP_TEST_SWEEP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "graph/registry.h"
#include "fake_util.h"
#include "recap.h"
#include "capture_util.h"

/* The first failure of a run: its status and message, and where it happened. */
typedef struct outcome {
  recap_status_t status;
  char message[1024];
  char where[128];
  char checker[1024]; /* the first checker failure after a step, if any */
} outcome_t;

/* Record a step's status; true when it succeeded. The checker runs after every step, with the
 * sweep's fault still armed: it must work without the calls that fail. */
static inline bool step_at(outcome_t *o, recap_status_t s, const char *where) {
  if (s != RECAP_SUCCESS && o->status == RECAP_SUCCESS) {
    o->status = s;
    snprintf(o->message, sizeof o->message, "%s", recap_last_error());
    snprintf(o->where, sizeof o->where, "%s", where);
  }
  if (!o->checker[0] && recap_memory_check() != RECAP_SUCCESS)
    snprintf(o->checker, sizeof o->checker, "after %s: %s", where, recap_last_error());
  return s == RECAP_SUCCESS;
}
#define STEP(o, expr) step_at((o), (expr), #expr)

/* A graphed callable of `forward` and plain_backward (fake_util.h) on one input that requires
 * its gradient: created into *h, run forward and backward, then forward again in the other
 * mode (eagerly). The caller destroys *h. */
static inline void sweep_graphed(outcome_t *o, recap_graphed_t *h, recap_stream_t s,
                                 recap_forward_fn forward) {
  static float x[256], gx[256];
  static const int requires_grad[1] = {1};
  recap_buffer_t in[1] = {{x, sizeof x}}, grad[1] = {{gx, sizeof gx}};
  recap_callable_desc_t desc = one_input_callable(forward, plain_backward, in, requires_grad);
  recap_graphed_options_t gopts = RECAP_GRAPHED_OPTIONS_INIT;
  gopts.warmup_iters = 1;
  if (STEP(o, recap_graphed_create(h, &desc, 1, &gopts))) {
    const recap_buffer_t *outs = NULL, *grads = NULL;
    if (STEP(o, recap_graphed_forward(*h, 1, in, s, &outs)))
      STEP(o, recap_graphed_backward(*h, grad, s, &grads));
    STEP(o, recap_graphed_forward(*h, 0, in, s, &outs));
  }
}

/* The middle of a workload's cleanup: each of the graphs destroyed, then each block still held
 * (not NULL) freed, a STEP each, named by its place in the lists. */
static inline void sweep_release(outcome_t *o, const recap_graph_t *graphs, size_t graph_count,
                                 void *const *blocks, size_t block_count) {
  char where[64];
  for (size_t i = 0; i < graph_count; i++) {
    snprintf(where, sizeof where, "recap_graph_destroy(cleanup graph %zu)", i + 1);
    step_at(o, recap_graph_destroy(graphs[i]), where);
  }
  for (size_t i = 0; i < block_count; i++) {
    if (!blocks[i]) continue;
    snprintf(where, sizeof where, "recap_free(cleanup block %zu)", i + 1);
    step_at(o, recap_free(blocks[i]), where);
  }
}

/* The end of a workload's cleanup: its generator destroyed, the work of its two streams and of
 * every other stream done, and the allocator's cache emptied; when that fails (a VMM segment's
 * unmap or release failed and kept its chunk), once more, as a caller would. */
static inline void sweep_finish(outcome_t *o, recap_generator_t gen, recap_stream_t s1,
                                recap_stream_t s2) {
  STEP(o, recap_generator_destroy(gen));
  recap__fake_stream_complete(s1);
  recap__fake_stream_complete(s2);
  recap__fake_stream_complete(NULL);
  if (!STEP(o, recap_empty_cache())) STEP(o, recap_empty_cache());
}

/* Nothing left on the device once a workload cleaned up: no capture registered, no device
 * memory, graph, executable, pending event or event outside the allocator's cache, and no block
 * or reserved byte counted; with deferred_too, no block of the allocator waiting for its events
 * either. Returns what is wrong, or NULL. */
static inline const char *sweep_leftovers(bool deferred_too) {
  static char why[512];
  if (recap__registry_count() != 0) return "a capture is still registered";
  if (recap__fake_now().bytes_in_use[0] != 0) {
    snprintf(why, sizeof why, "%zu bytes of device memory still held",
             recap__fake_now().bytes_in_use[0]);
    return why;
  }
  if (recap__fake_now().live_graphs || recap__fake_now().live_execs) {
    snprintf(why, sizeof why, "%lld graphs, %lld executables alive",
             (long long)recap__fake_now().live_graphs, (long long)recap__fake_now().live_execs);
    return why;
  }
  const recap__device_state_t *d = recap__alloc.devices[0];
  int64_t cached = d ? (int64_t)d->spare_count : 0;
  size_t pending = d ? d->pending_count : 0, deferred = d ? d->deferred_count : 0;
  if (pending || (deferred_too && deferred) || recap__fake_now().live_events != cached) {
    snprintf(why, sizeof why,
             "%lld events alive, %lld in the allocator's cache, %zu pending, %zu deferred",
             (long long)recap__fake_now().live_events, (long long)cached, pending, deferred);
    return why;
  }
  recap_memory_stats_t s = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(0, &s) != RECAP_SUCCESS) return "recap_memory_stats failed";
  if (s.allocation[RECAP_STAT_ALL].current || s.reserved_bytes[RECAP_STAT_ALL].current) {
    snprintf(why, sizeof why, "%lld blocks, %lld reserved bytes still counted",
             (long long)s.allocation[RECAP_STAT_ALL].current,
             (long long)s.reserved_bytes[RECAP_STAT_ALL].current);
    return why;
  }
  return NULL;
}

#endif
