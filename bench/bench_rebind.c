/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_rebind — what rebinding and updating a captured graph cost, against raw CUDA and against
 * capturing again, and whether executables that were patched or updated replay slower.
 *
 *   (i)   rebind: recap_graph_rebind of a buffer read by k of 1,000 kernels (k = 1, 10, 100)
 *         against k raw cudaGraphExecKernelNodeSetParams on an executable of the same graph
 *         (target: <= 1.2 x k x raw + 2 us); against recap_graph_reset + capture + instantiate
 *         (target: >= 100x slower than the rebind) and against the llama.cpp way, a raw capture
 *         + cudaGraphExecUpdate by hand; and the first rebind after a capture of 16 buffers read
 *         by 4 kernels each (target <= 100 us).
 *   (ii)  update: recap_graph_recapture_begin + 1,000 launches + capture_end (which applies the
 *         new template with cudaGraphExecUpdate) against raw capture + cudaGraphExecUpdate
 *         (target <= 1.1x); recap's capture_end when it updates against when its policy makes
 *         it instantiate afresh (target: the update >= 10x faster).
 *   (iii) replay: host time of recap_graph_replay and GPU time per replay of an executable
 *         after 1,000 rebinds, and of one after 1,000 updates, against a freshly instantiated one,
 *         for four shapes: a chain of 1,000 kernels, 4 branches of 250 kernels forked and joined
 *         over 4 streams, 32 cuBLAS GEMMs, and 250 memset + kernel pairs; and what the update
 *         policy (max_slowdown 1%) decides and measures over as many recaptures of each shape.
 *   (iv)  graphed callables: a graphed forward of four kernels reading its input, called with
 *         the input alternating between two buffers, on the zero-copy path (the input flagged
 *         in desc.rebind_inputs: each call rebinds the graph) against the copying path (each
 *         call copies the input into the static one), for inputs of 64 KiB, 4 MiB and 64 MiB:
 *         host us per call, GPU us per call (events around a batch of calls), and the ratios.
 *         The kernels read one word each, so the figures are the cost of a call, its rebind
 *         or its copy, and not of work over the input.
 *
 * Times are host times (the CPU time of the calls) unless named GPU; each figure is the median
 * of batches, and the variants' batches alternate so that drift hits all alike. Every graph's
 * kernels add into device counters, and the counters are checked after replays.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "common.h"

#define NAME "bench_rebind"
enum { NODES = 1000, SHAPES = 4, BRANCHES = 4, GEMMS = 32, GEMM_DIM = 256, MEMSET_PAIRS = 250 };
enum { BUFFERS16 = 16, READERS_PER_BUFFER = 4 };
static const int K_VALUES[] = {1, 10, 100};
enum { K_COUNT = sizeof K_VALUES / sizeof K_VALUES[0] };
static const size_t WORKSPACE_BYTES = (size_t)4 << 20;

