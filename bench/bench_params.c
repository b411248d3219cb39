/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_params — what graph parameters (recap/params.h) cost on the host, against raw CUDA and
 * against capturing again.
 *
 *   (a) set: a graph of k one-thread kernel nodes (k = 1, 4, 16, 64) that each take a float by
 *       value, the float a parameter: recap_param_set (which patches the k nodes) against k raw
 *       cudaGraphExecKernelNodeSetParams on the same nodes of an identical raw CUDA graph (its
 *       nodes from cudaGraphGetNodes, their parameters read with cudaGraphKernelNodeGetParams),
 *       the value changed at every set; and nodes taking four floats, each a parameter, set with
 *       one recap_params_set against the same k raw sets. Goal (a report): recap <= 1.2 x the k
 *       raw sets + 1 us.
 *   (b) step: a step of S kernels (S = 16, 64) that take a learning rate, a step count and a
 *       seed by value, run with new values at every step five ways: recap_params_set of the
 *       three parameters + recap_graph_replay; the raw floor of that (S raw sets +
 *       cudaGraphLaunch); a recapture with update of the step (the capture option `recapture`,
 *       capture_begin + the S launches + capture_end) + recap_graph_replay; and raw capture +
 *       cudaGraphExecUpdate + cudaGraphLaunch; and the parameters applied on the GPU by the graph
 *       itself (options.params_on_device) + replay. Goal (a report): parameters, set from the
 *       host or applied on the GPU, >= 10x cheaper than the recapture with update.
 *
 * Times are host times: one clock read before and one after a batch of calls, the stream
 * synchronised before each batch, the median over batches, the variants' batches alternating
 * (A B B A ...) so that drift hits all alike. After each measured phase the outputs are read
 * back: in (a) every node's output must hold the last value set, bit for bit; in (b) every way's
 * state must equal, bit for bit, that of the same steps launched eagerly with the real values.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "params_kernels.h"

#define NAME "bench_params"
static const int K_VALUES[] = {1, 4, 16, 64};
enum { K_COUNT = sizeof K_VALUES / sizeof K_VALUES[0], MAX_K = 64, MAX_PARAMS = 4 };
static const int S_VALUES[] = {16, 64};
enum { S_COUNT = sizeof S_VALUES / sizeof S_VALUES[0], STEP_N = 256 };

typedef struct bench {
  int quick;
  cudaStream_t stream;
  float *out_recap, *out_raw; /* (a): 4 floats per node */
  int checks_ok;
} bench_t;

static void check(bench_t *b, bool ok, const char *what) {
  if (ok) return;
  printf("CHECK FAILED: %s\n", what);
  fflush(stdout);
  b->checks_ok = 0;
}

static float *device_floats(size_t n) {
  void *p = NULL;
  BENCH_RECAP(recap_malloc(&p, n * sizeof(float), NULL));
  BENCH_CUDA(cudaMemset(p, 0, n * sizeof(float)));
  return p;
}

static void download(float *host, const float *device, size_t n) {
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaMemcpy(host, device, n * sizeof(float), cudaMemcpyDeviceToHost));
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ==========================================================================================
 * The raw floor: an executable's kernel nodes with their parameters read from the graph
 * ======================================================================================== */

/* Each node's cudaKernelNodeParams, read once; the caller points each one's kernelParams at
 * variables of its own, so that a set is one cudaGraphExecKernelNodeSetParams per node with
 * whatever those variables hold then. */
typedef struct raw_graph {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  size_t count;
  cudaGraphNode_t *nodes;
  struct cudaKernelNodeParams *params;
} raw_graph_t;

typedef void (*enqueue_fn)(bench_t *b, const void *arg);

