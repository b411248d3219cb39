/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nccl_gpu.c — the real NCCL table (src/device/nccl.c) on a GPU with a one-rank
 * communicator: all_reduce, all_gather and broadcast through the seam eagerly, then captured
 * into a CUDA graph and replayed twice with new inputs, and NCCL's allocator with a
 * registration round trip (a registered buffer used by a replayed collective).
 *
 * recap never links NCCL, and neither does this test: it opens the library the seam loads
 * (RECAP_NCCL_LIBRARY, else libnccl.so.2) to make the communicator with ncclCommInitAll, the
 * one call the seam does not need. It exits 77 (skipped) without a GPU, without the library, or
 * when recap was built without NCCL's headers, saying which.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/nccl_seam.h"
#include "gpu_util.h"
#include "harness.h"
#include "nccl_util.h"

enum { N = 1 << 16 };
/* NCCL's numbering (nccl.h). */
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

static void *library;

/* NCCL's table, loaded, and a communicator of one rank on device 0; skips (77) when there is
 * none to be had. *s: a new stream for the test. */
static recap__nccl_comm_t one_rank(const recap__nccl_ops_t **ops_out, cudaStream_t *s) {
  CUDA_OK(cudaSetDevice(0));
  recap__nccl_install(NULL);
  const recap__nccl_ops_t *ops = recap__nccl();
  int version = 0;
  recap_status_t st = ops->load(&version);
  if (st != RECAP_SUCCESS) {
    printf("SKIP: %s: %s\n",
           st == RECAP_ERROR_NOT_FOUND ? "no libnccl.so.2" : "NCCL cannot be used",
           recap_last_error());
    fflush(stdout);
    exit(RECAP_TEST_SKIP);
  }
  printf("NCCL %d.%d.%d (code %d)\n", version / 10000, version / 100 % 100, version % 100, version);
  library = gpu_nccl_open();
  recap__nccl_comm_t comm = gpu_nccl_one_rank_comm(library);
  assert_non_null(comm);
  int rank = -1, nranks = -1, device = -1;
  OK(ops->comm_info(comm, &rank, &nranks, &device));
  assert_int_equal(rank, 0);
  assert_int_equal(nranks, 1);
  assert_int_equal(device, 0);
  *ops_out = ops;
  *s = gpu_stream();
  return comm;
}

static void release(recap__nccl_comm_t comm) { gpu_nccl_release(library, comm); }

static float *device_floats(size_t n) {
  float *p = NULL;
  CUDA_OK(cudaMalloc((void **)&p, n * sizeof *p));
  CUDA_OK(cudaMemset(p, 0, n * sizeof *p));
  /* The legacy stream's memset is not ordered with the tests' non-blocking streams. */
  CUDA_OK(cudaDeviceSynchronize());
  return p;
}

/* The three collectives of the tests, from a into b, c and d. With one rank each result is the
 * input: sum of one, gather of one, broadcast from itself. */
static void issue(const recap__nccl_ops_t *ops, recap__nccl_comm_t comm, const float *a, float *b,
                  float *c, float *d, cudaStream_t s) {
  recap__coll_t all_reduce = {
      RECAP__COLL_ALL_REDUCE, a, b, N, NCCL_FLOAT32, NCCL_SUM, -1, -1, comm};
  recap__coll_t all_gather = {RECAP__COLL_ALL_GATHER, a, c, N, NCCL_FLOAT32, 0, -1, -1, comm};
  recap__coll_t broadcast = {RECAP__COLL_BROADCAST, a, d, N, NCCL_FLOAT32, 0, -1, 0, comm};
  OK(ops->collective(&all_reduce, (recap_stream_t)s));
  OK(ops->group_start());
  OK(ops->collective(&all_gather, (recap_stream_t)s));
  OK(ops->group_end());
  OK(ops->collective(&broadcast, (recap_stream_t)s));
}

/* Each result of issue() is its input, the ramp from base; prefix starts the names. */
static void expect_issued(const float *b, const float *c, const float *d, float base,
                          const char *prefix) {
  char what[64];
  snprintf(what, sizeof what, "%sall_reduce", prefix);
  expect_ramp(b, N, base, what);
  snprintf(what, sizeof what, "%sall_gather", prefix);
  expect_ramp(c, N, base, what);
  snprintf(what, sizeof what, "%sbroadcast", prefix);
  expect_ramp(d, N, base, what);
}

/* End the capture on s into *graph, which has at least min_nodes nodes, and instantiate it. */
static cudaGraphExec_t end_capture(cudaStream_t s, cudaGraph_t *graph, size_t min_nodes) {
  CUDA_OK(cudaStreamEndCapture(s, graph));
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(*graph, NULL, &nodes));
  assert_true(nodes >= min_nodes);
  cudaGraphExec_t exec = NULL;
  CUDA_OK(cudaGraphInstantiate(&exec, *graph, 0));
  return exec;
}

