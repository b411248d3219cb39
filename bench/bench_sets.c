/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_sets — graph sets over sizes (recap/graph_set.h): their memory, their capture time,
 * background capture beside an eager loop, and the host cost of choosing a member.
 *
 * (a) memory: 8 buckets b = 512, 256, .., 4 of PyTorch's anchor workload, three GEMMs of
 *     4096 x 4096 (y1 = W1 x, y2 = W2 y1, out = W3 y2, x of b columns; y1 and y2 temporaries
 *     of b x 4096 floats allocated and freed inside the step, out a buffer of the caller's), as
 *
 *       nodes           CUDA's graph memory nodes: a raw capture per bucket with cudaMallocAsync
 *                       / cudaFreeAsync for the temporaries; the driver's reserved graph memory
 *                       (cudaGraphMemAttrReservedMemCurrent) after launching all 8;
 *       set             a recap graph set of the 8 sizes captured up front, largest first, into
 *                       one pool: its pool's reserved bytes (recap_graph_set_info), classic
 *                       segments;
 *       set vmm         the same with expandable_segments=1 (segments on CUDA virtual memory);
 *       alone, alone vmm  a set of the largest size only: what the largest bucket needs.
 *
 *     For each: reserved MiB, against the nodes' figure and against the largest bucket alone
 *     (goals: <= the nodes' and <= 1.25x alone; PyTorch's shared pool, bench/torch_sets.py, is
 *     set beside it by bench/report.py), the executables' bytes, and the time to capture and
 *     instantiate the 8. Every bucket's output is compared with an eager run's, bit for bit.
 *
 * (b) background capture: an eager loop (steps of 8 rows of a 3-GEMM model of width 512, on the
 *     caller's stream, a synchronisation every 16 steps) alone, then while a set of 32 sizes
 *     (8, 16, .., 256) is captured in the background, until every size is ready; steps/s
 *     during the capture against steps/s alone (goal >= 90%), and the time until every size is
 *     graphed, for the helper's default share of time (options.background_share, 0.2) and for
 *     shares of 1 (no pause), 0.5 and 0.1. Each size's replay is then compared with its eager
 *     run, bit for bit.
 *
 * (c) the host cost of recap_graph_set_run on a ready member against a bare recap_graph_replay
 *     of the same member's graph (one-kernel steps, batches of the two alternating).
 *
 * Tables of figures and ratios, never pass/fail on them; a failed call or outputs that differ
 * make the exit status 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "common.h"
#include "recap/graph_set.h"

#define NAME "bench_sets"
#define ALONE_GOAL 1.25
#define BACKGROUND_GOAL 0.90

enum { BUCKETS = 8, WIDTH = 4096, MAX_HANDLES = 4 };
static const size_t buckets[BUCKETS] = {512, 256, 128, 64, 32, 16, 8, 4};
/* (b): the model, its sizes and the eager loop. */
enum { BG_WIDTH = 512, BG_SIZES = 32, BG_STEP = 8, BG_LOOP_SIZE = 8, BG_BATCH = 16 };
/* (c) */
enum { RUN_SIZES = 8, CALLS_PER_BATCH = 64 };
static const double MiB = 1048576.0;
/* Every handle's workspace: fixed and outside recap, so that every way's GEMMs run the same
 * algorithm and no pool counts it. */
static const size_t WORKSPACE_BYTES = (size_t)32 << 20;

static int all_ok = 1;

#define BENCH_BLAS(call)                                                                    \
  do {                                                                                      \
    cublasStatus_t blas_ = (call);                                                          \
    if (blas_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      fprintf(stderr, NAME ": %s failed: %s at %s:%d\n", #call, cublasGetStatusName(blas_), \
              __FILE__, __LINE__);                                                          \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

/* ==========================================================================================
 * A model of three GEMMs, its step, and one cuBLAS handle per stream
 * ======================================================================================== */

typedef struct blas_slot {
  cudaStream_t stream;
  cublasHandle_t handle;
  void *workspace;
  int bound;
} blas_slot_t;

typedef struct model {
  int width;
  size_t max_batch;
  float *x, *w[3], *out; /* cudaMalloc: x and out width x max_batch, w width x width */
  /* Temporaries from cudaMallocAsync instead of recap_malloc (the memory nodes' way). */
  int cuda_async;
  /* The step runs on the caller's thread and the set's helper at once in (b). */
  pthread_mutex_t lock;
  blas_slot_t slots[MAX_HANDLES];
} model_t;

static void fill_random(float *device, size_t n, float scale, uint32_t *rng) {
  float *host = bench_calloc(NAME, n, sizeof *host);
  for (size_t i = 0; i < n; i++) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 17;
    *rng ^= *rng << 5;
    host[i] = scale * ((float)(*rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f);
  }
  BENCH_CUDA(cudaMemcpy(device, host, n * sizeof *host, cudaMemcpyHostToDevice));
  free(host);
}

static void model_init(model_t *m, int width, size_t max_batch, uint32_t seed) {
  memset(m, 0, sizeof *m);
  m->width = width;
  m->max_batch = max_batch;
  size_t w = (size_t)width;
  BENCH_CUDA(cudaMalloc((void **)&m->x, w * max_batch * sizeof(float)));
  BENCH_CUDA(cudaMalloc((void **)&m->out, w * max_batch * sizeof(float)));
  uint32_t rng = seed;
  fill_random(m->x, w * max_batch, 1.0f, &rng);
  for (int i = 0; i < 3; i++) {
    BENCH_CUDA(cudaMalloc((void **)&m->w[i], w * w * sizeof(float)));
    /* Scaled so that the activations stay near 1 through the three layers. */
    fill_random(m->w[i], w * w, 1.7f / sqrtf((float)w), &rng);
  }
  for (int i = 0; i < MAX_HANDLES; i++) {
    BENCH_CUDA(cudaMalloc(&m->slots[i].workspace, WORKSPACE_BYTES));
    BENCH_BLAS(cublasCreate(&m->slots[i].handle));
    BENCH_BLAS(cublasSetAtomicsMode(m->slots[i].handle, CUBLAS_ATOMICS_NOT_ALLOWED));
    BENCH_BLAS(cublasSetMathMode(m->slots[i].handle, CUBLAS_DEFAULT_MATH));
  }
  if (pthread_mutex_init(&m->lock, NULL) != 0) {
    fprintf(stderr, NAME ": pthread_mutex_init failed\n");
    exit(1);
  }
}

/* The device is idle and no set is left: streams may be destroyed and their addresses reused. */
static void model_forget_streams(model_t *m) {
  BENCH_CUDA(cudaDeviceSynchronize());
  /* Each handle goes back to the legacy stream: none keeps a stream that is gone. */
  for (int i = 0; i < MAX_HANDLES; i++) {
    BENCH_BLAS(cublasSetStream(m->slots[i].handle, NULL));
    m->slots[i].bound = 0;
  }
}

static recap_status_t gemm_step(size_t size, recap_stream_t stream, void *user_data);

/* Every handle runs the step eagerly for every size on s, so that none makes its first GEMM
 * (where cuBLAS may initialise the handle) inside a capture; cuBLAS loads the kernels of every
 * shape here too. Ends with no handle bound. */
static void model_warm(model_t *m, const size_t *sizes, size_t count, cudaStream_t s) {
  for (int slot = 0; slot < MAX_HANDLES; slot++) {
    model_forget_streams(m);
    BENCH_BLAS(cublasSetStream(m->slots[slot].handle, s));
    BENCH_BLAS(
        cublasSetWorkspace(m->slots[slot].handle, m->slots[slot].workspace, WORKSPACE_BYTES));
    m->slots[slot].stream = s;
    m->slots[slot].bound = 1;
    for (size_t i = 0; i < count; i++) BENCH_RECAP(gemm_step(sizes[i], s, m));
  }
  model_forget_streams(m);
}

static void model_destroy(model_t *m) {
  model_forget_streams(m);
  for (int i = 0; i < MAX_HANDLES; i++) {
    BENCH_BLAS(cublasDestroy(m->slots[i].handle));
    BENCH_CUDA(cudaFree(m->slots[i].workspace));
  }
  BENCH_CUDA(cudaFree(m->x));
  BENCH_CUDA(cudaFree(m->out));
  for (int i = 0; i < 3; i++) BENCH_CUDA(cudaFree(m->w[i]));
  pthread_mutex_destroy(&m->lock);
}

/* The handle bound to stream, or a free one bound now (stream, then workspace: cublasSetStream
 * resets the workspace). Binding may happen while stream is capturing. */
static recap_status_t handle_for(model_t *m, cudaStream_t stream, cublasHandle_t *handle) {
  recap_status_t st = RECAP_SUCCESS;
  blas_slot_t *slot = NULL;
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < MAX_HANDLES && !slot; i++)
    if (m->slots[i].bound && m->slots[i].stream == stream) slot = &m->slots[i];
  for (int i = 0; i < MAX_HANDLES && !slot; i++) {
    if (m->slots[i].bound) continue;
    cublasStatus_t b = cublasSetStream(m->slots[i].handle, stream);
    if (b == CUBLAS_STATUS_SUCCESS)
      b = cublasSetWorkspace(m->slots[i].handle, m->slots[i].workspace, WORKSPACE_BYTES);
    if (b != CUBLAS_STATUS_SUCCESS) {
      st = recap_set_last_error(RECAP_ERROR_CUDA,
                                NAME " step: binding a cuBLAS handle to stream %p failed: %s",
                                (void *)stream, cublasGetStatusName(b));
      break;
    }
    m->slots[i].stream = stream;
    m->slots[i].bound = 1;
    slot = &m->slots[i];
  }
  if (!slot && st == RECAP_SUCCESS)
    st = recap_set_last_error(RECAP_ERROR_BUSY,
                              NAME " step: stream %p needs a cuBLAS handle and all %d are bound",
                              (void *)stream, MAX_HANDLES);
  if (slot) *handle = slot->handle;
  pthread_mutex_unlock(&m->lock);
  return st;
}

static recap_status_t temp_alloc(const model_t *m, float **p, size_t bytes, cudaStream_t s) {
  if (!m->cuda_async) return recap_malloc((void **)p, bytes, s);
  cudaError_t e = cudaMallocAsync((void **)p, bytes, s);
  if (e != cudaSuccess)
    return recap_set_last_error(RECAP_ERROR_CUDA, NAME " step: cudaMallocAsync(%zu) failed: %s",
                                bytes, cudaGetErrorName(e));
  return RECAP_SUCCESS;
}

static void temp_free(const model_t *m, float *p, cudaStream_t s) {
  if (!p) return;
  if (m->cuda_async)
    BENCH_CUDA(cudaFreeAsync(p, s));
  else
    BENCH_RECAP(recap_free(p));
}

/* The step: out[:, :size] = W3 W2 W1 x[:, :size], the two intermediate products temporaries. */
static recap_status_t gemm_step(size_t size, recap_stream_t stream, void *user_data) {
  model_t *m = user_data;
  static const float one = 1.0f, zero = 0.0f;
  cublasHandle_t blas;
  recap_status_t st = handle_for(m, stream, &blas);
  if (st != RECAP_SUCCESS) return st;
  int w = m->width, n = (int)size;
  size_t bytes = (size_t)w * size * sizeof(float);
  float *y1 = NULL, *y2 = NULL;
  st = temp_alloc(m, &y1, bytes, stream);
  if (st == RECAP_SUCCESS) st = temp_alloc(m, &y2, bytes, stream);
  const float *in[3] = {m->x, y1, y2};
  float *out[3] = {y1, y2, m->out};
  for (int i = 0; i < 3 && st == RECAP_SUCCESS; i++) {
    cublasStatus_t b = cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, w, n, w, &one, m->w[i], w, in[i],
                                   w, &zero, out[i], w);
    if (b != CUBLAS_STATUS_SUCCESS)
      st = recap_set_last_error(RECAP_ERROR_CUDA, NAME " step: GEMM %d of size %zu failed: %s",
                                i + 1, size, cublasGetStatusName(b));
  }
  temp_free(m, y2, stream);
  temp_free(m, y1, stream);
  return st;
}

/* out's first `size` columns, on the host (the device idle first). */
static void read_out(const model_t *m, size_t size, float *host) {
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(
      cudaMemcpy(host, m->out, (size_t)m->width * size * sizeof(float), cudaMemcpyDeviceToHost));
}

static int same_as(const float *a, const float *b, size_t floats, const char *what, size_t size) {
  if (memcmp(a, b, floats * sizeof(float)) == 0) return 1;
  size_t i = 0;
  while (a[i] == b[i]) i++;
  fprintf(stderr, NAME ": %s, size %zu: output %zu is %.9g, eager %.9g\n", what, size, i,
          (double)b[i], (double)a[i]);
  all_ok = 0;
  return 0;
}

/* share: options.background_share (0: the default). */
static recap_graph_set_t make_set(model_t *m, const size_t *sizes, size_t count,
                                  recap_set_capture_t capture, double share) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = sizes;
  o.size_count = count;
  o.capture = capture;
  o.background_share = share;
  recap_graph_set_t set = NULL;
  BENCH_RECAP(recap_graph_set_create(&set, gemm_step, m, &o));
  return set;
}

/* How many members are not ready; each is reported with its reason. */
static int members_not_ready(recap_graph_set_t set, const size_t *sizes, size_t count,
                             const char *what) {
  int missing = 0;
  for (size_t i = 0; i < count; i++) {
    recap_graph_set_member_t member = RECAP_GRAPH_SET_MEMBER_INIT;
    BENCH_RECAP(recap_graph_set_member(set, sizes[i], &member));
    if (member.state == RECAP_MEMBER_READY) continue;
    fprintf(stderr, NAME ": %s: size %zu is not ready (state %d, %s: %s)\n", what, sizes[i],
            (int)member.state, recap_status_name(member.status), member.message);
    missing++;
  }
  return missing;
}

/* ==========================================================================================
 * (a) memory of 8 buckets
 * ======================================================================================== */

enum { W_NODES, W_SET, W_SET_VMM, W_ALONE, W_ALONE_VMM, W_COUNT };
static const char *const way_names[W_COUNT] = {"nodes", "set", "set_vmm", "alone", "alone_vmm"};
static const char *const way_labels[W_COUNT] = {"graph memory nodes", "recap set, 8 sizes",
                                                "recap set, 8 sizes, VMM", "recap set, 512 alone",
                                                "recap set, 512 alone, VMM"};

typedef struct memory_result {
  int done;
  const char *skipped;
  int64_t reserved_bytes; /* the set's pool, or the driver's graph memory */
  int64_t exec_bytes;     /* the set's executables (recap_graph_set_info) */
  double capture_ms;      /* capture + instantiate of every size */
  double capture_sum_ms;  /* the members' capture_seconds, summed */
  int outputs_match;
} memory_result_t;

static int64_t graph_mem(int device, enum cudaGraphMemAttributeType attr) {
  uint64_t v = 0;
  BENCH_CUDA(cudaDeviceGetGraphMemAttribute(device, attr, &v));
  return (int64_t)v;
}

static size_t out_floats(size_t b) { return (size_t)WIDTH * b; }

static void run_nodes(model_t *m, cudaStream_t s, float *const *reference, float *host,
                      memory_result_t *r) {
  int device = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaDeviceGraphMemTrim(device));
  uint64_t zero = 0;
  BENCH_CUDA(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &zero));
  BENCH_CUDA(cudaDeviceSetGraphMemAttribute(device, cudaGraphMemAttrReservedMemHigh, &zero));
  cudaGraphExec_t execs[BUCKETS];
  m->cuda_async = 1;
  uint64_t t0 = bench_now_ns();
  for (int k = 0; k < BUCKETS; k++) {
    cudaGraph_t graph = NULL;
    BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    recap_status_t st = gemm_step(buckets[k], s, m);
    BENCH_CUDA(cudaStreamEndCapture(s, &graph));
    BENCH_RECAP(st);
    BENCH_CUDA(cudaGraphInstantiateWithFlags(&execs[k], graph, 0));
    BENCH_CUDA(cudaGraphDestroy(graph));
  }
  r->capture_ms = (double)(bench_now_ns() - t0) / 1e6;
  m->cuda_async = 0;
  r->outputs_match = 1;
  for (int k = 0; k < BUCKETS; k++) {
    BENCH_CUDA(cudaGraphLaunch(execs[k], s));
    read_out(m, buckets[k], host);
    r->outputs_match &= same_as(reference[k], host, out_floats(buckets[k]), "nodes", buckets[k]);
  }
  r->reserved_bytes = graph_mem(device, cudaGraphMemAttrReservedMemCurrent);
  r->capture_sum_ms = r->capture_ms;
  r->done = 1;
  for (int k = 0; k < BUCKETS; k++) BENCH_CUDA(cudaGraphExecDestroy(execs[k]));
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaDeviceGraphMemTrim(device));
  model_forget_streams(m);
}

