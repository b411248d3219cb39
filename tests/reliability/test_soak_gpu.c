/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_soak_gpu.c — recap on a real device for a long time, and with the CUDA layer failing.
 *
 * The soak: a million replays alternating two graphs that share a pool (the second reads an
 * output the first leaves in the pool), in the order they were captured, with eager allocations
 * and frees on another stream in between. The allocator's reserved memory must stay flat (the
 * statistics after equal those before), and the counters the kernels keep must equal the number
 * of replays exactly at the end. On an H200 it takes a few seconds (a replay costs about 2 µs of
 * host time); under a CUDA tool (gpu_under_tool: RECAP_UNDER_TOOL=1, which tools/gpu-check sets
 * for compute-sanitizer), where a kernel costs milliseconds, it runs 400 replays instead. RECAP_SOAK_REPLAYS=n sets the count. The
 * eager churn comes every 1000 pairs of replays, or every 5 in a short soak, so that even the
 * short one allocates between replays.
 *
 * The faults (Debug builds, where the CUDA layer is compiled with RECAP_FAULT_INJECTION): a
 * small workload (allocations, record_stream, a capture with allocations and random numbers
 * inside, replays, a reset, a graphed callable forward and backward) runs with the 1st, 2nd, ...
 * call of each kind (malloc, event, event_record, capture_begin, capture_end, instantiate,
 * launch, upload) failing in turn; the graph's update policy times its replays, so that the
 * upload before its first timed replay is made. Each run must end in success with the right values, or in a clear
 * error; then nothing may be left in recap and the device's free memory is back where it was.
 * In other builds these tests skip. fault_from_the_environment checks RECAP_FAIL itself (ctest
 * runs it with RECAP_FAIL=instantiate:1).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>

#include "gpu_util.h"
#include "capture_util.h"

#ifdef RECAP_FAULT_INJECTION
/* The CUDA layer's test controls (src/device/cuda.c, Debug builds). */
bool recap__cuda_fail_nth(const char *kind, uint64_t nth);
uint64_t recap__cuda_fault_calls(const char *kind);
#endif

#define N ((size_t)256) /* floats per buffer */

static recap_capture_options_t in_pool(recap_pool_id_t pool) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = pool;
  return o;
}

