/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph_set.c — graph sets (recap/graph_set.h): create and destroy, the per-call choice of a
 * bucket and what runs for it (a replay, a capture first under LAZY, or the step eagerly),
 * eviction, and what a caller can read of a set and its members.
 *
 * run() keeps its own work small: one lock to read the bucket's state and count the call, then
 * the replay or the step outside the lock. The idle eviction it does costs one scan of the
 * members at most every evict_idle_seconds / 4 of wall time.
 */
#include <math.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "device/device.h"
#include "set/set_internal.h"

static recap_status_t check_set(recap_graph_set_t set, const char *function) {
  return RECAP__HANDLE_CHECK(set, RECAP__SET_MAGIC, function, "set", "graph set",
                             "recap_graph_set_create");
}

static const char *state_name(recap_member_state_t s) {
  switch (s) {
    case RECAP_MEMBER_PENDING: return "RECAP_MEMBER_PENDING";
    case RECAP_MEMBER_CAPTURING: return "RECAP_MEMBER_CAPTURING";
    case RECAP_MEMBER_READY: return "RECAP_MEMBER_READY";
    case RECAP_MEMBER_FAILED: return "RECAP_MEMBER_FAILED";
    case RECAP_MEMBER_OVER_BUDGET: return "RECAP_MEMBER_OVER_BUDGET";
    case RECAP_MEMBER_EVICTED: return "RECAP_MEMBER_EVICTED";
    case RECAP_MEMBER_CANCELLED: return "RECAP_MEMBER_CANCELLED";
    case RECAP_MEMBER_EAGER: return "RECAP_MEMBER_EAGER";
  }
  return "an unknown state";
}

/* ------------------------------------------------------------------------------------------
 * Create and destroy
 * ---------------------------------------------------------------------------------------- */

static recap_status_t check_options(const recap_graph_set_options_t *o) {
  static const char *const fn = "recap_graph_set_create";
  RECAP__ARG(o->capture >= RECAP_SET_CAPTURE_UPFRONT && o->capture <= RECAP_SET_CAPTURE_BACKGROUND,
             "%s: options.capture is %d, not one of RECAP_SET_CAPTURE_UPFRONT, "
             "RECAP_SET_CAPTURE_LAZY, RECAP_SET_CAPTURE_BACKGROUND",
             fn, (int)o->capture);
  RECAP__ARG(o->priority >= RECAP_SET_LARGEST_FIRST && o->priority <= RECAP_SET_AS_LISTED,
             "%s: options.priority is %d, not one of RECAP_SET_LARGEST_FIRST, "
             "RECAP_SET_SMALLEST_FIRST, RECAP_SET_AS_LISTED",
             fn, (int)o->priority);
  RECAP__ARG(o->overflow == RECAP_SET_OVERFLOW_EAGER || o->overflow == RECAP_SET_OVERFLOW_REFUSE,
             "%s: options.overflow is %d, not one of RECAP_SET_OVERFLOW_EAGER, "
             "RECAP_SET_OVERFLOW_REFUSE",
             fn, (int)o->overflow);
  RECAP__ARG(o->evict_idle_seconds >= 0 && isfinite(o->evict_idle_seconds),
             "%s: options.evict_idle_seconds is %g: give a finite number of seconds >= 0 (0: "
             "never evict)",
             fn, o->evict_idle_seconds);
  RECAP__ARG(o->background_share >= 0 && o->background_share <= 1,
             "%s: options.background_share is %g: give a share of time in (0, 1] (0: the default, "
             "%g)",
             fn, o->background_share, RECAP__SET_DEFAULT_SHARE);
  const recap_capture_options_t *c = &o->capture_options;
  RECAP__ARG(c->budget_bytes == 0,
             "%s: options.capture_options.budget_bytes is %llu: the set's budget governs its "
             "captures; set options.budget_bytes instead and leave this 0",
             fn, (unsigned long long)c->budget_bytes);
  RECAP__ARG(c->mode >= RECAP_CAPTURE_MODE_GLOBAL && c->mode <= RECAP_CAPTURE_MODE_RELAXED,
             "%s: options.capture_options.mode is %d, not one of RECAP_CAPTURE_MODE_GLOBAL, "
             "RECAP_CAPTURE_MODE_THREAD_LOCAL, RECAP_CAPTURE_MODE_RELAXED",
             fn, (int)c->mode);
  return RECAP_SUCCESS;
}