static int set_vmm(int on) {
  recap_status_t st = recap_option_set("expandable_segments", on ? "1" : "0");
  if (st != RECAP_SUCCESS) {
    fprintf(stderr, NAME ": recap_option_set(expandable_segments, %d) FAILED: %s: %s\n", on,
            recap_status_name(st), recap_last_error());
    all_ok = 0;
    return 0;
  }
  return 1;
}

static void run_set_way(int way, model_t *m, cudaStream_t s, float *const *reference, float *host,
                        memory_result_t *r) {
  int vmm = way == W_SET_VMM || way == W_ALONE_VMM;
  size_t count = way == W_ALONE || way == W_ALONE_VMM ? 1 : BUCKETS;
  /* The option is read when the allocator next starts from an empty cache. */
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_RECAP(recap_empty_cache());
  if (!set_vmm(vmm)) {
    r->skipped = "option refused";
    return;
  }
  uint64_t t0 = bench_now_ns();
  recap_graph_set_t set = make_set(m, buckets, count, RECAP_SET_CAPTURE_UPFRONT, 0);
  r->capture_ms = (double)(bench_now_ns() - t0) / 1e6;
  if (members_not_ready(set, buckets, count, way_labels[way])) {
    r->skipped = "capture failed";
    all_ok = 0;
  } else {
    recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
    BENCH_RECAP(recap_graph_set_info(set, &info));
    r->reserved_bytes = info.pool_reserved_bytes;
    r->exec_bytes = info.exec_bytes;
    r->outputs_match = 1;
    for (size_t k = 0; k < count; k++) {
      recap_graph_set_member_t member = RECAP_GRAPH_SET_MEMBER_INIT;
      BENCH_RECAP(recap_graph_set_member(set, buckets[k], &member));
      r->capture_sum_ms += member.capture_seconds * 1e3;
      int graphed = 0;
      BENCH_RECAP(recap_graph_set_run(set, buckets[k], s, NULL, &graphed));
      if (!graphed) {
        fprintf(stderr, NAME ": %s: size %zu ran eagerly, its graph ready\n", way_labels[way],
                buckets[k]);
        all_ok = 0;
      }
      read_out(m, buckets[k], host);
      r->outputs_match &=
          same_as(reference[k], host, out_floats(buckets[k]), way_labels[way], buckets[k]);
    }
    r->done = 1;
  }
  BENCH_RECAP(recap_graph_set_destroy(set));
  model_forget_streams(m);
  BENCH_RECAP(recap_empty_cache());
  printf("  %-26s reserved %7.1f MiB, executables %6.1f MiB, capture + instantiate %.1f ms\n",
         way_labels[way], (double)r->reserved_bytes / MiB, (double)r->exec_bytes / MiB,
         r->capture_ms);
  fflush(stdout);
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

static void run_memory(model_t *m, cudaStream_t s, memory_result_t *r) {
  float *reference[BUCKETS];
  float *host = bench_calloc(NAME, out_floats(buckets[0]), sizeof(float));
  model_warm(m, buckets, BUCKETS, s);
  /* Eager references (cuBLAS loads its kernels here, outside every capture). */
  for (int k = 0; k < BUCKETS; k++) {
    reference[k] = bench_calloc(NAME, out_floats(buckets[k]), sizeof(float));
    BENCH_RECAP(gemm_step(buckets[k], s, m));
    read_out(m, buckets[k], reference[k]);
  }
  model_forget_streams(m);
  BENCH_RECAP(recap_empty_cache());
  run_nodes(m, s, reference, host, &r[W_NODES]);
  printf("  %-26s reserved %7.1f MiB, capture + instantiate %.1f ms\n", way_labels[W_NODES],
         (double)r[W_NODES].reserved_bytes / MiB, r[W_NODES].capture_ms);
  for (int w = W_SET; w < W_COUNT; w++) run_set_way(w, m, s, reference, host, &r[w]);
  BENCH_RECAP(recap_option_set("expandable_segments", "0"));
  for (int k = 0; k < BUCKETS; k++) free(reference[k]);
  free(host);

  double nodes = (double)r[W_NODES].reserved_bytes;
  printf(
      "\n(a) 8 buckets (b = 512 .. 4) of three GEMMs of %d x %d, temporaries in the step: reserved "
      "bytes against the memory nodes' and the largest bucket alone (goals: <= 1 and <= %.2f)\n",
      WIDTH, WIDTH, ALONE_GOAL);
  printf("%-26s %9s %9s %8s %10s %10s %8s\n", "way", "MiB", "/nodes", "/alone", "exec MiB",
         "capture ms", "outputs");
  for (int w = 0; w < W_COUNT; w++) {
    const memory_result_t *x = &r[w];
    if (!x->done) {
      printf("%-26s %9s\n", way_labels[w], x->skipped ? x->skipped : "not run");
      continue;
    }
    double alone =
        (double)r[w == W_SET_VMM || w == W_ALONE_VMM ? W_ALONE_VMM : W_ALONE].reserved_bytes;
    printf("%-26s %9.1f %9.3f", way_labels[w], (double)x->reserved_bytes / MiB,
           ratio((double)x->reserved_bytes, nodes));
    if (w == W_NODES)
      printf(" %8s %10s", "-", "-");
    else
      printf(" %8.3f %10.1f", ratio((double)x->reserved_bytes, alone), (double)x->exec_bytes / MiB);
    printf(" %10.1f %8s\n", x->capture_ms, x->outputs_match ? "same" : "DIFFER");
  }
}

/* ==========================================================================================
 * (b) background capture beside an eager loop
 * ======================================================================================== */

/* The helper's shares of time measured (options.background_share; 0, the default, first). */
enum { BG_SHARES = 4 };
static const double bg_shares[BG_SHARES] = {0, 1, 0.5, 0.1};

typedef struct background_result {
  double share;
  bench_stats_t alone_steps_per_s; /* per round */
  bench_stats_t during_steps_per_s;
  bench_stats_t all_ready_ms;
  double ratio; /* medians: during / alone */
  int rounds, outputs_match;
} background_result_t;

/* BG_BATCH eager steps on s and a synchronisation; returns the seconds they took. */
static double eager_batch(model_t *m, cudaStream_t s) {
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < BG_BATCH; i++) BENCH_RECAP(gemm_step(BG_LOOP_SIZE, s, m));
  BENCH_CUDA(cudaStreamSynchronize(s));
  return (double)(bench_now_ns() - t0) / 1e9;
}

