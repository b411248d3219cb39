/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_policy.c — when a recapture tries cudaGraphExecUpdate, what its counters say, and the
 * replay-time measurements behind max_slowdown.
 *
 * The policy is a small state machine over recaptures: try an update unless the policy says
 * never, there is no executable, or a pause is under way; a pause of `retry_after` recaptures
 * begins after `max_failures` refusals in a row or when updated executables measured slower.
 *
 * Measurements never synchronise. A replay that is timed records an event before and after its
 * launch; the elapsed time is read at a later replay or recapture, once event_query says both
 * events completed. Samples collect per kind of executable (fresh, updated) until each has
 * measure_replays, then the medians are compared once; the next fresh instantiation starts a
 * new round. An executable's first launch also uploads it to the device, which its later
 * launches do not pay for: a timed first launch uploads it (graph_upload) before its `before`
 * event, so that the sample is a replay's time. A loop that replays each executable once and updates it at every recapture makes
 * updated samples only: once those are complete, the policy instantiates afresh itself
 * (POLICY_MEASURE) until the fresh side has its samples, at most measure_replays times a round.
 * Replays pay for all this only while `active` is set: one branch otherwise.
 *
 * The default policy (max_slowdown 0) checks executables of more than auto_check_nodes nodes
 * with the same timed launches in other rounds: the first replays after each fresh instantiation
 * are the baseline (FRESH samples), and after every auto_check_period changes (updates in place,
 * rebinds, parameter sets) a check takes UPDATED samples and compares their median with the
 * baseline's once. Slower by more than auto_check_slowdown, the executable is renewed: update.c
 * instantiates it afresh at the next change, or the next recapture does (POLICY_SLOWER).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "update/update_internal.h"

const char *recap_update_reason_name(recap_update_reason_t reason) {
  /* Indexed by the enum; the static assert keeps the table and the enum the same length. */
  static const char *const names[] = {
      "none",
      "topology_changed",
      "node_type_changed",
      "function_changed",
      "parameters_changed",
      "not_supported",
      "unsupported_function_change",
      "attributes_changed",
      "refused_other",
      "no_executable",
      "policy_never",
      "policy_failures",
      "policy_slower",
      "no_origin",
      "policy_measure",
  };
  _Static_assert(sizeof names / sizeof names[0] == RECAP_UPDATE_REASON_COUNT,
                 "one name per recap_update_reason_t");
  if ((unsigned)reason >= (unsigned)RECAP_UPDATE_REASON_COUNT) return "unknown";
  return names[reason];
}

enum {
  DEFAULT_RETRY_AFTER = 16,
  DEFAULT_MEASURE_REPLAYS = 8,
  DEFAULT_CHECK_NODES = 128,
  DEFAULT_CHECK_PERIOD = 64
};
#define DEFAULT_CHECK_SLOWDOWN 0.05

static unsigned retry_after(const recap__update_t *u) {
  return u->policy.retry_after ? u->policy.retry_after : DEFAULT_RETRY_AFTER;
}

static unsigned measure_replays(const recap__update_t *u) {
  return u->policy.measure_replays ? u->policy.measure_replays : DEFAULT_MEASURE_REPLAYS;
}

/* The default policy's check applies to the executable: the policy measures nothing itself,
 * the check is not turned off, and the executable has more nodes than the threshold. On an
 * H100 a chain of 1,000 kernels replayed 10% slower after 100 updates or rebinds than a fresh
 * instantiation, and chains of up to 128 nodes never were seen to (docs/update.md). */
static bool checks(const recap__update_t *u) {
  if (u->policy.max_slowdown > 0 || u->policy.auto_check_nodes < 0) return false;
  size_t threshold =
      u->policy.auto_check_nodes ? (size_t)u->policy.auto_check_nodes : DEFAULT_CHECK_NODES;
  return u->exec_nodes > threshold;
}

static uint64_t check_period(const recap__update_t *u) {
  return u->policy.auto_check_period ? u->policy.auto_check_period : DEFAULT_CHECK_PERIOD;
}

