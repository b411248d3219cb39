/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap_callable.c — fuzz_recap's graphed callable: a small forward and backward on the
 * fake, and the operation that creates, runs and destroys it.
 */
#include "fuzz_recap.h"

/* ---- the graphed callable --------------------------------------------------------------------- */

enum { CALLABLE_OUT = 1024 };

/* Allocates `bytes` of output on stream and launches `kernel` from `in` to it. */
static recap_status_t output_launched(recap_stream_t stream, const void *in, recap_buffer_t *out,
                                      size_t bytes, const char *kernel) {
  out->bytes = bytes;
  recap_status_t s = recap_malloc(&out->data, bytes, stream);
  if (s != RECAP_SUCCESS) return s;
  const void *args[2] = {in, out->data};
  recap__fake_launch_kernel_args(stream, kernel, args, 2);
  return RECAP_SUCCESS;
}

static recap_status_t fuzz_forward(void *ctx, recap_stream_t stream, int training,
                                   const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)ctx;
  (void)training;
  return output_launched(stream, inputs[0].data, &outputs[0], CALLABLE_OUT, "fuzz_forward");
}

#ifdef RECAP_CALLABLE_DESC_INIT
static recap_status_t fuzz_backward(void *ctx, recap_stream_t stream, const recap_buffer_t *inputs,
                                    const recap_buffer_t *outputs,
                                    const recap_buffer_t *grad_outputs,
                                    recap_buffer_t *grad_inputs) {
  if (!inputs || !outputs || !inputs[0].data || outputs[0].bytes != CALLABLE_OUT)
    return recap_set_last_error(RECAP_ERROR_INVALID_ARGUMENT,
                                "fuzz_backward: the forward's inputs and outputs are missing");
#else
static recap_status_t fuzz_backward(void *ctx, recap_stream_t stream,
                                    const recap_buffer_t *grad_outputs,
                                    recap_buffer_t *grad_inputs) {
#endif
  size_t bytes = *(const size_t *)ctx;
  return output_launched(stream, grad_outputs[0].data, &grad_inputs[0], bytes, "fuzz_backward");
}

static size_t callable_input_bytes;

/* What the callable holds: the statistics less what the model knows of. */
static void measure_callable(void) {
  recap_memory_stats_t stats = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(-1, &stats) != RECAP_SUCCESS) die("recap_memory_stats failed", 0);
  int64_t blocks = 0, bytes = 0;
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p) blocks++, bytes += (int64_t)st.slots[i].usable;
  st.callable_blocks = stats.allocation[RECAP_STAT_ALL].current - blocks;
  st.callable_bytes = stats.allocated_bytes[RECAP_STAT_ALL].current - bytes;
}