static int all_ready(recap_graph_set_t set, double *seconds) {
  recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
  BENCH_RECAP(recap_graph_set_info(set, &info));
  *seconds = info.all_ready_seconds;
  return info.pending == 0 && info.capturing == 0;
}

static void run_background(model_t *m, cudaStream_t s, int rounds, double share,
                           background_result_t *r) {
  size_t sizes[BG_SIZES];
  for (int i = 0; i < BG_SIZES; i++) sizes[i] = (size_t)BG_STEP * (size_t)(i + 1);
  double *alone = bench_calloc(NAME, (size_t)rounds, sizeof(double));
  double *during = bench_calloc(NAME, (size_t)rounds, sizeof(double));
  double *ready_ms = bench_calloc(NAME, (size_t)rounds, sizeof(double));
  /* Warm-up: cuBLAS loads the kernels of every size outside the captures, and the loop's
   * temporaries come from the cache. */
  model_warm(m, sizes, BG_SIZES, s);
  for (int i = 0; i < 4; i++) eager_batch(m, s);
  for (int round = 0; round < rounds; round++) {
    /* The loop alone, for as long as the last round's captures took (at least 50 ms). */
    double window = round ? ready_ms[round - 1] / 1e3 : 0.2;
    if (window < 0.05) window = 0.05;
    double t = 0;
    long steps = 0;
    while (t < window) {
      t += eager_batch(m, s);
      steps += BG_BATCH;
    }
    alone[round] = (double)steps / t;
    /* The same loop while the set's helper captures the 32 sizes. */
    recap_graph_set_t set = make_set(m, sizes, BG_SIZES, RECAP_SET_CAPTURE_BACKGROUND, share);
    double done_at = 0;
    t = 0;
    steps = 0;
    do {
      t += eager_batch(m, s);
      steps += BG_BATCH;
    } while (!all_ready(set, &done_at));
    during[round] = (double)steps / t;
    BENCH_RECAP(recap_graph_set_wait(set));
    (void)all_ready(set, &done_at);
    ready_ms[round] = done_at * 1e3;
    if (members_not_ready(set, sizes, BG_SIZES, "background")) all_ok = 0;
    if (round == rounds - 1) {
      /* Each size replayed against its eager run. */
      size_t floats = (size_t)BG_WIDTH * sizes[BG_SIZES - 1];
      float *eager = bench_calloc(NAME, floats, sizeof(float));
      float *graphed = bench_calloc(NAME, floats, sizeof(float));
      r->outputs_match = 1;
      for (int i = 0; i < BG_SIZES; i++) {
        BENCH_RECAP(gemm_step(sizes[i], s, m));
        read_out(m, sizes[i], eager);
        int replayed = 0;
        BENCH_RECAP(recap_graph_set_run(set, sizes[i], s, NULL, &replayed));
        read_out(m, sizes[i], graphed);
        if (!replayed) {
          fprintf(stderr, NAME ": background: size %zu ran eagerly once ready\n", sizes[i]);
          all_ok = 0;
        }
        r->outputs_match &=
            same_as(eager, graphed, (size_t)BG_WIDTH * sizes[i], "background", sizes[i]);
      }
      free(eager);
      free(graphed);
    }
    BENCH_RECAP(recap_graph_set_destroy(set));
    model_forget_streams(m);
  }
  bench_stats(alone, (size_t)rounds, &r->alone_steps_per_s);
  bench_stats(during, (size_t)rounds, &r->during_steps_per_s);
  bench_stats(ready_ms, (size_t)rounds, &r->all_ready_ms);
  r->ratio = ratio(r->during_steps_per_s.median, r->alone_steps_per_s.median);
  r->rounds = rounds;
  r->share = share;
  free(alone);
  free(during);
  free(ready_ms);
}