static void raw_graph_capture(bench_t *b, enqueue_fn enqueue, const void *arg, raw_graph_t *r) {
  memset(r, 0, sizeof *r);
  BENCH_CUDA(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeGlobal));
  enqueue(b, arg);
  BENCH_CUDA(cudaStreamEndCapture(b->stream, &r->graph));
  BENCH_CUDA(cudaGraphInstantiateWithFlags(&r->exec, r->graph, 0));
  BENCH_CUDA(cudaGraphGetNodes(r->graph, NULL, &r->count));
  r->nodes = bench_calloc(NAME, r->count, sizeof *r->nodes);
  r->params = bench_calloc(NAME, r->count, sizeof *r->params);
  BENCH_CUDA(cudaGraphGetNodes(r->graph, r->nodes, &r->count));
  for (size_t i = 0; i < r->count; i++) {
    BENCH_CUDA(cudaGraphKernelNodeGetParams(r->nodes[i], &r->params[i]));
    r->params[i].extra = NULL;
  }
}

static void raw_graph_set(raw_graph_t *r) {
  for (size_t i = 0; i < r->count; i++)
    BENCH_CUDA(cudaGraphExecKernelNodeSetParams(r->exec, r->nodes[i], &r->params[i]));
}

static void raw_graph_destroy(raw_graph_t *r) {
  BENCH_CUDA(cudaGraphExecDestroy(r->exec));
  BENCH_CUDA(cudaGraphDestroy(r->graph));
  free(r->nodes);
  free(r->params);
}

/* ==========================================================================================
 * (a) one set at k nodes
 * ======================================================================================== */

/* k store kernels writing into out; node i stores `count` values (1 or 4) at index i. */
typedef struct stores {
  float *out;
  int k, count;
  const float *values;
} stores_t;

static void enqueue_stores(bench_t *b, const void *arg) {
  const stores_t *s = arg;
  const float *v = s->values;
  for (int i = 0; i < s->k; i++) {
    if (s->count == 1)
      BENCH_CUDA(bench_params_store1(b->stream, s->out, i, v[0]));
    else
      BENCH_CUDA(bench_params_store4(b->stream, s->out, i, v[0], v[1], v[2], v[3]));
  }
}

/* The next values to set: a different value at every set. */
static void next_values(float *values, int count, float *counter) {
  for (int p = 0; p < count; p++) values[p] = *counter + 0.25f * (float)p;
  *counter += 1.0f;
}

/* Replay or launch, then every node's output must hold `expected`, bit for bit. */
static void check_stores(bench_t *b, const float *out, int k, int count, const float *expected,
                         const char *what) {
  float host[MAX_K * MAX_PARAMS];
  download(host, out, (size_t)(k * count));
  bool ok = true;
  for (int i = 0; i < k; i++)
    for (int p = 0; p < count; p++) ok = ok && same_bits(host[i * count + p], expected[p]);
  char line[160];
  snprintf(line, sizeof line, "%s: k=%d, %d value(s): a node's output is not the last value set",
           what, k, count);
  check(b, ok, line);
}

typedef struct set_result {
  double raw_us, recap_us;
} set_result_t;

