/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * serve — an inference loop over requests of varying batch sizes, run eagerly and with a recap
 * graph set (recap/graph_set.h) captured up front or in the background while the loop runs.
 *
 * The model is an MLP of three layers on cuBLAS (dim -> hidden -> hidden -> classes, GELU after
 * the hidden layers, a bias after each); one request is a batch of n inputs, one a column. The
 * trace of batch sizes comes from a seeded generator: n = floor((max_batch + 1)^u) for u
 * uniform in [0, 1) (xorshift32, --seed, default 1234), a log-uniform law: as many requests of
 * 1 to 3 as of 64 to 255, the mix of a server that sees many small batches and a few large
 * ones. Every request copies its n columns of input in, runs the step for its bucket (the
 * smallest power of two >= n, up to --max-batch) and copies its n columns of output back. The
 * ways:
 *
 *   eager               the step run directly for the request's bucket, every GEMM and kernel
 *                       launched from the host;
 *   upfront             recap_graph_set_run on a set captured in recap_graph_set_create
 *                       (RECAP_SET_CAPTURE_UPFRONT), every size before the first request;
 *   background          the same loop on a set whose sizes a helper thread captures while the
 *                       loop runs (RECAP_SET_CAPTURE_BACKGROUND): requests whose bucket is not
 *                       ready yet run the step eagerly;
 *   background, ready   the trace again on that set once every size is graphed.
 *
 * Eager runs pad to the bucket as the graphs do, so that each GEMM has the same shape in every
 * way and cuBLAS runs the same kernel: every way's outputs must equal the eager ones bit for
 * bit. The step follows the stream it is given: it keeps one cuBLAS handle per stream (with a
 * workspace of its own), because the background thread captures it on the set's stream while
 * the loop runs it eagerly on the caller's.
 *
 * Latency is per request, on the host: from the enqueue of the input's copy to the return of
 * cudaStreamSynchronize after the output's copy (a synchronisation per request: a server
 * answers each request before it takes the next). requests/s is the number of requests over
 * the sum of their latencies.
 *
 *     serve [--requests N] [--max-batch B] [--dim D] [--hidden H] [--classes C] [--seed S]
 *           [--bench]                                                         (serve --help)
 *
 * Exit status: 0 every way agrees with eager; 1 a failure or a disagreement; 2 a bad command
 * line; 77 no CUDA device (the test runner's "skipped").
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels.h"
#include "recap.h"
#include "recap/graph_set.h"

#define PROGRAM "serve"
#include "example_check.h"
#include "example_args.h"
enum { EXIT_BAD_USAGE = 2, EXIT_NO_DEVICE = 77, REQUESTS_UNDER_A_TOOL = 24 };
enum { DEFAULT_REQUESTS = 400, BENCH_REQUESTS = 4000 };
/* cuBLAS handles: the caller's stream, and the streams of the sets the way makes. */
enum { MAX_HANDLES = 4 };
/* Inputs are read from a pool of this many pre-generated columns. */
enum { INPUT_POOL_COLUMNS = 4096 };
enum { WAY_EAGER, WAY_UPFRONT, WAY_BACKGROUND, WAY_BACKGROUND_READY, WAYS };
static const char *const WAY_TITLES[WAYS] = {"eager (padded to the bucket)",
                                             "set, captured up front", "set, background capture",
                                             "set, background, all ready"};
/* Each handle's cuBLAS workspace: fixed, so that every GEMM of a shape runs the same algorithm
 * whichever handle enqueues it. */
static const size_t WORKSPACE_BYTES = (size_t)4 << 20;
static const double MiB = 1048576.0;

/* ==========================================================================================
 * Time
 * ======================================================================================== */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ==========================================================================================
 * Options
 * ======================================================================================== */

typedef struct options {
  int requests, max_batch, dim, hidden, classes;
  unsigned seed;
  bool bench, requests_given;
} options_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROGRAM
          " [options]\n"
          "\n"
          "An inference loop (an MLP of three layers on cuBLAS) over a trace of requests of\n"
          "varying batch sizes, run eagerly, with a recap graph set captured up front, and\n"
          "with a set captured in the background while the loop runs; it prints requests/s,\n"
          "p50/p99 latency, the time to the first graph and to the last, the graphs' memory,\n"
          "and checks that every way's outputs equal the eager ones bit for bit.\n"
          "\n"
          "  --requests N   requests in the trace, 1 to 1000000 (default 400; 4000 with --bench)\n"
          "  --max-batch B  the largest batch, and the largest bucket (default 256); buckets\n"
          "                 are the powers of two below it, and B itself\n"
          "  --dim D        input features (default 512)\n"
          "  --hidden H     width of the two hidden layers (default 1024)\n"
          "  --classes C    outputs per request (default 64)\n"
          "  --seed S       seed of the trace, the inputs and the weights (default 1234)\n"
          "  --bench        the full table: a longer trace (unless --requests says otherwise)\n"
          "  -h, --help     this text\n"
          "\n"
          "Exit status: 0 every way agrees with eager; 1 a failure or a disagreement; 2 a bad\n"
          "command line; 77 no CUDA device.\n");
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, options_t *o) {
  enum { OPT_REQUESTS = 256, OPT_MAX_BATCH, OPT_DIM, OPT_HIDDEN, OPT_CLASSES, OPT_SEED, OPT_BENCH };
  static const struct option options[] = {
      {"requests", required_argument, NULL, OPT_REQUESTS},
      {"max-batch", required_argument, NULL, OPT_MAX_BATCH},
      {"dim", required_argument, NULL, OPT_DIM},
      {"hidden", required_argument, NULL, OPT_HIDDEN},
      {"classes", required_argument, NULL, OPT_CLASSES},
      {"seed", required_argument, NULL, OPT_SEED},
      {"bench", no_argument, NULL, OPT_BENCH},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *o = (options_t){.requests = DEFAULT_REQUESTS,
                   .max_batch = 256,
                   .dim = 512,
                   .hidden = 1024,
                   .classes = 64,
                   .seed = 1234};
  int c, seed = 0, index = 0;
  opterr = 0; /* the messages below name the program and the option */
  while ((c = getopt_long(argc, argv, ":h", options, &index)) != -1) {
    const char *arg = optarg;
    switch (c) {
      case OPT_REQUESTS:
        if (!example_parse_int(arg, 1, 1000000, &o->requests)) goto bad_value;
        o->requests_given = true;
        break;
      case OPT_MAX_BATCH:
        if (!example_parse_int(arg, 1, INPUT_POOL_COLUMNS, &o->max_batch)) goto bad_value;
        break;
      case OPT_DIM:
        if (!example_parse_int(arg, 1, 8192, &o->dim)) goto bad_value;
        break;
      case OPT_HIDDEN:
        if (!example_parse_int(arg, 1, 16384, &o->hidden)) goto bad_value;
        break;
      case OPT_CLASSES:
        if (!example_parse_int(arg, 1, 8192, &o->classes)) goto bad_value;
        break;
      case OPT_SEED:
        if (!example_parse_int(arg, 0, 2147483647L, &seed)) goto bad_value;
        o->seed = (unsigned)seed;
        break;
      case OPT_BENCH: o->bench = true; break;
      case 'h': usage(stdout); return 0;
      default: return example_option_error(PROGRAM, c, argv, optind, usage);
    }
    continue;
  bad_value:
    return example_bad_value(PROGRAM, arg, options[index].name);
  }
  if (optind < argc) return example_extra_argument(PROGRAM, argv[optind]);
  if (o->bench && !o->requests_given) o->requests = BENCH_REQUESTS;
  return -1;
}

/* ==========================================================================================
 * The trace
 * ======================================================================================== */

/* A fixed-seed generator (xorshift32): every run and every way sees the same trace. */
static uint32_t next_u32(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static double next_unit(uint32_t *s) { return (double)(next_u32(s) >> 8) / (double)(1u << 24); }

typedef struct trace {
  int count;
  int *batch;         /* requests' batch sizes, 1..max_batch */
  int *input_column;  /* where each request's inputs start in the input pool */
  size_t *out_column; /* where each request's outputs start in a way's output array */
  size_t out_columns; /* the sum of the batch sizes */
} trace_t;

static void trace_make(trace_t *t, const options_t *o) {
  uint32_t rng = (o->seed ^ 0x9e3779b9u) ? (o->seed ^ 0x9e3779b9u) : 1u;
  t->count = o->requests;
  t->batch = host_alloc((size_t)t->count * sizeof *t->batch);
  t->input_column = host_alloc((size_t)t->count * sizeof *t->input_column);
  t->out_column = host_alloc((size_t)t->count * sizeof *t->out_column);
  t->out_columns = 0;
  double log_range = log((double)o->max_batch + 1.0);
  for (int i = 0; i < t->count; i++) {
    int n = (int)floor(exp(next_unit(&rng) * log_range));
    if (n < 1) n = 1;
    if (n > o->max_batch) n = o->max_batch;
    t->batch[i] = n;
    t->input_column[i] = (int)(next_u32(&rng) % (uint32_t)(INPUT_POOL_COLUMNS - n + 1));
    t->out_column[i] = t->out_columns;
    t->out_columns += (size_t)n;
  }
}

static void trace_free(trace_t *t) {
  free(t->batch);
  free(t->input_column);
  free(t->out_column);
}

/* The eager way's bucket: the smallest power of two >= n, or max_batch above the largest power
 * of two below it (the set's RECAP_SIZES_POWERS_OF_TWO rule, checked against
 * recap_graph_set_bucket before the sets run). */
static size_t bucket_of(size_t n, size_t max_batch) {
  size_t b = 1;
  while (b < n) b *= 2;
  return b > max_batch ? max_batch : b;
}

/* ==========================================================================================
 * The model and its step
 * ======================================================================================== */

/* One cuBLAS handle bound to one stream, with its own workspace. */
typedef struct blas_slot {
  cudaStream_t stream;
  cublasHandle_t handle;
  void *workspace;
  bool bound;
} blas_slot_t;

typedef struct model {
  int dim, hidden, classes;
  size_t max_batch;
  float *w1, *b1, *w2, *b2, *w3, *b3; /* weights column-major (out x in), biases */
  float *x;                           /* dim x max_batch: the batch's inputs */
  float *y;                           /* classes x max_batch: its outputs */
  /* The step runs on two threads at once in the background way (the loop and the set's
   * helper), so the table of handles is guarded. */
  pthread_mutex_t lock;
  blas_slot_t slots[MAX_HANDLES];
  cudaStream_t stream; /* the loop's stream */
} model_t;

static float next_uniform(uint32_t *s) { return (float)next_unit(s) * 2.0f - 1.0f; /* [-1, 1) */ }

static float *device_floats(size_t n, cudaStream_t stream) {
  void *p = NULL;
  CHECK_RECAP(recap_malloc(&p, n * sizeof(float), stream));
  return p;
}

static void upload_random(float *device, size_t n, float scale, uint32_t *rng) {
  float *host = host_alloc(n * sizeof *host);
  for (size_t i = 0; i < n; i++) host[i] = scale * next_uniform(rng);
  CHECK_CUDA(cudaMemcpy(device, host, n * sizeof *host, cudaMemcpyHostToDevice));
  free(host);
}

static void model_init(model_t *m, const options_t *o) {
  memset(m, 0, sizeof *m);
  m->dim = o->dim;
  m->hidden = o->hidden;
  m->classes = o->classes;
  m->max_batch = (size_t)o->max_batch;
  CHECK_CUDA(serve_kernels_load());
  CHECK_CUDA(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
  size_t d = (size_t)o->dim, h = (size_t)o->hidden, c = (size_t)o->classes;
  m->w1 = device_floats(h * d, m->stream);
  m->b1 = device_floats(h, m->stream);
  m->w2 = device_floats(h * h, m->stream);
  m->b2 = device_floats(h, m->stream);
  m->w3 = device_floats(c * h, m->stream);
  m->b3 = device_floats(c, m->stream);
  m->x = device_floats(d * m->max_batch, m->stream);
  m->y = device_floats(c * m->max_batch, m->stream);
  for (int i = 0; i < MAX_HANDLES; i++) {
    CHECK_RECAP(recap_malloc(&m->slots[i].workspace, WORKSPACE_BYTES, m->stream));
    CHECK_BLAS(cublasCreate(&m->slots[i].handle));
    /* Deterministic cuBLAS: no atomics, the default math, host scalars. */
    CHECK_BLAS(cublasSetAtomicsMode(m->slots[i].handle, CUBLAS_ATOMICS_NOT_ALLOWED));
    CHECK_BLAS(cublasSetMathMode(m->slots[i].handle, CUBLAS_DEFAULT_MATH));
    CHECK_BLAS(cublasSetPointerMode(m->slots[i].handle, CUBLAS_POINTER_MODE_HOST));
  }
  CHECK_CUDA(cudaStreamSynchronize(m->stream)); /* the uploads below use the legacy stream */
  if (pthread_mutex_init(&m->lock, NULL) != 0) die("pthread_mutex_init failed");

  uint32_t rng = o->seed ? o->seed : 1u;
  upload_random(m->w1, h * d, 2.0f / sqrtf((float)d), &rng);
  upload_random(m->b1, h, 0.1f, &rng);
  upload_random(m->w2, h * h, 2.0f / sqrtf((float)h), &rng);
  upload_random(m->b2, h, 0.1f, &rng);
  upload_random(m->w3, c * h, 1.0f / sqrtf((float)h), &rng);
  upload_random(m->b3, c, 0.1f, &rng);
  CHECK_CUDA(cudaMemset(m->x, 0, d * m->max_batch * sizeof(float)));
}

/* Unbind every handle from its stream: the sets of a way are gone, and their streams with them
 * (a later stream may reuse an address). The device is idle. */
static void model_forget_streams(model_t *m) {
  CHECK_CUDA(cudaDeviceSynchronize());
  /* Each handle goes back to the legacy stream: none keeps a stream that is gone. */
  for (int i = 0; i < MAX_HANDLES; i++) {
    CHECK_BLAS(cublasSetStream(m->slots[i].handle, NULL));
    m->slots[i].bound = false;
  }
}

static void model_destroy(model_t *m) {
  model_forget_streams(m);
  for (int i = 0; i < MAX_HANDLES; i++) {
    CHECK_BLAS(cublasDestroy(m->slots[i].handle));
    CHECK_RECAP(recap_free(m->slots[i].workspace));
  }
  float *blocks[] = {m->w1, m->b1, m->w2, m->b2, m->w3, m->b3, m->x, m->y};
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) CHECK_RECAP(recap_free(blocks[i]));
  CHECK_CUDA(cudaStreamDestroy(m->stream));
  pthread_mutex_destroy(&m->lock);
}

/* The handle for stream: the one bound to it, or a free one bound now. Binding sets the
 * handle's stream and then its workspace (cublasSetStream resets the workspace); it may happen
 * while stream is capturing, which both calls allow. One stream keeps one handle and one
 * workspace, so work on two streams never shares a workspace. */
static recap_status_t handle_for(model_t *m, cudaStream_t stream, cublasHandle_t *handle) {
  recap_status_t st = RECAP_SUCCESS;
  pthread_mutex_lock(&m->lock);
  blas_slot_t *slot = NULL;
  for (int i = 0; i < MAX_HANDLES && !slot; i++)
    if (m->slots[i].bound && m->slots[i].stream == stream) slot = &m->slots[i];
  for (int i = 0; i < MAX_HANDLES && !slot; i++) {
    if (m->slots[i].bound) continue;
    cublasStatus_t b = cublasSetStream(m->slots[i].handle, stream);
    if (b == CUBLAS_STATUS_SUCCESS)
      b = cublasSetWorkspace(m->slots[i].handle, m->slots[i].workspace, WORKSPACE_BYTES);
    if (b != CUBLAS_STATUS_SUCCESS) {
      st = recap_set_last_error(RECAP_ERROR_CUDA,
                                "serve step: binding a cuBLAS handle to stream %p failed: %s",
                                (void *)stream, cublasGetStatusName(b));
      break;
    }
    m->slots[i].stream = stream;
    m->slots[i].bound = true;
    slot = &m->slots[i];
  }
  if (!slot && st == RECAP_SUCCESS)
    st = recap_set_last_error(RECAP_ERROR_BUSY,
                              "serve step: stream %p needs a cuBLAS handle and all %d are bound to "
                              "other streams (raise MAX_HANDLES)",
                              (void *)stream, MAX_HANDLES);
  if (slot) *handle = slot->handle;
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* out (rows x columns) = act(W in + bias), W rows x inner. */
static recap_status_t layer(cublasHandle_t blas, const float *w, const float *in, float *out,
                            const float *bias, int rows, int inner, size_t columns, int gelu,
                            cudaStream_t stream) {
  static const float one = 1.0f, zero = 0.0f;
  cublasStatus_t b = cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, rows, (int)columns, inner, &one, w,
                                 rows, in, inner, &zero, out, rows);
  if (b != CUBLAS_STATUS_SUCCESS)
    return recap_set_last_error(RECAP_ERROR_CUDA,
                                "serve step: cublasSgemm (%d x %zu x %d) failed: %s", rows, columns,
                                inner, cublasGetStatusName(b));
  cudaError_t e = serve_bias_act(out, bias, (size_t)rows, columns, gelu, stream);
  if (e != cudaSuccess)
    return recap_set_last_error(RECAP_ERROR_CUDA, "serve step: the bias kernel failed: %s",
                                cudaGetErrorName(e));
  return RECAP_SUCCESS;
}

/* The set's step: the MLP over the first `size` columns of m->x into m->y, on `stream`, with
 * the hidden activations from recap_malloc (freed before it returns). */
static recap_status_t serve_step(size_t size, recap_stream_t stream, void *user_data) {
  model_t *m = user_data;
  cublasHandle_t blas = NULL;
  recap_status_t st = handle_for(m, stream, &blas);
  if (st != RECAP_SUCCESS) return st;
  float *h1 = NULL, *h2 = NULL;
  size_t hidden_bytes = (size_t)m->hidden * size * sizeof(float);
  st = recap_malloc((void **)&h1, hidden_bytes, stream);
  if (st == RECAP_SUCCESS) st = recap_malloc((void **)&h2, hidden_bytes, stream);
  if (st == RECAP_SUCCESS)
    st = layer(blas, m->w1, m->x, h1, m->b1, m->hidden, m->dim, size, 1, stream);
  if (st == RECAP_SUCCESS)
    st = layer(blas, m->w2, h1, h2, m->b2, m->hidden, m->hidden, size, 1, stream);
  if (st == RECAP_SUCCESS)
    st = layer(blas, m->w3, h2, m->y, m->b3, m->classes, m->hidden, size, 0, stream);
  /* recap_free is stream-ordered: the blocks are reused only after this work. */
  if (h2) CHECK_RECAP(recap_free(h2));
  if (h1) CHECK_RECAP(recap_free(h1));
  return st;
}

/* ==========================================================================================
 * The loop
 * ======================================================================================== */

typedef struct outcome {
  float *outputs;       /* classes x trace.out_columns: every request's outputs, in order */
  double *latency_us;   /* per request */
  double total_seconds; /* the sum of the latencies */
  double p50_us, p99_us, requests_per_second;
  double first_graph_ms, all_graphed_ms; /* from the set's create; < 0: not applicable */
  double graph_mib;                      /* the set's pool reserved + executables */
  long graphed;                          /* requests that replayed a graph */
  bool ran;
} outcome_t;

typedef struct loop {
  const trace_t *trace;
  model_t *model;
  const float *inputs; /* pinned: INPUT_POOL_COLUMNS columns of dim floats */
  float *staging;      /* pinned: classes x max_batch, a request's outputs */
} loop_t;

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile by the nearest rank. */
static double quantile(const double *values, int count, double q) {
  double *sorted = host_alloc((size_t)count * sizeof *sorted);
  memcpy(sorted, values, (size_t)count * sizeof *sorted);
  qsort(sorted, (size_t)count, sizeof *sorted, compare_doubles);
  int rank = (int)ceil(q * count);
  if (rank < 1) rank = 1;
  double v = sorted[rank - 1];
  free(sorted);
  return v;
}

/* Every request of the trace, in order: set NULL runs the step eagerly for the bucket. */
static void run_trace(const loop_t *l, recap_graph_set_t set, outcome_t *out) {
  model_t *m = l->model;
  const trace_t *t = l->trace;
  size_t d = (size_t)m->dim, c = (size_t)m->classes;
  cudaStream_t s = m->stream;
  out->outputs = host_alloc(c * t->out_columns * sizeof(float));
  out->latency_us = host_alloc((size_t)t->count * sizeof(double));
  out->total_seconds = 0;
  out->graphed = 0;
  for (int i = 0; i < t->count; i++) {
    size_t n = (size_t)t->batch[i];
    double start = now_seconds();
    CHECK_CUDA(cudaMemcpyAsync(m->x, l->inputs + (size_t)t->input_column[i] * d,
                               n * d * sizeof(float), cudaMemcpyHostToDevice, s));
    if (set) {
      size_t padded = 0;
      int graphed = 0;
      CHECK_RECAP(recap_graph_set_run(set, n, s, &padded, &graphed));
      if (padded != bucket_of(n, m->max_batch))
        die("request %d: recap_graph_set_run ran size %zu for n = %zu, expected %zu", i, padded, n,
            bucket_of(n, m->max_batch));
      out->graphed += graphed;
    } else {
      CHECK_RECAP(serve_step(bucket_of(n, m->max_batch), s, m));
    }
    CHECK_CUDA(cudaMemcpyAsync(l->staging, m->y, n * c * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    double latency = now_seconds() - start;
    out->latency_us[i] = latency * 1e6;
    out->total_seconds += latency;
    memcpy(out->outputs + t->out_column[i] * c, l->staging, n * c * sizeof(float));
  }
  out->p50_us = quantile(out->latency_us, t->count, 0.50);
  out->p99_us = quantile(out->latency_us, t->count, 0.99);
  out->requests_per_second = (double)t->count / out->total_seconds;
  out->ran = true;
}

/* Fails unless every member of the set is ready (or, with RECAP_DISABLE_GRAPHS=1, left eager),
 * naming those that are not and why. */
static void expect_all_ready(recap_graph_set_t set, const char *way) {
  recap_member_state_t expected = !recap_graphs_enabled() ? RECAP_MEMBER_EAGER : RECAP_MEMBER_READY;
  size_t count = 0;
  CHECK_RECAP(recap_graph_set_sizes(set, NULL, 0, &count));
  size_t *sizes = host_alloc(count * sizeof *sizes);
  CHECK_RECAP(recap_graph_set_sizes(set, sizes, count, &count));
  bool all = true;
  for (size_t i = 0; i < count; i++) {
    recap_graph_set_member_t member = RECAP_GRAPH_SET_MEMBER_INIT;
    CHECK_RECAP(recap_graph_set_member(set, sizes[i], &member));
    if (member.state == expected) continue;
    printf("  %s: size %zu is not graphed (state %d, %s: %s)\n", way, sizes[i], (int)member.state,
           recap_status_name(member.status), member.message);
    all = false;
  }
  free(sizes);
  if (!all) die("%s: not every size was graphed (see above)", way);
}

static void set_figures(recap_graph_set_t set, outcome_t *out) {
  recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
  CHECK_RECAP(recap_graph_set_info(set, &info));
  out->first_graph_ms = info.first_ready_seconds * 1e3;
  out->all_graphed_ms = info.all_ready_seconds * 1e3;
  out->graph_mib = (double)(info.pool_reserved_bytes + info.exec_bytes) / MiB;
}

static recap_graph_set_t make_set(model_t *m, recap_set_capture_t capture) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.rule = RECAP_SIZES_POWERS_OF_TWO;
  o.rule_max = m->max_batch;
  o.capture = capture;
  recap_graph_set_t set = NULL;
  CHECK_RECAP(recap_graph_set_create(&set, serve_step, m, &o));
  /* The eager way pads as the set does. */
  for (size_t n = 1; n <= m->max_batch; n++) {
    size_t b = 0;
    CHECK_RECAP(recap_graph_set_bucket(set, n, &b));
    if (b != bucket_of(n, m->max_batch))
      die("recap_graph_set_bucket(%zu) is %zu, the eager way pads to %zu", n, b,
          bucket_of(n, m->max_batch));
  }
  return set;
}

static void run_ways(const loop_t *l, outcome_t *outcomes) {
  model_t *m = l->model;
  for (int w = 0; w < WAYS; w++) outcomes[w].first_graph_ms = outcomes[w].all_graphed_ms = -1;

  run_trace(l, NULL, &outcomes[WAY_EAGER]);

  recap_graph_set_t set = make_set(m, RECAP_SET_CAPTURE_UPFRONT);
  expect_all_ready(set, "upfront");
  set_figures(set, &outcomes[WAY_UPFRONT]);
  run_trace(l, set, &outcomes[WAY_UPFRONT]);
  CHECK_RECAP(recap_graph_set_destroy(set));
  model_forget_streams(m);

  set = make_set(m, RECAP_SET_CAPTURE_BACKGROUND);
  run_trace(l, set, &outcomes[WAY_BACKGROUND]);
  CHECK_RECAP(recap_graph_set_wait(set));
  expect_all_ready(set, "background");
  set_figures(set, &outcomes[WAY_BACKGROUND]);
  run_trace(l, set, &outcomes[WAY_BACKGROUND_READY]);
  set_figures(set, &outcomes[WAY_BACKGROUND_READY]);
  CHECK_RECAP(recap_graph_set_destroy(set));
  model_forget_streams(m);
}

/* ==========================================================================================
 * Comparing and printing
 * ======================================================================================== */

/* Whether b's outputs equal the reference's bit for bit; if not, says where they first differ. */
static bool same_outputs(const outcome_t *a, const outcome_t *b, const trace_t *t, int classes,
                         const char *name) {
  size_t c = (size_t)classes;
  for (int i = 0; i < t->count; i++) {
    size_t at = t->out_column[i] * c, n = (size_t)t->batch[i] * c;
    if (memcmp(a->outputs + at, b->outputs + at, n * sizeof(float)) == 0) continue;
    size_t k = 0;
    while (a->outputs[at + k] == b->outputs[at + k]) k++;
    printf(
        "  %s: request %d (batch %d) differs first at output %zu of column %zu: %.9g, eager "
        "%.9g\n",
        name, i, t->batch[i], k % c, k / c, (double)b->outputs[at + k], (double)a->outputs[at + k]);
    return false;
  }
  return true;
}

static void print_ms(double ms) {
  if (ms < 0)
    printf(" %12s", "-");
  else
    printf(" %12.1f", ms);
}

static bool under_a_tool(void) {
  /* Under a CUDA tool (RECAP_UNDER_TOOL=1, as tools/gpu-check sets for compute-sanitizer, or a
   * profiler's injected library) every launch costs milliseconds: the trace is cut short. */
  const char *flag = getenv("RECAP_UNDER_TOOL"), *injected = getenv("CUDA_INJECTION64_PATH");
  return (flag && strcmp(flag, "1") == 0) || (injected && *injected);
}

int main(int argc, char **argv) {
  options_t o;
  int code = parse_args(argc, argv, &o);
  if (code >= 0) return code;

  int devices = 0;
  if (recap_device_count(&devices) != RECAP_SUCCESS || devices < 1) {
    printf(PROGRAM ": this example needs a CUDA device (%s)\n",
           recap_last_error()[0] ? recap_last_error() : "none found");
    return EXIT_NO_DEVICE;
  }
  if (under_a_tool() && o.requests > REQUESTS_UNDER_A_TOOL) {
    printf(PROGRAM ": under a CUDA tool: %d requests instead of %d\n", REQUESTS_UNDER_A_TOOL,
           o.requests);
    o.requests = REQUESTS_UNDER_A_TOOL;
  }
  CHECK_CUDA(cudaSetDevice(0));
  /* The memory the example reports counts the graphs' executables, which only a capture with a
   * budget measures unless this option is on. */
  CHECK_RECAP(recap_option_set("measure_exec_memory", "1"));

  trace_t trace;
  trace_make(&trace, &o);
  model_t m;
  model_init(&m, &o);
  loop_t l = {.trace = &trace, .model = &m};
  float *inputs = NULL, *staging = NULL;
  size_t input_floats = (size_t)INPUT_POOL_COLUMNS * (size_t)o.dim;
  CHECK_CUDA(cudaMallocHost((void **)&inputs, input_floats * sizeof(float)));
  CHECK_CUDA(cudaMallocHost((void **)&staging, (size_t)o.classes * m.max_batch * sizeof(float)));
  uint32_t rng = (o.seed + 1u) ? o.seed + 1u : 1u;
  for (size_t i = 0; i < input_floats; i++) inputs[i] = next_uniform(&rng);
  l.inputs = inputs;
  l.staging = staging;

  printf(PROGRAM
         ": %d requests, batches 1..%d (log-uniform, seed %u, %zu inputs in all), MLP "
         "%d -> %d -> %d -> %d\n",
         trace.count, o.max_batch, o.seed, trace.out_columns, o.dim, o.hidden, o.hidden, o.classes);
  /* Eager runs of every bucket with every handle first: cuBLAS and the kernel load their
   * modules, each handle makes whatever it makes on its first GEMMs, and the loop's cache holds
   * the step's temporaries, outside every capture and every timing. A handle's first use may
   * then be inside a capture (the set's stream) without initialising anything there. */
  for (int slot = MAX_HANDLES - 1; slot >= 0; slot--) {
    model_forget_streams(&m);
    CHECK_BLAS(cublasSetStream(m.slots[slot].handle, m.stream));
    CHECK_BLAS(cublasSetWorkspace(m.slots[slot].handle, m.slots[slot].workspace, WORKSPACE_BYTES));
    m.slots[slot].stream = m.stream;
    m.slots[slot].bound = true;
    for (size_t b = 1;; b *= 2) {
      size_t size = b > m.max_batch ? m.max_batch : b;
      CHECK_RECAP(serve_step(size, m.stream, &m));
      if (size == m.max_batch) break;
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(m.stream));

  outcome_t outcomes[WAYS];
  memset(outcomes, 0, sizeof outcomes);
  run_ways(&l, outcomes);

  bool all_same = true;
  printf("\n%-30s %10s %9s %9s %12s %12s %10s %9s %10s\n", "way", "requests/s", "p50 us", "p99 us",
         "1st graph ms", "all graph ms", "graph MiB", "graphed", "identical");
  for (int w = 0; w < WAYS; w++) {
    const outcome_t *x = &outcomes[w];
    bool same =
        w == WAY_EAGER || same_outputs(&outcomes[WAY_EAGER], x, &trace, o.classes, WAY_TITLES[w]);
    /* With every size ready before the loop, every request replays a graph; with graphs
     * disabled, none does. */
    long expected = !recap_graphs_enabled() ? 0 : trace.count;
    if ((w == WAY_UPFRONT || w == WAY_BACKGROUND_READY) && x->graphed != expected) {
      printf("  %s: %ld of %d requests replayed a graph, expected %ld\n", WAY_TITLES[w], x->graphed,
             trace.count, expected);
      same = false;
    }
    all_same = all_same && same;
    printf("%-30s %10.0f %9.1f %9.1f", WAY_TITLES[w], x->requests_per_second, x->p50_us, x->p99_us);
    print_ms(x->first_graph_ms);
    print_ms(x->all_graphed_ms);
    if (w == WAY_EAGER)
      printf(" %10s", "-");
    else
      printf(" %10.1f", x->graph_mib);
    printf(" %8.0f%% %10s\n", 100.0 * (double)x->graphed / (double)trace.count,
           w == WAY_EAGER ? "reference"
           : same         ? "yes"
                          : "NO");
  }
  printf(
      "\nlatency: per request, host clock from the input's copy to the synchronisation after "
      "the output's copy; requests/s over the sum of the latencies. 1st/all graph: from the "
      "set's create; graph MiB: the set's pool reserved + its executables.\n");
  printf("speed-up over eager: upfront %.2fx, background %.2fx, background once ready %.2fx\n",
         outcomes[WAY_UPFRONT].requests_per_second / outcomes[WAY_EAGER].requests_per_second,
         outcomes[WAY_BACKGROUND].requests_per_second / outcomes[WAY_EAGER].requests_per_second,
         outcomes[WAY_BACKGROUND_READY].requests_per_second /
             outcomes[WAY_EAGER].requests_per_second);
  printf("\n%s\n", all_same ? "every way gives the eager outputs bit for bit"
                            : "THE WAYS DISAGREE (see above)");

  for (int w = 0; w < WAYS; w++) {
    free(outcomes[w].outputs);
    free(outcomes[w].latency_us);
  }
  CHECK_CUDA(cudaFreeHost(inputs));
  CHECK_CUDA(cudaFreeHost(staging));
  model_destroy(&m);
  trace_free(&trace);
  CHECK_RECAP(recap_memory_check());
  /* Every buffer is back in recap's cache: give the cached segments back to the device. */
  CHECK_RECAP(recap_empty_cache());
  return all_same ? 0 : 1;
}