static void print_background(const background_result_t *r, size_t count) {
  printf(
      "\n(b) an eager loop (steps of %d rows, width %d, a sync every %d) while %d sizes are "
      "captured in the background (goal >= %.0f%% of the loop alone), medians of %d rounds, for "
      "several shares of time the helper may capture (options.background_share; 0.2 is the "
      "default)\n",
      BG_LOOP_SIZE, BG_WIDTH, BG_BATCH, BG_SIZES, BACKGROUND_GOAL * 100, r[0].rounds);
  printf("%-14s %14s %14s %8s %16s %8s\n", "helper share", "alone steps/s", "during steps/s",
         "ratio", "all graphed ms", "outputs");
  for (size_t i = 0; i < count; i++) {
    char name[32];
    snprintf(name, sizeof name, r[i].share > 0 ? "%.2f" : "%.2f (default)",
             r[i].share > 0 ? r[i].share : 0.2);
    printf("%-14s %14.0f %14.0f %8.3f %16.1f %8s\n", name, r[i].alone_steps_per_s.median,
           r[i].during_steps_per_s.median, r[i].ratio, r[i].all_ready_ms.median,
           r[i].outputs_match ? "same" : "DIFFER");
  }
}

/* ==========================================================================================
 * (c) the host cost of recap_graph_set_run against recap_graph_replay
 * ======================================================================================== */

