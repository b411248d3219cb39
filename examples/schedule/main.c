/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * schedule — a training step captured once, run with a learning-rate schedule, AdamW's bias
 * corrections and a new dropout seed at every step, through graph parameters (recap/params.h).
 *
 * A two-layer MLP (16 -> 64 -> 4, ReLU, dropout 0.1) learns a fixed synthetic target from 256
 * samples with a mean-squared-error loss and AdamW. One step is ten plain kernels: the forward
 * with dropout (its mask drawn from the step's seed), the loss (written at position step - 1 of
 * a loss history), the backward, and AdamW on each of the four tensors. The learning rate
 * follows a linear warm-up then a cosine decay; the bias corrections 1 - beta1^t and
 * 1 - beta2^t are computed on the host; the dropout seed is a hash of the run's seed and t.
 * All five values reach the kernels by value.
 *
 * The program trains twice from the same start:
 *
 *   eager    each step's ten kernels launched with the step's values;
 *   graphed  the step captured once as one recap graph, the five values declared as parameters
 *            (recap_graph_param_float, _int32, recap_graph_param_declare for the 64-bit seed);
 *            each step sets them (one recap_params_set) and replays the graph.
 *
 * Every step's loss and the final weights (and AdamW's moments) must be equal bit for bit. The
 * program prints the schedule and the losses at a few steps, and the host time per step of
 * each way.
 *
 *     schedule [--steps N] [--warmup W] [--seed S]                           (schedule --help)
 *
 * Exit status: 0 the ways agree; 1 a failure or a difference; 2 a bad command line; 77 no CUDA
 * device (the test runner's "skipped").
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "recap.h"

#define PROGRAM "schedule"
#include "example_check.h"
#include "example_args.h"

enum { EXIT_BAD_USAGE = 2, EXIT_NO_DEVICE = 77, STEPS_UNDER_A_TOOL = 20 };
enum { BATCH = 256, IN = 16, HIDDEN = 64, OUT = 4, TENSORS = 4, PARAMS = 5, TABLE_ROWS = 7 };
static const double PEAK_LR = 1e-2, FINAL_LR_FRACTION = 0.01;
static const float DROP = 0.1f, WEIGHT_DECAY = 0.01f;

/* ==========================================================================================
 * Options
 * ======================================================================================== */

typedef struct options {
  int steps, warmup; /* warmup < 0: a tenth of the steps */
  unsigned seed;
} options_t;

static void usage(FILE *f) {
  fprintf(f, "usage: " PROGRAM
             " [options]\n"
             "\n"
             "Trains a small MLP with dropout and AdamW under a warm-up + cosine learning-rate\n"
             "schedule twice: eagerly, and as one recap graph captured once whose learning rate,\n"
             "bias corrections, step count and dropout seed are graph parameters set before each\n"
             "replay. Every step's loss and the final weights must be equal bit for bit.\n"
             "\n"
             "  --steps N    training steps, 1 to 100000 (default 500)\n"
             "  --warmup W   warm-up steps, 0 to N (default N / 10)\n"
             "  --seed S     seed of the data, the weights and the dropout (default 7)\n"
             "  -h, --help   this text\n"
             "\n"
             "Exit status: 0 the ways agree; 1 a failure or a difference; 2 a bad command line;\n"
             "77 no CUDA device.\n");
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, options_t *o) {
  enum { OPT_STEPS = 256, OPT_WARMUP, OPT_SEED };
  static const struct option options[] = {
      {"steps", required_argument, NULL, OPT_STEPS},
      {"warmup", required_argument, NULL, OPT_WARMUP},
      {"seed", required_argument, NULL, OPT_SEED},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *o = (options_t){.steps = 500, .warmup = -1, .seed = 7};
  int c, seed = 0, index = 0;
  opterr = 0; /* the messages below name the program and the option */
  while ((c = getopt_long(argc, argv, ":h", options, &index)) != -1) {
    const char *arg = optarg;
    switch (c) {
      case OPT_STEPS:
        if (!example_parse_int(arg, 1, 100000, &o->steps)) goto bad_value;
        break;
      case OPT_WARMUP:
        if (!example_parse_int(arg, 0, 100000, &o->warmup)) goto bad_value;
        break;
      case OPT_SEED:
        if (!example_parse_int(arg, 0, 2147483647L, &seed)) goto bad_value;
        o->seed = (unsigned)seed;
        break;
      case 'h': usage(stdout); return 0;
      default: return example_option_error(PROGRAM, c, argv, optind, usage);
    }
    continue;
  bad_value:
    return example_bad_value(PROGRAM, arg, options[index].name);
  }
  if (optind < argc) return example_extra_argument(PROGRAM, argv[optind]);
  if (o->warmup > o->steps) {
    fprintf(stderr, PROGRAM ": --warmup %d is more than --steps %d\n", o->warmup, o->steps);
    return EXIT_BAD_USAGE;
  }
  return -1;
}

/* ==========================================================================================
 * The schedule: what changes every step
 * ======================================================================================== */

/* Step t's values (t = 1, 2, ...), computed on the host the same way for both runs. */
typedef struct step_values {
  float lr, bc1, bc2; /* the learning rate, 1 - beta1^t, 1 - beta2^t */
  int32_t step;       /* t: where the loss kernel writes this step's loss */
  uint64_t seed;      /* the dropout mask's seed */
} step_values_t;

/* Linear warm-up from 0 to PEAK_LR over `warmup` steps, then a cosine decay to
 * PEAK_LR * FINAL_LR_FRACTION at the last step. */
static double learning_rate(const options_t *o, int t) {
  if (t <= o->warmup) return PEAK_LR * (double)t / (double)o->warmup;
  double final_lr = PEAK_LR * FINAL_LR_FRACTION, pi = acos(-1.0);
  double progress =
      o->steps > o->warmup ? (double)(t - o->warmup) / (double)(o->steps - o->warmup) : 1.0;
  return final_lr + 0.5 * (PEAK_LR - final_lr) * (1.0 + cos(pi * progress));
}

static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static step_values_t values_at(const options_t *o, int t) {
  step_values_t v;
  v.lr = (float)learning_rate(o, t);
  v.bc1 = (float)(1.0 - pow((double)SCHED_BETA1, t));
  v.bc2 = (float)(1.0 - pow((double)SCHED_BETA2, t));
  v.step = t;
  v.seed = mix64(((uint64_t)o->seed << 32) + (uint64_t)t);
  return v;
}

/* ==========================================================================================
 * The model and one training step
 * ======================================================================================== */

/* The four tensors in the parameter, gradient and moment buffers: W1, b1, W2, b2. Weight decay
 * applies to the matrices only. */
typedef struct tensor {
  size_t offset;
  int count;
  float weight_decay;
} tensor_t;

typedef struct model {
  sched_shape_t shape;
  cudaStream_t stream;
  tensor_t tensors[TENSORS];
  size_t n_params;
  int capacity;                      /* entries of losses: the steps */
  float *x, *target;                 /* the data: BATCH x IN, BATCH x OUT */
  float *w, *g, *m, *v;              /* parameters, gradients, AdamW's moments */
  float *hd, *mask, *diff, *dy, *dh; /* the step's activations and gradients */
  float *losses;                     /* losses[t - 1]: step t's loss */
  float *w0;                         /* host: the initial parameters */
} model_t;

static float *device_floats(size_t n) {
  void *p = NULL;
  CHECK_RECAP(recap_malloc(&p, n * sizeof(float), NULL));
  return p;
}

/* A fixed-seed generator (xorshift32): uniform in [-1, 1). */
static float next_uniform(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return (float)(*s >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static void model_init(model_t *mo, const options_t *o) {
  memset(mo, 0, sizeof *mo);
  mo->shape = (sched_shape_t){BATCH, IN, HIDDEN, OUT};
  CHECK_CUDA(cudaStreamCreateWithFlags(&mo->stream, cudaStreamNonBlocking));
  const int counts[TENSORS] = {HIDDEN * IN, HIDDEN, OUT * HIDDEN, OUT};
  for (int i = 0; i < TENSORS; i++) {
    mo->tensors[i] = (tensor_t){mo->n_params, counts[i], i % 2 == 0 ? WEIGHT_DECAY : 0.0f};
    mo->n_params += (size_t)counts[i];
  }
  mo->capacity = o->steps;
  mo->x = device_floats(BATCH * IN);
  mo->target = device_floats(BATCH * OUT);
  mo->w = device_floats(mo->n_params);
  mo->g = device_floats(mo->n_params);
  mo->m = device_floats(mo->n_params);
  mo->v = device_floats(mo->n_params);
  mo->hd = device_floats(BATCH * HIDDEN);
  mo->mask = device_floats(BATCH * HIDDEN);
  mo->diff = device_floats(BATCH * OUT);
  mo->dy = device_floats(BATCH * OUT);
  mo->dh = device_floats(BATCH * HIDDEN);
  mo->losses = device_floats((size_t)mo->capacity);

  /* The data: inputs in [-1, 1), targets sin(A x) for a fixed A. The weights: uniform in
   * +-1/sqrt(fan_in), the biases 0. */
  uint32_t rng = 0x9e3779b9u ^ o->seed;
  if (!rng) rng = 1;
  float *x = host_alloc(BATCH * IN * sizeof(float)), *t = host_alloc(BATCH * OUT * sizeof(float));
  float a[OUT][IN];
  for (int k = 0; k < OUT; k++)
    for (int i = 0; i < IN; i++) a[k][i] = next_uniform(&rng) * 0.5f;
  for (int i = 0; i < BATCH * IN; i++) x[i] = next_uniform(&rng);
  for (int b = 0; b < BATCH; b++)
    for (int k = 0; k < OUT; k++) {
      double s = 0.0;
      for (int i = 0; i < IN; i++) s += (double)a[k][i] * (double)x[b * IN + i];
      t[b * OUT + k] = (float)sin(s);
    }
  CHECK_CUDA(cudaMemcpy(mo->x, x, BATCH * IN * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(mo->target, t, BATCH * OUT * sizeof(float), cudaMemcpyHostToDevice));
  free(x);
  free(t);
  mo->w0 = host_alloc(mo->n_params * sizeof(float));
  const int fan_in[TENSORS] = {IN, 0, HIDDEN, 0};
  for (int i = 0; i < TENSORS; i++) {
    float scale = fan_in[i] ? 1.0f / sqrtf((float)fan_in[i]) : 0.0f;
    for (int j = 0; j < mo->tensors[i].count; j++)
      mo->w0[mo->tensors[i].offset + (size_t)j] = next_uniform(&rng) * scale;
  }
}

/* Back to the start: the initial weights, zero moments, no losses. */
static void model_reset(model_t *mo) {
  size_t bytes = mo->n_params * sizeof(float);
  CHECK_CUDA(cudaMemcpy(mo->w, mo->w0, bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(mo->g, 0, bytes));
  CHECK_CUDA(cudaMemset(mo->m, 0, bytes));
  CHECK_CUDA(cudaMemset(mo->v, 0, bytes));
  CHECK_CUDA(cudaMemset(mo->losses, 0, (size_t)mo->capacity * sizeof(float)));
  CHECK_CUDA(cudaDeviceSynchronize());
}

/* One training step with values v: ten kernels, launched or captured. */
static void enqueue_step(model_t *mo, const step_values_t *v) {
  sched_shape_t s = mo->shape;
  cudaStream_t st = mo->stream;
  const tensor_t *w1 = &mo->tensors[0], *b1 = &mo->tensors[1], *w2 = &mo->tensors[2],
                 *b2 = &mo->tensors[3];
  CHECK_CUDA(sched_forward_hidden(s, mo->x, mo->w + w1->offset, mo->w + b1->offset, DROP, v->seed,
                                  mo->hd, mo->mask, st));
  CHECK_CUDA(sched_forward_out(s, mo->hd, mo->w + w2->offset, mo->w + b2->offset, mo->target,
                               mo->diff, mo->dy, st));
  CHECK_CUDA(sched_loss(mo->diff, BATCH * OUT, mo->losses, mo->capacity, v->step, st));
  CHECK_CUDA(sched_backward_out(s, mo->dy, mo->hd, mo->g + w2->offset, mo->g + b2->offset, st));
  CHECK_CUDA(sched_backward_hidden(s, mo->dy, mo->w + w2->offset, mo->mask, mo->dh, st));
  CHECK_CUDA(sched_backward_in(s, mo->dh, mo->x, mo->g + w1->offset, mo->g + b1->offset, st));
  for (int i = 0; i < TENSORS; i++) {
    const tensor_t *t = &mo->tensors[i];
    CHECK_CUDA(sched_adamw(mo->w + t->offset, mo->g + t->offset, mo->m + t->offset,
                           mo->v + t->offset, t->count, v->lr, v->bc1, v->bc2, t->weight_decay,
                           st));
  }
}

/* ==========================================================================================
 * The two runs
 * ======================================================================================== */

/* What a run leaves, copied to the host. */
typedef struct outcome {
  float *losses, *w, *m, *v;
  double host_us_per_step;
} outcome_t;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void collect(model_t *mo, outcome_t *out) {
  CHECK_CUDA(cudaStreamSynchronize(mo->stream));
  size_t bytes = mo->n_params * sizeof(float), loss_bytes = (size_t)mo->capacity * sizeof(float);
  out->losses = host_alloc(loss_bytes);
  out->w = host_alloc(bytes);
  out->m = host_alloc(bytes);
  out->v = host_alloc(bytes);
  CHECK_CUDA(cudaMemcpy(out->losses, mo->losses, loss_bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out->w, mo->w, bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out->m, mo->m, bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out->v, mo->v, bytes, cudaMemcpyDeviceToHost));
}

static void run_eager(model_t *mo, const options_t *o, outcome_t *out) {
  model_reset(mo);
  double t0 = now_us();
  for (int t = 1; t <= o->steps; t++) {
    step_values_t v = values_at(o, t);
    enqueue_step(mo, &v);
  }
  out->host_us_per_step = (now_us() - t0) / o->steps;
  collect(mo, out);
}

static const char *const PARAM_NAMES[PARAMS] = {"lr", "bc1", "bc2", "step", "seed"};

/* Capture the step once with its five values as parameters, then per step: set them, replay.
 * on_device: the graph applies them itself (options.params_on_device): a set is a store into
 * host memory, and the graph's first node writes the values into the kernels. */
static void run_graphed(model_t *mo, const options_t *o, bool on_device, outcome_t *out,
                        double *capture_us) {
  model_reset(mo);
  double t0 = now_us();
  recap_graph_t g;
  CHECK_RECAP(recap_graph_create(&g, 0));
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.params_on_device = on_device;
  CHECK_RECAP(recap_graph_capture_begin(g, &options, mo->stream));
  step_values_t first = values_at(o, 1), ph;
  recap_param_t p[PARAMS];
  CHECK_RECAP(recap_graph_param_float(g, "lr", first.lr, &ph.lr, &p[0]));
  CHECK_RECAP(recap_graph_param_float(g, "bc1", first.bc1, &ph.bc1, &p[1]));
  CHECK_RECAP(recap_graph_param_float(g, "bc2", first.bc2, &ph.bc2, &p[2]));
  CHECK_RECAP(recap_graph_param_int32(g, "step", first.step, &ph.step, &p[3]));
  /* The kernel takes the seed as a uint64_t: the untyped form declares it with its own type. */
  CHECK_RECAP(
      recap_graph_param_declare(g, "seed", RECAP_PARAM_INT64, &first.seed, &ph.seed, &p[4]));
  enqueue_step(mo, &ph); /* the placeholders, where the kernels take the values */
  CHECK_RECAP(recap_graph_capture_end(g));
  *capture_us = now_us() - t0;

  printf("captured once%s: parameters found at",
         on_device ? " (parameters applied on the GPU)" : "");
  for (int i = 0; i < PARAMS; i++) {
    recap_param_info_t info = RECAP_PARAM_INFO_INIT;
    CHECK_RECAP(recap_param_info(p[i], &info));
    printf("%s %s: %zu", i ? "," : "", PARAM_NAMES[i], info.sites);
  }
  printf(" kernel arguments\n");

  t0 = now_us();
  for (int t = 1; t <= o->steps; t++) {
    step_values_t v = values_at(o, t);
    const recap_param_value_t batch[PARAMS] = {
        {p[0], &v.lr}, {p[1], &v.bc1}, {p[2], &v.bc2}, {p[3], &v.step}, {p[4], &v.seed}};
    CHECK_RECAP(recap_params_set(batch, PARAMS));
    CHECK_RECAP(recap_graph_replay(g, mo->stream));
  }
  out->host_us_per_step = (now_us() - t0) / o->steps;
  collect(mo, out);
  CHECK_RECAP(recap_graph_destroy(g));
}

/* ==========================================================================================
 * Comparison and report
 * ======================================================================================== */

static bool same_floats(const float *a, const float *b, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      printf("  %s differ first at %zu: eager %.9g, graphed %.9g\n", what, i, (double)a[i],
             (double)b[i]);
      return false;
    }
  return true;
}

/* The steps the table shows: the first, the warm-up's middle and end, and the decay's quarters. */
static int table_steps(const options_t *o, int *rows) {
  int want[TABLE_ROWS] = {1,
                          o->warmup / 2,
                          o->warmup,
                          o->warmup + (o->steps - o->warmup) / 4,
                          o->warmup + (o->steps - o->warmup) / 2,
                          o->warmup + 3 * (o->steps - o->warmup) / 4,
                          o->steps};
  int n = 0;
  for (int i = 0; i < TABLE_ROWS; i++)
    if (want[i] >= 1 && want[i] <= o->steps && (n == 0 || want[i] > rows[n - 1]))
      rows[n++] = want[i];
  return n;
}

int main(int argc, char **argv) {
  options_t o;
  int code = parse_args(argc, argv, &o);
  if (code >= 0) return code;

  if (!example_have_device()) return EXIT_NO_DEVICE;
  if (example_under_a_tool() && o.steps > STEPS_UNDER_A_TOOL) {
    printf(PROGRAM ": under a CUDA tool: %d steps instead of %d\n", STEPS_UNDER_A_TOOL, o.steps);
    o.steps = STEPS_UNDER_A_TOOL;
  }
  if (o.warmup < 0 || o.warmup > o.steps) o.warmup = o.steps / 10;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(sched_kernels_load());

  model_t mo;
  model_init(&mo, &o);
  printf(PROGRAM
         ": MLP %d-%d-%d with dropout %.2f, %d samples, AdamW; %d steps, warm-up %d then cosine "
         "decay, peak lr %g\n",
         IN, HIDDEN, OUT, (double)DROP, BATCH, o.steps, o.warmup, PEAK_LR);
  /* One eager step first, so that neither run's timing holds the first launches' costs. */
  model_reset(&mo);
  step_values_t warm = values_at(&o, 1);
  enqueue_step(&mo, &warm);
  CHECK_CUDA(cudaStreamSynchronize(mo.stream));

  outcome_t eager, graphed, on_gpu;
  double capture_us = 0, capture_gpu_us = 0;
  run_eager(&mo, &o, &eager);
  run_graphed(&mo, &o, false, &graphed, &capture_us);
  run_graphed(&mo, &o, true, &on_gpu, &capture_gpu_us);

  int rows[TABLE_ROWS];
  int n_rows = table_steps(&o, rows);
  printf("\n%6s %12s %16s %16s %16s %6s\n", "step", "lr", "loss eager", "loss graphed",
         "loss on GPU", "same");
  for (int i = 0; i < n_rows; i++) {
    int t = rows[i];
    step_values_t v = values_at(&o, t);
    float a = eager.losses[t - 1], b = graphed.losses[t - 1], c = on_gpu.losses[t - 1];
    printf("%6d %12.4e %16.9g %16.9g %16.9g %6s\n", t, (double)v.lr, (double)a, (double)b,
           (double)c,
           memcmp(&a, &b, sizeof a) == 0 && memcmp(&a, &c, sizeof a) == 0 ? "yes" : "NO");
  }
  printf(
      "\nhost us per step: eager %.2f (10 launches), graphed %.2f (one recap_params_set of %d "
      "parameters + one replay; the capture, once: %.0f us)\n",
      eager.host_us_per_step, graphed.host_us_per_step, PARAMS, capture_us);
  printf("host us per step with the parameters applied on the GPU: %.2f (the capture: %.0f us)\n",
         on_gpu.host_us_per_step, capture_gpu_us);

  size_t n = mo.n_params;
  bool same = same_floats(eager.losses, graphed.losses, (size_t)o.steps, "the losses");
  same = same_floats(eager.w, graphed.w, n, "the final weights") && same;
  same = same_floats(eager.m, graphed.m, n, "AdamW's first moments") && same;
  same = same_floats(eager.v, graphed.v, n, "AdamW's second moments") && same;
  same =
      same_floats(eager.losses, on_gpu.losses, (size_t)o.steps, "the losses (on the GPU)") && same;
  same = same_floats(eager.w, on_gpu.w, n, "the final weights (on the GPU)") && same;
  printf("%s\n", same ? "every step's loss and the final weights are equal bit for bit"
                      : "THE RUNS DIFFER (see above)");

  outcome_t *outcomes[] = {&eager, &graphed, &on_gpu};
  for (int i = 0; i < 3; i++) {
    free(outcomes[i]->losses);
    free(outcomes[i]->w);
    free(outcomes[i]->m);
    free(outcomes[i]->v);
  }
  float *buffers[] = {mo.x,  mo.target, mo.w,    mo.g,  mo.m,  mo.v,
                      mo.hd, mo.mask,   mo.diff, mo.dy, mo.dh, mo.losses};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
    CHECK_RECAP(recap_free(buffers[i]));
  free(mo.w0);
  CHECK_CUDA(cudaStreamDestroy(mo.stream));
  CHECK_RECAP(recap_memory_check());
  CHECK_RECAP(recap_empty_cache());
  return same ? 0 : 1;
}