#define BENCH_BLAS(call)                                                   \
  do {                                                                     \
    cublasStatus_t blas_ = (call);                                         \
    if (blas_ != CUBLAS_STATUS_SUCCESS) {                                  \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
              cublasGetStatusName(blas_));                                 \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* ==========================================================================================
 * What the measurements share
 * ======================================================================================== */

typedef struct bench {
  int quick;
  cudaStream_t stream, side[BRANCHES];
  cudaEvent_t fork, join[BRANCHES], gpu_start, gpu_end;
  int *counter, *branch_counter[BRANCHES];
  int *in_a, *in_b, *other; /* the input a rebind moves between a and b; what other nodes read */
  cublasHandle_t blas;
  void *workspace;
  float *gemm_a, *gemm_b, *gemm_t[2];
  int checks_ok;
} bench_t;

static int *device_int(int value) {
  void *p = NULL;
  BENCH_RECAP(recap_malloc(&p, 512, NULL));
  BENCH_CUDA(cudaMemcpy(p, &value, sizeof value, cudaMemcpyHostToDevice));
  return p;
}

static int read_int(const int *p) {
  int value = 0;
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaMemcpy(&value, p, sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

static void set_int(int *p, int value) {
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaMemcpy(p, &value, sizeof value, cudaMemcpyHostToDevice));
}

static void check(bench_t *b, bool ok, const char *what) {
  if (ok) return;
  fprintf(stderr, NAME ": check failed: %s\n", what);
  b->checks_ok = 0;
}

static recap_graph_t capture_with(bench_t *b, recap_rebind_mode_t mode,
                                  void (*enqueue)(bench_t *, const void *), const void *arg) {
  recap_graph_t g;
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.rebind = mode;
  BENCH_RECAP(recap_graph_create(&g, 0));
  BENCH_RECAP(recap_graph_capture_begin(g, &options, b->stream));
  enqueue(b, arg);
  BENCH_RECAP(recap_graph_capture_end(g));
  return g;
}

static cudaGraph_t capture_raw(bench_t *b, void (*enqueue)(bench_t *, const void *),
                               const void *arg) {
  cudaGraph_t graph = NULL;
  BENCH_CUDA(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeGlobal));
  enqueue(b, arg);
  BENCH_CUDA(cudaStreamEndCapture(b->stream, &graph));
  return graph;
}

static cudaGraphExec_t instantiate_raw(cudaGraph_t graph) {
  cudaGraphExec_t exec = NULL;
  BENCH_CUDA(cudaGraphInstantiateWithFlags(&exec, graph,
                                           cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                               cudaGraphInstantiateFlagUseNodePriority));
  return exec;
}

static void update_stats(recap_graph_t g, recap_update_stats_t *st) {
  *st = (recap_update_stats_t)RECAP_UPDATE_STATS_INIT;
  BENCH_RECAP(recap_graph_update_stats(g, st));
}

/* ==========================================================================================
 * (i) rebind
 * ======================================================================================== */

/* 1,000 kernels adding into the counter; k of them, evenly spaced, read `input`, the rest
 * b->other. */
typedef struct readers {
  int k;
  const int *input;
} readers_t;

static bool reads_input(int node, int k) { return node % (NODES / k) == 0; }

static void enqueue_readers(bench_t *b, const void *arg) {
  const readers_t *r = arg;
  for (int i = 0; i < NODES; i++)
    BENCH_CUDA(
        bench_launch_add_from(b->stream, b->counter, reads_input(i, r->k) ? r->input : b->other));
}

/* The raw floor: the parameters of the k nodes that read the input, ready to set with either
 * buffer, so that a timed patch is one cudaGraphExecKernelNodeSetParams per node. */
typedef struct raw_patch {
  cudaGraphNode_t *nodes;
  struct cudaKernelNodeParams *params;
  void *args[2][2]; /* per buffer: {&counter, &input} */
  int *values[2];   /* in_a, in_b */
  size_t count;
} raw_patch_t;

static void raw_patch_init(bench_t *b, cudaGraph_t graph, int k, raw_patch_t *p) {
  size_t n = 0;
  BENCH_CUDA(cudaGraphGetNodes(graph, NULL, &n));
  cudaGraphNode_t *all = bench_calloc(NAME, n, sizeof *all);
  BENCH_CUDA(cudaGraphGetNodes(graph, all, &n));
  memset(p, 0, sizeof *p);
  p->nodes = bench_calloc(NAME, (size_t)k, sizeof *p->nodes);
  p->params = bench_calloc(NAME, (size_t)k, sizeof *p->params);
  p->values[0] = b->in_a;
  p->values[1] = b->in_b;
  for (int v = 0; v < 2; v++) {
    p->args[v][0] = &b->counter;
    p->args[v][1] = &p->values[v];
  }
  /* A captured chain's nodes come back in capture order. */
  for (size_t i = 0; i < n && i < NODES; i++) {
    if (!reads_input((int)i, k)) continue;
    struct cudaKernelNodeParams params;
    BENCH_CUDA(cudaGraphKernelNodeGetParams(all[i], &params));
    params.extra = NULL;
    p->nodes[p->count] = all[i];
    p->params[p->count++] = params;
  }
  free(all);
}

static void raw_patch_apply(cudaGraphExec_t exec, raw_patch_t *p, int which) {
  for (size_t i = 0; i < p->count; i++) {
    p->params[i].kernelParams = p->args[which];
    BENCH_CUDA(cudaGraphExecKernelNodeSetParams(exec, p->nodes[i], &p->params[i]));
  }
}

static void rebind_once(recap_graph_t g, const int *from, int *to, size_t *patched) {
  recap_rebind_t r = {sizeof(recap_rebind_t), from, to, 0};
  BENCH_RECAP(recap_graph_rebind(g, &r, 1, patched));
}

typedef struct rebind_result {
  double raw_us, rebind_us;
} rebind_result_t;

static rebind_result_t measure_rebind(bench_t *b, int k) {
  readers_t r = {k, b->in_a};
  recap_graph_t g = capture_with(b, RECAP_REBIND_AUTO, enqueue_readers, &r);
  cudaGraph_t graph = capture_raw(b, enqueue_readers, &r);
  cudaGraphExec_t exec = instantiate_raw(graph);
  raw_patch_t raw;
  raw_patch_init(b, graph, k, &raw);
  check(b, raw.count == (size_t)k, "the raw graph has k nodes reading the input");

  /* What a rebind patches: exactly the k readers. */
  size_t patched = 0;
  rebind_once(g, b->in_a, b->in_b, &patched);
  check(b, patched == (size_t)k, "a rebind of the input patches its k readers");
  rebind_once(g, b->in_b, b->in_a, NULL);

  int per_batch = b->quick ? 20 : 100, batches = b->quick ? 5 : 15;
  double *raw_s = bench_calloc(NAME, (size_t)batches, sizeof *raw_s);
  double *rec_s = bench_calloc(NAME, (size_t)batches, sizeof *rec_s);
  for (int i = 0; i < batches; i++) {
    for (int turn = 0; turn < 2; turn++) {
      bool raw_turn = (i % 2 == 0) == (turn == 0); /* A B B A ... */
      uint64_t t0 = bench_now_ns();
      for (int j = 0; j < per_batch; j++) {
        if (raw_turn)
          raw_patch_apply(exec, &raw, (j + 1) % 2);
        else if (j % 2 == 0)
          rebind_once(g, b->in_a, b->in_b, NULL);
        else
          rebind_once(g, b->in_b, b->in_a, NULL);
      }
      double us = (double)(bench_now_ns() - t0) / 1e3 / per_batch;
      if (raw_turn)
        raw_s[i] = us;
      else
        rec_s[i] = us;
    }
  }
  /* per_batch is even: both point at in_a again. A replay on in_b must read in_b only. */
  rebind_once(g, b->in_a, b->in_b, NULL);
  set_int(b->counter, 0);
  BENCH_RECAP(recap_graph_replay(g, b->stream));
  check(b, read_int(b->counter) == (NODES - k) * 1 + k * 2,
        "a replay after rebinds reads the new buffer in exactly the k readers");

  rebind_result_t result = {bench_median(raw_s, (size_t)batches),
                            bench_median(rec_s, (size_t)batches)};
  free(raw_s);
  free(rec_s);
  free(raw.nodes);
  free(raw.params);
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  BENCH_RECAP(recap_graph_destroy(g));
  return result;
}

/* reset + capture + instantiate of the same 1,000 kernels (rebind OFF: what a program without
 * rebinding does), and the llama.cpp way: raw capture + cudaGraphExecUpdate by hand. */
static void measure_recapture(bench_t *b, double *recapture_us, double *llama_us) {
  int reps = b->quick ? 6 : 20;
  readers_t ra = {10, b->in_a}, rb = {10, b->in_b};
  recap_graph_t g;
  BENCH_RECAP(recap_graph_create(&g, 0));
  cudaGraph_t first = capture_raw(b, enqueue_readers, &ra);
  cudaGraphExec_t exec = instantiate_raw(first);
  BENCH_CUDA(cudaGraphDestroy(first));
  double *rec_s = bench_calloc(NAME, (size_t)reps, sizeof *rec_s);
  double *raw_s = bench_calloc(NAME, (size_t)reps, sizeof *raw_s);
  for (int i = 0; i < reps; i++) {
    const readers_t *r = i % 2 ? &ra : &rb;
    uint64_t t0 = bench_now_ns();
    BENCH_RECAP(recap_graph_reset(g));
    BENCH_RECAP(recap_graph_capture_begin(g, NULL, b->stream));
    enqueue_readers(b, r);
    BENCH_RECAP(recap_graph_capture_end(g));
    uint64_t t1 = bench_now_ns();
    cudaGraph_t graph = capture_raw(b, enqueue_readers, r);
    cudaGraphExecUpdateResultInfo info;
    BENCH_CUDA(cudaGraphExecUpdate(exec, graph, &info));
    BENCH_CUDA(cudaGraphDestroy(graph));
    uint64_t t2 = bench_now_ns();
    rec_s[i] = (double)(t1 - t0) / 1e3;
    raw_s[i] = (double)(t2 - t1) / 1e3;
  }
  *recapture_us = bench_median(rec_s, (size_t)reps);
  *llama_us = bench_median(raw_s, (size_t)reps);
  free(rec_s);
  free(raw_s);
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_RECAP(recap_graph_destroy(g));
}

/* 16 buffers, each read by 4 of 1,000 kernels; the first rebind after the capture moves all 16
 * in one batch. */
typedef struct sixteen {
  int *buffers[BUFFERS16];
} sixteen_t;

static void enqueue_sixteen(bench_t *b, const void *arg) {
  const sixteen_t *s = arg;
  for (int i = 0; i < NODES; i++) {
    const int *in = i < BUFFERS16 * READERS_PER_BUFFER ? s->buffers[i % BUFFERS16] : b->other;
    BENCH_CUDA(bench_launch_add_from(b->stream, b->counter, in));
  }
}

static double measure_first_rebind16(bench_t *b) {
  sixteen_t from, to;
  for (int i = 0; i < BUFFERS16; i++) {
    from.buffers[i] = device_int(1);
    to.buffers[i] = device_int(2);
  }
  int reps = b->quick ? 4 : 12;
  double *s = bench_calloc(NAME, (size_t)reps, sizeof *s);
  for (int i = 0; i < reps; i++) {
    recap_graph_t g = capture_with(b, RECAP_REBIND_AUTO, enqueue_sixteen, &from);
    recap_rebind_t moves[BUFFERS16];
    for (int j = 0; j < BUFFERS16; j++)
      moves[j] = (recap_rebind_t){sizeof(recap_rebind_t), from.buffers[j], to.buffers[j], 0};
    uint64_t t0 = bench_now_ns();
    size_t counts[BUFFERS16];
    BENCH_RECAP(recap_graph_rebind(g, moves, BUFFERS16, counts));
    s[i] = (double)(bench_now_ns() - t0) / 1e3;
    size_t patched = 0;
    for (int j = 0; j < BUFFERS16; j++) patched += counts[j];
    check(b, patched == BUFFERS16 * READERS_PER_BUFFER, "16 buffers x 4 readers patched");
    if (i == 0) {
      set_int(b->counter, 0);
      BENCH_RECAP(recap_graph_replay(g, b->stream));
      check(b,
            read_int(b->counter) ==
                (NODES - BUFFERS16 * READERS_PER_BUFFER) + 2 * BUFFERS16 * READERS_PER_BUFFER,
            "a replay after the 16-buffer rebind reads the 16 new buffers");
    }
    BENCH_RECAP(recap_graph_destroy(g));
  }
  double result = bench_median(s, (size_t)reps);
  free(s);
  for (int i = 0; i < BUFFERS16; i++) {
    BENCH_RECAP(recap_free(from.buffers[i]));
    BENCH_RECAP(recap_free(to.buffers[i]));
  }
  return result;
}

static void section_rebind(bench_t *b) {
  rebind_result_t r[K_COUNT];
  for (int i = 0; i < K_COUNT; i++) r[i] = measure_rebind(b, K_VALUES[i]);
  double recapture_us, llama_us;
  measure_recapture(b, &recapture_us, &llama_us);
  double first16 = measure_first_rebind16(b);

  printf("\n(i) rebind of a buffer read by k of %d kernels, host us per call (medians)\n", NODES);
  printf("%5s %12s %10s %14s %5s %16s %10s %18s %10s\n", "k", "k x raw set", "rebind", "target",
         "met", "reset+recapture", "ratio", "capture+update", "ratio");
  for (int i = 0; i < K_COUNT; i++) {
    int k = K_VALUES[i];
    double target = 1.2 * r[i].raw_us + 2.0;
    double x_recapture = recapture_us / r[i].rebind_us, x_llama = llama_us / r[i].rebind_us;
    printf("%5d %12.2f %10.2f %14.2f %5s %16.1f %9.0fx %18.1f %9.0fx\n", k, r[i].raw_us,
           r[i].rebind_us, target, r[i].rebind_us <= target ? "yes" : "NO", recapture_us,
           x_recapture, llama_us, x_llama);
    char row[16];
    snprintf(row, sizeof row, "k=%d", k);
    bench_record("rebind", row, "raw_set_us", r[i].raw_us);
    bench_record("rebind", row, "rebind_us", r[i].rebind_us);
    bench_record("rebind", row, "target_us", target);
    bench_record("rebind", row, "recapture_over_rebind", x_recapture);
    bench_record("rebind", row, "capture_update_over_rebind", x_llama);
  }
  printf(
      "targets: rebind <= 1.2 x k x raw + 2 us; reset + recapture + instantiate >= 100x the "
      "rebind (met: %s at k=1, %s at k=10, %s at k=100)\n",
      recapture_us >= 100 * r[0].rebind_us ? "yes" : "NO",
      recapture_us >= 100 * r[1].rebind_us ? "yes" : "NO",
      recapture_us >= 100 * r[2].rebind_us ? "yes" : "NO");
  printf(
      "first rebind after a capture, 16 buffers x %d readers in one batch: %.2f us "
      "(target <= 100 us: %s; %d x raw set: %.2f us)\n",
      READERS_PER_BUFFER, first16, first16 <= 100.0 ? "yes" : "NO", BUFFERS16 * READERS_PER_BUFFER,
      r[0].raw_us * BUFFERS16 * READERS_PER_BUFFER);
  bench_record("rebind", "recapture", "us", recapture_us);
  bench_record("rebind", "capture_update_by_hand", "us", llama_us);
  bench_record("rebind", "first_rebind_16_buffers", "us", first16);
}

/* ==========================================================================================
 * (ii) recapture + update
 * ======================================================================================== */

static void enqueue_values(bench_t *b, const void *arg) {
  int value = *(const int *)arg;
  for (int i = 0; i < NODES; i++) BENCH_CUDA(bench_launch_add_value(b->stream, b->counter, value));
}

static void section_update(bench_t *b) {
  int reps = b->quick ? 8 : 30, value = 1;
  recap_graph_t upd = capture_with(b, RECAP_REBIND_OFF, enqueue_values, &value);
  recap_graph_t never = capture_with(b, RECAP_REBIND_OFF, enqueue_values, &value);
  recap_update_policy_t policy = RECAP_UPDATE_POLICY_INIT;
  policy.never_update = 1;
  BENCH_RECAP(recap_graph_update_policy_set(never, &policy));
  cudaGraph_t first = capture_raw(b, enqueue_values, &value);
  cudaGraphExec_t exec = instantiate_raw(first);

  double *rec_total = bench_calloc(NAME, (size_t)reps, sizeof(double));
  double *rec_end = bench_calloc(NAME, (size_t)reps, sizeof(double));
  double *never_end = bench_calloc(NAME, (size_t)reps, sizeof(double));
  double *raw_total = bench_calloc(NAME, (size_t)reps, sizeof(double));
  double *raw_update = bench_calloc(NAME, (size_t)reps, sizeof(double));
  double *raw_inst = bench_calloc(NAME, (size_t)reps, sizeof(double));
  for (int i = 0; i < reps; i++) {
    value = 2 + i % 2; /* a parameter changes at every recapture */
    uint64_t t0 = bench_now_ns();
    BENCH_RECAP(recap_graph_recapture_begin(upd, NULL, b->stream));
    enqueue_values(b, &value);
    uint64_t t1 = bench_now_ns();
    BENCH_RECAP(recap_graph_capture_end(upd));
    uint64_t t2 = bench_now_ns();
    rec_total[i] = (double)(t2 - t0) / 1e3;
    rec_end[i] = (double)(t2 - t1) / 1e3;

    t0 = bench_now_ns();
    cudaGraph_t graph = capture_raw(b, enqueue_values, &value);
    t1 = bench_now_ns();
    cudaGraphExecUpdateResultInfo info;
    BENCH_CUDA(cudaGraphExecUpdate(exec, graph, &info));
    t2 = bench_now_ns();
    BENCH_CUDA(cudaGraphDestroy(graph));
    uint64_t t3 = bench_now_ns();
    raw_total[i] = (double)(t3 - t0) / 1e3;
    raw_update[i] = (double)(t2 - t1) / 1e3;

    BENCH_RECAP(recap_graph_recapture_begin(never, NULL, b->stream));
    enqueue_values(b, &value);
    t0 = bench_now_ns();
    BENCH_RECAP(recap_graph_capture_end(never));
    never_end[i] = (double)(bench_now_ns() - t0) / 1e3;

    graph = capture_raw(b, enqueue_values, &value);
    cudaGraphExec_t fresh = NULL;
    t0 = bench_now_ns();
    fresh = instantiate_raw(graph);
    raw_inst[i] = (double)(bench_now_ns() - t0) / 1e3;
    BENCH_CUDA(cudaGraphExecDestroy(fresh));
    BENCH_CUDA(cudaGraphDestroy(graph));
  }
  recap_update_stats_t su, sn;
  update_stats(upd, &su);
  update_stats(never, &sn);
  check(b, su.updates == (uint64_t)reps && su.instantiations == 0,
        "every recapture of the chain was applied with cudaGraphExecUpdate");
  check(b,
        sn.instantiations == (uint64_t)reps &&
            sn.by_reason[RECAP_UPDATE_REASON_POLICY_NEVER] == (uint64_t)reps,
        "the never-update policy instantiated at every recapture");
  set_int(b->counter, 0);
  BENCH_RECAP(recap_graph_replay(upd, b->stream));
  check(b, read_int(b->counter) == NODES * value, "the updated chain adds the new value");

  double rt = bench_median(rec_total, (size_t)reps), rw = bench_median(raw_total, (size_t)reps);
  double re = bench_median(rec_end, (size_t)reps), ne = bench_median(never_end, (size_t)reps);
  double ru = bench_median(raw_update, (size_t)reps), ri = bench_median(raw_inst, (size_t)reps);
  printf("\n(ii) recapture + update of a chain of %d kernels, host us (median of %d)\n", NODES,
         reps);
  printf("  recap recapture_begin + launches + capture_end (updates)   %10.1f\n", rt);
  printf(
      "  raw capture + cudaGraphExecUpdate + cudaGraphDestroy       %10.1f   ratio %.3f "
      "(target <= 1.1: %s)\n",
      rw, rt / rw, rt / rw <= 1.1 ? "yes" : "NO");
  printf("  recap capture_end that updates                              %10.1f\n", re);
  printf(
      "  recap capture_end that instantiates (policy never_update)   %10.1f   %.1fx the "
      "update (target >= 10x: %s)\n",
      ne, ne / re, ne / re >= 10.0 ? "yes" : "NO");
  printf("  raw cudaGraphExecUpdate %.1f us, raw cudaGraphInstantiate %.1f us (%.1fx)\n", ru, ri,
         ri / ru);
  bench_record("update", "recap_recapture_update", "us", rt);
  bench_record("update", "raw_capture_update", "us", rw);
  bench_record("update", "recap_over_raw", "ratio", rt / rw);
  bench_record("update", "recap_capture_end_update", "us", re);
  bench_record("update", "recap_capture_end_instantiate", "us", ne);
  bench_record("update", "instantiate_over_update", "ratio", ne / re);
  bench_record("update", "raw_update", "us", ru);
  bench_record("update", "raw_instantiate", "us", ri);
  free(rec_total);
  free(rec_end);
  free(never_end);
  free(raw_total);
  free(raw_update);
  free(raw_inst);
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(first));
  BENCH_RECAP(recap_graph_destroy(upd));
  BENCH_RECAP(recap_graph_destroy(never));
}

