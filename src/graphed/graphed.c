/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graphed.c — graphed callables (PyTorch's make_graphed_callables), built on graphs and the
 * allocator.
 *
 * create: warm every callable up on recap's side stream (lazy initialisation inside user code —
 * cuBLAS handles, workspace allocations — then happens outside the captures), capture the
 * forwards in order and the backwards in reverse order into one pool, so that memory a later
 * pass frees is reused by an earlier one in exactly the order training runs them.
 * forward/backward: copy inputs that are not already in the static buffers, replay, hand back
 * the static outputs. A call in the other training mode, or with graphs disabled, runs the
 * user's functions eagerly instead.
 *
 * The zero-copy path (desc.rebind_inputs, desc.rebind_grad_outputs): the captures run with
 * rebind DECLARED and declare the flagged static buffers, and each graph's slot records where
 * the graph points each flagged buffer now. A call moves every slot whose buffer the caller
 * passes elsewhere in one recap_graph_rebind; a refusal for the caller's buffers (they overlap
 * memory the graph uses) turns that call into the copying path, with the slots moved back to
 * the static buffers first. The backward graph reads the forward's inputs, so its input slots
 * follow where the last forward's inputs were (fw_at), at the backward call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "capture/capture_internal.h"
#include "graph/graph_internal.h"
#include "recap/graphed.h"
#include "recap/rebind.h"

enum { GRAPHED_MAGIC = 0x72677068 /* "rgph" */ };

/* One flagged buffer of a graph on the zero-copy path: where the graph points it now (updated
 * here), its static buffer, and where this call wants it. */
typedef struct slot {
  const void **at;
  const void *home, *want;
  size_t bytes;
} slot_t;

struct recap_graphed {
  uint32_t magic;                /* GRAPHED_MAGIC while the handle is live */
  recap_callable_desc_t desc;    /* arrays below are our copies */
  recap_buffer_t *static_inputs; /* the sample inputs (the caller's memory, never freed here) */
  int *requires_grad;
  int *output_requires_grad;
  int training;      /* the mode captured */
  bool allow_unused; /* options.allow_unused_input, for eager backwards too */
  bool eager_only;   /* graphs disabled: never captured */
  recap_graph_t forward_graph, backward_graph;
  recap_buffer_t *static_outputs;      /* allocated in the forward capture (pool) */
  recap_buffer_t *static_grad_outputs; /* allocated before the backward capture */
  recap_buffer_t *static_grad_inputs;  /* allocated in the backward capture (pool) */
  recap_buffer_t *eager_inputs;        /* the last eager forward's inputs (the caller's) */
  recap_buffer_t *eager_outputs;       /* the last eager forward's, freed at the next */
  recap_buffer_t *eager_grad_outputs;  /* an eager backward's output gradients, as passed on */
  recap_buffer_t *eager_grad_inputs;   /* the last eager backward's, freed at the next */
  bool forward_ran, last_forward_eager;
  /* The zero-copy path (all NULL/false without flags). */
  bool zero_copy;             /* a flag is set: the captures are rebindable */
  int *rebind_inputs;         /* input_count flags */
  int *rebind_grad_outputs;   /* output_count flags (0 where no gradient) */
  const void **fw_at;         /* where the last forward's input i was read from */
  const void **fw_graph_in;   /* where the forward graph points flagged input i */
  const void **bw_graph_in;   /* where the backward graph points flagged input i */
  const void **bw_graph_grad; /* where the backward graph points flagged gradient i */
  bool *fw_uses, *bw_uses_in, *bw_uses_grad; /* the graph holds an address in that buffer */
  recap_rebind_t *moves;     /* input_count + output_count moves: one call's batch */
  slot_t *slots;             /* input_count + output_count: the buffers one call may move */
  recap_buffer_t *fw_inputs; /* {fw_at[i], size}: the last forward's inputs */
  bool fallback_logged;      /* a refused rebind was logged (once per callable) */
};

/* A backward is captured whenever one is given: even with no input needing a gradient it
 * writes parameter gradients (the first block of a network has only the batch as input). */
static bool needs_backward(const recap_graphed_t h) { return h->desc.backward != NULL; }

/* Cleanup, often after a failure: a buffer that cannot be freed (a user function freed it
 * itself) must not replace the failure's message as the last error. */
static void free_buffers(recap_buffer_t *buffers, size_t count) {
  if (!buffers) return;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  for (size_t i = 0; i < count; i++) {
    recap_free(buffers[i].data);
    buffers[i].data = NULL;
  }
  recap__error_restore(&saved);
}

/* A live handle (core/args.h: the magic is cleared at destroy). */
static recap_status_t check_handle(recap_graphed_t h, const char *function) {
  return RECAP__HANDLE_CHECK(h, GRAPHED_MAGIC, function, "handle", "graphed callable",
                             "recap_graphed_create");
}