static double check_slowdown(const recap__update_t *u) {
  return u->policy.auto_check_slowdown > 0 ? u->policy.auto_check_slowdown : DEFAULT_CHECK_SLOWDOWN;
}

void recap__update_init(recap__update_t *u) {
  memset(u, 0, sizeof *u);
  pthread_mutex_init(&u->lock, NULL);
  atomic_init(&u->active, false);
  u->policy = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  u->stats = (recap_update_stats_t)RECAP_UPDATE_STATS_INIT;
  u->stats.last_node = SIZE_MAX;
}

/* ------------------------------------------------------------------------------------------
 * Measurements
 * ---------------------------------------------------------------------------------------- */

static void destroy_measurements(recap__update_t *u) {
  const recap__device_ops_t *dev = recap__device();
  for (unsigned i = 0; u->launches && i < 2 * u->wanted; i++) {
    if (u->launches[i].before) dev->event_destroy(u->launches[i].before);
    if (u->launches[i].after) dev->event_destroy(u->launches[i].after);
  }
  recap__host_free(u->launches);
  recap__host_free(u->samples[0]);
  recap__host_free(u->samples[1]);
  u->launches = NULL;
  u->samples[0] = u->samples[1] = NULL;
  u->sample_count[0] = u->sample_count[1] = 0;
  u->wanted = 0;
  u->measure_instantiations = 0;
  atomic_store_explicit(&u->active, false, memory_order_relaxed);
  u->compared = false;
  u->checking = false;
  u->changes = 0;
}

void recap__update_free(recap__update_t *u) {
  destroy_measurements(u);
  pthread_mutex_destroy(&u->lock);
}

void recap__update_forget(recap__update_t *u) {
  pthread_mutex_lock(&u->lock);
  destroy_measurements(u);
  u->pause_left = 0;
  u->exec_kind = RECAP__EXEC_FRESH;
  u->exec_nodes = 0;
  u->renew = false;
  u->stats = (recap_update_stats_t)RECAP_UPDATE_STATS_INIT;
  u->stats.last_node = SIZE_MAX;
  pthread_mutex_unlock(&u->lock);
}

void recap__update_stats_get(recap__update_t *u, recap_update_stats_t *stats) {
  pthread_mutex_lock(&u->lock);
  *stats = u->stats;
  pthread_mutex_unlock(&u->lock);
}

/* Make the arrays of a round of measure_replays samples per kind (events are made on first
 * use). False, logged, without host memory: the policy then measures nothing this round. */
static bool prepare_measurements(recap__update_t *u) {
  unsigned wanted = measure_replays(u);
  if (u->launches && u->wanted == wanted) return true;
  destroy_measurements(u);
  u->launches = recap__host_calloc(2 * (size_t)wanted, sizeof *u->launches);
  u->samples[0] = recap__host_calloc(wanted, sizeof(float));
  u->samples[1] = recap__host_calloc(wanted, sizeof(float));
  if (!u->launches || !u->samples[0] || !u->samples[1]) {
    destroy_measurements(u);
    RECAP__WARN("update policy: out of host memory; replays are not measured");
    return false;
  }
  u->wanted = wanted;
  return true;
}

/* Timed launches of kind in flight. */
static unsigned in_flight(const recap__update_t *u, recap__exec_kind_t kind) {
  unsigned n = 0;
  for (unsigned i = 0; u->launches && i < 2 * u->wanted; i++)
    n += u->launches[i].used && u->launches[i].kind == kind;
  return n;
}

/* Samples of kind read or on their way. */
static unsigned samples_taken(const recap__update_t *u, recap__exec_kind_t kind) {
  return u->sample_count[kind] + in_flight(u, kind);
}

/* The kind of sample a timed replay takes now: the executable's kind, or under the default
 * policy's check, FRESH for the baseline after the instantiation (however many changes it had
 * since: the slowdown seen comes after many) and UPDATED during a check. */
static recap__exec_kind_t sample_kind(const recap__update_t *u) {
  if (!checks(u)) return u->exec_kind;
  return u->checking ? RECAP__EXEC_UPDATED : RECAP__EXEC_FRESH;
}

