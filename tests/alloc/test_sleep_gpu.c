/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sleep_gpu.c — pools that sleep and wake (recap/sleep.h) on a real device, with the MLP
 * of examples/mlp (mlp_model.h) training on VMM segments (the option expandable_segments):
 *
 *  - OFFLOAD of the whole allocator halfway through training (the whole-step graph, and the
 *    graphed callables with their optimizer graph): cudaMemGetInfo gains at least 99% of what
 *    the pools reserve, replays are refused and launch nothing, another allocation takes the
 *    memory given back (a wake then fails for memory and leaves everything asleep), and after
 *    the wake training goes on with no recapture: losses and parameters bit-identical to a run
 *    that never slept;
 *  - DISCARD of the whole-step graph's own pool (its blocks are temporaries every replay writes
 *    before it reads them): after the wake the replays recompute them, bit-identical again.
 *
 * Without a GPU the program skips.
 */
#include "gpu_util.h"
#include "mlp_model.h"
#include "memory_util.h"

enum { STEPS = 40, STEPS_UNDER_TOOL = 6 };

/* Steps per run: fewer under a CUDA tool (compute-sanitizer's racecheck makes each cuBLAS call
 * take seconds), with the sleep halfway either way. */
static int steps(void) { return gpu_under_tool() ? STEPS_UNDER_TOOL : STEPS; }

#define MLP_OK(expr) RECAP_TEST_OK_OR_TELL(expr, #expr, mlp_error())

/* What one training run leaves: the loss of every step and the final parameters. */
typedef struct outcome {
  float losses[STEPS];
  float *params;
  size_t flat;
} outcome_t;

/* What a pause halfway does, with the trainer's graphs at hand. */
typedef struct pause_ctx {
  mlp_model_t *model;
  mlp_graph_entry_t graphs[8];
  int graph_count;
} pause_ctx_t;
typedef void (*pause_fn)(pause_ctx_t *ctx);

static recap_pool_id_t pool_of_graph(recap_graph_t g) {
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  return pool;
}

/* Train steps() steps of `way`, calling pause (when not NULL) after half of them. */
static void train(mlp_way_t way, pause_fn pause, outcome_t *out) {
  gpu_begin();
  OK(recap_option_set("expandable_segments", "1"));
  cudaStream_t stream = gpu_stream();
  mlp_config_t config = MLP_CONFIG_INIT;
  config.loss_capacity = STEPS;
  mlp_dataset_t data, test;
  if (mlp_spirals(config.classes, 500, 0.2f, 0.2, config.seed, &data, &test) != 0)
    fail_msg("out of host memory");
  const size_t batch_bytes = mlp_batch_bytes(config.batch, data.dim);
  unsigned char *schedule = NULL;
  CUDA_OK(cudaHostAlloc((void **)&schedule, (size_t)STEPS * batch_bytes, cudaHostAllocDefault));
  mlp_schedule_fill(&data, config.batch, STEPS, config.seed, schedule);
  mlp_model_t *model;
  MLP_OK(mlp_model_create(&model, &config, stream));
  mlp_trainer_t *trainer;
  MLP_OK(mlp_trainer_create(&trainer, model, way, MLP_SPLIT_MODEL));
  for (int s = 0; s < steps(); s++) {
    if (s == steps() / 2 && pause) {
      CUDA_OK(cudaStreamSynchronize(stream));
      pause_ctx_t ctx = {.model = model};
      MLP_OK(mlp_trainer_graphs(trainer, ctx.graphs, 8, &ctx.graph_count));
      assert_true(ctx.graph_count > 0);
      pause(&ctx);
    }
    MLP_OK(mlp_trainer_step(trainer, schedule + (size_t)s * batch_bytes));
  }
  MLP_OK(mlp_model_read_losses(model, out->losses, steps()));
  out->flat = mlp_model_flat_count(model);
  out->params = malloc(out->flat * sizeof(float));
  if (!out->params) fail_msg("out of host memory");
  MLP_OK(mlp_model_read_parameters(model, out->params));
  mlp_trainer_destroy(trainer);
  mlp_model_destroy(model);
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFreeHost(schedule));
  mlp_dataset_free(&data);
  mlp_dataset_free(&test);
  OK(recap_empty_cache());
  gpu_check_allocator();
  OK(recap_option_set("expandable_segments", "0"));
}