/* Free everything a handle holds (also a half-made one). */
static recap_status_t release_handle(recap_graphed_t h) {
  recap_status_t s = recap_graph_destroy(h->forward_graph), t;
  if ((t = recap_graph_destroy(h->backward_graph)) != RECAP_SUCCESS) s = t;
  size_t in = h->desc.input_count, out = h->desc.output_count;
  free_buffers(h->static_outputs, out);
  free_buffers(h->static_grad_outputs, out);
  free_buffers(h->static_grad_inputs, in);
  free_buffers(h->eager_outputs, out);
  free_buffers(h->eager_grad_inputs, in);
  recap__host_free(h->static_outputs);
  recap__host_free(h->static_grad_outputs);
  recap__host_free(h->static_grad_inputs);
  recap__host_free(h->eager_inputs);
  recap__host_free(h->eager_outputs);
  recap__host_free(h->eager_grad_outputs);
  recap__host_free(h->eager_grad_inputs);
  recap__host_free(h->static_inputs);
  recap__host_free(h->requires_grad);
  recap__host_free(h->output_requires_grad);
  recap__host_free(h->rebind_inputs);
  recap__host_free(h->rebind_grad_outputs);
  recap__host_free(h->fw_at);
  recap__host_free(h->fw_graph_in);
  recap__host_free(h->bw_graph_in);
  recap__host_free(h->bw_graph_grad);
  recap__host_free(h->fw_uses);
  recap__host_free(h->bw_uses_in);
  recap__host_free(h->bw_uses_grad);
  recap__host_free(h->moves);
  recap__host_free(h->slots);
  recap__host_free(h->fw_inputs);
  h->magic = 0;
  recap__host_free(h);
  return s;
}

recap_status_t recap_graphed_destroy(recap_graphed_t h) {
  if (!h) return RECAP_SUCCESS;
  RECAP__CHECK(check_handle(h, "recap_graphed_destroy"));
  return release_handle(h);
}

/* Copy the description and make room for every buffer array. */
static recap_status_t make_handle(const recap_callable_desc_t *d, size_t index, int training,
                                  recap_graphed_t *out) {
  RECAP__ARG(d->forward != NULL, "recap_graphed_create: callable %zu has no forward function",
             index);
  RECAP__ARG(d->input_count == 0 || d->sample_inputs != NULL,
             "recap_graphed_create: callable %zu has %zu inputs but no sample_inputs", index,
             d->input_count);
  recap_graphed_t h = recap__host_calloc(1, sizeof *h);
  if (!h)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graphed_create: out of host memory");
  size_t in = d->input_count ? d->input_count : 1, out_n = d->output_count ? d->output_count : 1;
  h->magic = GRAPHED_MAGIC;
  h->desc = *d;
  h->training = training;
  h->static_inputs = recap__host_calloc(in, sizeof *h->static_inputs);
  h->requires_grad = recap__host_calloc(in, sizeof *h->requires_grad);
  h->output_requires_grad = recap__host_calloc(out_n, sizeof *h->output_requires_grad);
  h->static_outputs = recap__host_calloc(out_n, sizeof(recap_buffer_t));
  h->static_grad_outputs = recap__host_calloc(out_n, sizeof(recap_buffer_t));
  h->static_grad_inputs = recap__host_calloc(in, sizeof(recap_buffer_t));
  h->eager_inputs = recap__host_calloc(in, sizeof(recap_buffer_t));
  h->eager_outputs = recap__host_calloc(out_n, sizeof(recap_buffer_t));
  h->eager_grad_outputs = recap__host_calloc(out_n, sizeof(recap_buffer_t));
  h->eager_grad_inputs = recap__host_calloc(in, sizeof(recap_buffer_t));
  h->rebind_inputs = recap__host_calloc(in, sizeof *h->rebind_inputs);
  h->rebind_grad_outputs = recap__host_calloc(out_n, sizeof *h->rebind_grad_outputs);
  h->fw_at = recap__host_calloc(in, sizeof *h->fw_at);
  h->fw_graph_in = recap__host_calloc(in, sizeof *h->fw_graph_in);
  h->bw_graph_in = recap__host_calloc(in, sizeof *h->bw_graph_in);
  h->bw_graph_grad = recap__host_calloc(out_n, sizeof *h->bw_graph_grad);
  h->fw_uses = recap__host_calloc(in, sizeof *h->fw_uses);
  h->bw_uses_in = recap__host_calloc(in, sizeof *h->bw_uses_in);
  h->bw_uses_grad = recap__host_calloc(out_n, sizeof *h->bw_uses_grad);
  h->moves = recap__host_calloc(in + out_n, sizeof *h->moves);
  h->slots = recap__host_calloc(in + out_n, sizeof *h->slots);
  h->fw_inputs = recap__host_calloc(in, sizeof *h->fw_inputs);
  if (!h->static_inputs || !h->requires_grad || !h->output_requires_grad || !h->static_outputs ||
      !h->static_grad_outputs || !h->static_grad_inputs || !h->eager_inputs || !h->eager_outputs ||
      !h->eager_grad_outputs || !h->eager_grad_inputs || !h->rebind_inputs ||
      !h->rebind_grad_outputs || !h->fw_at || !h->fw_graph_in || !h->bw_graph_in ||
      !h->bw_graph_grad || !h->fw_uses || !h->bw_uses_in || !h->bw_uses_grad || !h->moves ||
      !h->slots || !h->fw_inputs) {
    release_handle(h);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graphed_create: out of host memory");
  }
  for (size_t i = 0; i < d->input_count; i++) {
    h->static_inputs[i] = d->sample_inputs[i];
    h->requires_grad[i] = d->requires_grad ? d->requires_grad[i] != 0 : 0;
    /* An empty input has nothing to read, so nothing to rebind. */
    h->rebind_inputs[i] =
        d->rebind_inputs && d->rebind_inputs[i] != 0 && d->sample_inputs[i].bytes > 0;
    h->zero_copy = h->zero_copy || h->rebind_inputs[i];
  }
  /* As PyTorch's make_graphed_callables: with no flags given, every output requires grad. */
  for (size_t i = 0; i < d->output_count; i++) {
    h->output_requires_grad[i] = d->output_requires_grad ? d->output_requires_grad[i] != 0 : 1;
    /* Only a captured backward reads output gradients. */
    h->rebind_grad_outputs[i] = d->rebind_grad_outputs && d->rebind_grad_outputs[i] != 0 &&
                                h->output_requires_grad[i] && d->backward != NULL;
    h->zero_copy = h->zero_copy || h->rebind_grad_outputs[i];
  }
  h->desc.sample_inputs = h->static_inputs;
  h->desc.requires_grad = h->requires_grad;
  h->desc.output_requires_grad = h->output_requires_grad;
  h->desc.rebind_inputs = h->rebind_inputs;
  h->desc.rebind_grad_outputs = h->rebind_grad_outputs;
  *out = h;
  return RECAP_SUCCESS;
}

