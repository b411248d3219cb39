/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlp_model.c — the MLP, its layers as forward/backward functions, and the three ways of
 * running a training step (see mlp_model.h).
 *
 * The layer functions are written once, in the shape recap's graphed callables want: a forward
 * that enqueues its work on the stream it is given and allocates its output with recap_malloc
 * on that stream, and a backward that does the same for the input gradient and writes the
 * parameter gradients into the flat gradient buffer. The eager way calls them directly; the
 * graphed way hands them to recap_graphed_create; the whole-step way calls them between
 * recap_graph_capture_begin and _end. Same functions, same kernels, same order: same bits.
 *
 * Why one file of about 900 lines: the three ways are only comparable because they share these
 * functions, and a reader checks that by reading them side by side; the kernels (mlp_kernels.cu)
 * and the data (mlp_data.c) live apart.
 */
#include "mlp_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "mlp_kernels.h"

/* ==========================================================================================
 * Errors: the detail of the last failure, per thread
 * ======================================================================================== */

static _Thread_local char g_error[1536];

const char *mlp_error(void) { return g_error; }

static void clear_errors(void) {
  g_error[0] = '\0';
  recap_clear_last_error();
}

static recap_status_t fail(recap_status_t status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(g_error, sizeof g_error, format, args);
  va_end(args);
  return status;
}

/* A recap call failed. If the failure came out of one of our callbacks (a forward or backward
 * run by recap_graphed_create), our own message says why: keep it as the cause. */
static recap_status_t fail_recap(recap_status_t status, const char *call, const char *file,
                                 int line) {
  char cause[sizeof g_error / 2];
  size_t n = 0;
  while (n + 1 < sizeof cause && g_error[n]) {
    cause[n] = g_error[n];
    n++;
  }
  cause[n] = '\0';
  const char *detail = recap_last_error();
  return fail(status, "%s failed: %s: %s [%s:%d]%s%s", call, recap_status_name(status),
              detail[0] ? detail : recap_status_string(status), file, line,
              cause[0] ? "; cause: " : "", cause);
}

#define MLP_TRY(call)                           \
  do {                                          \
    recap_status_t mlp_s_ = (call);             \
    if (mlp_s_ != RECAP_SUCCESS) return mlp_s_; \
  } while (0)