static set_result_t measure_set(bench_t *b, int k, int count, int batches, int per_batch) {
  static const char *const names[MAX_PARAMS] = {"a", "b", "c", "d"};
  float values[MAX_PARAMS] = {1.0f, 2.0f, 3.0f, 4.0f}, placeholders[MAX_PARAMS];
  recap_param_t params[MAX_PARAMS];
  recap_graph_t g;
  BENCH_RECAP(recap_graph_create(&g, 0));
  BENCH_RECAP(recap_graph_capture_begin(g, NULL, b->stream));
  for (int p = 0; p < count; p++)
    BENCH_RECAP(recap_graph_param_float(g, names[p], values[p], &placeholders[p], &params[p]));
  stores_t with_placeholders = {b->out_recap, k, count, placeholders};
  enqueue_stores(b, &with_placeholders);
  BENCH_RECAP(recap_graph_capture_end(g));
  recap_param_info_t info = RECAP_PARAM_INFO_INIT;
  BENCH_RECAP(recap_param_info(params[0], &info));
  check(b, info.sites == (size_t)k, "the parameter was found at every node");

  stores_t with_values = {b->out_raw, k, count, values};
  raw_graph_t raw;
  raw_graph_capture(b, enqueue_stores, &with_values, &raw);
  check(b, raw.count == (size_t)k, "the raw graph has k nodes");
  /* Each node's arguments: the output, its own index (read from the node), the values. */
  int index[MAX_K];
  void *args[MAX_K][2 + MAX_PARAMS];
  for (size_t i = 0; i < raw.count && i < MAX_K; i++) {
    void **captured = raw.params[i].kernelParams;
    index[i] = captured && captured[1] ? *(const int *)captured[1] : (int)i;
    args[i][0] = &b->out_raw;
    args[i][1] = &index[i];
    for (int p = 0; p < MAX_PARAMS; p++) args[i][2 + p] = &values[p];
    raw.params[i].kernelParams = args[i];
  }
  recap_param_value_t batch[MAX_PARAMS];
  for (int p = 0; p < count; p++) batch[p] = (recap_param_value_t){params[p], &values[p]};

  double *raw_s = bench_calloc(NAME, (size_t)batches, sizeof *raw_s);
  double *rec_s = bench_calloc(NAME, (size_t)batches, sizeof *rec_s);
  float counter = 10.0f, last_raw[MAX_PARAMS], last_recap[MAX_PARAMS];
  for (int i = 0; i < batches; i++) {
    for (int turn = 0; turn < 2; turn++) {
      bool raw_turn = (i % 2 == 0) == (turn == 0); /* A B B A ... */
      uint64_t t0 = bench_now_ns();
      for (int j = 0; j < per_batch; j++) {
        next_values(values, count, &counter);
        if (raw_turn)
          raw_graph_set(&raw);
        else if (count == 1)
          BENCH_RECAP(recap_param_set(params[0], &values[0]));
        else
          BENCH_RECAP(recap_params_set(batch, (size_t)count));
      }
      double us = (double)(bench_now_ns() - t0) / 1e3 / per_batch;
      if (raw_turn) {
        raw_s[i] = us;
        memcpy(last_raw, values, sizeof values);
      } else {
        rec_s[i] = us;
        memcpy(last_recap, values, sizeof values);
      }
    }
  }
  /* Each executable computes with the last values set into it. */
  BENCH_CUDA(cudaMemset(b->out_recap, 0, MAX_K * MAX_PARAMS * sizeof(float)));
  BENCH_CUDA(cudaMemset(b->out_raw, 0, MAX_K * MAX_PARAMS * sizeof(float)));
  BENCH_RECAP(recap_graph_replay(g, b->stream));
  BENCH_CUDA(cudaGraphLaunch(raw.exec, b->stream));
  check_stores(b, b->out_recap, k, count, last_recap, "recap");
  check_stores(b, b->out_raw, k, count, last_raw, "raw");

  set_result_t result = {bench_median(raw_s, (size_t)batches),
                         bench_median(rec_s, (size_t)batches)};
  free(raw_s);
  free(rec_s);
  raw_graph_destroy(&raw);
  BENCH_RECAP(recap_graph_destroy(g));
  return result;
}