/* ==========================================================================================
 * (iii) replay after rebinds and updates
 * ======================================================================================== */

static const char *const SHAPE_NAMES[SHAPES] = {"chain of 1000 kernels", "4 branches x 250",
                                                "32 cuBLAS GEMMs", "250 memset+kernel"};

typedef struct shape_arg {
  int shape;
  void *input; /* what a rebind moves: the kernels' input, or the GEMMs' A */
} shape_arg_t;

static void enqueue_shape(bench_t *b, const void *arg) {
  const shape_arg_t *s = arg;
  int *in = s->input;
  switch (s->shape) {
    case 0:
      for (int i = 0; i < NODES; i++) BENCH_CUDA(bench_launch_add_from(b->stream, b->counter, in));
      break;
    case 1:
      BENCH_CUDA(cudaEventRecord(b->fork, b->stream));
      for (int j = 0; j < BRANCHES; j++) {
        BENCH_CUDA(cudaStreamWaitEvent(b->side[j], b->fork, 0));
        for (int i = 0; i < NODES / BRANCHES; i++)
          BENCH_CUDA(bench_launch_add_from(b->side[j], b->branch_counter[j], in));
        BENCH_CUDA(cudaEventRecord(b->join[j], b->side[j]));
        BENCH_CUDA(cudaStreamWaitEvent(b->stream, b->join[j], 0));
      }
      break;
    case 2: {
      static const float one = 1.0f, zero = 0.0f;
      const float *a = s->input;
      for (int i = 0; i < GEMMS; i++)
        BENCH_BLAS(cublasSgemm(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_DIM, GEMM_DIM, GEMM_DIM,
                               &one, a, GEMM_DIM, b->gemm_t[i % 2], GEMM_DIM, &zero,
                               b->gemm_t[(i + 1) % 2], GEMM_DIM));
      break;
    }
    default:
      for (int i = 0; i < MEMSET_PAIRS; i++) {
        /* An interior range of the input's allocation: a rebind of the allocation moves it. */
        BENCH_CUDA(cudaMemsetAsync(in + 32, 0, 64, b->stream));
        BENCH_CUDA(bench_launch_add_from(b->stream, b->counter, in));
      }
      break;
  }
}