/* A user function failed. If it did so through a recap call, that call's message stands;
 * otherwise say which function returned what. */
static void user_failure(recap_status_t s, const char *which) {
  if (recap_last_status() != s)
    recap__error(s, "graphed callable: the %s function returned %s", which, recap_status_name(s));
}

/* The user's forward, with the contract checked: every output allocated. */
static recap_status_t call_forward(recap_graphed_t h, recap_stream_t stream, int training,
                                   const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  memset(outputs, 0, h->desc.output_count * sizeof *outputs);
  recap_clear_last_error();
  recap_status_t s = h->desc.forward(h->desc.ctx, stream, training, inputs, outputs);
  if (s != RECAP_SUCCESS) {
    user_failure(s, "forward");
    free_buffers(outputs, h->desc.output_count);
    return s;
  }
  for (size_t i = 0; i < h->desc.output_count; i++) {
    if (!outputs[i].data && outputs[i].bytes) {
      free_buffers(outputs, h->desc.output_count);
      return recap__error(RECAP_ERROR_INVALID_USAGE,
                          "graphed callable: the forward function left output %zu unallocated "
                          "(%zu bytes); allocate every output with recap_malloc on the stream "
                          "it is given",
                          i, outputs[i].bytes);
    }
  }
  return RECAP_SUCCESS;
}

/* The user's backward of the forward that read `inputs` and made `outputs`, with the
 * unused-input rule checked. grad_outputs is {NULL, 0} for every output that requires no
 * gradient. */
static recap_status_t call_backward(recap_graphed_t h, recap_stream_t stream, bool allow_unused,
                                    const recap_buffer_t *inputs, const recap_buffer_t *outputs,
                                    const recap_buffer_t *grad_outputs,
                                    recap_buffer_t *grad_inputs) {
  memset(grad_inputs, 0, h->desc.input_count * sizeof *grad_inputs);
  recap_clear_last_error();
  recap_status_t s =
      h->desc.backward(h->desc.ctx, stream, inputs, outputs, grad_outputs, grad_inputs);
  if (s != RECAP_SUCCESS) user_failure(s, "backward");
  for (size_t i = 0; s == RECAP_SUCCESS && i < h->desc.input_count; i++) {
    if (!h->requires_grad[i]) {
      /* Not asked for: a gradient the backward made anyway is dropped. */
      recap_free(grad_inputs[i].data);
      grad_inputs[i].data = NULL;
    } else if (!grad_inputs[i].data && !allow_unused) {
      s = recap__error(RECAP_ERROR_INVALID_USAGE,
                       "graphed callable: input %zu needs a gradient but the backward produced "
                       "none, so the input is unused; set allow_unused_input in the options if "
                       "that is intended",
                       i);
    }
  }
  if (s != RECAP_SUCCESS) free_buffers(grad_inputs, h->desc.input_count);
  return s;
}