static void section_set(bench_t *b) {
  int per_batch = b->quick ? 20 : 100, batches = b->quick ? 5 : 15;
  printf(
      "\n(a) a parameter set at k kernel nodes, host us per set (medians of %d batches of %d "
      "sets)\n",
      batches, per_batch);
  printf("%-18s %4s %12s %12s %10s %10s %10s %7s\n", "call", "k", "k raw sets", "raw per node",
         "recap", "recap/raw", "goal", "");
  int met = 0, rows = 0;
  for (int c = 0; c < 2; c++) {
    int count = c == 0 ? 1 : MAX_PARAMS;
    for (int i = 0; i < K_COUNT; i++) {
      int k = K_VALUES[i];
      set_result_t r = measure_set(b, k, count, batches, per_batch);
      double goal = 1.2 * r.raw_us + 1.0;
      bool ok = r.recap_us <= goal;
      met += ok;
      rows++;
      printf("%-18s %4d %12.2f %12.3f %10.2f %10.3f %10.2f %7s\n",
             count == 1 ? "param_set, 1" : "params_set, 4", k, r.raw_us, r.raw_us / k, r.recap_us,
             r.recap_us / r.raw_us, goal, ok ? "met" : "missed");
      char row[32];
      snprintf(row, sizeof row, "params=%d,k=%d", count, k);
      bench_record("set", row, "raw_us", r.raw_us);
      bench_record("set", row, "raw_per_node_us", r.raw_us / k);
      bench_record("set", row, "recap_us", r.recap_us);
      bench_record("set", row, "recap_over_raw", r.recap_us / r.raw_us);
      bench_record("set", row, "goal_us", goal);
      bench_record("set", row, "goal_met", ok ? 1.0 : 0.0);
    }
  }
  printf(
      "goal: recap <= 1.2 x k x raw_one + 1 us (k raw sets: k cudaGraphExecKernelNodeSetParams, "
      "each value changed at every set); met in %d of %d rows\n",
      met, rows);
}

/* ==========================================================================================
 * (b) a step's host cost
 * ======================================================================================== */

typedef struct step_values {
  float lr;
  int32_t step, seed;
} step_values_t;

/* Step t's values, as a training loop's schedule and seeds would give them. */
static step_values_t values_at(int t) {
  step_values_t v;
  v.lr = 1e-3f * (float)(1 + t % 13);
  v.step = t + 1;
  v.seed = (int32_t)((0x9e3779b9u * (uint32_t)(t + 1)) >> 1);
  return v;
}

typedef struct step_launches {
  float *x;
  int s;
  const step_values_t *values;
} step_launches_t;

static void enqueue_step(bench_t *b, const void *arg) {
  const step_launches_t *l = arg;
  for (int i = 0; i < l->s; i++)
    BENCH_CUDA(bench_params_scalar_step(b->stream, l->x, STEP_N, l->values->lr, l->values->step,
                                        l->values->seed));
}

enum { WAY_PARAMS, WAY_RAW_SET, WAY_RECAPTURE, WAY_RAW_UPDATE, WAY_PARAMS_GPU, WAYS };
static const char *const WAY_TITLES[WAYS] = {"params set + replay", "raw set + launch",
                                             "recapture + update + replay",
                                             "raw capture + update + launch",
                                             "params applied on the GPU + replay"};

typedef struct step_bench {
  int s;
  float *x[WAYS]; /* each way's state */
  int done[WAYS]; /* steps each way has run */
  recap_graph_t with_params, recaptured, on_gpu;
  recap_param_t lr, step, seed, gpu_lr, gpu_step, gpu_seed;
  raw_graph_t raw_set;      /* its kernelParams point at raw_args */
  step_values_t raw_values; /* what raw_set's next set writes */
  int raw_n;
  void *raw_args[5];
  cudaGraphExec_t raw_update; /* updated from a fresh capture at every step */
} step_bench_t;

