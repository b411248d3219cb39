/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graphed.h — graphed callables: the seed's make_graphed_callables, for C.
 *
 * C has no autograd, so a callable is a pair of functions the user writes: a forward that
 * enqueues its work on the stream recap passes and allocates its outputs with recap_malloc on
 * that stream, and (for training) a backward that, given gradients of the outputs, enqueues the
 * gradient work and allocates the gradients of the inputs that need them. Parameter gradients
 * are the user's own business: the backward writes (or accumulates) them wherever the user keeps
 * them, and the captured graph writes them there at every replay.
 *
 * recap warms every callable up on a side stream, then captures every forward in order and every
 * backward in reverse order into one shared pool. Calling a graphed forward copies an input into
 * its static buffer only when the caller's pointer differs, replays, and hands back the static
 * outputs; backward likewise. Outputs handed back stay valid until the next call of the same
 * callable (they are overwritten by the next replay), as in PyTorch.
 *
 * Warm-up runs the user's functions for real: random kernels draw numbers (reseed generators
 * after recap_graphed_create to start from a known state) and the backward runs on scratch
 * output gradients whose contents are undefined (a backward that accumulates into parameter
 * gradients should have them zeroed after create). The functions run on recap's side stream
 * during warm-up and capture and on the caller's stream later: a library handle they use (a
 * cuBLAS handle, say) must follow the stream they are given, workspace included.
 */
#ifndef RECAP_GRAPHED_H
#define RECAP_GRAPHED_H

#include "../recap.h"
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

/* Enqueue the forward on stream. inputs has the callable's input_count buffers; allocate each
 * of the output_count outputs with recap_malloc(..., stream) and store it in outputs[i] (recap
 * owns and frees them). training says which mode the caller runs in. */
typedef recap_status_t (*recap_forward_fn)(void *ctx, recap_stream_t stream, int training,
                                           const recap_buffer_t *inputs, recap_buffer_t *outputs);

/* Enqueue the backward on stream. grad_outputs holds a gradient for each output (same sizes).
 * For each input whose requires_grad is set, allocate its gradient with recap_malloc(...,
 * stream) into grad_inputs[i], or leave grad_inputs[i].data NULL if the input was not used;
 * entries of inputs that need no gradient are ignored. Write parameter gradients where you keep
 * them. */
typedef recap_status_t (*recap_backward_fn)(void *ctx, recap_stream_t stream,
                                            const recap_buffer_t *grad_outputs,
                                            recap_buffer_t *grad_inputs);

typedef struct recap_callable_desc {
  recap_forward_fn forward;   /* required */
  recap_backward_fn backward; /* NULL: inference only */
  void *ctx;                  /* passed to both */
  size_t input_count;
  const recap_buffer_t *sample_inputs; /* input_count buffers; they become the static inputs */
  const int *requires_grad;            /* input_count flags, or NULL for none */
  size_t output_count;
} recap_callable_desc_t;

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
/* Release the callable's graphs, static buffers and pool reference. NULL is a no-op. */
RECAP_API recap_status_t recap_graphed_destroy(recap_graphed_t handle);

/* Run the forward on stream with inputs (input_count buffers of the sample sizes), and set
 * *outputs to output_count buffers valid until the next forward of this callable. In the
 * captured mode: copies inputs whose address differs from the static one, then replays. In the
 * other mode (or with graphs disabled): calls the forward eagerly. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_forward(recap_graphed_t handle,
                                                               recap_stream_t stream, int training,
                                                               const recap_buffer_t *inputs,
                                                               const recap_buffer_t **outputs);
/* Run the backward of the last forward on stream with grad_outputs, and set *grad_inputs to
 * input_count buffers (data NULL where an input needs no gradient). They stay valid until the
 * next backward of this callable or the next forward of any callable created with it: the
 * passes share one pool, and a forward may reuse memory the backward's results live in (as in
 * PyTorch). RECAP_ERROR_INVALID_USAGE without a backward function or before a forward. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_backward(recap_graphed_t handle,
                                                                recap_stream_t stream,
                                                                const recap_buffer_t *grad_outputs,
                                                                const recap_buffer_t **grad_inputs);

/* The forward and backward graphs (NULL when not captured), e.g. for inspection. Either
 * out-parameter may be NULL when that graph is not wanted. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_graphs(recap_graphed_t handle,
                                                              recap_graph_t *forward,
                                                              recap_graph_t *backward);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_GRAPHED_H */