#define MLP_RECAP(call)                                                                \
  do {                                                                                 \
    recap_status_t mlp_s_ = (call);                                                    \
    if (mlp_s_ != RECAP_SUCCESS) return fail_recap(mlp_s_, #call, __FILE__, __LINE__); \
  } while (0)

#define MLP_CUDA(call)                                                                             \
  do {                                                                                             \
    cudaError_t mlp_e_ = (call);                                                                   \
    if (mlp_e_ != cudaSuccess)                                                                     \
      return fail(RECAP_ERROR_CUDA, "%s failed: %s (%s) [%s:%d]", #call, cudaGetErrorName(mlp_e_), \
                  cudaGetErrorString(mlp_e_), __FILE__, __LINE__);                                 \
  } while (0)

#define MLP_BLAS(call)                                                                             \
  do {                                                                                             \
    cublasStatus_t mlp_b_ = (call);                                                                \
    if (mlp_b_ != CUBLAS_STATUS_SUCCESS)                                                           \
      return fail(RECAP_ERROR_CUDA, "%s failed: %s (%s) [%s:%d]", #call,                           \
                  cublasGetStatusName(mlp_b_), cublasGetStatusString(mlp_b_), __FILE__, __LINE__); \
  } while (0)

const char *mlp_way_name(mlp_way_t way) {
  switch (way) {
    case MLP_WAY_EAGER: return "eager";
    case MLP_WAY_GRAPHED: return "graphed";
    case MLP_WAY_WHOLE: return "whole-step";
    case MLP_WAY_LOOP: return "loop";
  }
  return "unknown";
}

const char *mlp_split_name(mlp_split_t split) {
  return split == MLP_SPLIT_LAYER ? "layer" : "model";
}

/* ==========================================================================================
 * The model
 * ======================================================================================== */

typedef struct mlp_layer {
  int in, out;
  int hidden;        /* ReLU and dropout follow (all but the last layer) */
  size_t w_at, b_at; /* offsets of the weight (out x in, column-major) and bias */
  uint8_t *mask;     /* batch x out dropout mask, kept for the backward */
  /* What the last training forward saved for the backward. */
  const float *saved_in;
  float *saved_out;
  int dropped; /* dropout ran (mask valid) */
} mlp_layer_t;

/* A run of layers [first, last): the context of one callable. */
typedef struct mlp_block {
  mlp_model_t *model;
  int first, last;
} mlp_block_t;

/* Rows of one evaluation chunk. */
enum { EVAL_ROWS = 1024 };
/* Every parameter tensor starts at a multiple of this many floats (256 bytes). */
enum { FLAT_ALIGN = 64 };

struct mlp_model {
  mlp_config_t cfg;
  cudaStream_t stream;
  cublasHandle_t blas;
  cudaStream_t blas_stream;
  int blas_stream_set;
  void *workspace;

  int layer_count;
  mlp_layer_t *layers;
  mlp_block_t whole; /* every layer: the block of the eager and whole-step ways */

  size_t parameter_count, flat;
  float *state; /* 4 * flat floats: the four buffers below */
  float *params, *grads, *moment1, *moment2;
  float *initial; /* host: the initial flat parameters */
  mlp_scalars_t *scalars;
  float *losses; /* loss_capacity floats */
  float dropout_scale;

  unsigned char *staging; /* the packed batch: features, then labels */
  float *x;
  int32_t *labels;
  size_t batch_bytes;

  recap_generator_t generator;
  float *eval_buffer[2]; /* EVAL_ROWS x widest layer, ping-pong */

  /* The loop way: the schedule on the device, and what the loop's capture needs. */
  unsigned char *schedule; /* schedule_steps packed batches */
  int schedule_steps;
  uint32_t *loop_iterations; /* the steps of the current launch, counted on the device */
  int loop_per_launch;       /* K of the loop being captured */
};

struct mlp_eval_set {
  int count;
  float *x;
  int32_t *y;
  float *loss;
  int32_t *correct;
  float *host_loss;
  int32_t *host_correct;
};

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

const mlp_config_t *mlp_model_config(const mlp_model_t *m) { return &m->cfg; }
cudaStream_t mlp_model_stream(const mlp_model_t *m) { return m->stream; }
recap_generator_t mlp_model_generator(const mlp_model_t *m) { return m->generator; }
size_t mlp_model_parameter_count(const mlp_model_t *m) { return m->parameter_count; }
size_t mlp_model_flat_count(const mlp_model_t *m) { return m->flat; }

/* cuBLAS works on one stream at a time, and cublasSetStream puts the handle back on cuBLAS's
 * own workspace pool, so the workspace is set again after every change of stream. The same
 * handle and the same workspace serve every way: the algorithms cuBLAS picks, and so the bits
 * it computes, are the same everywhere, and no capture ever makes cuBLAS allocate. */
static recap_status_t use_stream(mlp_model_t *m, cudaStream_t stream) {
  if (m->blas_stream_set && m->blas_stream == stream) return RECAP_SUCCESS;
  MLP_BLAS(cublasSetStream(m->blas, stream));
  MLP_BLAS(cublasSetWorkspace(m->blas, m->workspace, m->cfg.workspace_bytes));
  m->blas_stream = stream;
  m->blas_stream_set = 1;
  return RECAP_SUCCESS;
}

static recap_status_t check_config(const mlp_config_t *c) {
  if (c->input_dim < 1 || c->classes < 2 || c->width < 1 || c->depth < 1 || c->batch < 1 ||
      c->loss_capacity < 1)
    return fail(RECAP_ERROR_INVALID_ARGUMENT,
                "mlp: bad configuration (input_dim %d, classes %d, width %d, depth %d, batch %d, "
                "loss_capacity %d): every size must be positive, classes at least 2",
                c->input_dim, c->classes, c->width, c->depth, c->batch, c->loss_capacity);
  if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
    return fail(RECAP_ERROR_INVALID_ARGUMENT, "mlp: dropout %g is not in [0, 1)",
                (double)c->dropout);
  if (!(c->lr > 0.0f))
    return fail(RECAP_ERROR_INVALID_ARGUMENT, "mlp: learning rate %g is not positive",
                (double)c->lr);
  if (c->workspace_bytes == 0)
    return fail(RECAP_ERROR_INVALID_ARGUMENT, "mlp: the cuBLAS workspace must not be empty");
  return RECAP_SUCCESS;
}

static recap_status_t model_alloc(mlp_model_t *m, void **ptr, size_t bytes) {
  MLP_RECAP(recap_malloc(ptr, bytes, m->stream));
  return RECAP_SUCCESS;
}

/* Shapes, offsets and the initial parameters, as torch.nn.Linear initialises them. */
static recap_status_t plan_layers(mlp_model_t *m) {
  const mlp_config_t *c = &m->cfg;
  m->layer_count = c->depth + 1;
  m->layers = calloc((size_t)m->layer_count, sizeof *m->layers);
  if (!m->layers) return fail(RECAP_ERROR_OUT_OF_MEMORY, "mlp: out of host memory");
  size_t at = 0;
  for (int l = 0; l < m->layer_count; l++) {
    mlp_layer_t *L = &m->layers[l];
    L->in = l == 0 ? c->input_dim : c->width;
    L->out = l == c->depth ? c->classes : c->width;
    L->hidden = l < c->depth;
    L->w_at = at;
    at = align_up(at + (size_t)L->in * (size_t)L->out, FLAT_ALIGN);
    L->b_at = at;
    at = align_up(at + (size_t)L->out, FLAT_ALIGN);
    m->parameter_count += (size_t)L->in * (size_t)L->out + (size_t)L->out;
  }
  m->flat = at;
  m->initial = calloc(m->flat, sizeof(float));
  if (!m->initial) return fail(RECAP_ERROR_OUT_OF_MEMORY, "mlp: out of host memory");
  mlp_rng_t rng = {c->seed ^ 0x504152414D53ull}; /* "PARAMS" */
  for (int l = 0; l < m->layer_count; l++) {
    const mlp_layer_t *L = &m->layers[l];
    const float bound = 1.0f / sqrtf((float)L->in);
    for (size_t i = 0; i < (size_t)L->in * (size_t)L->out; i++)
      m->initial[L->w_at + i] = (2.0f * mlp_rng_uniform(&rng) - 1.0f) * bound;
    for (int i = 0; i < L->out; i++)
      m->initial[L->b_at + (size_t)i] = (2.0f * mlp_rng_uniform(&rng) - 1.0f) * bound;
  }
  return RECAP_SUCCESS;
}

static recap_status_t model_init(mlp_model_t *m) {
  const mlp_config_t *c = &m->cfg;
  MLP_BLAS(cublasCreate(&m->blas));
  /* Plain FP32 math (CUBLAS_DEFAULT_MATH never rounds sgemm's inputs to TF32, as
   * torch.backends.cuda.matmul.allow_tf32 = False), host pointer mode, and no atomics: cuBLAS
   * then gives the same bits for the same call, every time. */
  MLP_BLAS(cublasSetMathMode(m->blas, CUBLAS_DEFAULT_MATH));
  MLP_BLAS(cublasSetAtomicsMode(m->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
  MLP_BLAS(cublasSetPointerMode(m->blas, CUBLAS_POINTER_MODE_HOST));
  MLP_TRY(model_alloc(m, &m->workspace, c->workspace_bytes));
  MLP_TRY(use_stream(m, m->stream));

  MLP_TRY(plan_layers(m));
  MLP_TRY(model_alloc(m, (void **)&m->state, 4 * m->flat * sizeof(float)));
  m->params = m->state;
  m->grads = m->state + m->flat;
  m->moment1 = m->state + 2 * m->flat;
  m->moment2 = m->state + 3 * m->flat;
  if (c->dropout > 0.0f) {
    for (int l = 0; l < c->depth; l++)
      MLP_TRY(
          model_alloc(m, (void **)&m->layers[l].mask, (size_t)c->batch * (size_t)m->layers[l].out));
  }
  /* The same expression as recap's dropout kernel uses for its scale. */
  m->dropout_scale = 1.0f / (1.0f - c->dropout);
  MLP_TRY(model_alloc(m, (void **)&m->scalars, sizeof(mlp_scalars_t)));
  MLP_TRY(model_alloc(m, (void **)&m->losses, (size_t)c->loss_capacity * sizeof(float)));

  m->batch_bytes = mlp_batch_bytes(c->batch, c->input_dim);
  MLP_TRY(model_alloc(m, (void **)&m->staging, m->batch_bytes));
  m->x = (float *)m->staging;
  m->labels = (int32_t *)(m->staging + (size_t)c->batch * (size_t)c->input_dim * sizeof(float));
  /* Zeros (label 0 everywhere) until the first copy-in: the warm-up step reads it. */
  MLP_CUDA(cudaMemsetAsync(m->staging, 0, m->batch_bytes, m->stream));

  int widest = c->width > c->classes ? c->width : c->classes;
  if (c->input_dim > widest) widest = c->input_dim;
  for (int i = 0; i < 2; i++)
    MLP_TRY(model_alloc(m, (void **)&m->eval_buffer[i],
                        (size_t)EVAL_ROWS * (size_t)widest * sizeof(float)));

  MLP_RECAP(recap_generator_create(&m->generator, c->seed));
  m->whole = (mlp_block_t){m, 0, m->layer_count};
  return mlp_model_reset(m);
}

recap_status_t mlp_model_create(mlp_model_t **model, const mlp_config_t *config,
                                cudaStream_t stream) {
  clear_errors();
  *model = NULL;
  MLP_TRY(check_config(config));
  if (!stream)
    return fail(RECAP_ERROR_INVALID_ARGUMENT,
                "mlp: give the model a stream you created: graphs cannot be captured on the "
                "legacy default stream");
  mlp_model_t *m = calloc(1, sizeof *m);
  if (!m) return fail(RECAP_ERROR_OUT_OF_MEMORY, "mlp: out of host memory");
  m->cfg = *config;
  m->stream = stream;
  recap_status_t s = model_init(m);
  if (s != RECAP_SUCCESS) {
    char saved[sizeof g_error];
    memcpy(saved, g_error, sizeof saved);
    mlp_model_destroy(m);
    memcpy(g_error, saved, sizeof saved);
    return s;
  }
  *model = m;
  return RECAP_SUCCESS;
}

void mlp_model_destroy(mlp_model_t *m) {
  if (!m) return;
  cudaStreamSynchronize(m->stream);
  if (m->layers)
    for (int l = 0; l < m->layer_count; l++) recap_free(m->layers[l].mask);
  for (int i = 0; i < 2; i++) recap_free(m->eval_buffer[i]);
  recap_free(m->schedule);
  recap_free(m->loop_iterations);
  recap_free(m->staging);
  recap_free(m->losses);
  recap_free(m->scalars);
  recap_free(m->state);
  if (m->blas) cublasDestroy(m->blas);
  recap_free(m->workspace);
  recap_generator_destroy(m->generator);
  free(m->layers);
  free(m->initial);
  free(m);
}

recap_status_t mlp_model_reset(mlp_model_t *m) {
  const mlp_config_t *c = &m->cfg;
  MLP_CUDA(cudaMemcpyAsync(m->params, m->initial, m->flat * sizeof(float), cudaMemcpyHostToDevice,
                           m->stream));
  /* Gradients and both moments are contiguous. Gradient padding stays zero for good: no
   * backward writes there, so Adam leaves the padding at zero too. */
  MLP_CUDA(cudaMemsetAsync(m->grads, 0, 3 * m->flat * sizeof(float), m->stream));
  MLP_CUDA(cudaMemsetAsync(m->scalars, 0, sizeof(mlp_scalars_t), m->stream));
  MLP_CUDA(cudaMemsetAsync(m->losses, 0, (size_t)c->loss_capacity * sizeof(float), m->stream));
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  /* Seed and offset 0 again: whatever warm-ups drew, every way now draws the same masks. */
  MLP_RECAP(recap_generator_seed_set(m->generator, c->seed));
  return RECAP_SUCCESS;
}

recap_status_t mlp_model_read_parameters(mlp_model_t *m, float *host) {
  clear_errors();
  MLP_CUDA(
      cudaMemcpyAsync(host, m->params, m->flat * sizeof(float), cudaMemcpyDeviceToHost, m->stream));
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  return RECAP_SUCCESS;
}

recap_status_t mlp_model_read_losses(mlp_model_t *m, float *host, int count) {
  clear_errors();
  if (count < 0 || count > m->cfg.loss_capacity)
    return fail(RECAP_ERROR_INVALID_ARGUMENT, "mlp: %d losses asked, %d recorded at most", count,
                m->cfg.loss_capacity);
  MLP_CUDA(cudaMemcpyAsync(host, m->losses, (size_t)count * sizeof(float), cudaMemcpyDeviceToHost,
                           m->stream));
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  return RECAP_SUCCESS;
}

recap_status_t mlp_model_upload_schedule(mlp_model_t *m, const void *host_schedule, int steps) {
  clear_errors();
  if (steps < 1 || steps > m->cfg.loss_capacity)
    return fail(RECAP_ERROR_INVALID_ARGUMENT,
                "mlp_model_upload_schedule: %d steps; give 1 to the loss capacity (%d)", steps,
                m->cfg.loss_capacity);
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  recap_free(m->schedule);
  m->schedule = NULL;
  m->schedule_steps = 0;
  const size_t bytes = (size_t)steps * m->batch_bytes;
  MLP_TRY(model_alloc(m, (void **)&m->schedule, bytes));
  if (!m->loop_iterations) MLP_TRY(model_alloc(m, (void **)&m->loop_iterations, sizeof(uint32_t)));
  MLP_CUDA(cudaMemcpyAsync(m->schedule, host_schedule, bytes, cudaMemcpyHostToDevice, m->stream));
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  m->schedule_steps = steps;
  return RECAP_SUCCESS;
}

recap_status_t mlp_model_read_step(mlp_model_t *m, int *step) {
  clear_errors();
  mlp_scalars_t s;
  MLP_CUDA(cudaMemcpyAsync(&s, m->scalars, sizeof s, cudaMemcpyDeviceToHost, m->stream));
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  *step = s.step;
  return RECAP_SUCCESS;
}

/* ==========================================================================================
 * Layers
 * ======================================================================================== */

static const float kOne = 1.0f, kZero = 0.0f;

/* out (rows x L.out) = W in + b, then ReLU for hidden layers. */
static recap_status_t linear_forward(mlp_model_t *m, int l, cudaStream_t stream, const float *in,
                                     int rows, float *out) {
  const mlp_layer_t *L = &m->layers[l];
  /* Column-major: out[L.out x rows] = W[L.out x L.in] * in[L.in x rows]. */
  MLP_BLAS(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, L->out, rows, L->in, &kOne,
                       m->params + L->w_at, L->out, in, L->in, &kZero, out, L->out));
  MLP_CUDA(mlp_launch_bias_act(out, m->params + L->b_at, rows, L->out, L->hidden, stream));
  return RECAP_SUCCESS;
}

/* The training forward of layer l on a batch: Linear, ReLU, dropout in place (mask kept). */
static recap_status_t layer_forward(mlp_model_t *m, int l, cudaStream_t stream, int training,
                                    const float *in, float *out) {
  mlp_layer_t *L = &m->layers[l];
  const int rows = m->cfg.batch;
  MLP_TRY(linear_forward(m, l, stream, in, rows, out));
  L->dropped = training && L->hidden && m->cfg.dropout > 0.0f;
  if (L->dropped)
    MLP_RECAP(recap_rng_dropout(m->generator, out, out, L->mask, (size_t)rows * (size_t)L->out,
                                m->cfg.dropout, stream));
  L->saved_in = in;
  L->saved_out = out;
  return RECAP_SUCCESS;
}

/* The backward of layer l: parameter gradients overwritten in the flat buffer, and the input
 * gradient allocated on stream into *din when din is not NULL. dy is not modified. */
static recap_status_t layer_backward(mlp_model_t *m, int l, cudaStream_t stream, const float *dy,
                                     float **din) {
  const mlp_layer_t *L = &m->layers[l];
  const int rows = m->cfg.batch;
  const size_t n = (size_t)rows * (size_t)L->out;
  recap_status_t s = RECAP_SUCCESS;
  float *dz_owned = NULL, *dx = NULL;
  const float *dz = dy;
  if (L->hidden) {
    MLP_RECAP(recap_malloc((void **)&dz_owned, n * sizeof(float), stream));
    cudaError_t e = mlp_launch_act_backward(dz_owned, dy, L->saved_out, L->dropped ? L->mask : NULL,
                                            L->dropped ? m->dropout_scale : 1.0f, n, stream);
    if (e != cudaSuccess) {
      recap_free(dz_owned);
      MLP_CUDA(e);
    }
    dz = dz_owned;
  }
  /* dW[out x in] = dz[out x rows] * in^T; db = row sums of dz; dx[in x rows] = W^T dz. */
  cublasStatus_t b = cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_T, L->out, L->in, rows, &kOne, dz,
                                 L->out, L->saved_in, L->in, &kZero, m->grads + L->w_at, L->out);
  cudaError_t e = cudaSuccess;
  if (b == CUBLAS_STATUS_SUCCESS)
    e = mlp_launch_bias_grad(m->grads + L->b_at, dz, rows, L->out, stream);
  if (b == CUBLAS_STATUS_SUCCESS && e == cudaSuccess && din) {
    s = recap_malloc((void **)&dx, (size_t)rows * (size_t)L->in * sizeof(float), stream);
    if (s == RECAP_SUCCESS)
      b = cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, L->in, rows, L->out, &kOne,
                      m->params + L->w_at, L->out, dz, L->out, &kZero, dx, L->in);
  }
  recap_free(dz_owned);
  if (s != RECAP_SUCCESS) return fail_recap(s, "recap_malloc (input gradient)", __FILE__, __LINE__);
  if (b != CUBLAS_STATUS_SUCCESS || e != cudaSuccess) recap_free(dx);
  MLP_BLAS(b);
  MLP_CUDA(e);
  if (din) *din = dx;
  return RECAP_SUCCESS;
}

