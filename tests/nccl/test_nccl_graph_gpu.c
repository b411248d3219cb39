/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nccl_graph_gpu.c — the NCCL layer (recap/nccl.h) on a GPU with a one-rank communicator:
 * collectives captured through recap into a graph whose pool is NCCL memory registered with the
 * communicator (recap_pool_nccl), the record, the check of one rank, replays with new inputs;
 * inside a conditional body, the wrappers' refusal and the refusal at the region's end of
 * NCCL's own kernels enqueued by a direct call; and two graphs sharing the communicator replayed
 * on two streams, ordered on the device (RECAP_NCCL_SERIALIZE).
 *
 * Nothing links NCCL: the communicator comes from ncclCommInitAll, opened with dlopen from the
 * library the seam loads (RECAP_NCCL_LIBRARY, else libnccl.so.2). Exits 77 (skipped) without a
 * GPU, without the library, or when recap was built without NCCL's headers.
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
#include "harness.h"
#include "inspect_util.h"
#include "gpu_util.h"
#include "kernels.h"
#include "nccl_util.h"
#include "recap.h"

enum { N = 1 << 16 };

static void *library;

/* A communicator of one rank on device 0 (skips without NCCL), and a new stream in *s unless
 * s is NULL. */
static recap_nccl_comm_t one_rank(cudaStream_t *s) {
  CUDA_OK(cudaSetDevice(0));
  gpu_nccl_version_or_skip();
  library = gpu_nccl_open();
  recap__nccl_comm_t comm = gpu_nccl_one_rank_comm(library);
  if (s) *s = gpu_stream();
  return comm;
}

/* The end of a test: the stream destroyed, the communicator released. */
static void finish(cudaStream_t s, recap_nccl_comm_t comm) {
  CUDA_OK(cudaStreamDestroy(s));
  gpu_nccl_release(library, comm);
}

/* A new graph, its capture begun on s with o. */
static recap_graph_t capturing(const recap_capture_options_t *o, cudaStream_t s) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, o, (recap_stream_t)s));
  return g;
}

static float *device_floats(void) {
  float *p = NULL;
  CUDA_OK(cudaMalloc((void **)&p, N * sizeof(float)));
  return p;
}

RECAP_TEST(captured_checked_replayed) {
  if (gpu_vmm_segments_on()) {
    printf("SKIP: expandable_segments is on, and NCCL's memory is no virtual memory\n");
    return;
  }
  cudaStream_t s;
  recap_nccl_comm_t comm = one_rank(&s);
  recap_pool_id_t pool = recap_pool_handle();
  OK(recap_pool_nccl(pool, comm));
  /* NCCL sets up its buffers at a communicator's first collective: one eagerly first. */
  float *warm = NULL;
  OK(recap_malloc((void **)&warm, N * sizeof(float), (recap_stream_t)s));
  OK(recap_nccl_all_reduce(warm, warm, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm,
                           (recap_stream_t)s));
  CUDA_OK(cudaStreamSynchronize(s));

  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = pool;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  recap_graph_t g = capturing(&o, s);
  float *a = NULL, *b = NULL, *c = NULL;
  OK(recap_malloc((void **)&a, N * sizeof(float), (recap_stream_t)s));
  OK(recap_malloc((void **)&b, N * sizeof(float), (recap_stream_t)s));
  OK(recap_malloc((void **)&c, N * sizeof(float), (recap_stream_t)s));
  OK(recap_nccl_all_reduce(a, b, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, (recap_stream_t)s));
  OK(recap_nccl_all_gather(a, c, N, RECAP_NCCL_FLOAT32, comm, (recap_stream_t)s));
  OK(recap_graph_capture_end(g));
  recap_collective_t rec[4];
  for (int i = 0; i < 4; i++) rec[i] = (recap_collective_t)RECAP_COLLECTIVE_INIT;
  size_t count = 0;
  OK(recap_graph_collectives(g, rec, 4, &count, NULL));
  assert_int_equal(count, 2);
  assert_int_equal(rec[0].kind, RECAP_COLLECTIVE_ALL_REDUCE);
  assert_int_equal(rec[0].nranks, 1);
  assert_int_equal(rec[1].kind, RECAP_COLLECTIVE_ALL_GATHER);
  OK(recap_graph_check_collectives(g, comm));
  for (int replay = 0; replay < 2; replay++) {
    float base = 10.0f * (float)(replay + 1);
    gpu_upload_pattern(a, N, base);
    OK(recap_graph_replay(g, (recap_stream_t)s));
    CUDA_OK(cudaStreamSynchronize(s));
    expect_ramp(b, N, base, "replayed all_reduce");
    expect_ramp(c, N, base, "replayed all_gather");
  }
  OK(recap_graph_destroy(g));
  /* The capture's buffers outlive the graph until freed; then the pool's NCCL segments go back
   * (deregistered, ncclMemFree) with the cache. */
  FREE_ALL(a, b, c, warm);
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_empty_cache());
  recap_pool_memory_t pm = RECAP_POOL_MEMORY_INIT;
  assert_int_equal(recap_pool_memory(pool, &pm), RECAP_ERROR_NOT_FOUND); /* the pool is gone */
  finish(s, comm);
}