typedef struct run_cost_result {
  bench_stats_t set_run_us, replay_us;
  int counter_ok;
} run_cost_result_t;

static recap_status_t add_step(size_t size, recap_stream_t stream, void *user_data) {
  cudaError_t e = bench_launch_add_value(stream, user_data, (int)size);
  if (e != cudaSuccess)
    return recap_set_last_error(RECAP_ERROR_CUDA, NAME " add step: launch failed: %s",
                                cudaGetErrorName(e));
  return RECAP_SUCCESS;
}

static double set_run_batch(recap_graph_set_t set, size_t n, cudaStream_t s) {
  BENCH_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < CALLS_PER_BATCH; i++) BENCH_RECAP(recap_graph_set_run(set, n, s, NULL, NULL));
  uint64_t t1 = bench_now_ns();
  BENCH_CUDA(cudaStreamSynchronize(s));
  return (double)(t1 - t0) / 1e3 / CALLS_PER_BATCH;
}

static double replay_batch(recap_graph_t g, cudaStream_t s) {
  BENCH_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < CALLS_PER_BATCH; i++) BENCH_RECAP(recap_graph_replay(g, s));
  uint64_t t1 = bench_now_ns();
  BENCH_CUDA(cudaStreamSynchronize(s));
  return (double)(t1 - t0) / 1e3 / CALLS_PER_BATCH;
}