static bool stats_equal(const recap_memory_stats_t *a, const recap_memory_stats_t *b, char *why,
                        size_t cap) {
  struct {
    const char *name;
    int64_t x, y;
  } pairs[] = {
      {"reserved bytes", a->reserved_bytes[RECAP_STAT_ALL].current,
       b->reserved_bytes[RECAP_STAT_ALL].current},
      {"segments", a->segment[RECAP_STAT_ALL].current, b->segment[RECAP_STAT_ALL].current},
      {"allocated bytes", a->allocated_bytes[RECAP_STAT_ALL].current,
       b->allocated_bytes[RECAP_STAT_ALL].current},
      {"allocations", a->allocation[RECAP_STAT_ALL].current, b->allocation[RECAP_STAT_ALL].current},
      {"device allocations (cudaMalloc calls)", a->num_device_alloc, b->num_device_alloc},
      {"device frees", a->num_device_free, b->num_device_free},
      {"out-of-memory retries", a->num_alloc_retries, b->num_alloc_retries},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    if (pairs[i].x != pairs[i].y) {
      snprintf(why, cap, "%s: %lld before, %lld after", pairs[i].name, (long long)pairs[i].x,
               (long long)pairs[i].y);
      return false;
    }
  return true;
}

/* ------------------------------------------------------------------------------------------
 * The soak
 * ---------------------------------------------------------------------------------------- */

static long soak_replays(void) {
  const char *env = getenv("RECAP_SOAK_REPLAYS");
  if (env && atol(env) > 0) return atol(env);
  if (gpu_under_tool()) return 400;
  return 1000000;
}

/* Eager work between replays: a few allocations of every size class on another stream, used
 * there and freed, so the default pool churns while the graphs replay. */
static void eager_churn(cudaStream_t other, unsigned round) {
  static const size_t sizes[] = {4 * KiB, 700 * KiB, 3 * MiB, 12 * MiB};
  void *p[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < 4; i++) {
    size_t bytes = sizes[(i + round) % 4];
    OK(recap_malloc(&p[i], bytes, other));
    CUDA_OK(recap_test_fill((float *)p[i], N, (float)i, other));
  }
  for (int i = 0; i < 4; i++) OK(recap_free(p[i]));
}

RECAP_TEST(a_million_replays_of_two_graphs_sharing_a_pool) {
  gpu_begin();
  cudaStream_t s = gpu_stream(), other = gpu_stream();
  float *count_a = gpu_floats(N, s), *count_b = gpu_floats(N, s);
  gpu_set(count_a, N, 0.0f, s);
  gpu_set(count_b, N, 0.0f, s);

  /* A: out = 1 (out stays in the pool), tmp = out, count_a += tmp, tmp freed.
   * B: tmp2 = out (A's output, read from the shared pool), count_b += tmp2, tmp2 freed. B's
   * temporary may take A's freed one's address: correct as long as A and B replay in order. */
  recap_pool_id_t pool = recap_pool_handle();
  recap_capture_options_t o = in_pool(pool);
  recap_graph_t a, b;
  OK(recap_graph_create(&a, 0));
  OK(recap_graph_create(&b, 0));
  OK(recap_graph_capture_begin(a, &o, s));
  float *out = gpu_floats(N, s), *tmp = gpu_floats(N, s);
  CUDA_OK(recap_test_fill(out, N, 1.0f, s));
  CUDA_OK(recap_test_add_scalar(tmp, out, N, 0.0f, s));
  CUDA_OK(recap_test_add(count_a, count_a, tmp, N, s));
  OK(recap_free(tmp));
  OK(recap_graph_capture_end(a));
  OK(recap_graph_capture_begin(b, &o, s));
  float *tmp2 = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(tmp2, out, N, 0.0f, s));
  CUDA_OK(recap_test_add(count_b, count_b, tmp2, N, s));
  OK(recap_free(tmp2));
  OK(recap_graph_capture_end(b));

  /* Warm up: the first replays and one round of eager churn fill the caches. */
  long replays = soak_replays();
  OK(recap_graph_replay(a, s));
  OK(recap_graph_replay(b, s));
  eager_churn(other, 0);
  CUDA_OK(cudaDeviceSynchronize());
  recap_memory_stats_t before = gpu_stats();
  recap_pool_memory_t pool_before = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &pool_before));

  unsigned rounds = 0;
  long churn_every = replays / 1000;
  churn_every = churn_every < 5 ? 5 : churn_every > 1000 ? 1000 : churn_every;
  for (long i = 1; i < replays / 2; i++) {
    OK(recap_graph_replay(a, s));
    OK(recap_graph_replay(b, s));
    if (i % churn_every == 0) {
      eager_churn(other, ++rounds);
      if (i % 100000 == 0) CUDA_OK(cudaStreamSynchronize(s)); /* bound the queue */
    }
  }
  CUDA_OK(cudaDeviceSynchronize());
  recap_memory_stats_t after = gpu_stats();
  recap_pool_memory_t pool_after = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &pool_after));
  char why[256];
  if (!stats_equal(&before, &after, why, sizeof why))
    fail_msg("the allocator's memory moved over %ld replays: %s", replays, why);
  assert_int_equal(pool_before.reserved_bytes, pool_after.reserved_bytes);
  assert_int_equal(pool_before.segments, pool_after.segments);
  gpu_expect_all(count_a, N, (float)(replays / 2));
  gpu_expect_all(count_b, N, (float)(replays / 2));
  print_message(
      "%ld replays of two graphs sharing a pool, %u rounds of eager allocations "
      "between them: reserved memory flat at %lld bytes, counters right\n",
      2 * (replays / 2), rounds, (long long)after.reserved_bytes[RECAP_STAT_ALL].current);

  OK(recap_graph_destroy(a));
  OK(recap_graph_destroy(b));
  FREE_ALL(out, count_a, count_b);
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamDestroy(other));
  gpu_finish(&pool, 1);
}

/* ------------------------------------------------------------------------------------------
 * The CUDA layer failing
 * ---------------------------------------------------------------------------------------- */

#ifdef RECAP_FAULT_INJECTION

