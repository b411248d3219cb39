/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stress_util.h — what the multi-threaded stress tests share: a deterministic stream of random
 * numbers per thread, the first failure of any thread, kept until the test's own thread fails
 * with it after the join (cmocka's checks may only be called from the test's own thread), and a
 * barrier that a failing thread can break.
 * Include it after harness.h.
 */
#ifndef RECAP_TEST_STRESS_UTIL_H
#define RECAP_TEST_STRESS_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdatomic.h>

#include "recap.h"

/* xorshift64*: a deterministic stream of numbers per thread. */
static inline uint64_t next_random(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static pthread_mutex_t thread_failure_lock = PTHREAD_MUTEX_INITIALIZER;
static char thread_failure[1024];

/* Keeps the message unless a thread failed before. */
static inline void thread_fail(const char *fmt, ...) {
  pthread_mutex_lock(&thread_failure_lock);
  if (!thread_failure[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_failure, sizeof thread_failure, fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&thread_failure_lock);
}

/* Keeps, as thread_fail does, a call of a worker that failed: its expression, status and the
 * library's message, and the round it ran in where round >= 0. */
static inline void thread_fail_call(const char *expr, recap_status_t status, int round) {
  if (round >= 0)
    thread_fail("%s returned %s: %s (round %d)", expr, recap_status_name(status),
                recap_last_error(), round);
  else
    thread_fail("%s returned %s: %s", expr, recap_status_name(status), recap_last_error());
}

/* In a worker with an `out:` label: a call that must succeed, else thread_fail_call and out. */
#define THREAD_OK(expr, round)                   \
  do {                                           \
    recap_status_t t_ok_s_ = (expr);             \
    if (t_ok_s_ != RECAP_SUCCESS) {              \
      thread_fail_call(#expr, t_ok_s_, (round)); \
      goto out;                                  \
    }                                            \
  } while (0)

/* A log callback that prints nothing and counts the messages in the _Atomic int user_data
 * points at, where it is not NULL. */
static inline void quiet_log(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)message;
  if (user_data) atomic_fetch_add((_Atomic int *)user_data, 1);
}

static inline bool thread_failed(void) {
  pthread_mutex_lock(&thread_failure_lock);
  bool f = thread_failure[0] != '\0';
  pthread_mutex_unlock(&thread_failure_lock);
  return f;
}

/* Called from the test's own thread while no other runs: before the threads start, and after
 * the join. */
static inline void thread_failure_clear(void) { thread_failure[0] = '\0'; }

static inline void expect_no_thread_failure(void) {
  if (thread_failure[0]) fail_msg("%s", thread_failure);
}

/* A barrier that a failing thread can open for good, so that the others never wait for it. */
typedef struct stress_barrier {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int parties, waiting;
  unsigned long generation;
  bool broken;
} stress_barrier_t;

static inline void barrier_init(stress_barrier_t *b, int parties) {
  pthread_mutex_init(&b->lock, NULL);
  pthread_cond_init(&b->cond, NULL);
  b->parties = parties;
  b->waiting = 0;
  b->generation = 0;
  b->broken = false;
}

static inline void barrier_destroy(stress_barrier_t *b) {
  pthread_mutex_destroy(&b->lock);
  pthread_cond_destroy(&b->cond);
}

/* False once the barrier is broken: the caller stops. */
static inline bool barrier_wait(stress_barrier_t *b) {
  pthread_mutex_lock(&b->lock);
  unsigned long generation = b->generation;
  if (++b->waiting == b->parties) {
    b->waiting = 0;
    b->generation++;
    pthread_cond_broadcast(&b->cond);
  } else {
    while (generation == b->generation && !b->broken) pthread_cond_wait(&b->cond, &b->lock);
  }
  bool ok = !b->broken;
  pthread_mutex_unlock(&b->lock);
  return ok;
}

static inline void barrier_break(stress_barrier_t *b) {
  pthread_mutex_lock(&b->lock);
  b->broken = true;
  pthread_cond_broadcast(&b->cond);
  pthread_mutex_unlock(&b->lock);
}

#endif