/* Close the annotation scope opened before a part of the step: the part's failure wins over the
 * pop's. Annotations cost nothing unless enabled (recap/annotate.h); the example enables them
 * for the capture it draws as a page. */
static recap_status_t annotated(recap_status_t part, recap_stream_t stream) {
  recap_status_t pop = recap_annotate_pop(stream);
  if (part != RECAP_SUCCESS) return part;
  if (pop != RECAP_SUCCESS) return fail_recap(pop, "recap_annotate_pop", __FILE__, __LINE__);
  return RECAP_SUCCESS;
}

/* Open the scope "layerN" for layer l's work. */
static recap_status_t annotate_layer(recap_stream_t stream, int l) {
  char label[32];
  snprintf(label, sizeof label, "layer%d", l);
  MLP_RECAP(recap_annotate_push(label, stream));
  return RECAP_SUCCESS;
}

/* Free the activations a block's forward kept for its backward (all but its output). */
static void free_intermediates(mlp_block_t *b) {
  for (int l = b->first; l < b->last - 1; l++) {
    recap_free(b->model->layers[l].saved_out);
    b->model->layers[l].saved_out = NULL;
  }
}

/* ==========================================================================================
 * Blocks: the forward and backward functions of a callable (recap/graphed.h's contract)
 * ======================================================================================== */