/* Whether the current executable's replays should be timed. */
static bool wants_samples(const recap__update_t *u) {
  if (!u->launches || u->compared) return false;
  return samples_taken(u, sample_kind(u)) < u->wanted;
}

/* Whether the next recapture should instantiate afresh to take fresh samples: the updated side
 * has its samples (read or in flight), the fresh side has fewer, and this round has not spent
 * its measure_replays such instantiations. Without this, a loop that updates at every recapture
 * and replays once has one fresh sample, from its first capture, and never compares; the cap
 * bounds the cost when fresh replays cannot be timed (launched into another capture, or the
 * GPU still busy with earlier timed launches). */
static bool wants_fresh_executable(const recap__update_t *u) {
  if (!(u->policy.max_slowdown > 0) || !u->launches || u->compared) return false;
  return u->measure_instantiations < u->wanted &&
         samples_taken(u, RECAP__EXEC_UPDATED) >= u->wanted &&
         samples_taken(u, RECAP__EXEC_FRESH) < u->wanted;
}

static void update_active(recap__update_t *u) {
  bool active = u->launches && (wants_samples(u) || in_flight(u, RECAP__EXEC_FRESH) ||
                                in_flight(u, RECAP__EXEC_UPDATED));
  atomic_store_explicit(&u->active, active, memory_order_relaxed);
}

/* The executable changed (an update in place, a rebind, a parameter set): under the default
 * policy's check, the check begins after auto_check_period changes. With the lock held. */
static void changed(recap__update_t *u) {
  if (!checks(u) || !u->launches || u->checking || u->renew) return;
  if (++u->changes < check_period(u)) return;
  u->checking = true;
  u->sample_count[RECAP__EXEC_UPDATED] = 0;
  update_active(u);
}

void recap__update_count_rebind(recap__update_t *u, uint64_t sites) {
  pthread_mutex_lock(&u->lock);
  u->stats.rebinds++;
  u->stats.sites_patched += sites;
  changed(u);
  pthread_mutex_unlock(&u->lock);
}

void recap__update_count_patch(recap__update_t *u, recap__patch_kind_t kind, uint64_t nodes) {
  pthread_mutex_lock(&u->lock);
  switch (kind) {
    case RECAP__PATCH_PARAMS:
      u->stats.param_sets++;
      u->stats.param_node_sets += nodes;
      break;
    case RECAP__PATCH_ARG: u->stats.arg_sets++; break;
    case RECAP__PATCH_SHAPE: u->stats.shape_sets++; break;
  }
  changed(u);
  pthread_mutex_unlock(&u->lock);
}

static int compare_floats(const void *x, const void *y) {
  float a = *(const float *)x, b = *(const float *)y;
  return (a > b) - (a < b);
}