static void run_cost(cudaStream_t s, int batches, run_cost_result_t *r) {
  int *counter = NULL;
  BENCH_CUDA(cudaMalloc((void **)&counter, sizeof(int)));
  BENCH_CUDA(cudaMemset(counter, 0, sizeof(int)));
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.rule = RECAP_SIZES_POWERS_OF_TWO;
  o.rule_max = (size_t)1 << (RUN_SIZES - 1);
  /* One launch that adds nothing: the kernel's module loads outside the captures. */
  BENCH_CUDA(bench_launch_add_value(s, counter, 0));
  BENCH_CUDA(cudaStreamSynchronize(s));
  recap_graph_set_t set = NULL;
  BENCH_RECAP(recap_graph_set_create(&set, add_step, counter, &o));
  /* n = 3 runs the member of size 4: a lookup that is not an exact match. */
  const size_t n = 3, bucket = 4;
  recap_graph_set_member_t member = RECAP_GRAPH_SET_MEMBER_INIT;
  BENCH_RECAP(recap_graph_set_member(set, bucket, &member));
  if (member.state != RECAP_MEMBER_READY || !member.graph) {
    fprintf(stderr, NAME ": (c) the member of size %zu is not ready: %s\n", bucket, member.message);
    all_ok = 0;
    BENCH_RECAP(recap_graph_set_destroy(set));
    BENCH_CUDA(cudaFree(counter));
    return;
  }
  double *a = bench_calloc(NAME, (size_t)batches, sizeof(double));
  double *b = bench_calloc(NAME, (size_t)batches, sizeof(double));
  set_run_batch(set, n, s); /* warm-up */
  replay_batch(member.graph, s);
  for (int i = 0; i < batches; i++) {
    if (i % 2 == 0) {
      a[i] = set_run_batch(set, n, s);
      b[i] = replay_batch(member.graph, s);
    } else {
      b[i] = replay_batch(member.graph, s);
      a[i] = set_run_batch(set, n, s);
    }
  }
  int got = 0;
  BENCH_CUDA(cudaMemcpy(&got, counter, sizeof got, cudaMemcpyDeviceToHost));
  long expected = (long)(batches + 1) * 2 * CALLS_PER_BATCH * (long)bucket;
  r->counter_ok = got == expected;
  if (!r->counter_ok) {
    fprintf(stderr, NAME ": (c) the counter reads %d, expected %ld\n", got, expected);
    all_ok = 0;
  }
  bench_stats(a, (size_t)batches, &r->set_run_us);
  bench_stats(b, (size_t)batches, &r->replay_us);
  free(a);
  free(b);
  BENCH_RECAP(recap_graph_set_destroy(set));
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaFree(counter));
  printf(
      "\n(c) host us per call on a ready member (one kernel; median of %d batches of %d)\n"
      "%-26s %10.3f\n%-26s %10.3f\n%-26s %10.3f  (+%.0f ns)\n",
      batches, CALLS_PER_BATCH, "recap_graph_replay", r->replay_us.median, "recap_graph_set_run",
      r->set_run_us.median, "set_run / replay", ratio(r->set_run_us.median, r->replay_us.median),
      (r->set_run_us.median - r->replay_us.median) * 1e3);
}