static recap_status_t block_forward(void *ctx, recap_stream_t stream, int training,
                                    const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  mlp_block_t *b = ctx;
  mlp_model_t *m = b->model;
  const int rows = m->cfg.batch;
  const size_t in_bytes = (size_t)rows * (size_t)m->layers[b->first].in * sizeof(float);
  if (inputs[0].bytes != in_bytes)
    return fail(RECAP_ERROR_INVALID_ARGUMENT,
                "mlp: block [%d, %d) got an input of %zu bytes, expected %zu (one batch)", b->first,
                b->last, inputs[0].bytes, in_bytes);
  MLP_TRY(use_stream(m, stream));
  const float *in = inputs[0].data;
  float *out = NULL;
  for (int l = b->first; l < b->last; l++) {
    const size_t bytes = (size_t)rows * (size_t)m->layers[l].out * sizeof(float);
    recap_status_t s = recap_malloc((void **)&out, bytes, stream);
    if (s != RECAP_SUCCESS)
      fail_recap(s, "recap_malloc (activation)", __FILE__, __LINE__);
    else if ((s = annotate_layer(stream, l)) == RECAP_SUCCESS)
      s = annotated(layer_forward(m, l, stream, training, in, out), stream);
    if (s != RECAP_SUCCESS) {
      m->layers[l].saved_out = out;
      /* Everything this call allocated, the failed layer's output included. */
      for (int k = b->first; k <= l; k++) {
        recap_free(m->layers[k].saved_out);
        m->layers[k].saved_out = NULL;
      }
      return s;
    }
    in = out;
  }
  outputs[0].data = out;
  outputs[0].bytes = (size_t)rows * (size_t)m->layers[b->last - 1].out * sizeof(float);
  return RECAP_SUCCESS;
}

/* recap hands back the block's input and output too; the layers read the activations each
 * forward kept (saved_out), which cover them, so they go unused here. */