static double median(float *v, unsigned n) {
  qsort(v, n, sizeof *v, compare_floats);
  return n % 2 ? v[n / 2] : ((double)v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The default policy's check has its samples: compare them with the baseline (the samples after
 * the instantiation, as many as there are), and want a fresh instantiation if the executable
 * got slower by more than auto_check_slowdown. The check ends; the next one comes after another
 * auto_check_period changes. */
static void compare_check(recap__update_t *u) {
  if (!u->checking || u->sample_count[RECAP__EXEC_UPDATED] < u->wanted) return;
  u->checking = false;
  u->changes = 0;
  u->sample_count[RECAP__EXEC_UPDATED] = 0;
  unsigned n = u->sample_count[RECAP__EXEC_FRESH];
  if (!n) {
    RECAP__DEBUG("update policy: no replay after the instantiation was timed; nothing compared");
    return;
  }
  double fresh = median(u->samples[RECAP__EXEC_FRESH], n);
  double after = median(u->samples[RECAP__EXEC_UPDATED], u->wanted);
  u->stats.fresh_replay_ms = fresh;
  u->stats.updated_replay_ms = after;
  u->stats.auto_checks++;
  if (after > fresh * (1.0 + check_slowdown(u))) {
    RECAP__INFO(
        "update policy: after its changes the executable replays in %.4f ms against %.4f ms "
        "after its instantiation; it is instantiated afresh at its next change or recapture",
        after, fresh);
    u->renew = true;
  }
}

/* Both kinds have their samples: compare once, and pause updates if the updated executables
 * are slower by more than max_slowdown. */
static void compare(recap__update_t *u) {
  if (checks(u)) {
    compare_check(u);
    return;
  }
  if (u->compared || u->sample_count[0] < u->wanted || u->sample_count[1] < u->wanted) return;
  double fresh = median(u->samples[RECAP__EXEC_FRESH], u->wanted);
  double updated = median(u->samples[RECAP__EXEC_UPDATED], u->wanted);
  u->stats.fresh_replay_ms = fresh;
  u->stats.updated_replay_ms = updated;
  u->compared = true;
  if (updated > fresh * (1.0 + u->policy.max_slowdown)) {
    RECAP__INFO(
        "update policy: replays after updates take %.4f ms against %.4f ms after a fresh "
        "instantiation; the next %u recaptures instantiate afresh",
        updated, fresh, retry_after(u));
    u->pause_left = retry_after(u);
    u->pause_reason = RECAP_UPDATE_REASON_POLICY_SLOWER;
  }
}

/* Stop measuring for this round after a timing failure (logged; the caller's last error is
 * kept). */
static void give_up(recap__update_t *u, const char *what) {
  RECAP__WARN(
      "update policy: %s failed (%s); replays are not measured until the next fresh "
      "instantiation",
      what, recap_last_error());
  for (unsigned i = 0; i < 2 * u->wanted; i++) u->launches[i].used = false;
  u->compared = true;
}

/* recap__update_poll, with the lock held. */
static void poll(recap__update_t *u) {
  if (!u->launches) return;
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved;
  recap__error_save(&saved);
  for (unsigned i = 0; i < 2 * u->wanted; i++) {
    recap__timed_launch_t *t = &u->launches[i];
    if (!t->used) continue;
    bool before = false, after = false;
    float ms = 0;
    if (dev->event_query(t->before, &before) != RECAP_SUCCESS ||
        dev->event_query(t->after, &after) != RECAP_SUCCESS) {
      give_up(u, "reading a timed replay's events");
      break;
    }
    if (!before || !after) continue; /* not yet: a later replay or recapture reads it */
    if (dev->event_elapsed(t->before, t->after, &ms) != RECAP_SUCCESS) {
      give_up(u, "reading a timed replay's elapsed time");
      break;
    }
    t->used = false;
    if (u->sample_count[t->kind] < u->wanted) u->samples[t->kind][u->sample_count[t->kind]++] = ms;
  }
  compare(u);
  update_active(u);
  recap__error_restore(&saved);
}

void recap__update_poll(recap__update_t *u) {
  pthread_mutex_lock(&u->lock);
  poll(u);
  pthread_mutex_unlock(&u->lock);
}

/* A free slot with its two events made, or NULL (none free, or the events failed: logged). */
static recap__timed_launch_t *free_slot(recap__update_t *u) {
  const recap__device_ops_t *dev = recap__device();
  for (unsigned i = 0; i < 2 * u->wanted; i++) {
    recap__timed_launch_t *t = &u->launches[i];
    if (t->used) continue;
    if ((!t->before && dev->timing_event_create(&t->before) != RECAP_SUCCESS) ||
        (!t->after && dev->timing_event_create(&t->after) != RECAP_SUCCESS)) {
      give_up(u, "creating a timing event");
      return NULL;
    }
    return t;
  }
  return NULL; /* the GPU has not finished the timed launches yet: time a later one */
}

recap_status_t recap__update_launch(recap__update_t *u, recap_cuda_graph_exec_t exec,
                                    recap_stream_t stream) {
  const recap__device_ops_t *dev = recap__device();
  /* Timed launches of one graph from several threads are serialised: only while measuring. */
  pthread_mutex_lock(&u->lock);
  poll(u);
  recap__timed_launch_t *t = NULL;
  bool capturing = true; /* not known: nothing timed, needs_upload kept */
  if (wants_samples(u) || u->needs_upload) {
    recap__saved_error_t saved;
    recap__error_save(&saved);
    /* A launch into another capture becomes a node of that capture: nothing to time (an event
     * recorded there would belong to the capture too), nor is the executable uploaded. */
    recap__capture_status_t status = RECAP__CAPTURE_NONE;
    uint64_t id = 0;
    capturing = dev->stream_capture_info(stream, &status, &id) != RECAP_SUCCESS ||
                status != RECAP__CAPTURE_NONE;
    if (!capturing && wants_samples(u)) t = free_slot(u);
    /* Timed with its upload, the first replay of a fresh executable of 1,000 kernels took
     * 1.53 ms on an H200 against 0.80 ms for its later replays, and a loop that replays each
     * executable once would compare uploads, not replays. */
    if (t && u->needs_upload) {
      if (dev->graph_upload(exec, stream) == RECAP_SUCCESS) {
        u->needs_upload = false;
      } else {
        give_up(u, "uploading the executable before a timed replay");
        t = NULL;
      }
    }
    if (t && dev->event_record(t->before, stream) != RECAP_SUCCESS) {
      give_up(u, "recording a timing event");
      t = NULL;
    }
    recap__error_restore(&saved);
  }
  recap_status_t s = dev->graph_launch(exec, stream);
  /* Uploaded now, by graph_upload or by this launch itself (a failed launch may not have). */
  if (s == RECAP_SUCCESS && !capturing) u->needs_upload = false;
  if (t && s == RECAP_SUCCESS) {
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (dev->event_record(t->after, stream) == RECAP_SUCCESS) {
      t->kind = sample_kind(u);
      t->used = true;
    } else {
      give_up(u, "recording a timing event");
    }
    recap__error_restore(&saved);
  }
  update_active(u);
  pthread_mutex_unlock(&u->lock);
  return s;
}

/* A fresh executable under the default policy's check: a new baseline, no check under way. The
 * launches in flight timed the executable it replaced: dropped (their events are recorded
 * again). */
static void start_check(recap__update_t *u) {
  for (unsigned i = 0; i < 2 * u->wanted; i++) u->launches[i].used = false;
  u->sample_count[0] = u->sample_count[1] = 0;
  u->compared = false;
  u->checking = false;
  u->changes = 0;
  update_active(u);
}

/* recap__update_fresh, with the lock held. */
static void start_fresh(recap__update_t *u, size_t nodes) {
  u->exec_kind = RECAP__EXEC_FRESH;
  u->exec_nodes = nodes;
  u->needs_upload = true;
  u->renew = false;
  if (checks(u)) {
    if (prepare_measurements(u)) start_check(u);
    return;
  }
  if (!(u->policy.max_slowdown > 0)) {
    destroy_measurements(u); /* a smaller executable than the last one checked */
    return;
  }
  if (!prepare_measurements(u)) return;
  if (u->compared) {
    /* A new round: a new baseline, then new updates to compare with it. Launches still in
     * flight from the old round are read into the new round's samples of their kind (the
     * executables they timed were of that kind too). */
    u->sample_count[0] = u->sample_count[1] = 0;
    u->measure_instantiations = 0;
    u->compared = false;
  }
  update_active(u);
}

void recap__update_fresh(recap__update_t *u, size_t nodes) {
  pthread_mutex_lock(&u->lock);
  start_fresh(u, nodes);
  pthread_mutex_unlock(&u->lock);
}

bool recap__update_checks(recap__update_t *u) {
  pthread_mutex_lock(&u->lock);
  bool on = checks(u);
  pthread_mutex_unlock(&u->lock);
  return on;
}

bool recap__update_take_renewal(recap__update_t *u) {
  pthread_mutex_lock(&u->lock);
  bool renew = u->renew;
  u->renew = false;
  pthread_mutex_unlock(&u->lock);
  return renew;
}

void recap__update_count_renewal(recap__update_t *u) {
  pthread_mutex_lock(&u->lock);
  u->stats.instantiations++;
  u->stats.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER]++;
  pthread_mutex_unlock(&u->lock);
}