typedef struct outcome {
  recap_status_t status;
  char message[1024];
  char where[128];
} outcome_t;

static bool step_at(outcome_t *o, recap_status_t s, const char *where) {
  if (s != RECAP_SUCCESS && o->status == RECAP_SUCCESS) {
    o->status = s;
    snprintf(o->message, sizeof o->message, "%s", recap_last_error());
    snprintf(o->where, sizeof o->where, "%s", where);
  }
  return s == RECAP_SUCCESS;
}
#  define STEP(o, expr) step_at((o), (expr), #  expr)

/* A graphed callable: out = in + 1; backward: grad_in = grad_out * 2. */
static recap_status_t plus_one_forward(void *ctx, recap_stream_t stream, int training,
                                       const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)ctx;
  (void)training;
  outputs[0].bytes = inputs[0].bytes;
  recap_status_t s = recap_malloc(&outputs[0].data, outputs[0].bytes, stream);
  if (s != RECAP_SUCCESS) return s;
  return recap_test_add_scalar(outputs[0].data, inputs[0].data, inputs[0].bytes / sizeof(float),
                               1.0f, stream) == cudaSuccess
             ? RECAP_SUCCESS
             : RECAP_ERROR_CUDA;
}

static recap_status_t twice_backward(void *ctx, recap_stream_t stream, const recap_buffer_t *inputs,
                                     const recap_buffer_t *outputs,
                                     const recap_buffer_t *grad_outputs,
                                     recap_buffer_t *grad_inputs) {
  (void)ctx;
  (void)inputs;
  (void)outputs;
  grad_inputs[0].bytes = grad_outputs[0].bytes;
  recap_status_t s = recap_malloc(&grad_inputs[0].data, grad_inputs[0].bytes, stream);
  if (s != RECAP_SUCCESS) return s;
  size_t n = grad_outputs[0].bytes / sizeof(float);
  if (recap_test_add(grad_inputs[0].data, grad_outputs[0].data, grad_outputs[0].data, n, stream) !=
      cudaSuccess)
    return RECAP_ERROR_CUDA;
  return RECAP_SUCCESS;
}

