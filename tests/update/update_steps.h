/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_steps.h — what the parts of test_update share on the CPU fake device: the step under test
 * (kernels that compute, a memset, a copy) in its shapes, its buffers, its captures and
 * recaptures, and graphs of plain kernels. Every helper is static inline, so a part that uses only
 * some of them builds without warnings.
 */
#ifndef RECAP_TEST_UPDATE_STEPS_H
#define RECAP_TEST_UPDATE_STEPS_H

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture_util.h"
#include "graph_util.h"
#include "harness.h"
#include "update_util.h"

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

/* The log's messages, concatenated, for the parts that read what the policy logged
 * (update_policies.c): recap_log_set(log_into, NULL); logged[0] = '\0' starts over. */
extern char logged[4096];
void log_into(recap_log_level_t level, const char *message, void *user_data);

enum { N = 64 }; /* floats per buffer */

/* The allocator's checker must pass. */
static inline void check(void) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) fail_msg("memory checker: %s", recap_last_error());
}

/* out[i] = in[i] * 2 + k, with k an argument word (a scalar frozen at capture). */
static inline void scale_add(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  float *out = args[0];
  const float *in = args[1];
  float k = (float)(uintptr_t)args[2];
  for (int i = 0; i < N; i++) out[i] = in[i] * 2 + k;
}

/* out[i] += *k, with k a device-side value the kernel reads when it runs. */
static inline void add_device_value(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  float *out = args[0];
  const float *k = args[1];
  for (int i = 0; i < N; i++) out[i] += *k;
}

/* The step in another shape, computing the same: shape 0 is step() below; -1 leaves out the
 * memset (three nodes); 1 memsets copy twice (five nodes); 2 launches a kernel that does nothing
 * where the memset was (four nodes, node 2 a kernel instead of a memset). */
static inline void step_shaped(recap_stream_t s, float *out, const float *in, unsigned k,
                               const float *dk, float *copy, int shape) {
  const void *a1[3] = {out, in, (const void *)(uintptr_t)k};
  recap__fake_launch_kernel_fn(s, "scale_add", scale_add, a1, 3);
  const void *a2[2] = {out, dk};
  recap__fake_launch_kernel_fn(s, "add_device_value", add_device_value, a2, 2);
  if (shape == 1) recap__fake_memset_async(s, copy, 0, N * sizeof(float));
  if (shape == 2)
    recap__fake_launch_kernel(s, "nothing");
  else if (shape != -1)
    recap__fake_memset_async(s, copy, 0, N * sizeof(float));
  OK(recap__device()->memcpy_async(copy, out, N * sizeof(float), s));
}

/* The step under test: out = in * 2 + k, then out += *dk, then a copy of out into copy, on
 * the fake's computing kernels (four nodes: kernel, kernel, memset, memcpy). */
static inline void step(recap_stream_t s, float *out, const float *in, unsigned k, const float *dk,
                        float *copy) {
  step_shaped(s, out, in, k, dk, copy, 0);
}

static inline float *device_floats(recap_stream_t s) {
  void *p;
  OK(recap_malloc(&p, N * sizeof(float), s));
  return p;
}

/* A thread that replays `graph` 200 times on its own stream, counting the failures. */
typedef struct replayer {
  recap_graph_t graph;
  recap_stream_t stream;
  int failures;
} replayer_t;

static inline void *replay_many(void *arg) {
  replayer_t *r = arg;
  for (int i = 0; i < 200; i++) {
    r->failures += recap_graph_replay(r->graph, r->stream) != RECAP_SUCCESS;
    if (i % 16 == 0) recap__fake_stream_complete(r->stream);
  }
  recap__fake_stream_complete(r->stream);
  return NULL;
}