/* ==========================================================================================
 * Output
 * ======================================================================================== */

static int write_json(const char *path, int quick, const memory_result_t *mem,
                      const background_result_t *bg, const run_cost_result_t *cost) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  fprintf(f, ",\n  \"quick\": %s, \"checks_passed\": %s,\n", quick ? "true" : "false",
          all_ok ? "true" : "false");
  fprintf(f, "  \"goals\": {\"alone_ratio\": %.2f, \"background_ratio\": %.2f},\n", ALONE_GOAL,
          BACKGROUND_GOAL);
  fprintf(f, "  \"buckets\": [");
  for (int k = 0; k < BUCKETS; k++) fprintf(f, "%s%zu", k ? ", " : "", buckets[k]);
  fprintf(f, "], \"width\": %d,\n  \"memory\": [", WIDTH);
  double nodes = (double)mem[W_NODES].reserved_bytes;
  for (int w = 0; w < W_COUNT; w++) {
    const memory_result_t *x = &mem[w];
    fprintf(f, "%s\n    {\"way\": \"%s\", ", w ? "," : "", way_names[w]);
    if (!x->done) {
      fprintf(f, "\"skipped\": \"%s\"}", x->skipped ? x->skipped : "not run");
      continue;
    }
    double alone =
        (double)mem[w == W_SET_VMM || w == W_ALONE_VMM ? W_ALONE_VMM : W_ALONE].reserved_bytes;
    fprintf(f,
            "\"reserved_bytes\": %lld, \"exec_bytes\": %lld, \"vs_nodes\": %.4f, \"vs_alone\": "
            "%.4f, \"capture_ms\": %.4f, \"capture_sum_ms\": %.4f, \"outputs_match\": %s}",
            (long long)x->reserved_bytes, (long long)x->exec_bytes,
            ratio((double)x->reserved_bytes, nodes),
            w == W_NODES ? 0.0 : ratio((double)x->reserved_bytes, alone), x->capture_ms,
            x->capture_sum_ms, x->outputs_match ? "true" : "false");
  }
  fprintf(f, "\n  ],\n  \"background\": {\"sizes\": %d, \"rounds\": %d, \"ratio\": %.4f, ",
          BG_SIZES, bg->rounds, bg->ratio);
  fprintf(f, "\"outputs_match\": %s,\n    \"alone_steps_per_s\": ",
          bg->outputs_match ? "true" : "false");
  bench_stats_json(f, &bg->alone_steps_per_s);
  fprintf(f, ",\n    \"during_steps_per_s\": ");
  bench_stats_json(f, &bg->during_steps_per_s);
  fprintf(f, ",\n    \"all_ready_ms\": ");
  bench_stats_json(f, &bg->all_ready_ms);
  fprintf(f, "},\n  \"background_shares\": [");
  for (int i = 0; i < BG_SHARES; i++)
    fprintf(f, "%s\n    {\"share\": %.2f, \"ratio\": %.4f, \"all_ready_ms\": %.3f}", i ? "," : "",
            bg[i].share > 0 ? bg[i].share : 0.2, bg[i].ratio, bg[i].all_ready_ms.median);
  fprintf(f, "\n  ],\n  \"run_cost\": {\"counter_ok\": %s, \"ratio\": %.4f,\n    \"set_run_us\": ",
          cost->counter_ok ? "true" : "false",
          ratio(cost->set_run_us.median, cost->replay_us.median));
  bench_stats_json(f, &cost->set_run_us);
  fprintf(f, ",\n    \"replay_us\": ");
  bench_stats_json(f, &cost->replay_us);
  fprintf(f, "}\n}\n");
  return fclose(f) == 0;
}