static recap_status_t block_backward(void *ctx, recap_stream_t stream, const recap_buffer_t *inputs,
                                     const recap_buffer_t *outputs,
                                     const recap_buffer_t *grad_outputs,
                                     recap_buffer_t *grad_inputs) {
  (void)inputs;
  (void)outputs;
  mlp_block_t *b = ctx;
  mlp_model_t *m = b->model;
  MLP_TRY(use_stream(m, stream));
  const float *g = grad_outputs[0].data;
  float *owned = NULL; /* g, when this function allocated it */
  for (int l = b->last - 1; l >= b->first; l--) {
    /* The first layer of the network needs no input gradient: its input is the batch. */
    const int need_input_grad = l > 0;
    float *din = NULL;
    recap_status_t s = annotate_layer(stream, l);
    if (s == RECAP_SUCCESS)
      s = annotated(layer_backward(m, l, stream, g, need_input_grad ? &din : NULL), stream);
    recap_free(owned);
    owned = NULL;
    /* Layer l's output was kept for this backward and for layer l + 1's (done already). */
    if (l < b->last - 1) {
      recap_free(m->layers[l].saved_out);
      m->layers[l].saved_out = NULL;
    }
    if (s != RECAP_SUCCESS) {
      free_intermediates(b);
      return s;
    }
    g = owned = din;
  }
  if (b->first > 0) {
    grad_inputs[0].data = owned;
    grad_inputs[0].bytes = (size_t)m->cfg.batch * (size_t)m->layers[b->first].in * sizeof(float);
  }
  return RECAP_SUCCESS;
}

/* ==========================================================================================
 * Loss, optimizer, the whole step
 * ======================================================================================== */

/* Cross-entropy of the logits against the staged labels: the mean goes to the loss history at
 * the current step; *dlogits is allocated on stream. */
static recap_status_t loss_forward_backward(mlp_model_t *m, cudaStream_t stream,
                                            const float *logits, float **dlogits) {
  const mlp_config_t *c = &m->cfg;
  MLP_RECAP(recap_malloc((void **)dlogits, (size_t)c->batch * (size_t)c->classes * sizeof(float),
                         stream));
  cudaError_t e = mlp_launch_cross_entropy(logits, m->labels, c->batch, c->classes, *dlogits,
                                           m->losses, c->loss_capacity, m->scalars, stream);
  if (e != cudaSuccess) {
    recap_free(*dlogits);
    *dlogits = NULL;
  }
  MLP_CUDA(e);
  return RECAP_SUCCESS;
}

/* The configuration's gradient hook, if any: what data-parallel training puts between the
 * backward and the optimizer. */
static recap_status_t gradient_hook(mlp_model_t *m, cudaStream_t stream) {
  const mlp_config_t *c = &m->cfg;
  if (!c->gradient_hook) return RECAP_SUCCESS;
  recap_status_t s = c->gradient_hook(c->hook_ctx, m->grads, m->flat, stream);
  if (s != RECAP_SUCCESS)
    return fail(s, "mlp: the gradient hook failed (%s): %s", recap_status_name(s),
                recap_last_error());
  return RECAP_SUCCESS;
}

static recap_status_t optimizer_step(mlp_model_t *m, cudaStream_t stream) {
  const mlp_config_t *c = &m->cfg;
  MLP_CUDA(mlp_launch_adam_prepare(m->scalars, c->lr, c->beta1, c->beta2, stream));
  MLP_CUDA(mlp_launch_adam(m->params, m->grads, m->moment1, m->moment2, m->flat, m->scalars,
                           c->beta1, c->beta2, c->eps, stream));
  return RECAP_SUCCESS;
}

/* Forward, loss, backward, optimizer: the eager step, and what the whole-step graph holds. */
static recap_status_t step_body(mlp_model_t *m, cudaStream_t stream) {
  const mlp_config_t *c = &m->cfg;
  recap_buffer_t in = {m->x, (size_t)c->batch * (size_t)c->input_dim * sizeof(float)};
  recap_buffer_t out = {NULL, 0}, grad_in = {NULL, 0};
  MLP_RECAP(recap_annotate_push("forward", stream));
  MLP_TRY(annotated(block_forward(&m->whole, stream, 1, &in, &out), stream));
  float *dlogits = NULL;
  recap_status_t s = recap_annotate_push("loss", stream);
  if (s != RECAP_SUCCESS)
    fail_recap(s, "recap_annotate_push", __FILE__, __LINE__);
  else
    s = annotated(loss_forward_backward(m, stream, out.data, &dlogits), stream);
  if (s == RECAP_SUCCESS) {
    recap_buffer_t grad_out = {dlogits, out.bytes};
    s = recap_annotate_push("backward", stream);
    if (s != RECAP_SUCCESS) {
      fail_recap(s, "recap_annotate_push", __FILE__, __LINE__);
      free_intermediates(&m->whole);
    } else {
      s = annotated(block_backward(&m->whole, stream, &in, &out, &grad_out, &grad_in), stream);
    }
  } else {
    free_intermediates(&m->whole);
  }
  recap_free(dlogits);
  recap_free(out.data);
  MLP_TRY(s);
  if (c->gradient_hook) {
    MLP_RECAP(recap_annotate_push("gradients", stream));
    MLP_TRY(annotated(gradient_hook(m, stream), stream));
  }
  MLP_RECAP(recap_annotate_push("optimizer", stream));
  return annotated(optimizer_step(m, stream), stream);
}

typedef recap_status_t (*capture_fn)(mlp_model_t *m, cudaStream_t stream);

/* Capture fn's work on the model's stream into a new graph. A failure inside abandons the
 * capture (the graph is destroyed) and keeps fn's message. */
static recap_status_t capture(mlp_model_t *m, unsigned flags, capture_fn fn, recap_graph_t *graph) {
  *graph = NULL;
  recap_graph_t g = NULL;
  MLP_RECAP(recap_graph_create(&g, flags));
  /* Thread-local: a data-parallel program's other threads (NCCL's proxy thread among them) may
   * call CUDA while this thread captures (examples/dp_mlp). */
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  recap_status_t s = recap_graph_capture_begin(g, &options, m->stream);
  if (s != RECAP_SUCCESS) {
    fail_recap(s, "recap_graph_capture_begin", __FILE__, __LINE__);
    recap_graph_destroy(g);
    return s;
  }
  s = fn(m, m->stream);
  if (s != RECAP_SUCCESS) {
    recap_graph_destroy(g); /* abandons the capture */
    return s;
  }
  s = recap_graph_capture_end(g);
  if (s != RECAP_SUCCESS) {
    fail_recap(s, "recap_graph_capture_end", __FILE__, __LINE__);
    recap_graph_destroy(g);
    return s;
  }
  *graph = g;
  return RECAP_SUCCESS;
}