/* Buffers shaped like `shape`, allocated on stream, for the outputs that require a gradient;
 * {NULL, 0} for the others. */
static recap_status_t alloc_grads_like(const recap_buffer_t *shape, const int *requires_grad,
                                       size_t count, recap_stream_t stream, recap_buffer_t *out) {
  for (size_t i = 0; i < count; i++) {
    out[i].bytes = requires_grad[i] ? shape[i].bytes : 0;
    out[i].data = NULL;
    if (!requires_grad[i]) continue;
    recap_status_t s = recap_malloc(&out[i].data, shape[i].bytes, stream);
    if (s != RECAP_SUCCESS) {
      free_buffers(out, i);
      return s;
    }
  }
  return RECAP_SUCCESS;
}

static recap_status_t warm_up(recap_graphed_t h, recap_stream_t s,
                              const recap_graphed_options_t *o) {
  size_t in = h->desc.input_count, out = h->desc.output_count;
  for (int iter = 0; iter < o->warmup_iters; iter++) {
    RECAP__CHECK(call_forward(h, s, o->training, h->static_inputs, h->eager_outputs));
    recap_status_t st = RECAP_SUCCESS;
    if (needs_backward(h)) {
      st = alloc_grads_like(h->eager_outputs, h->output_requires_grad, out, s,
                            h->static_grad_outputs);
      if (st == RECAP_SUCCESS) {
        st = call_backward(h, s, o->allow_unused_input, h->static_inputs, h->eager_outputs,
                           h->static_grad_outputs, h->eager_grad_inputs);
        free_buffers(h->eager_grad_inputs, in);
        free_buffers(h->static_grad_outputs, out);
      }
    }
    free_buffers(h->eager_outputs, out);
    RECAP__CHECK(st);
  }
  return RECAP_SUCCESS;
}

/* Capture one pass into *graph: fn runs between capture_begin and capture_end; a failure of fn
 * abandons the capture. */
typedef recap_status_t (*pass_fn)(recap_graphed_t h, recap_stream_t s,
                                  const recap_graphed_options_t *o);

static recap_status_t capture_pass(recap_graphed_t h, recap_graph_t *graph, recap_stream_t s,
                                   const recap_graphed_options_t *o, pass_fn fn) {
  RECAP__CHECK(recap_graph_create(graph, 0));
  recap_capture_options_t copts = RECAP_CAPTURE_OPTIONS_INIT;
  copts.pool = o->pool;
  copts.mode = o->mode;
  copts.check_input_liveness = o->check_input_liveness;
  /* Only the declared (flagged) buffers can move: no scalar is ever mistaken for an input. */
  if (h->zero_copy) copts.rebind = RECAP_REBIND_DECLARED;
  RECAP__CHECK(recap_graph_capture_begin(*graph, &copts, s));
  /* A call inside another capture embeds the pass's graph, which copies its template. */
  (*graph)->keep_template = true;
  recap_status_t st = fn(h, s, o);
  if (st != RECAP_SUCCESS) {
    /* Keep the pass's own error; the reset only abandons the capture. */
    recap__saved_error_t saved;
    recap__error_save(&saved);
    recap_graph_reset(*graph);
    recap__error_restore(&saved);
    return st;
  }
  return recap_graph_capture_end(*graph);
}

/* Declare the flagged buffers of a pass in its capture: the static inputs (both passes read
 * them) and, for the backward, the static output gradients. */
static recap_status_t declare_flagged(recap_graphed_t h, recap_graph_t graph, bool grads) {
  for (size_t i = 0; i < h->desc.input_count; i++)
    if (h->rebind_inputs[i])
      RECAP__CHECK(
          recap_graph_declare_buffer(graph, h->static_inputs[i].data, h->static_inputs[i].bytes));
  for (size_t i = 0; grads && i < h->desc.output_count; i++)
    if (h->rebind_grad_outputs[i] && h->static_grad_outputs[i].data)
      RECAP__CHECK(recap_graph_declare_buffer(graph, h->static_grad_outputs[i].data,
                                              h->static_grad_outputs[i].bytes));
  return RECAP_SUCCESS;
}