/* The workload; with check_values, a successful run's results are checked too. */
static recap_status_t workload(outcome_t *o, bool check_values) {
  memset(o, 0, sizeof *o);
  cudaStream_t s = gpu_stream(), s2 = gpu_stream();
  void *a = NULL, *b = NULL, *c = NULL, *x = NULL, *gx = NULL;
  float *out = NULL, *noise = NULL;
  recap_generator_t gen = NULL;
  recap_graph_t g = NULL;
  recap_graphed_t h = NULL;
  recap_pool_id_t pool = {0, 0};
  bool replayed = false, graphed_ran = false;
  const recap_buffer_t *outs = NULL, *grads = NULL;

  STEP(o, recap_malloc(&a, 256 * KiB, s));
  STEP(o, recap_malloc(&b, 3 * MiB, s));
  STEP(o, recap_malloc(&c, 12 * MiB, s));
  if (a && STEP(o, recap_record_stream(a, s2)))
    STEP(o, recap_test_fill(a, N, 1.0f, s2) == cudaSuccess ? RECAP_SUCCESS : RECAP_ERROR_CUDA);
  if (a) STEP(o, recap_free(a));
  STEP(o, recap_generator_create(&gen, 11));

  /* The policy times the first replays (and uploads the executable before the first). */
  recap_update_policy_t policy = RECAP_UPDATE_POLICY_INIT;
  policy.max_slowdown = 0.5;
  policy.measure_replays = 2;
  if (STEP(o, recap_graph_create(&g, 0)) && STEP(o, recap_graph_update_policy_set(g, &policy)) &&
      STEP(o, recap_graph_capture_begin(g, NULL, s))) {
    void *tmp = NULL;
    if (STEP(o, recap_malloc(&tmp, 1 * MiB, s)))
      STEP(o, recap_test_fill(tmp, N, 2.0f, s) == cudaSuccess ? RECAP_SUCCESS : RECAP_ERROR_CUDA);
    if (STEP(o, recap_malloc((void **)&out, N * sizeof(float), s)) && tmp)
      STEP(o, recap_test_add_scalar(out, tmp, N, 3.0f, s) == cudaSuccess ? RECAP_SUCCESS
                                                                         : RECAP_ERROR_CUDA);
    if (gen && STEP(o, recap_malloc((void **)&noise, N * sizeof(float), s)))
      STEP(o, recap_rng_uniform(gen, noise, N, s));
    if (tmp) STEP(o, recap_free(tmp));
    if (STEP(o, recap_graph_capture_end(g))) STEP(o, recap_graph_pool(g, &pool));
  }
  for (int i = 0; i < 3; i++) replayed = STEP(o, recap_graph_replay(g, s)) || replayed;
  CUDA_OK(cudaStreamSynchronize(s));
  if (check_values && o->status == RECAP_SUCCESS) gpu_expect_all(out, N, 5.0f);
  if (out) STEP(o, recap_free(out));
  if (noise) STEP(o, recap_free(noise));
  out = noise = NULL;
  STEP(o, recap_graph_reset(g));

  static const int requires_grad[1] = {1};
  if (STEP(o, recap_malloc(&x, N * sizeof(float), s)) &&
      STEP(o, recap_malloc(&gx, N * sizeof(float), s))) {
    gpu_set(x, N, 1.0f, s);
    gpu_set(gx, N, 3.0f, s);
    recap_buffer_t in[1] = {{x, N * sizeof(float)}}, grad[1] = {{gx, N * sizeof(float)}};
    recap_callable_desc_t desc =
        one_input_callable(plus_one_forward, twice_backward, in, requires_grad);
    recap_graphed_options_t gopts = RECAP_GRAPHED_OPTIONS_INIT;
    gopts.warmup_iters = 1;
    if (STEP(o, recap_graphed_create(&h, &desc, 1, &gopts)) &&
        STEP(o, recap_graphed_forward(h, 1, in, s, &outs)) &&
        STEP(o, recap_graphed_backward(h, grad, s, &grads)))
      graphed_ran = true;
    CUDA_OK(cudaStreamSynchronize(s));
    if (check_values && graphed_ran && o->status == RECAP_SUCCESS) {
      gpu_expect_all(outs[0].data, N, 2.0f);
      gpu_expect_all(grads[0].data, N, 6.0f);
    }
  }
  (void)replayed;
  CUDA_OK(cudaDeviceSynchronize());
  STEP(o, recap_graphed_destroy(h));
  STEP(o, recap_graph_destroy(g));
  STEP(o, recap_generator_destroy(gen));
  STEP(o, recap_free(x));
  STEP(o, recap_free(gx));
  STEP(o, recap_free(b));
  STEP(o, recap_free(c));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamDestroy(s2));
  CUDA_OK(cudaDeviceSynchronize());
  STEP(o, recap_empty_cache());
  if (!recap_pool_is_default(pool)) gpu_expect_pool_gone(pool);
  return o->status;
}

/* Nothing left in recap, and (without a CUDA tool attached) the device's free memory back. */
static void expect_clean(size_t free_at_start, const char *what, uint64_t nth) {
  recap_memory_stats_t st = gpu_stats();
  if (st.allocation[RECAP_STAT_ALL].current || st.reserved_bytes[RECAP_STAT_ALL].current)
    fail_msg("%s call %llu: %lld blocks and %lld reserved bytes left", what,
             (unsigned long long)nth, (long long)st.allocation[RECAP_STAT_ALL].current,
             (long long)st.reserved_bytes[RECAP_STAT_ALL].current);
  if (recap_memory_check() != RECAP_SUCCESS)
    fail_msg("%s call %llu: checker: %s", what, (unsigned long long)nth, recap_last_error());
  /* The driver's own bookkeeping (streams, graphs, events) may hold a little: 4 MiB of slack,
   * less than the smallest pair of segments recap would leak. */
  if (free_at_start && gpu_free_bytes() + 4 * MiB < free_at_start)
    fail_msg("%s call %llu: the device has %zu bytes less free than at the start", what,
             (unsigned long long)nth, free_at_start - gpu_free_bytes());
}

