/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_params_device — graph parameters applied on the GPU (docs/params.md).
 *
 * (a) Host cost of a step with K = 1, 16, 64, 256 kernel nodes taking one float parameter,
 *     median CPU time of one call (batches of 8 calls, the stream idle at each batch's start):
 *       raw     cudaGraphLaunch of the executable of a graph with the value fixed
 *       plain   recap_graph_replay of that graph (no parameter)
 *       host    recap_param_set + recap_graph_replay, the parameter patched from the host
 *               (one cudaGraphExecKernelNodeSetParams per node)
 *       device  the same with options.params_on_device: the set is a store, the graph's
 *               applier writes the value into the nodes
 *     Goal: device ≤ plain + 0.5 µs whatever K.
 * (b) Sizes the GPU decides: a chain of 16 axpy kernels over n = 1K .. 256K floats, the count
 *     in device memory:
 *       recap   one graph, recap_graph_param_device with per_block 256
 *       raw     one raw CUDA graph of device-updatable nodes and an updater kernel that sets
 *               their count and grid (what a program writes without recap)
 *       exact   a raw graph captured for that n (the floor)
 *       padded  a raw graph captured for the largest n, run whatever n is
 *     GPU time of one launch (events, median) and the host time of one launch call.
 *     Goals: recap GPU time ≤ 1.1 × raw; recap host time ≤ 1.05 × a plain cudaGraphLaunch.
 *     Each size's recap output is compared bit for bit with the exact graph's.
 * (d) Memory: a chain of 16 kernels over rows x 4096 floats, each writing a temporary of recap's
 *     that the next reads and frees, for rows 1 .. 256:
 *       device  one graph captured at 256 rows, its row count (the kernels' count and grids)
 *               read from device memory (recap_graph_param_device)
 *       set     a graph set of the buckets 256, 128, .., 1 in one pool (recap/graph_set.h)
 *       alone   a graph set of 256 alone: what the largest bucket needs
 *     Reserved bytes of each graph's pool. Goal: device <= alone. The device graph's output at
 *     each bucket's size is compared bit for bit with the set's.
 * (c) Where applying on the GPU spends GPU time, for K = 1, 16, 64 tiny kernels: a plain raw
 *     graph, the same with device-updatable nodes, with an updater kernel of K updates that
 *     reads device memory, one that reads pinned host memory, recap's applier, and recap with
 *     host sets. GPU µs per launch (events).
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "device_params_kernels.h"
#include "recap/params.h"

#define NAME "bench_params_device"

static const int site_counts[] = {1, 16, 64, 256};
enum { SITE_ROWS = sizeof site_counts / sizeof site_counts[0] };
enum { STEP_VARIANTS = 4 };
static const char *const step_names[STEP_VARIANTS] = {"raw", "plain", "host", "device"};

enum { CHAIN = 16, SIZE_ROWS = 9, MAX_N = 256 * 1024, BATCH = 8 };
enum { SIZE_VARIANTS = 4 };
static const char *const size_names[SIZE_VARIANTS] = {"recap", "raw", "exact", "padded"};

typedef struct step_row {
  int k;
  bench_stats_t us[STEP_VARIANTS];
  int checked;
} step_row_t;

typedef struct size_row {
  long long n;
  bench_stats_t gpu_us[SIZE_VARIANTS];
  bench_stats_t host_us[2]; /* recap replay, exact cudaGraphLaunch */
  int same_bits;
} size_row_t;

/* ---- (a) host cost of a step -------------------------------------------------------------- */

typedef struct step_graphs {
  recap_graph_t plain, host, device;
  recap_param_t host_lr, device_lr;
  cudaGraphExec_t raw;
} step_graphs_t;

static recap_graph_t capture_tiny(cudaStream_t s, float *y, int k, int params_on_device,
                                  recap_param_t *lr) {
  recap_graph_t g;
  BENCH_RECAP(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.params_on_device = params_on_device;
  BENCH_RECAP(recap_graph_capture_begin(g, &o, s));
  float a = 0.5f;
  if (lr) BENCH_RECAP(recap_graph_param_float(g, "lr", 0.5f, &a, lr));
  for (int i = 0; i < k; i++) BENCH_CUDA(bench_dp_tiny(s, y, a));
  BENCH_RECAP(recap_graph_capture_end(g));
  return g;
}

/* One batch of BATCH calls of variant v; µs per call. */
static double step_batch(cudaStream_t s, const step_graphs_t *g, int v, float *value) {
  BENCH_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < BATCH; i++) {
    *value += 0.5f;
    switch (v) {
      case 0: BENCH_CUDA(cudaGraphLaunch(g->raw, s)); break;
      case 1: BENCH_RECAP(recap_graph_replay(g->plain, s)); break;
      case 2:
        BENCH_RECAP(recap_param_set_float(g->host_lr, *value));
        BENCH_RECAP(recap_graph_replay(g->host, s));
        break;
      default:
        BENCH_RECAP(recap_param_set_float(g->device_lr, *value));
        BENCH_RECAP(recap_graph_replay(g->device, s));
        break;
    }
  }
  return (double)(bench_now_ns() - t0) / 1e3 / BATCH;
}

/* The graph's K nodes each add the parameter's value once: y[0] grows by exactly k * value. */
static int check_step(cudaStream_t s, recap_graph_t g, recap_param_t lr, float *y, int k) {
  float before, after;
  BENCH_CUDA(cudaStreamSynchronize(s));
  BENCH_CUDA(cudaMemcpy(&before, y, sizeof before, cudaMemcpyDeviceToHost));
  BENCH_RECAP(recap_param_set_float(lr, 0.25f));
  BENCH_RECAP(recap_graph_replay(g, s));
  BENCH_CUDA(cudaStreamSynchronize(s));
  BENCH_CUDA(cudaMemcpy(&after, y, sizeof after, cudaMemcpyDeviceToHost));
  if (after - before == 0.25f * (float)k) return 1;
  fprintf(stderr, "%s: K=%d: a replay added %g, %d nodes adding 0.25 should add %g\n", NAME, k,
          (double)(after - before), k, 0.25 * k);
  return 0;
}

static int bench_steps(cudaStream_t s, int k, int quick, step_row_t *row) {
  float *y = NULL;
  BENCH_CUDA(cudaMalloc((void **)&y, 32 * sizeof(float)));
  BENCH_CUDA(cudaMemset(y, 0, 32 * sizeof(float)));
  step_graphs_t g;
  g.plain = capture_tiny(s, y, k, 0, NULL);
  g.host = capture_tiny(s, y, k, 0, &g.host_lr);
  g.device = capture_tiny(s, y, k, 1, &g.device_lr);
  BENCH_RECAP(recap_graph_raw_exec(g.plain, &g.raw));
  int batches = quick ? 40 : 300;
  double *samples[STEP_VARIANTS];
  for (int v = 0; v < STEP_VARIANTS; v++)
    samples[v] = bench_calloc(NAME, (size_t)batches, sizeof(double));
  float value = 0.0f;
  for (int v = 0; v < STEP_VARIANTS; v++) step_batch(s, &g, v, &value); /* warm-up */
  for (int b = 0; b < batches; b++)
    for (int v = 0; v < STEP_VARIANTS; v++) samples[v][b] = step_batch(s, &g, v, &value);
  row->k = k;
  for (int v = 0; v < STEP_VARIANTS; v++) {
    bench_stats(samples[v], (size_t)batches, &row->us[v]);
    free(samples[v]);
  }
  /* In stream order, after the last batch's replays (their sum would swallow the checks'). */
  BENCH_CUDA(cudaMemsetAsync(y, 0, 32 * sizeof(float), s));
  row->checked =
      check_step(s, g.host, g.host_lr, y, k) && check_step(s, g.device, g.device_lr, y, k);
  BENCH_RECAP(recap_graph_destroy(g.plain));
  BENCH_RECAP(recap_graph_destroy(g.host));
  BENCH_RECAP(recap_graph_destroy(g.device));
  BENCH_CUDA(cudaFree(y));
  return row->checked;
}

/* ---- (b) sizes the GPU decides ------------------------------------------------------------ */

typedef struct size_setup {
  cudaStream_t stream;
  float *x, *y;
  long long *count;
  recap_graph_t recap;
  cudaGraphExec_t raw, padded;
  cudaGraphDeviceNode_t *device_nodes;
} size_setup_t;

static unsigned blocks_for(long long n) {
  return (unsigned)((n + BENCH_DP_BLOCK - 1) / BENCH_DP_BLOCK);
}

static cudaGraphExec_t raw_exact(cudaStream_t s, float *y, const float *x, long long n) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < CHAIN; i++) BENCH_CUDA(bench_dp_axpy(s, y, x, 0.5f, n, blocks_for(n)));
  BENCH_CUDA(cudaStreamEndCapture(s, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphDestroy(graph));
  BENCH_CUDA(cudaGraphUpload(exec, s));
  return exec;
}

static void size_setup(size_setup_t *st) {
  BENCH_CUDA(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
  cudaStream_t s = st->stream;
  BENCH_CUDA(cudaMalloc((void **)&st->x, MAX_N * sizeof(float)));
  BENCH_CUDA(cudaMalloc((void **)&st->y, MAX_N * sizeof(float)));
  BENCH_CUDA(cudaMalloc((void **)&st->count, sizeof(long long)));
  BENCH_CUDA(cudaMalloc((void **)&st->device_nodes, CHAIN * sizeof(cudaGraphDeviceNode_t)));
  BENCH_CUDA(cudaMemset(st->x, 0, MAX_N * sizeof(float)));
  /* recap: one graph, its count and grids from device memory. */
  BENCH_RECAP(recap_graph_create(&st->recap, 0));
  BENCH_RECAP(recap_graph_capture_begin(st->recap, NULL, s));
  int64_t n_ph;
  BENCH_RECAP(recap_graph_param_device(st->recap, "n", RECAP_PARAM_INT64, st->count, BENCH_DP_BLOCK,
                                       s, &n_ph, NULL));
  for (int i = 0; i < CHAIN; i++)
    BENCH_CUDA(bench_dp_axpy(s, st->y, st->x, 0.5f, (long long)n_ph, blocks_for(MAX_N)));
  BENCH_RECAP(recap_graph_capture_end(st->recap));
  /* raw: device-updatable nodes and an updater, written by hand. */
  cudaGraphDeviceNode_t host_nodes[CHAIN];
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  BENCH_CUDA(bench_dp_raw_chain(s, st->y, st->x, 0.5f, st->count, CHAIN, blocks_for(MAX_N),
                                host_nodes, st->device_nodes));
  BENCH_CUDA(cudaStreamEndCapture(s, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&st->raw, graph, 0));
  BENCH_CUDA(cudaGraphDestroy(graph));
  BENCH_CUDA(cudaMemcpy(st->device_nodes, host_nodes, sizeof host_nodes, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaGraphUpload(st->raw, s));
  st->padded = raw_exact(s, st->y, st->x, MAX_N);
  BENCH_CUDA(cudaStreamSynchronize(s));
}

static void size_teardown(size_setup_t *st) {
  BENCH_RECAP(recap_graph_destroy(st->recap));
  BENCH_CUDA(cudaGraphExecDestroy(st->raw));
  BENCH_CUDA(cudaGraphExecDestroy(st->padded));
  BENCH_CUDA(cudaFree(st->x));
  BENCH_CUDA(cudaFree(st->y));
  BENCH_CUDA(cudaFree(st->count));
  BENCH_CUDA(cudaFree(st->device_nodes));
  BENCH_CUDA(cudaStreamDestroy(st->stream));
}

/* Launch variant v once on the setup's stream (the count written first, in stream order). */
static void size_launch(const size_setup_t *st, int v, long long n, cudaGraphExec_t exact) {
  switch (v) {
    case 0: BENCH_RECAP(recap_graph_replay(st->recap, st->stream)); break;
    case 1: BENCH_CUDA(cudaGraphLaunch(st->raw, st->stream)); break;
    case 2: BENCH_CUDA(cudaGraphLaunch(exact, st->stream)); break;
    default: BENCH_CUDA(cudaGraphLaunch(st->padded, st->stream)); break;
  }
  (void)n;
}

/* y after one launch of variant v from y = 0, read back. */
static float *size_output(const size_setup_t *st, int v, long long n, cudaGraphExec_t exact) {
  BENCH_CUDA(cudaMemsetAsync(st->y, 0, MAX_N * sizeof(float), st->stream));
  size_launch(st, v, n, exact);
  float *out = bench_calloc(NAME, MAX_N, sizeof(float));
  BENCH_CUDA(cudaStreamSynchronize(st->stream));
  BENCH_CUDA(cudaMemcpy(out, st->y, MAX_N * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

static void bench_size(const size_setup_t *st, long long n, int quick, size_row_t *row) {
  cudaStream_t s = st->stream;
  BENCH_CUDA(cudaMemcpyAsync(st->count, &n, sizeof n, cudaMemcpyHostToDevice, s));
  BENCH_CUDA(cudaStreamSynchronize(s));
  cudaGraphExec_t exact = raw_exact(s, st->y, st->x, n);
  /* x varies, so that y carries values to compare. */
  float *host_x = bench_calloc(NAME, MAX_N, sizeof(float));
  for (int i = 0; i < MAX_N; i++) host_x[i] = 0.25f + (float)(i % 7);
  BENCH_CUDA(cudaMemcpy(st->x, host_x, MAX_N * sizeof(float), cudaMemcpyHostToDevice));
  free(host_x);
  float *a = size_output(st, 0, n, exact), *b = size_output(st, 2, n, exact),
        *c = size_output(st, 1, n, exact);
  row->same_bits =
      memcmp(a, b, MAX_N * sizeof(float)) == 0 && memcmp(c, b, MAX_N * sizeof(float)) == 0;
  free(a);
  free(b);
  free(c);

  int reps = quick ? 20 : 200;
  double *samples = bench_calloc(NAME, (size_t)reps, sizeof(double));
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  for (int v = 0; v < SIZE_VARIANTS; v++) {
    for (int r = 0; r < reps; r++) {
      BENCH_CUDA(cudaEventRecord(e0, s));
      size_launch(st, v, n, exact);
      BENCH_CUDA(cudaEventRecord(e1, s));
      BENCH_CUDA(cudaEventSynchronize(e1));
      float ms;
      BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      samples[r] = (double)ms * 1e3;
    }
    bench_stats(samples, (size_t)reps, &row->gpu_us[v]);
  }
  /* Host time of one launch call: recap's replay against a plain launch of the exact graph. */
  for (int h = 0; h < 2; h++) {
    for (int r = 0; r < reps; r++) {
      BENCH_CUDA(cudaStreamSynchronize(s));
      uint64_t t0 = bench_now_ns();
      for (int i = 0; i < BATCH; i++) size_launch(st, h == 0 ? 0 : 2, n, exact);
      samples[r] = (double)(bench_now_ns() - t0) / 1e3 / BATCH;
    }
    bench_stats(samples, (size_t)reps, &row->host_us[h]);
  }
  free(samples);
  BENCH_CUDA(cudaEventDestroy(e0));
  BENCH_CUDA(cudaEventDestroy(e1));
  BENCH_CUDA(cudaStreamSynchronize(s));
  BENCH_CUDA(cudaGraphExecDestroy(exact));
  row->n = n;
}

/* ---- (c) where a GPU-side application spends GPU time ------------------------------------ */

enum { COST_VARIANTS = 6 };
static const char *const cost_names[COST_VARIANTS] = {"plain",   "updatable", "upd_dev",
                                                      "upd_pin", "recap",     "recap_host"};
static const int cost_sizes[] = {1, 16, 64};
enum { COST_ROWS = sizeof cost_sizes / sizeof cost_sizes[0] };

typedef struct cost_row {
  int k;
  bench_stats_t gpu_us[COST_VARIANTS];
} cost_row_t;

/* A raw graph of k tiny kernels (updatable, with an updater reading value when not NULL). */
static cudaGraphExec_t raw_tiny(cudaStream_t s, float *y, int k, int updatable, const float *value,
                                cudaGraphDeviceNode_t *device_nodes) {
  cudaGraphDeviceNode_t *host_nodes = bench_calloc(NAME, (size_t)k, sizeof *host_nodes);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  BENCH_CUDA(bench_dp_raw_tiny(s, y, k, updatable, value, host_nodes, device_nodes));
  BENCH_CUDA(cudaStreamEndCapture(s, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphDestroy(graph));
  if (value)
    BENCH_CUDA(cudaMemcpy(device_nodes, host_nodes, (size_t)k * sizeof *host_nodes,
                          cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaGraphUpload(exec, s));
  BENCH_CUDA(cudaStreamSynchronize(s));
  free(host_nodes);
  return exec;
}

/* GPU µs of one launch of each variant, for k nodes: what device-updatable nodes cost, what an
 * updater reading device memory and one reading pinned host memory add, and recap's applier. */
static void bench_costs(cudaStream_t s, int k, int quick, cost_row_t *row) {
  float *y, *value_dev, *value_pin;
  cudaGraphDeviceNode_t *nodes;
  BENCH_CUDA(cudaMalloc((void **)&y, 32 * sizeof(float)));
  BENCH_CUDA(cudaMalloc((void **)&value_dev, sizeof(float)));
  BENCH_CUDA(cudaMallocHost((void **)&value_pin, sizeof(float)));
  BENCH_CUDA(cudaMalloc((void **)&nodes, (size_t)k * sizeof *nodes));
  BENCH_CUDA(cudaMemset(value_dev, 0, sizeof(float)));
  *value_pin = 0.25f;
  cudaGraphExec_t raw[4] = {raw_tiny(s, y, k, 0, NULL, NULL), raw_tiny(s, y, k, 1, NULL, NULL),
                            raw_tiny(s, y, k, 1, value_dev, nodes), NULL};
  cudaGraphDeviceNode_t *pin_nodes;
  BENCH_CUDA(cudaMalloc((void **)&pin_nodes, (size_t)k * sizeof *pin_nodes));
  raw[3] = raw_tiny(s, y, k, 1, value_pin, pin_nodes);
  recap_param_t lr_dev, lr_host;
  recap_graph_t dev = capture_tiny(s, y, k, 1, &lr_dev), host = capture_tiny(s, y, k, 0, &lr_host);
  int reps = quick ? 30 : 300;
  double *samples = bench_calloc(NAME, (size_t)reps, sizeof(double));
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  for (int v = 0; v < COST_VARIANTS; v++) {
    for (int r = -3; r < reps; r++) { /* three launches first, untimed */
      if (v == 4) BENCH_RECAP(recap_param_set_float(lr_dev, 0.5f + (float)(r & 7)));
      if (v == 5) BENCH_RECAP(recap_param_set_float(lr_host, 0.5f + (float)(r & 7)));
      BENCH_CUDA(cudaEventRecord(e0, s));
      if (v < 4)
        BENCH_CUDA(cudaGraphLaunch(raw[v], s));
      else
        BENCH_RECAP(recap_graph_replay(v == 4 ? dev : host, s));
      BENCH_CUDA(cudaEventRecord(e1, s));
      BENCH_CUDA(cudaEventSynchronize(e1));
      float ms;
      BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 0) samples[r] = (double)ms * 1e3;
    }
    bench_stats(samples, (size_t)reps, &row->gpu_us[v]);
  }
  row->k = k;
  free(samples);
  BENCH_CUDA(cudaEventDestroy(e0));
  BENCH_CUDA(cudaEventDestroy(e1));
  for (int i = 0; i < 4; i++) BENCH_CUDA(cudaGraphExecDestroy(raw[i]));
  BENCH_RECAP(recap_graph_destroy(dev));
  BENCH_RECAP(recap_graph_destroy(host));
  BENCH_CUDA(cudaFree(y));
  BENCH_CUDA(cudaFree(value_dev));
  BENCH_CUDA(cudaFreeHost(value_pin));
  BENCH_CUDA(cudaFree(nodes));
  BENCH_CUDA(cudaFree(pin_nodes));
}

/* ---- (d) memory: one graph over every size against a graph set of buckets --------------- */

enum { ROW = 4096, MAX_ROWS = 256, MEM_CHAIN = 16 };
static const size_t mem_buckets[] = {256, 128, 64, 32, 16, 8, 4, 2, 1};
enum { MEM_BUCKETS = sizeof mem_buckets / sizeof mem_buckets[0] };

typedef struct mem_result {
  int64_t device_bytes, set_bytes, alone_bytes;
  int same_bits;
} mem_result_t;

typedef struct chain_io {
  const float *x;
  float *out;
} chain_io_t;

/* The chain over n floats (n may be a placeholder): each link scales the last result into a
 * temporary of recap's and frees the one it read; the last is copied into io->out. */
static recap_status_t mem_chain(const chain_io_t *io, long long n, unsigned grid, cudaStream_t s) {
  const float *prev = io->x;
  float *owned = NULL;
  for (int i = 0; i < MEM_CHAIN; i++) {
    float *t = NULL;
    recap_status_t st =
        recap_malloc((void **)&t, (size_t)MAX_ROWS * ROW * sizeof(float), (recap_stream_t)s);
    if (st != RECAP_SUCCESS) return st;
    if (bench_dp_scale(s, t, prev, 1.0f + 0.0625f * (float)i, n, grid) != cudaSuccess)
      return RECAP_ERROR_CUDA;
    if (owned) (void)recap_free(owned);
    prev = owned = t;
  }
  if (bench_dp_axpy(s, io->out, prev, 1.0f, n, grid) != cudaSuccess) return RECAP_ERROR_CUDA;
  return recap_free(owned);
}

/* A set's step: the chain over `rows` rows, sized on the host. */
static recap_status_t mem_step(size_t rows, recap_stream_t stream, void *user_data) {
  long long n = (long long)rows * ROW;
  return mem_chain(user_data, n, blocks_for(n), (cudaStream_t)stream);
}

static recap_graph_set_t mem_set(chain_io_t *io, const size_t *sizes, size_t count) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = sizes;
  o.size_count = count;
  recap_graph_set_t set = NULL;
  BENCH_RECAP(recap_graph_set_create(&set, mem_step, io, &o));
  return set;
}

static int64_t set_reserved(recap_graph_set_t set) {
  recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
  BENCH_RECAP(recap_graph_set_info(set, &info));
  return info.pool_reserved_bytes;
}

/* out after the set's bucket `rows` and after the device graph at `rows`: equal bit for bit. */
static int mem_same(cudaStream_t s, recap_graph_set_t set, recap_graph_t g, long long *count,
                    chain_io_t *io, size_t rows, float *a, float *b) {
  size_t bytes = (size_t)MAX_ROWS * ROW * sizeof(float);
  BENCH_CUDA(cudaMemsetAsync(io->out, 0, bytes, s));
  BENCH_RECAP(recap_graph_set_run(set, rows, (recap_stream_t)s, NULL, NULL));
  BENCH_CUDA(cudaMemcpyAsync(a, io->out, bytes, cudaMemcpyDeviceToHost, s));
  long long n = (long long)rows * ROW;
  BENCH_CUDA(cudaMemcpyAsync(count, &n, sizeof n, cudaMemcpyHostToDevice, s));
  BENCH_CUDA(cudaMemsetAsync(io->out, 0, bytes, s));
  BENCH_RECAP(recap_graph_replay(g, (recap_stream_t)s));
  BENCH_CUDA(cudaMemcpyAsync(b, io->out, bytes, cudaMemcpyDeviceToHost, s));
  BENCH_CUDA(cudaStreamSynchronize(s));
  return memcmp(a, b, bytes) == 0;
}

static void bench_memory(cudaStream_t s, mem_result_t *r) {
  size_t bytes = (size_t)MAX_ROWS * ROW * sizeof(float);
  chain_io_t io;
  long long *count = NULL;
  float *x = NULL;
  BENCH_CUDA(cudaMalloc((void **)&x, bytes));
  BENCH_CUDA(cudaMalloc((void **)&io.out, bytes));
  BENCH_CUDA(cudaMalloc((void **)&count, sizeof *count));
  float *host = bench_calloc(NAME, (size_t)MAX_ROWS * ROW, sizeof(float));
  for (size_t i = 0; i < (size_t)MAX_ROWS * ROW; i++) host[i] = 0.5f + (float)(i % 13);
  BENCH_CUDA(cudaMemcpy(x, host, bytes, cudaMemcpyHostToDevice));
  io.x = x;
  /* Each way in a pool of its own, measured while it alone holds it. */
  recap_graph_t g;
  BENCH_RECAP(recap_graph_create(&g, 0));
  BENCH_RECAP(recap_graph_capture_begin(g, NULL, (recap_stream_t)s));
  int64_t n_ph;
  BENCH_RECAP(recap_graph_param_device(g, "n", RECAP_PARAM_INT64, count, BENCH_DP_BLOCK,
                                       (recap_stream_t)s, &n_ph, NULL));
  BENCH_RECAP(mem_chain(&io, (long long)n_ph, blocks_for((long long)MAX_ROWS * ROW), s));
  BENCH_RECAP(recap_graph_capture_end(g));
  recap_graph_memory_t gm = RECAP_GRAPH_MEMORY_INIT;
  BENCH_RECAP(recap_graph_memory(g, &gm));
  r->device_bytes = gm.pool_reserved_bytes;
  recap_graph_set_t alone = mem_set(&io, mem_buckets, 1);
  r->alone_bytes = set_reserved(alone);
  BENCH_RECAP(recap_graph_set_destroy(alone));
  recap_graph_set_t set = mem_set(&io, mem_buckets, MEM_BUCKETS);
  r->set_bytes = set_reserved(set);
  float *other = bench_calloc(NAME, (size_t)MAX_ROWS * ROW, sizeof(float));
  r->same_bits = 1;
  for (int i = 0; i < MEM_BUCKETS; i++)
    r->same_bits &= mem_same(s, set, g, count, &io, mem_buckets[i], host, other);
  free(other);
  free(host);
  BENCH_RECAP(recap_graph_set_destroy(set));
  BENCH_RECAP(recap_graph_destroy(g));
  BENCH_CUDA(cudaFree(x));
  BENCH_CUDA(cudaFree(io.out));
  BENCH_CUDA(cudaFree(count));
}

static void print_memory(const mem_result_t *r) {
  const double MiB = 1024.0 * 1024.0;
  double alone = (double)r->alone_bytes;
  printf(
      "\n(d) a chain of %d kernels over rows x %d floats, rows 1 .. %d, temporaries of recap's: "
      "reserved MiB of the pool\n",
      MEM_CHAIN, ROW, MAX_ROWS);
  printf("%-44s %10s %10s\n", "way", "MiB", "/ alone");
  printf("%-44s %10.1f %10.3f %s\n", "device: one graph, rows from device memory",
         (double)r->device_bytes / MiB, alone > 0 ? (double)r->device_bytes / alone : 0.0,
         r->device_bytes <= r->alone_bytes ? "met (<= alone)" : "missed (<= alone)");
  printf("%-44s %10.1f %10.3f\n", "set: 9 buckets 256 .. 1, one pool", (double)r->set_bytes / MiB,
         alone > 0 ? (double)r->set_bytes / alone : 0.0);
  printf("%-44s %10.1f %10.3f\n", "alone: the set of 256 rows only", alone / MiB, 1.0);
  printf("outputs at each bucket's size, device graph against the set: %s\n",
         r->same_bits ? "same bits" : "DIFFER");
}

/* ---- output ------------------------------------------------------------------------------- */

static void print_costs(const cost_row_t *costs) {
  printf(
      "\n(c) GPU us per launch of K tiny kernels: plain; device-updatable; with an updater of "
      "K updates reading device memory; reading pinned memory; recap's applier; host sets\n");
  printf("%6s", "K");
  for (int v = 0; v < COST_VARIANTS; v++) printf(" %10s", cost_names[v]);
  printf("\n");
  for (int i = 0; i < COST_ROWS; i++) {
    printf("%6d", costs[i].k);
    for (int v = 0; v < COST_VARIANTS; v++) printf(" %10.2f", costs[i].gpu_us[v].median);
    printf("\n");
  }
}

static void print_tables(const step_row_t *steps, const size_row_t *sizes) {
  printf("\n(a) host us per step (set + replay), K kernel nodes taking the parameter\n");
  printf("%6s %8s %8s %8s %8s %14s %10s %6s\n", "K", "raw", "plain", "host", "device",
         "device-plain", "<=0.5us", "check");
  for (int i = 0; i < SITE_ROWS; i++) {
    const step_row_t *r = &steps[i];
    double extra = r->us[3].median - r->us[1].median;
    printf("%6d %8.3f %8.3f %8.3f %8.3f %14.3f %10s %6s\n", r->k, r->us[0].median, r->us[1].median,
           r->us[2].median, r->us[3].median, extra, extra <= 0.5 ? "met" : "missed",
           r->checked ? "ok" : "FAILED");
  }
  printf("\n(b) a chain of %d axpy kernels over n floats: GPU us per launch, host us per call\n",
         CHAIN);
  printf("%8s %8s %8s %8s %8s %11s %10s %10s %10s %6s\n", "n", "recap", "raw", "exact", "padded",
         "recap/raw", "host recap", "host plain", "host ratio", "bits");
  for (int i = 0; i < SIZE_ROWS; i++) {
    const size_row_t *r = &sizes[i];
    double ratio = r->gpu_us[0].median / r->gpu_us[1].median;
    double host = r->host_us[0].median / r->host_us[1].median;
    printf("%8lld %8.2f %8.2f %8.2f %8.2f %7.3f %-3s %10.3f %10.3f %6.3f %-3s %6s\n", r->n,
           r->gpu_us[0].median, r->gpu_us[1].median, r->gpu_us[2].median, r->gpu_us[3].median,
           ratio, ratio <= 1.1 ? "met" : "miss", r->host_us[0].median, r->host_us[1].median, host,
           host <= 1.05 ? "met" : "miss", r->same_bits ? "same" : "DIFFER");
  }
}

static int write_json(const char *path, int quick, const step_row_t *steps, const size_row_t *sizes,
                      const cost_row_t *costs, const mem_result_t *mem) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  fprintf(f, ",\"quick\":%d,\"steps\":[", quick);
  for (int i = 0; i < SITE_ROWS; i++) {
    fprintf(f, "%s{\"k\":%d,\"checked\":%d", i ? "," : "", steps[i].k, steps[i].checked);
    for (int v = 0; v < STEP_VARIANTS; v++) {
      fprintf(f, ",\"%s_us\":", step_names[v]);
      bench_stats_json(f, &steps[i].us[v]);
    }
    fprintf(f, "}");
  }
  fprintf(f, "],\"sizes\":[");
  for (int i = 0; i < SIZE_ROWS; i++) {
    fprintf(f, "%s{\"n\":%lld,\"same_bits\":%d", i ? "," : "", sizes[i].n, sizes[i].same_bits);
    for (int v = 0; v < SIZE_VARIANTS; v++) {
      fprintf(f, ",\"%s_gpu_us\":", size_names[v]);
      bench_stats_json(f, &sizes[i].gpu_us[v]);
    }
    fprintf(f, ",\"recap_host_us\":");
    bench_stats_json(f, &sizes[i].host_us[0]);
    fprintf(f, ",\"plain_host_us\":");
    bench_stats_json(f, &sizes[i].host_us[1]);
    fprintf(f, "}");
  }
  fprintf(f, "],\"costs\":[");
  for (int i = 0; i < COST_ROWS; i++) {
    fprintf(f, "%s{\"k\":%d", i ? "," : "", costs[i].k);
    for (int v = 0; v < COST_VARIANTS; v++) {
      fprintf(f, ",\"%s_gpu_us\":", cost_names[v]);
      bench_stats_json(f, &costs[i].gpu_us[v]);
    }
    fprintf(f, "}");
  }
  fprintf(f,
          "],\"memory\":{\"rows\":%d,\"row_floats\":%d,\"buckets\":%d,\"device_bytes\":%lld,"
          "\"set_bytes\":%lld,\"alone_bytes\":%lld,\"same_bits\":%d}}\n",
          MAX_ROWS, ROW, MEM_BUCKETS, (long long)mem->device_bytes, (long long)mem->set_bytes,
          (long long)mem->alone_bytes, mem->same_bits);
  return fclose(f) == 0;
}

int main(int argc, char **argv) {
  bench_args_t args;
  int started = bench_start(argc, argv, NAME, &args);
  if (started >= 0) return started;

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int ok = 1;
  step_row_t steps[SITE_ROWS];
  memset(steps, 0, sizeof steps);
  for (int i = 0; i < SITE_ROWS; i++) {
    ok &= bench_steps(stream, site_counts[i], args.quick, &steps[i]);
    printf("  K=%-4d plain %.3f us, host %.3f us, device %.3f us\n", steps[i].k,
           steps[i].us[1].median, steps[i].us[2].median, steps[i].us[3].median);
    fflush(stdout);
  }
  size_setup_t st;
  size_setup(&st);
  size_row_t sizes[SIZE_ROWS];
  memset(sizes, 0, sizeof sizes);
  for (int i = 0; i < SIZE_ROWS; i++) {
    bench_size(&st, 1024LL << i, args.quick, &sizes[i]);
    ok &= sizes[i].same_bits;
    printf("  n=%-7lld recap %.2f us, raw %.2f us (GPU)\n", sizes[i].n, sizes[i].gpu_us[0].median,
           sizes[i].gpu_us[1].median);
    fflush(stdout);
  }
  size_teardown(&st);
  cost_row_t costs[COST_ROWS];
  memset(costs, 0, sizeof costs);
  for (int i = 0; i < COST_ROWS; i++) bench_costs(stream, cost_sizes[i], args.quick, &costs[i]);
  mem_result_t mem;
  bench_memory(stream, &mem);
  ok &= mem.same_bits;
  print_tables(steps, sizes);
  print_costs(costs);
  print_memory(&mem);
  int written = write_json(args.json_path, args.quick, steps, sizes, costs, &mem);
  if (written) printf("\nresults: %s\n", args.json_path);
  BENCH_CUDA(cudaStreamDestroy(stream));
  if (!ok) fprintf(stderr, NAME ": a correctness check failed (see above)\n");
  return ok && written ? 0 : 1;
}