/* Host us per replay call and GPU us per replay, for `per_batch` replays in a row. */
static void time_replays(bench_t *b, recap_graph_t g, int per_batch, double *host_us,
                         double *gpu_us) {
  BENCH_CUDA(cudaStreamSynchronize(b->stream));
  BENCH_CUDA(cudaEventRecord(b->gpu_start, b->stream));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < per_batch; i++) BENCH_RECAP(recap_graph_replay(g, b->stream));
  *host_us = (double)(bench_now_ns() - t0) / 1e3 / per_batch;
  BENCH_CUDA(cudaEventRecord(b->gpu_end, b->stream));
  BENCH_CUDA(cudaEventSynchronize(b->gpu_end));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, b->gpu_start, b->gpu_end));
  *gpu_us = (double)ms * 1e3 / per_batch;
}

static void section_replay(bench_t *b) {
  int changes = b->quick ? 100 : 1000, rounds = b->quick ? 4 : 12, per_batch = b->quick ? 5 : 10;
  printf(
      "\n(iii) replay after %d rebinds / %d updates vs a fresh executable (medians of %d "
      "batches of %d replays)\n",
      changes, changes, rounds, per_batch);
  printf("%-22s %10s %10s %10s %8s %8s %10s %10s %10s %8s %8s\n", "shape", "host fresh", "rebound",
         "updated", "ratio", "ratio", "GPU fresh", "rebound", "updated", "ratio", "ratio");
  for (int shape = 0; shape < SHAPES; shape++) {
    void *x1 = shape == 2 ? (void *)b->gemm_a : (void *)b->in_a;
    void *x2 = shape == 2 ? (void *)b->gemm_b : (void *)b->in_b;
    shape_arg_t a1 = {shape, x1}, a2 = {shape, x2};
    recap_graph_t g[3];
    g[0] = capture_with(b, RECAP_REBIND_AUTO, enqueue_shape, &a1);
    g[1] = capture_with(b, RECAP_REBIND_AUTO, enqueue_shape, &a1);
    g[2] = capture_with(b, RECAP_REBIND_OFF, enqueue_shape, &a1);
    for (int i = 0; i < changes; i++) {
      rebind_once(g[1], i % 2 ? x2 : x1, i % 2 ? x1 : x2, NULL);
      BENCH_RECAP(recap_graph_recapture_begin(g[2], NULL, b->stream));
      enqueue_shape(b, i % 2 ? &a1 : &a2);
      BENCH_RECAP(recap_graph_capture_end(g[2]));
    }
    /* changes is even: every graph points at x1 again. */
    recap_update_stats_t st;
    update_stats(g[2], &st);
    if (st.updates != (uint64_t)changes)
      printf("  %s: %" PRIu64 " of %d recaptures updated in place, %" PRIu64
             " instantiated afresh (last reason %s)\n",
             SHAPE_NAMES[shape], st.updates, changes, st.instantiations,
             recap_update_reason_name(st.last_reason));
    double *host[3], *gpu[3];
    for (int v = 0; v < 3; v++) {
      host[v] = bench_calloc(NAME, (size_t)rounds, sizeof(double));
      gpu[v] = bench_calloc(NAME, (size_t)rounds, sizeof(double));
      time_replays(b, g[v], 2, &host[v][0], &gpu[v][0]); /* warm-up: uploads, first launch */
    }
    for (int r = 0; r < rounds; r++)
      for (int i = 0; i < 3; i++) {
        int v = r % 2 ? 2 - i : i; /* 0 1 2 2 1 0 ... */
        time_replays(b, g[v], per_batch, &host[v][r], &gpu[v][r]);
      }
    double h[3], d[3];
    for (int v = 0; v < 3; v++) {
      h[v] = bench_median(host[v], (size_t)rounds);
      d[v] = bench_median(gpu[v], (size_t)rounds);
      free(host[v]);
      free(gpu[v]);
    }
    printf("%-22s %10.2f %10.2f %10.2f %8.3f %8.3f %10.1f %10.1f %10.1f %8.3f %8.3f\n",
           SHAPE_NAMES[shape], h[0], h[1], h[2], h[1] / h[0], h[2] / h[0], d[0], d[1], d[2],
           d[1] / d[0], d[2] / d[0]);
    static const char *const rows[SHAPES] = {"chain", "branches", "cublas", "memsets"};
    bench_record("replay", rows[shape], "host_fresh_us", h[0]);
    bench_record("replay", rows[shape], "host_rebound_us", h[1]);
    bench_record("replay", rows[shape], "host_updated_us", h[2]);
    bench_record("replay", rows[shape], "gpu_fresh_us", d[0]);
    bench_record("replay", rows[shape], "gpu_rebound_us", d[1]);
    bench_record("replay", rows[shape], "gpu_updated_us", d[2]);
    if (shape != 2) {
      /* Each replay of a kernel shape adds *x1 (1) once per kernel: the counters prove the
       * rebound and updated graphs read x1 after their even number of changes. */
      for (int v = 0; v < 3; v++) {
        set_int(b->counter, 0);
        for (int j = 0; j < BRANCHES; j++) set_int(b->branch_counter[j], 0);
        set_int(b->in_a, 1);
        set_int(b->in_b, 1000);
        BENCH_RECAP(recap_graph_replay(g[v], b->stream));
        int total = read_int(b->counter);
        for (int j = 0; j < BRANCHES; j++) total += read_int(b->branch_counter[j]);
        check(b, total == (shape == 3 ? MEMSET_PAIRS : NODES),
              "a replay reads x1 after the changes");
      }
      set_int(b->in_a, 1);
      set_int(b->in_b, 2);
    }
    for (int v = 0; v < 3; v++) BENCH_RECAP(recap_graph_destroy(g[v]));
  }
  printf("ratios: rebound / fresh and updated / fresh (1.000: the same speed)\n");
}