static recap_status_t forward_pass(recap_graphed_t h, recap_stream_t s,
                                   const recap_graphed_options_t *o) {
  if (h->zero_copy) RECAP__CHECK(declare_flagged(h, h->forward_graph, false));
  return call_forward(h, s, o->training, h->static_inputs, h->static_outputs);
}

static recap_status_t backward_pass(recap_graphed_t h, recap_stream_t s,
                                    const recap_graphed_options_t *o) {
  if (h->zero_copy) RECAP__CHECK(declare_flagged(h, h->backward_graph, true));
  return call_backward(h, s, o->allow_unused_input, h->static_inputs, h->static_outputs,
                       h->static_grad_outputs, h->static_grad_inputs);
}

/* Whether graph holds an address in [ptr, ptr + bytes): a flagged buffer a graph never reads
 * is left alone (a rebind of it would be refused as unused). */
static recap_status_t graph_uses(recap_graph_t graph, const void *ptr, size_t bytes, bool *uses) {
  size_t count = 0;
  RECAP__CHECK(recap_graph_rebind_sites(graph, ptr, bytes, NULL, 0, &count));
  *uses = count > 0;
  return RECAP_SUCCESS;
}

/* After the captures: every slot at its static buffer, and which graph uses which buffer. */
static recap_status_t init_slots(recap_graphed_t h) {
  for (size_t i = 0; i < h->desc.input_count; i++) {
    const recap_buffer_t *b = &h->static_inputs[i];
    h->fw_at[i] = h->fw_graph_in[i] = h->bw_graph_in[i] = b->data;
    if (!h->rebind_inputs[i]) continue;
    RECAP__CHECK(graph_uses(h->forward_graph, b->data, b->bytes, &h->fw_uses[i]));
    if (h->backward_graph)
      RECAP__CHECK(graph_uses(h->backward_graph, b->data, b->bytes, &h->bw_uses_in[i]));
  }
  for (size_t i = 0; i < h->desc.output_count; i++) {
    const recap_buffer_t *b = &h->static_grad_outputs[i];
    h->bw_graph_grad[i] = b->data;
    if (h->rebind_grad_outputs[i] && h->backward_graph && b->data)
      RECAP__CHECK(graph_uses(h->backward_graph, b->data, b->bytes, &h->bw_uses_grad[i]));
  }
  return RECAP_SUCCESS;
}

/* descs[i] under the options-struct rule (core/args.h): the array's stride is the size of
 * descs[0], as the caller's headers had it, and every element must carry that size. */
static recap_status_t read_desc(const recap_callable_desc_t *descs, size_t i, size_t *stride,
                                recap_callable_desc_t *out) {
  const char *at = (const char *)descs + i * *stride;
  char function[64];
  snprintf(function, sizeof function, "recap_graphed_create: descs[%zu]", i);
  *out = (recap_callable_desc_t)RECAP_CALLABLE_DESC_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(out, at, recap_callable_desc_t, output_requires_grad, function,
                                   "RECAP_CALLABLE_DESC_INIT"));
  size_t size;
  memcpy(&size, at, sizeof size);
  if (i == 0) *stride = size;
  if (size != *stride)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: size is %zu but descs[0].size is %zu; every element of the array "
                        "must start from RECAP_CALLABLE_DESC_INIT",
                        function, size, *stride);
  return RECAP_SUCCESS;
}