/* ------------------------------------------------------------------------------------------
 * Policy
 * ---------------------------------------------------------------------------------------- */

void recap__update_set_policy(recap__update_t *u, const recap_update_policy_t *policy) {
  pthread_mutex_lock(&u->lock);
  unsigned old_wanted = measure_replays(u);
  bool was_measuring = u->policy.max_slowdown > 0, was_checking = checks(u);
  u->policy = *policy;
  u->pause_left = 0;
  /* The measurements go on when they are of the same kind and size: a new max_slowdown, or a
   * new tolerance or period of the check, which keeps its baseline. */
  bool same = measure_replays(u) == old_wanted &&
              ((was_measuring && u->policy.max_slowdown > 0) || (was_checking && checks(u)));
  if (!same) {
    destroy_measurements(u);
    u->renew = false;
  }
  /* A policy set once the graph holds an executable measures from now on: its replays are
   * the baseline if it was instantiated afresh, else samples of an updated one. The default
   * policy's check takes its baseline from the executable as it is. */
  if (u->policy.max_slowdown > 0 && prepare_measurements(u)) update_active(u);
  if (checks(u) && !same && prepare_measurements(u)) start_check(u);
  pthread_mutex_unlock(&u->lock);
}

recap_update_reason_t recap__update_decide(recap__update_t *u, bool has_exec) {
  pthread_mutex_lock(&u->lock);
  recap_update_reason_t reason = RECAP_UPDATE_REASON_NONE;
  if (!has_exec)
    reason = RECAP_UPDATE_REASON_NO_EXECUTABLE;
  else if (u->policy.never_update)
    reason = RECAP_UPDATE_REASON_POLICY_NEVER;
  else if (u->pause_left)
    reason = u->pause_reason;
  else if (wants_fresh_executable(u))
    reason = RECAP_UPDATE_REASON_POLICY_MEASURE;
  else if (u->renew)
    reason = RECAP_UPDATE_REASON_POLICY_SLOWER;
  pthread_mutex_unlock(&u->lock);
  return reason;
}

