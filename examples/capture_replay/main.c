/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * capture_replay — capture a small GPU pipeline once with recap, then replay it.
 *
 * The pipeline, per step, on one stream:
 *
 *     memset   acc = 0                      (cudaMemsetAsync)
 *     kernel   acc += a * x                 (launch_axpy)
 *     kernel   acc += b * x * x             (launch_add_square)
 *     copy     y = acc                      (cudaMemcpyAsync, device to device)
 *
 * x is a static input allocated before the capture; acc and y are allocated with recap_malloc
 * during the capture, so they come from the graph's private pool and keep their addresses for
 * every replay. acc is freed before the capture ends (an intermediate); y is the graph's output
 * and stays the program's until it frees it.
 *
 * The program runs the pipeline eagerly once (which also loads the kernels: no module is loaded
 * in the middle of a capture), captures it, replays it with new inputs and checks every result
 * against the host, then times replay against eager launches of the same work.
 *
 *     capture_replay [--json graph.json]
 *
 * With --json, the graph is kept (RECAP_GRAPH_KEEP) and its inspection written as JSON, which
 * tools/recap-graph turns into DOT or an HTML page. Exit status: 0 on success, 1 on a failure, 2 when
 * there is no CUDA device.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "recap.h"

enum { N = 1 << 20, REPLAYS = 5, TIMED_STEPS = 1000 };
static const float A = 2.0f, B = 0.5f;

