/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * set_background.c — a graph set's helper thread (RECAP_SET_CAPTURE_BACKGROUND), and
 * recap_graph_set_wait / recap_graph_set_cancel.
 *
 * The queue is the members themselves: the helper captures the first PENDING member in the
 * set's capture order, marking it CAPTURING, and sleeps on the set's condition variable when
 * there is none. A member evicted and used again becomes PENDING (graph_set.c) and wakes it.
 * Captures run on the set's own stream in thread-local capture mode, so the caller's thread
 * may keep running the step eagerly, allocating and synchronising, meanwhile. The helper holds
 * the set's lock only to pick a member and to record what became of it.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/args.h"
#include "core/error.h"
#include "device/device.h"
#include "set/set_internal.h"

/* The first PENDING member in capture order, or set->count (lock held). */
static size_t next_pending(const recap_graph_set_t set) {
  for (size_t k = 0; k < set->count; k++)
    if (set->members[set->order[k]].state == RECAP_MEMBER_PENDING) return set->order[k];
  return set->count;
}

/* After a capture that took `took` seconds, wait until the helper's share of time
 * (options.background_share) is kept, or until the set stops (lock held). */
static void pause_for_share(recap_graph_set_t set, double took) {
  double share =
      set->options.background_share > 0 ? set->options.background_share : RECAP__SET_DEFAULT_SHARE;
  if (share >= 1 || took <= 0) return;
  double pause = took * (1 / share - 1);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
  double whole = floor(pause);
  until.tv_sec += (time_t)whole;
  until.tv_nsec += (long)((pause - whole) * 1e9);
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  while (!set->stop && pthread_cond_timedwait(&set->changed, &set->lock, &until) == 0) {
  }
}

static void *helper(void *arg) {
  recap_graph_set_t set = arg;
  /* The set's stream and pool belong to the device current at create. */
  recap_status_t device_status = recap__device()->set_device(set->device);
  pthread_mutex_lock(&set->lock);
  for (;;) {
    size_t i;
    while (!set->stop && (i = next_pending(set)) == set->count)
      pthread_cond_wait(&set->changed, &set->lock);
    if (set->stop) break;
    set->members[i].state = RECAP_MEMBER_CAPTURING;
    set->busy = true;
    pthread_mutex_unlock(&set->lock);
    double started = recap__set_now();
    if (device_status == RECAP_SUCCESS) {
      (void)recap__set_capture(set, i, RECAP_CAPTURE_MODE_THREAD_LOCAL);
    } else {
      /* The helper cannot reach the device: every member it takes fails, with that cause. */
      char message[sizeof set->members[i].message];
      snprintf(message, sizeof message, "size %zu: %s", set->members[i].bucket, recap_last_error());
      pthread_mutex_lock(&set->lock);
      set->members[i].state = RECAP_MEMBER_FAILED;
      set->members[i].status = device_status;
      memcpy(set->members[i].message, message, sizeof message);
      recap__set_note_progress(set);
      pthread_mutex_unlock(&set->lock);
    }
    pthread_mutex_lock(&set->lock);
    set->busy = false;
    pthread_cond_broadcast(&set->changed);
    pause_for_share(set, recap__set_now() - started);
  }
  pthread_mutex_unlock(&set->lock);
  return NULL;
}

recap_status_t recap__set_background_start(recap_graph_set_t set) {
  int e = pthread_create(&set->thread, NULL, helper, set);
  if (e != 0)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "recap_graph_set_create: the helper thread of a background set could not "
                        "start (pthread_create: %s)",
                        strerror(e));
  set->thread_started = true;
  return RECAP_SUCCESS;
}

/* PENDING members become CANCELLED (lock held). */
static void cancel_pending(recap_graph_set_t set) {
  for (size_t i = 0; i < set->count; i++)
    if (set->members[i].state == RECAP_MEMBER_PENDING)
      set->members[i].state = RECAP_MEMBER_CANCELLED;
  recap__set_note_progress(set);
}

void recap__set_background_stop(recap_graph_set_t set) {
  pthread_mutex_lock(&set->lock);
  set->stop = true;
  cancel_pending(set);
  pthread_cond_broadcast(&set->changed);
  pthread_mutex_unlock(&set->lock);
  pthread_join(set->thread, NULL);
  set->thread_started = false;
}

void recap__set_background_kick(recap_graph_set_t set) { pthread_cond_broadcast(&set->changed); }

recap_status_t recap_graph_set_wait(recap_graph_set_t set) {
  RECAP__CHECK(RECAP__HANDLE_CHECK(set, RECAP__SET_MAGIC, "recap_graph_set_wait", "set",
                                   "graph set", "recap_graph_set_create"));
  if (!set->thread_started) return RECAP_SUCCESS;
  pthread_mutex_lock(&set->lock);
  while (set->busy || next_pending(set) != set->count) pthread_cond_wait(&set->changed, &set->lock);
  pthread_mutex_unlock(&set->lock);
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_set_cancel(recap_graph_set_t set) {
  RECAP__CHECK(RECAP__HANDLE_CHECK(set, RECAP__SET_MAGIC, "recap_graph_set_cancel", "set",
                                   "graph set", "recap_graph_set_create"));
  if (!set->thread_started) return RECAP_SUCCESS;
  pthread_mutex_lock(&set->lock);
  cancel_pending(set);
  pthread_mutex_unlock(&set->lock);
  return RECAP_SUCCESS;
}