recap_status_t mlp_capture_step(mlp_model_t *m, unsigned flags, recap_graph_t *graph) {
  clear_errors();
  return capture(m, flags, step_body, graph);
}

/* ==========================================================================================
 * The loop way: K steps per launch, the batch chosen on the device
 * ======================================================================================== */

static recap_status_t gather_batch(mlp_model_t *m, cudaStream_t stream) {
  MLP_CUDA(mlp_launch_gather_batch(m->staging, m->schedule, m->batch_bytes, m->schedule_steps,
                                   m->scalars, stream));
  return RECAP_SUCCESS;
}

/* One step of the loop: the batch at the step counter, then the whole step (whose optimizer
 * advances the counter). What the eager loop runs, and what the WHILE body holds. */
static recap_status_t loop_step(mlp_model_t *m, cudaStream_t stream) {
  MLP_TRY(gather_batch(m, stream));
  return step_body(m, stream);
}

/* The loop graph: iterations = 0; WHILE { loop_step; more = step < schedule_steps &&
 * ++iterations < K }. The condition starts at 1: a launch is made only with a step left. */
static recap_status_t loop_body(mlp_model_t *m, cudaStream_t stream) {
  MLP_CUDA(cudaMemsetAsync(m->loop_iterations, 0, sizeof(uint32_t), stream));
  recap_cond_t more;
  MLP_RECAP(recap_cond_create(&more, 1, stream));
  MLP_RECAP(recap_region_begin(RECAP_REGION_WHILE, more, 1, stream));
  MLP_TRY(loop_step(m, stream));
  recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
  c.value = &m->scalars->step; /* the address of a field of device memory: no access here */
  c.dtype = RECAP_COND_I32;
  c.op = RECAP_COND_LT;
  c.threshold = (double)m->schedule_steps;
  c.iterations = m->loop_iterations;
  c.max_iterations = (uint32_t)m->loop_per_launch;
  MLP_RECAP(recap_cond_compare(more, &c, stream));
  MLP_RECAP(recap_region_end(stream));
  return RECAP_SUCCESS;
}

/* ==========================================================================================
 * Evaluation
 * ======================================================================================== */

recap_status_t mlp_eval_set_create(mlp_model_t *m, const mlp_dataset_t *data,
                                   mlp_eval_set_t **out) {
  clear_errors();
  *out = NULL;
  if (data->dim != m->cfg.input_dim || data->classes != m->cfg.classes || data->count < 1)
    return fail(RECAP_ERROR_INVALID_ARGUMENT,
                "mlp: an evaluation set of %d samples of %d features and %d classes does not "
                "fit the model (%d features, %d classes)",
                data->count, data->dim, data->classes, m->cfg.input_dim, m->cfg.classes);
  mlp_eval_set_t *set = calloc(1, sizeof *set);
  if (!set) return fail(RECAP_ERROR_OUT_OF_MEMORY, "mlp: out of host memory");
  const size_t n = (size_t)data->count;
  set->count = data->count;
  set->host_loss = malloc(n * sizeof(float));
  set->host_correct = malloc(n * sizeof(int32_t));
  recap_status_t s = RECAP_SUCCESS;
  if (!set->host_loss || !set->host_correct)
    s = fail(RECAP_ERROR_OUT_OF_MEMORY, "mlp: out of host memory");
  if (s == RECAP_SUCCESS)
    s = model_alloc(m, (void **)&set->x, n * (size_t)data->dim * sizeof(float));
  if (s == RECAP_SUCCESS) s = model_alloc(m, (void **)&set->y, n * sizeof(int32_t));
  if (s == RECAP_SUCCESS) s = model_alloc(m, (void **)&set->loss, n * sizeof(float));
  if (s == RECAP_SUCCESS) s = model_alloc(m, (void **)&set->correct, n * sizeof(int32_t));
  if (s == RECAP_SUCCESS) {
    cudaError_t e = cudaMemcpyAsync(set->x, data->x, n * (size_t)data->dim * sizeof(float),
                                    cudaMemcpyHostToDevice, m->stream);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(set->y, data->y, n * sizeof(int32_t), cudaMemcpyHostToDevice, m->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->stream);
    if (e != cudaSuccess)
      s = fail(RECAP_ERROR_CUDA, "mlp: copying an evaluation set to the device failed: %s",
               cudaGetErrorName(e));
  }
  if (s != RECAP_SUCCESS) {
    mlp_eval_set_destroy(set);
    return s;
  }
  *out = set;
  return RECAP_SUCCESS;
}

void mlp_eval_set_destroy(mlp_eval_set_t *set) {
  if (!set) return;
  recap_free(set->x);
  recap_free(set->y);
  recap_free(set->loss);
  recap_free(set->correct);
  free(set->host_loss);
  free(set->host_correct);
  free(set);
}

recap_status_t mlp_evaluate(mlp_model_t *m, mlp_eval_set_t *set, double *loss, double *accuracy) {
  clear_errors();
  const mlp_config_t *c = &m->cfg;
  MLP_TRY(use_stream(m, m->stream));
  for (int done = 0; done < set->count; done += EVAL_ROWS) {
    const int rows = set->count - done < EVAL_ROWS ? set->count - done : EVAL_ROWS;
    const float *in = set->x + (size_t)done * (size_t)c->input_dim;
    for (int l = 0; l < m->layer_count; l++) {
      float *out = m->eval_buffer[l % 2];
      MLP_TRY(linear_forward(m, l, m->stream, in, rows, out));
      in = out;
    }
    MLP_CUDA(mlp_launch_eval_stats(in, set->y + done, rows, c->classes, set->loss + done,
                                   set->correct + done, m->stream));
  }
  const size_t n = (size_t)set->count;
  MLP_CUDA(cudaMemcpyAsync(set->host_loss, set->loss, n * sizeof(float), cudaMemcpyDeviceToHost,
                           m->stream));
  MLP_CUDA(cudaMemcpyAsync(set->host_correct, set->correct, n * sizeof(int32_t),
                           cudaMemcpyDeviceToHost, m->stream));
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  double sum = 0.0;
  long correct = 0;
  for (size_t i = 0; i < n; i++) {
    sum += set->host_loss[i];
    correct += set->host_correct[i];
  }
  *loss = sum / (double)n;
  *accuracy = (double)correct / (double)n;
  return RECAP_SUCCESS;
}

