/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graphed.h — graphed callables: PyTorch's make_graphed_callables, for C.
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
 * outputs; backward likewise. An input flagged in desc.rebind_inputs (and an output gradient
 * flagged in desc.rebind_grad_outputs) is not copied: the graphs are rebound to the caller's
 * buffer (the zero-copy path), with results bit-identical to the copying path. Outputs handed back stay valid until the next call of the same
 * callable (they are overwritten by the next replay), as in PyTorch.
 *
 * Warm-up runs the user's functions for real: random kernels draw numbers (reseed generators
 * after recap_graphed_create to start from a known state) and the backward runs on scratch
 * output gradients whose contents are undefined (a backward that accumulates into parameter
 * gradients should have them zeroed after create). The functions run on recap's side stream
 * during warm-up and capture and on the caller's stream later: a library handle they use (a
 * cuBLAS handle, say) must follow the stream they are given, workspace included.
 *
 * Who owns what:
 *  - The caller owns the sample inputs (recap_callable_desc_t.sample_inputs), before, during
 *    and after the handle's life: recap never frees them, and they must stay allocated until
 *    the handle is destroyed, since the graphs read them. Inputs passed to a call stay the
 *    caller's too: recap copies from them during the call, and keeps only the addresses of an
 *    eager forward's inputs, to hand them to that forward's backward (keep their data until
 *    then). The caller's buffer arrays themselves may go as soon as a call returns.
 *  - Zero-copy inputs (desc.rebind_inputs): a flagged input passed at another address than its
 *    static one is read where it is, by the forward's replay and by the backward's replay of
 *    that forward. Its buffer must stay allocated and unchanged (neither written nor freed)
 *    from the forward call until the backward of that forward has run on the stream or, for a
 *    forward no backward will follow (inference, or another forward is called first), until
 *    that forward's replay has run; "has run" means the stream has executed the replay, not
 *    only that the call returned. The graphs keep only its address: recap never
 *    frees it, and a buffer freed afterwards is never read again once a later call passes
 *    another one. The same holds for a flagged output gradient (desc.rebind_grad_outputs), from
 *    the backward call until that backward has run. recap may write into a static input (the
 *    sample input) when it falls back to copying, as the copying path does.
 *  - The callable owns every buffer it hands back: static outputs, static input gradients and
 *    the results of eager calls, made with recap_malloc in its pool or on the caller's stream.
 *    Never free them; they stay valid as each call's comment says and go with
 *    recap_graphed_destroy. Copy out what must outlive that.
 *  - The callable owns its graphs (recap_graphed_graphs lends them) and its reference to the
 *    shared pool; a pool passed in options.pool stays the caller's id to share further.
 *  - Gradients the forward and backward functions write elsewhere (parameters in ctx) and ctx
 *    itself are the caller's; ctx must outlive the handle.
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
 * forward's: the input_count inputs it read and the output_count outputs it made (in a captured
 * pass the static buffers, whose addresses every replay reuses; in an eager call the caller's
 * inputs and the eager outputs), so a backward needs no pointers kept in ctx. Both are read-only
 * and valid during the call only. grad_outputs holds a gradient for each output (same sizes);
 * an output that does not require a gradient (output_requires_grad) gets {NULL, 0}. For each
 * input whose requires_grad is set, allocate its gradient with recap_malloc(..., stream) into
 * grad_inputs[i], or leave grad_inputs[i].data NULL if the input was not used; entries of
 * inputs that need no gradient are ignored (a gradient allocated there anyway is freed). Write
 * parameter gradients where you keep them. */
typedef recap_status_t (*recap_backward_fn)(void *ctx, recap_stream_t stream,
                                            const recap_buffer_t *inputs,
                                            const recap_buffer_t *outputs,
                                            const recap_buffer_t *grad_outputs,
                                            recap_buffer_t *grad_inputs);

/* One callable. Start from RECAP_CALLABLE_DESC_INIT and set fields by name; `size` follows the
 * rule of every recap options struct (recap/graph.h, above recap_capture_options_t). An array of
 * descs is read with the stride descs[0].size gives, so every element must carry the same size.
 * recap copies the struct and its arrays during recap_graphed_create; none of it needs to
 * outlive the call, except the memory sample_inputs point at (below). */
typedef struct recap_callable_desc {
  size_t size;                /* sizeof(recap_callable_desc_t), set by the INIT macro */
  recap_forward_fn forward;   /* required */
  recap_backward_fn backward; /* NULL: inference only */
  void *ctx;                  /* passed to both */
  size_t input_count;
  /* input_count buffers of the caller's, which become the callable's static inputs: the
   * captured graphs read them at their addresses, and every call copies an input given
   * elsewhere into them. The caller keeps owning them: recap never frees them, and they must
   * stay allocated until the handle is destroyed. */
  const recap_buffer_t *sample_inputs;
  const int *requires_grad; /* input_count flags, or NULL for none */
  size_t output_count;
  /* output_count flags, or NULL for all (as PyTorch's outputs that require grad). An output
   * that does not require a gradient gets no gradient buffer: the backward receives {NULL, 0}
   * for it, and recap_graphed_backward ignores the caller's entry for it (grad_outputs may be
   * NULL when no output requires one). */
  const int *output_requires_grad;
  /* input_count flags, or NULL for none: the zero-copy path. A call that passes a flagged
   * input at another address than the graphs read it from rebinds the callable's graphs to the
   * caller's buffer (recap/rebind.h) instead of copying it into the static input: the forward
   * graph at the forward, and the backward graph, which reads its forward's inputs, at the
   * backward. Where a rebind is refused (the caller's buffer overlaps memory the graph uses),
   * that call copies instead. The caller's buffer must then stay as "Who owns what" says. */
  const int *rebind_inputs; /* flagged sample inputs must not overlap one another */
  /* output_count flags, or NULL for none: the same for the output gradients passed to
   * recap_graphed_backward (flags of outputs that require no gradient are ignored). */
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

/* Run the forward on stream with inputs (input_count buffers of the sample sizes), and set
 * *outputs to output_count buffers valid until the next forward of this callable. In the
 * captured mode: copies inputs whose address differs from the static one, then replays; a
 * flagged input (desc.rebind_inputs) at another address than the graph reads rebinds the
 * forward graph to it instead (all such inputs in one batch; the same address: nothing), and
 * when that rebind is refused with RECAP_ERROR_INVALID_ARGUMENT, the call copies those inputs
 * into their static buffers (logged once per callable at debug level); another failure of the
 * rebind fails the call. In the other mode (or with graphs disabled): calls the forward
 * eagerly, with no copy and no rebind. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graphed_forward(recap_graphed_t handle, int training,
                                                               const recap_buffer_t *inputs,
                                                               recap_stream_t stream,
                                                               const recap_buffer_t **outputs);
/* Run the backward of the last forward on stream with grad_outputs (output_count buffers of
 * the outputs' sizes; the entries of outputs that require no gradient are not read), and set
 * *grad_inputs to input_count buffers (data NULL where an input needs no gradient). They stay valid until the
 * next backward of this callable or the next forward of any callable created with it: the
 * passes share one pool, and a forward may reuse memory the backward's results live in (as in
 * PyTorch). RECAP_ERROR_INVALID_USAGE without a backward function or before a forward. In the
 * captured mode the backward graph is first pointed at the buffers the last forward read (its
 * zero-copy inputs) and at flagged output gradients where the caller passes them, by one
 * rebind, with the forward's fallback to copying. */
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