/* The workload with the 1st, 2nd, ... call of kind failing, until it makes fewer calls. A failed
 * allocation, event or upload may be absorbed (a retry after emptying the cache, a stream wait
 * instead of an event, a measurement of the update policy given up); a failed capture,
 * instantiation or launch must reach the caller. */
static void sweep_kind(const char *kind, size_t free_at_start, bool must_reach, int *runs,
                       int *errors) {
  bool must_fail =
      strcmp(kind, "malloc") != 0 && strncmp(kind, "event", 5) != 0 && strcmp(kind, "upload") != 0;
  uint64_t nth;
  outcome_t o;
  for (nth = 1; nth <= 64; nth++) {
    uint64_t calls_before = recap__cuda_fault_calls(kind);
    assert_true(recap__cuda_fail_nth(kind, nth));
    recap_status_t s = workload(&o, true);
    bool reached = recap__cuda_fault_calls(kind) - calls_before >= nth;
    recap__cuda_fail_nth(kind, 0);
    if (!reached) break;
    (*runs)++;
    if (s != RECAP_SUCCESS) {
      (*errors)++;
      if (!o.message[0])
        fail_msg("%s call %llu: %s failed with %s and no message", kind, (unsigned long long)nth,
                 o.where, recap_status_name(s));
    } else if (must_fail) {
      fail_msg("%s call %llu failed, yet the workload reported success", kind,
               (unsigned long long)nth);
    }
    CUDA_OK(cudaDeviceSynchronize());
    expect_clean(free_at_start, kind, nth);
  }
  print_message("%s: %llu calls failed in turn\n", kind, (unsigned long long)(nth - 1));
  if (nth == 1 && must_reach) fail_msg("the workload makes no %s call", kind);
}

#endif /* RECAP_FAULT_INJECTION */

RECAP_TEST(every_cuda_call_kind_failing_once) {
#ifndef RECAP_FAULT_INJECTION
  print_message("skipped: the CUDA layer injects faults in Debug builds only\n");
  skip();
#else
  gpu_begin();
  int runs = 0, errors = 0;
  /* Event creation first, in a process that has made no event yet: the allocator keeps the
   * events it made for reuse, so after one run of the workload it creates none. */
  sweep_kind("event", 0, false, &runs, &errors);
  /* One clean run: the workload is right, and its lazy setup (module loads, the side stream,
   * cached events) is out of the way of the free-memory measurements. */
  outcome_t o;
  if (workload(&o, true) != RECAP_SUCCESS)
    fail_msg("the workload fails without faults at %s: %s", o.where, o.message);
  CUDA_OK(cudaDeviceSynchronize());
  size_t free_at_start = gpu_free_memory_checks() ? gpu_free_bytes() : 0;
  static const char *const kinds[] = {"malloc",      "event_record", "capture_begin", "capture_end",
                                      "instantiate", "launch",       "upload"};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    sweep_kind(kinds[k], free_at_start, true, &runs, &errors);
  print_message("%d runs with one CUDA call failing, %d ended in a clean error\n", runs, errors);
#endif
}

RECAP_TEST(fault_from_the_environment) {
  const char *env = getenv("RECAP_FAIL");
#ifndef RECAP_FAULT_INJECTION
  (void)env;
  print_message("skipped: the CUDA layer injects faults in Debug builds only\n");
  skip();
#else
  if (!env || strcmp(env, "instantiate:1") != 0) {
    print_message("skipped: run with RECAP_FAIL=instantiate:1 (ctest does)\n");
    skip();
  }
  gpu_begin();
  outcome_t o;
  recap_status_t s = workload(&o, false);
  EXPECT_STATUS(s, RECAP_ERROR_CUDA);
  if (!strstr(o.message, "cudaGraphInstantiateWithFlags") || !strstr(o.message, "RECAP_FAIL"))
    fail_msg("the message does not name the call and RECAP_FAIL: %s", o.message);
  CUDA_OK(cudaDeviceSynchronize());
  expect_clean(0, "instantiate", 1);
#endif
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_million_replays_of_two_graphs_sharing_a_pool),
    cmocka_unit_test(every_cuda_call_kind_failing_once),
    cmocka_unit_test(fault_from_the_environment),
};
RECAP_TEST_MAIN(tests)