static void destroy_graph(cudaGraphExec_t exec, cudaGraph_t graph) {
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

/* The end of a test: the four buffers of issue(), the stream, the communicator. */
static void finish(float *a, float *b, float *c, float *d, cudaStream_t s,
                   recap__nccl_comm_t comm) {
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaFree(c));
  CUDA_OK(cudaFree(d));
  CUDA_OK(cudaStreamDestroy(s));
  release(comm);
}

RECAP_TEST(eager_collectives) {
  const recap__nccl_ops_t *ops;
  cudaStream_t s;
  recap__nccl_comm_t comm = one_rank(&ops, &s);
  float *a = device_floats(N), *b = device_floats(N), *c = device_floats(N), *d = device_floats(N);
  gpu_upload_pattern(a, N, 1.0f);
  issue(ops, comm, a, b, c, d, s);
  CUDA_OK(cudaStreamSynchronize(s));
  expect_issued(b, c, d, 1.0f, "");
  /* A bad argument comes back as NCCL's error, with its string. */
  recap__coll_t bad = {RECAP__COLL_BROADCAST, a, d, N, NCCL_FLOAT32, 0, -1, 5, comm};
  EXPECT_STATUS(ops->collective(&bad, (recap_stream_t)s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("ncclBroadcast failed: ");
  CUDA_OK(cudaStreamSynchronize(s));
  finish(a, b, c, d, s, comm);
}

/* Captured into a raw CUDA graph, the collectives run at each replay with the input as it is
 * then. */
RECAP_TEST(captured_collectives_replay) {
  const recap__nccl_ops_t *ops;
  cudaStream_t s;
  recap__nccl_comm_t comm = one_rank(&ops, &s);
  float *a = device_floats(N), *b = device_floats(N), *c = device_floats(N), *d = device_floats(N);
  /* NCCL sets up its buffers at a communicator's first collectives: do them eagerly first, as
   * PyTorch does before a capture. */
  issue(ops, comm, a, b, c, d, s);
  CUDA_OK(cudaStreamSynchronize(s));

  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  issue(ops, comm, a, b, c, d, s);
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = end_capture(s, &graph, 3);
  for (int replay = 0; replay < 2; replay++) {
    float base = 10.0f * (float)(replay + 1);
    gpu_upload_pattern(a, N, base);
    CUDA_OK(cudaMemset(b, 0, N * sizeof *b));
    CUDA_OK(cudaMemset(c, 0, N * sizeof *c));
    CUDA_OK(cudaMemset(d, 0, N * sizeof *d));
    CUDA_OK(cudaDeviceSynchronize()); /* the memsets ran on the legacy stream */
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    expect_issued(b, c, d, base, "replayed ");
  }
  destroy_graph(exec, graph);
  finish(a, b, c, d, s, comm);
}

/* ncclMemAlloc'ed memory registered with the communicator, used in place by a replayed
 * all_reduce, then deregistered and freed. */
RECAP_TEST(registered_memory_round_trip) {
  const recap__nccl_ops_t *ops;
  cudaStream_t s;
  recap__nccl_comm_t comm = one_rank(&ops, &s);
  size_t bytes = N * sizeof(float);
  void *p = NULL;
  OK(ops->mem_alloc(&p, bytes));
  assert_non_null(p);
  void *handle = NULL;
  OK(ops->comm_register(comm, p, bytes, &handle));
  assert_non_null(handle);
  float *x = p;
  recap__coll_t in_place = {RECAP__COLL_ALL_REDUCE, x, x, N, NCCL_FLOAT32, NCCL_SUM, -1, -1, comm};
  gpu_upload_pattern(x, N, 3.0f);
  OK(ops->collective(&in_place, (recap_stream_t)s));
  CUDA_OK(cudaStreamSynchronize(s));
  expect_ramp(x, N, 3.0f, "eager all_reduce on registered memory");

  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  OK(ops->collective(&in_place, (recap_stream_t)s));
  cudaGraph_t graph = NULL;
  /* With one rank an in-place all_reduce has nothing to move: NCCL may capture no node at all,
   * and the replays below check the result either way. */
  cudaGraphExec_t exec = end_capture(s, &graph, 0);
  for (int replay = 0; replay < 2; replay++) {
    gpu_upload_pattern(x, N, 5.0f + (float)replay);
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    expect_ramp(x, N, 5.0f + (float)replay, "replayed all_reduce on registered memory");
  }
  destroy_graph(exec, graph);
  OK(ops->comm_deregister(comm, handle));
  OK(ops->mem_free(p));
  CUDA_OK(cudaStreamDestroy(s));
  release(comm);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(eager_collectives),
    cmocka_unit_test(captured_collectives_replay),
    cmocka_unit_test(registered_memory_round_trip),
};
RECAP_TEST_MAIN(tests)
