/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend.h — the device a conformance scenario runs on: the CPU fake device (backend_fake.c) or
 * a CUDA device (backend_cuda.c).
 *
 * A scenario that must behave the same on both is written once against these calls and the
 * public API; tests/CMakeLists.txt builds the scenarios twice, test_conformance with the fake's
 * backend (label cpu) and test_conformance_gpu with CUDA's (label gpu, skipped without a device),
 * so that the fake's model of CUDA is checked against CUDA itself. Where the two can only be
 * measured with different precision (the device's memory in use: the fake counts it to the byte,
 * CUDA's free memory moves with the driver's own needs), the backend decides how exact a check
 * is; the scenario states what must hold.
 */
#ifndef RECAP_TEST_CONFORMANCE_BACKEND_H
#define RECAP_TEST_CONFORMANCE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "memory_util.h"
#include "recap.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* A fresh start: the fake reset, or the device idle with recap's cache empty. */
void backend_begin(void);
recap_stream_t backend_stream(void);
void backend_stream_destroy(recap_stream_t stream);
/* Wait for all the device's work. */
void backend_sync(void);
/* Set `bytes` bytes at p to value, eagerly on stream (as cudaMemsetAsync). */
void backend_memset(void *p, int value, size_t bytes, recap_stream_t stream);
/* Copy `bytes` bytes of device memory at src to the host, once the device is idle. */
void backend_to_host(void *dst, const void *src, size_t bytes);
/* Kernels on floats, the test kernels of tests/gpu/kernels.h (the fake's compute on its host
 * memory under the same names): p[i] = value; out[i] = in[i] + value; out[i] = a[i] + b[i];
 * y[i] += alpha * x[i]. Launched on stream, eagerly or into the capture the stream takes part in. */
void backend_fill(float *p, size_t n, float value, recap_stream_t stream);
void backend_add_scalar(float *out, const float *in, size_t n, float value, recap_stream_t stream);
void backend_add(float *out, const float *a, const float *b, size_t n, recap_stream_t stream);
void backend_axpy(float *y, const float *x, size_t n, float alpha, recap_stream_t stream);
/* A kernel that sets p[i] = tag, told apart from the others of a graph by its tag (1 to 15):
 * on CUDA its grid's x, on the fake its name, "recap_test_fill_kernel#<tag>". Both names contain
 * BACKEND_FILL_KERNEL. backend_node_tag gives a kernel node's tag back. */
void backend_tagged(float *p, size_t n, unsigned tag, recap_stream_t stream);
unsigned backend_node_tag(const recap_graph_node_t *node);
#define BACKEND_FILL_KERNEL "recap_test_fill_kernel"
#define BACKEND_ADD_SCALAR_KERNEL "recap_test_add_scalar_kernel"
#define BACKEND_ADD_KERNEL "recap_test_add_kernel"
/* The graph launches so far, and the check that `launched` more were made since `before`: on the
 * fake, which counts them; CUDA counts none, and its scenarios see launches in the values. */
uint64_t backend_graph_launches(void);
void backend_expect_launched(uint64_t before, uint64_t launched);
/* Nothing of the device's is left: no graph or executable (the fake counts them). */
void backend_expect_nothing_left(void);
/* Whether the allocator runs with expandable_segments (the "vmm" variants). */
bool backend_vmm_segments_on(void);
/* The bytes of device memory in use, recap's and anyone else's. */
size_t backend_device_used(void);
/* The device's memory in use went from `before` to `now`, and should have grown by `grown`:
 * exactly on the fake; on CUDA by at least `grown` less a slack for the driver's own caches (and
 * when `grown` is 0, by no more than the slack), unless a CUDA tool holds device memory too. */
void backend_expect_device_grew(size_t before, size_t now, size_t grown);

/* backend_begin, then a stream: the start of most scenarios. */
static inline recap_stream_t backend_begun(void) {
  backend_begin();
  return backend_stream();
}

static inline float *backend_floats(size_t n, recap_stream_t stream) {
  void *p = NULL;
  OK(recap_malloc(&p, n * sizeof(float), stream));
  if (!p) fail_msg("recap_malloc(%zu floats) gave NULL", n);
  return p;
}

/* Every one of the n floats at device pointer p equals expected, exactly. */
static inline void backend_expect_all(const float *p, size_t n, float expected) {
  float *host = malloc(n * sizeof *host);
  if (!host) fail_msg("out of host memory");
  backend_to_host(host, p, n * sizeof *host);
  recap_test_expect_all_and_free(host, n, expected, p);
}

/* The end of a scenario that freed everything and destroyed its graphs and streams: after
 * emptying the cache no pool of `pools` is left, recap holds no device memory, and the
 * allocator's invariants hold. */
static inline void backend_finish(const recap_pool_id_t *pools, size_t pool_count) {
  backend_sync();
  OK(recap_empty_cache());
  for (size_t i = 0; i < pool_count; i++) {
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    EXPECT_STATUS(recap_pool_memory(pools[i], &info), RECAP_ERROR_NOT_FOUND);
  }
  expect_nothing_counted();
  memory_check_passes();
  backend_expect_nothing_left();
}

/* The end of a scenario of one graph g on stream s: g destroyed, the n blocks freed, s
 * destroyed, then backend_finish over g's pool. */
static inline void backend_finish_graph(recap_graph_t g, recap_stream_t s, void *const *blocks,
                                        size_t n) {
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  OK(recap_graph_destroy(g));
  for (size_t i = 0; i < n; i++) OK(recap_free(blocks[i]));
  backend_stream_destroy(s);
  backend_finish(&pool, 1);
}

/* n floats on stream s, each set to value. */
static inline float *backend_floats_set(size_t n, float value, recap_stream_t s) {
  float *p = backend_floats(n, s);
  backend_fill(p, n, value, s);
  return p;
}

#endif /* RECAP_TEST_CONFORMANCE_BACKEND_H */