/* The update policy's own answer: a graph recaptured and replayed `changes` times with
 * max_slowdown 1%: recap times replays after fresh instantiations and after updates (the loop
 * replays each executable once, so the policy instantiates afresh for its fresh samples, reason
 * POLICY_MEASURE), and stops updating (reason POLICY_SLOWER) when updated replays measure
 * slower. */
static void section_policy(bench_t *b) {
  int changes = b->quick ? 100 : 1000;
  printf(
      "\n(iii-b) update policy max_slowdown = 1%% (8 replays measured), %d recaptures each "
      "followed by a replay\n",
      changes);
  printf("%-22s %10s %14s %14s %14s %16s %16s\n", "shape", "updates", "instantiated", "(slower)",
         "(measure)", "fresh replay ms", "updated ms");
  static const char *const rows[SHAPES] = {"chain", "branches", "cublas", "memsets"};
  for (int shape = 0; shape < SHAPES; shape++) {
    void *x1 = shape == 2 ? (void *)b->gemm_a : (void *)b->in_a;
    void *x2 = shape == 2 ? (void *)b->gemm_b : (void *)b->in_b;
    shape_arg_t a1 = {shape, x1}, a2 = {shape, x2};
    recap_graph_t g = capture_with(b, RECAP_REBIND_OFF, enqueue_shape, &a1);
    recap_update_policy_t policy = RECAP_UPDATE_POLICY_INIT;
    policy.max_slowdown = 0.01;
    policy.measure_replays = 8;
    BENCH_RECAP(recap_graph_update_policy_set(g, &policy));
    BENCH_RECAP(recap_graph_replay(g, b->stream));
    for (int i = 0; i < changes; i++) {
      BENCH_RECAP(recap_graph_recapture_begin(g, NULL, b->stream));
      enqueue_shape(b, i % 2 ? &a1 : &a2);
      BENCH_RECAP(recap_graph_capture_end(g));
      BENCH_RECAP(recap_graph_replay(g, b->stream));
      /* Keep the launch queue short: the policy reads its timings once the GPU is done. */
      if (i % 16 == 15) BENCH_CUDA(cudaStreamSynchronize(b->stream));
    }
    BENCH_CUDA(cudaStreamSynchronize(b->stream));
    recap_update_stats_t st;
    update_stats(g, &st);
    printf("%-22s %10" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %16.4f %16.4f\n",
           SHAPE_NAMES[shape], st.updates, st.instantiations,
           st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER],
           st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], st.fresh_replay_ms,
           st.updated_replay_ms);
    check(b, st.recaptures == (uint64_t)changes, "every recapture under the policy succeeded");
    bench_record("policy", rows[shape], "updates", (double)st.updates);
    bench_record("policy", rows[shape], "instantiations", (double)st.instantiations);
    bench_record("policy", rows[shape], "policy_slower",
                 (double)st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER]);
    bench_record("policy", rows[shape], "policy_measure",
                 (double)st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE]);
    bench_record("policy", rows[shape], "fresh_replay_ms", st.fresh_replay_ms);
    bench_record("policy", rows[shape], "updated_replay_ms", st.updated_replay_ms);
    BENCH_RECAP(recap_graph_destroy(g));
  }
  printf("(slower): instantiations because updated replays measured more than 1%% slower\n");
  printf("(measure): instantiations to time fresh replays (at most 8 a round)\n");
}