static void run_step(bench_t *b, step_bench_t *sb, int way) {
  int t = sb->done[way]++;
  step_values_t v = values_at(t);
  step_launches_t launches = {sb->x[way], sb->s, &v};
  switch (way) {
    case WAY_PARAMS: {
      recap_param_value_t batch[] = {{sb->lr, &v.lr}, {sb->step, &v.step}, {sb->seed, &v.seed}};
      BENCH_RECAP(recap_params_set(batch, 3));
      BENCH_RECAP(recap_graph_replay(sb->with_params, b->stream));
      break;
    }
    case WAY_PARAMS_GPU: {
      recap_param_value_t batch[] = {{sb->gpu_lr, &v.lr},
                                     {sb->gpu_step, &v.step},
                                     {sb->gpu_seed, &v.seed}};
      BENCH_RECAP(recap_params_set(batch, 3));
      BENCH_RECAP(recap_graph_replay(sb->on_gpu, b->stream));
      break;
    }
    case WAY_RAW_SET:
      sb->raw_values = v;
      raw_graph_set(&sb->raw_set);
      BENCH_CUDA(cudaGraphLaunch(sb->raw_set.exec, b->stream));
      break;
    case WAY_RECAPTURE: {
      recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
      o.recapture = 1;
      BENCH_RECAP(recap_graph_capture_begin(sb->recaptured, &o, b->stream));
      enqueue_step(b, &launches);
      BENCH_RECAP(recap_graph_capture_end(sb->recaptured));
      BENCH_RECAP(recap_graph_replay(sb->recaptured, b->stream));
      break;
    }
    default: {
      cudaGraph_t graph = NULL;
      BENCH_CUDA(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeGlobal));
      enqueue_step(b, &launches);
      BENCH_CUDA(cudaStreamEndCapture(b->stream, &graph));
      cudaGraphExecUpdateResultInfo info;
      BENCH_CUDA(cudaGraphExecUpdate(sb->raw_update, graph, &info));
      BENCH_CUDA(cudaGraphDestroy(graph));
      BENCH_CUDA(cudaGraphLaunch(sb->raw_update, b->stream));
      break;
    }
  }
}

static void step_bench_init(bench_t *b, step_bench_t *sb, int s) {
  memset(sb, 0, sizeof *sb);
  sb->s = s;
  for (int w = 0; w < WAYS; w++) sb->x[w] = device_floats(STEP_N);
  step_values_t v0 = values_at(0);

  /* Captured once, the three values declared as parameters. */
  BENCH_RECAP(recap_graph_create(&sb->with_params, 0));
  BENCH_RECAP(recap_graph_capture_begin(sb->with_params, NULL, b->stream));
  step_values_t ph;
  BENCH_RECAP(recap_graph_param_float(sb->with_params, "lr", v0.lr, &ph.lr, &sb->lr));
  BENCH_RECAP(recap_graph_param_int32(sb->with_params, "step", v0.step, &ph.step, &sb->step));
  BENCH_RECAP(recap_graph_param_int32(sb->with_params, "seed", v0.seed, &ph.seed, &sb->seed));
  step_launches_t with_placeholders = {sb->x[WAY_PARAMS], s, &ph};
  enqueue_step(b, &with_placeholders);
  BENCH_RECAP(recap_graph_capture_end(sb->with_params));

  /* The same, the parameters applied by the graph itself on the GPU. */
  recap_capture_options_t on_gpu = RECAP_CAPTURE_OPTIONS_INIT;
  on_gpu.params_on_device = 1;
  BENCH_RECAP(recap_graph_create(&sb->on_gpu, 0));
  BENCH_RECAP(recap_graph_capture_begin(sb->on_gpu, &on_gpu, b->stream));
  BENCH_RECAP(recap_graph_param_float(sb->on_gpu, "lr", v0.lr, &ph.lr, &sb->gpu_lr));
  BENCH_RECAP(recap_graph_param_int32(sb->on_gpu, "step", v0.step, &ph.step, &sb->gpu_step));
  BENCH_RECAP(recap_graph_param_int32(sb->on_gpu, "seed", v0.seed, &ph.seed, &sb->gpu_seed));
  step_launches_t gpu_placeholders = {sb->x[WAY_PARAMS_GPU], s, &ph};
  enqueue_step(b, &gpu_placeholders);
  BENCH_RECAP(recap_graph_capture_end(sb->on_gpu));

  /* The raw graph whose S nodes are set by hand: every node takes the same arguments. */
  sb->raw_values = v0;
  step_launches_t raw_launches = {sb->x[WAY_RAW_SET], s, &v0};
  raw_graph_capture(b, enqueue_step, &raw_launches, &sb->raw_set);
  sb->raw_n = STEP_N;
  sb->raw_args[0] = &sb->x[WAY_RAW_SET];
  sb->raw_args[1] = &sb->raw_n;
  sb->raw_args[2] = &sb->raw_values.lr;
  sb->raw_args[3] = &sb->raw_values.step;
  sb->raw_args[4] = &sb->raw_values.seed;
  for (size_t i = 0; i < sb->raw_set.count; i++) sb->raw_set.params[i].kernelParams = sb->raw_args;

  /* Recaptured at every step: the first capture_begin captures it. */
  BENCH_RECAP(recap_graph_create(&sb->recaptured, 0));

  /* The raw executable that every step's capture updates. */
  cudaGraph_t first = NULL;
  step_launches_t update_launches = {sb->x[WAY_RAW_UPDATE], s, &v0};
  BENCH_CUDA(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeGlobal));
  enqueue_step(b, &update_launches);
  BENCH_CUDA(cudaStreamEndCapture(b->stream, &first));
  BENCH_CUDA(cudaGraphInstantiateWithFlags(&sb->raw_update, first, 0));
  BENCH_CUDA(cudaGraphDestroy(first));
}

