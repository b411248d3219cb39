/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graphed.h — graphed callables (PyTorch's make_graphed_callables): forwards and
 * backwards warmed up and captured into one pool, then replayed with inputs copied (or rebound)
 * into static buffers. The caller owns the sample inputs and ctx; the callable owns every buffer
 * it hands back. See docs/graphed.md, "Who owns what".
 */
#ifndef RECAP_GRAPHED_H
#define RECAP_GRAPHED_H

#include "core.h"
#include "alloc.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device buffer: its address and size in bytes. */
typedef struct recap_buffer {
  void *data;
  size_t bytes;
} recap_buffer_t;

/* The user's functions return a recap status: a failed recap call's, passed on, or their own,
 * reported with recap_set_last_error. They run on recap's side stream at warm-up and capture,
 * and on the caller's stream later: a library handle they use must follow the stream they are
 * given. */

/* Enqueue the forward on stream, reading inputs (input_count buffers), and allocate each output
 * with recap_malloc(..., stream) into outputs[i]: the callable owns them (never free one). */
typedef recap_status_t (*recap_forward_fn)(void *ctx, recap_stream_t stream, int training,
                                           const recap_buffer_t *inputs, recap_buffer_t *outputs);

/* Enqueue the backward of the last forward (its inputs and outputs, read-only) on stream, given
 * a gradient per output ({NULL, 0}: none needed). Allocate the gradient of each input whose
 * requires_grad is set into grad_inputs[i] (data NULL if unused), as the forward does. */
typedef recap_status_t (*recap_backward_fn)(void *ctx, recap_stream_t stream,
                                            const recap_buffer_t *inputs,
                                            const recap_buffer_t *outputs,
                                            const recap_buffer_t *grad_outputs,
                                            recap_buffer_t *grad_inputs);

/* One callable. Start from RECAP_CALLABLE_DESC_INIT (docs/api.md, "Versioned structs"; an array
 * is read with the stride descs[0].size gives). recap_graphed_create copies it and its arrays. */
typedef struct recap_callable_desc {
  size_t size;                /* sizeof(recap_callable_desc_t), set by the INIT macro */
  recap_forward_fn forward;   /* required */
  recap_backward_fn backward; /* NULL: inference only */
  void *ctx;                  /* passed to both */
  size_t input_count;
  /* The static inputs the graphs read and calls copy into: the caller's, until destroy. */
  const recap_buffer_t *sample_inputs;
  const int *requires_grad; /* input_count flags, or NULL for none */
  size_t output_count;
  /* output_count flags, or NULL for all: the outputs that get a gradient. */
  const int *output_requires_grad;
  /* input_count flags, or NULL for none: inputs rebound to, not copied (docs/graphed.md,
   * zero-copy). Flagged sample inputs must not overlap. */
  const int *rebind_inputs;
  /* output_count flags, or NULL for none: the same for recap_graphed_backward's grad_outputs. */
  const int *rebind_grad_outputs;
} recap_callable_desc_t;

#define RECAP_CALLABLE_DESC_INIT \
  { sizeof(recap_callable_desc_t), NULL, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL }

/* Start from RECAP_GRAPHED_OPTIONS_INIT (docs/api.md, "Versioned structs"). */
typedef struct recap_graphed_options {
  size_t size;               /* sizeof(recap_graphed_options_t), set by the INIT macro */
  int warmup_iters;          /* eager iterations before the captures; default 3 */
  int allow_unused_input;    /* an input that needs a gradient but gets none: error unless set */
  int training;              /* the mode the callables are captured in; default 1 */
  recap_pool_id_t pool;      /* {0,0}: a fresh pool shared by all these callables */
  recap_capture_mode_t mode; /* capture mode; default GLOBAL */
  int check_input_liveness;  /* every pass's graph checks its external inputs at each replay
                                (recap/liveness.h): a freed weight is RECAP_ERROR_DEAD_INPUT */
} recap_graphed_options_t;

#define RECAP_GRAPHED_OPTIONS_INIT \
  { sizeof(recap_graphed_options_t), 3, 0, 1, {0, 0}, RECAP_CAPTURE_MODE_GLOBAL, 0 }

typedef struct recap_graphed *recap_graphed_t;

/* Warm up and capture count callables into one pool and fill handles[0..count). On failure
 * nothing is kept. With graphs disabled nothing is captured: calls run the functions eagerly. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graphed_create(recap_graphed_t *handles, const recap_callable_desc_t *descs, size_t count,
                     const recap_graphed_options_t *options);
/* Release the callable's graphs, the buffers it allocated and its pool reference, once the
 * work that used them has finished. NULL is a no-op. */
RECAP_API recap_status_t recap_graphed_destroy(recap_graphed_t handle);

/* Run the forward on stream: copy (or rebind) inputs at other addresses into the static ones
 * and replay, or run eagerly. *outputs: the callable's buffers, valid until its next forward. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_forward(recap_graphed_t handle, int training,
                                                               const recap_buffer_t *inputs,
                                                               recap_stream_t stream,
                                                               const recap_buffer_t **outputs);
/* Run the backward of the last forward on stream. *grad_inputs is valid until this callable's
 * next backward or the next forward of any callable created with it. RECAP_ERROR_INVALID_USAGE
 * without a backward function or before a forward. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_backward(recap_graphed_t handle,
                                                                const recap_buffer_t *grad_outputs,
                                                                recap_stream_t stream,
                                                                const recap_buffer_t **grad_inputs);

/* The forward and backward graphs (NULL when not captured; either out-parameter may be NULL).
 * Only inspect and replay them: a rebind or recapture from outside breaks the zero-copy path. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_graphs(recap_graphed_t handle,
                                                              recap_graph_t *forward,
                                                              recap_graph_t *backward);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_GRAPHED_H */