/* ==========================================================================================
 * (iv) graphed callables: zero-copy vs copy path
 * ======================================================================================== */

typedef struct callable_ctx {
  int *counter; /* what the kernels add into */
} callable_ctx_t;

/* The forward: four kernels read the input (its first and its last word, twice each) and add
 * it to the counter; one small output. */
static recap_status_t callable_forward(void *ctx, recap_stream_t stream, int training,
                                       const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)training;
  callable_ctx_t *c = ctx;
  const int *first = inputs[0].data;
  const int *last = (const int *)((const char *)inputs[0].data + inputs[0].bytes) - 1;
  for (int k = 0; k < 4; k++) {
    cudaError_t err = bench_launch_add_from(stream, c->counter, k % 2 ? last : first);
    if (err != cudaSuccess)
      return recap_set_last_error(RECAP_ERROR_CUDA, "callable_forward: %s", cudaGetErrorName(err));
  }
  outputs[0].bytes = sizeof(int);
  recap_status_t s = recap_malloc(&outputs[0].data, outputs[0].bytes, stream);
  if (s != RECAP_SUCCESS) return s;
  cudaError_t err = bench_launch_increment(stream, outputs[0].data);
  if (err != cudaSuccess)
    return recap_set_last_error(RECAP_ERROR_CUDA, "callable_forward: %s", cudaGetErrorName(err));
  return RECAP_SUCCESS;
}