/* A reason the driver gave (the enum's first reasons after NONE). */
static bool driver_reason(recap_update_reason_t reason) {
  return reason > RECAP_UPDATE_REASON_NONE && reason <= RECAP_UPDATE_REASON_REFUSED_OTHER;
}

void recap__update_record(recap__update_t *u, recap_update_reason_t decided,
                          recap_update_reason_t outcome, size_t node, bool instantiated,
                          size_t nodes, uint64_t reused, uint64_t fresh) {
  pthread_mutex_lock(&u->lock);
  recap_update_stats_t *st = &u->stats;
  st->recaptures++;
  st->pool_reused += reused;
  st->pool_new += fresh;
  st->last_reason = outcome;
  st->last_node = node;
  if (decided != RECAP_UPDATE_REASON_NONE && decided == u->pause_reason && u->pause_left)
    u->pause_left--;
  if (outcome == RECAP_UPDATE_REASON_NONE) {
    st->updates++;
    st->consecutive_failures = 0;
    u->exec_kind = RECAP__EXEC_UPDATED;
    u->needs_upload = true;
    changed(u);
    update_active(u);
  } else if (decided == RECAP_UPDATE_REASON_NONE && driver_reason(outcome)) {
    /* Refusals the driver gave when asked (not a reason recap knew before asking). */
    st->consecutive_failures++;
    if (u->policy.max_failures && st->consecutive_failures >= u->policy.max_failures) {
      RECAP__INFO(
          "update policy: %llu updates refused in a row (the last: %s); the next %u "
          "recaptures instantiate afresh",
          (unsigned long long)st->consecutive_failures, recap_update_reason_name(outcome),
          retry_after(u));
      u->pause_left = retry_after(u);
      u->pause_reason = RECAP_UPDATE_REASON_POLICY_FAILURES;
    }
  }
  if (instantiated) {
    st->instantiations++;
    st->by_reason[outcome]++;
    if (outcome == RECAP_UPDATE_REASON_POLICY_MEASURE) u->measure_instantiations++;
    start_fresh(u, nodes);
  }
  pthread_mutex_unlock(&u->lock);
}
