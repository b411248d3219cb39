/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlp_model.h — a multi-layer perceptron trained in C on cuBLAS, and the ways of running its
 * training step that the example and bench/bench_mlp compare:
 *
 *   MLP_WAY_EAGER    every kernel and cuBLAS call launched from the host, every step;
 *   MLP_WAY_GRAPHED  the network as recap graphed callables (recap_graphed_create: forwards
 *                    and backwards captured as graphs in one pool), the loss launched eagerly
 *                    between them, and the optimizer step captured as a recap graph of its own;
 *   MLP_WAY_WHOLE    forward, loss, backward and optimizer captured as ONE recap graph;
 *   MLP_WAY_LOOP     K steps per launch: the batch schedule resident on the device, and one
 *                    recap graph holding a WHILE region (recap/region.h) whose body gathers the
 *                    batch at the step counter's index into the staging buffer, then runs the
 *                    whole step; the loop stops after K steps or at the schedule's end.
 *
 * In the first three ways the copy of each step's batch from pinned host memory into the device
 * staging buffer is outside every graph (the batch differs at every step); the loop way copies
 * the same bytes from its device copy of the schedule, so every way trains on the same data.
 *
 * The network: depth hidden layers of `width` units (Linear, bias + ReLU, inverted dropout
 * drawn from a recap generator), then a Linear layer to `classes` logits; softmax
 * cross-entropy with a mean over the batch; Adam over one flat buffer of every parameter, so
 * that the optimizer is one kernel (plus a one-thread kernel for the step count). Gradients
 * are overwritten at every step, never accumulated, so a replay is as good as a fresh run.
 *
 * With the same configuration, the three ways give the same per-step losses bit for bit: the
 * kernels are deterministic, cuBLAS runs on one handle with one workspace and no atomics, and
 * every way draws its dropout masks from the generator at the same offsets (recap's generator
 * makes a replayed graph draw exactly what the eager launches would have).
 *
 * Errors: every function returns a recap_status_t; mlp_error() gives the detail of the
 * calling thread's last failure (a CUDA or cuBLAS error name, or recap's message).
 */
#ifndef MLP_MODEL_H
#define MLP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "mlp_data.h"
#include "recap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called at every training step between the backward and the optimizer, with the flat gradient
 * buffer (count floats, the padding zero) on the step's stream: eagerly in the eager way, and
 * inside the capture in the whole-step way, so that what it enqueues is part of the step's graph.
 * Data-parallel training all-reduces the gradients here (examples/dp_mlp). A failure fails the
 * step (or the capture) with its status; the hook leaves its own message in recap's or the
 * caller's. */
typedef recap_status_t (*mlp_gradient_hook_t)(void *ctx, float *grads, size_t count,
                                              cudaStream_t stream);

typedef struct mlp_config {
  int input_dim;               /* features per sample */
  int classes;                 /* logits per sample */
  int width;                   /* units per hidden layer */
  int depth;                   /* hidden layers (>= 1); the network has depth + 1 Linear layers */
  int batch;                   /* samples per training step */
  float dropout;               /* dropout probability after each hidden layer, in [0, 1) */
  float lr, beta1, beta2, eps; /* Adam */
  uint64_t seed;               /* initial parameters and the dropout generator */
  size_t workspace_bytes;      /* cuBLAS workspace (recap_malloc'd) */
  int loss_capacity;           /* steps whose loss is recorded (the loss history's length) */
  mlp_gradient_hook_t gradient_hook; /* NULL: none */
  void *hook_ctx;
} mlp_config_t;

#define MLP_CONFIG_INIT \
  { 2, 3, 512, 4, 256, 0.1f, 2e-3f, 0.9f, 0.999f, 1e-8f, 1234u, (size_t)32 << 20, 1000, NULL, NULL }

typedef enum mlp_way {
  MLP_WAY_EAGER = 0,
  MLP_WAY_GRAPHED = 1,
  MLP_WAY_WHOLE = 2,
  MLP_WAY_LOOP = 3
} mlp_way_t;

/* How the graphed way cuts the network into callables. */
typedef enum mlp_split {
  MLP_SPLIT_MODEL = 0, /* one callable: the whole network */
  MLP_SPLIT_LAYER = 1  /* one callable per Linear layer, chained (each block's output is the
                          next block's input, its input gradient the previous block's) */
} mlp_split_t;

/* "eager", "graphed", "whole-step", "loop"; "model", "layer". */
const char *mlp_way_name(mlp_way_t way);
const char *mlp_split_name(mlp_split_t split);

/* The detail of the calling thread's last failure in this module. */
const char *mlp_error(void);

/* ------------------------------------------------------------------------------------------
 * The model
 * ---------------------------------------------------------------------------------------- */

typedef struct mlp_model mlp_model_t;

/* Create the model on the current device, working on stream (a stream you created, not the
 * legacy default one: graphs are captured on it). Parameters are initialised on the host from
 * the seed as torch.nn.Linear does (uniform in +-1/sqrt(fan_in)) and kept there for
 * mlp_model_reset. */
recap_status_t mlp_model_create(mlp_model_t **model, const mlp_config_t *config,
                                cudaStream_t stream);