/* Host us per call and GPU us per call of `per_batch` forwards, inputs alternating a, b. */
static void time_calls(bench_t *b, recap_graphed_t h, void *in_a, void *in_b, size_t bytes,
                       int per_batch, double *host_us, double *gpu_us) {
  const recap_buffer_t *out = NULL;
  BENCH_CUDA(cudaStreamSynchronize(b->stream));
  BENCH_CUDA(cudaEventRecord(b->gpu_start, b->stream));
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < per_batch; i++) {
    recap_buffer_t in = {i % 2 ? in_b : in_a, bytes};
    BENCH_RECAP(recap_graphed_forward(h, 1, &in, b->stream, &out));
  }
  *host_us = (double)(bench_now_ns() - t0) / 1e3 / per_batch;
  BENCH_CUDA(cudaEventRecord(b->gpu_end, b->stream));
  BENCH_CUDA(cudaEventSynchronize(b->gpu_end));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, b->gpu_start, b->gpu_end));
  *gpu_us = (double)ms * 1e3 / per_batch;
}

static void section_graphed(bench_t *b) {
  static const size_t sizes[] = {(size_t)64 << 10, (size_t)4 << 20, (size_t)64 << 20};
  static const char *const rows[] = {"64KiB", "4MiB", "64MiB"};
  int rounds = b->quick ? 4 : 12, per_batch = b->quick ? 10 : 20;
  printf(
      "\n(iv) graphed callable (4 kernels), input alternating between two buffers: zero-copy vs "
      "copy path (medians of %d batches of %d calls)\n",
      rounds, per_batch);
  printf("%-8s %10s %10s %8s %10s %10s %8s\n", "input", "host copy", "zero-copy", "ratio",
         "GPU copy", "zero-copy", "ratio");
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
    size_t bytes = sizes[z];
    void *sample[2], *in_a, *in_b;
    for (int v = 0; v < 2; v++) BENCH_RECAP(recap_malloc(&sample[v], bytes, NULL));
    BENCH_RECAP(recap_malloc(&in_a, bytes, NULL));
    BENCH_RECAP(recap_malloc(&in_b, bytes, NULL));
    BENCH_CUDA(cudaMemset(in_a, 0, bytes));
    BENCH_CUDA(cudaMemset(in_b, 0, bytes));
    for (int v = 0; v < 2; v++) BENCH_CUDA(cudaMemset(sample[v], 0, bytes));
    int *ends[4] = {in_a, (int *)((char *)in_a + bytes) - 1, in_b,
                    (int *)((char *)in_b + bytes) - 1};
    for (int e = 0; e < 4; e++) set_int(ends[e], e < 2 ? 1 : 2);
    /* v = 0: the copying path, v = 1: zero-copy. */
    callable_ctx_t ctx[2] = {{device_int(0)}, {device_int(0)}};
    recap_graphed_t h[2];
    static const int flag[1] = {1};
    for (int v = 0; v < 2; v++) {
      recap_buffer_t sample_buf = {sample[v], bytes};
      recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
      d.forward = callable_forward;
      d.ctx = &ctx[v];
      d.input_count = 1;
      d.sample_inputs = &sample_buf;
      d.output_count = 1;
      if (v == 1) d.rebind_inputs = flag;
      BENCH_RECAP(recap_graphed_create(&h[v], &d, 1, NULL));
    }
    double *host[2], *gpu[2];
    for (int v = 0; v < 2; v++) {
      host[v] = bench_calloc(NAME, (size_t)rounds, sizeof(double));
      gpu[v] = bench_calloc(NAME, (size_t)rounds, sizeof(double));
      time_calls(b, h[v], in_a, in_b, bytes, 2, &host[v][0], &gpu[v][0]); /* warm-up */
    }
    for (int r = 0; r < rounds; r++)
      for (int i = 0; i < 2; i++) {
        int v = r % 2 ? 1 - i : i;
        time_calls(b, h[v], in_a, in_b, bytes, per_batch, &host[v][r], &gpu[v][r]);
      }
    double hm[2], dm[2];
    for (int v = 0; v < 2; v++) {
      hm[v] = bench_median(host[v], (size_t)rounds);
      dm[v] = bench_median(gpu[v], (size_t)rounds);
      free(host[v]);
      free(gpu[v]);
    }
    printf("%-8s %10.2f %10.2f %8.3f %10.1f %10.1f %8.3f\n", rows[z], hm[0], hm[1], hm[1] / hm[0],
           dm[0], dm[1], dm[1] / dm[0]);
    bench_record("graphed", rows[z], "host_copy_us", hm[0]);
    bench_record("graphed", rows[z], "host_zero_copy_us", hm[1]);
    bench_record("graphed", rows[z], "gpu_copy_us", dm[0]);
    bench_record("graphed", rows[z], "gpu_zero_copy_us", dm[1]);
    /* Both paths read the caller's data: a call on a, then one on b, add 2 * 1 + 2 * 1 and
     * 2 * 2 + 2 * 2 to the counter. */
    for (int v = 0; v < 2; v++) {
      set_int(ctx[v].counter, 0);
      time_calls(b, h[v], in_a, in_b, bytes, 2, &hm[v], &dm[v]);
      check(b, read_int(ctx[v].counter) == 12,
            v ? "zero-copy calls read the caller's buffers" : "copying calls read the copies");
    }
    BENCH_CUDA(cudaDeviceSynchronize());
    for (int v = 0; v < 2; v++) {
      BENCH_RECAP(recap_graphed_destroy(h[v]));
      BENCH_RECAP(recap_free(ctx[v].counter));
      BENCH_RECAP(recap_free(sample[v]));
    }
    BENCH_RECAP(recap_free(in_a));
    BENCH_RECAP(recap_free(in_b));
  }
  printf("ratios: zero-copy / copy (below 1: zero-copy is cheaper)\n");
}