static void expect_same_outcome(const outcome_t *a, const outcome_t *b) {
  for (int s = 0; s < steps(); s++)
    if (memcmp(&a->losses[s], &b->losses[s], sizeof(float)) != 0)
      fail_msg("the loss of step %d differs: %.9g after the sleep, %.9g without", s + 1,
               (double)a->losses[s], (double)b->losses[s]);
  assert_int_equal(a->flat, b->flat);
  assert_memory_equal(a->params, b->params, a->flat * sizeof(float));
}

/* Touch n bytes at p: fill them and read a few back. */
static void use_device_memory(void *p, size_t n) {
  CUDA_OK(cudaMemset(p, 0x5a, n));
  unsigned char ends[2] = {0, 0};
  CUDA_OK(cudaMemcpy(&ends[0], p, 1, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&ends[1], (unsigned char *)p + n - 1, 1, cudaMemcpyDeviceToHost));
  assert_int_equal(ends[0], 0x5a);
  assert_int_equal(ends[1], 0x5a);
}

/* Every pool to sleep with OFFLOAD; memory back to the device; another allocation in it; the
 * wake refused while that holds it, then done. */
static void pause_offload_everything(pause_ctx_t *ctx) {
  const recap_pool_id_t default_pool = {0, 0};
  /* Blocks waiting on events become free and free tails go first, so that the statistics below
   * are what the sleep keeps. */
  OK(recap_empty_cache());
  recap_memory_stats_t st = gpu_stats();
  int64_t reserved = st.reserved_bytes[RECAP_STAT_ALL].current;
  assert_true(reserved > 0);
  size_t free_awake = gpu_free_bytes();
  OK(recap_sleep(RECAP_SLEEP_OFFLOAD));
  gpu_check_allocator();
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_true(pool_memory(default_pool).sleeping_bytes > 0);
  for (int i = 0; i < ctx->graph_count; i++) {
    recap_pool_id_t pool = pool_of_graph(ctx->graphs[i].graph);
    assert_int_equal(state_of_pool(pool), RECAP_POOL_ASLEEP_OFFLOADED);
    assert_int_equal(pool_memory(pool).sleeping_bytes, pool_memory(pool).reserved_bytes);
  }
  /* Statistics do not move: the pools still reserve what the wake takes back. */
  recap_memory_stats_t asleep_st = gpu_stats();
  assert_memory_equal(&asleep_st, &st, sizeof st);
  size_t free_asleep = gpu_free_bytes();
  print_message("asleep: %lld bytes of pools given back, cudaMemGetInfo gained %zu\n",
                (long long)reserved, free_asleep - free_awake);
  if (gpu_free_memory_checks())
    assert_true((double)(free_asleep - free_awake) >= 0.99 * (double)reserved);

  /* Replays are refused and launch nothing. */
  cudaStream_t s = mlp_model_stream(ctx->model);
  for (int i = 0; i < ctx->graph_count; i++) {
    EXPECT_STATUS(recap_graph_replay(ctx->graphs[i].graph, s), RECAP_ERROR_POOL_ASLEEP);
    EXPECT_MESSAGE("nothing was launched");
  }
  void *p = (void *)1;
  EXPECT_STATUS(recap_malloc(&p, 4096, s), RECAP_ERROR_POOL_ASLEEP);
  assert_null(p);

  /* Another user takes the device's memory but half of what the pools gave back: the pools
   * cannot all come back while it holds it. */
  const size_t unit = (size_t)2 << 20;
  size_t take = free_asleep > (size_t)reserved / 2 + unit
                    ? (free_asleep - (size_t)reserved / 2) / unit * unit
                    : 0;
  void *other = NULL;
  bool filled = take > 0 && gpu_free_memory_checks() && cudaMalloc(&other, take) == cudaSuccess;
  if (!filled) {
    (void)cudaGetLastError();
    take = (free_asleep - free_awake) / 2 / unit * unit;
    if (take == 0) take = unit;
    CUDA_OK(cudaMalloc(&other, take));
    print_message("the device could not be filled: %zu bytes taken instead\n", take);
  }
  use_device_memory(other, take);
  if (filled) {
    EXPECT_STATUS(recap_wake(), RECAP_ERROR_OUT_OF_MEMORY);
    EXPECT_MESSAGE("out of device memory on device 0");
    EXPECT_MESSAGE("the pool stays asleep");
    gpu_check_allocator();
  }
  CUDA_OK(cudaFree(other));
  OK(recap_wake());
  assert_int_equal(state_of_pool(default_pool), RECAP_POOL_AWAKE);
  for (int i = 0; i < ctx->graph_count; i++)
    assert_int_equal(state_of_pool(pool_of_graph(ctx->graphs[i].graph)), RECAP_POOL_AWAKE);
  recap_memory_stats_t woken = gpu_stats();
  assert_memory_equal(&woken, &st, sizeof st);
  gpu_check_allocator();
}