void mlp_model_destroy(mlp_model_t *model);

const mlp_config_t *mlp_model_config(const mlp_model_t *model);
cudaStream_t mlp_model_stream(const mlp_model_t *model);
recap_generator_t mlp_model_generator(const mlp_model_t *model);
/* Parameters (weights and biases, without alignment padding) and the padded length of the
 * flat buffer. */
size_t mlp_model_parameter_count(const mlp_model_t *model);
size_t mlp_model_flat_count(const mlp_model_t *model);

/* Back to the start: initial parameters, zero gradients and Adam moments, step 0, an empty
 * loss history, and the generator reseeded (offset 0). Synchronises the stream. */
recap_status_t mlp_model_reset(mlp_model_t *model);

/* Copy the flat parameter buffer (mlp_model_flat_count floats) or the first `count` entries of
 * the loss history to host memory. Synchronises the stream. */
recap_status_t mlp_model_read_parameters(mlp_model_t *model, float *host);
recap_status_t mlp_model_read_losses(mlp_model_t *model, float *host, int count);

/* The optimizer steps taken so far (the device counter). Synchronises the stream. */
recap_status_t mlp_model_read_step(mlp_model_t *model, int *step);

/* Copy a schedule of `steps` packed batches (mlp_schedule_fill's layout) to the device, for the
 * loop way; a later call replaces it. steps must not exceed the loss capacity. Synchronises. */
recap_status_t mlp_model_upload_schedule(mlp_model_t *model, const void *host_schedule, int steps);

/* ------------------------------------------------------------------------------------------
 * Evaluation (eager, no dropout, draws no random numbers)
 * ---------------------------------------------------------------------------------------- */

typedef struct mlp_eval_set mlp_eval_set_t;

/* Copy a data set to the device for evaluation. */
recap_status_t mlp_eval_set_create(mlp_model_t *model, const mlp_dataset_t *data,
                                   mlp_eval_set_t **set);
void mlp_eval_set_destroy(mlp_eval_set_t *set);
/* The mean loss and the accuracy of the current parameters on the set. Synchronises. */
recap_status_t mlp_evaluate(mlp_model_t *model, mlp_eval_set_t *set, double *loss,
                            double *accuracy);

/* ------------------------------------------------------------------------------------------
 * Training: a trainer runs the model's training step in one of the three ways
 * ---------------------------------------------------------------------------------------- */

typedef struct mlp_trainer mlp_trainer_t;

/* Prepare the way: one eager warm-up step (kernels loaded, cuBLAS initialised outside any
 * capture), then the captures the way needs, then mlp_model_reset — so every way starts from
 * the same state, whatever its preparation ran. Only one trainer per model at a time. The loop
 * way is made by mlp_trainer_create_loop (here it is RECAP_ERROR_INVALID_ARGUMENT). */
recap_status_t mlp_trainer_create(mlp_trainer_t **trainer, mlp_model_t *model, mlp_way_t way,
                                  mlp_split_t split);
/* The loop way, steps_per_launch (K >= 1) steps per launch over the schedule uploaded with
 * mlp_model_upload_schedule (RECAP_ERROR_INVALID_USAGE without one). */
recap_status_t mlp_trainer_create_loop(mlp_trainer_t **trainer, mlp_model_t *model,
                                       int steps_per_launch);
void mlp_trainer_destroy(mlp_trainer_t *trainer);

/* One training step on the packed batch at host_batch (pinned memory of
 * mlp_batch_bytes(batch, input_dim) bytes, which must stay unchanged until the step has run):
 * copy it into the staging buffer, then train. Asynchronous on the model's stream. */
recap_status_t mlp_trainer_step(mlp_trainer_t *trainer, const void *host_batch);

/* The loop way's launch: the next min(K, steps left in the schedule) training steps, as one
 * replay (asynchronous on the model's stream); *steps says how many. With no step left, or on
 * a trainer of another way: RECAP_ERROR_INVALID_USAGE. (mlp_trainer_step is
 * RECAP_ERROR_INVALID_USAGE on a loop trainer.) */
recap_status_t mlp_trainer_launch(mlp_trainer_t *trainer, int *steps);

/* The recap graphs the way replays, each with a name ("forward[0]", "backward[0]",
 * "optimizer", "step", "loop"): up to capacity entries, *count of them filled. None for the eager way
 * (or with RECAP_DISABLE_GRAPHS=1). Use them to read node counts and pools. */
typedef struct mlp_graph_entry {
  char name[32];
  recap_graph_t graph;
} mlp_graph_entry_t;
recap_status_t mlp_trainer_graphs(mlp_trainer_t *trainer, mlp_graph_entry_t *graphs, int capacity,
                                  int *count);

/* Capture one whole training step (copy-in excluded) into a new graph made with flags (e.g.
 * RECAP_GRAPH_KEEP to inspect it). The capture runs nothing and consumes no random numbers;
 * replaying the graph trains. Used by the whole-step way and for inspection. */
recap_status_t mlp_capture_step(mlp_model_t *model, unsigned flags, recap_graph_t *graph);

#ifdef __cplusplus
}
#endif

#endif /* MLP_MODEL_H */
