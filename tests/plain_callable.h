/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plain_callable.h — the fake-device callable of one input and one output that the graphed
 * callable tests capture (fake_util.h includes it; a test on graph_util.h includes it alone).
 */
#ifndef RECAP_TEST_PLAIN_CALLABLE_H
#define RECAP_TEST_PLAIN_CALLABLE_H

#include "fake/fake.h"
#include "recap.h"

/* The plain callable of one input and one output that tests graph: forward launches a kernel
 * and allocates an output of the input's size, backward launches one and allocates the input's
 * gradient of the output gradient's size. They read no ctx. */
static inline recap_status_t plain_forward(void *ctx, recap_stream_t stream, int training,
                                           const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)ctx;
  (void)training;
  recap__fake_launch_kernel(stream, "toy_forward");
  outputs[0].bytes = inputs[0].bytes;
  return recap_malloc(&outputs[0].data, outputs[0].bytes, stream);
}

static inline recap_status_t plain_backward(void *ctx, recap_stream_t stream,
                                            const recap_buffer_t *inputs,
                                            const recap_buffer_t *outputs,
                                            const recap_buffer_t *grad_outputs,
                                            recap_buffer_t *grad_inputs) {
  (void)ctx;
  (void)inputs;
  (void)outputs;
  recap__fake_launch_kernel(stream, "toy_backward");
  grad_inputs[0].bytes = grad_outputs[0].bytes;
  return recap_malloc(&grad_inputs[0].data, grad_inputs[0].bytes, stream);
}

#endif /* RECAP_TEST_PLAIN_CALLABLE_H */