int main(int argc, char **argv) {
  bench_args_t args;
  int exit_code = 0;
  if (!bench_parse_args(argc, argv, NAME,
                        "Without a CUDA device it prints \"skipped: no GPU\" and exits 0.\n", &args,
                        &exit_code))
    return exit_code;
  if (!bench_have_device(NAME)) return 0;
  bench_banner(NAME, args.quick);
  /* The memory table shows the executables' bytes: every instantiation measures them. */
  BENCH_RECAP(recap_option_set("measure_exec_memory", "1"));

  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  memory_result_t mem[W_COUNT];
  background_result_t bg[BG_SHARES];
  run_cost_result_t cost;
  memset(mem, 0, sizeof mem);
  memset(bg, 0, sizeof bg);
  memset(&cost, 0, sizeof cost);

  model_t big;
  model_init(&big, WIDTH, buckets[0], 1234u);
  run_memory(&big, s, mem);
  model_destroy(&big);

  model_t small;
  model_init(&small, BG_WIDTH, (size_t)BG_STEP * BG_SIZES, 4321u);
  for (int i = 0; i < BG_SHARES; i++)
    run_background(&small, s, args.quick ? 2 : 5, bg_shares[i], &bg[i]);
  print_background(bg, BG_SHARES);
  model_destroy(&small);

  run_cost(s, args.quick ? 11 : 41, &cost);

  int written = write_json(args.json_path, args.quick, mem, bg, &cost);
  if (written) printf("\nresults: %s\n", args.json_path);
  BENCH_CUDA(cudaStreamDestroy(s));
  BENCH_RECAP(recap_empty_cache());
  if (!all_ok) fprintf(stderr, NAME ": a way failed or its outputs differed (see above)\n");
  return written && all_ok ? 0 : 1;
}
