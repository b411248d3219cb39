/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stress_util.h — what the multi-threaded stress tests share: a deterministic stream of random
 * numbers per thread, and the first failure of any thread, kept until the test's own thread
 * fails with it after the join (cmocka's checks may only be called from the test's own thread).
 * Include it after harness.h.
 */
#ifndef RECAP_TEST_STRESS_UTIL_H
#define RECAP_TEST_STRESS_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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

#endif