/* Free what a set holds (also a half-made one): background first, then graphs, pool, stream. */
static recap_status_t release_set(recap_graph_set_t set, bool mutex_made) {
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (set->thread_started) recap__set_background_stop(set);
  recap_status_t s = RECAP_SUCCESS, t;
  for (size_t i = 0; set->members && i < set->count; i++) {
    if (set->members[i].graph && (t = recap_graph_destroy(set->members[i].graph)) != RECAP_SUCCESS)
      s = t;
    set->members[i].graph = NULL;
  }
  if (set->holds_pool &&
      (t = recap__pool_release(set->device, set->capture_options.pool)) != RECAP_SUCCESS)
    s = t;
  if (set->stream && (t = recap__device()->stream_destroy(set->stream)) != RECAP_SUCCESS) s = t;
  if (mutex_made) {
    pthread_cond_destroy(&set->changed);
    pthread_mutex_destroy(&set->lock);
  }
  recap__host_free(set->members);
  recap__host_free(set->order);
  recap__set_params_free(set);
  set->magic = 0;
  recap__host_free(set);
  if (s == RECAP_SUCCESS) recap__error_restore(&saved);
  return s;
}

/* Hold a reference to the set's pool for the set's life, so that evicting every member (each
 * graph dropping its reference) does not make the pool's memory freeable: a pending route takes
 * the reference, and ending it at once keeps the reference alone. */
static recap_status_t hold_pool(recap_graph_set_t set) {
  recap_pool_id_t pool = set->capture_options.pool;
  recap_status_t s = recap__pool_route_reserve(set->device, pool);
  if (s != RECAP_SUCCESS) {
    /* The cause is the thread's last error: copied out first, since the new message is
     * written where it lies. */
    recap__saved_error_t cause;
    recap__error_save(&cause);
    return recap__error(s, "recap_graph_set_create: the set's pool {%llu,%llu} cannot be held: %s",
                        (unsigned long long)pool.a, (unsigned long long)pool.b, cause.message);
  }
  set->holds_pool = true;
  return recap__pool_route_end(set->device, pool);
}

recap_status_t recap_graph_set_create(recap_graph_set_t *out, recap_step_fn step, void *user_data,
                                      const recap_graph_set_options_t *options) {
  static const char *const fn = "recap_graph_set_create";
  RECAP__ARG(out != NULL, "%s: set is NULL", fn);
  *out = NULL;
  RECAP__ARG(step != NULL, "%s: step is NULL: pass the function that enqueues one size's work", fn);
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&o, options, recap_graph_set_options_t, capture_options, fn,
                                   "RECAP_GRAPH_SET_OPTIONS_INIT"));
  recap_capture_options_t capture = RECAP_CAPTURE_OPTIONS_INIT;
  RECAP__CHECK(RECAP__EMBEDDED_OPTIONS_COPY(&capture, &o.capture_options, recap_capture_options_t,
                                            mode, fn, "capture_options",
                                            "RECAP_CAPTURE_OPTIONS_INIT"));
  o.capture_options = capture;
  RECAP__CHECK(check_options(&o));
  size_t *sizes = NULL, *order = NULL, count = 0;
  RECAP__CHECK(recap__set_sizes_make(&o, &sizes, &order, &count));
  o.sizes = NULL;
  o.size_count = count;

  recap_graph_set_t set = recap__host_calloc(1, sizeof *set);
  recap__member_t *members = recap__host_calloc(count, sizeof *members);
  if (!set || !members) {
    recap__host_free(set);
    recap__host_free(members);
    recap__host_free(sizes);
    recap__host_free(order);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  set->magic = RECAP__SET_MAGIC;
  set->step = step;
  set->user_data = user_data;
  set->options = o;
  set->capture_options = o.capture_options;
  set->count = count;
  set->members = members;
  set->order = order;
  set->created = recap__set_now();
  set->last_idle_scan = set->created;
  set->disabled = !recap_graphs_enabled();
  for (size_t i = 0; i < count; i++) {
    members[i].bucket = sizes[i];
    members[i].state = set->disabled ? RECAP_MEMBER_EAGER : RECAP_MEMBER_PENDING;
  }
  recap__host_free(sizes);
  if (pthread_mutex_init(&set->lock, NULL) != 0) {
    recap__host_free(members);
    recap__host_free(order);
    recap__host_free(set);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: the set's mutex could not be made", fn);
  }
  if (pthread_cond_init(&set->changed, NULL) != 0) {
    pthread_mutex_destroy(&set->lock);
    recap__host_free(members);
    recap__host_free(order);
    recap__host_free(set);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "%s: the set's condition variable could not be made", fn);
  }
  if (set->disabled) {
    /* Nothing is captured: no pool, stream or thread. */
    set->capture_options.pool = (recap_pool_id_t){0, 0};
    *out = set;
    return RECAP_SUCCESS;
  }
  recap_status_t s;
  RECAP__CHECK_GOTO(recap__alloc_current_device(&set->device), s, fail);
  if (recap_pool_is_default(set->capture_options.pool))
    set->capture_options.pool = recap_pool_handle();
  RECAP__CHECK_GOTO(hold_pool(set), s, fail);
  RECAP__CHECK_GOTO(recap__device()->stream_create(&set->stream), s, fail);
  if (o.capture == RECAP_SET_CAPTURE_UPFRONT) {
    for (size_t k = 0; k < count; k++)
      (void)recap__set_capture(set, order[k], set->capture_options.mode);
  } else if (o.capture == RECAP_SET_CAPTURE_BACKGROUND) {
    RECAP__CHECK_GOTO(recap__set_background_start(set), s, fail);
  }
  *out = set;
  return RECAP_SUCCESS;