/* ==========================================================================================
 * Setup and output
 * ======================================================================================== */

static void bench_init(bench_t *b, int quick) {
  memset(b, 0, sizeof *b);
  b->quick = quick;
  b->checks_ok = 1;
  BENCH_CUDA(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
  for (int j = 0; j < BRANCHES; j++) {
    BENCH_CUDA(cudaStreamCreateWithFlags(&b->side[j], cudaStreamNonBlocking));
    BENCH_CUDA(cudaEventCreateWithFlags(&b->join[j], cudaEventDisableTiming));
    b->branch_counter[j] = device_int(0);
  }
  BENCH_CUDA(cudaEventCreateWithFlags(&b->fork, cudaEventDisableTiming));
  BENCH_CUDA(cudaEventCreate(&b->gpu_start));
  BENCH_CUDA(cudaEventCreate(&b->gpu_end));
  b->counter = device_int(0);
  b->in_a = device_int(1);
  b->in_b = device_int(2);
  b->other = device_int(1);
  size_t matrix = (size_t)GEMM_DIM * GEMM_DIM * sizeof(float);
  void *p;
  BENCH_RECAP(recap_malloc(&p, matrix, NULL));
  b->gemm_a = p;
  BENCH_RECAP(recap_malloc(&p, matrix, NULL));
  b->gemm_b = p;
  for (int i = 0; i < 2; i++) {
    BENCH_RECAP(recap_malloc(&p, matrix, NULL));
    b->gemm_t[i] = p;
  }
  BENCH_CUDA(cudaMemset(b->gemm_a, 0, matrix));
  BENCH_CUDA(cudaMemset(b->gemm_b, 0, matrix));
  BENCH_CUDA(cudaMemset(b->gemm_t[0], 0, matrix));
  BENCH_RECAP(recap_malloc(&b->workspace, WORKSPACE_BYTES, NULL));
  BENCH_BLAS(cublasCreate(&b->blas));
  BENCH_BLAS(cublasSetStream(b->blas, b->stream)); /* resets the workspace: set it after */
  BENCH_BLAS(cublasSetWorkspace(b->blas, b->workspace, WORKSPACE_BYTES));
  /* Load every kernel outside the captures and the timings. */
  int value = 0;
  BENCH_CUDA(bench_launch_add_value(b->stream, b->counter, value));
  BENCH_CUDA(bench_launch_add_from(b->stream, b->counter, b->other));
  shape_arg_t gemm = {2, b->gemm_a};
  enqueue_shape(b, &gemm);
  BENCH_CUDA(cudaStreamSynchronize(b->stream));
}

static void bench_destroy(bench_t *b) {
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_BLAS(cublasDestroy(b->blas));
  void *blocks[] = {b->counter, b->in_a,      b->in_b,      b->other,    b->gemm_a,
                    b->gemm_b,  b->gemm_t[0], b->gemm_t[1], b->workspace};
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) BENCH_RECAP(recap_free(blocks[i]));
  for (int j = 0; j < BRANCHES; j++) {
    BENCH_RECAP(recap_free(b->branch_counter[j]));
    BENCH_CUDA(cudaEventDestroy(b->join[j]));
    BENCH_CUDA(cudaStreamDestroy(b->side[j]));
  }
  BENCH_CUDA(cudaEventDestroy(b->fork));
  BENCH_CUDA(cudaEventDestroy(b->gpu_start));
  BENCH_CUDA(cudaEventDestroy(b->gpu_end));
  BENCH_CUDA(cudaStreamDestroy(b->stream));
  BENCH_RECAP(recap_empty_cache());
}

int main(int argc, char **argv) {
  bench_args_t args;
  int started = bench_start(argc, argv, NAME, &args);
  if (started >= 0) return started;

  bench_t b;
  bench_init(&b, args.quick);
  section_rebind(&b);
  fflush(stdout);
  section_update(&b);
  fflush(stdout);
  section_replay(&b);
  fflush(stdout);
  section_policy(&b);
  fflush(stdout);
  section_graphed(&b);

  int written = bench_write_figures(args.json_path, NAME, args.quick, b.checks_ok);
  if (written) printf("\nresults: %s\n", args.json_path);
  int ok = b.checks_ok;
  bench_destroy(&b);
  if (!ok) fprintf(stderr, NAME ": a correctness check failed (see above)\n");
  return ok && written ? 0 : 1;
}