/* ==========================================================================================
 * Trainers
 * ======================================================================================== */

struct mlp_trainer {
  mlp_model_t *model;
  mlp_way_t way;
  mlp_split_t split;
  int graphs_disabled;           /* RECAP_DISABLE_GRAPHS=1: the graphs' work runs eagerly */
  recap_graph_t step_graph;      /* whole-step */
  recap_graph_t loop_graph;      /* loop */
  int per_launch;                /* loop: K */
  int taken;                     /* loop: steps launched since the reset */
  recap_graph_t optimizer_graph; /* graphed */
  int count;                     /* graphed: callables */
  mlp_block_t *blocks;
  recap_graphed_t *handles;
  void **samples; /* graphed: static inputs of blocks after the first */
};

static recap_status_t create_callables(mlp_trainer_t *t) {
  mlp_model_t *m = t->model;
  const mlp_config_t *c = &m->cfg;
  const int count = t->split == MLP_SPLIT_LAYER ? m->layer_count : 1;
  t->blocks = calloc((size_t)count, sizeof *t->blocks);
  t->handles = calloc((size_t)count, sizeof *t->handles);
  t->samples = calloc((size_t)count, sizeof *t->samples);
  recap_callable_desc_t *descs = calloc((size_t)count, sizeof *descs);
  recap_buffer_t *inputs = calloc((size_t)count, sizeof *inputs);
  if (!t->blocks || !t->handles || !t->samples || !descs || !inputs) {
    free(descs);
    free(inputs);
    return fail(RECAP_ERROR_OUT_OF_MEMORY, "mlp: out of host memory");
  }
  t->count = count;
  /* Every input "requires grad", the batch of the first block included, and unused inputs are
   * allowed: recap captures a backward only for a callable with an input that needs a
   * gradient, and our first block's backward is all about parameter gradients (written into
   * the flat buffer), while its input — the batch — needs none. Its backward leaves that
   * gradient NULL, which allow_unused_input accepts. */
  static const int requires_grad = 1;
  recap_status_t s = RECAP_SUCCESS;
  for (int i = 0; i < count && s == RECAP_SUCCESS; i++) {
    t->blocks[i] = count == 1 ? m->whole : (mlp_block_t){m, i, i + 1};
    const size_t bytes =
        (size_t)c->batch * (size_t)m->layers[t->blocks[i].first].in * sizeof(float);
    if (i == 0) {
      /* The staging buffer itself: the forward never needs to copy the batch. */
      inputs[i] = (recap_buffer_t){m->x, bytes};
    } else {
      s = model_alloc(m, &t->samples[i], bytes);
      if (s == RECAP_SUCCESS) {
        cudaError_t e = cudaMemsetAsync(t->samples[i], 0, bytes, m->stream);
        if (e != cudaSuccess)
          s = fail(RECAP_ERROR_CUDA, "cudaMemsetAsync (sample input) failed: %s",
                   cudaGetErrorName(e));
      }
      inputs[i] = (recap_buffer_t){t->samples[i], bytes};
    }
    recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
    d.forward = block_forward;
    d.backward = block_backward;
    d.ctx = &t->blocks[i];
    d.input_count = 1;
    d.sample_inputs = &inputs[i];
    d.requires_grad = &requires_grad;
    d.output_count = 1;
    descs[i] = d;
  }
  if (s == RECAP_SUCCESS) {
    cudaError_t e = cudaStreamSynchronize(m->stream);
    if (e != cudaSuccess)
      s = fail(RECAP_ERROR_CUDA, "cudaStreamSynchronize failed: %s", cudaGetErrorName(e));
  }
  if (s == RECAP_SUCCESS) {
    recap_graphed_options_t options = RECAP_GRAPHED_OPTIONS_INIT;
    options.allow_unused_input = 1;
    s = recap_graphed_create(t->handles, descs, (size_t)count, &options);
    if (s != RECAP_SUCCESS) fail_recap(s, "recap_graphed_create", __FILE__, __LINE__);
  }
  free(descs);
  free(inputs);
  return s;
}

static recap_status_t trainer_prepare(mlp_trainer_t *t) {
  mlp_model_t *m = t->model;
  /* One eager step first: every kernel module is loaded and cuBLAS has made its choices before
   * anything is captured (a module loaded in the middle of a capture is a failure waiting to
   * happen). The step changes the parameters and draws masks; the reset below undoes both. */
  MLP_TRY(step_body(m, m->stream));
  MLP_CUDA(cudaStreamSynchronize(m->stream));
  switch (t->way) {
    case MLP_WAY_EAGER: break;
    case MLP_WAY_GRAPHED:
      MLP_TRY(create_callables(t));
      if (!t->graphs_disabled) MLP_TRY(capture(m, 0, optimizer_step, &t->optimizer_graph));
      break;
    case MLP_WAY_WHOLE:
      if (!t->graphs_disabled) MLP_TRY(capture(m, 0, step_body, &t->step_graph));
      break;
    case MLP_WAY_LOOP:
      /* The gather kernel is loaded outside the capture too. */
      MLP_TRY(gather_batch(m, m->stream));
      MLP_CUDA(cudaStreamSynchronize(m->stream));
      m->loop_per_launch = t->per_launch;
      if (!t->graphs_disabled) MLP_TRY(capture(m, 0, loop_body, &t->loop_graph));
      break;
  }
  t->taken = 0;
  return mlp_model_reset(m);
}

static recap_status_t trainer_new(mlp_trainer_t **trainer, mlp_model_t *m, mlp_way_t way,
                                  mlp_split_t split, int per_launch) {
  *trainer = NULL;
  mlp_trainer_t *t = calloc(1, sizeof *t);
  if (!t) return fail(RECAP_ERROR_OUT_OF_MEMORY, "mlp: out of host memory");
  t->model = m;
  t->way = way;
  t->split = split;
  t->per_launch = per_launch;
  t->graphs_disabled = !recap_graphs_enabled();
  recap_status_t s = trainer_prepare(t);
  if (s != RECAP_SUCCESS) {
    char saved[sizeof g_error];
    memcpy(saved, g_error, sizeof saved);
    mlp_trainer_destroy(t);
    memcpy(g_error, saved, sizeof saved);
    return s;
  }
  *trainer = t;
  return RECAP_SUCCESS;
}