fail:;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  (void)release_set(set, true);
  return recap__error_restore(&saved);
}

recap_status_t recap_graph_set_destroy(recap_graph_set_t set) {
  if (!set) return RECAP_SUCCESS;
  RECAP__CHECK(check_set(set, "recap_graph_set_destroy"));
  return release_set(set, true);
}

/* ------------------------------------------------------------------------------------------
 * Calls
 * ---------------------------------------------------------------------------------------- */

/* The step run eagerly for size on the caller's stream. */
static recap_status_t eager(recap_graph_set_t set, size_t size, recap_stream_t stream) {
  recap_clear_last_error();
  recap_status_t s = recap__set_step(set, size, stream);
  if (s != RECAP_SUCCESS && recap_last_status() != s)
    recap__error(s,
                 "recap_graph_set_run: the step returned %s for size %zu (run eagerly) without "
                 "setting a message (recap_set_last_error)",
                 recap_status_name(s), size);
  return s;
}

/* Evict the members idle for evict_idle_seconds, but for `keep` (lock held): at most one scan
 * every evict_idle_seconds / 4. */
static void idle_scan(recap_graph_set_t set, size_t keep, double now) {
  double idle = set->options.evict_idle_seconds;
  if (idle <= 0 || now - set->last_idle_scan < idle / 4) return;
  set->last_idle_scan = now;
  for (size_t i = 0; i < set->count; i++)
    if (i != keep && set->members[i].state == RECAP_MEMBER_READY &&
        now - set->members[i].last_used >= idle)
      recap__set_evict_member(set, i);
}

recap_status_t recap_graph_set_run(recap_graph_set_t set, size_t n, recap_stream_t stream,
                                   size_t *padded, int *graphed) {
  RECAP__CHECK(check_set(set, "recap_graph_set_run"));
  RECAP__ARG(n != 0, "recap_graph_set_run: n is 0: a call runs at least one row (n >= 1)");
  if (padded) *padded = 0;
  if (graphed) *graphed = 0;
  size_t i = recap__set_bucket(set, n);
  if (i == set->count) {
    size_t largest = set->members[set->count - 1].bucket;
    if (set->options.overflow == RECAP_SET_OVERFLOW_REFUSE)
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "recap_graph_set_run: n = %zu is above the set's largest size %zu and "
                          "options.overflow is RECAP_SET_OVERFLOW_REFUSE; nothing ran (split the "
                          "call, or add a larger size)",
                          n, largest);
    pthread_mutex_lock(&set->lock);
    set->overflow_runs++;
    idle_scan(set, set->count, recap__set_now());
    pthread_mutex_unlock(&set->lock);
    if (padded) *padded = n;
    return eager(set, n, stream);
  }
  recap__member_t *m = &set->members[i];
  if (padded) *padded = m->bucket;
  double now = recap__set_now();
  /* What this call runs is decided in one look at the member: a capture finishing on the
   * helper thread meanwhile changes later calls, not this one. */
  recap_graph_t g = NULL;
  bool capture_here = false;
  pthread_mutex_lock(&set->lock);
  idle_scan(set, i, now);
  if (m->state == RECAP_MEMBER_READY) {
    /* The usual call: one critical section, then the replay. */
    g = m->graph;
    m->replays++;
    m->last_used = now;
    set->replays++;
    pthread_mutex_unlock(&set->lock);
    if (graphed) *graphed = 1;
    return recap_graph_replay(g, stream);
  } else if (m->state == RECAP_MEMBER_EVICTED &&
             set->options.capture == RECAP_SET_CAPTURE_BACKGROUND) {
    /* Queued for the helper; this call runs eagerly. */
    m->state = RECAP_MEMBER_PENDING;
    recap__set_background_kick(set);
  } else if ((m->state == RECAP_MEMBER_PENDING || m->state == RECAP_MEMBER_EVICTED) &&
             set->options.capture != RECAP_SET_CAPTURE_BACKGROUND) {
    capture_here = true;
    m->state = RECAP_MEMBER_CAPTURING;
  }
  pthread_mutex_unlock(&set->lock);
  if (capture_here) {
    /* No helper thread: nothing but this call changes the member. */
    recap_status_t s = recap__set_capture(set, i, set->capture_options.mode);
    if (s != RECAP_SUCCESS && m->state == RECAP_MEMBER_FAILED) return s;
    if (m->state == RECAP_MEMBER_READY) g = m->graph;
  }
  pthread_mutex_lock(&set->lock);
  if (g) {
    m->replays++;
    m->last_used = now;
    set->replays++;
  } else {
    m->eager_runs++;
    set->eager_runs++;
  }
  pthread_mutex_unlock(&set->lock);
  if (!g) return eager(set, m->bucket, stream);
  if (graphed) *graphed = 1;
  return recap_graph_replay(g, stream);
}