/* The whole-step graph's own pool to sleep with DISCARD: its blocks are the step's temporaries,
 * all freed inside the capture. */
static void pause_discard_the_step_pool(pause_ctx_t *ctx) {
  assert_int_equal(ctx->graph_count, 1);
  recap_pool_id_t pool = pool_of_graph(ctx->graphs[0].graph);
  recap_pool_memory_t before = pool_memory(pool);
  assert_int_equal(before.allocated_bytes, 0);
  assert_true(before.vmm_segments > 0);
  size_t free_awake = gpu_free_bytes();
  OK(recap_pool_sleep(pool, RECAP_SLEEP_DISCARD));
  assert_int_equal(state_of_pool(pool), RECAP_POOL_ASLEEP_DISCARDED);
  recap_pool_memory_t asleep = pool_memory(pool);
  assert_int_equal(asleep.sleeping_bytes, before.reserved_bytes);
  assert_int_equal(asleep.offloaded_bytes, 0);
  if (gpu_free_memory_checks())
    assert_true((double)(gpu_free_bytes() - free_awake) >= 0.99 * (double)before.reserved_bytes);
  EXPECT_STATUS(recap_graph_replay(ctx->graphs[0].graph, mlp_model_stream(ctx->model)),
                RECAP_ERROR_POOL_ASLEEP);
  EXPECT_MESSAGE("is asleep (discarded)");
  OK(recap_pool_wake(pool));
  assert_int_equal(state_of_pool(pool), RECAP_POOL_AWAKE);
  gpu_check_allocator();
}

static void check_way(mlp_way_t way, pause_fn pause) {
  outcome_t reference, slept;
  train(way, NULL, &reference);
  train(way, pause, &slept);
  expect_same_outcome(&slept, &reference);
  free(reference.params);
  free(slept.params);
}

RECAP_TEST(offload_the_whole_step) { check_way(MLP_WAY_WHOLE, pause_offload_everything); }

RECAP_TEST(offload_the_graphed_callables) { check_way(MLP_WAY_GRAPHED, pause_offload_everything); }

RECAP_TEST(discard_the_step_pool_and_recompute) {
  check_way(MLP_WAY_WHOLE, pause_discard_the_step_pool);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(offload_the_whole_step),
    cmocka_unit_test(offload_the_graphed_callables),
    cmocka_unit_test(discard_the_step_pool_and_recompute),
};
RECAP_TEST_MAIN(tests)