/* An example stops at the first failure, saying what failed and why. */
#define CHECK_RECAP(call)                                                                       \
  do {                                                                                          \
    recap_status_t status_ = (call);                                                            \
    if (status_ != RECAP_SUCCESS) {                                                             \
      fprintf(stderr, "capture_replay: %s failed: %s: %s\n", #call, recap_status_name(status_), \
              recap_last_error());                                                              \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

#define CHECK_CUDA(call)                                                                      \
  do {                                                                                        \
    cudaError_t error_ = (call);                                                              \
    if (error_ != cudaSuccess) {                                                              \
      fprintf(stderr, "capture_replay: %s failed: %s: %s\n", #call, cudaGetErrorName(error_), \
              cudaGetErrorString(error_));                                                    \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

/* The pipeline: enqueued on `stream`, captured or not. acc and y hold n floats. */
static void enqueue_pipeline(cudaStream_t stream, const float *x, float *acc, float *y, size_t n) {
  CHECK_CUDA(cudaMemsetAsync(acc, 0, n * sizeof(float), stream));
  CHECK_CUDA(launch_axpy(acc, x, A, n, stream));
  CHECK_CUDA(launch_add_square(acc, x, B, n, stream));
  CHECK_CUDA(cudaMemcpyAsync(y, acc, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fill the host input for step `step`, copy it into x, and return nothing: the copy is
 * ordered on stream before whatever comes next. */
static void upload_input(cudaStream_t stream, float *x, float *host_x, int step) {
  for (size_t i = 0; i < N; i++) host_x[i] = (float)((i + (size_t)step * 7) % 1000) / 1000.0f;
  CHECK_CUDA(cudaMemcpyAsync(x, host_x, N * sizeof(float), cudaMemcpyHostToDevice, stream));
}

/* Compare y (already copied to host_y) with a * x + b * x * x computed on the host. */
static int check_output(const float *host_x, const float *host_y, const char *what) {
  for (size_t i = 0; i < N; i++) {
    float expect = A * host_x[i] + B * host_x[i] * host_x[i];
    if (fabsf(host_y[i] - expect) > 1e-5f * (1.0f + fabsf(expect))) {
      fprintf(stderr, "capture_replay: %s: y[%zu] = %g, expected %g\n", what, i, host_y[i], expect);
      return 0;
    }
  }
  return 1;
}

static void write_inspection(recap_graph_t graph, const char *path) {
  recap_graph_info_t *info;
  char *json;
  CHECK_RECAP(recap_graph_inspect(graph, &info));
  CHECK_RECAP(recap_graph_info_json(info, &json));
  FILE *f = fopen(path, "w");
  if (!f || fputs(json, f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "capture_replay: cannot write %s\n", path);
    exit(1);
  }
  printf("graph inspection written to %s (render it with: recap-graph html %s graph.html)\n", path,
         path);
  recap_string_free(json);
  recap_graph_info_free(info);
}

int main(int argc, char **argv) {
  static const struct option options[] = {
      {"json", required_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *json_path = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'j') {
      json_path = optarg;
    } else {
      fprintf(c == 'h' ? stdout : stderr, "usage: %s [--json graph.json]\n", argv[0]);
      return c == 'h' ? 0 : 1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "usage: %s [--json graph.json]\n", argv[0]);
    return 1;
  }

  int devices = 0;
  if (recap_device_count(&devices) != RECAP_SUCCESS || devices < 1) {
    printf("capture_replay: this example needs a CUDA device (%s)\n",
           recap_last_error()[0] ? recap_last_error() : "none found");
    return 2;
  }

  /* Capture needs a stream of our own: the legacy default stream cannot capture. */
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *host_x = malloc(N * sizeof(float)), *host_y = malloc(N * sizeof(float));
  if (!host_x || !host_y) {
    fprintf(stderr, "capture_replay: out of host memory\n");
    return 1;
  }

  /* The static input, from the default pool, and buffers for the eager runs. */
  float *x, *eager_acc, *eager_y;
  CHECK_RECAP(recap_malloc((void **)&x, N * sizeof(float), stream));
  CHECK_RECAP(recap_malloc((void **)&eager_acc, N * sizeof(float), stream));
  CHECK_RECAP(recap_malloc((void **)&eager_y, N * sizeof(float), stream));

  /* Warm up: one eager run (it loads the kernels) and check it. */
  upload_input(stream, x, host_x, 0);
  enqueue_pipeline(stream, x, eager_acc, eager_y, N);
  CHECK_CUDA(cudaMemcpyAsync(host_y, eager_y, N * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  if (!check_output(host_x, host_y, "eager run")) return 1;

  /* Capture. acc and y come from the graph's pool because they are allocated during it. */
  recap_graph_t graph;
  CHECK_RECAP(recap_graph_create(&graph, json_path ? RECAP_GRAPH_KEEP : 0));
  float *acc, *y;
  CHECK_RECAP(recap_graph_capture_begin(graph, NULL, stream));
  CHECK_RECAP(recap_malloc((void **)&acc, N * sizeof(float), stream));
  CHECK_RECAP(recap_malloc((void **)&y, N * sizeof(float), stream));
  enqueue_pipeline(stream, x, acc, y, N);
  CHECK_RECAP(recap_free(acc)); /* an intermediate: its memory is the graph's to reuse */
  CHECK_RECAP(recap_graph_capture_end(graph));

  size_t nodes;
  recap_pool_id_t pool;
  recap_pool_memory_t pool_info = RECAP_POOL_MEMORY_INIT;
  CHECK_RECAP(recap_graph_node_count(graph, &nodes));
  CHECK_RECAP(recap_graph_pool(graph, &pool));
  CHECK_RECAP(recap_pool_memory(pool, &pool_info));
  printf("captured %zu nodes; the graph's pool {%llu,%llu} holds %lld bytes in %lld segment(s)\n",
         nodes, (unsigned long long)pool.a, (unsigned long long)pool.b,
         (long long)pool_info.reserved_bytes, (long long)pool_info.segments);
  if (json_path) write_inspection(graph, json_path);

  /* Replay with new inputs: the graph reads x where it was at capture, so new data goes there. */
  for (int step = 1; step <= REPLAYS; step++) {
    upload_input(stream, x, host_x, step);
    CHECK_RECAP(recap_graph_replay(graph, stream));
    CHECK_CUDA(cudaMemcpyAsync(host_y, y, N * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    char what[32];
    snprintf(what, sizeof what, "replay %d", step);
    if (!check_output(host_x, host_y, what)) return 1;
  }
  printf("%d replays checked against the host: all correct\n", REPLAYS);

  /* Time the same work both ways: enqueue the steps, then wait for them. Under a CUDA tool
   * (RECAP_UNDER_TOOL=1, as tools/gpu-check sets for compute-sanitizer, or a profiler's
   * CUDA_INJECTION64_PATH) a few steps are enough and the timing means nothing anyway. */
  const char *flag = getenv("RECAP_UNDER_TOOL"), *injected = getenv("CUDA_INJECTION64_PATH");
  const bool under_tool = (flag && !strcmp(flag, "1")) || (injected && *injected);
  const int timed_steps = under_tool ? 10 : TIMED_STEPS;
  CHECK_CUDA(cudaStreamSynchronize(stream));
  double start = now_seconds();
  for (int i = 0; i < timed_steps; i++) enqueue_pipeline(stream, x, eager_acc, eager_y, N);
  double eager_host = now_seconds() - start;
  CHECK_CUDA(cudaStreamSynchronize(stream));
  double eager_total = now_seconds() - start;

  start = now_seconds();
  for (int i = 0; i < timed_steps; i++) CHECK_RECAP(recap_graph_replay(graph, stream));
  double replay_host = now_seconds() - start;
  CHECK_CUDA(cudaStreamSynchronize(stream));
  double replay_total = now_seconds() - start;

  printf("per step, over %d steps of %d floats:\n", timed_steps, N);
  printf("  eager : %7.2f us to enqueue (4 calls), %7.2f us end to end\n",
         eager_host * 1e6 / timed_steps, eager_total * 1e6 / timed_steps);
  printf("  replay: %7.2f us to enqueue (1 call),  %7.2f us end to end\n",
         replay_host * 1e6 / timed_steps, replay_total * 1e6 / timed_steps);

  /* Clean up: the graph drops its pool reference; y is still ours until freed. */
  CHECK_RECAP(recap_graph_destroy(graph));
  CHECK_RECAP(recap_free(y));
  CHECK_RECAP(recap_free(x));
  CHECK_RECAP(recap_free(eager_acc));
  CHECK_RECAP(recap_free(eager_y));
  CHECK_RECAP(recap_empty_cache());
  CHECK_CUDA(cudaStreamDestroy(stream));
  free(host_x);
  free(host_y);
  return 0;
}
