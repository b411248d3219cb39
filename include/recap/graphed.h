/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graphed.h — graphed callables: PyTorch's make_graphed_callables, for C.
 *
 * A callable is a forward the user writes (it enqueues its work on the stream recap passes and
 * allocates its outputs with recap_malloc on that stream) and, for training, a backward (given
 * the outputs' gradients, it allocates the gradients of the inputs that need them). recap warms
 * every callable up on a side stream, captures the forwards in order and the backwards in
 * reverse order into one pool, and then each call copies an input into its static buffer only
 * when the caller's pointer differs, replays, and hands back the static outputs. An input
 * flagged in desc.rebind_inputs is not copied: the graphs are rebound to the caller's buffer.
 *
 * Ownership, in short (docs/graphed.md, "Who owns what", says it all):
 *  - the caller owns the sample inputs, which must stay allocated until the handle is
 *    destroyed, the buffers it passes to calls, ctx, and the parameter gradients;
 *  - a zero-copy input must stay allocated and unchanged until the replay that reads it has run
 *    on the stream (the backward's, when a backward follows);
 *  - the callable owns every buffer it hands back (never free one) and its graphs and pool
 *    reference; they go with recap_graphed_destroy.
 * The user's functions run on recap's side stream during warm-up and capture and on the
 * caller's stream later: a library handle they use must follow the stream they are given.
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

/* A forward or backward that fails returns a recap status. If a recap call failed, pass its
 * status on; for a failure of its own (a CUDA launch, say), report it with
 * recap_set_last_error, and the caller of recap_graphed_* sees that message. */

/* Enqueue the forward on stream. inputs has the callable's input_count buffers; allocate each
 * of the output_count outputs with recap_malloc(..., stream) and store it in outputs[i] (the
 * callable owns them from then on and frees them; never free one yourself). training says which
 * mode the caller runs in. */
typedef recap_status_t (*recap_forward_fn)(void *ctx, recap_stream_t stream, int training,
                                           const recap_buffer_t *inputs, recap_buffer_t *outputs);

/* Enqueue the backward of the forward that ran last, on stream. inputs and outputs are that
 * forward's (read-only, valid during the call). grad_outputs holds a gradient per output ({NULL,
 * 0} for one that requires none). Allocate with recap_malloc(..., stream) the gradient of each
 * input whose requires_grad is set into grad_inputs[i] (data NULL if unused); write parameter
 * gradients where you keep them. docs/graphed.md, "What the user writes". */
typedef recap_status_t (*recap_backward_fn)(void *ctx, recap_stream_t stream,
                                            const recap_buffer_t *inputs,
                                            const recap_buffer_t *outputs,
                                            const recap_buffer_t *grad_outputs,
                                            recap_buffer_t *grad_inputs);

/* One callable. Start from RECAP_CALLABLE_DESC_INIT and set fields by name (options rule,
 * docs/api.md; an array is read with the stride descs[0].size gives). recap copies it and its
 * arrays during recap_graphed_create; only the memory sample_inputs point at must outlive it. */
typedef struct recap_callable_desc {
  size_t size;                /* sizeof(recap_callable_desc_t), set by the INIT macro */
  recap_forward_fn forward;   /* required */
  recap_backward_fn backward; /* NULL: inference only */
  void *ctx;                  /* passed to both */
  size_t input_count;
  /* input_count buffers of the caller's: the static inputs the graphs read, which calls copy
   * into. The caller's, allocated until the handle is destroyed. */
  const recap_buffer_t *sample_inputs;
  const int *requires_grad; /* input_count flags, or NULL for none */
  size_t output_count;
  /* output_count flags, or NULL for all: an output without one gets no gradient ({NULL, 0} in
   * the backward; grad_outputs may be NULL when none needs one). */
  const int *output_requires_grad;
  /* input_count flags, or NULL for none: the zero-copy path (docs/graphed.md). A flagged input
   * passed elsewhere is rebound to, not copied; where the rebind is refused, copied. Flagged
   * sample inputs must not overlap one another. */
  const int *rebind_inputs;
  /* output_count flags, or NULL for none: the same for recap_graphed_backward's grad_outputs. */
  const int *rebind_grad_outputs;
} recap_callable_desc_t;

#define RECAP_CALLABLE_DESC_INIT \
  { sizeof(recap_callable_desc_t), NULL, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL }

/* Start from RECAP_GRAPHED_OPTIONS_INIT; `size` follows the rule of every recap options struct
 * (recap/graph.h, above recap_capture_options_t). */
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

/* Graph count callables together: warm them up, capture forwards in order and backwards in
 * reverse order into one pool, and fill handles[0..count). options NULL means defaults. On
 * failure no handle is returned and everything made so far is released. With graphs disabled
 * (RECAP_DISABLE_GRAPHS=1) nothing is captured and every call runs the functions eagerly. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graphed_create(recap_graphed_t *handles, const recap_callable_desc_t *descs, size_t count,
                     const recap_graphed_options_t *options);
/* Release what the callable owns: its graphs, the buffers it allocated (static outputs, output
 * and input gradients, eager results) and its pool reference. The caller's sample inputs are
 * left alone. Destroy a handle once the work that used its buffers has finished. NULL is a
 * no-op. */
RECAP_API recap_status_t recap_graphed_destroy(recap_graphed_t handle);

/* Run the forward on stream with inputs (input_count buffers of the sample sizes); *outputs gets
 * output_count buffers, the callable's, valid until its next forward. Captured: copies inputs at
 * another address into the static ones (flagged inputs are rebound instead, or copied where the
 * rebind is refused), then replays; otherwise (graphs disabled) calls the forward eagerly. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_forward(recap_graphed_t handle, int training,
                                                               const recap_buffer_t *inputs,
                                                               recap_stream_t stream,
                                                               const recap_buffer_t **outputs);
/* Run the backward of the last forward on stream with grad_outputs (output_count buffers of
 * the outputs' sizes; entries of outputs that need no gradient are not read); *grad_inputs gets
 * input_count buffers (data NULL where no gradient), valid until the next backward of this
 * callable or the next forward of any callable created with it (they share one pool).
 * RECAP_ERROR_INVALID_USAGE without a backward function or before a forward. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_backward(recap_graphed_t handle,
                                                                const recap_buffer_t *grad_outputs,
                                                                recap_stream_t stream,
                                                                const recap_buffer_t **grad_inputs);

/* The forward and backward graphs (NULL when not captured), e.g. for inspection. Either
 * out-parameter may be NULL when that graph is not wanted. The callable keeps track of where
 * its graphs point their zero-copy buffers: rebinding or recapturing them from outside breaks
 * that, so only inspect and replay them. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_graphs(recap_graphed_t handle,
                                                              recap_graph_t *forward,
                                                              recap_graph_t *backward);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_GRAPHED_H */