static void step_bench_destroy(step_bench_t *sb) {
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_RECAP(recap_graph_destroy(sb->with_params));
  BENCH_RECAP(recap_graph_destroy(sb->on_gpu));
  BENCH_RECAP(recap_graph_destroy(sb->recaptured));
  raw_graph_destroy(&sb->raw_set);
  BENCH_CUDA(cudaGraphExecDestroy(sb->raw_update));
  for (int w = 0; w < WAYS; w++) BENCH_RECAP(recap_free(sb->x[w]));
}

/* Every way's state must equal, bit for bit, the state of its steps launched eagerly. */
static void check_steps(bench_t *b, step_bench_t *sb) {
  float *reference = device_floats(STEP_N);
  float expected[STEP_N], got[STEP_N];
  int steps = sb->done[0];
  for (int t = 0; t < steps; t++) {
    step_values_t v = values_at(t);
    step_launches_t eager = {reference, sb->s, &v};
    enqueue_step(b, &eager);
  }
  download(expected, reference, STEP_N);
  for (int w = 0; w < WAYS; w++) {
    download(got, sb->x[w], STEP_N);
    char line[160];
    snprintf(line, sizeof line, "S=%d, %s: %d steps, eagerly %d: the states differ", sb->s,
             WAY_TITLES[w], sb->done[w], steps);
    check(b, sb->done[w] == steps && memcmp(expected, got, sizeof got) == 0, line);
  }
  BENCH_RECAP(recap_free(reference));
}

