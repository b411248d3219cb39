/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * set_util.h — what the CPU tests of graph sets (test_graph_set.c,
 * test_graph_set_background.c) share: a model whose step computes on the fake (a function
 * kernel out[k] = 3 in[k] + size over the bucket's rows, replayed with real effects), takes a
 * temporary of row_bytes per row from recap_malloc, launches extra plain kernels so that sizes
 * differ in node count, records which sizes it ran captured and eagerly, and fails where a test
 * asks it to; a fresh model with its stream, and a set of the model's step.
 *
 * Include after harness.h and graph_util.h.
 */
#ifndef RECAP_TEST_SET_UTIL_H
#define RECAP_TEST_SET_UTIL_H

#include <pthread.h>
#include <time.h>
#include <stdint.h>

#include "capture_util.h"
#include "fake/fake.h"
#include "recap.h"

enum { MODEL_ROWS = 1024, MODEL_LOG = 256 };

typedef struct model {
  int64_t in[MODEL_ROWS], out[MODEL_ROWS];
  size_t row_bytes;  /* temporary bytes per row (0: none) */
  int extra_kernels; /* plain kernels launched per row */
  size_t fail_size;  /* this size fails (0: none)... */
  int fail_captured; /* ...only while captured */
  recap_status_t fail_status;
  int fail_silently;   /* fail without recap_set_last_error */
  int fork_unjoined;   /* captured: fork a side stream into the capture and never join it */
  recap_stream_t side; /* that side stream */
  /* Blocking the step while captured on another thread (the background tests). */
  int block_captures;    /* 1: a captured step waits until released */
  int blocked;           /* a captured step waits now */
  long capture_sleep_us; /* a captured step sleeps this long (a capture that takes time) */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* What ran (under lock). */
  size_t captured[MODEL_LOG], captured_count;
  size_t eager[MODEL_LOG], eager_count;
} model_t;

static inline void model_init(model_t *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->lock, NULL);
  pthread_cond_init(&m->cond, NULL);
  for (size_t k = 0; k < MODEL_ROWS; k++) m->in[k] = (int64_t)k + 1;
  m->fail_status = RECAP_ERROR_INVALID_VALUE;
}

static inline void model_fini(model_t *m) {
  pthread_cond_destroy(&m->cond);
  pthread_mutex_destroy(&m->lock);
}

/* out[k] = 3 in[k] + rows for k < rows: args out, in, rows. */
static void model_affine(void *const *args, size_t n) {
  (void)n;
  int64_t *out = args[0];
  const int64_t *in = args[1];
  size_t rows = (size_t)(uintptr_t)args[2];
  for (size_t k = 0; k < rows; k++) out[k] = 3 * in[k] + (int64_t)rows;
}

static recap_status_t model_step(size_t size, recap_stream_t stream, void *user_data) {
  model_t *m = user_data;
  int captured = 0;
  recap_status_t s = recap_stream_is_capturing(stream, &captured);
  if (s != RECAP_SUCCESS) return s;
  pthread_mutex_lock(&m->lock);
  if (captured) {
    if (m->captured_count < MODEL_LOG) m->captured[m->captured_count++] = size;
    if (m->block_captures) {
      m->blocked = 1;
      pthread_cond_broadcast(&m->cond);
      while (m->block_captures) pthread_cond_wait(&m->cond, &m->lock);
      m->blocked = 0;
    }
    if (m->capture_sleep_us > 0) {
      struct timespec pause = {m->capture_sleep_us / 1000000,
                               (m->capture_sleep_us % 1000000) * 1000};
      pthread_mutex_unlock(&m->lock);
      nanosleep(&pause, NULL);
      pthread_mutex_lock(&m->lock);
    }
  } else if (m->eager_count < MODEL_LOG) {
    m->eager[m->eager_count++] = size;
  }
  bool fail = m->fail_size == size && (!m->fail_captured || captured);
  pthread_mutex_unlock(&m->lock);
  if (fail) {
    if (m->fail_silently) return m->fail_status;
    return recap_set_last_error(m->fail_status, "model_step: size %zu refused on purpose", size);
  }
  void *tmp = NULL;
  if (m->row_bytes) {
    s = recap_malloc(&tmp, size * m->row_bytes, stream);
    if (s != RECAP_SUCCESS) return s;
  }
  const void *args[3] = {m->out, m->in, (const void *)(uintptr_t)size};
  recap__fake_launch_kernel_fn(stream, "model_affine", model_affine, args, 3);
  for (int k = 0; k < m->extra_kernels * (int)size; k++) recap__fake_stream_enqueue(stream);
  if (captured && m->fork_unjoined) {
    recap__fake_capture_join(m->side, stream);
    recap__fake_stream_enqueue(m->side);
  }
  if (tmp) ignore_status(recap_free(tmp));
  return RECAP_SUCCESS;
}

/* out holds the result of a run over `rows` rows: out[k] = 3 in[k] + rows for k < rows. */
static inline void expect_rows(const model_t *m, size_t rows) {
  for (size_t k = 0; k < rows; k++)
    if (m->out[k] != 3 * m->in[k] + (int64_t)rows)
      fail_msg("out[%zu] = %lld, expected %lld (rows %zu)", k, (long long)m->out[k],
               (long long)(3 * m->in[k] + (int64_t)rows), rows);
}

static inline recap_graph_set_member_t member_of(recap_graph_set_t set, size_t size) {
  recap_graph_set_member_t info = RECAP_GRAPH_SET_MEMBER_INIT;
  OK(recap_graph_set_member(set, size, &info));
  return info;
}

static inline recap_graph_set_info_t info_of(recap_graph_set_t set) {
  recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
  OK(recap_graph_set_info(set, &info));
  return info;
}

static inline recap_member_state_t state_of_size(recap_graph_set_t set, size_t size) {
  return member_of(set, size).state;
}

/* A fresh fake (reset), *m initialised, and a new stream for the tests to call the set on. */
static inline recap_stream_t model_fresh(model_t *m) {
  reset();
  model_init(m);
  return recap__fake_stream_new();
}

/* A set of m's step over sizes[0..count), captured as `capture` says. */
static inline recap_graph_set_t model_set(model_t *m, const size_t *sizes, size_t count,
                                          recap_set_capture_t capture) {
  return graph_set_of(model_step, m, sizes, count, capture);
}

#endif /* RECAP_TEST_SET_UTIL_H */