/* Whether name is one of NCCL's kernels (as the region check recognises them). */
static int nccl_name(const char *name) {
  if (!name) return 0;
  if (strncmp(name, "_Z", 2) == 0) {
    name += 2;
    if (*name == 'N') name++;
    while (*name >= '0' && *name <= '9') name++;
  }
  return strncmp(name, "nccl", 4) == 0;
}

RECAP_TEST(refused_in_conditional_bodies) {
  if (!gpu_conditional_nodes()) return;
  cudaStream_t s;
  recap_nccl_comm_t comm = one_rank(&s);
  float *a = NULL;
  OK(recap_malloc((void **)&a, N * sizeof(float), (recap_stream_t)s));
  OK(recap_nccl_all_reduce(a, a, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, (recap_stream_t)s));
  CUDA_OK(cudaStreamSynchronize(s));
  recap__coll_t direct = {RECAP__COLL_ALL_REDUCE, a,  a,  N,   RECAP_NCCL_FLOAT32,
                          RECAP_NCCL_SUM,         -1, -1, comm};

  /* What a direct call enqueues, read from a kept template. */
  recap_graph_t probe;
  OK(recap_graph_create(&probe, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(probe, NULL, (recap_stream_t)s));
  OK(recap__nccl()->collective(&direct, (recap_stream_t)s));
  OK(recap_graph_capture_end(probe));
  recap_graph_info_t *info = inspect(probe);
  int nccl_kernels = 0;
  for (size_t i = 0; i < info->node_count; i++) {
    printf("direct all_reduce node %zu: %s %s\n", i, recap_node_type_name(info->nodes[i].type),
           info->nodes[i].kernel_name ? info->nodes[i].kernel_name : "");
    nccl_kernels +=
        info->nodes[i].type == RECAP_NODE_KERNEL && nccl_name(info->nodes[i].kernel_name);
  }
  recap_graph_info_free(info);
  OK(recap_graph_destroy(probe));

  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = RECAP_REGIONS_DEVICE;
  recap_graph_t g = capturing(&o, s);
  recap_cond_t cond;
  OK(recap_cond_create(&cond, 1, (recap_stream_t)s));
  OK(recap_region_begin(RECAP_REGION_IF, cond, 1, (recap_stream_t)s));
  EXPECT_STATUS(recap_nccl_all_reduce(a, a, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm,
                                      (recap_stream_t)s),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("(pytorch #180960)");
  OK(recap__nccl()->collective(&direct, (recap_stream_t)s));
  recap_status_t end = recap_region_end((recap_stream_t)s);
  if (nccl_kernels > 0) {
    /* NCCL's kernel in the body: refused by name, not by CUDA's bare instantiation failure. */
    EXPECT_STATUS(end, RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("an NCCL collective");
    int capturing = -1;
    OK(recap_stream_is_capturing((recap_stream_t)s, &capturing));
    assert_int_equal(capturing, 0);
  } else {
    /* A one-rank NCCL may enqueue copies and kernels of other names: no false refusal. */
    printf("NCCL enqueued no ncclDevKernel for one rank; the body is not refused by name\n");
    if (end != RECAP_SUCCESS && strstr(recap_last_error(), "an NCCL collective"))
      fail_msg("refused by name without an NCCL kernel: %s", recap_last_error());
    if (end == RECAP_SUCCESS) {
      recap_status_t ended = recap_graph_capture_end(g);
      printf("capture_end: %s %s\n", recap_status_name(ended),
             ended == RECAP_SUCCESS ? "" : recap_last_error());
    }
  }
  OK(recap_graph_destroy(g));
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(a));
  OK(recap_empty_cache()); /* the segment goes back before the program ends */
  finish(s, comm);
}

/* RECAP_NCCL_SERIALIZE on the device: g1 on s1 spins, adds 1 to a and all-reduces a into b; g2
 * on s2 all-reduces b into c. Replayed one after the other on the two streams, g2 waits for g1 on
 * the device (c holds g1's new value every time), and the host does not wait: right after g2's
 * replay returned, s1 is still spinning. */
RECAP_TEST(serialized_on_the_device) {
  recap_nccl_comm_t comm = one_rank(NULL);
  CUDA_OK(recap_test_kernels_load());
  cudaStream_t s1 = gpu_stream(), s2 = NULL;
  CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  float *a = device_floats(), *b = device_floats(), *c = device_floats();
  CUDA_OK(cudaMemset(a, 0, N * sizeof(float)));
  CUDA_OK(cudaMemset(b, 0, N * sizeof(float)));
  CUDA_OK(cudaDeviceSynchronize()); /* the memsets ran on the legacy stream */
  /* NCCL sets up at a communicator's first collective: once eagerly on each stream. */
  OK(recap_nccl_all_reduce(a, b, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, (recap_stream_t)s1));
  OK(recap_nccl_all_reduce(b, c, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, (recap_stream_t)s2));
  CUDA_OK(cudaDeviceSynchronize());

  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  recap_graph_t g1 = capturing(&o, s1);
  CUDA_OK(recap_test_spin(20ull * 1000 * 1000, s1));
  CUDA_OK(recap_test_add_scalar(a, a, N, 1.0f, s1));
  OK(recap_nccl_all_reduce(a, b, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, (recap_stream_t)s1));
  OK(recap_graph_capture_end(g1));
  recap_graph_t g2 = capturing(&o, s2);
  OK(recap_nccl_all_reduce(b, c, N, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, (recap_stream_t)s2));
  OK(recap_graph_capture_end(g2));
  OK(recap_nccl_comm_policy(comm, RECAP_NCCL_SERIALIZE));

  float *host = malloc(N * sizeof *host);
  assert_non_null(host);
  for (int round = 1; round <= 4; round++) {
    OK(recap_graph_replay(g1, (recap_stream_t)s1));
    OK(recap_graph_replay(g2, (recap_stream_t)s2));
    /* A host wait would have let s1 finish its 20 ms spin before g2's replay returned. Under a
     * CUDA tool the host may be slower than the spin: not asserted there. */
    if (!gpu_under_tool()) assert_int_equal(cudaStreamQuery(s1), cudaErrorNotReady);
    CUDA_OK(cudaStreamSynchronize(s2));
    CUDA_OK(cudaMemcpy(host, c, N * sizeof *host, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < N; i++)
      if (host[i] != (float)round)
        fail_msg("round %d: c[%zu] = %g: g2 did not wait for g1", round, i, (double)host[i]);
    CUDA_OK(cudaStreamSynchronize(s1));
  }
  free(host);
  OK(recap_graph_destroy(g1));
  OK(recap_graph_destroy(g2));
  float *buffers[] = {a, b, c};
  for (size_t i = 0; i < 3; i++) CUDA_OK(cudaFree(buffers[i]));
  CUDA_OK(cudaStreamDestroy(s2));
  finish(s1, comm);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(captured_checked_replayed),
    cmocka_unit_test(refused_in_conditional_bodies),
    cmocka_unit_test(serialized_on_the_device),
};
RECAP_TEST_MAIN(tests)
