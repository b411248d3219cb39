/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * set_capture.c — capturing one member of a graph set: a graph, its capture on the set's
 * stream into the set's pool under the set's budget, the caller's step, the end, and the
 * record: READY with its executable's bytes and node count, FAILED with the status and the
 * message that say why, or OVER_BUDGET with the bytes by which it would exceed the budget.
 *
 * The budget bounds the pool's reserved bytes plus the READY members' executables. A capture
 * runs with the capture option budget_bytes set to what the executables leave of it, so the
 * allocator refuses a new segment that would take the pool past it (before any device call);
 * once a capture succeeded, its own executable is counted too, and a member whose executable
 * does not fit is thrown away again. A capture that fails is always ended (or thrown away by
 * destroying its graph), so the set's stream never stays capturing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "graph/graph_internal.h"
#include "recap/memory.h"
#include "set/set_internal.h"

double recap__set_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int64_t recap__set_exec_sum(const recap_graph_set_t set) {
  int64_t sum = 0;
  for (size_t i = 0; i < set->count; i++)
    if (set->members[i].state == RECAP_MEMBER_READY && set->members[i].exec_bytes > 0)
      sum += set->members[i].exec_bytes;
  return sum;
}

int64_t recap__set_pool_reserved(const recap_graph_set_t set) {
  int64_t reserved = 0, allocated = 0;
  if (!set->holds_pool ||
      !recap__pool_bytes(set->device, set->capture_options.pool, &reserved, &allocated))
    return 0;
  return reserved;
}

void recap__set_note_progress(recap_graph_set_t set) {
  size_t ready = 0, open = 0;
  for (size_t i = 0; i < set->count; i++) {
    recap_member_state_t st = set->members[i].state;
    ready += st == RECAP_MEMBER_READY;
    open += st == RECAP_MEMBER_PENDING || st == RECAP_MEMBER_CAPTURING;
  }
  double since = recap__set_now() - set->created;
  /* A time of 0 reads "not yet": a set made and captured within the clock's step still says
   * it happened. */
  if (since <= 0) since = 1e-9;
  if (ready && set->first_ready == 0) set->first_ready = since;
  if (!open && set->all_ready == 0) set->all_ready = since;
}

/* Destroy g, keeping the thread's last error: it says why g goes, not what its destroy did. */
static void destroy_keeping_error(recap_graph_t g) {
  recap__saved_error_t saved;
  recap__error_save(&saved);
  (void)recap_graph_destroy(g);
  recap__error_restore(&saved);
}

void recap__set_evict_member(recap_graph_set_t set, size_t i) {
  recap__member_t *m = &set->members[i];
  destroy_keeping_error(m->graph);
  m->graph = NULL;
  m->exec_bytes = 0;
  m->nodes = 0;
  m->state = RECAP_MEMBER_EVICTED;
  set->evictions++;
}

/* The member's record of a failure: state, status, and "size N: " + the thread's last error
 * (which the caller has set), kept as the thread's last error too. */
static recap_status_t record(recap_graph_set_t set, size_t i, recap_member_state_t state,
                             recap_status_t status) {
  recap__member_t *m = &set->members[i];
  char message[sizeof m->message];
  snprintf(message, sizeof message, "size %zu: %s", m->bucket, recap_last_error());
  pthread_mutex_lock(&set->lock);
  m->state = state;
  m->status = status;
  memcpy(m->message, message, sizeof message);
  recap__set_note_progress(set);
  pthread_cond_broadcast(&set->changed);
  pthread_mutex_unlock(&set->lock);
  return recap__error(status, "%s", message);
}

/* The budget's refusal during the capture, in the set's terms: the pool's budget was what the
 * READY executables left of the set's, so the excess is the same. */
static void budget_message(recap_graph_set_t set, const recap__capture_result_t *r,
                           int64_t exec_sum) {
  uint64_t over = (uint64_t)r->first.reserved + r->first.segment - r->first.budget;
  recap__error(RECAP_ERROR_OUT_OF_MEMORY,
               "the set's budget of %" PRIu64 " bytes would be exceeded by %" PRIu64
               " bytes: a recap_malloc of %zu bytes needed a new segment of %zu bytes, with "
               "the pool at %" PRId64 " bytes and the ready members' executables at %" PRId64
               " bytes; the size runs eagerly",
               set->options.budget_bytes, over, r->first.request, r->first.segment,
               r->first.reserved, exec_sum);
}

/* The step failed during the capture: say so where the step did not. */
static void step_message(recap_status_t s) {
  if (recap_last_status() != s)
    recap__error(s,
                 "the step returned %s during the capture without setting a message "
                 "(recap_set_last_error)",
                 recap_status_name(s));
}

