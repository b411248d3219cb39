/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph_gpu_util.h — what the GPU tests of recap graphs (test_graph_gpu.c,
 * test_graph_streams_gpu.c) share: the buffer size and spin time of their scenarios, a graph's
 * pool and its information, a stream's capture state and capture options.
 *
 * Include after gpu_util.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_GRAPH_GPU_UTIL_H
#define RECAP_TEST_GRAPH_GPU_UTIL_H

#include "gpu_util.h"

#define N ((size_t)1024)              /* floats in most buffers: 4 KiB */
#define SPIN_NS (20ull * 1000 * 1000) /* 20 ms: long enough for another stream to overtake */

static inline recap_pool_id_t pool_of(recap_graph_t g) {
  recap_pool_id_t pool = {0, 0};
  OK(recap_graph_pool(g, &pool));
  assert_false(recap_pool_is_default(pool));
  return pool;
}

static inline recap_pool_memory_t pool_info(recap_pool_id_t pool) {
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &info));
  return info;
}

static inline int is_capturing(cudaStream_t s) {
  int capturing = -1;
  OK(recap_stream_is_capturing(s, &capturing));
  return capturing;
}

static inline recap_capture_options_t capture_options(recap_pool_id_t pool,
                                                      recap_capture_mode_t mode) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = pool;
  o.mode = mode;
  return o;
}

static const recap_pool_id_t DEFAULT_POOL = {0, 0};

#endif /* RECAP_TEST_GRAPH_GPU_UTIL_H */