/* Replay g from two threads at once, each on a stream of its own; no replay fails. */
static inline void replay_from_two_threads(recap_graph_t g) {
  replayer_t r[2] = {{g, recap__fake_stream_new(), 0}, {g, recap__fake_stream_new(), 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, replay_many, &r[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  assert_int_equal(r[0].failures + r[1].failures, 0);
}

/* Capture `kernels` plain kernels into g with recapture_begin. */
static inline void recapture_kernels(recap_graph_t g, recap_stream_t s, int kernels) {
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, kernels);
  OK(recap_graph_capture_end(g));
}

/* A graph holding one capture of `kernels` plain kernels, instantiated as *x, and its pool. */
static inline recap_graph_t captured_graph(recap_stream_t s, int kernels,
                                           recap_cuda_graph_exec_t *x, recap_pool_id_t *pool) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  capture_kernels(g, s, kernels);
  *x = exec_of(g);
  OK(recap_graph_pool(g, pool));
  return g;
}

/* step()'s buffers, allocated in this order: in[i] = i, in2[i] = in2_base + i, *dk = dk_value. */
static inline void step_buffers(recap_stream_t s, float **in, float **in2, float **out,
                                float **copy, float **dk, float in2_base, float dk_value) {
  *in = device_floats(s), *in2 = device_floats(s), *out = device_floats(s);
  *copy = device_floats(s), *dk = device_floats(s);
  for (int i = 0; i < N; i++) (*in)[i] = (float)i, (*in2)[i] = in2_base + (float)i;
  **dk = dk_value;
}

/* Free what step_buffers allocated. */
static inline void free_step_buffers(float *in, float *in2, float *out, float *copy, float *dk) {
  float *all[] = {in, in2, out, copy, dk};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(recap_free(all[i]));
}

/* Capture step(out, in, k, dk, copy) into g with capture_begin(opts) (begin/end must succeed). */
static inline void capture_step(recap_graph_t g, recap_stream_t s,
                                const recap_capture_options_t *opts, float *out, const float *in,
                                unsigned k, const float *dk, float *copy) {
  OK(recap_graph_capture_begin(g, opts, s));
  step(s, out, in, k, dk, copy);
  OK(recap_graph_capture_end(g));
}

/* The same with recapture_begin(NULL): in place of g's capture, with its last options. */
static inline void recapture_step(recap_graph_t g, recap_stream_t s, float *out, const float *in,
                                  unsigned k, const float *dk, float *copy) {
  OK(recap_graph_recapture_begin(g, NULL, s));
  step(s, out, in, k, dk, copy);
  OK(recap_graph_capture_end(g));
}

/* Set g's policy: updates measured over `measure_replays` replays, `max_slowdown` allowed. */
static inline void measure_updates(recap_graph_t g, double max_slowdown, unsigned measure_replays) {
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.max_slowdown = max_slowdown;
  p.measure_replays = measure_replays;
  OK(recap_graph_update_policy_set(g, &p));
}

/* A fresh graph on a new stream *s (fresh_graph) that measures its updates (measure_updates),
 * with `kernels` kernels captured. */
static inline recap_graph_t measured_graph(recap_stream_t *s, double max_slowdown,
                                           unsigned measure_replays, int kernels) {
  recap_graph_t g = fresh_graph(s, 0);
  measure_updates(g, max_slowdown, measure_replays);
  capture_kernels(g, *s, kernels);
  return g;
}

/* copy[i] after a replay of step(in, k) with dk = 0.25 reads in[i] = base + i. */
static inline void expect_copy(const float *copy, float base, unsigned k) {
  for (int i = 0; i < N; i++) assert_true(copy[i] == (base + (float)i) * 2 + (float)k + 0.25f);
}

/* Rebind in -> to, replay, and check what the replay read. */
static inline void rebind_and_check(recap_graph_t g, recap_stream_t s, float *from, float *to,
                                    const float *copy, float base, unsigned k) {
  recap_rebind_t r = {sizeof(recap_rebind_t), from, to, 0};
  size_t patched = 0;
  OK(recap_graph_rebind(g, &r, 1, &patched));
  assert_int_equal(patched, 1);
  OK(recap_graph_replay(g, s));
  expect_copy(copy, base, k);
}

/* Rebinding and recaptures: a recapture's sites are its own capture's, the executable it
 * updated can be rebound, and a failed recapture leaves the rebound sites as they were. */
static inline size_t sites_of(recap_graph_t g, const void *ptr) {
  size_t count = SIZE_MAX;
  OK(recap_graph_rebind_sites(g, ptr, 0, NULL, 0, &count));
  return count;
}

/* A new graph of step(out, in, 1, dk, copy), captured with *opts: rebinding on (AUTO). */
static inline recap_graph_t rebinding_step_graph(recap_stream_t s, recap_capture_options_t *opts,
                                                 float *out, const float *in, const float *dk,
                                                 float *copy) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  *opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  opts->rebind = RECAP_REBIND_AUTO;
  capture_step(g, s, opts, out, in, 1, dk, copy);
  return g;
}

#endif /* RECAP_TEST_UPDATE_STEPS_H */