recap_status_t recap__set_capture(recap_graph_set_t set, size_t i, recap_capture_mode_t mode) {
  recap__member_t *m = &set->members[i];
  const uint64_t budget = set->options.budget_bytes;
  double start = recap__set_now();
  pthread_mutex_lock(&set->lock);
  int64_t exec_sum = recap__set_exec_sum(set);
  pthread_mutex_unlock(&set->lock);
  int64_t reserved = recap__set_pool_reserved(set);
  recap_capture_options_t opts = set->capture_options;
  opts.mode = mode;
  opts.budget_bytes = 0;
  if (budget) {
    if ((uint64_t)exec_sum >= budget || (uint64_t)(exec_sum + reserved) > budget) {
      /* Nothing is left for this size: its capture would need room for an executable at
       * least. */
      uint64_t held = (uint64_t)(exec_sum + reserved);
      recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                   "the set's budget of %" PRIu64 " bytes is taken already (%s %" PRIu64
                   " bytes): the pool holds %" PRId64
                   " bytes and the ready members' executables %" PRId64
                   " bytes; the size runs eagerly",
                   budget, held > budget ? "exceeded by" : "left:",
                   held > budget ? held - budget : budget - held, reserved, exec_sum);
      return record(set, i, RECAP_MEMBER_OVER_BUDGET, RECAP_ERROR_OUT_OF_MEMORY);
    }
    opts.budget_bytes = budget - (uint64_t)exec_sum;
  }
  recap_graph_t g = NULL;
  recap_status_t s = recap_graph_create(&g, 0);
  if (s != RECAP_SUCCESS) return record(set, i, RECAP_MEMBER_FAILED, s);
  s = recap_graph_capture_begin(g, &opts, set->stream);
  if (s != RECAP_SUCCESS) {
    destroy_keeping_error(g);
    return record(set, i, RECAP_MEMBER_FAILED, s);
  }
  /* A run inside another capture embeds the member's graph, which copies its template. */
  g->keep_template = true;
  recap_clear_last_error();
  s = recap__set_step(set, m->bucket, set->stream);
  if (s != RECAP_SUCCESS) step_message(s);
  /* A refusal of the budget makes this an OVER_BUDGET member whatever the step did with it. */
  recap__capture_result_t result;
  recap__graph_capture_result(g, &result);
  if (s == RECAP_SUCCESS && !result.refusals) s = recap_graph_capture_end(g);
  if (result.refusals) {
    budget_message(set, &result, exec_sum);
    s = RECAP_ERROR_OUT_OF_MEMORY;
  }
  if (s != RECAP_SUCCESS) {
    /* Destroying the graph throws away a capture still under way (the step failed, or the end
     * was refused), so the stream does not stay capturing; the cause stays the last error. */
    destroy_keeping_error(g);
    return record(set, i, result.refusals ? RECAP_MEMBER_OVER_BUDGET : RECAP_MEMBER_FAILED, s);
  }
  recap_graph_memory_t mem = RECAP_GRAPH_MEMORY_INIT;
  s = recap_graph_memory(g, &mem);
  if (s != RECAP_SUCCESS) {
    destroy_keeping_error(g);
    return record(set, i, RECAP_MEMBER_FAILED, s);
  }
  pthread_mutex_lock(&set->lock);
  exec_sum = recap__set_exec_sum(set);
  pthread_mutex_unlock(&set->lock);
  /* An executable not measured (no budget, the option measure_exec_memory off) counts as
   * nothing; the member reports it as its graph does (-1). */
  int64_t exec_bytes = mem.exec_bytes > 0 ? mem.exec_bytes : 0;
  if (budget && (uint64_t)(mem.pool_reserved_bytes + exec_sum + exec_bytes) > budget) {
    uint64_t over = (uint64_t)(mem.pool_reserved_bytes + exec_sum + exec_bytes) - budget;
    (void)recap_graph_destroy(g);
    recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                 "its executable (%" PRId64 " bytes) would take the set past its budget of %" PRIu64
                 " bytes by %" PRIu64 " bytes (the pool holds %" PRId64
                 " bytes, the ready members' executables %" PRId64 "); the size runs eagerly",
                 mem.exec_bytes, budget, over, mem.pool_reserved_bytes, exec_sum);
    return record(set, i, RECAP_MEMBER_OVER_BUDGET, RECAP_ERROR_OUT_OF_MEMORY);
  }
  double now = recap__set_now();
  pthread_mutex_lock(&set->lock);
  m->graph = g;
  m->state = RECAP_MEMBER_READY;
  m->status = RECAP_SUCCESS;
  m->message[0] = '\0';
  m->captures++;
  m->capture_seconds = now - start;
  m->exec_bytes = mem.exec_bytes;
  m->nodes = mem.nodes;
  m->last_used = now;
  recap__set_note_progress(set);
  pthread_cond_broadcast(&set->changed);
  pthread_mutex_unlock(&set->lock);
  return RECAP_SUCCESS;
}