recap_status_t recap_graphed_create(recap_graphed_t *handles, const recap_callable_desc_t *descs,
                                    size_t count, const recap_graphed_options_t *options) {
  RECAP__ARG(handles != NULL && descs != NULL && count > 0,
             "recap_graphed_create: handles and descs must not be NULL, count must be positive");
  memset(handles, 0, count * sizeof *handles);
  recap_graphed_options_t o = RECAP_GRAPHED_OPTIONS_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&o, options, recap_graphed_options_t, mode,
                                   "recap_graphed_create", "RECAP_GRAPHED_OPTIONS_INIT"));
  RECAP__ARG(o.warmup_iters >= 0, "recap_graphed_create: warmup_iters %d is negative",
             o.warmup_iters);
  o.training = o.training != 0;

  recap_status_t s = RECAP_SUCCESS;
  size_t stride = 0;
  for (size_t i = 0; i < count && s == RECAP_SUCCESS; i++) {
    recap_callable_desc_t d;
    s = read_desc(descs, i, &stride, &d);
    if (s == RECAP_SUCCESS) s = make_handle(&d, i, o.training, &handles[i]);
    if (s == RECAP_SUCCESS) handles[i]->allow_unused = o.allow_unused_input != 0;
  }
  if (s != RECAP_SUCCESS) goto fail;

  if (!recap_graphs_enabled()) {
    for (size_t i = 0; i < count; i++) handles[i]->eager_only = true;
    return RECAP_SUCCESS;
  }

  recap_stream_t side;
  const recap__device_ops_t *dev = recap__device();
  RECAP__CHECK_GOTO(recap__side_stream(&side), s, fail);
  RECAP__CHECK_GOTO(dev->device_synchronize(), s, fail);
  for (size_t i = 0; i < count; i++) RECAP__CHECK_GOTO(warm_up(handles[i], side, &o), s, fail);
  RECAP__CHECK_GOTO(dev->stream_synchronize(side), s, fail);

  /* One pool for every pass, in the order the passes will run. */
  if (recap_pool_is_default(o.pool)) o.pool = recap_pool_handle();
  for (size_t i = 0; i < count; i++)
    RECAP__CHECK_GOTO(capture_pass(handles[i], &handles[i]->forward_graph, side, &o, forward_pass),
                      s, fail);
  for (size_t i = count; i-- > 0;) {
    recap_graphed_t h = handles[i];
    if (!needs_backward(h)) continue;
    RECAP__CHECK_GOTO(alloc_grads_like(h->static_outputs, h->output_requires_grad,
                                       h->desc.output_count, side, h->static_grad_outputs),
                      s, fail);
    RECAP__CHECK_GOTO(capture_pass(h, &h->backward_graph, side, &o, backward_pass), s, fail);
  }
  for (size_t i = 0; i < count; i++)
    if (handles[i]->zero_copy) RECAP__CHECK_GOTO(init_slots(handles[i]), s, fail);
  RECAP__CHECK_GOTO(dev->stream_synchronize(side), s, fail);
  return RECAP_SUCCESS;

fail : {
  recap__saved_error_t saved;
  recap__error_save(&saved);
  for (size_t i = 0; i < count; i++) {
    recap_graphed_destroy(handles[i]);
    handles[i] = NULL;
  }
  recap__error_restore(&saved);
  return s;
}
}

/* A buffer the caller gives must have the size of the one it stands for (the sample input, or
 * the static buffer a capture made), in an eager call as in a replay. */
static recap_status_t check_given(const recap_buffer_t *expected, const recap_buffer_t *given,
                                  size_t i, const char *what) {
  if (given[i].bytes != expected[i].bytes)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "graphed callable: %s %zu has %zu bytes but was captured with %zu", what, i,
                        given[i].bytes, expected[i].bytes);
  if (!given[i].data && given[i].bytes)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "graphed callable: %s %zu is NULL", what, i);
  return RECAP_SUCCESS;
}

/* Copy each source buffer into its static buffer unless the graph reads it where it is: at[i]
 * is where the graph reads buffer i (NULL: every static buffer), the static buffer or, on the
 * zero-copy path, the caller's. */
static recap_status_t stage(const recap_buffer_t *staticb, const void *const *at,
                            const recap_buffer_t *given, size_t count, recap_stream_t stream,
                            const char *what) {
  const recap__device_ops_t *dev = recap__device();
  for (size_t i = 0; i < count; i++) {
    if (!staticb[i].data) continue; /* nothing static to fill (an unused gradient) */
    RECAP__CHECK(check_given(staticb, given, i, what));
    if (given[i].data == (at ? at[i] : staticb[i].data)) continue;
    RECAP__CHECK(dev->memcpy_async(staticb[i].data, given[i].data, given[i].bytes, stream));
  }
  return RECAP_SUCCESS;
}

/* Point graph at every slot's wanted buffer, in one rebind. A refusal for the caller's buffers
 * (RECAP_ERROR_INVALID_ARGUMENT) moves the slots back to their static buffers instead and sets
 * *fell_back: the call copies. slots holds n entries (in h->slots), at most input_count +
 * output_count. */
static recap_status_t move_slots(recap_graphed_t h, recap_graph_t graph, const char *fn,
                                 slot_t *slots, size_t n, bool *fell_back) {
  *fell_back = false;
  size_t m = 0;
  for (size_t k = 0; k < n; k++)
    if (*slots[k].at != slots[k].want)
      h->moves[m++] = (recap_rebind_t){sizeof(recap_rebind_t), *slots[k].at, (void *)slots[k].want,
                                       slots[k].bytes};
  if (m == 0) return RECAP_SUCCESS;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap_status_t s = recap_graph_rebind(graph, h->moves, m, NULL);
  if (s == RECAP_SUCCESS) {
    for (size_t k = 0; k < n; k++) *slots[k].at = slots[k].want;
    return RECAP_SUCCESS;
  }
  if (s != RECAP_ERROR_INVALID_ARGUMENT) return s;
  if (!h->fallback_logged) {
    h->fallback_logged = true;
    RECAP__DEBUG(
        "%s: the zero-copy rebind was refused, so this call copies its flagged buffers "
        "into the static ones (logged once per callable): %s",
        fn, recap_last_error());
  }
  m = 0;
  for (size_t k = 0; k < n; k++)
    if (*slots[k].at != slots[k].home)
      h->moves[m++] = (recap_rebind_t){sizeof(recap_rebind_t), *slots[k].at, (void *)slots[k].home,
                                       slots[k].bytes};
  if (m) RECAP__CHECK(recap_graph_rebind(graph, h->moves, m, NULL));
  for (size_t k = 0; k < n; k++) *slots[k].at = slots[k].home;
  recap__error_restore(&saved);
  *fell_back = true;
  return RECAP_SUCCESS;
}