void op_graphed(void) {
  uint8_t what = byte();
  int i = byte() % SLOTS, j = pick_stream();
  /* The callable's calls run while no capture is under way: graphed_create captures itself,
   * and what it does beside another program capture is not documented. */
  if (any_capture()) return;
  recap_status_t s;
  if (!st.callable) {
    slot_t *sl = &st.slots[i];
    if (!sl->p || sl->size < 16) return;
    callable_input_bytes = sl->size;
    recap_buffer_t sample = {sl->p, sl->size};
    const int requires_grad[1] = {1};
#ifdef RECAP_CALLABLE_DESC_INIT
    recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
#else
    recap_callable_desc_t d = {0};
#endif
    d.forward = fuzz_forward;
    d.backward = fuzz_backward;
    d.ctx = &callable_input_bytes;
    d.input_count = 1;
    d.sample_inputs = &sample;
    d.requires_grad = requires_grad;
    d.output_count = 1;
    recap_graphed_options_t o = RECAP_GRAPHED_OPTIONS_INIT;
    o.warmup_iters = what % 3;
    o.mode = (recap_capture_mode_t)((what >> 2) % 3);
    call_begins();
    s = recap_graphed_create(&st.callable, &d, 1, &o);
    call_ends();
    TRACE("recap_graphed_create(input slot %d, %d warm-ups, mode %d) -> %s", i, o.warmup_iters,
          (int)o.mode, recap_status_name(s));
    if (st.fired || st.memory_cap) {
      /* A fault in the warm-ups or the captures: any of their statuses, nothing made. */
      check_last(s, "recap_graphed_create");
    } else {
      expect(s, RECAP_SUCCESS, "recap_graphed_create");
    }
    if (s == RECAP_SUCCESS) {
      sl->pinned = true;
      st.callable_input = i;
      st.callable_forward_ran = false;
    } else {
      st.callable = NULL;
    }
    measure_callable();
    return;
  }
  const recap_buffer_t *out = NULL;
  switch (what % 4) {
    case 0: {
      call_begins();
      s = recap_graphed_destroy(st.callable);
      call_ends();
      TRACE("recap_graphed_destroy() -> %s", recap_status_name(s));
      expect(s, RECAP_SUCCESS, "recap_graphed_destroy");
      st.callable = NULL;
      st.slots[st.callable_input].pinned = false;
      write_tag(&st.slots[st.callable_input]);
      measure_callable();
      if (st.callable_blocks || st.callable_bytes)
        die("memory left once the graphed callable was destroyed", s);
      return;
    }
    case 1:
    case 2: {
      /* The static input itself, or another block: of the same size it is copied, else
       * refused. */
      const slot_t *in = st.slots[i].p ? &st.slots[i] : &st.slots[st.callable_input];
      recap_buffer_t input = {in->p, in->size};
      int training = (what >> 3) & 1;
      call_begins();
      s = recap_graphed_forward(st.callable, training, &input, st.streams[j], &out);
      call_ends();
      TRACE("recap_graphed_forward(stream %d, training %d, %zu bytes) -> %s", j, training, in->size,
            recap_status_name(s));
      /* docs/guarantees.md refuses an input of another size than the sample in either mode;
       * recap/graphed.h says the other mode calls the forward eagerly and is silent on sizes.
       * The model follows the guarantee. */
      if (in->size != callable_input_bytes)
        expect(s, RECAP_ERROR_INVALID_ARGUMENT, "recap_graphed_forward");
      else if (st.memory_cap && s == RECAP_ERROR_OUT_OF_MEMORY)
        check_last(s, "recap_graphed_forward");
      else
        expect_or_fault(s, RECAP_SUCCESS, "recap_graphed_forward");
      if (s == RECAP_SUCCESS) {
        if (!out || !out[0].data || out[0].bytes != CALLABLE_OUT)
          die("recap_graphed_forward handed back no output of the forward's size", s);
        st.callable_forward_ran = true;
        st.callable_last_eager = !training; /* captured in training mode (the default) */
      }
      measure_callable();
      return;
    }
    default: {
      recap_buffer_t grad = {NULL, CALLABLE_OUT};
      void *g = NULL;
      /* The gradient of the output: a block of the output's size. */
      if (recap_malloc(&g, CALLABLE_OUT, st.streams[j]) != RECAP_SUCCESS) return;
      grad.data = g;
      call_begins();
      s = recap_graphed_backward(st.callable, &grad, st.streams[j], &out);
      call_ends();
      TRACE("recap_graphed_backward(stream %d) -> %s", j, recap_status_name(s));
      if (!st.callable_forward_ran)
        expect(s, RECAP_ERROR_INVALID_USAGE, "recap_graphed_backward");
      else if (st.memory_cap && s == RECAP_ERROR_OUT_OF_MEMORY)
        check_last(s, "recap_graphed_backward");
      else
        expect_or_fault(s, RECAP_SUCCESS, "recap_graphed_backward");
      if (s == RECAP_SUCCESS && (!out || !out[0].data || out[0].bytes != callable_input_bytes))
        die("recap_graphed_backward handed back no gradient of the input's size", s);
      if (recap_free(g) != RECAP_SUCCESS) die("recap_free of a gradient failed", 0);
      measure_callable();
      return;
    }
  }
}