recap_status_t recap_graph_set_bucket(recap_graph_set_t set, size_t n, size_t *bucket) {
  RECAP__CHECK(check_set(set, "recap_graph_set_bucket"));
  RECAP__ARG(bucket != NULL, "recap_graph_set_bucket: bucket is NULL");
  RECAP__ARG(n != 0, "recap_graph_set_bucket: n is 0: a call runs at least one row (n >= 1)");
  size_t i = recap__set_bucket(set, n);
  *bucket = i == set->count ? n : set->members[i].bucket;
  return RECAP_SUCCESS;
}

/* A background capture queued or under way (lock held). */
static bool background_open(const recap_graph_set_t set) {
  if (!set->thread_started) return false;
  if (set->busy) return true;
  for (size_t i = 0; i < set->count; i++)
    if (set->members[i].state == RECAP_MEMBER_PENDING) return true;
  return false;
}

recap_status_t recap_graph_set_capture(recap_graph_set_t set, size_t size) {
  static const char *const fn = "recap_graph_set_capture";
  RECAP__CHECK(check_set(set, fn));
  size_t only = set->count;
  if (size != 0) {
    only = recap__set_find(set, size);
    if (only == set->count)
      return recap__error(RECAP_ERROR_NOT_FOUND,
                          "%s: the set holds no size %zu (recap_graph_set_sizes lists them)", fn,
                          size);
  }
  if (set->disabled) return RECAP_SUCCESS;
  pthread_mutex_lock(&set->lock);
  bool open = background_open(set);
  pthread_mutex_unlock(&set->lock);
  if (open)
    return recap__error(RECAP_ERROR_BUSY,
                        "%s: a background capture is pending or under way; call "
                        "recap_graph_set_wait (or recap_graph_set_cancel) first",
                        fn);
  recap_status_t first = RECAP_SUCCESS;
  recap__saved_error_t saved = {RECAP_SUCCESS, {0}};
  for (size_t k = 0; k < set->count; k++) {
    size_t i = set->order[k];
    if (only != set->count && i != only) continue;
    pthread_mutex_lock(&set->lock);
    bool take = set->members[i].state != RECAP_MEMBER_READY;
    if (take) set->members[i].state = RECAP_MEMBER_CAPTURING;
    pthread_mutex_unlock(&set->lock);
    if (!take) continue;
    recap_status_t s = recap__set_capture(set, i, set->capture_options.mode);
    if (s != RECAP_SUCCESS && first == RECAP_SUCCESS) {
      first = s;
      recap__error_save(&saved);
    }
  }
  if (first != RECAP_SUCCESS) return recap__error_restore(&saved);
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Eviction
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_graph_set_evict(recap_graph_set_t set, size_t size) {
  static const char *const fn = "recap_graph_set_evict";
  RECAP__CHECK(check_set(set, fn));
  size_t i = recap__set_find(set, size);
  if (i == set->count)
    return recap__error(RECAP_ERROR_NOT_FOUND,
                        "%s: the set holds no size %zu (recap_graph_set_sizes lists them)", fn,
                        size);
  pthread_mutex_lock(&set->lock);
  recap_member_state_t st = set->members[i].state;
  if (st == RECAP_MEMBER_READY) recap__set_evict_member(set, i);
  pthread_mutex_unlock(&set->lock);
  if (st != RECAP_MEMBER_READY)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: size %zu is %s, not RECAP_MEMBER_READY: only a ready member holds a "
                        "graph to evict",
                        fn, size, state_name(st));
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_set_evict_idle(recap_graph_set_t set, double idle_seconds,
                                          size_t *evicted) {
  static const char *const fn = "recap_graph_set_evict_idle";
  RECAP__CHECK(check_set(set, fn));
  RECAP__ARG(idle_seconds >= 0 && isfinite(idle_seconds),
             "%s: idle_seconds is %g: give a finite number of seconds >= 0", fn, idle_seconds);
  if (evicted) *evicted = 0;
  size_t count = 0;
  double now = recap__set_now();
  pthread_mutex_lock(&set->lock);
  for (size_t i = 0; i < set->count; i++) {
    if (set->members[i].state == RECAP_MEMBER_READY &&
        now - set->members[i].last_used >= idle_seconds) {
      recap__set_evict_member(set, i);
      count++;
    }
  }
  pthread_mutex_unlock(&set->lock);
  if (evicted) *evicted = count;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Reading a set
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_graph_set_sizes(recap_graph_set_t set, size_t *sizes, size_t capacity,
                                     size_t *count) {
  RECAP__CHECK(check_set(set, "recap_graph_set_sizes"));
  RECAP__ARG(count != NULL, "recap_graph_set_sizes: count is NULL");
  *count = set->count;
  for (size_t i = 0; sizes && i < capacity && i < set->count; i++)
    sizes[i] = set->members[i].bucket;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_set_member(recap_graph_set_t set, size_t size,
                                      recap_graph_set_member_t *info) {
  static const char *const fn = "recap_graph_set_member";
  RECAP__CHECK(check_set(set, fn));
  RECAP__ARG(info != NULL, "%s: info is NULL", fn);
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(info, recap_graph_set_member_t, nodes, fn, "info->size",
                                        "RECAP_GRAPH_SET_MEMBER_INIT"));
  size_t i = recap__set_find(set, size);
  if (i == set->count)
    return recap__error(RECAP_ERROR_NOT_FOUND,
                        "%s: the set holds no size %zu (recap_graph_set_sizes lists them)", fn,
                        size);
  pthread_mutex_lock(&set->lock);
  const recap__member_t *m = &set->members[i];
  info->bucket = m->bucket;
  info->state = m->state;
  info->status = m->status;
  memcpy(info->message, m->message, sizeof info->message);
  info->graph = m->state == RECAP_MEMBER_READY ? m->graph : NULL;
  info->replays = m->replays;
  info->eager_runs = m->eager_runs;
  info->captures = m->captures;
  info->capture_seconds = m->capture_seconds;
  info->exec_bytes = m->state == RECAP_MEMBER_READY ? m->exec_bytes : 0;
  info->nodes = m->state == RECAP_MEMBER_READY ? m->nodes : 0;
  pthread_mutex_unlock(&set->lock);
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_set_info(recap_graph_set_t set, recap_graph_set_info_t *info) {
  static const char *const fn = "recap_graph_set_info";
  RECAP__CHECK(check_set(set, fn));
  RECAP__ARG(info != NULL, "%s: info is NULL", fn);
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(info, recap_graph_set_info_t, all_ready_seconds, fn,
                                        "info->size", "RECAP_GRAPH_SET_INFO_INIT"));
  int64_t reserved = recap__set_pool_reserved(set);
  recap_graph_set_info_t out;
  memset(&out, 0, sizeof out);
  out.size = sizeof out;
  out.members = set->count;
  out.pool = set->capture_options.pool;
  out.pool_reserved_bytes = reserved;
  out.budget_bytes = set->options.budget_bytes;
  pthread_mutex_lock(&set->lock);
  for (size_t i = 0; i < set->count; i++) {
    switch (set->members[i].state) {
      case RECAP_MEMBER_READY: out.ready++; break;
      case RECAP_MEMBER_PENDING: out.pending++; break;
      case RECAP_MEMBER_CAPTURING: out.capturing++; break;
      case RECAP_MEMBER_FAILED: out.failed++; break;
      case RECAP_MEMBER_OVER_BUDGET: out.over_budget++; break;
      case RECAP_MEMBER_EVICTED: out.evicted++; break;
      case RECAP_MEMBER_CANCELLED: out.cancelled++; break;
      case RECAP_MEMBER_EAGER: break;
    }
  }
  out.exec_bytes = recap__set_exec_sum(set);
  out.replays = set->replays;
  out.eager_runs = set->eager_runs;
  out.overflow_runs = set->overflow_runs;
  out.evictions = set->evictions;
  out.first_ready_seconds = set->first_ready;
  out.all_ready_seconds = set->all_ready;
  pthread_mutex_unlock(&set->lock);
  *info = out;
  return RECAP_SUCCESS;
}