/* The zero-copy path of a captured forward: rebind the forward graph to the flagged inputs
 * where they are, and record where the forward's inputs are for its backward. */
static recap_status_t forward_zero_copy(recap_graphed_t h, const recap_buffer_t *inputs) {
  size_t in = h->desc.input_count, n = 0;
  slot_t *v = h->slots;
  for (size_t i = 0; i < in; i++)
    if (h->rebind_inputs[i] && h->fw_uses[i])
      v[n++] =
          (slot_t){&h->fw_graph_in[i], h->static_inputs[i].data, inputs[i].data, inputs[i].bytes};
  bool fell_back;
  RECAP__CHECK(move_slots(h, h->forward_graph, "recap_graphed_forward", v, n, &fell_back));
  for (size_t i = 0; i < in; i++)
    if (h->rebind_inputs[i]) h->fw_at[i] = fell_back ? h->static_inputs[i].data : inputs[i].data;
  return RECAP_SUCCESS;
}

/* The zero-copy path of a captured backward: the backward graph reads the inputs where the
 * last forward read them and the flagged output gradients where the caller passes them. On a
 * fallback, inputs the forward read elsewhere are copied into the static inputs, which the
 * backward graph reads again. */
static recap_status_t backward_zero_copy(recap_graphed_t h, recap_stream_t stream,
                                         const recap_buffer_t *grad_outputs) {
  size_t in = h->desc.input_count, out_n = h->desc.output_count, n = 0;
  for (size_t i = 0; i < out_n; i++)
    if (h->rebind_grad_outputs[i] && h->static_grad_outputs[i].data)
      RECAP__CHECK(check_given(h->static_grad_outputs, grad_outputs, i, "output gradient"));
  slot_t *v = h->slots;
  for (size_t i = 0; i < in; i++)
    if (h->rebind_inputs[i] && h->bw_uses_in[i])
      v[n++] = (slot_t){&h->bw_graph_in[i], h->static_inputs[i].data, h->fw_at[i],
                        h->static_inputs[i].bytes};
  for (size_t i = 0; i < out_n; i++)
    if (h->rebind_grad_outputs[i] && h->bw_uses_grad[i])
      v[n++] = (slot_t){&h->bw_graph_grad[i], h->static_grad_outputs[i].data, grad_outputs[i].data,
                        grad_outputs[i].bytes};
  bool fell_back;
  RECAP__CHECK(move_slots(h, h->backward_graph, "recap_graphed_backward", v, n, &fell_back));
  if (!fell_back) return RECAP_SUCCESS;
  /* The forward read these where the caller had them; the backward now reads the static one. */
  const recap__device_ops_t *dev = recap__device();
  for (size_t i = 0; i < in; i++)
    if (h->rebind_inputs[i] && h->bw_uses_in[i] && h->fw_at[i] != h->static_inputs[i].data)
      RECAP__CHECK(dev->memcpy_async(h->static_inputs[i].data, h->fw_at[i],
                                     h->static_inputs[i].bytes, stream));
  return RECAP_SUCCESS;
}

/* The refusal of a call that would copy into a graph's pool while it sleeps (recap/sleep.h),
 * named after the call. */
static recap_status_t pools_awake(recap_graph_t g, const char *call) {
  recap_status_t s = recap__graph_pools_awake(g);
  if (s == RECAP_SUCCESS) return s;
  recap__saved_error_t cause;
  recap__error_save(&cause);
  return recap__error(s, "%s: %s", call, cause.message);
}