recap_status_t mlp_trainer_create(mlp_trainer_t **trainer, mlp_model_t *m, mlp_way_t way,
                                  mlp_split_t split) {
  clear_errors();
  if (way == MLP_WAY_LOOP) {
    *trainer = NULL;
    return fail(RECAP_ERROR_INVALID_ARGUMENT,
                "mlp_trainer_create: the loop way needs its steps per launch: use "
                "mlp_trainer_create_loop");
  }
  return trainer_new(trainer, m, way, split, 0);
}

recap_status_t mlp_trainer_create_loop(mlp_trainer_t **trainer, mlp_model_t *m,
                                       int steps_per_launch) {
  clear_errors();
  *trainer = NULL;
  if (steps_per_launch < 1)
    return fail(RECAP_ERROR_INVALID_ARGUMENT,
                "mlp_trainer_create_loop: %d steps per launch; give 1 or more", steps_per_launch);
  if (!m->schedule)
    return fail(RECAP_ERROR_INVALID_USAGE,
                "mlp_trainer_create_loop: the model has no schedule on the device: call "
                "mlp_model_upload_schedule first");
  return trainer_new(trainer, m, MLP_WAY_LOOP, MLP_SPLIT_MODEL, steps_per_launch);
}

void mlp_trainer_destroy(mlp_trainer_t *t) {
  if (!t) return;
  cudaStreamSynchronize(t->model->stream);
  for (int i = t->count; i-- > 0;) recap_graphed_destroy(t->handles[i]);
  if (t->samples)
    for (int i = 0; i < t->count; i++) recap_free(t->samples[i]);
  recap_graph_destroy(t->optimizer_graph);
  recap_graph_destroy(t->step_graph);
  recap_graph_destroy(t->loop_graph);
  free(t->handles);
  free(t->samples);
  free(t->blocks);
  free(t);
}

/* The graphed way's step: forwards in order, the loss, backwards in reverse order (each
 * block's input gradient is the previous block's output gradient), the optimizer graph. */
static recap_status_t graphed_step(mlp_trainer_t *t) {
  mlp_model_t *m = t->model;
  cudaStream_t stream = m->stream;
  recap_buffer_t current = {m->x, (size_t)m->cfg.batch * (size_t)m->cfg.input_dim * sizeof(float)};
  for (int i = 0; i < t->count; i++) {
    const recap_buffer_t *outputs;
    MLP_RECAP(recap_graphed_forward(t->handles[i], 1, &current, stream, &outputs));
    current = outputs[0];
  }
  float *dlogits = NULL;
  MLP_TRY(loss_forward_backward(m, stream, current.data, &dlogits));
  recap_buffer_t grad = {dlogits, current.bytes};
  recap_status_t s = RECAP_SUCCESS;
  for (int i = t->count; i-- > 0 && s == RECAP_SUCCESS;) {
    const recap_buffer_t *grad_inputs;
    s = recap_graphed_backward(t->handles[i], &grad, stream, &grad_inputs);
    if (s != RECAP_SUCCESS)
      fail_recap(s, "recap_graphed_backward", __FILE__, __LINE__);
    else if (i > 0)
      grad = grad_inputs[0];
  }
  recap_free(dlogits);
  MLP_TRY(s);
  MLP_TRY(gradient_hook(m, stream));
  if (t->optimizer_graph)
    MLP_RECAP(recap_graph_replay(t->optimizer_graph, stream));
  else
    MLP_TRY(optimizer_step(m, stream));
  return RECAP_SUCCESS;
}

recap_status_t mlp_trainer_step(mlp_trainer_t *t, const void *host_batch) {
  mlp_model_t *m = t->model;
  MLP_CUDA(
      cudaMemcpyAsync(m->staging, host_batch, m->batch_bytes, cudaMemcpyHostToDevice, m->stream));
  switch (t->way) {
    case MLP_WAY_EAGER: return step_body(m, m->stream);
    case MLP_WAY_GRAPHED: return graphed_step(t);
    case MLP_WAY_WHOLE:
      if (!t->step_graph) return step_body(m, m->stream);
      MLP_RECAP(recap_graph_replay(t->step_graph, m->stream));
      return RECAP_SUCCESS;
    case MLP_WAY_LOOP: break;
  }
  return fail(RECAP_ERROR_INVALID_USAGE,
              "mlp_trainer_step: not a way of one step per call (way %s): the loop way runs "
              "with mlp_trainer_launch",
              mlp_way_name(t->way));
}

recap_status_t mlp_trainer_launch(mlp_trainer_t *t, int *steps) {
  mlp_model_t *m = t->model;
  *steps = 0;
  const int left = m->schedule_steps - t->taken;
  if (t->way != MLP_WAY_LOOP || left <= 0)
    return fail(RECAP_ERROR_INVALID_USAGE, "mlp_trainer_launch: %s",
                t->way != MLP_WAY_LOOP ? "not a loop trainer (mlp_trainer_create_loop)"
                                       : "every step of the schedule has run");
  const int n = left < t->per_launch ? left : t->per_launch;
  if (t->loop_graph) {
    MLP_RECAP(recap_graph_replay(t->loop_graph, m->stream));
  } else {
    for (int k = 0; k < n; k++) MLP_TRY(loop_step(m, m->stream)); /* RECAP_DISABLE_GRAPHS=1 */
  }
  t->taken += n;
  *steps = n;
  return RECAP_SUCCESS;
}

static void add_graph(mlp_graph_entry_t *graphs, int capacity, int *count, recap_graph_t g,
                      const char *name, int index) {
  if (!g || *count >= capacity) return;
  if (index >= 0)
    snprintf(graphs[*count].name, sizeof graphs[*count].name, "%s[%d]", name, index);
  else
    snprintf(graphs[*count].name, sizeof graphs[*count].name, "%s", name);
  graphs[*count].graph = g;
  (*count)++;
}

recap_status_t mlp_trainer_graphs(mlp_trainer_t *t, mlp_graph_entry_t *graphs, int capacity,
                                  int *count) {
  clear_errors();
  *count = 0;
  for (int i = 0; i < t->count; i++) {
    recap_graph_t forward = NULL, backward = NULL;
    MLP_RECAP(recap_graphed_graphs(t->handles[i], &forward, &backward));
    add_graph(graphs, capacity, count, forward, "forward", i);
    add_graph(graphs, capacity, count, backward, "backward", i);
  }
  add_graph(graphs, capacity, count, t->optimizer_graph, "optimizer", -1);
  add_graph(graphs, capacity, count, t->step_graph, "step", -1);
  add_graph(graphs, capacity, count, t->loop_graph, "loop", -1);
  return RECAP_SUCCESS;
}