static void section_step(bench_t *b) {
  int per_batch = b->quick ? 10 : 40, batches = b->quick ? 4 : 12;
  printf(
      "\n(b) a step of S kernels taking lr, step and seed by value, new values every step: host "
      "us per step (medians of %d batches of %d steps)\n",
      batches, per_batch);
  printf("%4s %14s %14s %18s %18s %12s %12s %12s %14s %12s %8s\n", "S", "params+replay",
         "raw set+launch", "recapture+update", "raw capture+upd.", "recapture/", "raw upd./",
         "params/", "params on GPU", "recapture/", "goal");
  printf("%4s %14s %14s %18s %18s %12s %12s %12s %14s %12s %8s\n", "", "", "", "+replay", "+launch",
         "params", "params", "raw set", "+replay", "on GPU", ">= 10x");
  int met = 0;
  for (int i = 0; i < S_COUNT; i++) {
    step_bench_t sb;
    step_bench_init(b, &sb, S_VALUES[i]);
    for (int w = 0; w < WAYS; w++) run_step(b, &sb, w); /* warm-up: uploads, first capture */
    double *samples[WAYS];
    for (int w = 0; w < WAYS; w++) samples[w] = bench_calloc(NAME, (size_t)batches, sizeof(double));
    for (int r = 0; r < batches; r++)
      for (int turn = 0; turn < WAYS; turn++) {
        int way = r % 2 ? WAYS - 1 - turn : turn;
        BENCH_CUDA(cudaStreamSynchronize(b->stream));
        uint64_t t0 = bench_now_ns();
        for (int j = 0; j < per_batch; j++) run_step(b, &sb, way);
        samples[way][r] = (double)(bench_now_ns() - t0) / 1e3 / per_batch;
      }
    check_steps(b, &sb);
    double us[WAYS];
    for (int w = 0; w < WAYS; w++) {
      us[w] = bench_median(samples[w], (size_t)batches);
      free(samples[w]);
    }
    double x_recapture = us[WAY_RECAPTURE] / us[WAY_PARAMS];
    double x_raw_update = us[WAY_RAW_UPDATE] / us[WAY_PARAMS];
    double over_raw = us[WAY_PARAMS] / us[WAY_RAW_SET];
    double x_gpu = us[WAY_RECAPTURE] / us[WAY_PARAMS_GPU];
    bool ok = x_recapture >= 10.0 || x_gpu >= 10.0;
    met += ok;
    printf("%4d %14.2f %14.2f %18.2f %18.2f %11.1fx %11.1fx %12.3f %14.2f %11.1fx %8s\n", sb.s,
           us[WAY_PARAMS], us[WAY_RAW_SET], us[WAY_RECAPTURE], us[WAY_RAW_UPDATE], x_recapture,
           x_raw_update, over_raw, us[WAY_PARAMS_GPU], x_gpu, ok ? "met" : "missed");
    char row[16];
    snprintf(row, sizeof row, "S=%d", sb.s);
    bench_record("step", row, "params_replay_us", us[WAY_PARAMS]);
    bench_record("step", row, "raw_set_launch_us", us[WAY_RAW_SET]);
    bench_record("step", row, "recapture_update_replay_us", us[WAY_RECAPTURE]);
    bench_record("step", row, "raw_capture_update_launch_us", us[WAY_RAW_UPDATE]);
    bench_record("step", row, "recapture_over_params", x_recapture);
    bench_record("step", row, "params_gpu_replay_us", us[WAY_PARAMS_GPU]);
    bench_record("step", row, "recapture_over_params_gpu", x_gpu);
    bench_record("step", row, "raw_update_over_params", x_raw_update);
    bench_record("step", row, "params_over_raw_set", over_raw);
    bench_record("step", row, "goal_met", ok ? 1.0 : 0.0);
    step_bench_destroy(&sb);
  }
  printf(
      "goal: params (set from the host, or on the GPU) + replay >= 10x cheaper than recapture + "
      "update + replay; met in %d of %d rows\n",
      met, S_COUNT);
}

/* ==========================================================================================
 * Setup and output
 * ======================================================================================== */

int main(int argc, char **argv) {
  bench_args_t args;
  int started = bench_start(argc, argv, NAME, &args);
  if (started >= 0) return started;

  bench_t b;
  memset(&b, 0, sizeof b);
  b.quick = args.quick;
  b.checks_ok = 1;
  BENCH_CUDA(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  BENCH_CUDA(bench_params_kernels_load());
  b.out_recap = device_floats(MAX_K * MAX_PARAMS);
  b.out_raw = device_floats(MAX_K * MAX_PARAMS);

  section_set(&b);
  fflush(stdout);
  section_step(&b);
  printf("\nchecks: %s\n", b.checks_ok ? "every output equals the expected values bit for bit"
                                       : "FAILED (see the CHECK FAILED lines above)");

  int written = bench_write_figures(args.json_path, NAME, args.quick, b.checks_ok);
  if (written) printf("results: %s\n", args.json_path);
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_RECAP(recap_free(b.out_recap));
  BENCH_RECAP(recap_free(b.out_raw));
  BENCH_CUDA(cudaStreamDestroy(b.stream));
  BENCH_RECAP(recap_empty_cache());
  if (!b.checks_ok) fprintf(stderr, NAME ": a correctness check failed (see above)\n");
  return b.checks_ok && written ? 0 : 1;
}