recap_status_t recap_graphed_forward(recap_graphed_t h, int training, const recap_buffer_t *inputs,
                                     recap_stream_t stream, const recap_buffer_t **outputs) {
  RECAP__CHECK(check_handle(h, "recap_graphed_forward"));
  RECAP__ARG(outputs != NULL, "recap_graphed_forward: outputs is NULL");
  RECAP__ARG(inputs != NULL || h->desc.input_count == 0, "recap_graphed_forward: inputs is NULL");
  *outputs = NULL;
  training = training != 0;
  if (h->eager_only || training != h->training) {
    /* static_inputs holds the sample inputs' sizes whether or not anything was captured. */
    for (size_t i = 0; i < h->desc.input_count; i++)
      RECAP__CHECK(check_given(h->static_inputs, inputs, i, "input"));
    free_buffers(h->eager_outputs, h->desc.output_count);
    /* The backward of this forward is handed its inputs: keep the caller's buffer list. */
    if (h->desc.input_count) memcpy(h->eager_inputs, inputs, h->desc.input_count * sizeof *inputs);
    RECAP__CHECK(call_forward(h, stream, training, h->eager_inputs, h->eager_outputs));
    h->forward_ran = h->last_forward_eager = true;
    *outputs = h->eager_outputs;
    return RECAP_SUCCESS;
  }
  /* The inputs are copied into the pool before the replay: not while it sleeps. */
  RECAP__CHECK(pools_awake(h->forward_graph, "recap_graphed_forward"));
  /* Inside another capture the replay embeds the graph: what cannot be embedded is refused
   * before the inputs are staged into that capture. */
  RECAP__CHECK(recap__graph_embed_check(h->forward_graph, stream));
  if (h->zero_copy) {
    /* Sizes first: a rebind must never move a graph to a buffer of the wrong size. */
    for (size_t i = 0; i < h->desc.input_count; i++)
      RECAP__CHECK(check_given(h->static_inputs, inputs, i, "input"));
    RECAP__CHECK(forward_zero_copy(h, inputs));
  }
  RECAP__CHECK(stage(h->static_inputs, h->zero_copy ? h->fw_at : NULL, inputs, h->desc.input_count,
                     stream, "input"));
  RECAP__CHECK(recap_graph_replay(h->forward_graph, stream));
  h->forward_ran = true;
  h->last_forward_eager = false;
  *outputs = h->static_outputs;
  return RECAP_SUCCESS;
}

recap_status_t recap_graphed_backward(recap_graphed_t h, const recap_buffer_t *grad_outputs,
                                      recap_stream_t stream, const recap_buffer_t **grad_inputs) {
  RECAP__CHECK(check_handle(h, "recap_graphed_backward"));
  RECAP__ARG(grad_inputs != NULL, "recap_graphed_backward: grad_inputs is NULL");
  *grad_inputs = NULL;
  if (!h->desc.backward)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graphed_backward: the callable has no backward function");
  size_t out_n = h->desc.output_count;
  bool any_grad = false;
  for (size_t i = 0; i < out_n; i++) any_grad = any_grad || h->output_requires_grad[i];
  RECAP__ARG(grad_outputs != NULL || !any_grad,
             "recap_graphed_backward: grad_outputs is NULL but an output requires a gradient");
  if (!h->forward_ran)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graphed_backward: call recap_graphed_forward first");
  if (h->last_forward_eager || !h->backward_graph) {
    free_buffers(h->eager_grad_inputs, h->desc.input_count);
    /* The backward sees what a captured one would: no gradient for outputs that need none. */
    for (size_t i = 0; i < out_n; i++)
      h->eager_grad_outputs[i] =
          h->output_requires_grad[i] ? grad_outputs[i] : (recap_buffer_t){NULL, 0};
    const recap_buffer_t *fw_inputs = h->last_forward_eager ? h->eager_inputs : h->static_inputs;
    const recap_buffer_t *fw_outputs = h->last_forward_eager ? h->eager_outputs : h->static_outputs;
    /* An eager backward checks unused inputs as the capture would have. */
    RECAP__CHECK(call_backward(h, stream, h->allow_unused, fw_inputs, fw_outputs,
                               h->eager_grad_outputs, h->eager_grad_inputs));
    *grad_inputs = h->eager_grad_inputs;
    return RECAP_SUCCESS;
  }
  RECAP__CHECK(pools_awake(h->backward_graph, "recap_graphed_backward"));
  RECAP__CHECK(recap__graph_embed_check(h->backward_graph, stream));
  if (h->zero_copy) RECAP__CHECK(backward_zero_copy(h, stream, grad_outputs));
  RECAP__CHECK(stage(h->static_grad_outputs, h->zero_copy ? h->bw_graph_grad : NULL, grad_outputs,
                     h->desc.output_count, stream, "output gradient"));
  RECAP__CHECK(recap_graph_replay(h->backward_graph, stream));
  *grad_inputs = h->static_grad_inputs;
  return RECAP_SUCCESS;
}

recap_status_t recap_graphed_graphs(recap_graphed_t h, recap_graph_t *forward,
                                    recap_graph_t *backward) {
  RECAP__CHECK(check_handle(h, "recap_graphed_graphs"));
  if (forward) *forward = h->forward_graph;
  if (backward) *backward = h->backward_graph;
  return RECAP_SUCCESS;
}
